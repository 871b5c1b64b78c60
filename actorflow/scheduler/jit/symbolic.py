"""Symbolic dimensions of a loop's values: what makes a loop over an unknown batch size compile.

A while loop fed a batch of unknown size (``placeholder(float32, [None, 32])``, the usual RNN)
has values whose static shapes say ``(?, 32)``: the loop nests can index them, but its gradient
loop holds shape arithmetic done at run time (``Shape``, ``BroadcastGradientArgs``, ``Sum`` over
the axes it returns, ``Reshape`` back to a ``Shape``) that nothing compiles. Most of it is about
nothing: the gradient of ``a * b`` for two ``(?, 32)`` values reduces over no axis, when both
``?`` are the same batch size.

`infer` gives every unknown dimension of the values entering a loop (its variables, invariants
and the rows of the histories it reads) a symbol, and carries the symbols through the loop's ops
by their shape rules (element-wise broadcasting, MatMul, concatenation, splits, reshapes,
reductions). Where an op needs two unknown dimensions to be equal (``a * b``, the inner dimension
of a MatMul, the rows of a concatenation) their symbols are *unified*: the loop is compiled on
the assumption that they are, and `JitKernel` checks it on entry (the input dimensions with one
symbol must have one size; a call where some of them are 1, numpy broadcasting, gets a variant of
the loop analyzed with those dimensions 1 (`infer`'s `ones`); any other runs the interpreted
loop). The run-time shape ops
then fold: ``Shape(x)`` is x's symbolic shape, ``BroadcastGradientArgs`` of two symbolic shapes
is a constant (exactly the kernel's answer whatever size each symbol has at run time, or no
fold), a ``Sum`` over those axes is static, and a ``Reshape`` to the shape its input already has
is an identity. The loop variables must keep their symbolic shapes from one iteration to the
next (what `while_loop`'s shape invariants allow otherwise stays on the old path).

In a spec (spec.py) a symbol is a static size of ``-2 - k`` (k: the symbol's number, in order of
first appearance among the loop's inputs): one compiled function serves every batch size, and
its loop nests index dimensions of one symbol directly, without broadcasting code. A dimension
no rule can name keeps ``-1`` (unknown, as before).
"""
from __future__ import annotations

import numpy as np

from actorflow.scheduler.jit.loopnest import ELEMENTWISE

__all__ = ["NotSymbolic", "Shapes", "infer"]


class NotSymbolic(Exception):
    """The loop's shapes cannot be worked out symbolically (the loop keeps the old analysis)."""


class Sym:
    """An unknown dimension; `guard` when it is a dimension of an input, checkable on entry."""
    __slots__ = ("id", "guard")

    def __init__(self, id_, guard):
        self.id = id_
        self.guard = guard

    def __repr__(self):
        return f"s{self.id}"


_SAME = frozenset({"Cast", "Identity", "Snapshot", "StopGradient", "ZerosLike", "OnesLike", "Softmax",
                   "LogSoftmax"})
_REDUCE = frozenset({"Sum", "Mean", "Prod", "Max", "Min", "All", "Any"})
_FOLDED = frozenset({"Shape", "Size", "Rank", "BroadcastGradientArgs"})


