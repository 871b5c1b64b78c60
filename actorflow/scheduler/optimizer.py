"""Graph optimizer passes (TF's grappler), each a pure function from plan to plan.

Each pass is registered under its name in scheduler/lower.py's pipeline (`graph_pass`), where a
`RewriterConfig` field of that name (TF's) turns it off: `RewriterConfig(constant_folding=OFF)`.
`optimize(plan, options)` runs the pipeline's graph passes (these and the JIT) alone, for tests
and tools that want the rewritten Plan itself:

- ``constant_folding``: an op whose inputs are all constants is evaluated once, by its own
  kernel, and becomes a Const (so the runtime folds it into its consumers); `Shape`, `Size` and
  `Rank` of tensors whose static shape is known become constants too; and a float division by a
  constant becomes a multiplication by its reciprocal, as grappler's constant folding does (so
  ``x / 3.0`` rounds as under TF).
- ``arithmetic_optimization``: ``x * 1``, ``1 * x``, ``x + 0``, ``0 + x``, ``x - 0``, ``x / 1``,
  ``-(-x)``, a cast to the tensor's own dtype, a reshape to its own (static) shape and a transpose
  of a transpose that cancels become ``x``; a chain ``(x + c1) + c2`` or ``(x * c1) * c2`` of
  scalar constants becomes ``x + (c1 + c2)`` (reassociation, as grappler's constant push-down:
  floating-point results may differ in the last bits); and common subexpressions (two pure ops
  of one type, attributes and inputs) are computed once.
- ``dependency_optimization``: Identity and Snapshot ops with no control edges, reading neither a
  variable nor a control-flow op, are bypassed.
- model pruning (``disable_model_pruning`` turns it off): after the rewrites, ops nothing
  fetched or targeted needs any more are dropped.

No pass changes an op that is stateful (variables, queues, random ops with or without seeds),
has control edges in or out, runs inside a while loop, or whose output is fed or fetched; the
JIT (scheduler/jit) runs after them.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np

from actorflow.graph.tensor_shape import TensorShape
from actorflow.kernels.registry import get_kernel, has_kernel
from actorflow.scheduler.ir import kernel_attrs as _kernel_attrs
from actorflow.scheduler.plan import Plan
from actorflow.scheduler.rewrite import PlanEdit, loop_frames, new_op

__all__ = ["PassOptions", "optimize", "constant_folding", "arithmetic_optimization",
           "dependency_optimization", "prune"]

log = logging.getLogger(__name__)

# Constant folding never makes a constant bigger than this (elements): TF's limit is 10 MB.
MAX_FOLDED_ELEMENTS = 1 << 20
_CF = frozenset({"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "RefSwitch",
                 "ControlTrigger", "NoOp"})
_NO_FOLD = frozenset({"Placeholder", "PlaceholderWithDefault", "Const", "VariableV2", "_Send", "_Recv",
                      "Print", "Assert", "CheckNumerics"})


@dataclass(frozen=True)
class PassOptions:
    """Which graph passes `optimize` runs (RewriterConfig's names) and the JIT's switch
    (OptimizerOptions' global_jit_level: True for ON_1/ON_2, False for OFF; jit_scope()-marked ops
    compile anyway); `remapping`: the fusion pass will run, so the JIT leaves its chains to it."""
    constant_folding: bool = True
    arithmetic_optimization: bool = True
    dependency_optimization: bool = True
    model_pruning: bool = True
    jit: bool = False
    remapping: bool = True

    @classmethod
    def from_config(cls, config) -> "PassOptions":
        """The passes a session's ConfigProto asks for: RewriterConfig fields (DEFAULT 0 and ON 1
        run a pass, OFF 2 does not), `OptimizerOptions.global_jit_level` (ON_1 1 / ON_2 2: JIT on;
        OFF -1 / DEFAULT 0: off here, where DEFAULT's small loops (lower.py `_jit`) are not a pass
        of their own), and the environment's AF_JIT=1/0 over the latter."""
        import os
        go = getattr(config, "graph_options", None)
        rw = getattr(go, "rewrite_options", None)
        oo = getattr(go, "optimizer_options", None)

        def on(field):
            return getattr(rw, field, 0) != 2
        jit = getattr(oo, "global_jit_level", 0) in (1, 2)
        env = os.environ.get("AF_JIT")
        if env is not None and env != "":
            jit = env != "0"
        return cls(constant_folding=on("constant_folding") and bool(getattr(oo, "do_constant_folding", True)),
                   arithmetic_optimization=on("arithmetic_optimization"),
                   dependency_optimization=on("dependency_optimization"),
                   model_pruning=not bool(getattr(rw, "disable_model_pruning", False)), jit=jit,
                   remapping=on("remapping") and os.environ.get("AF_FUSION", "1") != "0")


