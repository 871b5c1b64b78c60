"""XLNet's GPU pretraining as its README runs it (corpus driver: zihangdai/xlnet): data_utils.py turns
text into TFRecords with a SentencePiece model, then train_gpu.py trains on them (permutation language
modeling with two-stream attention and Transformer-XL memories, a session loop over tf.data), saving
checkpoints; prints the last reported loss.

The published SentencePiece model is a download, so one is trained on the repository's README with the
sentencepiece package (XLNet's special symbols at XLNet's ids); the model is small (2 layers of 32) and
the run 20 steps. data_utils.py writes numpy booleans into an Int64List, which protobuf 5 refuses with
numpy 2 (in TensorFlow 2.21 too): the driver runs a copy whose _int64_feature passes ints. `bi_data=False`: with bi_data, modeling.py asserts `tf.shape(x)[1] % 2 == 0`,
which a graph-mode tensor comparison makes False in TF 1.x as here. TensorFlow 2.21 has no tf.contrib,
which XLNet's modules use: only actorflow runs it.
"""
import os
import re
import subprocess
import sys

import sentencepiece as spm
import tensorflow as tf

assert tf  # the library under test; XLNet's scripts import it in their own processes

text = [line.strip() for line in open("README.md", encoding="utf-8") if line.strip()]
os.makedirs("txt", exist_ok=True)
with open("txt/doc.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(text * 2) + "\n")
spm.SentencePieceTrainer.train(input="txt/doc.txt", model_prefix="spiece", vocab_size=400,
                               user_defined_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"],
                               unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)

src = open("data_utils.py", encoding="utf-8").read()
fixed = src.replace("tf.train.Int64List(value=values)", "tf.train.Int64List(value=[int(v) for v in values])")
assert fixed != src, "data_utils.py's _int64_feature changed: update the driver"
with open("data_utils_np2.py", "w", encoding="utf-8") as f:
    f.write(fixed)
common = ["--seq_len=64", "--reuse_len=32", "--bi_data=False", "--mask_alpha=6", "--mask_beta=1", "--num_predict=10",
          "--uncased=True"]
r = subprocess.run([sys.executable, "data_utils_np2.py", "--bsz_per_host=4", "--num_core_per_host=1",
                    "--input_glob=txt/*.txt", "--save_dir=data", "--num_passes=2", "--sp_path=spiece.model"] + common,
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.stderr.write((r.stdout + r.stderr)[-6000:])
    raise SystemExit(f"data_utils.py failed ({r.returncode})")

r = subprocess.run([sys.executable, "train_gpu.py", "--record_info_dir=data/tfrecords", "--train_batch_size=4",
                    "--mem_len=48", "--perm_size=32", "--n_layer=2", "--d_model=32", "--d_embed=32", "--n_head=2",
                    "--d_head=16", "--d_inner=64", "--untie_r=True", "--model_dir=model", "--train_steps=20",
                    "--iterations=5", "--save_steps=10", "--num_core_per_host=1", "--learning_rate=1e-3"] + common,
                   capture_output=True, text=True)
out = r.stdout + r.stderr
if r.returncode != 0:
    sys.stderr.write(out[-6000:])
    raise SystemExit(f"train_gpu.py failed ({r.returncode})")
losses = re.findall(r"\| loss ([\d.]+)", out)
print("losses", losses)
print("checkpoint:", os.path.exists("model/checkpoint"))
print(f"final loss {losses[-1]}")