class Shapes:
    """The result of `infer`: symbolic shapes, folded values and the ops that fold away.

    - `shape[t]`: a tuple of ints and `Sym`s (through `dims(t)`, which resolves unified symbols);
    - `value[t]`: the constant an integer tensor folds to (a numpy array), for the slots that
      need a constant (a Sum's axes, a Reshape's shape);
    - `folded`: ops whose values are all folded (they compile to nothing);
    - `identity`: Reshapes to the shape their input already has (they compile to an identity);
    - `reshape_to`: other Reshapes to a Shape with one symbol: their target, the symbol as -1."""

    def __init__(self):
        self.shape: dict = {}
        self.symval: dict = {}          # tensor -> tuple of ints and Syms (a Shape's value)
        self.value: dict = {}
        self.folded: set = set()
        self.identity: set = set()
        self.reshape_to: dict = {}      # Reshape -> its target with its one symbol as -1
        self.loose_axes: dict = {}      # folded BroadcastGradientArgs output -> its loose axes
        self.loose: set = set()         # Sums over them: their consumers must be Reshapes
        self._parent: dict = {}
        self._n = 0
        self._codes: dict = {}

    # -- symbols ---------------------------------------------------------------------------------
    def new(self, guard: bool) -> Sym:
        self._n += 1
        return Sym(self._n, guard)

    def find(self, d):
        if isinstance(d, int):
            return d
        while d in self._parent:
            d = self._parent[d]
        return d

    def unify(self, a, b):
        """The one dimension `a` and `b` must be (NotSymbolic when that cannot be assumed)."""
        a, b = self.find(a), self.find(b)
        if a is b or a == b:
            return a
        if isinstance(a, int) or isinstance(b, int):
            if isinstance(a, int) and isinstance(b, int):
                raise NotSymbolic(f"dimensions {a} and {b} differ")
            return a if isinstance(a, int) else b       # the symbol's size is checked where it is read
        if not (a.guard and b.guard):
            raise NotSymbolic("two unknown dimensions must be equal and cannot both be checked on entry")
        self._parent[b] = a
        return a

    def dims(self, t) -> tuple:
        return tuple(self.find(d) for d in self.shape[t])

    def rank(self, t):
        s = self.shape.get(t)
        return None if s is None else len(s)

    def code(self, d) -> int:
        d = self.find(d)
        if isinstance(d, int):
            return d
        c = self._codes.get(d)
        if c is None:
            c = self._codes[d] = -2 - len(self._codes)
        return c

    def statics(self, t) -> tuple:
        """`t`'s static shape as a spec holds it (symbols numbered by first use; see the module)."""
        return tuple(self.code(d) for d in self.shape[t])

    def fully_symbolic(self, t) -> bool:
        """Every dimension of `t` is a number or a symbol checked on entry."""
        return all(isinstance(d, int) or d.guard for d in self.dims(t))


def _from_static(sh: Shapes, t, guard: bool) -> tuple:
    if t.shape.ndims is None:
        raise NotSymbolic(f"'{t.name}' has no known rank")
    return tuple(sh.new(guard) if d is None else int(d) for d in t.shape.as_list())


def _broadcast(sh: Shapes, shapes) -> tuple:
    n = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(n):
        ds = [sh.find(s[len(s) - n + k]) for s in shapes if len(s) - n + k >= 0]
        big = [d for d in ds if d != 1]
        if not big:
            out.append(1)
            continue
        ints = {d for d in big if isinstance(d, int)}
        if len(ints) > 1:
            raise NotSymbolic(f"dimensions {sorted(ints)} do not broadcast")
        if ints:
            out.append(ints.pop())      # a symbol beside it is that size or 1: the loop nest checks
            continue
        d = big[0]
        for e in big[1:]:
            d = sh.unify(d, e)
        out.append(d)
    return tuple(out)


def _same(sh: Shapes, a, b) -> bool:
    a, b = sh.find(a), sh.find(b)
    return a == b if isinstance(a, int) and isinstance(b, int) else a is b


def _equal(sh: Shapes, a, b):
    return sh.unify(a, b)


def _axis(v, rank):
    v = int(v)
    return v + rank if v < 0 else v


def _int_value(sh: Shapes, t, const_of):
    """The constant value of integer tensor `t` (a graph constant or a folded value), or None."""
    if t in sh.value:
        return sh.value[t]
    v = const_of(t)
    return None if v is None else np.asarray(v)


def _need_int(sh: Shapes, t, const_of, what):
    v = _int_value(sh, t, const_of)
    if v is None:
        raise NotSymbolic(f"{what} known only at run time")
    return v


def _reshape_target(sh: Shapes, x, t, const_of):
    """The symbolic target shape of a Reshape of `x` to `t` (a constant or a folded Shape)."""
    if t in sh.symval:
        return tuple(sh.find(d) for d in sh.symval[t])
    v = _int_value(sh, t, const_of)
    if v is None:
        raise NotSymbolic("a Reshape to a shape known only at run time")
    target = [int(d) for d in v.reshape(-1)]
    if -1 not in target:
        return tuple(target)
    src = sh.dims(x)
    known = int(np.prod([d for d in target if d != -1]))
    ints = int(np.prod([d for d in src if isinstance(d, int)]))
    syms = [d for d in src if not isinstance(d, int)]
    if not syms:
        free = ints // known if known else 0
    elif len(syms) == 1 and ints == known:
        free = syms[0]
    else:
        free = sh.new(False)
    return tuple(free if d == -1 else d for d in target)


