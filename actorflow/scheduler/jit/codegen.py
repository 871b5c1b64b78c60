"""Python source for a cluster or a loop, one numba function each.

Each node becomes one or a few statements over whole arrays (numpy expressions numba compiles);
numba's array-expression pass fuses the element-wise statements of a cluster into one loop nest,
so intermediates of a chain are never written to memory. Rank-0 values are plain scalars, so a
chain of scalar ops is straight-line machine code. Reductions, softmax and cross-entropy call the
fused row loops in `rt`. Every op's emitter follows the arithmetic of the interpreted kernel
(same operations in the same order), so element-wise results agree bit for bit where numba's math
library agrees with numpy's; reductions sum in a different order and agree to float tolerance.

`EMITTERS` is the table of compilable ops; `compilable(op_type)` asks it. A loop whose every shape
is static compiles in flat.py's form instead (`kernel.make_kernel` asks it first).
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.scheduler.jit.loopnest import emit_block, empty
from actorflow.scheduler.jit.spec import ClusterSpec, LoopSpec, Node

__all__ = ["cluster_source", "loop_source", "compilable", "EMITTERS", "NEEDS_CONST"]

FLOATS = ("float32", "float64")
NUMERIC = ("float32", "float64", "int32", "int64")


def dt(name: str) -> str:
    return "np.bool_" if name == "bool" else f"np.{name}"


def lit(value, dtype: str) -> str:
    """A typed literal of `value` in generated code (exact: repr of a float round-trips)."""
    if dtype == "bool":
        return "True" if bool(value) else "False"
    if dtype in FLOATS:
        v = float(value)
        if math.isnan(v):
            return f"{dt(dtype)}(np.nan)"
        if math.isinf(v):
            return f"{dt(dtype)}({'' if v > 0 else '-'}np.inf)"
        return f"{dt(dtype)}({v!r})"
    return f"{dt(dtype)}({int(value)})"


class Ctx:
    """What an emitter sees of one node: argument names, their dtypes and ranks, its own outputs."""

    def __init__(self, node: Node, args, arg_types, outs):
        self.node = node
        self.a = args                  # names of the argument values
        self.types = arg_types         # (dtype, rank) per argument
        self.outs = outs               # names to assign, one per output
        self.dtype = node.dtypes[0] if node.dtypes else None
        self.rank = node.ranks[0] if node.ranks else None

    def lit(self, v, dtype=None):
        return lit(v, dtype or self.dtype)


# -- element-wise ------------------------------------------------------------------------------
_UNARY = {
    "Neg": "(-{0})", "Abs": "np.abs({0})", "Exp": "np.exp({0})", "Log": "np.log({0})",
    "Log1p": "np.log1p({0})", "Expm1": "np.expm1({0})", "Sin": "np.sin({0})", "Cos": "np.cos({0})",
    "Sqrt": "np.sqrt({0})", "Tanh": "np.tanh({0})", "Floor": "np.floor({0})", "Ceil": "np.ceil({0})",
    "Square": "({0} * {0})", "Sign": "np.sign({0})", "IsNan": "np.isnan({0})", "IsFinite": "np.isfinite({0})",
    "IsInf": "np.isinf({0})", "LogicalNot": "np.logical_not({0})",
    "Reciprocal": "({one} / {0})", "Rsqrt": "({one} / np.sqrt({0}))", "Relu": "np.maximum({0}, {zero})",
    "Sigmoid": "({one} / (np.exp(-{0}) + {one}))",
    "Tan": "np.tan({0})", "Asin": "np.arcsin({0})", "Acos": "np.arccos({0})", "Atan": "np.arctan({0})",
    "Sinh": "np.sinh({0})", "Cosh": "np.cosh({0})", "Asinh": "np.arcsinh({0})", "Acosh": "np.arccosh({0})",
    "Atanh": "np.arctanh({0})",
    # Element-wise nodes are emitted from loopnest.SCALAR, element by element (where math.erf is
    # defined); these entries only make them compilable.
    "Erf": "_math.erf({0})", "Erfc": "_math.erfc({0})", "Lgamma": "_math.lgamma({0})",
}
_UNARY_TYPES = {"Neg": NUMERIC, "Abs": NUMERIC, "Square": NUMERIC, "Sign": NUMERIC, "Relu": NUMERIC,
                "LogicalNot": ("bool",)}
_BINARY = {
    "Add": "({0} + {1})", "AddV2": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})",
    "RealDiv": "({0} / {1})", "Div": "({0} / {1})", "Maximum": "np.maximum({0}, {1})",
    "Minimum": "np.minimum({0}, {1})", "Pow": "np.power({0}, {1})",
    "SquaredDifference": "(({0} - {1}) * ({0} - {1}))",
    "Less": "({0} < {1})", "LessEqual": "({0} <= {1})", "Greater": "({0} > {1})",
    "GreaterEqual": "({0} >= {1})", "Equal": "({0} == {1})", "NotEqual": "({0} != {1})",
    "LogicalAnd": "np.logical_and({0}, {1})", "LogicalOr": "np.logical_or({0}, {1})",
    "Atan2": "np.arctan2({0}, {1})",
    # gradients, in the interpreted kernels' order of operations
    "ReluGrad": "np.where({1} > {zero}, {0}, {zero})",
    "SigmoidGrad": "(({1} * {0}) * ({one} - {0}))",
    "TanhGrad": "(({one} - {0} * {0}) * {1})",
    "BiasAdd": "({0} + {1})",
}
_BINARY_TYPES = {"Add": NUMERIC, "AddV2": NUMERIC, "Sub": NUMERIC, "Mul": NUMERIC, "Maximum": NUMERIC,
                 "Minimum": NUMERIC, "Less": NUMERIC, "LessEqual": NUMERIC, "Greater": NUMERIC,
                 "GreaterEqual": NUMERIC, "Equal": NUMERIC + ("bool",), "NotEqual": NUMERIC + ("bool",),
                 "LogicalAnd": ("bool",), "LogicalOr": ("bool",), "BiasAdd": NUMERIC}


def _wrap(c: Ctx, expr: str) -> str:
    """A scalar result keeps its dtype (numba widens small integer arithmetic to int64)."""
    return f"{dt(c.dtype)}({expr})" if c.rank == 0 else expr


def _elementwise(template):
    def emit(c: Ctx):
        expr = template.format(*c.a, one=c.lit(1, c.types[0][0]), zero=c.lit(0, c.types[0][0]))
        return [f"{c.outs[0]} = {_wrap(c, expr)}"]
    return emit


def _cast(c: Ctx):
    src = c.types[0][0]
    if c.dtype == "bool":
        expr = f"({c.a[0]} != {lit(0, src)})"
        return [f"{c.outs[0]} = {expr}"]
    if c.rank == 0:
        return [f"{c.outs[0]} = {dt(c.dtype)}({c.a[0]})"]
    return [f"{c.outs[0]} = {c.a[0]}.astype({dt(c.dtype)})"]


def _alias(c: Ctx):
    return [f"{c.outs[0]} = {c.a[0]}"]


def _select(c: Ctx):
    if c.rank == 0:
        return [f"{c.outs[0]} = {c.a[1]} if {c.a[0]} else {c.a[2]}"]
    return [f"{c.outs[0]} = np.where({c.a[0]}, {c.a[1]}, {c.a[2]})"]


def _add_n(c: Ctx):
    return [f"{c.outs[0]} = {_wrap(c, '(' + ' + '.join(c.a) + ')')}"]


def _like(value):
    def emit(c: Ctx):
        if c.rank == 0:
            return [f"{c.outs[0]} = {c.lit(value)}"]
        fn = "np.zeros_like" if value == 0 else "np.ones_like"
        return [f"{c.outs[0]} = {fn}({c.a[0]})"]
    return emit


_RANDOM_HELPERS = {"RandomUniform": "random_uniform", "RandomStandardNormal": "random_normal",
                   "TruncatedNormal": "truncated_normal"}


def _random(c: Ctx):
    """A stateful random op in a loop (rt.random_uniform_*, random_normal_*, truncated_normal_*):
    the shape of its argument, the value whose Shape it was drawn for (dropout's
    ``random_uniform(shape(x))``), or its constant shape (attribute ``shape``); its stream's state
    is the loop's argument ``rs{k}``."""
    k = c.node.attr("stream")
    dims = [f"{c.a[0]}.shape[{i}]" for i in range(c.rank)] if c.a else \
        [f"np.int64({d})" for d in c.node.attr("shape")]
    suffix = "f32" if c.dtype == "float32" else "f64"
    return [f"{c.outs[0]} = _rt.{_RANDOM_HELPERS[c.node.op]}_{suffix}(rs{k}, {empty(dims, c.dtype)})"]


