"""dennybritz/cnn-text-classification-tf as its README runs it: train.py, then eval.py --eval_train on
the checkpoint directory that training wrote (runs/<timestamp>/checkpoints). eval.py restores the saved
VocabularyProcessor, imports the meta graph, restores the latest checkpoint, finds its tensors by name
(input_x, dropout_keep_prob, output/predictions) and prints its accuracy on all 10,662 sentences.

Each script runs in its own process (both define the same tf.flags), with this run's environment.
"""
import glob
import subprocess
import sys

subprocess.run([sys.executable, "train.py"], check=True)
checkpoints = sorted(glob.glob("runs/*/checkpoints"))
if not checkpoints:
    raise SystemExit("train.py wrote no runs/*/checkpoints directory")
subprocess.run([sys.executable, "eval.py", "--eval_train", f"--checkpoint_dir={checkpoints[-1]}"], check=True)
