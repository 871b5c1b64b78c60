"""The JIT pass: clusters of compilable ops, and whole while loops, become one op each.

`jit_pass(plan, level)` (TF's ``global_jit_level``: ON_1 clusters every compilable op; OFF only
the ops marked by `af.xla.experimental.jit_scope()`, attribute ``_XlaCompile``; with
``mode="tiered"`` (AF_JIT=tiered) every compilable op, each compiled once its interpreted ops have
run long enough, see compile.py):

1. **Loops.** A while loop (a frame with no loop nested in it) whose condition and body are
   entirely compilable ops, with loop variables of known rank, becomes one ``_JitLoop`` op: its
   inputs are the values entering the loop (loop variables, then invariants), its outputs the
   values leaving it. A loop and its gradient loop compile together: the values the gradient
   saves per iteration (accumulator pushes and pops) become histories the forward function
   returns and the gradient function reads. A RandomUniform, RandomStandardNormal or
   TruncatedNormal in the body (dropout) is drawn by the compiled loop from the op's own session
   stream (`LOOP_RANDOM`), the numbers the actors would draw. Loops with other stateful ops (queues, variables, other random ops, Send/Recv) stay on
   the actor runtime; in nested loops, the innermost compile.
   Unknown dimensions get symbols (symbolic.py) so that a gradient loop's run-time shape ops
   fold; where they cannot, the loop is analyzed with its static shapes alone, as before.
2. **Clusters.** Maximal sets of compilable ops outside loops, grown along data edges (in
   topological order, merging a producer's cluster into its consumer's unless that would make a
   cycle through an op outside them), become one ``_JitCluster`` op each. An op joins no cluster
   when it has control edges, a fed output, or an attribute ``_XlaCompile=False``.

The new ops carry their `ClusterSpec`/`LoopSpec` (what is compiled, keyed by structure, dtypes
and ranks) and the interpreted form of the same ops (their registered kernels, run in order),
which async compilation runs until the compiled function is ready.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading

import numpy as np

from actorflow import errors
from actorflow.graph.tensor_shape import TensorShape
from actorflow.kernels import interrupt
from actorflow.kernels.registry import get_kernel
from actorflow.scheduler.ir import kernel_attrs as _kernel_attrs
from actorflow.scheduler.jit import symbolic
from actorflow.scheduler.jit.codegen import NEEDS_CONST, compilable
from actorflow.scheduler.jit.spec import ClusterSpec, LoopSpec, Node, statics_of
from actorflow.scheduler.plan import Plan
from actorflow.scheduler.rewrite import PlanEdit, loop_frames, new_op

__all__ = ["jit_pass", "MIN_CLUSTER_SIZE", "MIN_MARKED_CLUSTER_SIZE"]

log = logging.getLogger(__name__)

# Auto-clustering compiles a cluster of at least this many ops (not counting identities), TF's
# tf_xla_min_cluster_size default: below it, the compiled call saves nothing over the few kernels it
# replaces, and the first step would pay for loading numba and its cache (0.3 s) for nothing.
MIN_CLUSTER_SIZE = 4
# $AF_JIT_MIN_CLUSTER_SIZE overrides it, as TF_XLA_FLAGS=--tf_xla_min_cluster_size does TF's.
# A region the user marked (jit_scope, af.xla.experimental.compile) compiles from two ops up.
MIN_MARKED_CLUSTER_SIZE = 2
# Compiled inside loops, but left to numpy's BLAS (and the runtime's splitting) elsewhere.
LOOP_ONLY = frozenset({"MatMul", "GatherV2", "GatherNd", "TensorScatterUpdate", "TensorScatterAdd"})
MAX_LOOP_GEMM = 1 << 18         # multiply-adds: a bigger MatMul keeps its BLAS kernel (the loop stays)
# A static MatMul in a loop of at least BLAS_LOOP_GEMM multiply-adds calls cblas from the compiled
# loop (blascall.py) instead of explicit loops: 4.9 against 11.5 us for an LSTM cell's 32x48x128;
# loops with products up to MAX_BLAS_LOOP_GEMM then compile (a cell of width 512 over a batch of 64).
BLAS_LOOP_GEMM = 1 << 15
MAX_BLAS_LOOP_GEMM = 1 << 26
_CF = frozenset({"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"})
_TYPES_OK = ("float32", "float64", "int32", "int64", "bool")


def _dt(t) -> str:
    d = t.dtype
    name = _DT_NAMES.get(d)
    if name is None:
        name = _DT_NAMES[d] = d.np.name if d.np is not None else "?"
    return name


_DT_NAMES: dict = {}


_FED = threading.local()        # the fed tensors of the plan being compiled (never constants)
# .shapes: the symbolic shapes (symbolic.py) of the loop being analyzed, or None


def _sym():
    return getattr(_FED, "shapes", None)


def _graph_const(t):
    if t in getattr(_FED, "tensors", ()):
        return None
    op = t.op
    return op.attrs["value"] if op.type == "Const" else None


def _const_value(t):
    sym = _sym()
    if sym is not None and t in sym.value:
        return sym.value[t]
    return _graph_const(t)


def _ndims(t):
    """`t`'s rank: its symbolic shape's in a loop analyzed symbolically, else its static shape's."""
    sym = _sym()
    if sym is not None and t in sym.shape:
        return sym.rank(t)
    return t.shape.ndims


def _statics(t) -> tuple:
    sym = _sym()
    if sym is not None and t in sym.shape:
        return sym.statics(t)
    return statics_of(t.shape)


def _is_scalar_const(t) -> bool:
    return t not in getattr(_FED, "tensors", ()) and t.op.type == "Const" and np.ndim(t.op.attrs["value"]) == 0 and _dt(t) in _TYPES_OK


def _node_attrs(op):
    """The attributes that shape the generated code of `op`, hashable, or None when the op cannot
    compile (a constant input that is not constant, a layout it does not handle)."""
    a = {}
    sym = _sym()
    for slot, name in NEEDS_CONST.get(op.type, {}).items():
        t = op.inputs[slot]
        v = sym.reshape_to[op] if sym is not None and op in sym.reshape_to else _const_value(t)
        if v is None:
            return None
        v = np.asarray(v)
        a[name] = int(v) if v.ndim == 0 else tuple(int(x) for x in v.reshape(-1))
    if op.type in ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any"):
        a["keep_dims"] = bool(op.attrs.get("keep_dims", op.attrs.get("keepdims", False)))
        if isinstance(a["axes"], int):
            a["axes"] = (a["axes"],)
    elif op.type == "MatMul":
        a["transpose_a"] = bool(op.attrs.get("transpose_a", False))
        a["transpose_b"] = bool(op.attrs.get("transpose_b", False))
        if _loop_blas(op):
            a["blas"] = True
    elif op.type == "Squeeze":
        sq = tuple(op.attrs.get("squeeze_dims", ()) or ())
        if not sq:
            return None
        a["squeeze_dims"] = tuple(int(x) for x in sq)
    elif op.type in ("BiasAdd", "BiasAddGrad"):
        fmt = op.attrs.get("data_format", "NHWC") or "NHWC"
        if (fmt.decode() if isinstance(fmt, bytes) else fmt) != "NHWC":
            return None
    elif op.type == "ExpandDims" and not isinstance(a.get("dim"), int):
        return None
    elif op.type == "Const":
        a["value"] = np.asarray(op.attrs["value"]).item()
    return tuple(sorted(a.items()))


def _data_inputs(op):
    """The input slots of `op` that carry values into generated code (not its constant slots)."""
    consts = NEEDS_CONST.get(op.type, {})
    n = len(op.inputs)
    skip = {s % n for s in consts} if n else set()
    return [i for i in range(n) if i not in skip]