def _const(c: Ctx):
    return [f"{c.outs[0]} = {c.lit(c.node.attr('value'))}"]


# -- reductions --------------------------------------------------------------------------------
_REDUCE = {"Sum": ("row_sum", 0), "Mean": ("row_sum", 0), "Prod": ("row_prod", 1), "Max": ("row_max", "lo"),
           "Min": ("row_min", "hi"), "All": ("row_all", True), "Any": ("row_any", False)}


def _init(kind, dtype):
    if kind == "lo":
        return lit(-np.inf, dtype) if dtype in FLOATS else lit(np.iinfo(dtype).min, dtype)
    if kind == "hi":
        return lit(np.inf, dtype) if dtype in FLOATS else lit(np.iinfo(dtype).max, dtype)
    return lit(kind, dtype)


def _reduce_lines(x: str, rank: int, axes: tuple, keep: bool, op: str, dtype: str, out: str, tmp: str):
    helper, init = _REDUCE[op]
    if rank == 0 or not axes:
        return [f"{out} = {x}"]
    kept = [d for d in range(rank) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    lines = []
    src = x
    if perm != tuple(range(rank)):
        lines += transpose_lines(f"{tmp}_p", x, perm, dtype)
        lines.append(f"{tmp}_t = np.ascontiguousarray({tmp}_p)")
        src = f"{tmp}_t"
    else:
        lines.append(f"{tmp}_t = np.ascontiguousarray({x})")
        src = f"{tmp}_t"
    outer = " * ".join(f"{x}.shape[{d}]" for d in kept) or "1"
    inner = " * ".join(f"{x}.shape[{d}]" for d in axes)
    lines.append(f"{tmp}_n = {inner}")
    lines.append(f"{tmp}_r = _rt.{helper}(_rt.reshape({src}, ({outer}, {tmp}_n)), "
                 f"_rt.fill({empty([outer], dtype)}, {_init(init, dtype)}))")
    if op == "Mean":
        if dtype in FLOATS:
            lines.append(f"{tmp}_r = {tmp}_r / {dt(dtype)}({tmp}_n)")
        else:
            raise NotImplementedError("integer Mean")
    if keep:
        shape = tuple(f"{x}.shape[{d}]" if d not in axes else "np.int64(1)" for d in range(rank))
    else:
        shape = tuple(f"{x}.shape[{d}]" for d in kept)
    if not shape:
        lines.append(f"{out} = {tmp}_r[0]")
    else:
        lines.append(f"{out} = _rt.reshape({tmp}_r, ({', '.join(shape)},))")
    return lines


def _reduction(c: Ctx):
    rank = c.types[0][1]
    axes = tuple(sorted({a % rank for a in c.node.attr("axes")})) if rank else ()
    return _reduce_lines(c.a[0], rank, axes, bool(c.node.attr("keep_dims")), c.node.op, c.dtype, c.outs[0],
                         "_" + c.outs[0])


def _bias_add_grad(c: Ctx):
    rank = c.types[0][1]
    return _reduce_lines(c.a[0], rank, tuple(range(rank - 1)), False, "Sum", c.dtype, c.outs[0], "_" + c.outs[0])


def _softmax(log):
    def emit(c: Ctx):
        return [f"{c.outs[0]} = _rt.softmax({c.a[0]}, {log})"]
    return emit


def _xent(c: Ctx):
    return [f"{c.outs[0]}, {c.outs[1]} = _rt.xent({c.a[0]}, {c.a[1]})"]


def _sparse_xent(c: Ctx):
    """The kernel's fused row loop; a label out of range raises, and the interpreted op reports it."""
    x = c.a[0]
    rows, cols = f"{x}.shape[0]", f"{x}.shape[1]"
    return [f"{c.outs[0]}, {c.outs[1]} = _rt.sparse_xent({x}, {c.a[1]}, {empty([rows], c.dtype)}, "
            f"{empty([rows, cols], c.dtype)})"]


# -- shape ops ---------------------------------------------------------------------------------
def _shape_tuple(dims) -> str:
    return "(" + "".join(f"{d}, " for d in dims) + ")"


def _reshape(c: Ctx):
    shape = c.node.attr("shape")
    x = c.a[0]
    if c.types[0][1] == 0:      # a scalar (a sum over every axis) to a shape of ones
        dims = [f"np.int64({max(d, 1)})" for d in shape]
        return [f"{c.outs[0]} = _rt.fill({empty(dims, c.dtype)}, {x})"]
    dims = []
    known = 1
    for d in shape:
        if d >= 0:
            known *= d
    for d in shape:
        dims.append(f"np.int64({d})" if d >= 0 else f"{x}.size // {known}")
    return [f"{c.outs[0]} = _rt.reshape({x}, {_shape_tuple(dims)})"]


def _expand_dims(c: Ctx):
    x, rank = c.a[0], c.types[0][1]
    d = c.node.attr("dim")
    d = d + rank + 1 if d < 0 else d
    dims = [f"{x}.shape[{i}]" for i in range(rank)]
    dims.insert(d, "np.int64(1)")
    return [f"{c.outs[0]} = _rt.reshape({x}, {_shape_tuple(dims)})"]


def _squeeze(c: Ctx):
    x, rank = c.a[0], c.types[0][1]
    drop = {d % rank for d in c.node.attr("squeeze_dims")}
    dims = [f"{x}.shape[{i}]" for i in range(rank) if i not in drop]
    return [f"{c.outs[0]} = _rt.reshape({x}, {_shape_tuple(dims)})"]


def _shape(c: Ctx):
    """The input's dimensions as a vector of the op's out_type (a loss's batch size is known only
    at run time: inside the cluster, the Mean gradient's Shape/Size chain costs nothing)."""
    x, rank = c.a[0], c.types[0][1]
    o = c.outs[0]
    lines = [f"{o} = {empty([f'np.int64({rank})'], c.dtype)}"]
    lines += [f"{o}[{i}] = {x}.shape[{i}]" for i in range(rank)]
    return lines


def _size(c: Ctx):
    x, rank = c.a[0], c.types[0][1]
    return [f"{c.outs[0]} = {dt(c.dtype)}({x}.size)" if rank else f"{c.outs[0]} = {dt(c.dtype)}(1)"]


def _floor_div(c: Ctx):
    """Integers only: numpy's floor_divide (rounds toward -inf); a zero divisor raises (the
    interpreted op reports it)."""
    y, yr = c.a[1], c.types[1][1]
    zero = f"{y} == 0" if yr == 0 else f"np.any({y} == 0)"
    return [f"if {zero}:", "    raise ZeroDivisionError('FloorDiv: integer division by zero')",
            f"{c.outs[0]} = {_wrap(c, f'np.floor_divide({c.a[0]}, {y})')}"]


def _broadcast_to(c: Ctx):
    """A new array of the given shape filled by broadcasting, in explicit loops (numba's
    broadcasting assignment costs seconds of compile): `shape` must have the result's rank (the
    shape function's); an input that does not broadcast raises (the interpreted op reports it)."""
    x, s = c.a
    xr, rank = c.types[0][1], c.rank
    o = c.outs[0]
    if rank == 0:
        return [f"if {s}.shape[0] != 0:", "    raise ValueError('BroadcastTo: shape')", f"{o} = {x}"]
    dims = [f"np.int64({s}[{i}])" for i in range(rank)]
    lines = [f"if {s}.shape[0] != {rank}:", "    raise ValueError('BroadcastTo: shape')",
             f"{o} = {empty(dims, c.dtype)}"]
    if xr == 0:
        return lines + [f"_rt.fill({o}, {x})"]
    # numpy's rule: each dimension of x is 1 (read at index 0) or the target's
    idx = []
    for i in range(xr):
        d = f"{s}[{rank - xr + i}]"
        lines.append(f"if {x}.shape[{i}] != 1 and {x}.shape[{i}] != {d}:")
        lines.append("    raise ValueError('BroadcastTo: operands could not be broadcast')")
        lines.append(f"{o}_m{i} = 0 if {x}.shape[{i}] == 1 else 1")
        idx.append(f"_b{rank - xr + i} * {o}_m{i}")
    ind = ""
    for k in range(rank):
        lines.append(f"{ind}for _b{k} in range({dims[k]}):")
        ind += "    "
    lines.append(f"{ind}{o}[{', '.join(f'_b{k}' for k in range(rank))}] = {x}[{', '.join(idx)}]")
    return lines


def transpose_lines(out: str, x: str, perm: tuple, dtype: str, ind: str = "") -> list:
    """`out` = `x` with its axes permuted by `perm`: a view for a matrix's transpose, else a C-order
    copy in explicit loops. (numba's transpose with axes, np.transpose(x, perm) or x.transpose(perm),
    compiled for 2.5-3.5 s the first time a process used it, outside numba's disk cache.)"""
    rank = len(perm)
    if perm == tuple(range(rank)):
        return [f"{ind}{out} = {x}"]
    if rank == 2:
        return [f"{ind}{out} = {x}.T"]
    lines = [f"{ind}{out} = {empty([f'{x}.shape[{p}]' for p in perm], dtype)}"]
    idx = [f"_{out}_{d}" for d in range(rank)]
    for d in range(rank):
        lines.append(f"{ind}{'    ' * d}for {idx[d]} in range({out}.shape[{d}]):")
    src = [""] * rank
    for d, p in enumerate(perm):
        src[p] = idx[d]
    lines.append(f"{ind}{'    ' * rank}{out}[{', '.join(idx)}] = {x}[{', '.join(src)}]")
    return lines


def _transpose(c: Ctx):
    return transpose_lines(c.outs[0], c.a[0], tuple(c.node.attr("perm")), c.dtype)


def _transposes(c: Ctx):
    return bool(c.node.attr("transpose_a")), bool(c.node.attr("transpose_b"))


def _matmul(c: Ctx):
    """A small GEMM (the JIT compiles MatMul only inside loops and for small static shapes, an
    LSTM cell's): a call of the explicit loops of `rt.gemm`, compiled once for every kernel."""
    ta, tb = _transposes(c)
    a, b = c.a
    m = f"{a}.shape[1]" if ta else f"{a}.shape[0]"
    n = f"{b}.shape[0]" if tb else f"{b}.shape[1]"
    if c.node.attr("blas"):     # (a loop's product big enough for cblas: blascall.py)
        return [f"{c.outs[0]} = _rt.blas_gemm(blas, {a}, {b}, {ta}, {tb}, {empty([m, n], c.dtype)}, False)"]
    return [f"{c.outs[0]} = _rt.gemm({a}, {b}, {ta}, {tb}, {empty([m, n], c.dtype)}, False)"]


def _concat(c: Ctx):
    """Copies into the result, one `rt.concat_into` call a piece."""
    rank = c.rank
    axis = c.node.attr("axis") % rank
    o = c.outs[0]
    x0 = c.a[0]
    total = " + ".join(f"{x}.shape[{axis}]" for x in c.a)
    dims = [total if d == axis else f"{x0}.shape[{d}]" for d in range(rank)]
    lines = [f"{o} = {empty(dims, c.dtype)}"]
    off = "0"
    for x in c.a:
        lines.append(f"_rt.concat_into({o}, {x}, {axis}, {off})")
        off = f"{x}.shape[{axis}]" if off == "0" else f"{off} + {x}.shape[{axis}]"
    return lines


def _split(c: Ctx):
    x, rank = c.a[0], c.types[0][1]
    axis = c.node.attr("axis") % rank
    n = len(c.outs)
    tmp = "_" + c.outs[0] + "_s"
    lines = [f"{tmp} = {x}.shape[{axis}] // {n}"]
    for i, o in enumerate(c.outs):
        idx = ", ".join(f"{i} * {tmp}:{i + 1} * {tmp}" if d == axis else ":" for d in range(rank))
        lines.append(f"{o} = {x}[{idx}]")
    return lines


def _split_v(c: Ctx):
    """Views of consecutive pieces of the given sizes along the axis (one size may be -1: the rest)."""
    x, rank = c.a[0], c.types[0][1]
    axis = c.node.attr("axis") % rank
    sizes = c.node.attr("sizes")
    sizes = (sizes,) if isinstance(sizes, int) else tuple(sizes)
    known = sum(n for n in sizes if n >= 0)
    dim = f"{x}.shape[{axis}]"
    free = sizes.count(-1)
    lines = [f"if {dim} != {known}:" if not free else f"if {dim} < {known}:",
             "    raise ValueError('SplitV: the sizes do not add up to the dimension')"]
    off = "0"
    for o, n in zip(c.outs, sizes):
        size = str(n) if n >= 0 else f"({dim} - {known})"
        end = f"{off} + {size}" if off != "0" else size
        idx = ", ".join(f"{off}:{end}" if d == axis else ":" for d in range(rank))
        lines.append(f"{o} = {x}[{idx}]")
        off = f"({end})"
    return lines


def _acc_matmul(c: Ctx):
    """``v + MatMul(a, b)`` into loop variable v's own buffer (see `_accumulate_in_place`), each
    product summed first, as the unfused ops do; a shape that would broadcast raises, and the
    interpreted loop runs instead."""
    v = c.a[0]
    ta, tb = _transposes(c)
    fn = "blas_gemm(blas, " if c.node.attr("blas") else "gemm("
    return [f"{c.outs[0]} = _rt.{fn}{c.a[1]}, {c.a[2]}, {ta}, {tb}, {v}, True)"]


def _history_read(c: Ctx):
    """Row `index` of a history a forward loop saved (a gradient loop's AccumulatorPop)."""
    h, i = c.a
    return [f"{c.outs[0]} = _rt.row({h}, {i})"]


def index_check(i: str, n, op: str, ind: str = "") -> list:
    """Lines raising IndexError (naming `op`) when row index `i` is outside [0, `n`): the interpreted
    loop then runs, and its error names the node."""
    return [f"{ind}if {i} < 0 or {i} >= {n}:", f"{ind}    raise IndexError('{op}: index out of range')"]


def _gather(c: Ctx):
    """GatherV2 of one row (a scalar index along axis 0: dynamic_rnn's read of a time step), copied."""
    p, i = c.a
    copy = "" if c.types[0][1] == 1 else ".copy()"
    return index_check(i, f"{p}.shape[0]", "GatherV2") + [f"{c.outs[0]} = {p}[{i}]{copy}"]


def _gather_nd(c: Ctx):
    """GatherNd with indices of shape [1, 1] (one slice along axis 0, kept as a leading 1: the gradient
    of dynamic_rnn's write of a time step), copied."""
    p, idx = c.a
    i = f"_{c.outs[0]}_i"
    return ([f"{i} = {idx}[0, 0]"] + index_check(i, f"{p}.shape[0]", "GatherNd")
            + [f"{c.outs[0]} = {p}[{i}:{i} + 1].copy()"])


def _scatter_update(c: Ctx):
    """TensorScatterUpdate (TensorScatterAdd) with indices of shape [1, 1]: row idx[0, 0] of the
    tensor replaced by (added to by) updates[0]: dynamic_rnn's write of a time step (its gradient's
    sum over time steps). Into the tensor's own buffer when the node says so (see
    `_scatter_in_place`), else into a copy."""
    t, idx, u = c.a
    op = c.node.op
    rank = c.types[0][1]
    i = f"_{c.outs[0]}_i"
    bad = " or ".join([f"{u}.shape[0] != 1"] + [f"{u}.shape[{d}] != {t}.shape[{d}]" for d in range(1, rank)])
    lines = [f"{i} = {idx}[0, 0]"] + index_check(i, f"{t}.shape[0]", op)
    lines += [f"if {bad}:", f"    raise ValueError('{op}: updates do not match the slice')"]
    src = t if c.node.attr("in_place") else f"{t}.copy()"
    fn = "add_row" if op == "TensorScatterAdd" else "set_row"
    lines.append(f"{c.outs[0]} = _rt.{fn}({src}, {i}, {u})")
    return lines


EMITTERS = {op: _elementwise(t) for op, t in {**_UNARY, **_BINARY}.items()}
EMITTERS.update({
    "Cast": _cast, "Identity": _alias, "Snapshot": _alias, "StopGradient": _alias,
    "Select": _select, "SelectV2": _select, "AddN": _add_n, "ZerosLike": _like(0), "OnesLike": _like(1),
    "Const": _const, "RandomUniform": _random, "RandomStandardNormal": _random, "TruncatedNormal": _random,
    "Sum": _reduction, "Mean": _reduction, "Prod": _reduction, "Max": _reduction, "Min": _reduction,
    "All": _reduction, "Any": _reduction, "BiasAddGrad": _bias_add_grad,
    "Softmax": _softmax(False), "LogSoftmax": _softmax(True), "SoftmaxCrossEntropyWithLogits": _xent,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_xent, "Shape": _shape, "Size": _size, "FloorDiv": _floor_div,
    "BroadcastTo": _broadcast_to,
    "Reshape": _reshape, "ExpandDims": _expand_dims, "Squeeze": _squeeze, "Transpose": _transpose,
    "MatMul": _matmul, "ConcatV2": _concat, "Split": _split, "SplitV": _split_v,
    "_HistoryRead": _history_read, "_AccMatMul": _acc_matmul, "_Nop": lambda c: [],
    "GatherV2": _gather, "GatherNd": _gather_nd, "TensorScatterUpdate": _scatter_update,
    "TensorScatterAdd": _scatter_update,
})

# Ops whose listed input slots must be constants: their values become attributes of the node.
NEEDS_CONST = {"Sum": {1: "axes"}, "Mean": {1: "axes"}, "Prod": {1: "axes"}, "Max": {1: "axes"},
               "Min": {1: "axes"}, "All": {1: "axes"}, "Any": {1: "axes"}, "Reshape": {1: "shape"},
               "ExpandDims": {1: "dim"}, "Transpose": {1: "perm"}, "ConcatV2": {-1: "axis"},
               "Split": {0: "axis"}, "SplitV": {1: "sizes", 2: "axis"}, "GatherV2": {2: "axis"}}

# The dtypes each op compiles for (default: float32 and float64).
_TYPES = {**_UNARY_TYPES, **_BINARY_TYPES}
for _op in ("Cast", "Identity", "Snapshot", "StopGradient", "Const", "Reshape", "ExpandDims", "Squeeze",
            "Transpose", "ConcatV2", "Split", "SplitV", "ZerosLike", "OnesLike", "Select", "SelectV2"):
    _TYPES[_op] = NUMERIC + ("bool",)
for _op in ("Sum", "Prod", "Max", "Min", "AddN"):
    _TYPES[_op] = NUMERIC
_TYPES["All"] = _TYPES["Any"] = ("bool",)
for _op in ("Shape", "Size"):
    _TYPES[_op] = NUMERIC + ("bool",)
_TYPES["FloorDiv"] = ("int32", "int64")
_TYPES["BroadcastTo"] = NUMERIC + ("bool",)
# Ops whose inputs differ in kind: the dtypes each input slot compiles for.
_INTS = ("int32", "int64")
_ANY = NUMERIC + ("bool",)
_SLOT_TYPES = {"SparseSoftmaxCrossEntropyWithLogits": (FLOATS, _INTS), "GatherV2": (_ANY, _INTS),
               "GatherNd": (_ANY, _INTS), "TensorScatterUpdate": (_ANY, _INTS, _ANY),
               "TensorScatterAdd": (NUMERIC, _INTS, NUMERIC)}


def compilable(op_type: str, dtypes) -> bool:
    """True when `op_type` has an emitter and every dtype in `dtypes` is one it compiles for."""
    if op_type not in EMITTERS:
        return False
    slots = _SLOT_TYPES.get(op_type)
    if slots is not None:
        return len(dtypes) == len(slots) and all(d in ok for d, ok in zip(dtypes, slots))
    ok = _TYPES.get(op_type, FLOATS)
    return all(d in ok for d in dtypes)


# -- whole functions ---------------------------------------------------------------------------
_HEADER = """# generated by actorflow.scheduler.jit: {what}
import numba
import numpy as np
from actorflow.scheduler.jit import rt as _rt


@numba.njit(nogil=True, cache=True, fastmath=False, error_model="numpy", no_cfunc_wrapper=True)
def kernel({params}):
"""


def _emit(nodes, name_of, type_of, needed, indent="    ", span=None) -> list:
    def other(j, node):
        outs = [name_of(("n", j, o)) for o in range(len(node.dtypes))]
        return EMITTERS[node.op](Ctx(node, [name_of(r) for r in node.args], [type_of(r) for r in node.args], outs))
    return emit_block(nodes, name_of, type_of, needed, other, indent, span, type_of.statics)


def _resolver(spec, input_name):
    def name_of(ref):
        return input_name(ref[1]) if ref[0] == "i" else f"n{ref[1]}_{ref[2]}"

    def type_of(ref):
        if ref[0] == "i":
            return tuple(spec.inputs[ref[1]])
        node = spec.nodes[ref[1]]
        return node.dtypes[ref[2]], node.ranks[ref[2]]

    def statics(ref):
        if ref[0] == "i":
            st = spec.input_statics
            return st[ref[1]] if ref[1] < len(st) else ()
        st = spec.nodes[ref[1]].statics
        return st[ref[2]] if ref[2] < len(st) else ()
    type_of.statics = statics
    return name_of, type_of


def _splats(spec: ClusterSpec) -> ClusterSpec:
    """`spec` with each ``BroadcastTo(v, Shape(x))`` of a `v` of one element (every static size
    1, and no more dimensions than x), and each ExpandDims of one, as a `_Splat` node (loopnest):
    an element-wise node that its consumer's loop computes, where the ops write an array of the
    element (BroadcastTo), reshape it (ExpandDims) and read it back; the Shape and the replaced
    nodes that nothing else reads become `_Nop`s. A loss's gradient is such a chain (the Mean's
    gradient: the seed divided by the batch size, broadcast to the batch and expanded to multiply
    the cross-entropy's gradient): three arrays fewer for numba to compile (0.1-0.2 s). Values
    and errors are the ops': a BroadcastTo of one element to a Shape never fails."""
    nodes = list(spec.nodes)

    def statics(ref):
        if ref[0] == "i":
            st = spec.input_statics
            return st[ref[1]] if ref[1] < len(st) else ()
        st = nodes[ref[1]].statics
        return st[ref[2]] if ref[2] < len(st) else ()

    def rank(ref):
        return spec.inputs[ref[1]][1] if ref[0] == "i" else nodes[ref[1]].ranks[ref[2]]
    replaced = set()
    for j, nd in enumerate(nodes):
        if nd.op == "BroadcastTo" and nd.args[1][0] == "n" and nodes[nd.args[1][1]].op == "Shape":
            v, x = nd.args[0], nodes[nd.args[1][1]].args[0]
            vst, r = statics(v), nd.ranks[0]
            if rank(x) == r and len(vst) == rank(v) <= r and all(d == 1 for d in vst):
                nodes[j] = Node("_Splat", (("dims", tuple(range(r))),), (v, x), nd.dtypes, nd.ranks, nd.statics)
                replaced.add(j)
        elif nd.op == "ExpandDims" and nd.args[0][0] == "n" and nodes[nd.args[0][1]].op == "_Splat":
            sp = nodes[nd.args[0][1]]
            d = nd.attr("dim")
            dims = list(sp.attr("dims"))
            dims.insert(d + sp.ranks[0] + 1 if d < 0 else d, -1)
            nodes[j] = Node("_Splat", (("dims", tuple(dims)),), sp.args, nd.dtypes, nd.ranks, nd.statics)
            replaced.add(j)
    if not replaced:
        return spec
    live: set = set()
    todo = [r for r in spec.outputs if r[0] == "n"]
    while todo:
        j = todo.pop()[1]
        if j not in live:
            live.add(j)
            todo += [r for r in nodes[j].args if r[0] == "n"]
    for j, nd in enumerate(nodes):
        if j not in live and (j in replaced or nd.op == "Shape"):
            nodes[j] = Node("_Nop", (), (), nd.dtypes, nd.ranks, nd.statics)
    return ClusterSpec(spec.inputs, tuple(nodes), spec.outputs, spec.input_statics)


_XENT = frozenset({"SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits"})


def _xent_rows(spec: ClusterSpec) -> ClusterSpec:
    """`spec` with the rows of each cross-entropy's two outputs (the loss [rows] and the gradient
    [rows, classes]), where the logits' static shape leaves them unknown, as one symbol (spec.py):
    the op makes them equal, so a loop over both (the loss's gradient times the gradient, through
    a splat) indexes them directly, with no broadcasting code. Nothing needs checking on entry;
    no other value gets the symbol."""
    nodes = list(spec.nodes)
    used = {d for nd in nodes for st in nd.statics for d in st} | {d for st in spec.input_statics for d in st}
    sym = min([d for d in used if d < -1], default=-2) - 1
    changed = False
    for j, nd in enumerate(nodes):
        if nd.op in _XENT and len(nd.statics) == 2 and len(nd.statics[0]) == 1 and len(nd.statics[1]) == 2 \
                and nd.statics[0][0] == -1 and nd.statics[1][0] == -1:
            statics = ((sym,), (sym, nd.statics[1][1]))
            nodes[j] = Node(nd.op, nd.attrs, nd.args, nd.dtypes, nd.ranks, statics)
            sym -= 1
            changed = True
    return ClusterSpec(spec.inputs, tuple(nodes), spec.outputs, spec.input_statics) if changed else spec


def cluster_source(spec: ClusterSpec) -> str:
    """The source of `kernel(*inputs)` computing the cluster's outputs (a tuple when several)."""
    spec = _splats(_xent_rows(spec))
    params = ", ".join(f"a{i}" for i in range(len(spec.inputs)))
    name_of, type_of = _resolver(spec, lambda k: f"a{k}")
    lines = [_HEADER.format(what=f"cluster of {len(spec.nodes)} ops", params=params)]
    lines += _emit(spec.nodes, name_of, type_of, spec.outputs)
    outs = [name_of(r) for r in spec.outputs]
    lines.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)},)")
    return _without_unused_rt("\n".join(lines) + "\n")