def optimize(plan: Plan, options: PassOptions) -> Plan:
    """The graph passes of scheduler/lower.py's pipeline (constant folding ... model pruning, the
    JIT among them), switched by `options`, over `plan`: the rewritten Plan, for tests and tools
    (`lower` runs the same passes in its pipeline)."""
    from actorflow.scheduler.lower import LowerOptions, pipeline
    lo = LowerOptions(rewrites=(("constant_folding", options.constant_folding),
                                ("arithmetic_optimization", options.arithmetic_optimization),
                                ("dependency_optimization", options.dependency_optimization),
                                ("model_pruning", options.model_pruning), ("remapping", options.remapping)),
                      jit_level=1 if options.jit else -1)
    for p in pipeline():
        on_plan = getattr(p.fn, "on_plan", None)
        if on_plan is not None and lo.enabled(p):
            plan = on_plan(plan, lo)
    return plan


def _fused_later(plan: Plan) -> frozenset:
    """Names of the ops the fusion pass (scheduler/fusion.py, after lowering to IR) will fuse:
    MatMul/Conv2D + BiasAdd [+ Relu] run best as its GEMM epilogues, not in a JIT cluster."""
    if not any(op.type in ("MatMul", "Conv2D") for op in plan.ops):
        return frozenset()           # every fusion starts at one of them: no IR to build for nothing
    from actorflow.scheduler.fusion import find_fusions
    from actorflow.scheduler.lower import from_plan
    try:
        fusions = find_fusions(from_plan(plan))
    except Exception:  # noqa: BLE001 - no fusion to protect then
        return frozenset()
    return frozenset(p.name for f in fusions.values() for p in f.parts)


