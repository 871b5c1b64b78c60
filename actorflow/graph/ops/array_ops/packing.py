"""Pack, Unpack: definitions, gradients and wrappers (stack, unstack)."""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops import filling
from actorflow.graph.ops.array_ops._args import _as_list, _convert_same_dtype, _dense, _has_tensor, _op_scope
from actorflow.graph.ops.array_ops._infer import _normalize, _same_dtype, _unknown
from actorflow.graph.ops.constant import constant
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["stack", "unstack", "parallel_stack"]


def _infer_pack(inputs, attrs):
    n = attrs["N"]
    axis = int(attrs.get("axis", 0))
    if n < 1 or len(inputs) != n:
        raise InferenceError(f"Pack takes N={n} values (at least one), got {len(inputs)}")
    dt = _same_dtype(inputs, "values")
    merged = TensorShape(None)
    for i, t in enumerate(inputs):
        if not merged.is_compatible_with(t.shape):
            raise InferenceError(f"Shapes of all inputs must match: values[0].shape = {inputs[0].shape} != "
                                 f"values[{i}].shape = {t.shape}")
        merged = merged.merge_with(t.shape)
    if merged.dims is None:
        return _unknown(dt)
    r = len(merged.dims)
    if not -r - 1 <= axis <= r:
        raise InferenceError(f"axis {axis} is out of range [{-r - 1}, {r}] for stacking tensors of rank {r}")
    if axis < 0:
        axis += r + 1
    dims = list(merged.dims)
    dims.insert(axis, n)
    return [(dt, TensorShape(dims))]


Pack = define_op("Pack", _infer_pack)


def _infer_unpack(inputs, attrs):
    (x,) = inputs
    num = attrs["num"]
    axis = int(attrs.get("axis", 0))
    if x.shape.dims is None:
        return _unknown(x.dtype, num)
    r = len(x.shape.dims)
    if r == 0:
        raise InferenceError("Cannot unstack a scalar")
    axis = _normalize(axis, r)
    d = x.shape.dims[axis]
    if d is not None and d != num:
        raise InferenceError(f"Dimension {axis} has size {d}, but num is {num}")
    dims = x.shape.dims[:axis] + x.shape.dims[axis + 1:]
    return [(x.dtype, TensorShape(dims))] * num


Unpack = define_op("Unpack", _infer_unpack)


@Pack.gradient
def _pack_grad(op, grad):
    return unstack(_dense(grad), num=op.attrs["N"], axis=op.attrs.get("axis", 0))


@Unpack.gradient
def _unpack_grad(op, *grads):
    if all(g is None for g in grads):
        return [None]
    parts = [filling.zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return [stack(parts, axis=op.attrs.get("axis", 0))]


def stack(values, axis=0, name="stack"):
    """Stacks rank-R tensors into one rank-(R+1) tensor along `axis` (tf.stack).

    Values may mix tensors and Python/numpy values; with no tensor at all (and axis 0) the result
    is a constant, as in TF.
    """
    values = list(values)
    if axis == 0 and not _has_tensor(values):
        return constant(values, name=name)
    with _op_scope(name, "stack") as sc:
        values = [stack(v) if isinstance(v, (list, tuple)) and _has_tensor(v) else v for v in values]
        ts = _convert_same_dtype(values)
        return sc.op(Pack, *ts, N=len(ts), axis=int(axis))


def unstack(value, num=None, axis=0, name="unstack"):
    """Splits `value` along `axis` into a list of rank-(R-1) tensors (tf.unstack)."""
    with _op_scope(name, "unstack") as sc:
        x = convert_to_tensor(value, name="value")
        if num is None:
            dims = x.shape.dims
            if dims is None or not -len(dims) <= axis < len(dims) or dims[axis] is None:
                raise ValueError(f"Cannot infer argument `num` from shape {x.shape}")
            num = dims[axis]
        return _as_list(sc.op(Unpack, x, num=int(num), axis=int(axis)), int(num))


def parallel_stack(values, name="parallel_stack"):
    """Stacks a list of rank-R tensors into one rank-(R+1) tensor along a new first axis
    (tf.parallel_stack). TF copies every input into a preallocated output (ParallelConcat) and so
    needs every input's shape known when building, and has no gradient; this is a Pack, with the
    same shape requirement, which differentiates like stack."""
    with _op_scope(name, "parallel_stack") as sc:
        ts = _convert_same_dtype(list(values))
        if not ts:
            raise ValueError("parallel_stack: values must not be empty")
        shape = ts[0].shape
        for t in ts[1:]:
            shape = shape.merge_with(t.shape)
        if not shape.is_fully_defined():
            raise ValueError(f"parallel_stack: the input shape must be fully defined, got {shape}")
        return sc.op(Pack, *ts, N=len(ts), axis=0)