def _op_compilable(op) -> bool:
    if op.op_def.stateful or op.op_def.ref_inputs or op.type in _CF or op.type == "Const":
        return False
    if op.attrs.get("_XlaCompile") is False:
        return False
    ins = [op.inputs[i] for i in _data_inputs(op)]
    if any(_ndims(t) is None for t in ins) or any(_ndims(t) is None for t in op.outputs):
        return False
    if any(_dt(t) not in _TYPES_OK for t in ins) or any(_dt(t) not in _TYPES_OK for t in op.outputs):
        return False
    if op.type == "Cast":
        pass
    elif not compilable(op.type, [_dt(t) for t in ins if not (op.type.startswith("Select") and t is ins[0])]):
        return False
    if op.type == "Select":         # v1: a vector condition picks rows; SelectV2 broadcasts
        ranks = {_ndims(t) for t in ins}
        if len(ranks) != 1:
            return False
    if op.type == "SoftmaxCrossEntropyWithLogits" and any(_ndims(t) != 2 for t in ins):
        return False
    if op.type == "SparseSoftmaxCrossEntropyWithLogits" and (_ndims(ins[0]), _ndims(ins[1])) != (2, 1):
        return False
    if op.type in ("Softmax", "LogSoftmax") and _ndims(ins[0]) < 1:
        return False
    if op.type in ("Reshape", "ExpandDims", "Squeeze", "Split", "SplitV", "ConcatV2") and (
            _ndims(ins[0]) == 0 or _ndims(op.outputs[0]) == 0):
        # (but a scalar reshapes to a static shape of ones: a gradient's sum over every axis)
        if not (op.type == "Reshape" and _ndims(ins[0]) == 0 and _ndims(op.outputs[0]) > 0 and _scalar_to_ones(op)):
            return False
    if op.type == "MatMul" and not _small_gemm(op, ins):
        return False
    if op.type in _ROW_OPS and not _row_access_ok(op, ins):
        return False
    if op.type == "Mean" and _dt(op.outputs[0]) not in ("float32", "float64"):
        return False
    return _node_attrs(op) is not None


# Stateful random ops a compiled loop draws itself, from the op's session stream (rt.random_uniform_*;
# JitKernel reads and writes the stream around the call), so the iterations draw what the actors'
# runs of the op would: dropout inside an RNN's loop (DropoutWrapper).
LOOP_RANDOM = frozenset({"RandomUniform", "RandomStandardNormal", "TruncatedNormal"})


def _loop_random(op):
    """For a random op a loop can compile: (the value whose Shape is its shape, or None; its shape
    when constant, or None); else None."""
    if op.type not in LOOP_RANDOM or op.attrs.get("_XlaCompile") is False:
        return None
    if _dt(op.outputs[0]) not in ("float32", "float64") or _ndims(op.outputs[0]) is None:
        return None
    shape = op.inputs[0]
    if shape.op.type == "Shape" and _ndims(shape.op.inputs[0]) == _ndims(op.outputs[0]):
        return shape.op.inputs[0], None
    v = _const_value(shape)
    if v is None or np.ndim(v) != 1:
        return None
    return None, tuple(int(d) for d in np.asarray(v).reshape(-1))


def _row_access_ok(op, ins) -> bool:
    """The forms of GatherV2, GatherNd and TensorScatterUpdate the JIT compiles: one row along axis 0
    (a scalar GatherV2 index; GatherNd and TensorScatterUpdate indices of static shape [1, 1]), what
    dynamic_rnn's loop and its gradient read and write each time step."""
    if _ndims(ins[0]) < 1:
        return False
    if op.type == "GatherV2":
        attrs = _node_attrs(op)
        return (_ndims(ins[1]) == 0 and attrs is not None and dict(attrs).get("axis") == 0
                and not op.attrs.get("batch_dims", 0) and _ndims(op.outputs[0]) == _ndims(ins[0]) - 1)
    if _statics(ins[1]) != (1, 1) or _ndims(op.outputs[0]) != _ndims(ins[0]):
        return False
    return op.type == "GatherNd" or _ndims(ins[2]) == _ndims(ins[0])


def _scalar_to_ones(op) -> bool:
    """A Reshape whose target is known and all ones (-1 there is 1)."""
    attrs = _node_attrs(op)
    shape = dict(attrs).get("shape") if attrs is not None else None
    return shape is not None and all(d in (1, -1) for d in shape)


def _small_gemm(op, ins) -> bool:
    """A MatMul the JIT's explicit loops serve: small and static (an RNN cell's), or, in a loop
    analyzed symbolically, one whose known dimensions are small and whose others are symbols
    (a batch of unknown size)."""
    if any(_ndims(t) != 2 for t in ins):
        return False
    sym = _sym()
    if sym is not None and all(t in sym.shape for t in ins) and op.outputs[0] in sym.shape:
        if not all(sym.fully_symbolic(t) for t in list(ins) + [op.outputs[0]]):
            return False
        # (cblas's products counted for a batch of SYMBOL_SIZE rows: one past the limit at run time
        # runs the whole loop interpreted on one thread, slower than the actors, whose pool splits it)
        if _blas_ok(op):
            return _symbolic_known_macs(op, ins, SYMBOL_SIZE) <= MAX_BLAS_LOOP_GEMM
        return _symbolic_known_macs(op, ins) <= MAX_LOOP_GEMM
    if any(not t.shape.is_fully_defined() for t in ins):
        return False
    macs = _static_macs(op, ins)
    return macs <= MAX_LOOP_GEMM or (macs <= MAX_BLAS_LOOP_GEMM and _blas_ok(op))


def _symbolic_known_macs(op, ins, symbol: int = 1) -> int:
    """A symbolic MatMul's multiply-adds, each symbolic size among m, n and k counted as `symbol`."""
    sym = _sym()
    m, n = sym.dims(op.outputs[0])
    k = sym.dims(ins[0])[0 if op.attrs.get("transpose_a") else 1]
    size = 1
    for d in (m, n, k):
        size *= d if isinstance(d, int) else symbol
    return size


def _static_macs(op, ins) -> int:
    m, n = op.outputs[0].shape.as_list()
    k = ins[0].shape.as_list()[0 if op.attrs.get("transpose_a") else 1]
    return m * n * k


def _blas_ok(op) -> bool:
    """Whether a loop's MatMul can call cblas (blascall.py): float32/float64, and a BLAS loaded."""
    if _dt(op.outputs[0]) not in ("float32", "float64"):
        return False
    from actorflow.scheduler.jit import blascall
    return blascall.available()


def _loop_blas(op) -> bool:
    """A loop's MatMul that calls cblas rather than the explicit loops: a static one of at least
    BLAS_LOOP_GEMM multiply-adds, and one with a symbolic size (a batch of unknown size, which
    is seldom small: an RNN's 32 to 256 rows; cblas's call costs a microsecond where the explicit
    loops of a 128-row LSTM cell of width 64 take a hundred)."""
    ins = op.inputs
    if not _blas_ok(op):
        return False
    sym = _sym()
    if sym is not None and all(t in sym.shape for t in ins) and op.outputs[0] in sym.shape:
        return not all(isinstance(d, int) for t in list(ins) + [op.outputs[0]] for d in sym.dims(t)) or (
            _symbolic_known_macs(op, ins) >= BLAS_LOOP_GEMM)
    return (all(_ndims(t) == 2 and t.shape.is_fully_defined() for t in ins) and op.outputs[0].shape.is_fully_defined()
            and _static_macs(op, ins) >= BLAS_LOOP_GEMM)


class _Builder:
    """Turns a set of ops into a spec: references, inputs, inlined scalar constants."""

    def __init__(self, external):
        self.external = external        # tensor -> ("i", k) for values the function receives
        self.inputs: list = []          # tensors, in argument order
        self.nodes: list = []
        self.ref: dict = {}             # tensor -> reference
        self.consts: dict = {}          # (dtype, value) -> reference of an inlined constant

    def arg(self, t):
        r = self.ref.get(t)
        if r is not None:
            return r
        if _is_scalar_const(t):
            v = np.asarray(t.op.attrs["value"]).item()
            key = (_dt(t), repr(v))
            r = self.consts.get(key)
            if r is None:
                self.nodes.append(Node("Const", (("value", v),), (), (_dt(t),), (0,), ((),)))
                r = self.consts[key] = ("n", len(self.nodes) - 1, 0)
            self.ref[t] = r
            return r
        r = self.external(t)
        self.ref[t] = r
        return r

    def add(self, op, as_type=None, inputs=None):
        """Appends `op` (as a node of type `as_type` whose arguments are `inputs`, when given)."""
        if as_type is None:
            args = tuple(self.arg(op.inputs[i]) for i in _data_inputs(op))
            attrs = _node_attrs(op)
        else:
            args, attrs = tuple(self.arg(t) for t in inputs), ()
        self.nodes.append(Node(as_type or op.type, attrs, args, tuple(_dt(t) for t in op.outputs),
                               tuple(_ndims(t) for t in op.outputs), tuple(_statics(t) for t in op.outputs)))
        j = len(self.nodes) - 1
        for o, t in enumerate(op.outputs):
            self.ref[t] = ("n", j, o)


