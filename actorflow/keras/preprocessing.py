"""af.keras.preprocessing: `sequence.pad_sequences` (tf.keras.preprocessing.sequence), the
companion of the imdb data set."""
from __future__ import annotations

import types

import numpy as np

__all__ = ["sequence", "pad_sequences"]


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """Pads (or truncates) each sequence to `maxlen` (the longest by default), at the start
    ("pre") or the end ("post"), into one [n, maxlen] array (Keras's pad_sequences)."""
    if padding not in ("pre", "post"):
        raise ValueError(f'Padding type "{padding}" not understood')
    if truncating not in ("pre", "post"):
        raise ValueError(f'Truncating type "{truncating}" not understood')
    seqs = [list(s) for s in sequences]
    if maxlen is None:
        maxlen = max((len(s) for s in seqs), default=0)
    out = np.full((len(seqs), maxlen), value, dtype=dtype)
    for i, s in enumerate(seqs):
        if not s or maxlen == 0:
            continue
        trunc = s[-maxlen:] if truncating == "pre" else s[:maxlen]
        if padding == "post":
            out[i, :len(trunc)] = trunc
        else:
            out[i, -len(trunc):] = trunc
    return out


sequence = types.SimpleNamespace(pad_sequences=pad_sequences)
