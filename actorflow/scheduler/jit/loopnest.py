"""Explicit loop nests for the element-wise part of a cluster (what XLA calls loop fusion).

An element-wise node consumed by exactly one element-wise node (or one reduction) and not needed
outside is *inlined*: it becomes one scalar statement inside its consumer's innermost loop, so
its value never reaches memory. Every other element-wise node of rank > 0 is *materialized*: one
loop nest over its broadcast shape writes it to a new array, computing its whole inlined subtree
per element. A reduction runs one loop nest over its input's shape, inlining the input's subtree
and accumulating into its output (reduce fusion). Rank-0 values are plain scalar statements.
Broadcasting follows numpy: the loop shape is the broadcast of the subtree's array leaves
(inputs, materialized nodes, results of other ops), a leaf's size-1 dimensions are read at index
0 (through a 0/1 multiplier per dimension), and a mismatch raises ValueError.

Explicit loops compile several times faster than numba's array expressions, and run as fast.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SCALAR", "REDUCE", "emit_block"]

FLOATS = ("float32", "float64")


def dt(name: str) -> str:
    return "np.bool_" if name == "bool" else f"np.{name}"


# Scalar expressions per element-wise op ({0}, {1}...: argument names; {one}/{zero}: typed
# literals of the first argument's dtype). Same operations, same order as the numpy kernels.
_MAX = "({0} if ({0} >= {1} or {0} != {0}) else {1})"
_MIN = "({0} if ({0} <= {1} or {0} != {0}) else {1})"
SCALAR = {
    "Neg": "(-{0})", "Abs": "abs({0})", "Exp": "np.exp({0})", "Log": "np.log({0})", "Log1p": "np.log1p({0})",
    "Expm1": "np.expm1({0})", "Sin": "np.sin({0})", "Cos": "np.cos({0})", "Sqrt": "np.sqrt({0})",
    "Tanh": "np.tanh({0})", "Floor": "np.floor({0})", "Ceil": "np.ceil({0})", "Square": "({0} * {0})",
    "Sign": "np.sign({0})", "IsNan": "np.isnan({0})", "IsFinite": "np.isfinite({0})", "IsInf": "np.isinf({0})",
    "LogicalNot": "(not {0})", "Reciprocal": "({one} / {0})", "Rsqrt": "({one} / np.sqrt({0}))",
    "Relu": "({0} if ({0} >= {zero} or {0} != {0}) else {zero})",
    "Sigmoid": "({one} / (np.exp(-{0}) + {one}))",
    "Tan": "np.tan({0})", "Asin": "np.arcsin({0})", "Acos": "np.arccos({0})", "Atan": "np.arctan({0})",
    "Sinh": "np.sinh({0})", "Cosh": "np.cosh({0})", "Asinh": "np.arcsinh({0})", "Acosh": "np.arccosh({0})",
    "Atanh": "np.arctanh({0})", "Atan2": "np.arctan2({0}, {1})",
    # (C's erf, erfc and lgamma, float32 ones for float32: numba has no scipy.special; digamma and
    # polygamma have no C counterpart and stay interpreted)
    "Erf": "_math.erf({0})", "Erfc": "_math.erfc({0})", "Lgamma": "_math.lgamma({0})",
    "Add": "({0} + {1})", "AddV2": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})",
    "RealDiv": "({0} / {1})", "Div": "({0} / {1})", "Maximum": _MAX, "Minimum": _MIN, "Pow": "({0} ** {1})",
    "SquaredDifference": "(({0} - {1}) * ({0} - {1}))",
    "Less": "({0} < {1})", "LessEqual": "({0} <= {1})", "Greater": "({0} > {1})", "GreaterEqual": "({0} >= {1})",
    "Equal": "({0} == {1})", "NotEqual": "({0} != {1})", "LogicalAnd": "({0} and {1})",
    "LogicalOr": "({0} or {1})",
    "ReluGrad": "({0} if {1} > {zero} else {zero})",
    "SigmoidGrad": "(({1} * {0}) * ({one} - {0}))",
    "TanhGrad": "(({one} - {0} * {0}) * {1})",
    "BiasAdd": "({0} + {1})",
    "Select": "({1} if {0} else {2})", "SelectV2": "({1} if {0} else {2})",
    "Identity": "{0}", "Snapshot": "{0}", "StopGradient": "{0}",
    # _Splat(v, x): v (one element: every static size 1) in an array of sizes taken from x's shape
    # (attr "dims": per output dimension, x's dimension, or -1 for a size of 1): a BroadcastTo of
    # a Shape, or an ExpandDims of that (codegen's `_splats`), computed in its consumer's loop
    "_Splat": "{0}",
}
ALIASES = frozenset({"Identity", "Snapshot", "StopGradient"})
ELEMENTWISE = (frozenset(SCALAR) | {"Cast", "AddN", "Const"}) - ALIASES
REDUCE = frozenset({"Sum", "Mean", "Prod", "Max", "Min", "All", "Any", "BiasAddGrad"})


def empty(dims, dtype: str) -> str:
    """The expression allocating an array of sizes `dims` (names or expressions of int64) and
    `dtype`, through `rt.empty` (see there why not ``np.empty``)."""
    return f"_rt.empty(({''.join(d + ', ' for d in dims)}), {dt(dtype)})"


def _lit(value, dtype):
    from actorflow.scheduler.jit.codegen import lit
    return lit(value, dtype)


def scalar_expr(node, args, arg_types) -> str:
    """The scalar expression of element-wise `node` on scalar names `args`, cast to its dtype."""
    out = node.dtypes[0]
    if node.op == "Const":
        return _lit(node.attr("value"), out)
    if node.op == "Cast":
        src = arg_types[0][0]
        if out == "bool":
            return f"({args[0]} != {_lit(0, src)})"
        return f"{dt(out)}({args[0]})"
    if node.op == "AddN":
        return f"{dt(out)}(" + " + ".join(args) + ")"
    first = arg_types[0][0] if node.op not in ("Select", "SelectV2") else arg_types[1][0]
    template = SCALAR[node.op]
    if first == "float32" and node.op in _FAST32:
        # (fastmath32: a form LLVM vectorizes, where np.exp and np.tanh of a float32 call libm per element)
        template = template.replace("np.exp(", "_exp32(").replace("np.tanh(", "_tanh32(")
    expr = template.format(*args, one=_lit(1, first), zero=_lit(0, first))
    return f"{dt(out)}({expr})"


_FAST32 = frozenset({"Exp", "Tanh", "Sigmoid"})


def _reduces(node, in_rank) -> bool:
    """Whether reduction `node` of an input of rank `in_rank` sums over any axis (one over none,
    a gradient's Sum over the axes of a broadcast that did not happen, is its input)."""
    if node.op == "BiasAddGrad":
        return in_rank > 1
    return in_rank > 0 and bool(node.attr("axes"))


class _Block:
    def __init__(self, nodes, name_of, type_of, needed, statics_of=None):
        self.nodes = nodes
        self.statics_of = statics_of or (lambda ref: ())    # ref -> static dimensions (spec.py)
        self.name_of = name_of          # ref -> name of an input (or an earlier block's value)
        self.type_of = type_of          # ref -> (dtype, rank)
        self.uses: dict = {}
        for n in nodes:
            for r in n.args:
                if r[0] == "n":
                    self.uses[(r[1], r[2])] = self.uses.get((r[1], r[2]), 0) + 1
        self.needed = {(r[1], r[2]) for r in needed if r[0] == "n"}
        self.inlined: set = set()       # node indices computed inside their consumer's loop
        for j, n in enumerate(nodes):
            if n.op in ELEMENTWISE and n.ranks[0] > 0 and (j, 0) not in self.needed and self.uses.get((j, 0)) == 1:
                consumer = next(k for k, m in enumerate(nodes) if any(r[0] == "n" and r[1] == j for r in m.args))
                c = nodes[consumer]
                if c.op == "_Splat" and c.args[0] != ("n", j, 0):
                    continue            # a splat reads nothing of its shape source but its shape
                if c.op in ELEMENTWISE or (c.op in REDUCE and c.args[0] == ("n", j, 0) and _reduces(c, n.ranks[0])):
                    self.inlined.add(j)
        self.tmp = 0
        self.fused: set = set()         # reductions accumulated in their input's nest (`_fusable`)
        self.allowed: set = set()       # the nodes of the block being emitted
        self.last_fused: list = []
        self.pre: list = []             # statements hoisted above the loop nest being written
        self.outer = ""                 # its indent

    def fresh(self, prefix):
        self.tmp += 1
        return f"_{prefix}{self.tmp}"

    def value(self, ref):
        """The name holding `ref` outside loops (an input, a scalar, an array)."""
        return self.name_of(ref)

    def leaves(self, j, out: list):
        """Array leaves (refs of rank > 0, not inlined) of node j's inlined subtree. A splat's
        shape source is not a leaf: each dimension of it that sizes the splat is, as
        ``("shape", ref, its dimension, the splat's dimension, the splat's rank)``."""
        node = self.nodes[j]
        args = node.args
        if node.op == "_Splat":
            for k, jx in enumerate(node.attr("dims")):
                e = ("shape", args[1], jx, k, node.ranks[0])
                if jx >= 0 and e not in out:
                    out.append(e)
            args = args[:1]
        for r in args:
            if r[0] == "n" and r[1] in self.inlined:
                self.leaves(r[1], out)
            elif self.type_of(r)[1] > 0 and r not in out:
                out.append(r)
        return out

    def subtree(self, j, idx_of, lines, indent, done):
        """Statements computing node j's scalar value at the loop index; returns its name."""
        node = self.nodes[j]
        if node.op == "_Splat" and self._invariant(node.args[0]):
            return self._hoisted(node, idx_of)
        args = []
        for r in (node.args[:1] if node.op == "_Splat" else node.args):
            if r[0] == "n" and r[1] in self.inlined:
                if r[1] not in done:
                    done[r[1]] = self.subtree(r[1], idx_of, lines, indent, done)
                args.append(done[r[1]])
            elif self.type_of(r)[1] > 0:
                args.append(idx_of(r))
            else:
                args.append(self.value(r))
        name = self.fresh("s")
        lines.append(f"{indent}{name} = {scalar_expr(node, args, [self.type_of(r) for r in node.args])}")
        return name

    def _invariant(self, v) -> bool:
        """Whether value `v` (inlined subtree or not) reads only elements [0, ..., 0]: every
        array leaf has static sizes of 1."""
        leaves = self.leaves(v[1], []) if v[0] == "n" and v[1] in self.inlined else [v]
        for r in leaves:
            if r[0] == "shape":
                return False
            st = self.statics_of(r)
            if len(st) != self.type_of(r)[1] or any(d != 1 for d in st):
                return False
        return True

    def _hoisted(self, node, idx_of) -> str:
        """A splat's element, computed once above the loop nest (into `pre`, which the caller puts
        there): inside the loop LLVM would compute it per element (it cannot tell that the arrays
        the loop writes do not alias what it reads)."""
        v = node.args[0]
        if v[0] == "n" and v[1] in self.inlined:
            val = self.subtree(v[1], idx_of, self.pre, self.outer, {})
        else:
            val = idx_of(v) if self.type_of(v)[1] > 0 else self.value(v)
        name = self.fresh("s")
        self.pre.append(f"{self.outer}{name} = {scalar_expr(node, [val], [self.type_of(r) for r in node.args])}")
        return name

    def take_pre(self, lines, pos) -> int:
        """Inserts the hoisted statements at `pos` of `lines`; returns how many."""
        n = len(self.pre)
        lines[pos:pos] = self.pre
        self.pre = []
        return n

    def loop(self, rank, leaves, lines, indent, what):
        """Opens a loop nest over the broadcast shape of `leaves` (rank `rank`); returns
        (dims, idx_of, body indent).

        Per dimension, a leaf's static size (spec.py) picks its index: a leaf of size 1 reads
        index 0; one of another known size is the loop's size; one of unknown size, when it is the
        only one there, is the loop's size too, else it goes through a 0/1 multiplier (numpy's
        broadcasting, worked out and checked at run time). Known sizes need no check: the kernel's
        arguments are checked against their static shapes before the call, and the ops' shape
        functions carry them through."""
        self.outer = indent
        dims = [self.fresh("d") for _ in range(rank)]
        by_dim: dict = {k: [] for k in range(rank)}
        for r in leaves:
            if r[0] == "shape":         # a dimension of a splat's shape source
                _, x, jx, k, sr = r
                st, xr = self.statics_of(x), self.type_of(x)[1]
                d = st[jx] if len(st) == xr else -1
                by_dim[rank - sr + k].append((f"{self.value(x)}.shape[{jx}]", 1 if d == 1 else (-1 if d < 0 else 0),
                                              r, jx, d))
                continue
            name, lr = self.value(r), self.type_of(r)[1]
            st = self.statics_of(r)
            for j in range(lr):
                d = st[j] if len(st) == lr else -1
                by_dim[rank - lr + j].append((f"{name}.shape[{j}]", 1 if d == 1 else (-1 if d < 0 else 0), r, j, d))
        how: dict = {}                  # (leaf, dim) -> "i" (the loop index), "0", or a multiplier
        unit = [False] * rank           # dimensions every leaf has as 1 (or lacks)
        checks = []
        for k in range(rank):
            ones = [e for e in by_dim[k] if e[1] == 1]
            full = [e for e in by_dim[k] if e[1] == 0]
            free = [e for e in by_dim[k] if e[1] == -1]
            for _x, _, r, j, _d in ones:
                how[(r, j)] = "0"
            # leaves of one symbol (symbolic.py) have one size, checked on entry: one free leaf
            one_symbol = len({e[4] for e in free}) == 1 and free[0][4] < -1
            if full or len(free) == 1 or one_symbol:
                first = (full or free)[0][0]
                lines.append(f"{indent}{dims[k]} = {first}")
                for _x, _, r, j, _d in full + free:
                    how[(r, j)] = "i"
                if full:
                    for x, _, r, j, _d in free:
                        checks.append(f"(({x} != 1) & ({x} != {dims[k]}))")
                        how[(r, j)] = self._mult(lines, indent, x)
                continue
            if not free:
                lines.append(f"{indent}{dims[k]} = np.int64(1)")
                unit[k] = True
                continue
            sizes = [e[0] for e in free]
            lines.append(f"{indent}{dims[k]} = {sizes[0]}")
            for x in sizes[1:]:         # (not max(): numba compiles its overload in every process)
                lines.append(f"{indent}if {x} > {dims[k]}:")
                lines.append(f"{indent}    {dims[k]} = {x}")
            lines.append(f"{indent}if {' or '.join(x + ' == 0' for x in sizes)}:")
            lines.append(f"{indent}    {dims[k]} = 0")
            for x, _, r, j, _d in free:
                checks.append(f"(({x} != 1) & ({x} != {dims[k]}))")
                how[(r, j)] = self._mult(lines, indent, x)
        if checks:
            lines.append(f"{indent}if {' | '.join(checks)}:")
            lines.append(f"{indent}    raise ValueError('{what}: operands could not be broadcast together')")
        ivars = [self.fresh("i") for _ in range(rank)]
        self.pos = len(lines)           # where allocations go: just above the loops
        ind = indent
        for k in range(rank):
            if unit[k]:                 # a dimension of size 1: no loop, index 0
                ivars[k] = "0"
                continue
            lines.append(f"{ind}for {ivars[k]} in range({dims[k]}):")
            ind += "    "

        def idx_of(r):
            name, lr = self.value(r), self.type_of(r)[1]
            parts = []
            for j in range(lr):
                h, i = how[(r, j)], ivars[rank - lr + j]
                parts.append(i if h == "i" else ("0" if h == "0" else f"{i} * {h}"))
            return f"{name}[{', '.join(parts)}]"
        return dims, ivars, idx_of, ind

    def _mult(self, lines, indent, size):
        m = self.fresh("m")
        lines.append(f"{indent}{m} = 0 if {size} == 1 else 1")
        return m


def emit_block(nodes, name_of, type_of, needed, emit_other, indent="    ", span=None, statics_of=None) -> list:
    """Lines computing `nodes` (topological); inlined element-wise nodes get no name of their own.
    `needed`: refs used after the block (outputs, loop variables); `emit_other(j, node)` gives
    the lines of a node that is neither element-wise nor a reduction (array-level numpy code).

    Element-wise nodes of one static shape share one loop nest (XLA's multi-output fusion): a
    node of the shape the open nest runs over joins it, and reads the values of earlier members at
    the same index; a node that needs none of the nest's values goes above it. Fewer nests, less
    code for numba to compile."""
    b = _Block(nodes, name_of, type_of, needed, statics_of)
    order = span if span is not None else range(len(nodes))
    b.allowed = set(order)
    lines: list = []
    group = None                        # the open nest: its shape, index names, indent, where lines go above it
    for j in order:
        node = nodes[j]
        if j in b.inlined or j in b.fused:
            continue
        key = _static_shape(b, j)
        # (a node reading a reduction that accumulates in the open nest waits for the nest's end)
        if group is not None and key == group["key"] and not (_reads(b, j) & group["fused"]):
            name = name_of(("n", j, 0))
            body: list = []
            v = b.subtree(j, group["idx"], body, group["ind"], {})
            lines.insert(group["pos"], f"{indent}{name} = {empty(group['dims'], node.dtypes[0])}")
            group["pos"] += 1
            lines += body
            lines.append(f"{group['ind']}{name}[{', '.join(group['ivars'])}] = {v}")
            group["members"].add(j)
            continue
        if group is not None and not (_reads(b, j) & group["members"]):
            own = _emit_node(b, j, node, indent, emit_other)
            lines[group["pos"]:group["pos"]] = own
            group["pos"] += len(own)
            continue
        group = None
        own = _emit_node(b, j, node, indent, emit_other)
        if key is not None:
            group = {"key": key, "dims": b.last_dims, "ivars": b.last_ivars, "ind": b.last_ind,
                     "pos": len(lines) + b.pos, "members": {j, *b.last_fused}, "fused": set(b.last_fused),
                     "idx": _static_index(b, b.last_ivars)}
        lines += own
    return lines


def _static_shape(b: _Block, j):
    """The static shape of element-wise node j when it and every array its loop reads have fully
    known static shapes, sizes or symbols, each leaf's the node's or 1 in every dimension (it can
    then share a loop nest with others of that shape); else None."""
    node = b.nodes[j]
    if node.op not in ELEMENTWISE or node.ranks[0] == 0 or _splat_in(b, j):
        return None
    st = node.statics[0] if node.statics else ()
    if len(st) != node.ranks[0] or any(d == -1 for d in st):
        return None
    for r in b.leaves(j, []):
        lst = b.statics_of(r)
        if len(lst) != b.type_of(r)[1] or len(lst) > len(st):
            return None
        if any(d != 1 and d != st[len(st) - len(lst) + k] for k, d in enumerate(lst)):
            return None
    return st


def _splat_in(b: _Block, j) -> bool:
    """Whether node j or its inlined subtree has a splat (whose sizes are not its leaves')."""
    todo = [j]
    while todo:                         # (iterative: an inlined chain can be hundreds long)
        node = b.nodes[todo.pop()]
        if node.op == "_Splat":
            return True
        todo += [r[1] for r in node.args if r[0] == "n" and r[1] in b.inlined]
    return False


def _static_index(b: _Block, ivars):
    """Indexing of a leaf of fully known static shape in a nest over `ivars`."""
    rank = len(ivars)

    def idx_of(r):
        st, lr = b.statics_of(r), b.type_of(r)[1]
        parts = ["0" if st[k] == 1 else ivars[rank - lr + k] for k in range(lr)]
        return f"{b.value(r)}[{', '.join(parts)}]"
    return idx_of


def _reads(b: _Block, j) -> set:
    """The nodes whose stored values node j reads (through its inlined subtree)."""
    out = set()
    for r in b.nodes[j].args:
        if r[0] == "n":
            out |= _reads(b, r[1]) if r[1] in b.inlined else {r[1]}
    return out


def _emit_node(b: _Block, j, node, indent, emit_other) -> list:
    """The lines of node j on their own (a nest of its own for an element-wise array)."""
    b.last_fused = []
    name = b.name_of(("n", j, 0))
    if node.op in ELEMENTWISE and node.ranks[0] == 0:
        args = [b.value(r) for r in node.args]
        return [f"{indent}{name} = {scalar_expr(node, args, [b.type_of(r) for r in node.args])}"]
    if node.op in ELEMENTWISE:
        lines: list = []
        leaves = b.leaves(j, [])
        dims, ivars, idx_of, ind = b.loop(node.ranks[0], leaves, lines, indent, node.op)
        b.last_dims, b.last_ivars, b.last_ind = dims, ivars, ind
        body: list = []
        v = b.subtree(j, idx_of, body, ind, {})
        b.pos += b.take_pre(lines, b.pos)
        lines.insert(b.pos, f"{indent}{name} = {empty(dims, node.dtypes[0])}")
        b.pos += 1
        lines += body
        lines.append(f"{ind}{name}[{', '.join(ivars)}] = {v}")
        b.last_fused = _fusable(b, j, b.allowed)
        for k in b.last_fused:          # reductions of j, accumulated at j's index
            red = b.nodes[k]
            rname = b.name_of(("n", k, 0))
            pre, acc, _ = _accumulator(red, rname, node.ranks[0], dims, ivars, indent, direct=True)
            lines[b.pos:b.pos] = pre
            b.pos += len(pre)
            lines.append(f"{ind}{acc} = {dt(red.dtypes[0])}({_ACC[red.op].format(a=acc, v=v)})")
            b.fused.add(k)
        return lines
    if node.op in REDUCE:
        return _reduce(b, j, node, name, indent)
    return [indent + ln for ln in emit_other(j, node)]


_INIT = {"Sum": 0, "Mean": 0, "BiasAddGrad": 0, "Prod": 1, "All": True, "Any": False}
_ACC = {"Sum": "({a} + {v})", "Mean": "({a} + {v})", "BiasAddGrad": "({a} + {v})", "Prod": "({a} * {v})",
        "Max": _MAX.replace("{0}", "{a}").replace("{1}", "{v}"), "Min": _MIN.replace("{0}", "{a}").replace("{1}", "{v}"),
        "All": "({a} and {v})", "Any": "({a} or {v})"}


def _axes(node, in_rank):
    """(the axes reduction `node` sums over, keep_dims) for an input of rank `in_rank`."""
    if node.op == "BiasAddGrad":
        return tuple(range(in_rank - 1)), False
    axes = tuple(sorted({a % in_rank for a in node.attr("axes")})) if in_rank else ()
    return axes, bool(node.attr("keep_dims"))


def _accumulator(node, name, in_rank, dims, ivars, indent, direct=False):
    """A reduction's statements around a loop nest over its input (sizes `dims`, indices
    `ivars`): (those above the nest, the accumulator inside it at the nest's index, the output's
    rank). A scalar result accumulates in `{name}_acc` (`direct`: in `name`)."""
    out_dt = node.dtypes[0]
    axes, keep = _axes(node, in_rank)
    if node.op in ("Max", "Min"):
        big = np.inf if out_dt in FLOATS else (np.iinfo(out_dt).max if out_dt != "bool" else 1)
        init = _lit(-big if node.op == "Max" else big, out_dt)
    else:
        init = _lit(_INIT[node.op], out_dt)
    kept = [k for k in range(in_rank) if k not in axes]
    out_rank = len(kept) + (len(axes) if keep else 0)
    if out_rank == 0:
        acc = name if direct else f"{name}_acc"
        return [f"{indent}{acc} = {init}"], acc, 0
    shape = [dims[k] if k in kept else "np.int64(1)" for k in range(in_rank)] if keep else [dims[k] for k in kept]
    oidx = [ivars[k] if k in kept else "0" for k in range(in_rank)] if keep else [ivars[k] for k in kept]
    return [f"{indent}{name} = _rt.fill({empty(shape, out_dt)}, {init})"], f"{name}[{', '.join(oidx)}]", out_rank


def _fusable(b: _Block, j, allowed) -> list:
    """The reductions (in `allowed`) of all of materialized element-wise node j, but Means (they
    divide after the loop), that can accumulate inside j's own loop nest: its value at each index,
    in the order their own nest would read it (the same sums, bit for bit), with no second nest
    and no second pass over j's array."""
    rank = b.nodes[j].ranks[0]
    return [k for k, m in enumerate(b.nodes) if k in allowed and m.op in REDUCE and m.op != "Mean"
            and m.args and m.args[0] == ("n", j, 0) and _reduces(m, rank)]


def _reduce(b: _Block, j, node, name, indent) -> list:
    src = node.args[0]
    in_rank = b.type_of(src)[1]
    out_dt = node.dtypes[0]
    axes, _keep = _axes(node, in_rank)
    if in_rank == 0 or not axes:
        return [f"{indent}{name} = {b.value(src)}"]
    lines: list = []
    if src[0] == "n" and src[1] in b.inlined:
        leaves = b.leaves(src[1], [])
    else:
        leaves = [src] if in_rank > 0 else []
    dims, ivars, idx_of, ind = b.loop(in_rank, leaves, lines, indent, node.op)
    first_for = b.pos
    pre, acc, out_rank = _accumulator(node, name, in_rank, dims, ivars, indent)
    lines[first_for:first_for] = pre
    body: list = []
    if src[0] == "n" and src[1] in b.inlined:
        v = b.subtree(src[1], idx_of, body, ind, {})
        b.take_pre(lines, first_for)
    else:
        v = idx_of(src)
    lines += body
    lines.append(f"{ind}{acc} = {dt(out_dt)}({_ACC[node.op].format(a=acc, v=v)})")
    if node.op == "Mean":
        count = " * ".join(dims[k] for k in axes)
        if out_rank == 0:
            lines.append(f"{indent}{name}_acc = {dt(out_dt)}({name}_acc / {dt(out_dt)}({count}))")
        else:
            lines.append(f"{indent}_rt.div_all({name}, {dt(out_dt)}({count}))")
    if out_rank == 0:
        lines.append(f"{indent}{name} = {name}_acc")
    return lines