def _without_unused_rt(source: str) -> str:
    """`source` without its import of `rt` when nothing calls a helper (importing rt costs the first
    compile of a process about 0.1 s), and with fastmath32's when something calls its functions."""
    source = with_fastmath(source)
    if "_rt." in source:
        return source
    return source.replace("from actorflow.scheduler.jit import rt as _rt\n", "", 1)


def with_fastmath(source: str) -> str:
    """`source` importing fastmath32's float32 exp and tanh when it calls them (see loopnest.scalar_expr),
    and the math module when it calls erf, erfc or lgamma."""
    if "_math." in source:
        source = source.replace("import numpy as np\n", "import math as _math\nimport numpy as np\n", 1)
    if "_exp32(" not in source and "_tanh32(" not in source:
        return source
    return source.replace("import numpy as np\n", "import numpy as np\nfrom actorflow.scheduler.jit.fastmath32 "
                          "import exp32 as _exp32, tanh32 as _tanh32\n", 1)


def _accumulate_in_place(spec: LoopSpec) -> LoopSpec:
    """A loop variable updated as ``v + MatMul(a, b)`` and used nowhere else (a gradient loop's sum
    of a weight's gradient over iterations) accumulates into its own buffer: no product array, no
    sum array. The loop's variables are its own copies (`JitKernel` copies them in), so writing
    into one changes nothing outside."""
    nodes = list(spec.nodes)
    uses: dict = {}
    for r in [x for nd in nodes for x in nd.args] + [spec.cond] + list(spec.nexts) + list(spec.saves):
        uses[r] = uses.get(r, 0) + 1

    def alias_of(r):
        chain = []
        while r[0] == "n" and nodes[r[1]].op in ("Identity", "Snapshot"):
            chain.append(r)
            r = nodes[r[1]].args[0]
        return r, chain
    changed = False
    for k, nx in enumerate(spec.nexts):
        if nx[0] != "n" or nx[1] < spec.n_cond:
            continue
        add = nodes[nx[1]]
        if add.op not in ("Add", "AddV2") or add.ranks[0] != 2 or add.dtypes[0] not in FLOATS or uses[nx] != 1:
            continue
        for pos in (0, 1):
            var, chain = alias_of(add.args[pos])
            mm = add.args[1 - pos]
            if (var != ("i", k) or mm[0] != "n" or nodes[mm[1]].op != "MatMul" or uses.get(mm) != 1
                    or uses.get(var) != 1 or any(uses.get(c) != 1 for c in chain)
                    or nodes[mm[1]].dtypes[0] != add.dtypes[0] or spec.inputs[k] != (add.dtypes[0], 2)):
                continue
            m = nodes[mm[1]]
            nodes[nx[1]] = Node("_AccMatMul", m.attrs, (add.args[pos],) + m.args, add.dtypes, add.ranks, add.statics)
            nodes[mm[1]] = Node("_Nop", (), (), m.dtypes, m.ranks, m.statics)
            changed = True
            break
    if not changed:
        return spec
    return LoopSpec(spec.inputs, spec.n_vars, tuple(nodes), spec.n_cond, spec.cond, spec.nexts, spec.saves,
                    spec.input_statics)