class _Facts:
    """What every pass asks about a plan: who is protected, who consumes what."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.frames = loop_frames(plan) if plan.has_control_flow else {}
        self.protected = set(plan.feeds)    # fed and fetched tensors
        self.protected.update(t for t in plan.fetches if t is not None)
        self.fetched = {t for t in plan.fetches if t is not None}
        self.controllers = set(plan.targets)
        self.consumers: dict = {}
        consumers = self.consumers
        for op in plan.ops:
            if op.control_inputs:
                self.controllers.update(op.control_inputs)
            for t in op.inputs:
                c = consumers.get(t)
                if c is None:
                    consumers[t] = [op]
                else:
                    c.append(op)
        self._pure: dict = {}

    def pure(self, op) -> bool:
        """True when a pass may rewrite `op` (remove, replace or evaluate it); computed once per op."""
        r = self._pure.get(op)
        if r is None:
            r = self._pure[op] = self._is_pure(op)
        return r

    def _is_pure(self, op) -> bool:
        d = op.op_def
        if d.stateful or d.ref_inputs or d.resource or op.type in _CF or op.type in _NO_FOLD or op.control_inputs \
                or op in self.controllers or (self.frames and self.frames.get(op) is not None):
            return False
        protected = self.protected
        for t in op.outputs:
            if t in protected:
                return False
        for t in op.inputs:
            if getattr(t.dtype, "is_ref", False) or t.op.type in _CF:
                return False
        return True


def _const(plan, name, value, like_device="") -> object:
    from actorflow.graph import dtypes
    value = np.asarray(value)
    return new_op(plan.graph, name, "Const", (), (), {"value": value, "dtype": dtypes.as_dtype(value.dtype)},
                  [(dtypes.as_dtype(value.dtype), TensorShape(value.shape))], like_device)


def _value(t, edit):
    """The constant value of `t`, or None (not a Const, a Const in a frame, or a fed tensor)."""
    t = edit.resolve(t)
    if t.op.type != "Const" or t.op.control_inputs or t in edit.fed:
        return None
    return t.op.attrs["value"]


# -- constant folding --------------------------------------------------------------------------
def constant_folding(plan: Plan) -> Plan:
    """Ops of constant inputs, and Shape/Size/Rank of static shapes, become constants."""
    f = _Facts(plan)
    edit = PlanEdit(plan)
    for op in plan.ops:
        if not f.pure(op) or not has_kernel(op.type, "CPU"):
            continue
        if op.type in ("RealDiv", "Div") and _div_to_reciprocal_mul(plan, edit, op):
            continue
        value = None
        if op.type in ("Shape", "Size", "Rank") and op.inputs and op.inputs[0].shape.is_fully_defined():
            shape = op.inputs[0].shape.as_list()
            dt = op.outputs[0].dtype.np
            value = (np.asarray(shape, dt) if op.type == "Shape" else
                     np.asarray(int(np.prod(shape, dtype=np.int64)), dt) if op.type == "Size" else
                     np.asarray(len(shape), dt))
            value = [value]
        elif op.inputs:
            args = [_value(t, edit) for t in op.inputs]
            if any(a is None for a in args):
                continue
            if any(t.shape.num_elements() is None or t.shape.num_elements() > MAX_FOLDED_ELEMENTS
                   for t in op.outputs):
                continue
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = get_kernel(op.type, "CPU").factory(_kernel_attrs(op.attrs))(*args)
            except Exception as e:  # noqa: BLE001 - an op that fails is left for the step to report
                log.debug("constant folding: %s stays (%s)", op.name, e)
                continue
            value = list(r) if len(op.outputs) > 1 else [r]
        if value is None:
            continue
        ok = True
        consts = []
        for t, v in zip(op.outputs, value):
            v = np.asarray(v)
            if v.dtype != t.dtype.np or (t.shape.ndims is not None and v.ndim != t.shape.ndims) or v.dtype == object:
                ok = False
                break
            consts.append(_const(plan, op.name if len(op.outputs) == 1 else f"{op.name}/{t.value_index}", v,
                                 op.device))
        if not ok:
            continue
        for t, c in zip(op.outputs, consts):
            edit.add(c)
            edit.replace(t, c.outputs[0])
        edit.remove(op)
    return edit.finish()


def _div_to_reciprocal_mul(plan, edit, op) -> bool:
    """``x / c`` -> ``x * (1 / c)`` for a constant float or complex `c` and a non-constant `x`
    (grappler's ReduceDivToReciprocalMul, part of TF's constant folding): the strength reduction
    TF makes, so that a division by a constant rounds as it does under TF."""
    out = op.outputs[0]
    if not (out.dtype.is_floating or out.dtype.is_complex) or len(op.inputs) != 2:
        return False
    x, c = (edit.resolve(t) for t in op.inputs)
    v = _value(c, edit)
    if v is None or _value(x, edit) is not None:
        return False
    v = np.asarray(v)
    if v.dtype != out.dtype.np:
        return False
    with np.errstate(all="ignore"):
        recip = np.reciprocal(v)
    const = _const(plan, f"{op.name}/reciprocal", recip, op.device)
    mul = new_op(plan.graph, op.name, "Mul", (x, const.outputs[0]), (), {"T": op.attrs.get("T", out.dtype)},
                 [(out.dtype, out.shape)], op.device)
    edit.add(const)
    edit.add(mul)
    edit.replace(out, mul.outputs[0])
    edit.remove(op)
    return True


# -- arithmetic --------------------------------------------------------------------------------
_IDENTITY_RIGHT = {"Mul": 1, "AddV2": 0, "Add": 0, "Sub": 0, "RealDiv": 1, "Div": 1}
_IDENTITY_LEFT = {"Mul": 1, "AddV2": 0, "Add": 0}
_ASSOC = {"AddV2": "AddV2", "Add": "AddV2", "Mul": "Mul"}


def _same_shape(a, b) -> bool:
    return a.shape.is_fully_defined() and b.shape.is_fully_defined() and a.shape.as_list() == b.shape.as_list()


def arithmetic_optimization(plan: Plan) -> Plan:
    """Algebraic identities, constant chains and common subexpressions (see the module)."""
    f = _Facts(plan)
    edit = PlanEdit(plan)
    for op in reversed(plan.ops):   # constant chains, outermost op first
        if op.type in _ASSOC and len(op.inputs) == 2 and op not in edit.removed and f.pure(op):
            repl = _collapse(plan, edit, f, op, [edit.resolve(t) for t in op.inputs])
            if repl is not None:
                edit.replace(op.outputs[0], repl)
                edit.remove(op)
    plan = edit.finish()
    f = _Facts(plan)
    edit = PlanEdit(plan)
    seen: dict = {}                 # CSE key -> op
    for op in plan.ops:
        if op.type == "Const" and not op.control_inputs and op not in f.controllers \
                and not any(t in f.fetched for t in op.outputs) \
                and f.frames.get(op) is None:
            key = _cse_key(op, ())
            other = seen.get(key) if key is not None else None
            if other is not None:
                edit.replace(op.outputs[0], other.outputs[0])
                edit.remove(op)
            elif key is not None:
                seen[key] = op
            continue
        if op in edit.removed or not f.pure(op):
            continue
        ins = [edit.resolve(t) for t in op.inputs]
        out = op.outputs[0] if len(op.outputs) == 1 else None
        repl = None
        if out is not None and op.type in _IDENTITY_RIGHT and len(ins) == 2:
            x, c = ins
            v = _value(c, edit)
            if v is not None and np.all(np.asarray(v) == _IDENTITY_RIGHT[op.type]) and _same_shape(x, out) \
                    and x.dtype is out.dtype:
                repl = x
            elif op.type in _IDENTITY_LEFT:
                v = _value(x, edit)
                if v is not None and np.all(np.asarray(v) == _IDENTITY_LEFT[op.type]) and _same_shape(c, out) \
                        and c.dtype is out.dtype:
                    repl = c
        if repl is None and op.type == "Neg" and ins[0].op.type == "Neg" and f.pure(ins[0].op):
            repl = edit.resolve(ins[0].op.inputs[0])
        if repl is None and op.type == "Cast" and ins[0].dtype is out.dtype:
            repl = ins[0]
        if repl is None and op.type in ("Reshape", "Squeeze", "ExpandDims") and _same_shape(ins[0], out):
            repl = ins[0]
        if repl is None and op.type == "Transpose" and ins[0].op.type == "Transpose" and f.pure(ins[0].op):
            p2, p1 = _value(ins[1], edit), _value(edit.resolve(ins[0].op.inputs[1]), edit)
            if p1 is not None and p2 is not None and len(p1) == len(p2) \
                    and list(np.asarray(p1)[np.asarray(p2)]) == list(range(len(p1))):
                repl = edit.resolve(ins[0].op.inputs[0])
        if repl is not None:
            edit.replace(out, repl)
            edit.remove(op)
            continue
        # common subexpressions: same type, attributes and (resolved) inputs
        key = _cse_key(op, ins)
        if key is not None:
            other = seen.get(key)
            if other is not None and other not in edit.removed:
                for t, u in zip(op.outputs, other.outputs):
                    edit.replace(t, u)
                edit.remove(op)
            else:
                seen[key] = op
    return edit.finish()


def _collapse(plan, edit, f, op, ins):
    """``((x + c1) + c2) + ...`` -> ``x + (c1 + c2 + ...)`` (or the same for *), scalar constants,
    through inner ops used only by the next one. Ops are visited outermost first."""
    kind = _ASSOC[op.type]
    dt = op.outputs[0].dtype.np

    def split(o, xs):
        """(the non-constant input, the scalar constant) of a 2-input op, or None."""
        a, b = xs
        v = _value(b, edit)
        if v is None:
            a, b = b, a
            v = _value(b, edit)
        return None if v is None or np.ndim(v) != 0 else (a, v)
    first = split(op, ins)
    if first is None:
        return None
    x, total = first
    consts = [total]
    absorbed = []
    while True:
        inner = x.op
        if _ASSOC.get(inner.type) != kind or inner in edit.removed or not f.pure(inner) \
                or len(f.consumers.get(x, ())) != 1 or x.dtype is not op.outputs[0].dtype:
            break
        nxt = split(inner, [edit.resolve(t) for t in inner.inputs])
        if nxt is None:
            break
        absorbed.append(inner)
        x = nxt[0]
        consts.append(nxt[1])
    if not absorbed:
        return None
    fn = np.add if kind == "AddV2" else np.multiply
    c = np.asarray(consts[-1], dt)
    with np.errstate(all="ignore"):
        for v in reversed(consts[:-1]):         # innermost first: c1 + c2 + c3 ...
            c = fn(c, np.asarray(v, dt))
    const = _const(plan, f"{op.name}/folded_constant", np.asarray(c, dt), op.device)
    edit.add(const)
    new = new_op(plan.graph, op.name, kind, (x, const.outputs[0]), (), dict(op.attrs),
                 [(t.dtype, t.shape) for t in op.outputs], op.device)
    edit.add(new)
    for inner in absorbed:
        edit.remove(inner)
    return new.outputs[0]


def _hashable(v):
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


def _cse_key(op, ins):
    if op.attrs.get("_XlaCompile") is not None:
        return None
    try:
        attrs = tuple(sorted((k, _hashable(v)) for k, v in op.attrs.items() if k != "_class"))
    except TypeError:
        return None
    return (op.type, op.device, attrs, tuple(ins))


# -- dependencies ------------------------------------------------------------------------------
def dependency_optimization(plan: Plan) -> Plan:
    """Bypasses no-op Identity/Snapshot ops (not variable reads, not around control flow)."""
    f = _Facts(plan)
    edit = PlanEdit(plan)
    for op in plan.ops:
        if op.type not in ("Identity", "Snapshot") or not f.pure(op):
            continue
        src = op.inputs[0]
        sd = src.op.op_def
        if sd.stateful or sd.resource or src.op.type in _CF:
            continue
        edit.replace(op.outputs[0], src)
        edit.remove(op)
    return edit.finish()


# -- pruning -----------------------------------------------------------------------------------
def prune(plan: Plan) -> Plan:
    """Drops the ops nothing fetched or targeted needs (after rewrites left them unused)."""
    fed = set(plan.feeds)
    needed: set = set()
    stack = [t.op for t in plan.fetches if t is not None and t not in fed] + list(plan.targets)
    in_plan = set(plan.ops)
    while stack:
        op = stack.pop()
        if op in needed or op not in in_plan:
            continue
        needed.add(op)
        refs = op.op_def.ref_inputs
        for i, t in enumerate(op.inputs):
            if t in fed or i in refs:       # as make_plan: a ref input is bound, not run
                continue
            stack.append(t.op)
        stack.extend(c for c in op.control_inputs if not (c.outputs and all(t in fed for t in c.outputs)))
    ops = tuple(op for op in plan.ops if op in needed)
    if len(ops) == len(plan.ops):
        return plan
    # whole frames stay: a loop's ops reach each other through back edges the walk above follows
    return Plan(plan.graph, ops, plan.feeds, plan.fetches, plan.targets, plan.has_control_flow)
