"""hzy46/Char-RNN-TensorFlow's README training run: `python train.py --input_file data/shakespeare.txt
--name shakespeare --num_steps 50 --num_seqs 32 --learning_rate 0.01 --max_steps N`, in its own process
as the README runs it, with 60 training steps instead of 20,000. (Its sample.py is Python 2: it calls
str.decode on a flag, on both sides.) Its model is a dynamic_rnn of LSTM cells in DropoutWrapper (keep 0.5 in training):
the loop that actorflow compiles with its dropout draws. The figure is the last logged loss.
"""
import os
import shutil
import subprocess
import sys

import tensorflow as tf

assert tf  # the library under test; train.py and sample.py import it themselves

os.makedirs("data", exist_ok=True)
shutil.move("temp/shakespeare.txt", "data/shakespeare.txt")   # (the corpus's generated stand-in)
runs = (["train.py", "--input_file", "data/shakespeare.txt", "--name", "shakespeare", "--num_steps", "50",
         "--num_seqs", "32", "--learning_rate", "0.01", "--max_steps", "60"],)
for argv in runs:
    r = subprocess.run([sys.executable] + argv, capture_output=True, text=True)
    print(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-6000:])
        raise SystemExit(f"{argv[0]} failed ({r.returncode})")
shutil.rmtree("model", ignore_errors=True)
