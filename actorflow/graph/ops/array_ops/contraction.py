"""Tensor contractions: tensordot (transposes, reshapes and one MatMul, as TF 1.x builds it) and
einsum (an Einsum op, TF's attribute `equation`, with the gradient of each operand an einsum too)."""
from __future__ import annotations

import re

import numpy as np

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import gathering, joining, reshaping, shapes
from actorflow.graph.ops.array_ops._args import _dense, _int_const, _op_scope
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["tensordot", "einsum"]


# -- tensordot ---------------------------------------------------------------------------------------------

def _axes_lists(axes, ra: int, rb: int):
    if isinstance(axes, (int, np.integer)):
        k = int(axes)
        if k < 0:
            raise ValueError(f"'axes' must be at least 0, got {k}")
        if k > ra or k > rb:
            raise ValueError(f"'axes' must not be larger than the ranks of a ({ra}) and b ({rb}), got {k}")
        return list(range(ra - k, ra)), list(range(k))
    if isinstance(axes, (list, tuple)) and len(axes) == 2:
        a_axes, b_axes = ([int(v)] if np.ndim(v) == 0 else [int(x) for x in v] for v in axes)
        if len(a_axes) != len(b_axes):
            raise ValueError(f"Different number of contraction axes 'a' and 'b', {len(a_axes)} != {len(b_axes)}")
        return [x % ra if -ra <= x < ra else _bad_axis(x, ra, "a") for x in a_axes], \
               [x % rb if -rb <= x < rb else _bad_axis(x, rb, "b") for x in b_axes]
    raise ValueError(f"'axes' must be an integer or have length 2, got {axes!r}")


def _bad_axis(x, r, which):
    raise ValueError(f"axis {x} is out of range for '{which}' of rank {r}")


def _dims(t, axes):
    """The sizes of `axes` of `t`: Python ints when known when building, else a 1-D int32 tensor."""
    d = t.shape.dims
    if all(d[i] is not None for i in axes):
        return [d[i] for i in axes]
    return gathering.gather(shapes.shape(t), _int_const(axes))


def _prod(dims):
    if isinstance(dims, list):
        return int(np.prod(dims, dtype=np.int64))
    return math_ops.reduce_prod(dims)


def _as_shape(parts):
    if all(isinstance(p, list) for p in parts):
        return [x for p in parts for x in p]
    return joining.concat([_int_const(p) if isinstance(p, list) else p for p in parts], 0)


def tensordot(a, b, axes, name=None):
    """Sums the products of `a`'s and `b`'s elements over the given axes (tf.tensordot): `axes` is
    an int N (the last N axes of a with the first N of b) or a pair of axis lists."""
    with _op_scope(name, "Tensordot") as sc:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=a.dtype, name="b")
        ra, rb = a.shape.ndims, b.shape.ndims
        if ra is None or rb is None:
            return _tensordot_dynamic(a, b, axes, sc.name)
        a_axes, b_axes = _axes_lists(axes, ra, rb)
        for i, j in zip(a_axes, b_axes):
            da, db = a.shape.dims[i], b.shape.dims[j]
            if da is not None and db is not None and da != db:
                raise ValueError(f"tensordot: dimension {i} of a ({da}) and {j} of b ({db}) must be equal")
        free_a = [i for i in range(ra) if i not in a_axes]
        free_b = [i for i in range(rb) if i not in b_axes]
        perm_a, perm_b = free_a + a_axes, b_axes + free_b
        ta = a if perm_a == list(range(ra)) else reshaping.transpose(a, perm_a)
        tb = b if perm_b == list(range(rb)) else reshaping.transpose(b, perm_b)
        fa, fb, k = _dims(a, free_a), _dims(b, free_b), _dims(a, a_axes)
        a2 = reshaping.reshape(ta, _as_shape([[_prod(fa)] if isinstance(fa, list) else reshaping.reshape(_prod(fa), [1]),
                                              [_prod(k)] if isinstance(k, list) else reshaping.reshape(_prod(k), [1])]))
        b2 = reshaping.reshape(tb, _as_shape([[_prod(k)] if isinstance(k, list) else reshaping.reshape(_prod(k), [1]),
                                              [_prod(fb)] if isinstance(fb, list) else reshaping.reshape(_prod(fb), [1])]))
        ab = math_ops.matmul(a2, b2)
        out = reshaping.reshape(ab, _as_shape([fa, fb]), name=sc.name)
        out.set_shape(TensorShape([a.shape.dims[i] for i in free_a] + [b.shape.dims[i] for i in free_b]))
        return out