def _bcast_gradient_args(sh: Shapes, a, b, dtype):
    """The folded outputs of BroadcastGradientArgs(a, b) (symbolic shapes), one per operand: None
    where it depends on a symbol's size in a way that matters (it is not folded), else (axes,
    loose). The kernel reduces an operand's axis only where that operand's size is 1; where
    whether it does depends on a symbol being 1, the fold does not reduce, and `loose` lists
    (axis, d): the summed value must have size 1 or d there (the sum over it is then the value
    itself, and only the shape differs by a size-1 axis, which the gradient's Reshape makes good;
    `infer` checks both)."""
    n = max(len(a), len(b))
    for x, y in zip(a[::-1], b[::-1]):     # two unknown sizes in one place: the same (checked on entry)
        if not isinstance(x, int) and not isinstance(y, int):
            sh.unify(x, y)
    a = tuple(sh.find(d) for d in a)
    b = tuple(sh.find(d) for d in b)
    if a == b:                  # (the kernel's test: before padding)
        return (np.empty(0, dtype), ()), (np.empty(0, dtype), ())
    # could the shapes turn out equal (then the kernel reduces nothing)?
    maybe_equal = len(a) == len(b) and all(x == y or not isinstance(x, int) or not isinstance(y, int)
                                           for x, y in zip(a, b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for mine, other in ((a, b), (b, a)):
        axes, loose = [], []
        for i, (x, y) in enumerate(zip(mine, other)):
            if x == 1:
                axes.append(i)
                if maybe_equal:
                    loose.append((i, y))
            elif isinstance(x, int):
                if isinstance(y, int) and y != 1 and y != x:
                    raise NotSymbolic(f"BroadcastGradientArgs of incompatible dimensions {x} and {y}")
            elif x is y or y == 1:      # reduces when the symbol is 1: a sum over a size-1 axis
                loose.append((i, x))
            else:                       # when x is 1 it sums over y's size: no fold
                out.append(None)
                break
        else:
            out.append((np.array(axes, dtype), (n, tuple(loose)) if loose else ()))
    return tuple(out)


def infer(ops, entry, const_of, ones=frozenset()) -> Shapes:
    """Symbolic shapes of the values of `ops` (a loop's body, topological), given those entering
    it: `entry`, pairs (tensors, t): the tensors that hold one value entering the loop, whose
    static shape is t's (its unknown dimensions become symbols checked on entry); `const_of(t)`:
    a graph constant's value or None; `ones`: pairs (k, j): dimension j of entry k, unknown in
    its static shape, has size 1 (a variant for calls that broadcast it, see `JitKernel`).
    Raises NotSymbolic when a rule cannot name a shape the loop's code needs."""
    sh = Shapes()
    for k, (tensors, src) in enumerate(entry):
        s = _from_static(sh, src, True)
        if ones:
            s = tuple(1 if (k, j) in ones and not isinstance(d, int) else d for j, d in enumerate(s))
        for t in tensors:
            sh.shape[t] = s
    for op in ops:
        try:
            _infer_op(sh, op, const_of)
        except (ValueError, TypeError, IndexError) as e:    # inputs no rule here expects (a rank)
            raise NotSymbolic(f"{op.type} '{op.name}': {e}") from e
    return sh


def _in(sh: Shapes, t):
    s = sh.shape.get(t)
    if s is None:               # a constant, or a value from outside the rules (no checked symbols)
        s = sh.shape[t] = _from_static(sh, t, False)
    return tuple(sh.find(d) for d in s)


def _infer_op(sh: Shapes, op, const_of) -> None:
    kind = op.type
    outs = op.outputs
    if kind == "Const":
        sh.shape[outs[0]] = _from_static(sh, outs[0], False)
        return
    if kind in ("AccumulatorPop", "_HistoryRead"):
        if outs[0] not in sh.shape:
            raise NotSymbolic("a saved value read with no shape")
        return
    if kind in _FOLDED:
        _fold(sh, op, const_of)
        return
    if kind == "StridedSlice" and op.inputs[0] in sh.symval:
        _fold_slice(sh, op, const_of)
        return
    if kind == "ConcatV2" and any(t in sh.symval for t in op.inputs[:-1]):
        _fold_concat(sh, op, const_of)
        return
    if kind in _VALUE_FOLDS and op.outputs[0].dtype.is_integer and \
            all(_int_value(sh, t, const_of) is not None for t in op.inputs):
        _fold_value(sh, op, const_of)
        return
    ins = [_in(sh, t) for t in op.inputs]
    if any(t in sh.loose for t in op.inputs) and not (kind == "Reshape" and op.inputs[1] not in sh.loose):
        raise NotSymbolic("a sum over axes that may or may not have size 1 goes elsewhere than a Reshape")
    if any(t in sh.loose_axes for t in op.inputs) and not (kind == "Sum" and op.inputs[0] not in sh.loose_axes):
        raise NotSymbolic("folded reduction axes go elsewhere than a Sum's axes")
    if kind in _SAME:
        sh.shape[outs[0]] = ins[0]
    elif kind in ("Select", "SelectV2") or kind in ELEMENTWISE or kind == "BiasAdd":
        sh.shape[outs[0]] = _broadcast(sh, ins)
    elif kind == "BiasAddGrad":
        sh.shape[outs[0]] = (ins[0][-1],)
    elif kind in _REDUCE:
        axes = _int_value(sh, op.inputs[1], const_of)
        if axes is None:
            raise NotSymbolic(f"{kind} over axes known only at run time")
        rank = len(ins[0])
        loose = sh.loose_axes.get(op.inputs[1])
        if loose is not None:
            n, pairs = loose
            if kind != "Sum" or rank != n or any(ins[0][i] != 1 and not _same(sh, ins[0][i], d) for i, d in pairs):
                raise NotSymbolic(f"{kind} over axes that may or may not have size 1")
            sh.loose.add(outs[0])
        axes = {_axis(a, rank) for a in axes.reshape(-1)}
        keep = bool(op.attrs.get("keep_dims", op.attrs.get("keepdims", False)))
        sh.shape[outs[0]] = tuple(1 if k in axes else d for k, d in enumerate(ins[0]) if keep or k not in axes)
    elif kind == "MatMul":
        (a0, a1), (b0, b1) = ins
        ta, tb = op.attrs.get("transpose_a", False), op.attrs.get("transpose_b", False)
        m, k = (a1, a0) if ta else (a0, a1)
        k2, n = (b1, b0) if tb else (b0, b1)
        _equal(sh, k, k2)
        sh.shape[outs[0]] = (m, n)
    elif kind == "ConcatV2":
        axis = _need_int(sh, op.inputs[-1], const_of, "a ConcatV2's axis")
        pieces = ins[:-1]
        rank = len(pieces[0])
        axis = _axis(axis, rank)
        dims = []
        for k in range(rank):
            if k == axis:
                ds = [p[k] for p in pieces]
                dims.append(sum(ds) if all(isinstance(d, int) for d in ds) else sh.new(False))
            else:
                d = pieces[0][k]
                for p in pieces[1:]:
                    d = _equal(sh, d, p[k])
                dims.append(d)
        sh.shape[outs[0]] = tuple(dims)
    elif kind == "Split":
        axis = _axis(_need_int(sh, op.inputs[0], const_of, "a Split's axis"), len(ins[1]))
        x = ins[1]
        d = x[axis]
        piece = d // len(outs) if isinstance(d, int) else sh.new(False)
        for t in outs:
            sh.shape[t] = x[:axis] + (piece,) + x[axis + 1:]
    elif kind == "SplitV":
        x = ins[0]
        axis = _axis(_need_int(sh, op.inputs[2], const_of, "a SplitV's axis"), len(x))
        sizes = [int(s) for s in _need_int(sh, op.inputs[1], const_of, "a SplitV's sizes").reshape(-1)]
        d = x[axis]
        rest = (d - sum(s for s in sizes if s >= 0)) if isinstance(d, int) else sh.new(False)
        for t, s in zip(outs, sizes):
            sh.shape[t] = x[:axis] + (s if s >= 0 else rest,) + x[axis + 1:]
    elif kind == "Reshape":
        target = _reshape_target(sh, op.inputs[0], op.inputs[1], const_of)
        if target == ins[0]:
            sh.identity.add(op)
        elif op.inputs[1] in sh.symval and not all(isinstance(d, int) for d in target):
            if sum(not isinstance(d, int) for d in target) > 1:
                raise NotSymbolic("a Reshape to a shape with several unknown dimensions")
            # one symbol: the size left over (the sizes agree where the symbols do)
            sh.reshape_to[op] = tuple(d if isinstance(d, int) else -1 for d in target)
        sh.shape[outs[0]] = target
    elif kind == "ExpandDims":
        x = ins[0]
        d = int(_need_int(sh, op.inputs[1], const_of, "an ExpandDims' axis"))
        d = d + len(x) + 1 if d < 0 else d
        sh.shape[outs[0]] = x[:d] + (1,) + x[d:]
    elif kind == "Squeeze":
        x = ins[0]
        drop = {_axis(d, len(x)) for d in op.attrs.get("squeeze_dims", ()) or ()}
        if not drop:
            raise NotSymbolic("a Squeeze of every size-1 dimension")
        sh.shape[outs[0]] = tuple(d for k, d in enumerate(x) if k not in drop)
    elif kind == "Transpose":
        perm = _int_value(sh, op.inputs[1], const_of)
        if perm is None:
            raise NotSymbolic("a Transpose by a permutation known only at run time")
        sh.shape[outs[0]] = tuple(ins[0][int(p)] for p in perm.reshape(-1))
    elif kind == "GatherV2":            # dynamic_rnn's read of a time step: params[:axis] + indices + params[axis+1:]
        if int(op.attrs.get("batch_dims", 0) or 0):
            raise NotSymbolic("a GatherV2 with batch_dims")
        x = ins[0]
        axis = _axis(_need_int(sh, op.inputs[2], const_of, "a GatherV2's axis"), len(x))
        sh.shape[outs[0]] = x[:axis] + ins[1] + x[axis + 1:]
    elif kind == "GatherNd":            # indices [..., k]: indices[:-1] + params[k:]
        k = ins[1][-1]
        if not isinstance(k, int):
            raise NotSymbolic("a GatherNd whose index depth is not static")
        sh.shape[outs[0]] = ins[1][:-1] + ins[0][k:]
    elif kind in ("TensorScatterUpdate", "TensorScatterAdd"):   # a time step's row written (or added)
        x, idx, upd = ins
        k = idx[-1]
        if not isinstance(k, int) or len(upd) != len(idx) - 1 + len(x) - k:
            raise NotSymbolic("a TensorScatterUpdate whose shapes do not line up statically")
        for d, e in zip(upd[len(idx) - 1:], x[k:]):
            _equal(sh, d, e)
        sh.shape[outs[0]] = x
    elif kind in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal"):    # the shape its input holds: a Shape's symbols (dropout), or constant
        dims = sh.symval.get(op.inputs[0])
        if dims is None:
            dims = _int_value(sh, op.inputs[0], const_of)
            if dims is None:
                raise NotSymbolic("a RandomUniform of a shape known only at run time")
            dims = tuple(int(d) for d in np.asarray(dims).reshape(-1))
        sh.shape[outs[0]] = tuple(dims)
    elif kind == "SoftmaxCrossEntropyWithLogits":
        b = _equal(sh, ins[0][0], ins[1][0])
        c = _equal(sh, ins[0][1], ins[1][1])
        sh.shape[outs[0]] = (b,)
        sh.shape[outs[1]] = (b, c)
    else:
        raise NotSymbolic(f"no symbolic shape rule for {kind}")
    for t in outs:              # what the graph knows for sure wins over a symbol
        if t.shape.ndims is not None and len(t.shape) == len(sh.shape[t]):
            sh.shape[t] = tuple(int(g) if g is not None else d for g, d in zip(t.shape.as_list(), sh.shape[t]))


def _folded_shape(sh: Shapes, op, dims) -> None:
    """Records `op`'s output as the folded shape value `dims` (ints and symbols)."""
    t = op.outputs[0]
    sh.folded.add(op)
    sh.symval[t] = tuple(dims)
    if all(isinstance(d, int) for d in dims):
        sh.value[t] = np.asarray(dims, t.dtype.np)
    sh.shape[t] = (len(dims),)


def _fold_slice(sh: Shapes, op, const_of) -> None:
    """A StridedSlice of a Shape's value (a gradient's `Shape(params)[1:]`): the sliced dimensions,
    with constant begin, end and strides and no ellipsis, new axes or shrunk axes."""
    if any(int(op.attrs.get(m, 0) or 0) for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        raise NotSymbolic("a StridedSlice of a shape with ellipsis, new or shrunk axes")
    begin, end, strides = (_int_value(sh, t, const_of) for t in op.inputs[1:4])
    if begin is None or end is None or strides is None or begin.size != 1:
        raise NotSymbolic("a StridedSlice of a shape by bounds known only at run time")
    b = None if int(op.attrs.get("begin_mask", 0) or 0) & 1 else int(begin[0])
    e = None if int(op.attrs.get("end_mask", 0) or 0) & 1 else int(end[0])
    dims = sh.symval[op.inputs[0]][b:e:int(strides[0])]
    _folded_shape(sh, op, dims)


# integer ops on folded values (a gradient's `ExpandDims(Size(indices), 0)`): computed here
_VALUE_FOLDS = {
    "ExpandDims": lambda v: np.expand_dims(v[0], int(v[1])),
    "Reshape": lambda v: np.reshape(v[0], [int(d) for d in np.reshape(v[1], -1)]),
    "Pack": lambda v: np.stack(v),
}


def _fold_value(sh: Shapes, op, const_of) -> None:
    t = op.outputs[0]
    v = np.asarray(_VALUE_FOLDS[op.type]([_int_value(sh, x, const_of) for x in op.inputs]), t.dtype.np)
    sh.folded.add(op)
    sh.value[t] = v
    if v.ndim == 1:
        sh.symval[t] = tuple(int(d) for d in v)
    sh.shape[t] = v.shape


def _fold_concat(sh: Shapes, op, const_of) -> None:
    """A ConcatV2 of 1-D shape values and constants (a gradient's `concat([[n], Shape(x)[1:]])`)."""
    dims = []
    for t in op.inputs[:-1]:
        if t in sh.symval:
            dims += list(sh.symval[t])
            continue
        v = _int_value(sh, t, const_of)
        if v is None or v.ndim != 1:
            raise NotSymbolic("a ConcatV2 of a shape and a value known only at run time")
        dims += [int(x) for x in v]
    _folded_shape(sh, op, dims)


def _fold(sh: Shapes, op, const_of) -> None:
    kind = op.type
    t = op.outputs[0]
    dtype = t.dtype.np
    sh.folded.add(op)
    if kind == "Rank":
        sh.value[t] = np.asarray(len(_in(sh, op.inputs[0])), dtype)
    elif kind == "Shape":
        s = _in(sh, op.inputs[0])
        sh.symval[t] = s
        if all(isinstance(d, int) for d in s):
            sh.value[t] = np.asarray(s, dtype)
    elif kind == "Size":
        s = _in(sh, op.inputs[0])
        if not all(isinstance(d, int) for d in s):
            raise NotSymbolic("the Size of a value of unknown dimensions")
        sh.value[t] = np.asarray(int(np.prod(s)), dtype)
    else:
        a, b = (sh.symval.get(x) for x in op.inputs)
        if a is None or b is None:
            raise NotSymbolic("BroadcastGradientArgs of shapes that are not Shape ops")
        for out, r in zip(op.outputs, _bcast_gradient_args(sh, a, b, dtype)):
            if r is not None:
                sh.value[out] = r[0]
                if r[1]:
                    sh.loose_axes[out] = r[1]
    for out in op.outputs:
        sh.shape[out] = _from_static(sh, out, False) if out.shape.ndims is not None else ()
