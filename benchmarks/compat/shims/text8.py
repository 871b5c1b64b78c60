"""A generated stand-in for text8 (word2vec's corpus), written as `text8.zip` like the download.

The words follow a Zipf law over a fixed vocabulary, and each word is drawn from a topic that changes
every few dozen words, so that skip-gram training has real co-occurrence structure to learn. The text
is the same for every run (a fixed seed), so both libraries of a comparison train on identical data.
With `every_word` the text ends with each vocabulary word once, for programs that keep a vocabulary
of a fixed size (handson-ml's chapter 14 keeps 50,000 words).
"""
import zipfile

import numpy as np


def make_text8_zip(path, n_words=400_000, vocab=6000, topics=40, seed=0, every_word=False):
    rng = np.random.RandomState(seed)
    # word2vec programs look up a few real words (e.g. 'five', 'of', 'american'): they lead the ranks.
    real = ["the", "of", "and", "one", "in", "a", "to", "zero", "nine", "two", "is", "as", "eight", "for", "s",
            "five", "three", "was", "by", "that", "four", "six", "seven", "with", "on", "are", "it", "from",
            "or", "his", "an", "be", "this", "which", "at", "he", "also", "not", "have", "were", "has", "but",
            "going", "hardware", "american", "britain", "computer", "system", "war", "music", "king", "queen"]
    words = np.array(real + [f"w{i}" for i in range(vocab - len(real))])
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.05
    topic_vocab = [rng.choice(vocab, size=150, replace=False) for _ in range(topics)]
    out = []
    while len(out) < n_words:
        t = topic_vocab[rng.randint(topics)]
        span = rng.randint(20, 60)
        common = rng.choice(vocab, size=span, p=zipf / zipf.sum())
        local = rng.choice(t, size=span)
        pick = rng.rand(span) < 0.5
        out.extend(np.where(pick, local, common).tolist())
    out = out[:n_words]
    if every_word:      # each word at least once: a program that keeps the N most common finds N
        out.extend(range(vocab))
    text = " ".join(words[np.asarray(out)])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("text8", text)
    return path
