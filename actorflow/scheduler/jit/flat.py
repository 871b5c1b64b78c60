"""Static loops: a while loop whose every array has a fully known static shape, compiled over flat
buffers (no array is created inside the compiled code).

numba's compile time follows the number of array values a function handles: each ``np.empty``,
view and helper call is typed, lowered to reference-counted array structs and optimized by LLVM
(an LSTM cell's loop and its gradient loop: about 1.2 s each). When every shape is static, no
value needs to be an array of its own: a value is a *layout*, a (buffer, offset, strides) triple
over one of a few flat buffers, and an element of it is ``buffer[offset + i * stride + ...]``,
so the generated code is scalar loops over buffers the caller passes in:

- the loop variables' own buffers (flat copies `JitKernel` makes), updated at the end of each
  iteration (or in place: `_AccMatMul`);
- the invariants, flattened (a history a gradient loop reads is one of them: a row is an offset);
- one work buffer per dtype, holding every intermediate at a fixed offset;
- one flat buffer per saved value's history, of `cap` rows; the function returns when it is
  full (before running an iteration) and `JitKernel` calls it again with a history twice as long.

Views (Split, SplitV, Transpose, Reshape of a contiguous value, a history's row) are layouts of
their source, with no code at all; GEMMs and concatenations are explicit loops over static
bounds; element-wise nodes and reductions fuse as in `loopnest`. Every op does the interpreted
kernel's arithmetic in the same order (the GEMM as `rt.gemm` does), so results agree bit for bit
with the general code. `flat_loop(spec)` is None for a loop this cannot compile (a shape not
fully static, or an op without a flat form): the general code (codegen.py) compiles it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from actorflow.scheduler.jit import loopnest
from actorflow.scheduler.jit.codegen import (
    _STOP_IMPORT,
    _accumulate_in_place,
    _scatter_in_place,
    _trusted_statics,
    dt,
    index_check,
    lit,
    stop_lines,
    with_fastmath,
)
from actorflow.scheduler.jit.spec import LoopSpec

_BLAS_IMPORT = "from actorflow.scheduler.jit.blascall import gemm as _blas_gemm"

__all__ = ["FlatLoop", "flat_loop"]


@dataclass(frozen=True, slots=True)
class FlatLoop:
    """A static loop's compiled form, and how to call it.

    The function is ``kernel(*args, *histories, cap, it0, *work, stop)``: `args` the loop's inputs
    (arrays flattened, scalars as scalars), `histories` one flat buffer of `cap` rows per saved
    value, `it0` the iteration to start from, `work` one buffer per (dtype, size) of `work`, `stop`
    the step's stop cell (kernels/interrupt.py: a set cell ends the loop early). It
    returns ``(iterations, done, *scalar loop variables)``; array loop variables are updated in
    their buffers; `done` is False when the histories are full.
    """
    source: str
    sig: tuple          # (dtype, rank) per parameter of the function
    n_vars: int
    shapes: tuple       # per loop variable: its static shape (() for a scalar)
    rows: tuple         # per history: (dtype, static shape of a row)
    work: tuple         # per work buffer: (dtype, size)


class _Unsupported(Exception):
    pass


def _c_strides(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Lay:
    """Where an array value's elements are: ``arr[off + sum(index * stride)]``."""
    __slots__ = ("arr", "off", "shape", "strides")

    def __init__(self, arr, off, shape, strides=None):
        self.arr, self.off, self.shape = arr, off, tuple(shape)
        self.strides = _c_strides(self.shape) if strides is None else tuple(strides)

    def contiguous(self) -> bool:
        return all(s == c for d, s, c in zip(self.shape, self.strides, _c_strides(self.shape)) if d != 1)

    def at(self, idx) -> str:
        """The element at index expressions `idx` ("0" for a first index)."""
        terms = [] if self.off == "0" else [self.off]
        for i, s, d in zip(idx, self.strides, self.shape):
            if i == "0" or d == 1:
                continue
            terms.append(i if s == 1 else f"{i} * {s}")
        return f"{self.arr}[{' + '.join(terms) or '0'}]"


def _row_offset(lay: "_Lay", ix: str) -> str:
    """The offset of row `ix` (along axis 0) of contiguous layout `lay`."""
    size = _size(lay.shape[1:])
    base = ix if size == 1 else f"{ix} * {size}"
    return f"({base})" if lay.off == "0" else f"({lay.off} + {base})"


def _plus(off: str, n: int) -> str:
    if not n:
        return off
    return str(n) if off == "0" else f"{off} + {n}"