def _interpreter(members, input_tensors, output_tensors):
    """The members run one by one through their registered kernels: fn(*inputs) -> outputs. Their
    kernels are made on the first call: a cluster that compiles (the usual case) never needs them."""
    members = tuple(members)
    input_tensors = tuple(input_tensors)
    built: list = []

    def build():
        pos = {t: k for k, t in enumerate(input_tensors)}
        steps = []
        made: set = set()
        for op in members:
            fn = get_kernel(op.type, "CPU").factory(_kernel_attrs(op.attrs))
            srcs = []
            for t in op.inputs:
                if t in pos:
                    srcs.append((0, pos[t]))
                elif t.op in made:
                    srcs.append((1, t))
                else:
                    srcs.append((2, t.op.attrs["value"]))
            steps.append((op, fn, srcs))
            made.add(op)
        built.append(steps)         # two threads may both build: either list serves
        return steps
    outs = tuple(output_tensors)

    ops_run = [0, 0]                    # (op runs, elements they produced): tiered mode's estimate

    def run(*args):
        vals: dict = {}
        elements = 0
        for op, fn, srcs in (built[0] if built else build()):
            xs = [args[v] if k == 0 else (vals[v] if k == 1 else v) for k, v in srcs]
            try:
                r = fn(*xs)
            except Exception as e:  # noqa: BLE001 - name the op that failed inside the cluster
                raise type(e)(f"{e} (in op '{op.name}' of type {op.type}, compiled in a JIT cluster)") from e
            if len(op.outputs) == 1:
                vals[op.outputs[0]] = r
                elements += getattr(r, "size", 1)
            else:
                for t, v in zip(op.outputs, r):
                    vals[t] = v
                    elements += getattr(v, "size", 1)
        ops_run[0] += len(members)
        ops_run[1] += elements
        if len(outs) == 1:
            return vals[outs[0]]
        return tuple(vals[t] for t in outs)
    run.ops_run = ops_run
    return run


def jit_pass(plan: Plan, level_on: bool = True, mode: str | None = None, keep=frozenset(),
             small_loops: bool = False) -> Plan:
    """Loops, then clusters (see the module's docstring); returns the rewritten plan. `keep`:
    names of ops no cluster may take (the fusion pass's chains). `small_loops` (the JIT's DEFAULT
    level): of what `level_on` would not take (unmarked ops), the loops whose every value is small
    (`small_loop`), and no cluster."""
    from actorflow.scheduler.jit import kernel  # noqa: F401 - registers the _JitCluster/_JitLoop op and kernel
    _FED.tensors = frozenset(plan.feeds)
    _FED.shapes = None
    try:
        return _jit_pass(plan, level_on, mode, keep, small_loops)
    finally:
        _FED.tensors = ()
        _FED.shapes = None


def _jit_pass(plan, level_on, mode, keep, small_loops=False):
    edit = PlanEdit(plan)
    frames = loop_frames(plan) if plan.has_control_flow else {op: None for op in plan.ops}
    fed = set(plan.feeds)
    fetched = {t for t in plan.fetches if t is not None}
    in_plan = set(plan.ops)
    consumers: dict = {}
    ctrl_users: set = set(plan.targets)
    for op in plan.ops:
        for t in op.inputs:
            consumers.setdefault(t, []).append(op)
        for c in op.control_inputs:
            ctrl_users.add(c)
    barriers = _recv_ancestry(plan)
    if plan.has_control_flow:
        _loops(plan, edit, frames, level_on or small_loops, fed, fetched, consumers, mode, barriers,
               small=small_loops and not level_on)

    def eligible(op):
        return (op.type not in LOOP_ONLY and frames.get(op) is None and op not in edit.removed and op.name not in keep and _op_compilable(op)
                and (level_on or op.attrs.get("_XlaCompile") is True) and not op.control_inputs
                and op not in ctrl_users and not any(t in fed for t in op.outputs))

    order = {op: i for i, op in enumerate(plan.ops)}
    cluster_of: dict = {}               # op -> the id its cluster had when it joined (see `alias`)
    alias: dict = {}                    # a merged cluster's id -> the id of the cluster it joined
    members: dict = {}                  # cluster id -> set of ops
    exits: dict = {}                    # cluster id -> ops outside it that consume its members
    last: dict = {}                     # cluster id -> the highest position of a member
    next_id = 0

    def find(c):
        root = c
        while root in alias:
            root = alias[root]
        while c in alias and alias[c] != root:      # path compression: merges stay near O(1)
            alias[c], c = root, alias[c]
        return root
    for op in plan.ops:
        if not eligible(op):
            continue
        cid = next_id
        next_id += 1
        cluster_of[op] = cid
        members[cid] = {op}
        exits[cid] = {c for t in op.outputs for c in consumers.get(t, ())} | set(op._control_outputs)
        last[cid] = order[op]
        for t in op.inputs:
            p = t.op
            pc = cluster_of.get(p)
            if pc is None or t in fed:
                continue
            pc = find(pc)
            if pc == cid:
                continue
            if barriers is not None and barriers.get(p, 0) != barriers.get(op, 0):
                continue                # see _recv_ancestry
            a, b = members[pc], members[cid]
            out = {c for c in exits[pc] if c not in b} | {c for c in exits[cid] if c not in a}
            end = max(last[pc], last[cid])
            if _creates_cycle(a, b, out, consumers, order, end):
                continue
            # The smaller set joins the larger, in place (a chain grows one op at a time: linear, not
            # quadratic); the cluster keeps the consumer's id, as it did when sets were copied.
            if len(a) > len(b):
                a |= b
                members[cid] = a
            else:
                b |= a
            exits[cid], last[cid] = out, end
            alias[pc] = cid
            del members[pc], exits[pc], last[pc]
    min_size = int(os.environ.get("AF_JIT_MIN_CLUSTER_SIZE", MIN_CLUSTER_SIZE))
    chosen = []
    for ms in members.values():
        real = [m for m in ms if m.type not in ("Identity", "Snapshot", "StopGradient")]
        marked = any(m.attrs.get("_XlaCompile") is True for m in real)
        if len(real) >= (MIN_MARKED_CLUSTER_SIZE if marked else min_size):
            chosen.append(ms)
    for ms in _acyclic(chosen, plan.ops, consumers):
        _replace_cluster(plan, edit, sorted(ms, key=order.get), consumers, fetched, in_plan, mode)
    return edit.finish()


def _recv_ancestry(plan):
    """{op: bit mask of the _Recv ops it depends on} for a plan with _Recv ops (a partition of a
    graph cut between devices or tasks), else None.

    A path that leaves this partition through a _Send and comes back through a _Recv is not in
    the plan: the cycle checks cannot see it. A cluster whose ops depend on different sets of
    _Recvs would make each of its outputs wait for every _Recv any member needs, including one
    whose value another task computes from this cluster's own output (x -> _Send, on to the PS
    and back -> _Recv -> y: one _JitCluster {x, y} waits for itself across tasks, and the step
    hangs). Ops merge into one cluster only when they depend on the same _Recvs: then no output
    waits for a _Recv it did not already wait for, and no new dependency crosses the cut."""
    if not any(op.type == "_Recv" for op in plan.ops):
        return None
    masks: dict = {}
    bit = 1
    for op in plan.ops:                 # topological order
        m = 0
        for t in op.inputs:
            m |= masks.get(t.op, 0)
        for c in op.control_inputs:
            m |= masks.get(c, 0)
        if op.type == "_Recv":
            m |= bit
            bit <<= 1
        masks[op] = m
    return masks