def _tensordot_dynamic(a, b, axes, name):
    """tensordot of operands whose rank is known only when the step runs (a decoded image, a
    placeholder without a shape), as TF builds it: each operand's free and contracted axes, their
    sizes, the transpose and the 2-D reshape are computed from its runtime shape. `axes`: an int N or
    a pair of axis lists (negative axes count from the runtime rank)."""
    from actorflow.graph.ops.array_ops import filling, packing
    from actorflow.graph.ops.misc_ops import setdiff1d

    def side(t, ax, contracted_first):
        shape_t, rank_t = shapes.shape(t), shapes.rank(t)
        if ax is None:                                 # axes = N: a's last N, b's first N
            n = int(axes)
            ax = filling.range(0, n) if contracted_first else filling.range(rank_t - n, rank_t)
        else:
            ax = convert_to_tensor(ax, dtype=shape_t.dtype)
            ax = math_ops.where(ax >= 0, ax, ax + rank_t)
        free = setdiff1d(filling.range(0, rank_t), ax)[0]
        free_dims = gathering.gather(shape_t, free)
        n_free, n_ax = math_ops.reduce_prod(free_dims), math_ops.reduce_prod(gathering.gather(shape_t, ax))
        perm = joining.concat([ax, free] if contracted_first else [free, ax], 0)
        flat = packing.stack([n_ax, n_free] if contracted_first else [n_free, n_ax])
        return reshaping.reshape(reshaping.transpose(t, perm), flat), free_dims

    if isinstance(axes, (int, np.integer)):
        if int(axes) < 0:
            raise ValueError(f"'axes' must be at least 0, got {int(axes)}")
        a_ax = b_ax = None
    elif isinstance(axes, (list, tuple)) and len(axes) == 2:
        a_ax, b_ax = ([int(v)] if np.ndim(v) == 0 else [int(x) for x in v] for v in axes)
        if len(a_ax) != len(b_ax):
            raise ValueError(f"Different number of contraction axes 'a' and 'b', {len(a_ax)} != {len(b_ax)}")
    else:
        raise ValueError(f"'axes' must be an integer or have length 2, got {axes!r}")
    a2, free_a = side(a, a_ax, False)
    b2, free_b = side(b, b_ax, True)
    return reshaping.reshape(math_ops.matmul(a2, b2), joining.concat([free_a, free_b], 0), name=name)


# -- einsum ------------------------------------------------------------------------------------------------

_SPEC = re.compile(r"^[a-zA-Z]*(\.\.\.)?[a-zA-Z]*$")


