"""tensorflow/nmt's README run (corpus driver): `python -m nmt.nmt` trains an attention model
(scaled Luong, 2 layers) Vietnamese to English on the repository's 100-sentence test data, evaluating
and decoding as the README shows; prints the final dev perplexity. The steps are few (200) and the
model small (64 units) so that it runs in a minute. TensorFlow 2.21 has no tf.contrib.seq2seq: only
actorflow runs it.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import tensorflow as tf

assert tf  # the library under test; `python -m nmt.nmt` imports it in its own process

os.makedirs("nmt/testdata", exist_ok=True)
for name in glob.glob("iwslt15.*"):
    shutil.move(name, os.path.join("nmt/testdata", name))
data = "nmt/testdata/iwslt15"
r = subprocess.run([sys.executable, "-m", "nmt.nmt", "--src=vi", "--tgt=en", f"--vocab_prefix={data}.vocab.100",
                    f"--train_prefix={data}.tst2013.100", f"--dev_prefix={data}.tst2013.100",
                    f"--test_prefix={data}.tst2013.100", "--out_dir=nmt_model", "--num_train_steps=200",
                    "--steps_per_stats=50", "--num_layers=2", "--num_units=64", "--dropout=0.2", "--metrics=bleu",
                    "--attention=scaled_luong"], capture_output=True, text=True)
out = r.stdout + r.stderr
if r.returncode != 0:
    sys.stderr.write(out[-6000:])
    raise SystemExit(f"nmt.nmt failed ({r.returncode})")
final = [line for line in out.splitlines() if line.startswith("# Final")][-1]
print(final)
print("translations:", sum(1 for _ in open("nmt_model/output_test")))
print("dev ppl", re.search(r"dev ppl ([\d.]+)", final).group(1))