_COPY_READERS = frozenset({"GatherV2", "GatherNd"})     # their compiled form copies what it reads
_SCATTERS = frozenset({"TensorScatterUpdate", "TensorScatterAdd"})


def _scatter_in_place(spec: LoopSpec) -> LoopSpec:
    """A loop variable whose next value is ``TensorScatterUpdate(v, ...)`` (dynamic_rnn's buffer of
    outputs, and its gradient's) is written in its own buffer, one row an iteration, instead of
    copied whole every iteration (which made the loop's cost grow with the square of its length),
    when nothing else sees the old value: its only other readers are GatherV2/GatherNd nodes, whose
    compiled forms copy what they read and run before the write (node order is emission order), and
    it is not saved, tested or passed on. A reader that comes after the write in the nodes' order
    moves to just before it when its inputs allow (a gradient loop reads the slice it then zeroes).
    The loop's variables are its own copies (`JitKernel` copies them in)."""
    spec = _readers_first(spec)
    nodes = list(spec.nodes)
    users: dict = {}                    # ref -> the nodes using it (None: the condition, a next, a save)
    for j, nd in enumerate(nodes):
        for r in nd.args:
            users.setdefault(r, []).append(j)
    for r in [spec.cond] + list(spec.nexts) + list(spec.saves):
        users.setdefault(r, []).append(None)
    changed = False
    for k, nx in enumerate(spec.nexts):
        if nx[0] != "n" or nx[1] < spec.n_cond or len(users.get(nx, ())) != 1:
            continue
        j = nx[1]
        upd = nodes[j]
        if upd.op not in _SCATTERS:
            continue
        refs = {("i", k)}              # the variable and its aliases (Identity chains)
        grew = True
        while grew:
            grew = False
            for r in list(refs):
                for u in users.get(r, ()):
                    if u is not None and nodes[u].op in ("Identity", "Snapshot") and ("n", u, 0) not in refs:
                        refs.add(("n", u, 0))
                        grew = True
        if upd.args[0] not in refs:
            continue
        ok = True
        for r in refs:
            for u in users.get(r, ()):
                if u is None:
                    ok = False                  # saved, the condition, or another variable's next
                elif u == j:
                    ok = ok and nodes[u].args[0] == r and r not in nodes[u].args[1:]
                elif nodes[u].op in ("Identity", "Snapshot") and ("n", u, 0) in refs:
                    pass
                elif nodes[u].op in _COPY_READERS and u < j and nodes[u].args[0] == r and r not in nodes[u].args[1:]:
                    pass
                else:
                    ok = False
        if not ok:
            continue
        nodes[j] = Node(upd.op, tuple(sorted(upd.attrs + (("in_place", True),))), upd.args, upd.dtypes, upd.ranks,
                        upd.statics)
        changed = True
    if not changed:
        return spec
    return LoopSpec(spec.inputs, spec.n_vars, tuple(nodes), spec.n_cond, spec.cond, spec.nexts, spec.saves,
                    spec.input_statics, spec.shape_only)


