"""Warm-starting variables from a checkpoint, with vocabulary remapping
(tf.compat.v1.train.warm_start and tf.compat.v1.train.VocabInfo), over init_from_checkpoint's
mechanism: each selected variable's initializer is replaced by one that assigns the checkpoint's
value, so run the initializers afterwards."""
from __future__ import annotations

import collections

import numpy as np

from actorflow.train.tf_checkpoint import load_checkpoint

__all__ = ["warm_start", "VocabInfo"]


class VocabInfo(collections.namedtuple("VocabInfo", ["new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab",
                                                     "old_vocab_size", "backup_initializer", "axis"])):
    """How to remap an embedding-like variable's rows from an old vocabulary file to a new one
    (tf.compat.v1.train.VocabInfo): a row of a word in both takes the old row; a new word, and each
    of the `num_oov_buckets` extra rows, takes `backup_initializer`'s value (zeros by default).
    Vocabulary files have one word a line; `*_vocab_size` -1 means the whole file. Only axis=0."""

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size=-1,
                backup_initializer=None, axis=0):
        if axis != 0:
            raise NotImplementedError(f"VocabInfo: only axis=0 is supported, got {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size,
                               backup_initializer, axis)


def _read_vocab(path, size, what):
    from actorflow import gfile
    with gfile.GFile(path, "r") as f:
        words = [line.rstrip("\n") for line in f]
    if size is not None and size >= 0:
        if size > len(words):
            raise ValueError(f"warm_start: {what} vocab_size {size} exceeds the {len(words)} words of {path}")
        words = words[:size]
    return words


def _selected(vars_to_warm_start):
    from actorflow.graph.graph import GraphKeys, get_collection
    from actorflow.graph.variables import Variable
    if vars_to_warm_start is None:
        return []
    if isinstance(vars_to_warm_start, str):
        return get_collection(GraphKeys.TRAINABLE_VARIABLES, scope=vars_to_warm_start)
    items = list(vars_to_warm_start)
    if all(isinstance(v, str) for v in items):
        out = []
        for rx in items:
            out += [v for v in get_collection(GraphKeys.GLOBAL_VARIABLES, scope=rx) if v not in out]
        return out
    if all(isinstance(v, Variable) for v in items):
        return items
    raise ValueError("warm_start: vars_to_warm_start must be a regex string, a list of regex strings, a list of "
                     f"Variables or None, got {vars_to_warm_start!r}")


def _install(v, value):
    from actorflow.graph.ops import state_ops
    g = v.graph
    with g.as_default(), g.name_scope(v.op.name + "/"), g.control_dependencies(None), g.colocate_with(v.op):
        v._initializer_op = state_ops.Assign(v._variable, value, validate_shape=True, use_locking=True,
                                             name="Assign_warm_start").op
        v._initial_value = value


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
               var_name_to_prev_var_name=None):
    """Makes the selected variables' initializers load the checkpoint's values
    (tf.compat.v1.train.warm_start). `vars_to_warm_start`: a regex matched against trainable
    variables' names, a list of regexes over all global variables, a list of Variables, or None.
    `var_name_to_prev_var_name` renames; `var_name_to_vocab_info` remaps rows (see VocabInfo).
    Every name in those two maps must be used, as in TF. PartitionedVariables are not supported."""
    from actorflow.graph.ops import math_ops
    from actorflow.graph.ops.constant import constant
    vocab_infos = dict(var_name_to_vocab_info or {})
    prev_names = dict(var_name_to_prev_var_name or {})
    reader = load_checkpoint(ckpt_to_initialize_from)
    shapes = reader.get_variable_to_shape_map()
    used_vocab, used_prev = set(), set()
    for v in _selected(vars_to_warm_start):
        name = v.op.name
        prev = prev_names.get(name, name)
        if name in prev_names:
            used_prev.add(name)
        if prev not in shapes:
            raise ValueError(f"warm_start: tensor '{prev}' (for variable '{name}') is not in checkpoint "
                             f"{ckpt_to_initialize_from}")
        old = reader.get_tensor(prev)
        want = v.shape.as_list()
        dtype = v.dtype.base_dtype if hasattr(v.dtype, "base_dtype") else v.dtype
        info = vocab_infos.get(name)
        if info is None:
            if list(old.shape) != want:
                raise ValueError(f"warm_start: shape of variable {name} ({want}) doesn't match tensor {prev} "
                                 f"({list(old.shape)}) in the checkpoint")
            _install(v, constant(old.astype(dtype.as_numpy_dtype, copy=False), name="warm_start_value"))
            continue
        used_vocab.add(name)
        new_words = _read_vocab(info.new_vocab, info.new_vocab_size, "new")
        old_words = _read_vocab(info.old_vocab, info.old_vocab_size, "old")
        rows = len(new_words) + int(info.num_oov_buckets)
        if want[0] != rows or list(old.shape[1:]) != want[1:]:
            raise ValueError(f"warm_start: variable {name} has shape {want}, but its vocabulary gives {rows} rows "
                             f"of shape {list(old.shape[1:])}")
        old_row = {w: i for i, w in enumerate(old_words) if i < old.shape[0]}
        value = np.zeros(want, dtype.as_numpy_dtype)
        found = np.zeros([rows] + [1] * (len(want) - 1), bool)
        for i, w in enumerate(new_words):
            j = old_row.get(w)
            if j is not None:
                value[i], found[i] = old[j], True
        remapped = constant(value, name="warm_start_value")
        if info.backup_initializer is not None and not found.all():
            backup = info.backup_initializer(want, dtype=dtype)
            remapped = math_ops.where(constant(np.broadcast_to(found, want)), remapped, backup)
        _install(v, remapped)
    unused = (set(vocab_infos) - used_vocab) | (set(prev_names) - used_prev)
    if unused:
        raise ValueError(f"warm_start: var_name_to_vocab_info / var_name_to_prev_var_name name variables that "
                         f"were not warm-started: {sorted(unused)}")
