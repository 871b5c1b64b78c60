"""sherjilozair/char-rnn-tensorflow as its README runs it: `python train.py` on the bundled
tinyshakespeare, then `python sample.py`. The text is cut to its first 50,000 characters and training
to one epoch (20 batches of 50 sequences of 50 characters), the same for both libraries; the figure is
the last training loss. model.py's sampling gets numpy 2's spelling of its one draw. The model (rnn_decoder of legacy_seq2seq over a 2-layer LSTM) needs
tf.contrib, which TensorFlow 2.21 lacks: actorflow runs it alone.
"""
import os
import shutil
import subprocess
import sys

import tensorflow as tf

assert tf  # the library under test; train.py and sample.py import it themselves

os.makedirs("data/tinyshakespeare", exist_ok=True)
with open("input.txt", encoding="utf-8") as f:
    text = f.read()[:50000]
with open("data/tinyshakespeare/input.txt", "w", encoding="utf-8") as f:
    f.write(text)
os.remove("input.txt")
# numpy 2: int() of a one-element array is an error (model.py's weighted_pick); the same draw as a scalar
with open("model.py", encoding="utf-8") as f:
    model_py = f.read()
with open("model.py", "w", encoding="utf-8") as f:
    f.write(model_py.replace("np.random.rand(1)*s", "np.random.rand()*s"))
for argv in (["train.py", "--num_epochs", "1", "--save_every", "1000"], ["sample.py", "-n", "200"]):
    r = subprocess.run([sys.executable] + argv, capture_output=True, text=True)   # two processes, as the README
    print(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-6000:])
        raise SystemExit(f"{argv[0]} failed ({r.returncode})")
shutil.rmtree("save", ignore_errors=True)