def _readers_first(spec: LoopSpec) -> LoopSpec:
    """`spec` with each GatherV2/GatherNd that reads a TensorScatterUpdate's tensor after it (in the
    nodes' order) moved to just before it, where all of the reader's inputs come before the write."""
    nodes = spec.nodes
    for j, upd in enumerate(nodes):
        if upd.op not in _SCATTERS or j < spec.n_cond:
            continue
        for u in range(j + 1, len(nodes)):
            nd = nodes[u]
            if (nd.op in _COPY_READERS and nd.args[0] == upd.args[0]
                    and all(r[0] == "i" or r[1] < j for r in nd.args)):
                order = list(range(j)) + [u] + [x for x in range(j, len(nodes)) if x != u]
                return _readers_first(_reordered(spec, order))
    return spec


def _reordered(spec: LoopSpec, order: list) -> LoopSpec:
    """`spec` with its nodes in `order` (old indices; still topological), references renumbered."""
    new_of = {old: new for new, old in enumerate(order)}

    def ref(r):
        return r if r[0] != "n" else ("n", new_of[r[1]]) + tuple(r[2:])
    nodes = tuple(Node(nd.op, nd.attrs, tuple(ref(a) for a in nd.args), nd.dtypes, nd.ranks, nd.statics)
                  for nd in (spec.nodes[o] for o in order))
    return LoopSpec(spec.inputs, spec.n_vars, nodes, spec.n_cond, ref(spec.cond), tuple(ref(r) for r in spec.nexts),
                    tuple(ref(r) for r in spec.saves), spec.input_statics, spec.shape_only)