def _acyclic(clusters, ops, consumers) -> list:
    """`clusters` less those whose contraction closes a cycle through other clusters.

    Each merge in the pass is checked against paths through single ops, not against paths that
    leave a cluster, enter another one and come back out of it at a different member (cluster A
    feeds an op of B, and another op of B feeds A: no cycle among ops, a cycle between the two
    _JitCluster ops). This checks the graph with every cluster contracted to one node and, while
    it has a cycle, gives up the smallest cluster on it (its ops stay as they are)."""
    clusters = list(clusters)
    while clusters:
        cycle = _contracted_cycle(clusters, ops, consumers)
        if cycle is None:
            return clusters
        drop = min(cycle, key=lambda i: len(clusters[i]))
        clusters.pop(drop)
    return clusters


def _contracted_cycle(clusters, ops, consumers):
    """Indices into `clusters` of the clusters on one cycle of the contracted graph, or None."""
    node_of = {op: ("c", i) for i, ms in enumerate(clusters) for op in ms}
    pos = {op: k for k, op in enumerate(ops)}
    in_plan = set(ops)

    first = [min(pos[m] for m in ms) for ms in clusters]

    def key(node):                      # the same search, and the same cluster given up, in every process
        return pos[node[1]] if node[0] == "o" else first[node[1]]

    def succ(node):
        members = clusters[node[1]] if node[0] == "c" else (node[1],)
        out = set()
        for op in members:
            for c in [c for t in op.outputs for c in consumers.get(t, ())] + list(op._control_outputs):
                # A loop's back edge (NextIteration -> Merge) is not a dependency.
                if c in in_plan and not (c.type == "Merge" and op.type == "NextIteration"):
                    out.add(node_of.get(c, ("o", c)))
        out.discard(node)
        return sorted(out, key=key)
    state: dict = {}                    # node -> 1 on the DFS path, 2 done
    for start in [("c", i) for i in range(len(clusters))]:
        if start in state:
            continue
        path = [start]
        stack = [iter(succ(start))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            st = state.get(nxt)
            if st == 1:
                on = path[path.index(nxt):]
                return [n[1] for n in on if n[0] == "c"]
            if st is None:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(succ(nxt)))
    return None


def _creates_cycle(a, b, out, consumers, order, last) -> bool:
    """True when a path leaves clusters `a` and `b` together (through `out`, their outside consumers)
    and comes back into them (merging would close a cycle). Only ops before their last member can
    lead back."""
    stack = [c for c in out if order.get(c, 1 << 60) < last]
    seen: set = set()
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        nexts = [c for t in o.outputs for c in consumers.get(t, ())] + list(o._control_outputs)
        for c in nexts:
            if c in a or c in b:
                return True
            if order.get(c, 1 << 60) < last:
                stack.append(c)
    return False


def _mode_of(ops, mode):
    """A cluster's or loop's compile mode: the pass's, except that what jit_scope() marked compiles
    before the first step (wait mode, unless AF_JIT_COMPILE says otherwise) under tiered mode too:
    the user asked for it compiled."""
    if mode == "tiered" and any(op.attrs.get("_XlaCompile") is True for op in ops):
        return None
    return mode


def _replace_cluster(plan, edit, ms, consumers, fetched, in_plan, mode):
    from actorflow.scheduler.jit.kernel import JIT_CLUSTER
    mset = set(ms)
    inputs: list = []

    def external(t):
        inputs.append(t)
        return ("i", len(inputs) - 1)
    b = _Builder(external)
    for op in ms:
        b.add(op)
    outs = [t for op in ms for t in op.outputs
            if t in fetched or any(c not in mset for c in consumers.get(t, ()))]
    if not outs:
        return
    spec = ClusterSpec(tuple((_dt(t), t.shape.ndims) for t in inputs), tuple(b.nodes),
                       tuple(b.ref[t] for t in outs), tuple(statics_of(t.shape) for t in inputs))
    root = ms[-1]
    attrs = {"spec": spec, "interpreted": _interpreter(ms, inputs, outs), "mode": _mode_of(ms, mode),
             "what": f"cluster of {len(ms)} ops ending at '{root.name}'", "parts": tuple((m.name, m.type) for m in ms)}
    new = new_op(plan.graph, f"{root.name}/_jit", JIT_CLUSTER, inputs, (), attrs,
                 [(t.dtype, t.shape) for t in outs], root.device)
    for t, nt in zip(outs, new.outputs):
        edit.replace(t, nt)
    for op in ms:
        edit.remove(op)
    edit.add(new)


# -- loops -------------------------------------------------------------------------------------
# A while loop's gradient (graph/control_flow_grad.py): the forward loop pushes each value the
# gradient needs under its iteration index, into a step-local accumulator; the gradient loop pops
# them. Compiled, the forward loop returns each pushed value's history (one row per iteration) and
# the gradient loop reads its rows: the accumulator is gone. Both loops compile, or neither.
# A loop nested in another keys its pushes by the outer loops' indices too: compiled, it pushes
# its whole history once per outer iteration (keyed by the outer indices), the enclosing gradient
# loop pops it, and the compiled inner gradient loop reads its rows; the outer loop's trip count
# waits for that push as it did for the inner ones.
_PUSH, _POP, _ACC = "AccumulatorPush", "AccumulatorPop", "AccumulatorV2"


class _NotCompilable(Exception):
    pass


