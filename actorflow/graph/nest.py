"""Nested structures of tensors: flatten and rebuild (tf.nest)."""
from __future__ import annotations

from collections.abc import Mapping


def _is_seq(x) -> bool:
    return isinstance(x, (list, tuple, Mapping))


def is_nested(x) -> bool:
    """Whether `x` is a structure (list, tuple, namedtuple, dict) rather than a leaf (tf.nest.is_nested)."""
    return _is_seq(x)


is_sequence = is_nested      # TF 1.x's name (tf.contrib.framework.nest.is_sequence, tf.nest in TF 1.13-)


def flatten(structure) -> list:
    """Leaves of a nested list/tuple/namedtuple/dict, dicts in sorted key order (tf.nest.flatten)."""
    if isinstance(structure, Mapping):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [leaf for x in structure for leaf in flatten(x)]
    return [structure]


def pack_sequence_as(structure, flat):
    """Rebuilds `structure`'s shape with the leaves in `flat` (tf.nest.pack_sequence_as)."""
    flat = list(flat)
    pos = [0]

    def build(s):
        if isinstance(s, Mapping):
            vals = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, vals[k]) for k in s) if type(s) is not dict else {k: vals[k] for k in s}
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(x) for x in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(x) for x in s)
        v = flat[pos[0]]
        pos[0] += 1
        return v

    out = build(structure)
    if pos[0] != len(flat):
        raise ValueError(f"Structure has {pos[0]} leaves but {len(flat)} values were given")
    return out


def map_structure(fn, *structures):
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flats)])


def assert_same_structure(a, b) -> None:
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        raise ValueError(f"The two structures don't have the same number of elements: {len(fa)} vs {len(fb)}")