def _conforms(inner: tuple, outer: tuple) -> bool:
    """Whether a value of static shape `inner` always has static shape `outer` (-1: any size)."""
    return len(inner) == len(outer) and all(o == -1 or i == o for i, o in zip(inner, outer))


def _trusted_statics(spec: LoopSpec) -> LoopSpec:
    """`spec` as is when every loop variable's next value has (at least) the variable's static
    shape, as `while_loop` requires; else with no static shapes (the generated code then works
    every broadcast out at run time), since only the first iteration's values are checked."""
    def statics(ref):
        if ref[0] == "i":
            return spec.input_statics[ref[1]] if ref[1] < len(spec.input_statics) else ()
        st = spec.nodes[ref[1]].statics
        return st[ref[2]] if ref[2] < len(st) else ()
    if all(spec.inputs[k][1] == 0 or _conforms(statics(r), statics(("i", k))) for k, r in enumerate(spec.nexts)):
        return spec
    nodes = tuple(Node(nd.op, nd.attrs, nd.args, nd.dtypes, nd.ranks) for nd in spec.nodes)
    return LoopSpec(spec.inputs, spec.n_vars, nodes, spec.n_cond, spec.cond, spec.nexts, spec.saves)


def random_streams(spec) -> int:
    """How many random ops' streams loop `spec` draws from (its arguments ``rs0``... after its inputs)."""
    return 1 + max((nd.attr("stream") for nd in spec.nodes if nd.attr("stream") is not None), default=-1)