class _Gen:
    def __init__(self, spec: LoopSpec):
        self.spec = spec
        self.nodes = spec.nodes
        self.lay: dict = {}             # ref -> _Lay (arrays) ; scalars are named by `name`
        self.work: dict = {}            # dtype -> words used
        self.fresh_n = 0
        self.hist_in: set = set()       # invariants read only as histories (any number of rows)
        self.checked: set = set()       # the indices at which history reads are checked
        self.bases: set = set()         # names of the offsets of rows read from histories
        self.row_sizes: set = set()     # row sizes of the histories written (see `row_at`)
        self.uses_blas = False          # a GEMM calls cblas (blascall.py)
        for k, (_, r) in enumerate(spec.inputs):
            st = self._statics(("i", k))
            if r == 0:
                continue
            uses = [(n.op, pos) for n in spec.nodes for pos, a in enumerate(n.args) if a == ("i", k)]
            if (k >= spec.n_vars and uses and all(u == ("_HistoryRead", 0) for u in uses)
                    and len(st) == r and all(x > 0 for x in st[1:])):
                self.hist_in.add(k)
            elif len(st) == r and all(x > 0 for x in st):
                self.lay[("i", k)] = _Lay(f"a{k}", "0", st)
            else:               # (an empty dimension too: nothing to gain, and rows of no size)
                raise _Unsupported(f"input {k} has no static shape")
        for nd in spec.nodes:
            for o, rank in enumerate(nd.ranks):
                st = nd.statics[o] if o < len(nd.statics) else ()
                if rank and (len(st) != rank or any(x <= 0 for x in st)):
                    raise _Unsupported(f"{nd.op} has no static shape")

    # -- names, types, shapes ---------------------------------------------------------------
    def _statics(self, ref):
        if ref[0] == "i":
            st = self.spec.input_statics
            return st[ref[1]] if ref[1] < len(st) else ()
        st = self.nodes[ref[1]].statics
        return st[ref[2]] if ref[2] < len(st) else ()

    def type_of(self, ref):
        if ref[0] == "i":
            return tuple(self.spec.inputs[ref[1]])
        nd = self.nodes[ref[1]]
        return nd.dtypes[ref[2]], nd.ranks[ref[2]]

    def name(self, ref) -> str:
        """The name of a scalar value."""
        if ref[0] == "i":
            return f"v{ref[1]}" if ref[1] < self.spec.n_vars else f"a{ref[1]}"
        return f"n{ref[1]}_{ref[2]}"

    def fresh(self, p):
        self.fresh_n += 1
        return f"_f{p}{self.fresh_n}"         # (loopnest's names are _s1, _s2...)

    def alloc(self, dtype, shape) -> _Lay:
        """A new region of the work buffer of `dtype`, starting on a cache line (the buffer does:
        `JitKernel` allocates it so)."""
        line = max(1, 64 // np.dtype(dtype).itemsize)
        off = -(-self.work.get(dtype, 0) // line) * line
        self.work[dtype] = off + _size(shape)
        return _Lay(f"w_{dtype}", str(off), shape)

    def plan_regions(self):
        """Values written straight where they end up: a value whose only use is a concatenation
        goes into its piece of the result, and a saved value into its row of the history (the
        row exists: the function returns before an iteration when the histories are full)."""
        sp = self.spec
        uses: dict = {}
        for r in [a for nd in sp.nodes for a in nd.args] + [sp.cond] + list(sp.nexts) + list(sp.saves):
            uses[r] = uses.get(r, 0) + 1
        self.piece_of: dict = {}        # node -> (the ConcatV2 node, start along its axis, axis)
        self.saved_at: dict = {}        # node -> the history it is written in
        self.in_place: set = set()      # histories whose rows are written in place

        def placeable(r):
            return (r[0] == "n" and r[2] == 0 and r[1] not in self.b.inlined and self.nodes[r[1]].ranks[0] > 0
                    and (self.nodes[r[1]].op in loopnest.ELEMENTWISE or self.nodes[r[1]].op in ("ConcatV2", "MatMul")))
        for c, nd in enumerate(sp.nodes):
            if nd.op != "ConcatV2":
                continue
            axis = nd.attr("axis") % nd.ranks[0]
            start = 0
            for r in nd.args:
                if placeable(r) and uses[r] == 1:
                    self.piece_of[r[1]] = (c, start, axis)
                start += self._statics(r)[axis]
        # A saved value computed in an element-wise nest is copied to its history row after the body,
        # not written there: a store at the row's run-time offset into one more buffer made LLVM
        # give up vectorizing the nest (an LSTM cell of batch 32, width 128: its loop 25.5 against
        # 14.7 ms for 100 steps). A GEMM's or a concatenation's result still goes straight there.
        for h, r in enumerate(sp.saves):
            if (placeable(r) and r[1] >= sp.n_cond and r[1] not in self.saved_at
                    and self.nodes[r[1]].op not in loopnest.ELEMENTWISE):
                self.saved_at[r[1]] = h
        self.hist_rows: dict = {}       # index ref -> {(history input, row size)} read at it
        for nd in sp.nodes:
            if nd.op == "_HistoryRead":
                self.hist_rows.setdefault(nd.args[1], set()).add((nd.args[0][1], _size(nd.statics[0])))

    def row_at(self, size) -> str:
        """The offset of row `it` of a history of rows of `size` (a name set once an iteration)."""
        self.row_sizes.add(size)
        return f"_frow{size}"

    def region(self, j) -> _Lay:
        """Where node j's (array) value is written (see `plan_regions`)."""
        ref = ("n", j, 0)
        if ref in self.lay:
            return self.lay[ref]
        nd = self.nodes[j]
        if j in self.piece_of:
            c, start, axis = self.piece_of[j]
            whole = self.region(c)
            lay = _Lay(whole.arr, _plus(whole.off, start * whole.strides[axis]), nd.statics[0], whole.strides)
        elif j in self.saved_at:
            self.in_place.add(self.saved_at[j])
            lay = _Lay(f"h{self.saved_at[j]}", self.row_at(_size(nd.statics[0])), nd.statics[0])
        else:
            lay = self.alloc(nd.dtypes[0], nd.statics[0])
        self.lay[ref] = lay
        return lay

    def copies(self, pairs, lines, ind):
        """`dst = src` for each (src, dst) of `pairs`, one loop nest per shape."""
        by_shape: dict = {}
        for src, dst in pairs:
            by_shape.setdefault(src.shape, []).append((src, dst))
        for shape, group in by_shape.items():
            idx, inner = self.loops(shape, lines, ind)
            lines += [f"{inner}{dst.at(idx)} = {src.at(idx)}" for src, dst in group]

    def loops(self, shape, lines, ind):
        """Opens loops over `shape` (none for a dimension of 1); returns (index names, indent)."""
        idx = []
        for d in shape:
            if d == 1:
                idx.append("0")
                continue
            i = self.fresh("i")
            lines.append(f"{ind}for {i} in range({d}):")
            ind += "    "
            idx.append(i)
        return idx, ind

    def leaf_at(self, ref, idx):
        """Element of array `ref` at the index `idx` of a nest it broadcasts into."""
        lay = self.lay[ref]
        lr = len(lay.shape)
        part = idx[len(idx) - lr:]
        return lay.at(["0" if d == 1 else i for d, i in zip(lay.shape, part)])

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> FlatLoop:
        sp = self.spec
        needed = (sp.cond,) + tuple(sp.nexts) + tuple(sp.saves)
        self.b = loopnest._Block(sp.nodes, self.name, self.type_of, needed, self._statics)
        self.plan_regions()
        for j, nd in enumerate(sp.nodes):
            if nd.op in loopnest.ELEMENTWISE and nd.ranks[0]:
                for r in self.b.leaves(j, []):
                    self._check_broadcast(r, nd.statics[0], nd.op)
        ind = "        "
        cond = self.block(range(sp.n_cond), ind)
        body = self.block(range(sp.n_cond, len(sp.nodes)), ind)
        n = len(sp.inputs)
        scalars = [k for k in range(sp.n_vars) if not sp.inputs[k][1]]
        rets = "".join(f", v{k}" for k in scalars)
        rows = []
        saves: list = []
        pairs = []
        for j, r in enumerate(sp.saves):
            d, rank = self.type_of(r)
            shape = self.lay[r].shape if rank else ()
            rows.append((d, shape))
            if not rank:
                saves.append(f"{ind}h{j}[it] = {self.name(r)}")
            elif j not in self.in_place:
                pairs.append((self.lay[r], _Lay(f"h{j}", self.row_at(_size(shape)), shape)))
        self.copies(pairs, saves, ind)
        nexts = self.next_lines(ind)
        work = tuple(sorted(self.work.items()))
        params = [f"a{k}" for k in range(n)] + [f"h{j}" for j in range(len(rows))] + ["cap", "it0"]
        params += [f"w_{d}" for d, _ in work] + ["stop", "blas"]
        lines = ["# generated by actorflow.scheduler.jit: static while loop of "
                 f"{len(sp.nodes)} ops (scheduler/jit/flat.py)",
                 "import numba", "import numpy as np", _STOP_IMPORT] + ([_BLAS_IMPORT] if self.uses_blas else []) + [
                 "", "",
                 '@numba.njit(nogil=True, cache=True, fastmath=False, error_model="numpy", no_cfunc_wrapper=True)',
                 f"def kernel({', '.join(params)}):"]
        lines += [f"    v{k} = a{k}" for k in scalars]
        lines += ["    it = it0", "    while True:"]
        lines += stop_lines(ind)
        lines += cond
        lines += [f"{ind}if not {self.name(sp.cond)}:", f"{ind}    break"]
        if rows:
            lines += [f"{ind}if it == cap:", f"{ind}    return it, False{rets}"]
            lines += [f"{ind}_frow{size} = it * {size}" for size in sorted(self.row_sizes)]
        lines += body + saves + nexts
        lines += [f"{ind}it += 1", f"    return it, True{rets}"]
        sig = tuple((d, 1 if r else 0) for d, r in sp.inputs) + tuple((d, 1) for d, _ in rows)
        sig += (("int64", 0), ("int64", 0)) + tuple((d, 1) for d, _ in work) + (("int64", 1), ("int64", 1))
        shapes = tuple(self.lay[("i", k)].shape if sp.inputs[k][1] else () for k in range(sp.n_vars))
        return FlatLoop(with_fastmath("\n".join(lines) + "\n"), sig, sp.n_vars, shapes, tuple(rows), work)

    def _check_broadcast(self, ref, shape, op):
        st = self._statics(ref)
        if len(st) > len(shape) or any(d not in (1, s) for d, s in zip(st, shape[len(shape) - len(st):])):
            raise _Unsupported(f"{op}: shapes do not broadcast statically")

    def next_lines(self, ind) -> list:
        """The loop variables' next values: scalars by name, arrays copied into their buffers
        (through the work buffer when the value is in another variable's buffer)."""
        sp = self.spec
        lines, stage, copies = [], [], []
        var_bufs = {f"a{k}" for k in range(sp.n_vars) if sp.inputs[k][1]}
        for k, r in enumerate(sp.nexts):
            if not sp.inputs[k][1]:
                lines.append(f"{ind}t{k} = {dt(sp.inputs[k][0])}({self.name(r)})")
                continue
            src, dst = self.lay[r], self.lay[("i", k)]
            if src.arr == dst.arr and src.off == dst.off and src.strides == dst.strides:
                continue                # updated in place (or unchanged)
            if src.shape != dst.shape:
                raise _Unsupported("a loop variable changes shape")
            if src.arr in var_bufs:
                tmp = self.alloc(sp.inputs[k][0], src.shape)
                stage.append((src, tmp))
                src = tmp
            copies.append((src, dst))
        self.copies(stage, lines, ind)  # (all of them before any variable's buffer changes)
        self.copies(copies, lines, ind)
        lines += [f"{ind}v{k} = t{k}" for k in range(sp.n_vars) if not sp.inputs[k][1]]
        return lines

    def block(self, span, ind) -> list:
        """Lines computing the nodes of `span`; consecutive element-wise nodes of one shape share
        a loop nest (as in `loopnest.emit_block`), and a node that reads none of the nest's
        members goes above it."""
        b = self.b
        lines: list = []
        group = None
        for j in span:
            nd = self.nodes[j]
            if j in b.inlined:
                continue
            ew = nd.op in loopnest.ELEMENTWISE and nd.ranks[0] > 0
            if ew and group is not None and nd.statics[0] == group["shape"]:
                body: list = []
                lines += self.elementwise(j, group["idx"], group["ind"], body) or body
                group["members"].add(j)
                continue
            if group is not None and not (loopnest._reads(b, j) & group["members"]):
                own = self.node(j, ind)
                lines[group["pos"]:group["pos"]] = own
                group["pos"] += len(own)
                continue
            group = None
            if ew:
                pos = len(lines)
                idx, inner = self.loops(nd.statics[0], lines, ind)
                body = []
                self.elementwise(j, idx, inner, body)
                lines += body
                group = {"shape": nd.statics[0], "idx": idx, "ind": inner, "pos": pos, "members": {j}}
                continue
            lines += self.node(j, ind)
        return lines

    def elementwise(self, j, idx, ind, body):
        """Appends to `body` the statements of element-wise node j at index `idx` of its nest."""
        out = self.region(j)
        v = self.b.subtree(j, lambda r: self.leaf_at(r, idx), body, ind, {})
        body.append(f"{ind}{out.at(idx)} = {v}")

    def node(self, j, ind) -> list:
        nd = self.nodes[j]
        if nd.op in loopnest.ELEMENTWISE:
            if nd.ranks[0]:
                lines: list = []
                idx, inner = self.loops(nd.statics[0], lines, ind)
                self.elementwise(j, idx, inner, lines)
                return lines
            args = [self.name(r) for r in nd.args]
            return [f"{ind}{self.name(('n', j, 0))} = "
                    f"{loopnest.scalar_expr(nd, args, [self.type_of(r) for r in nd.args])}"]
        if nd.op in loopnest.REDUCE:
            return self.reduce(j, ind)
        fn = getattr(self, "op_" + nd.op.lstrip("_"), None)
        if fn is None:
            raise _Unsupported(nd.op)
        return fn(j, nd, ind)

    # -- ops other than element-wise ----------------------------------------------------------
    def _alias(self, j, nd, ind):
        src = nd.args[0]
        if nd.ranks[0]:
            self.lay[("n", j, 0)] = self.lay[src]
            return []
        return [f"{ind}{self.name(('n', j, 0))} = {self.name(src)}"]
    op_Identity = op_Snapshot = op_StopGradient = _alias

    def op_Nop(self, j, nd, ind):
        return []

    def _view(self, j, nd, ind):
        """Reshape, ExpandDims, Squeeze: the source's buffer with the node's static shape (a copy
        first when the source is not contiguous)."""
        if not self.type_of(nd.args[0])[1]:     # a scalar to a shape of ones (a row index's [1, 1])
            out = self.lay[("n", j, 0)] = self.alloc(nd.dtypes[0], nd.statics[0])
            return [f"{ind}{out.at(['0'] * len(out.shape))} = {self.name(nd.args[0])}"]
        src = self.lay[nd.args[0]]
        lines: list = []
        if not src.contiguous():
            tmp = self.alloc(nd.dtypes[0], src.shape)
            idx, inner = self.loops(src.shape, lines, ind)
            lines.append(f"{inner}{tmp.at(idx)} = {src.at(idx)}")
            src = tmp
        self.lay[("n", j, 0)] = _Lay(src.arr, src.off, nd.statics[0])
        return lines
    op_Reshape = op_ExpandDims = op_Squeeze = _view

    def op_Transpose(self, j, nd, ind):
        src = self.lay[nd.args[0]]
        perm = tuple(nd.attr("perm"))
        self.lay[("n", j, 0)] = _Lay(src.arr, src.off, [src.shape[p] for p in perm], [src.strides[p] for p in perm])
        return []

    def _pieces(self, j, nd, sizes, axis):
        src = self.lay[nd.args[0]]
        start = 0
        for o, n in enumerate(sizes):
            off = start * src.strides[axis]
            shape = list(src.shape)
            shape[axis] = n
            base = src.off if not off else (str(off) if src.off == "0" else f"{src.off} + {off}")
            self.lay[("n", j, o)] = _Lay(src.arr, base, shape, src.strides)
            start += n
        if start != src.shape[axis]:
            raise _Unsupported(f"{nd.op}: the sizes do not add up")
        return []

    def op_Split(self, j, nd, ind):
        src = self.lay[nd.args[0]]
        axis = nd.attr("axis") % len(src.shape)
        n = len(nd.dtypes)
        if src.shape[axis] % n:
            raise _Unsupported("Split: not divisible")
        return self._pieces(j, nd, [src.shape[axis] // n] * n, axis)

    def op_SplitV(self, j, nd, ind):
        axis = nd.attr("axis") % nd.ranks[0]
        return self._pieces(j, nd, [st[axis] for st in nd.statics], axis)

    def op_ConcatV2(self, j, nd, ind):
        axis = nd.attr("axis") % nd.ranks[0]
        out = self.region(j)
        lines: list = []
        pairs = []
        start = 0
        for r in nd.args:
            src = self.lay[r]
            if not (r[0] == "n" and self.piece_of.get(r[1], (None,))[0] == j):     # (else written in place)
                shape = list(out.shape)
                shape[axis] = src.shape[axis]
                pairs.append((src, _Lay(out.arr, _plus(out.off, start * out.strides[axis]), shape, out.strides)))
            start += src.shape[axis]
        self.copies(pairs, lines, ind)
        return lines

    def op_HistoryRead(self, j, nd, ind):
        """Row `index` of a history (an invariant): an offset; an index out of range raises (the
        interpreted loop then runs, and its error names the op)."""
        h, i = nd.args
        k = h[1]
        if k not in self.hist_in:
            raise _Unsupported("a history read of a value that is not a history")
        row = nd.statics[0]
        size = _size(row)
        ix = self.name(i)
        lines = []
        if i not in self.checked:      # one check for every history read at this index
            self.checked.add(i)
            rows = " or ".join(f"{ix} >= a{h}.size // {n}" for h, n in sorted(self.hist_rows[i]))
            lines = [f"{ind}if {ix} < 0 or {rows}:",
                     f"{ind}    raise ValueError('no value was saved for this iteration')"]
        if not nd.ranks[0]:
            return lines + [f"{ind}{self.name(('n', j, 0))} = a{k}[{ix}]"]
        base = ix
        if size != 1:
            base = f"_fr{ix}_{size}"        # (once: not in every element's index)
            if base not in self.bases:
                self.bases.add(base)
                lines.append(f"{ind}{base} = {ix} * {size}")
        self.lay[("n", j, 0)] = _Lay(f"a{k}", base, row)
        return lines

    def _row_of(self, j, nd, src_ref, ix, ind) -> list:
        """Row `ix` (along axis 0) of array `src_ref` as node j's value, copied into its own region:
        the source may be a loop variable that a TensorScatterUpdate writes later in the iteration.
        An index out of range raises (the interpreted loop then runs, and its error names the op)."""
        src = self.lay[src_ref]
        if not src.contiguous():
            raise _Unsupported(f"{nd.op} of a value that is not contiguous")
        row = src.shape[1:]
        lines = index_check(ix, src.shape[0], nd.op, ind)
        off = _row_offset(src, ix)
        if not nd.ranks[0]:
            return lines + [f"{ind}{self.name(('n', j, 0))} = {src.arr}[{off}]"]
        out = self.region(j)
        self.copies([(_Lay(src.arr, off, row), _Lay(out.arr, out.off, row))], lines, ind)
        return lines

    def _fill(self, value):
        def op(j, nd, ind):
            if not nd.ranks[0]:
                return [f"{ind}{self.name(('n', j, 0))} = {lit(value, nd.dtypes[0])}"]
            out = self.region(j)
            lines: list = []
            idx, inner = self.loops(out.shape, lines, ind)
            lines.append(f"{inner}{out.at(idx)} = {lit(value, nd.dtypes[0])}")
            return lines
        return op

    def op_ZerosLike(self, j, nd, ind):
        return self._fill(0)(j, nd, ind)

    def op_OnesLike(self, j, nd, ind):
        return self._fill(1)(j, nd, ind)

    def op_GatherV2(self, j, nd, ind):
        return self._row_of(j, nd, nd.args[0], self.name(nd.args[1]), ind)

    def _index(self, ref, ind, lines) -> str:
        """A [1, 1] index array's element, as a scalar name."""
        ix = self.fresh("ix")
        lines.append(f"{ind}{ix} = {self.lay[ref].at(['0', '0'])}")
        return ix

    def op_GatherNd(self, j, nd, ind):
        lines: list = []
        ix = self._index(nd.args[1], ind, lines)
        return lines + self._row_of(j, nd, nd.args[0], ix, ind)

    def op_TensorScatterAdd(self, j, nd, ind):
        return self.op_TensorScatterUpdate(j, nd, ind, add=True)

    def op_TensorScatterUpdate(self, j, nd, ind, add=False):
        """Row idx[0, 0] of a loop variable's own buffer written (added to, `add`) in place
        (codegen._scatter_in_place says when that is safe); any other form is left to the general
        code."""
        t_ref, idx_ref, u_ref = nd.args
        t, u = self.lay[t_ref], self.lay[u_ref]
        if not nd.attr("in_place") or not t.contiguous() or tuple(u.shape) != (1,) + tuple(t.shape[1:]):
            raise _Unsupported(f"{nd.op} not in place")
        lines: list = []
        ix = self._index(idx_ref, ind, lines)
        row = t.shape[1:]
        lines += index_check(ix, t.shape[0], nd.op, ind)
        src, dst = _Lay(u.arr, u.off, row, u.strides[1:]), _Lay(t.arr, _row_offset(t, ix), row)
        if add:
            idx, inner = self.loops(row, lines, ind)
            lines.append(f"{inner}{dst.at(idx)} = {dst.at(idx)} + {src.at(idx)}")
        else:
            self.copies([(src, dst)], lines, ind)
        self.lay[("n", j, 0)] = t
        return lines

    def _blas_gemm(self, out, a, b, ta, tb, acc, dtype, ind) -> list:
        """out (+)= op(a) @ op(b) through cblas (blascall.py), each operand read in place at its
        address in its flat buffer (a layout with a unit stride in one dimension; else a copy)."""
        m, n = out.shape
        k = a.shape[0] if ta else a.shape[1]
        isz = np.dtype(dtype).itemsize
        lines: list = []

        def operand(lay):
            r, c = lay.shape
            s0, s1 = lay.strides
            if c == 1 or s1 == 1:
                return lay, 111, max(s0 if r > 1 else c, 1)
            if r == 1 or s0 == 1:
                return lay, 112, max(s1 if c > 1 else r, 1)
            tmp = self.alloc(dtype, lay.shape)
            self.copies([(lay, tmp)], lines, ind)
            return tmp, 111, max(c, 1)

        def addr(lay):
            return f"{lay.arr}.ctypes.data" + ("" if lay.off == "0" else f" + ({lay.off}) * {isz}")
        if not out.contiguous():
            raise _Unsupported("MatMul into a strided value")
        a, ca, lda = operand(a)
        b, cb, ldb = operand(b)
        ca, cb = (223 - ca if ta else ca), (223 - cb if tb else cb)
        self.uses_blas = True
        lines.append(f"{ind}_blas_gemm(blas, {ca}, {cb}, {m}, {n}, {k}, {lit(1, dtype)}, {addr(a)}, {lda}, {addr(b)}, "
                     f"{ldb}, {lit(1 if acc else 0, dtype)}, {addr(out)}, {max(n, 1)})")
        return lines

    def _gemm(self, out, a, b, ta, tb, acc, dtype, ind, use_blas=False) -> list:
        """out (+)= op(a) @ op(b), each sum in k's order from zero as `rt.gemm` does (a dot
        product along b's rows when b is transposed, else a row accumulated over k); through cblas
        for a product the JIT marked so (`use_blas`: the same call as the general code makes)."""
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if k != k2 or out.shape != (m, n):
            raise _Unsupported("MatMul: shapes differ")
        if use_blas:
            return self._blas_gemm(out, a, b, ta, tb, acc, dtype, ind)

        def av(i, q):
            return a.at([q, i] if ta else [i, q])

        zero = lit(0, dtype)
        lines: list = []
        if tb and k > 1:
            # b's transpose copied first, then rows accumulated over k (the same sums in the same
            # order, so the same bits): LLVM vectorizes those across the row, not the dot products
            # along b's rows (a float sum's order is fixed), which ran 5-7x slower
            bt = self.alloc(dtype, (k, n))
            (q, jj), inner = self.loops((k, n), lines, ind)
            lines.append(f"{inner}{bt.at([q, jj])} = {b.at([jj, q])}")
            b, tb = bt, False

        def bv(q, jj):
            return b.at([jj, q] if tb else [q, jj])
        (i,), ind1 = self.loops((m,), lines, ind)
        if tb or k == 1:                # (k == 1: the same sums, with no row to accumulate)
            (jj,), ind2 = self.loops((n,), lines, ind1)
            s = self.fresh("s")
            lines.append(f"{ind2}{s} = {zero}")
            (q,), ind3 = self.loops((k,), lines, ind2)
            lines.append(f"{ind3}{s} += {av(i, q)} * {bv(q, jj)}")
            lines.append(f"{ind2}{out.at([i, jj])} = {out.at([i, jj]) + ' + ' if acc else ''}{s}")
            return lines
        row = self.alloc(dtype, (1, n)) if acc else None
        dst = (lambda jj: row.at(["0", jj])) if acc else (lambda jj: out.at([i, jj]))
        (jj,), ind2 = self.loops((n,), lines, ind1)
        lines.append(f"{ind2}{dst(jj)} = {zero}")
        (q,), ind2 = self.loops((k,), lines, ind1)
        aik = self.fresh("s")
        lines.append(f"{ind2}{aik} = {av(i, q)}")
        (jj,), ind3 = self.loops((n,), lines, ind2)
        lines.append(f"{ind3}{dst(jj)} += {aik} * {bv(q, jj)}")
        if acc:
            (jj,), ind2 = self.loops((n,), lines, ind1)
            lines.append(f"{ind2}{out.at([i, jj])} = {out.at([i, jj])} + {dst(jj)}")
        return lines

    def op_MatMul(self, j, nd, ind):
        out = self.region(j)
        a, b = (self.lay[r] for r in nd.args)
        return self._gemm(out, a, b, bool(nd.attr("transpose_a")), bool(nd.attr("transpose_b")), False,
                          nd.dtypes[0], ind, bool(nd.attr("blas")))

    def op_AccMatMul(self, j, nd, ind):
        out = self.lay[("n", j, 0)] = self.lay[nd.args[0]]
        a, b = (self.lay[r] for r in nd.args[1:])
        return self._gemm(out, a, b, bool(nd.attr("transpose_a")), bool(nd.attr("transpose_b")), True,
                          nd.dtypes[0], ind, bool(nd.attr("blas")))

    def reduce(self, j, ind) -> list:
        """A reduction over its input's static shape, its (inlined) input computed per element."""
        nd = self.nodes[j]
        src = nd.args[0]
        in_shape = tuple(self._statics(src)) if self.type_of(src)[1] else ()
        out_dt = nd.dtypes[0]
        name = self.name(("n", j, 0))
        if nd.op == "BiasAddGrad":
            axes, keep = tuple(range(len(in_shape) - 1)), False
        else:
            axes = tuple(sorted({a % len(in_shape) for a in nd.attr("axes")})) if in_shape else ()
            keep = bool(nd.attr("keep_dims"))
        if not in_shape or not axes:
            return self._alias(j, nd, ind)
        if nd.op in ("Max", "Min"):
            big = np.inf if out_dt in loopnest.FLOATS else (np.iinfo(out_dt).max if out_dt != "bool" else 1)
            init = lit(-big if nd.op == "Max" else big, out_dt)
        else:
            init = lit(loopnest._INIT[nd.op], out_dt)
        kept = [d for d in range(len(in_shape)) if d not in axes]
        single = _size([in_shape[d] for d in axes]) == 1      # one element a result: no pass to initialize
        lines: list = []
        if nd.ranks[0]:
            out = self.lay[("n", j, 0)] = self.alloc(out_dt, nd.statics[0])
            if not single:
                (q,), inner = self.loops((_size(out.shape),), lines, ind)
                lines.append(f"{inner}{_Lay(out.arr, out.off, (_size(out.shape),)).at([q])} = {init}")
        elif not single:
            lines.append(f"{ind}{name}_acc = {init}")
        idx, inner = self.loops(in_shape, lines, ind)
        if src[0] == "n" and src[1] in self.b.inlined:
            v = self.b.subtree(src[1], lambda r: self.leaf_at(r, idx), lines, inner, {})
        else:
            v = self.leaf_at(src, idx)
        if nd.ranks[0]:
            oidx = [idx[d] if d in kept else "0" for d in range(len(in_shape))] if keep else [idx[d] for d in kept]
            acc = out.at(oidx)
        else:
            acc = f"{name}_acc"
        lines.append(f"{inner}{acc} = {dt(out_dt)}({loopnest._ACC[nd.op].format(a=init if single else acc, v=v)})")
        count = " * ".join(str(in_shape[d]) for d in axes)
        if nd.op == "Mean":
            if out_dt not in loopnest.FLOATS:
                raise _Unsupported("integer Mean")
            if nd.ranks[0] == 0:
                lines.append(f"{ind}{acc} = {dt(out_dt)}({acc} / {dt(out_dt)}({count}))")
            else:
                flat = _Lay(out.arr, out.off, (_size(out.shape),))
                (q,), inner = self.loops((_size(out.shape),), lines, ind)
                lines.append(f"{inner}{flat.at([q])} = {dt(out_dt)}({flat.at([q])} / {dt(out_dt)}({count}))")
        if nd.ranks[0] == 0:
            lines.append(f"{ind}{name} = {acc}")
        return lines


def flat_loop(spec: LoopSpec):
    """The static form of while loop `spec` (a `FlatLoop`), or None when some shape is not fully
    static or some op has no flat form (the general code of codegen.py compiles it then)."""
    spec = _trusted_statics(_scatter_in_place(_accumulate_in_place(spec)))
    try:
        return _Gen(spec).run()
    except _Unsupported:
        return None