class _Loop:
    """A while loop that can compile: its ops, what enters and leaves it, and its spec."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _loops(plan, edit, frames, level_on, fed, fetched, consumers, mode, barriers=None, small=False):
    by_frame: dict = {}
    for op in plan.ops:
        f = frames.get(op)
        if f is not None:
            by_frame.setdefault(f, []).append(op)
    found: dict = {}
    for name, ops in by_frame.items():
        try:
            lp = _analyze_loop(name, ops, level_on, fed, fetched, consumers)
        except _NotCompilable:
            continue
        if small and not small_loop(lp.spec) and not any(op.attrs.get("_XlaCompile") is True for op in ops):
            log.debug("JIT: the loop '%s' is not small: left to the actors at the DEFAULT level", name)
            continue
        found[name] = lp
    if barriers is not None:
        # one _JitLoop op waits for all it takes in: values that depend on different _Recvs would
        # hold each other back across the cut (see _recv_ancestry); its partners go with it
        for name in [n for n, lp in found.items()
                     if len({barriers.get(e.inputs[0].op, 0) for e in lp.var_enters + lp.inv_enters}) > 1]:
            del found[name]
    # the ops of each frame that wait for its pushes (the trip count a gradient loop starts from)
    syncs: dict = {}
    for op in plan.ops:
        if any(c.type == _PUSH and frames.get(c) == frames.get(op) for c in op.control_inputs):
            syncs.setdefault(frames.get(op), []).append(op)
    _pair_saved_values(found, consumers, fetched, frames, syncs)
    _shape_only_saves(found, consumers, frames)
    histories: dict = {}                # accumulator -> the history tensor of the compiled loop
    waits: dict = {}                    # sync op -> pushes of inner histories it must wait for
    nested: set = set()                 # accumulators that now hold whole histories
    for name in sorted(found, key=lambda n: bool(found[n].hist_enters)):   # forward loops first
        _build_loop(plan, edit, found[name], histories, nested, frames, syncs, waits, mode)
    for op, pushes in waits.items():
        new = new_op(plan.graph, op.name, op.type, op.inputs, list(op.control_inputs) + pushes, op.attrs,
                     [(t.dtype, t.shape) for t in op.outputs], op.device)
        for t, nt in zip(op.outputs, new.outputs):
            edit.replace(t, nt)
        edit.remove(op)
        edit.add(new)
    for acc in histories:
        if acc not in nested:
            edit.remove(acc.op)


# The JIT's DEFAULT level takes a loop only when none of the values an iteration computes has more
# elements than this, and none of its products more multiply-adds than SMALL_LOOP_MACS: its
# iterations are then bound by the actors' per-op cost (several microseconds an op, more where the
# pool takes the op), which one kernel call removes, and not by kernels the actors would split
# over the pool's threads (a big MatMul), which one kernel call runs on one thread. A loop's
# products call cblas (blascall.py). On the 2-core machines, an LSTM of width 128 over a batch of
# 128 trains 1.3x faster compiled (width 64: 2.2x; width 256 over 32 rows: 1.4x), one of width
# 512 over 64 rows (products of 100M multiply-adds) 1.5x slower (benchmarks/compiler.py's
# dynamic_rnn rows).
SMALL_LOOP_ELEMENTS = 1 << 18
SMALL_LOOP_MACS = 1 << 26
# What a symbolic dimension counts for there: the batch of a Keras or dynamic_rnn loop, whose
# size the graph leaves open (training batches are usually 32 to 256 rows).
SYMBOL_SIZE = 128


def small_loop(spec: LoopSpec, limit: int | None = None, macs: int | None = None) -> bool:
    """Whether every value an iteration of loop `spec` computes has a known static shape of at
    most `limit` elements, and every product at most `macs` multiply-adds, a symbolic dimension
    beside known ones (an RNN's batch of rows of unknown size, symbolic.py) counted as
    SYMBOL_SIZE; a value whose every dimension is unknown is not small. The loop's inputs count
    only for being known: an iteration computes none of them (an RNN's weights; a history a
    gradient loop reads row by row). A product accumulated into a loop variable (a weight's
    gradient summed over iterations, codegen's `_accumulate_in_place`) counts by its
    multiply-adds alone."""
    from actorflow.scheduler.jit.codegen import _accumulate_in_place
    limit = SMALL_LOOP_ELEMENTS if limit is None else limit
    macs = SMALL_LOOP_MACS if macs is None else macs
    spec = _accumulate_in_place(spec)
    shapes = list(zip(spec.input_statics, (r for _, r in spec.inputs)))
    if len(shapes) < len(spec.inputs):
        return False
    rows = _row_accessed(spec)
    for k, (st, rank) in enumerate(shapes):
        uses = [(n.op, pos) for n in spec.nodes for pos, a in enumerate(n.args) if a == ("i", k)]
        by_rows = (k >= spec.n_vars and uses and all(u == ("_HistoryRead", 0) for u in uses)) or ("i", k) in rows
        if by_rows and rank > 0:        # (its first dimension is the forward loop's trip count)
            st, rank = st[1:], rank - 1
        if not _known(st, rank):
            return False
    for j, node in enumerate(spec.nodes):
        if len(node.statics) < len(node.ranks):
            return False
        if node.op in ("_Nop", "Identity", "Snapshot"):
            continue                    # (no work: a product done in place, an alias)
        if node.op in ("MatMul", "_AccMatMul"):
            a, b = (_ref_shape(spec, r) for r in node.args[-2:])
            if not (_known(*a) and _known(*b)) or len(a[0]) != 2 or len(b[0]) != 2:
                return False
            m = a[0][1] if node.attr("transpose_a") else a[0][0]
            k = a[0][0] if node.attr("transpose_a") else a[0][1]
            n = b[0][0] if node.attr("transpose_b") else b[0][1]
            if _elements((m, k, n)) > macs:
                return False
            continue
        for o, (st, rank) in enumerate(zip(node.statics, node.ranks)):
            if ("n", j, o) in rows and rank > 0:
                st, rank = st[1:], rank - 1
            if not _known(st, rank) or _elements(st) > limit:
                return False
    return True


def _known(st, rank) -> bool:
    """A static shape (spec.py) of known rank with some known dimension or symbol in each place."""
    if len(st) != rank:                 # (an unknown rank)
        return False
    if st and all(d < 0 for d in st):   # no known dimension: no telling what its size is
        return False
    return all(d != -1 for d in st)     # (-1: unknown, not a symbol)


def _elements(st) -> int:
    n = 1
    for d in st:
        n *= d if d >= 0 else SYMBOL_SIZE
    return n


def _ref_shape(spec: LoopSpec, ref):
    """(static shape, rank) of a reference of `spec`."""
    if ref[0] == "i":
        return spec.input_statics[ref[1]], spec.inputs[ref[1]][1]
    node = spec.nodes[ref[1]]
    return node.statics[ref[2]], node.ranks[ref[2]]


_ROW_OPS = frozenset({"GatherV2", "GatherNd", "TensorScatterUpdate", "TensorScatterAdd"})


def _row_accessed(spec: LoopSpec) -> set:
    """The values of loop `spec` that an iteration only reads or writes a row of: the tensors of
    GatherV2, GatherNd and TensorScatterUpdate (dynamic_rnn's inputs and outputs over time, and their
    gradients), through identities, and TensorScatterUpdate's results. `small_loop` counts them by
    their rows, as it counts histories: their first dimension is the loop's trip count."""
    users: dict = {}
    for j, nd in enumerate(spec.nodes):
        for pos, a in enumerate(nd.args):
            users.setdefault(a, []).append((j, pos))
    rows = {("n", j, 0) for j, nd in enumerate(spec.nodes) if nd.op in ("TensorScatterUpdate", "TensorScatterAdd")}
    changed = True
    while changed:
        changed = False
        for r, us in users.items():
            if r not in rows and all((spec.nodes[j].op in _ROW_OPS and pos == 0)
                                     or (spec.nodes[j].op in ("Identity", "Snapshot") and ("n", j, 0) in rows)
                                     for j, pos in us):
                rows.add(r)
                changed = True
    return rows


def _acc_root(t):
    """The accumulator handle `t` is (through the Enters that carry it into nested loops), and how
    many Enters that took; (None, 0) when `t` is not one."""
    depth = 0
    while t.op.type == "Enter" and t.op.attrs.get("is_constant", False):
        t = t.op.inputs[0]
        depth += 1
    return (t, depth) if t.op.type == _ACC else (None, 0)


def _saved_leaves(acc, consumers):
    """The pushes and pops of accumulator `acc` (following the Enters of its handle), or None when
    something else uses it."""
    leaves, stack = [], [acc]
    while stack:
        t = stack.pop()
        for c in consumers.get(t, ()):
            if c.type == "Enter" and c.attrs.get("is_constant", False):
                stack.append(c.outputs[0])
            elif c.type in (_PUSH, _POP) and c.inputs[0] is t:
                leaves.append(c)
            else:
                return None
    return leaves


def _pair_saved_values(found, consumers, fetched, frames, syncs) -> None:
    """Drops from `found` every loop whose saved values cannot all be compiled away: each
    accumulator must be pushed by exactly one loop and popped only by loops, all in `found`, and
    an inner loop's outer loop must have a trip count to hold back (a fixpoint: dropping a loop
    drops its partners)."""
    while True:
        bad = set()
        for name, lp in found.items():
            if lp.push_accs and lp.hist_enters:
                bad.add(name)           # a loop that both saves and reads (gradients of gradients)
            for p in lp.pushes:
                if _acc_root(p.inputs[0])[1] > 1 and not syncs.get(frames.get(p.inputs[0].op.inputs[0].op)):
                    bad.add(name)
            for acc in lp.push_accs | {_acc_root(e.outputs[0])[0] for e in lp.hist_enters}:
                leaves = _saved_leaves(acc, consumers)
                if (acc in fetched or leaves is None or len({frames.get(c) for c in leaves if c.type == _PUSH}) != 1
                        or any(frames.get(c) not in found for c in leaves)):
                    bad.add(name)
        if not bad:
            return
        for name in bad:
            del found[name]


def _shape_only_saves(found, consumers, frames) -> None:
    """Marks in each forward loop's spec the saved values whose gradient loops read nothing but
    their shape (an element-wise op's gradient: `Shape` of each operand for
    BroadcastGradientArgs, folded to the forward loop's symbols in a loop analyzed
    symbolically): the compiled loop does not save them (spec.py's `shape_only`), where their
    shape is known from its arguments."""
    for lp in found.values():
        only = []
        for k, p in enumerate(lp.pushes):
            acc, depth = _acc_root(p.inputs[0])
            if depth != 1:
                continue
            pops = [c for c in _saved_leaves(acc, consumers) if c.type == _POP]
            if pops and all(_read_for_shape(found.get(frames.get(c)), c, consumers) for c in pops):
                only.append(k)
        lp.shape_only = tuple(only)
        lp.spec = _with_shape_only(lp.spec, lp.shape_only)


def _read_for_shape(gl, pop, consumers) -> bool:
    """Whether gradient loop `gl` (a `_Loop`, or None) uses what `pop` reads only through folded
    Shape/Rank ops (symbolic.py)."""
    sym = getattr(gl, "sym", None)
    return sym is not None and all(c.type in ("Shape", "Rank") and c in sym.folded
                                   for c in consumers.get(pop.outputs[0], ()))


def _with_shape_only(spec: LoopSpec, only) -> LoopSpec:
    """`spec` with the saves of indices `only` marked `shape_only`, those of them whose rows' shape
    its arguments give (each size static, or a symbol an array argument has)."""
    syms = {d for (_, rank), st in zip(spec.inputs, spec.input_statics) if rank for d in st if d < -1}

    def known(ref):
        if ref[0] == "i":
            st, rank = spec.input_statics[ref[1]] if ref[1] < len(spec.input_statics) else (), spec.inputs[ref[1]][1]
        else:
            node = spec.nodes[ref[1]]
            st, rank = node.statics[ref[2]] if ref[2] < len(node.statics) else (), node.ranks[ref[2]]
        return len(st) == rank and all(d >= 0 or d in syms for d in st)
    return dataclasses.replace(spec, shape_only=tuple(k for k in only if known(spec.saves[k])))


def _unalias(nodes, ref):
    while ref[0] == "n" and nodes[ref[1]].op in ("Identity", "Snapshot"):
        ref = nodes[ref[1]].args[0]
    return ref


def _is_iteration_index(nodes, nexts, var_enters, ref) -> bool:
    """Whether `ref` is a loop variable that starts at 0 and goes up by 1 every iteration (the
    index the gradient's pushes are keyed by), so that its value is the iteration count."""
    ref = _unalias(nodes, ref)
    if ref[0] != "i" or ref[1] >= len(nexts):
        return False
    k = ref[1]
    init = var_enters[k].inputs[0]
    if not _is_scalar_const(init) or np.asarray(init.op.attrs["value"]).item() != 0:
        return False
    nx = _unalias(nodes, nexts[k])
    if nx[0] != "n" or nodes[nx[1]].op not in ("Add", "AddV2"):
        return False
    args = [_unalias(nodes, a) for a in nodes[nx[1]].args]
    ones = [a for a in args if a[0] == "n" and nodes[a[1]].op == "Const" and nodes[a[1]].attr("value") == 1]
    return ("i", k) in args and len(ones) == 1


def _saved_value_ok(t) -> bool:
    """A value a compiled loop can save: a known rank (one history row per iteration, each of the
    first row's shape: `rt.save_row` checks) and a compilable dtype."""
    return t.shape.ndims is not None and _dt(t) in _TYPES_OK


def _analyze_loop(name, ops, level_on, fed, fetched, consumers) -> _Loop:
    """`_analyze` with symbolic shapes (symbolic.py), or, where they do not serve, with the static
    shapes alone (unknown dimensions worked out at run time)."""
    try:
        lp = _analyze(name, ops, level_on, fed, fetched, consumers, True)
    except _NotCompilable:
        return _analyze(name, ops, level_on, fed, fetched, consumers, False)
    finally:
        _FED.shapes = None
    lp.vary = _variants(lp, level_on, fed, fetched, consumers)
    return lp


def _variants(lp: _Loop, level_on, fed, fetched, consumers):
    """The spec of `lp` for calls whose inputs have size 1 in some dimensions that the symbolic
    analysis took to be equal to others (numpy broadcasting: ``x * h`` for x of 1 row and h of 5,
    both ``[None, 4]``), as a function of those places ((argument, dimension) pairs), or None
    where the loop does not compile with them (`JitKernel` then runs the interpreted loop). The
    analysis runs again with those dimensions 1: the element-wise ops broadcast them, and a
    gradient's BroadcastGradientArgs folds to the sums over them."""
    n_entry = len(lp.var_enters) + len(lp.inv_enters)
    tensors = getattr(_FED, "tensors", ())

    def vary(places):
        # (a history's dimension 0 counts iterations: its rows' dimension j is j + 1)
        ones = frozenset((i, j - 1 if i >= n_entry else j) for i, j in places)
        saved = getattr(_FED, "tensors", ()), getattr(_FED, "shapes", None)
        _FED.tensors = tensors
        try:
            v = _analyze(lp.name, lp.ops, level_on, fed, fetched, consumers, True, ones)
        except _NotCompilable:
            return None
        finally:
            _FED.tensors, _FED.shapes = saved
        same = (len(v.extra) == len(lp.extra) and all(a is b for a, b in zip(v.extra, lp.extra))
                and len(v.spec.saves) == len(lp.spec.saves))
        if not same:
            return None                 # (another set of inputs or outputs than the loop's op has)
        return _with_shape_only(v.spec, getattr(lp, "shape_only", ()))
    return vary


def _no_op_sum(op) -> bool:
    """A Sum over no axis (a gradient's, where BroadcastGradientArgs folded to nothing)."""
    if op.type != "Sum":
        return False
    axes = _const_value(op.inputs[1])
    return axes is not None and np.size(axes) == 0


def _symbolic(merges, switches, nexts, inv_enters, pops, body_ops, consumers, ones=frozenset()):
    """The loop's symbolic shapes, or None where they cannot be worked out or its variables do
    not keep theirs from one iteration to the next (`ones`: symbolic.infer's)."""
    entry = [((m.outputs[0], s.outputs[1]), m.outputs[0]) for m, s in zip(merges, switches)]
    entry += [((e.outputs[0],), e.inputs[0]) for e in inv_enters]
    entry += [((p.outputs[0],), p.outputs[0]) for p in pops]
    try:
        sym = symbolic.infer(body_ops, entry, _graph_const, ones)
        for m, nx in zip(merges, nexts):
            t = nx.inputs[0]
            if t not in sym.shape or sym.dims(t) != sym.dims(m.outputs[0]) or t in sym.loose:
                raise symbolic.NotSymbolic(f"loop variable '{m.name}' changes shape")
        body = set(body_ops)
        for t in sym.loose | set(sym.loose_axes):       # (infer saw the consumers in the body)
            if any(c not in body for c in consumers.get(t, ())):
                raise symbolic.NotSymbolic(f"'{t.name}' leaves the loop's body")
    except symbolic.NotSymbolic as e:
        log.debug("JIT: no symbolic shapes for the loop of '%s': %s", merges[0].name if merges else "?", e)
        return None
    return sym


def _analyze(name, ops, level_on, fed, fetched, consumers, symbolic_shapes, ones=frozenset()) -> _Loop:
    opset = set(ops)
    enters = [op for op in ops if op.type == "Enter" and op.attrs.get("frame_name") == name]
    if any(op.type == "Enter" and op.attrs.get("frame_name") != name for op in ops):
        raise _NotCompilable        # a nested loop
    if not level_on and not any(op.attrs.get("_XlaCompile") is True for op in ops):
        raise _NotCompilable
    var_enters = [e for e in enters if not e.attrs.get("is_constant", False)]
    inv_enters, hist_enters, push_accs = [], [], set()
    for e in enters:
        if not e.attrs.get("is_constant", False):
            continue
        acc, depth = _acc_root(e.outputs[0])
        if acc is None:
            inv_enters.append(e)
            continue
        users = consumers.get(e.outputs[0], ())
        kinds = {c.type for c in users}
        if (not users or len(kinds) != 1 or not kinds <= {_PUSH, _POP}
                or any(c not in opset or c.inputs[0] is not e.outputs[0] or c.attrs.get("N") != depth for c in users)):
            raise _NotCompilable
        if kinds == {_PUSH}:
            if any(not _saved_value_ok(c.inputs[1]) for c in users):
                raise _NotCompilable
            push_accs.add(acc)
        else:
            if len(users) != 1 or not _saved_value_ok(users[0].outputs[0]):
                raise _NotCompilable
            hist_enters.append(e)
    # the outer loops' indices of a nested loop's pushes and pops: invariants of this loop
    invariant_outs = {e.outputs[0] for e in inv_enters}
    for c in [c for e in enters for c in consumers.get(e.outputs[0], ()) if c.type in (_PUSH, _POP)]:
        outer_keys = c.inputs[2:-1] if c.type == _PUSH else c.inputs[1:-1]
        if any(k not in invariant_outs for k in outer_keys):
            raise _NotCompilable
    merges, switches, exits, nexts = [], [], [], []
    loop_cond = None
    for e in var_enters:
        ms = [c for c in consumers.get(e.outputs[0], ()) if c.type == "Merge"]
        if len(ms) != 1 or len(consumers.get(e.outputs[0], ())) != 1:
            raise _NotCompilable
        m = ms[0]
        nx = [t.op for t in m.inputs if t.op.type == "NextIteration"]
        sw = [c for c in consumers.get(m.outputs[0], ()) if c.type == "Switch"]
        if len(nx) != 1 or len(sw) != 1:
            raise _NotCompilable
        s = sw[0]
        ex = [c for c in consumers.get(s.outputs[0], ())]
        if len(ex) > 1 or (ex and ex[0].type != "Exit"):
            raise _NotCompilable
        lc = s.inputs[1].op
        if lc.type != "LoopCond" or (loop_cond is not None and lc is not loop_cond):
            raise _NotCompilable
        loop_cond = lc
        merges.append(m)
        switches.append(s)
        exits.append(ex[0] if ex else None)
        nexts.append(nx[0])
    if loop_cond is None:
        raise _NotCompilable
    cf = set(enters) | set(merges) | set(switches) | {x for x in exits if x is not None} | set(nexts) | {loop_cond}
    pushes = [op for op in ops if op.type == _PUSH]
    body_ops = [op for op in ops if op not in cf and op.type != _PUSH]
    for op in ops:
        if op.type in _CF and op not in cf:
            raise _NotCompilable
        if any(t in fed or (t in fetched and op.type != "Exit") for t in op.outputs):
            raise _NotCompilable
    pops = [consumers[h.outputs[0]][0] for h in hist_enters]
    sym = _symbolic(merges, switches, nexts, inv_enters, pops, body_ops, consumers, ones) if symbolic_shapes else None
    if symbolic_shapes and sym is None:
        raise _NotCompilable            # (the caller tries again without)
    _FED.shapes = sym
    skip = (sym.folded | sym.identity) if sym is not None else set()
    for op in body_ops:
        if op.type == _POP:
            if op.inputs[0].op not in hist_enters:
                raise _NotCompilable
        elif op in skip:
            pass
        elif not _op_compilable(op) and not (op.type == "Const") and _loop_random(op) is None:
            raise _NotCompilable
        for c in op.control_inputs:
            if c not in opset:
                raise _NotCompilable
        for t in op.outputs:
            for c in consumers.get(t, ()):
                if c not in opset:
                    raise _NotCompilable
    for op in pushes:
        if _acc_root(op.inputs[0])[0] not in push_accs:
            raise _NotCompilable
    for t in list(loop_cond.inputs) + [m.outputs[0] for m in merges] + [n.inputs[0] for n in nexts]:
        if _ndims(t) is None or _dt(t) not in _TYPES_OK:
            raise _NotCompilable
    for e in inv_enters:
        t = e.inputs[0]
        if t.shape.ndims is None or _dt(t) not in _TYPES_OK:
            raise _NotCompilable
    n_vars = len(var_enters)
    external: dict = {}
    for k, (m, s) in enumerate(zip(merges, switches)):
        external[m.outputs[0]] = ("i", k)
        external[s.outputs[1]] = ("i", k)
    for k, e in enumerate(inv_enters + hist_enters):
        external[e.outputs[0]] = ("i", n_vars + k)
    base = n_vars + len(inv_enters) + len(hist_enters)
    extra: list = []                    # constant arrays of the body: inputs after the histories
    # the inputs' static shapes first: symbols are numbered in the order the inputs have them
    in_statics = tuple(_statics(m.outputs[0]) for m in merges) + tuple(
        _statics(e.outputs[0]) if sym is not None else statics_of(e.inputs[0].shape) for e in inv_enters) + tuple(
        (-1,) + _statics(p.outputs[0]) for p in pops)

    def ext(t):
        r = external.get(t)
        if r is not None:
            return r
        if t.op.type == "Const" and t.op in opset:        # a constant array inside the body
            extra.append(t)
            r = external[t] = ("i", base + len(extra) - 1)
            return r
        raise _NotCompilable
    b = _Builder(ext)
    # the condition's ops: those the LoopCond needs, in order; then the body
    need: set = set()
    stack = [loop_cond.inputs[0].op]
    while stack:
        o = stack.pop()
        if o in need or o not in opset or o in cf:
            continue
        need.add(o)
        stack.extend(t.op for t in o.inputs)
    cond_ops = [op for op in body_ops if op in need]
    rest = [op for op in body_ops if op not in need]
    randoms: list = []                  # the loop's random ops, in the order of their streams

    def add(op):
        if op.type == _POP:
            b.add(op, as_type="_HistoryRead", inputs=(op.inputs[0], op.inputs[-1]))
        elif op.type in LOOP_RANDOM and op not in skip:
            like, shape = _loop_random(op)
            attrs = (("shape", shape),) if like is None else ()
            b.add(op, as_type=op.type, inputs=() if like is None else (like,))
            node = b.nodes[-1]
            b.nodes[-1] = dataclasses.replace(node, attrs=tuple(sorted(attrs + (("stream", len(randoms)),))))
            randoms.append(op)
        elif op in skip:
            if op in sym.identity:      # a Reshape to the shape its input has: its input
                b.ref[op.outputs[0]] = b.arg(op.inputs[0])
        elif sym is not None and _no_op_sum(op):
            b.ref[op.outputs[0]] = b.arg(op.inputs[0])     # (the element-wise ops around it fuse)
        elif op.type != "Const":        # scalar constants inline where used; arrays become inputs
            b.add(op)
    for op in cond_ops:
        add(op)
    n_cond = len(b.nodes)
    for op in rest:
        add(op)
    cond_ref = b.arg(loop_cond.inputs[0])
    next_refs = tuple(b.arg(n.inputs[0]) for n in nexts)
    saves = tuple(b.arg(p.inputs[1]) for p in pushes)
    for p in pushes:
        if not _is_iteration_index(b.nodes, next_refs, var_enters, b.arg(p.inputs[-1])):
            raise _NotCompilable
    in_types = tuple((_dt(t), t.shape.ndims) for t in [e.inputs[0] for e in var_enters + inv_enters]) + tuple(
        (_dt(e.outputs[0]), e.outputs[0].shape.ndims + 1)
        for e in (consumers[h.outputs[0]][0] for h in hist_enters)) + tuple(
        (_dt(t), t.shape.ndims) for t in extra)
    for k, m in enumerate(merges):
        if (in_types[k][0], in_types[k][1]) != (_dt(m.outputs[0]), m.outputs[0].shape.ndims):
            raise _NotCompilable
    in_statics += tuple(statics_of(t.shape) for t in extra)
    spec = LoopSpec(in_types, n_vars, tuple(b.nodes), n_cond, cond_ref, next_refs, saves, in_statics)
    return _Loop(name=name, ops=ops, opset=opset, consumers=consumers, enters=enters, var_enters=var_enters, inv_enters=inv_enters,
                 hist_enters=hist_enters, push_accs=push_accs, pushes=pushes, extra=extra, merges=merges,
                 switches=switches, exits=exits, nexts=nexts, loop_cond=loop_cond, cond_ops=cond_ops, rest=rest,
                 spec=spec, sym=sym, randoms=tuple(randoms))


def _build_loop(plan, edit, lp: _Loop, histories: dict, nested: set, frames, syncs, waits, mode) -> None:
    """Replaces loop `lp` by one ``_JitLoop`` op (its saved values' histories become outputs)."""
    from actorflow.scheduler.jit.kernel import JIT_LOOP
    hist_inputs = []
    for e in lp.hist_enters:
        acc, depth = _acc_root(e.outputs[0])
        if depth == 1:
            hist_inputs.append(histories[acc])
            continue
        # nested: the enclosing gradient loop pops the whole history by the outer indices
        pop = lp.consumers[e.outputs[0]][0]
        outer = [e.inputs[0]] + [k.op.inputs[0] for k in pop.inputs[1:-1]]
        t = pop.outputs[0]
        new_pop = new_op(plan.graph, pop.name + "/_jit_history", _POP, outer, (),
                         dict(pop.attrs, N=len(outer) - 1, shape=TensorShape(None)),
                         [(t.dtype, TensorShape([None] + t.shape.as_list()))], pop.device)
        edit.add(new_pop)
        hist_inputs.append(new_pop.outputs[0])
    extra_inputs = []
    for t in lp.extra:
        c = t.op
        const = new_op(plan.graph, c.name + "/_jit_const", "Const", (), (), dict(c.attrs),
                       [(t.dtype, t.shape)], c.device)
        edit.add(const)
        extra_inputs.append(const.outputs[0])
    inputs = [e.inputs[0] for e in lp.var_enters + lp.inv_enters] + hist_inputs + extra_inputs
    interp = _loop_interpreter(lp, extra_inputs)
    ctrl = []
    for e in lp.enters:
        for c in e.control_inputs:
            if c not in lp.opset and c not in ctrl:
                ctrl.append(c)
    out_specs = [(m.outputs[0].dtype, m.outputs[0].shape) for m in lp.merges]
    out_specs += [(p.inputs[1].dtype, TensorShape([None] + p.inputs[1].shape.as_list())) for p in lp.pushes]
    attrs = {"spec": lp.spec, "interpreted": interp, "mode": _mode_of(lp.ops, mode), "what": f"while loop '{lp.name}'",
             "vary": getattr(lp, "vary", None), "random_ops": lp.randoms,
             "parts": tuple((op.name, op.type) for op in lp.ops)}
    new = new_op(plan.graph, f"{lp.name}/_jit_loop", JIT_LOOP, inputs, ctrl, attrs, out_specs,
                 lp.var_enters[0].device)
    for x, nt in zip(lp.exits, new.outputs):
        if x is not None:
            edit.replace(x.outputs[0], nt)
    for p, nt in zip(lp.pushes, new.outputs[len(lp.merges):]):
        acc, depth = _acc_root(p.inputs[0])
        histories[acc] = nt
        if depth > 1:
            nested.add(acc)       # pushed whole, once per iteration of the enclosing loop
            handle = p.inputs[0].op.inputs[0]
            outer_keys = [k.op.inputs[0] for k in p.inputs[2:-1]]
            push = new_op(plan.graph, p.name + "/_jit_history", _PUSH, [handle, nt] + outer_keys, (),
                          dict(p.attrs, N=len(outer_keys)), [], p.device)
            edit.add(push)
            for sync in syncs[frames.get(handle.op)]:
                waits.setdefault(sync, []).append(push)
    for op in lp.ops:
        edit.remove(op)
    edit.add(new)


def _loop_interpreter(lp: _Loop, extra):
    """The loop run op by op through the registered kernels (async mode's stand-in, and what runs
    when the compiled loop rejects its values). Saved values are kept in lists and returned
    stacked; reads of saved values index the histories it is given."""
    def step(op):
        if op.type == _POP:
            return op, _read_saved(op)
        if op in randoms:
            return op, _random_step(op)
        return op, get_kernel(op.type, "CPU").factory(_kernel_attrs(op.attrs))
    randoms = set(lp.randoms)
    cond_run = [step(op) for op in lp.cond_ops if op.type != "Const"]
    body_run = [step(op) for op in lp.rest if op.type != "Const"]
    n_vars = len(lp.var_enters)
    invariants = [e.outputs[0] for e in lp.inv_enters + lp.hist_enters] + list(extra)
    merges, switches, nexts, loop_cond = lp.merges, lp.switches, lp.nexts, lp.loop_cond
    # (an empty history of rows of unknown dimensions has size 0 in them)
    saved = [(p.inputs[1], np.dtype(_dt(p.inputs[1])), tuple(d or 0 for d in p.inputs[1].shape.as_list()))
             for p in lp.pushes]

    # Every value lives in a register (a list slot) numbered once here: the loop's invariants, the
    # Merge and Switch outputs that carry the loop variables, each op's outputs, and the constants
    # the ops read (filled in once); each op reads and writes registers by number.
    index: dict = {}

    def slot(t):
        k = index.get(t)
        if k is None:
            k = index[t] = len(index)
        return k
    inv_slots = [slot(t) for t in invariants]
    var_slots = [(slot(m.outputs[0]), slot(s.outputs[1])) for m, s in zip(merges, switches)]
    for op, _ in cond_run + body_run:
        for t in op.outputs:
            slot(t)
    consts: list = []

    def ref(t):
        """The register of a value read: a constant outside the loop's ops gets one, filled once."""
        k = index.get(t)
        if k is None:
            k = slot(t)
            consts.append((k, t.op.attrs.get("value")))
        return k

    def program(steps):
        out = []
        for op, fn in steps:
            outs = slot(op.outputs[0]) if len(op.outputs) == 1 else tuple(slot(t) for t in op.outputs)
            out.append((op, fn, tuple(ref(t) for t in op.inputs), outs))
        return tuple(out)
    cond_prog, body_prog = program(cond_run), program(body_run)
    cond_slot = ref(loop_cond.inputs[0])
    next_slots = [ref(n.inputs[0]) for n in nexts]
    saved_slots = [ref(t) for t, _, _ in saved]
    template = [None] * len(index)
    for k, v in consts:
        template[k] = v

    def run_ops(prog, regs, it):
        elements = 0
        for op, fn, ins, outs in prog:
            try:
                r = fn(*[regs[k] for k in ins])
            except Exception as e:  # noqa: BLE001 - named as the actors name it: the op, the iteration
                raise _loop_op_error(e, op, it, lp.name) from e
            if type(outs) is int:
                regs[outs] = r
                elements += getattr(r, "size", 1)
            else:
                for k, v in zip(outs, r):
                    regs[k] = v
        ops_run[1] += elements

    per_iteration = len(cond_run) + len(body_run)
    # (op runs, elements their single outputs hold): tiered mode's estimate of the cost, the
    # elements weighing in for a loop of wide values (an RNN cell over 128 rows)
    ops_run = [0, 0]

    def run(*args):
        regs = template.copy()
        for k, a in zip(inv_slots, args[n_vars:]):
            regs[k] = a
        cur = list(args[:n_vars])
        rows: list = [[] for _ in saved]
        iterations = 0
        stop = interrupt.current()      # the step's stop cell (kernels/interrupt.py)
        while True:
            if stop[0]:
                interrupt.raise_if_stopped(stop, f"while loop '{lp.name}'")
            for (mk, sk), v in zip(var_slots, cur):
                regs[mk] = v
                regs[sk] = v
            run_ops(cond_prog, regs, iterations)
            if not bool(regs[cond_slot]):
                break
            run_ops(body_prog, regs, iterations)
            iterations += 1
            for k, r in zip(saved_slots, rows):
                r.append(regs[k])
            cur = [regs[k] for k in next_slots]
        ops_run[0] += iterations * per_iteration + len(cond_run)
        for (_, d, shape), r in zip(saved, rows):
            cur.append(np.stack([np.asarray(v, d) for v in r]) if r else np.empty((0,) + shape, d))
        return cur[0] if len(cur) == 1 else tuple(cur)
    run.ops_run = ops_run
    return run


def _random_step(op):
    """A random op of an interpreted loop: the kernel of the session the loop's kernel runs in
    (compile.py `random_kernels`: the same stream as the op's actor and the compiled loop), or, for
    a loop kernel no session bound, one of its own."""
    from actorflow.scheduler.jit.compile import random_kernels
    own: list = []

    def fn(*xs):
        k = random_kernels().get(op.name)
        if k is None:
            if not own:
                own.append(get_kernel(op.type, "CPU").factory(_kernel_attrs(op.attrs)))
            k = own[0]
        return k(*xs)
    return fn


def _loop_op_error(e: Exception, op, it: int, frame: str) -> errors.OpError:
    """The error of op `op` of a loop run as one kernel call, failed in iteration `it`: it names the
    op and the iteration, as the actors' error would (actors/node.py `NodeActor.error`)."""
    where = f"[[node {op.name} ({op.type}) in iteration {it} of loop '{frame}']]"
    if isinstance(e, errors.OpError):
        if e.node_def is None:
            e.node_def = op.name
        if "[[node " not in e.message:
            e.message = f"{e.message}\n\t {where}"
            e.args = (e.message,)
        return e
    cls = errors.ResourceExhaustedError if isinstance(e, MemoryError) else errors.InvalidArgumentError
    return cls(op.name, None, f"{type(e).__name__}: {e}\n\t {where}")


def _read_saved(op):
    def fn(history, *index):
        i = int(index[-1])
        if not 0 <= i < history.shape[0]:
            raise ValueError(f"no value was saved for iteration {i} (op '{op.name}' reads {history.shape[0]} "
                             "saved iterations)")
        return history[i, ...]
    return fn
