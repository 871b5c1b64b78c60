"""TensorProto conversion (tf.make_tensor_proto, tf.make_ndarray).

The TensorProto is TensorFlow's own message, TensorBoard's generated class (actorflow/protos.py):
the one GraphDef Const nodes and summaries already carry, so a proto made here goes into a GraphDef
or a tensor summary as it is. Needs the `summary` extra (the tensorboard package).
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.protos import require

__all__ = ["make_tensor_proto", "make_ndarray"]


def _util():
    return require("tensorboard.util.tensor_util")


def make_tensor_proto(values, dtype=None, shape=None, verify_shape=False, allow_broadcast=False):
    """A TensorProto holding `values` (a Python or numpy value) as `dtype`, reshaped to `shape`
    (tf.make_tensor_proto). One value fills a given shape; `verify_shape` requires the values to
    have that shape, `allow_broadcast` broadcasts them to it. A graph Tensor is a TypeError, as in TF
    (its value exists only when a session runs it)."""
    from actorflow.graph.graph import Tensor
    if isinstance(values, Tensor):
        raise TypeError(f"make_tensor_proto: cannot make a TensorProto of the graph tensor {values.name}; fetch "
                        "its value first")
    np_dtype = None
    if dtype is not None:
        dt = dtypes.as_dtype(dtype)
        np_dtype = np.object_ if dt is dtypes.string else dt.as_numpy_dtype
    if allow_broadcast and shape is not None:
        if np.size(values) != 1:     # one value fills any shape already
            values = np.broadcast_to(np.asarray(values, dtype=np_dtype), tuple(shape))
        verify_shape = False
    proto = _util().make_tensor_proto(values, dtype=np_dtype, shape=None if shape is None else list(shape),
                                      verify_shape=verify_shape)
    if len(proto.half_val) > 1:
        # TF writes several halves as raw little-endian bytes, as it does every other numeric dtype.
        raw = np.asarray(proto.half_val, np.uint16).astype("<u2").tobytes()
        del proto.half_val[:]
        proto.tensor_content = raw
    return proto


def make_ndarray(tensor):
    """The numpy array a TensorProto holds (tf.make_ndarray); strings come back as bytes objects."""
    if not hasattr(tensor, "tensor_shape") or not hasattr(tensor, "dtype"):
        raise TypeError(f"make_ndarray: expected a TensorProto, got {type(tensor).__name__}")
    return _util().make_ndarray(tensor)
