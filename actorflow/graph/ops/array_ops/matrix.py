"""Diagonals and bands: MatrixBandPart, MatrixDiag, MatrixDiagPart, MatrixSetDiag, Diag, DiagPart,
and `eye` (tf.linalg.band_part, tf.linalg.diag / diag_part / set_diag, tf.diag, tf.diag_part,
tf.eye), with TF's gradients."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, joining, reshaping, shapes
from actorflow.graph.ops.array_ops._args import _dense, _is_tensor_like, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import _check_index_dtype, _check_scalar_like
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["matrix_band_part", "matrix_diag", "matrix_diag_part", "matrix_set_diag", "diag", "diag_part", "eye",
           "trace"]


def _dims(x):
    return None if x.shape.dims is None else list(x.shape.dims)


def _need_rank(x, least, what):
    d = _dims(x)
    if d is not None and len(d) < least:
        raise InferenceError(f"{what} must be at least rank {least}, but '{x.name}' has shape {x.shape}")
    return d


def _infer_band_part(inputs, attrs):
    x, lower, upper = inputs
    _need_rank(x, 2, "input")
    for t, what in ((lower, "num_lower"), (upper, "num_upper")):
        _check_index_dtype(t, what)
        _check_scalar_like(t, what)
    return [(x.dtype, x.shape)]


def _infer_matrix_diag(inputs, attrs):
    d = _need_rank(inputs[0], 1, "diagonal")
    return [(inputs[0].dtype, TensorShape(None if d is None else d + [d[-1]]))]


def _infer_matrix_diag_part(inputs, attrs):
    d = _need_rank(inputs[0], 2, "input")
    if d is None:
        return [(inputs[0].dtype, TensorShape(None))]
    m, n = d[-2], d[-1]
    k = None if m is None or n is None else min(m, n)
    return [(inputs[0].dtype, TensorShape(d[:-2] + [k]))]


def _infer_matrix_set_diag(inputs, attrs):
    x, diagonal = inputs
    if diagonal.dtype is not x.dtype:
        raise InferenceError(f"diagonal must have the input's dtype {x.dtype.name}, got {diagonal.dtype.name}")
    want = _infer_matrix_diag_part([x], attrs)[0][1]
    if not want.is_compatible_with(diagonal.shape):
        raise InferenceError(f"diagonal must have shape {want} for an input of shape {x.shape}, got {diagonal.shape}")
    return [(x.dtype, x.shape)]


def _infer_diag(inputs, attrs):
    d = _dims(inputs[0])
    if d is not None and not 1 <= len(d) <= 3:
        raise InferenceError(f"Diag: the input must have rank 1 to 3, got shape {inputs[0].shape}")
    return [(inputs[0].dtype, TensorShape(None if d is None else d + d))]


def _infer_diag_part(inputs, attrs):
    d = _dims(inputs[0])
    if d is None:
        return [(inputs[0].dtype, TensorShape(None))]
    k = len(d) // 2
    if len(d) % 2 or not 2 <= len(d) <= 6:
        raise InferenceError(f"DiagPart: the input must have rank 2, 4 or 6, got shape {inputs[0].shape}")
    for a, b in zip(d[:k], d[k:]):
        if a is not None and b is not None and a != b:
            raise InferenceError(f"DiagPart: the input's dimensions {d[:k]} and {d[k:]} must be equal")
    return [(inputs[0].dtype, TensorShape([a if a is not None else b for a, b in zip(d[:k], d[k:])]))]


MatrixBandPart = define_op("MatrixBandPart", _infer_band_part)
MatrixDiag = define_op("MatrixDiag", _infer_matrix_diag)
MatrixDiagPart = define_op("MatrixDiagPart", _infer_matrix_diag_part)
MatrixSetDiag = define_op("MatrixSetDiag", _infer_matrix_set_diag)
Diag = define_op("Diag", _infer_diag)
DiagPart = define_op("DiagPart", _infer_diag_part)


@MatrixBandPart.gradient
def _band_part_grad(op, grad):
    return [MatrixBandPart(_dense(grad), op.inputs[1], op.inputs[2]), None, None]


@MatrixDiag.gradient
def _matrix_diag_grad(op, grad):
    return [MatrixDiagPart(_dense(grad))]


@MatrixDiagPart.gradient
def _matrix_diag_part_grad(op, grad):
    x = op.inputs[0]
    d = _dims(x)
    if d is not None and d[-1] is not None and d[-1] == d[-2]:
        return [MatrixDiag(_dense(grad))]
    return [MatrixSetDiag(filling.zeros_like(x), _dense(grad))]


@MatrixSetDiag.gradient
def _matrix_set_diag_grad(op, grad):
    grad = _dense(grad)
    return [MatrixSetDiag(grad, filling.zeros_like(op.inputs[1])), MatrixDiagPart(grad)]


@Diag.gradient
def _diag_grad(op, grad):
    return [DiagPart(_dense(grad))]


@DiagPart.gradient
def _diag_part_grad(op, grad):
    return [Diag(_dense(grad))]


def matrix_band_part(input, num_lower, num_upper, name=None):  # noqa: A002
    """Keeps the band of each innermost matrix: `num_lower` subdiagonals and `num_upper`
    superdiagonals (negative: all of them); zeros elsewhere (tf.linalg.band_part)."""
    with _op_scope(name, "MatrixBandPart") as sc:
        return sc.op(MatrixBandPart, convert_to_tensor(input, name="input"),
                     _to_index_tensor(num_lower, "num_lower", dtypes.int64),
                     _to_index_tensor(num_upper, "num_upper", dtypes.int64))


def matrix_diag(diagonal, name=None):
    """Batched diagonal matrices: [..., n] -> [..., n, n] (tf.linalg.diag)."""
    with _op_scope(name, "MatrixDiag") as sc:
        return sc.op(MatrixDiag, convert_to_tensor(diagonal, name="diagonal"))


def matrix_diag_part(input, name=None):  # noqa: A002
    """The main diagonal of each innermost matrix: [..., m, n] -> [..., min(m, n)] (tf.linalg.diag_part)."""
    with _op_scope(name, "MatrixDiagPart") as sc:
        return sc.op(MatrixDiagPart, convert_to_tensor(input, name="input"))


def matrix_set_diag(input, diagonal, name=None):  # noqa: A002
    """`input` with the main diagonal of each innermost matrix replaced by `diagonal` (tf.linalg.set_diag)."""
    with _op_scope(name, "MatrixSetDiag") as sc:
        x = convert_to_tensor(input, name="input")
        return sc.op(MatrixSetDiag, x, convert_to_tensor(diagonal, dtype=x.dtype, name="diagonal"))


def diag(diagonal, name=None):
    """The tensor of rank 2k with `diagonal` (rank k, 1 to 3) on its diagonal (tf.diag)."""
    with _op_scope(name, "Diag") as sc:
        return sc.op(Diag, convert_to_tensor(diagonal, name="diagonal"))


def diag_part(input, name=None):  # noqa: A002
    """The diagonal of a tensor of rank 2k (tf.diag_part), the inverse of `diag`."""
    with _op_scope(name, "DiagPart") as sc:
        return sc.op(DiagPart, convert_to_tensor(input, name="input"))


def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32, name=None):
    """An identity matrix [num_rows, num_columns], or a batch of them [*batch_shape, rows, columns]
    (tf.eye). Sizes may be tensors."""
    dtype = dtypes.as_dtype(dtype)
    with _op_scope(name, "eye") as sc:
        sizes = [num_rows, num_rows if num_columns is None else num_columns]
        static = not any(_is_tensor_like(v) for v in sizes + ([batch_shape] if _is_tensor_like(batch_shape) else
                                                                 list(batch_shape or ())))
        if static:
            m = np.eye(int(sizes[0]), int(sizes[1]), dtype=dtype.np)
            if batch_shape:
                m = np.broadcast_to(m, [int(b) for b in batch_shape] + list(m.shape)).copy()
            return sc.const(m, dtype)
        rows = filling.range(_to_index_tensor(sizes[0], "num_rows", dtypes.int32))
        cols = filling.range(_to_index_tensor(sizes[1], "num_columns", dtypes.int32))
        m = math_ops.cast(math_ops.equal(reshaping.expand_dims(rows, 1), cols), dtype)
        if batch_shape is not None:
            full = joining.concat([_to_index_tensor(batch_shape, "batch_shape", dtypes.int32), shapes.shape(m)], 0)
            m = shapes.broadcast_to(m, full)
        return m


def trace(x, name=None):
    """The sum of the main diagonal of each innermost matrix (tf.linalg.trace, tf.trace)."""
    with _op_scope(name, "Trace") as sc:
        return math_ops.reduce_sum(matrix_diag_part(convert_to_tensor(x, name="x")), [-1], name=sc.name)