def parse_equation(equation: str, n: int):
    """(input specs, output spec) of an einsum equation, the output made explicit as numpy and TF
    do (the letters that occur once, in alphabetical order, after any ellipsis)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != n:
        raise ValueError(f"einsum: the equation '{equation}' has {len(ins)} inputs, but {n} tensors were given")
    for s in ins + ([rhs] if arrow else []):
        if not _SPEC.match(s):
            raise ValueError(f"einsum: invalid subscripts '{s}' in '{equation}' (letters and at most one '...')")
    if not arrow:
        letters = "".join(s.replace("...", "") for s in ins)
        rhs = ("..." if any("..." in s for s in ins) else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    for c in rhs.replace("...", ""):
        if rhs.count(c) > 1:
            raise ValueError(f"einsum: output subscript '{c}' appears more than once in '{equation}'")
        if not any(c in s for s in ins):
            raise ValueError(f"einsum: output subscript '{c}' does not appear in the inputs of '{equation}'")
    return ins, rhs


def _infer_einsum(inputs, attrs):
    ins, out = parse_equation(attrs["equation"], len(inputs))
    dt = inputs[0].dtype
    for t in inputs[1:]:
        if t.dtype is not dt:
            raise InferenceError(f"einsum: all inputs must have one dtype, got {dt.name} and {t.dtype.name}")
    if any("..." in s for s in ins):
        return [(dt, TensorShape(None))]
    sizes: dict = {}
    for spec, t in zip(ins, inputs):
        if t.shape.ndims is None:
            continue
        if t.shape.ndims != len(spec):
            raise InferenceError(f"einsum: the input '{t.name}' has rank {t.shape.ndims}, but its subscripts "
                                 f"'{spec}' name {len(spec)} dimensions")
        for c, d in zip(spec, t.shape.dims):
            if d is None:
                continue
            if sizes.get(c, d) != d and sizes.get(c) != 1 and d != 1:
                raise InferenceError(f"einsum: subscript '{c}' has sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, d), d)
    return [(dt, TensorShape([sizes.get(c) for c in out]))]


Einsum = define_op("Einsum", _infer_einsum)


@Einsum.gradient
def _einsum_grad(op, grad):
    xs = list(op.inputs)
    ins, out = parse_equation(op.attrs["equation"], len(xs))
    grad = _dense(grad)
    grads = []
    for k, (spec, x) in enumerate(zip(ins, xs)):
        letters = spec.replace("...", "")
        if len(set(letters)) != len(letters):
            raise NotImplementedError(f"einsum gradient: the subscripts '{spec}' repeat a letter (a diagonal); "
                                      "its gradient is not implemented")
        others = [(s, t) for j, (s, t) in enumerate(zip(ins, xs)) if j != k]
        seen = set(out.replace("...", "")) | {c for s, _ in others for c in s.replace("...", "")}
        kept = "".join(c for c in letters if c in seen)
        target = ("..." if "..." in spec else "") + kept if spec.startswith("...") else kept + (
            "..." if "..." in spec else "")
        if "..." in spec and not spec.startswith("...") and not spec.endswith("..."):
            raise NotImplementedError(f"einsum gradient: an ellipsis inside the subscripts '{spec}'")
        eq = ",".join([out] + [s for s, _ in others]) + "->" + target
        g = Einsum(grad, *[t for _, t in others], equation=eq)
        if kept != letters:
            # letters summed in this operand alone: the gradient is the same along them
            for pos, c in enumerate(spec.replace("...", "")):
                if c not in kept:
                    g = reshaping.expand_dims(g, pos + (0 if not spec.startswith("...") else _ell_rank(x, spec)))
            g = math_ops.multiply(g, math_ops.cast(_ones_like(x), g.dtype))
        grads.append(math_ops.reduce_to_shape(g, x) if "..." in spec else g)
    return grads


def _ell_rank(x, spec):
    if x.shape.ndims is None:
        raise NotImplementedError("einsum gradient: an operand of unknown rank under an ellipsis")
    return x.shape.ndims - len(spec.replace("...", ""))


def _ones_like(x):
    from actorflow.graph.ops.array_ops import filling
    return filling.ones_like(x)


def einsum(equation, *inputs, **kwargs):
    """Einstein summation over `inputs` as `equation` says ("ij,jk->ik"; tf.einsum)."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"einsum() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if not inputs:
        raise ValueError("einsum: no input tensors")
    with _op_scope(name, "einsum") as sc:
        xs = [convert_to_tensor(x, name=f"input_{i}") for i, x in enumerate(inputs)]
        parse_equation(equation, len(xs))
        return sc.op(Einsum, *xs, equation=equation.replace(" ", ""), N=len(xs))