# ops whose compiled form may be a view that is not C-contiguous (a loop variable must be)
_VIEWS = frozenset({"Split", "SplitV", "Transpose"})


def _may_be_view(spec, ref) -> bool:
    while ref[0] == "n":
        node = spec.nodes[ref[1]]
        if node.op in _VIEWS:
            return True
        if node.op not in ("Identity", "Snapshot", "StopGradient"):
            return False
        ref = node.args[0]
    return False        # the kernel's arguments are C-contiguous (JitKernel makes them so)


def loop_source(spec: LoopSpec) -> str:
    """The source of `kernel(*inputs)` running a whole while loop: returns the loop variables'
    final values followed by the histories of the saved values (a tuple), and the number of
    iterations run. A history grows by doubling; row `it` holds iteration `it`'s value, and every
    row must have the shape of the first."""
    spec = _trusted_statics(_scatter_in_place(_accumulate_in_place(spec)))
    n = len(spec.inputs)
    params = ", ".join([f"a{i}" for i in range(n)] + [f"rs{k}" for k in range(random_streams(spec))] + ["stop", "blas"])
    name_of, type_of = _resolver(spec, lambda k: f"v{k}" if k < spec.n_vars else f"a{k}")
    header = _HEADER.format(what=f"while loop of {len(spec.nodes)} ops", params=params)
    lines = [header.replace("import numba\n", f"import numba\n{_STOP_IMPORT}\n", 1)]
    for k in range(spec.n_vars):
        lines.append(f"    v{k} = a{k}")
    for j, r in enumerate(spec.saves):
        d, rank = type_of(r)
        # (a reshaped 1-D array: rt.empty compiles once per rank and dtype, and is cached)
        zeros = "np.int64(0), " * (rank + 1)
        lines.append(f"    h{j} = _rt.reshape({empty(['np.int64(0)'], d)}, ({zeros}))")
    lines.append("    it = 0")
    lines.append("    while True:")
    lines += stop_lines("        ")
    needed = (spec.cond,) + tuple(spec.nexts) + tuple(spec.saves)
    lines += _emit(spec.nodes, name_of, type_of, needed, "        ", range(spec.n_cond))
    lines.append(f"        if not {name_of(spec.cond)}:")
    lines.append("            break")
    lines += _emit(spec.nodes, name_of, type_of, needed, "        ", range(spec.n_cond, len(spec.nodes)))
    for j, r in enumerate(spec.saves):
        lines += _save_lines(j, name_of(r), type_of(r))
    nexts = [name_of(r) for r in spec.nexts]
    for k, x in enumerate(nexts):
        # a loop variable keeps one numba type: C-contiguous arrays (views become copies)
        rank = spec.inputs[k][1]
        if not rank:
            lines.append(f"        t{k} = {dt(spec.inputs[k][0])}({x})")
        elif _may_be_view(spec, spec.nexts[k]):
            lines.append(f"        t{k} = {x}.copy()")     # C order (cheaper to compile than np.ascontiguousarray)
        else:
            lines.append(f"        t{k} = {x}")
    for k in range(len(nexts)):
        lines.append(f"        v{k} = t{k}")
    lines.append("        it += 1")
    outs = [f"v{k}" for k in range(spec.n_vars)] + [f"h{j}[:it]" for j in range(len(spec.saves))]
    lines.append(f"    return ({''.join(o + ', ' for o in outs)}), it")
    return _without_unused_rt("\n".join(lines) + "\n")


# A loop's last argument is its step's stop cell (kernels/interrupt.py), checked before every
# CHECK_EVERY-th iteration: a stopped loop returns what it has, and its JitKernel raises.
_STOP_IMPORT = "from actorflow.scheduler.jit.stopcheck import stopped as _stopped"


def stop_lines(ind: str) -> list:
    """The check of the stop cell `stop` at the top of a loop's iteration (counter `it`)."""
    from actorflow.kernels.interrupt import CHECK_EVERY
    return [f"{ind}if (it & {CHECK_EVERY - 1}) == 0 and _stopped(stop):", f"{ind}    break"]


def _save_lines(j: int, x: str, typ) -> list:
    """Row `it` of history h{j} becomes `x` (`rt.save_row` doubles the history when it is full)."""
    fn = "save_row" if typ[1] else "save_scalar"
    return [f"        h{j} = _rt.{fn}(h{j}, it, {x})"]
