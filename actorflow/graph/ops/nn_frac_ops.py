"""Fractional pooling (tf.compat.v1.nn.fractional_max_pool / fractional_avg_pool). Op types:
FractionalMaxPool, FractionalAvgPool (stateful: they draw their pooling sequences), and their
gradients FractionalMaxPoolGrad, FractionalAvgPoolGrad, which take the sequences the forward op
returned (kernels: kernels/cpu/fractional_pool.py)."""
from __future__ import annotations

import collections

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops
from actorflow.graph.ops.nn_ops import _check_float, _with_rank
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["fractional_max_pool", "fractional_avg_pool"]

_Output = collections.namedtuple("FractionalPool", ["output", "row_pooling_sequence", "col_pooling_sequence"])


def _ratio(attrs):
    r = [float(v) for v in attrs.get("pooling_ratio", ())]
    if len(r) != 4 or r[0] != 1.0 or r[3] != 1.0 or min(r[1:3]) < 1.0:
        raise InferenceError(f"pooling_ratio must be [1.0, >= 1, >= 1, 1.0] (batch and channel pooling are not "
                             f"supported), got {r}")
    return r


def _infer_forward(is_avg):
    def infer(inputs, attrs):
        (x,) = inputs
        if is_avg:
            _check_float(x, "value")
        elif not x.dtype.is_floating and x.dtype not in (dtypes.int32, dtypes.int64):
            raise InferenceError(f"value must be float, int32 or int64, got {x.dtype.name}")
        r = _ratio(attrs)
        s = _with_rank(x.shape, 4, "value")
        out = [None if d is None else int(d / q) for d, q in zip(s.dims, r)]
        rows = None if out[1] is None else out[1] + 1
        cols = None if out[2] is None else out[2] + 1
        return [(x.dtype, TensorShape(out)), (dtypes.int64, TensorShape([rows])), (dtypes.int64, TensorShape([cols]))]
    return infer


def _infer_max_grad(inputs, attrs):
    x, y, g, rows, cols = inputs
    if x.dtype != g.dtype or y.dtype != g.dtype:
        raise InferenceError(f"orig_input, orig_output and out_backprop must share a dtype, got {x.dtype.name}, "
                             f"{y.dtype.name}, {g.dtype.name}")
    return [(x.dtype, _with_rank(x.shape, 4, "orig_input"))]


def _infer_avg_grad(inputs, attrs):
    sizes, g, rows, cols = inputs
    _check_float(g, "out_backprop")
    from actorflow.graph.ops.infer import constant_shape
    s = constant_shape(sizes)
    return [(g.dtype, TensorShape([None] * 4) if s.dims is None else _with_rank(s, 4, "orig_input_tensor_shape"))]


FractionalMaxPool = define_op("FractionalMaxPool", _infer_forward(False), stateful=True)
FractionalAvgPool = define_op("FractionalAvgPool", _infer_forward(True), stateful=True)
FractionalMaxPoolGrad = define_op("FractionalMaxPoolGrad", _infer_max_grad)
FractionalAvgPoolGrad = define_op("FractionalAvgPoolGrad", _infer_avg_grad)


@FractionalMaxPool.gradient
def _fractional_max_pool_grad(op, grad, unused_row_grad=None, unused_col_grad=None):
    return [FractionalMaxPoolGrad(op.inputs[0], op.outputs[0], grad, op.outputs[1], op.outputs[2],
                                  overlapping=op.attrs.get("overlapping", False))]


@FractionalAvgPool.gradient
def _fractional_avg_pool_grad(op, grad, unused_row_grad=None, unused_col_grad=None):
    return [FractionalAvgPoolGrad(array_ops.shape(op.inputs[0]), grad, op.outputs[1], op.outputs[2],
                                  overlapping=op.attrs.get("overlapping", False))]


def _fractional(op_def, fn, default_name, value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2, name):
    ratio = [float(r) for r in (pooling_ratio if isinstance(pooling_ratio, (list, tuple)) else [pooling_ratio])]
    if len(ratio) == 2:
        ratio = [1.0, *ratio, 1.0]
    elif len(ratio) == 1:
        ratio = [1.0, ratio[0], ratio[0], 1.0]
    if len(ratio) != 4:
        raise ValueError(f"{fn}: pooling_ratio must have 1, 2 or 4 elements, got {pooling_ratio}")
    with name_scope(name, default_name, [value]) as scope:
        x = convert_to_tensor(value)
        out, rows, cols = op_def(x, pooling_ratio=tuple(ratio), pseudo_random=bool(pseudo_random),
                                 overlapping=bool(overlapping), deterministic=bool(deterministic), seed=int(seed),
                                 seed2=int(seed2), name=scope)
        return _Output(out, rows, cols)


def fractional_max_pool(value, pooling_ratio, pseudo_random=False, overlapping=False, deterministic=False, seed=0,
                        seed2=0, name=None):
    """Max pooling over windows of fractional average size `pooling_ratio` (tf.compat.v1.nn.
    fractional_max_pool; op FractionalMaxPool): returns (output, row_pooling_sequence,
    col_pooling_sequence). The sequences are random (from numpy's generator, not TF's stream:
    a seed is reproducible here but draws other sequences than TF's)."""
    return _fractional(FractionalMaxPool, "fractional_max_pool", "FractionalMaxPool", value, pooling_ratio, pseudo_random, overlapping,
                       deterministic, seed, seed2, name)


def fractional_avg_pool(value, pooling_ratio, pseudo_random=False, overlapping=False, deterministic=False, seed=0,
                        seed2=0, name=None):
    """Average pooling over fractional windows (tf.compat.v1.nn.fractional_avg_pool; op
    FractionalAvgPool); as fractional_max_pool."""
    return _fractional(FractionalAvgPool, "fractional_avg_pool", "FractionalAvgPool", value, pooling_ratio, pseudo_random, overlapping,
                       deterministic, seed, seed2, name)
