"""Local stand-ins for the data files the tensorflow_cookbook's programs download when the file is
missing (each program checks for it first, so the stand-in is used as the download would be).

- `birth_weight.csv`: the repository's own birthweight.dat (a `files` entry), converted to CSV the
  way the programs convert the download (a header row, then the rows as floats).
- `temp/shakespeare.txt`: a generated text over a fixed vocabulary whose frequent words include the
  ones the LSTM programs prime their samples with ('thou art more', 'to be or not to', 'wherefore art
  thou'); words follow a Zipf law and come in topic spans, as shims/text8.py does, with a fixed seed
  so that both libraries of a comparison train on the same text.
"""
import csv
from pathlib import Path

import numpy as np


def make_birth_weight_csv(path):
    path = Path(path)
    dat = path.parent / "birthweight.dat"
    if not dat.exists():
        raise FileNotFoundError(f"{dat}: list the repository's birthweight.dat in the program's `files`")
    lines = [ln for ln in dat.read_text().splitlines() if ln.strip()]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(lines[0].split("\t"))
        w.writerows([[float(x) for x in ln.split("\t") if x] for ln in lines[1:]])
    return path


def make_shakespeare_txt(path, n_words=30_000, vocab=900, topics=12, seed=0):
    rng = np.random.RandomState(seed)
    real = ["the", "and", "to", "of", "i", "a", "you", "my", "that", "in", "is", "not", "with", "me", "it", "be",
            "for", "your", "his", "this", "but", "he", "have", "as", "thou", "so", "him", "will", "what", "thy",
            "all", "her", "no", "by", "do", "shall", "if", "are", "we", "thee", "our", "lord", "on", "king", "good",
            "now", "sir", "from", "o", "come", "at", "they", "or", "let", "more", "art", "wherefore", "love", "hath"]
    words = np.array(real + [f"w{i}" for i in range(vocab - len(real))])
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.05
    topic_vocab = [rng.choice(vocab, size=80, replace=False) for _ in range(topics)]
    out = []
    while len(out) < n_words:
        t = topic_vocab[rng.randint(topics)]
        span = rng.randint(20, 60)
        common = rng.choice(vocab, size=span, p=zipf / zipf.sum())
        out.extend(np.where(rng.rand(span) < 0.5, rng.choice(t, size=span), common).tolist())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(" ".join(words[np.asarray(out[:n_words])]))
    return path


def make_mnist_idx(path):
    """`path` (a directory) holding MNIST's four unzipped IDX files, written from the digits stand-in
    (shims/input_data.py: its training and test images as 0-255 bytes, their labels as int8), so that
    programs that download MNIST and parse the IDX files themselves (Stanford CS20's utils.read_mnist)
    find them there and skip the download. 7,500 training and 297 test images."""
    import struct

    import input_data
    path.mkdir(parents=True, exist_ok=True)
    ds = input_data.read_data_sets(one_hot=False, validation_size=0)
    for name, d in (("train", ds.train), ("t10k", ds.test)):
        images = np.round(d.images.reshape(-1, 28, 28) * 255).astype(np.uint8)
        with open(path / f"{name}-images-idx3-ubyte", "wb") as f:
            f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + images.tobytes())
        with open(path / f"{name}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 2049, len(images)) + d.labels.astype(np.int8).tobytes())


MAKERS = {"birth_weight.csv": make_birth_weight_csv, "temp/shakespeare.txt": make_shakespeare_txt,
          "data/mnist": make_mnist_idx}
