"""Lowering: a pruned plan goes in, an ExecPlan comes out; the runtime only instantiates and runs it.

    plan = make_plan(graph, feeds, fetches, targets)      # prune (scheduler/plan.py)
    exe_plan = lower(plan, devices, LowerOptions(...))     # the passes below, then emit
    Executable(runtime, exe_plan, container)               # actors/executable.py: one actor per item

`lower` turns the Plan into a `PlanIR` (scheduler/ir.py), runs the pass pipeline over it, then
`emit` turns the last IR into an `ExecPlan` of frozen `NodeItem`s. The default pipeline, one list
(`pipeline()`):

0. the graph optimizer (scheduler/optimizer.py, TF's grappler) and the JIT (scheduler/jit), passes
   over the pruned Plan's Operations (`graph_pass`): ``constant_folding``,
   ``arithmetic_optimization`` (identities, constant chains, common subexpressions),
   ``dependency_optimization`` (no-op Identity/Snapshot), ``jit`` (numba clusters and whole loops;
   OptimizerOptions.global_jit_level, `LowerOptions.jit_level`, or jit_scope() marks) and
   ``model_pruning`` (RewriterConfig ``disable_model_pruning``); each RewriterConfig field of the
   pass's name turns it off, OptimizerOptions ``do_constant_folding=False`` too.
1. ``place_devices``: a device of this task for every node ("CPU", "GPU:i"): explicit device
   scopes, colocation with the variables an op touches, GPU kernels and dtypes
   (scheduler/placement.py `assign_devices`).
2. ``fold_constants``: every Const whose consumers would fire anyway becomes a `Literal` in their
   input slots; it gets no actor and costs nothing per step.
3. ``partition``: every edge whose producer's output lives elsewhere than its consumer reads it gets
   a copy node (`_HostToDevice` / `_DeviceToHost`); a folded constant read on a GPU is put there
   once (scheduler/partition.py `insert_copies`; the same module's `cut` puts `_Send`/`_Recv` pairs
   on the edges between tasks, for the master: `lower_for_cluster`).
4. ``fuse``: fixed patterns (MatMul/Conv2D + BiasAdd [+ Relu], MatMul + ApplyGradientDescent) become
   one node each (scheduler/fusion.py); RewriterConfig ``remapping`` and ``AF_FUSION=0`` turn it off.

The pass interface (how the optimizer and the JIT plug in):

- A pass is a pure function ``fn(ir: PlanIR, options: LowerOptions) -> PlanIR``. It must not
  mutate its input: it returns ``ir.replace(nodes=...)`` with new `Node`s (``node.replace(...)``)
  where it changes something, or `ir` itself when it changes nothing. It may add, remove and
  replace nodes: a replacement node keeps the name of the node whose outputs it takes over (or the
  pass rewrites every `Ref` to it, fetches included: ``ir.substitute(values, controls, drop)``),
  and every node type needs an OpDef (a pass's own node types: `define_op(..., internal=True)`
  and a kernel, or an existing actor kind).
- ``register_pass(name, fn, after=..., before=..., switch=...)`` puts a pass in the pipeline,
  relative to a named pass. ``switch`` is the name of the `RewriterConfig` field (TF's name:
  "constant_folding", "arithmetic_optimization", "remapping", ...) whose OFF turns the pass off;
  ``default_on=False`` runs it only when the field is ON. ``options.config`` is the session's
  ConfigProto (or None) for passes with knobs of their own (``global_jit_level``).
- Passes run in the process that runs the plan (after the master's cut, in each task), once per
  plan signature; what they cost is paid once.

``AF_DUMP_PASSES=dir`` (or ``ConfigProto(experimental=ConfigProto.Experimental(dump_passes_dir=dir))``)
writes the plan after each pass as text (``NN_name.txt``) and as a picture (``NN_name.svg``, when
Graphviz's ``dot`` is installed; the ``.dot`` source otherwise), one directory per lowered plan.
"""
from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from actorflow import errors
from actorflow.graph.ops import compiler_ops as _compiler_ops  # noqa: F401  (the OpDefs of copies and fused ops)
from actorflow.kernels.registry import get_kernel, has_kernel
from actorflow.scheduler import optimizer as _optimizer
from actorflow.scheduler import races as _races
from actorflow.scheduler.ir import (
    Bound,
    ExecPlan,
    Feed,
    Literal,
    Node,
    NodeItem,
    PlanIR,
    Ref,
    ResourceSpec,
    _device_type,
    actor_kind,
    kernel_attrs,
)

__all__ = ["LowerOptions", "Pass", "lower", "lower_for_cluster", "from_plan", "emit", "register_pass", "graph_pass",
           "unregister_pass", "pipeline", "run_passes"]


@dataclass(frozen=True, slots=True)
class LowerOptions:
    soft_placement: bool = False      # allow_soft_placement: a GPU request without a GPU kernel falls back
    auto_gpu: bool = True             # unconstrained float work goes to GPU:0 when there is one
    n_gpu: int | None = None          # GPUs of this process (None: ask CuPy)
    rewrites: tuple = ()              # ((RewriterConfig field, on: bool), ...) set explicitly
    dump_dir: str | None = None       # AF_DUMP_PASSES
    config: object = None             # the session's ConfigProto, for passes with knobs of their own
    jit_level: int = 0                # OptimizerOptions.global_jit_level: ON_1 1 / ON_2 2 turn the JIT on

    @classmethod
    def from_config(cls, config=None, **kw) -> "LowerOptions":
        """The options a session's ConfigProto asks for (plus `kw`), and AF_DUMP_PASSES."""
        rewrites = []
        dump = os.environ.get("AF_DUMP_PASSES") or None
        if config is not None:
            kw.setdefault("soft_placement", bool(getattr(config, "allow_soft_placement", False)))
            go = getattr(config, "graph_options", None)
            ro = getattr(go, "rewrite_options", None)
            oo = getattr(go, "optimizer_options", None)
            kw.setdefault("jit_level", int(getattr(oo, "global_jit_level", 0) or 0))
            # ConfigProto.device_count {"GPU": n} caps the GPUs placement may use (tf.config's visible devices).
            counts = getattr(config, "device_count", None) or {}
            if "GPU" in counts:
                from actorflow.scheduler.devices import gpu_count
                kw.setdefault("n_gpu", max(0, min(gpu_count(), int(counts["GPU"]))))
            # TF's other two off switches of these passes (a bool each, not a Toggle): first, so they win.
            if oo is not None and not getattr(oo, "do_constant_folding", True):
                rewrites.append(("constant_folding", False))
            if ro is not None and getattr(ro, "disable_model_pruning", False):
                rewrites.append(("model_pruning", False))
            if ro is not None:
                for p in _PASSES:
                    v = getattr(ro, p.switch, 0) if p.switch else 0
                    if v:                         # RewriterConfig: DEFAULT 0, ON 1, OFF 2
                        rewrites.append((p.switch, v == 1))
            exp = getattr(config, "experimental", None)
            dump = getattr(exp, "dump_passes_dir", None) or dump
        rewrites.extend(kw.pop("rewrites", ()))
        return cls(rewrites=tuple(rewrites), dump_dir=dump, config=config, **kw)

    def enabled(self, p: "Pass") -> bool:
        if p.env is not None and os.environ.get(p.env, "1") == "0":
            return False
        for name, on in self.rewrites:
            if name == p.switch:
                return on
        return p.default_on


@dataclass(frozen=True, slots=True)
class Pass:
    name: str
    fn: Callable                  # (PlanIR, LowerOptions) -> PlanIR
    switch: str | None = None     # RewriterConfig field that turns it off (TF's name)
    default_on: bool = True
    env: str | None = None        # an environment variable whose "0" turns it off


_PASSES: list = []


def register_pass(name: str, fn: Callable, *, after: str | None = None, before: str | None = None,
                  switch: str | None = None, default_on: bool = True, env: str | None = None) -> Pass:
    """Adds pass `name` to the pipeline (at the end, or just after/before the pass named), replacing
    a pass of the same name. Returns the Pass."""
    p = Pass(name, fn, switch, default_on, env)
    old = next((i for i, q in enumerate(_PASSES) if q.name == name), None)
    if old is not None:
        del _PASSES[old]
    names = [q.name for q in _PASSES]
    if after is not None and before is not None:
        raise ValueError("register_pass: give `after` or `before`, not both")
    anchor = after or before
    if anchor is None:
        _PASSES.append(p)
    elif anchor not in names:
        raise ValueError(f"register_pass({name!r}): no pass named {anchor!r} (passes: {names})")
    else:
        _PASSES.insert(names.index(anchor) + (1 if after else 0), p)
    return p


def unregister_pass(name: str) -> None:
    """Removes pass `name` from the pipeline (no error when there is none)."""
    _PASSES[:] = [p for p in _PASSES if p.name != name]


def pipeline() -> tuple:
    """The registered passes, in order."""
    return tuple(_PASSES)


# -- the entry point -----------------------------------------------------------------------------------

def lower(plan, devices=None, options: LowerOptions | None = None) -> ExecPlan:
    """Compiles a pruned `plan` (scheduler/plan.py) for this process: the passes of `pipeline()`, then
    `emit`. `devices`: this task's devices (DeviceAttributes or names; None: what this process has).
    Errors (no kernel for an op, an impossible placement) name the op."""
    opt = options or LowerOptions.from_config(None)
    if devices is not None:
        n_gpu = sum(1 for d in devices if "GPU" in str(getattr(d, "device_type", d)).upper())
        opt = dataclasses.replace(opt, n_gpu=n_gpu)
    # The passes allocate many small objects and free none of them in cycles: the cyclic collector
    # would walk the whole graph again and again for nothing (most of the time of a large plan).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        ir = _run_passes(None, plan, opt) if not opt.dump_dir else run_passes(from_plan(plan), opt)
        # ExecPlan.plan: the Plan the graph passes left (what traces and task status pages list).
        return emit(ir, ir.source[3] if ir.source is not None else plan)
    finally:
        if was_enabled:
            gc.enable()


def lower_for_cluster(plan, default, tasks, options: LowerOptions | None = None):
    """The master's half of lowering for a cluster: places every op on a task (scheduler/placement.py
    `place`: explicit devices, colocation, whole loops, then the fewest bytes moved) and cuts the plan
    into one Partition per task with _Send/_Recv on every edge between tasks (scheduler/partition.py).
    Each task then compiles its partition once with `lower`. Returns ({task: Partition}, the fetches
    no task computes: [(fetch index, ("feed", i) | ("const", value))])."""
    from actorflow.scheduler.partition import cut
    from actorflow.scheduler.placement import place
    opt = options or LowerOptions.from_config(None)
    refs, seen = [], set(plan.ops)
    for op in plan.ops:
        for i in op.op_def.ref_inputs:
            v = op.inputs[i].op
            if v not in seen:             # a bound variable lives with its readers' task, unrun
                seen.add(v)
                refs.append(v)
    placement = place(refs + list(plan.ops), default, set(tasks))
    if opt.dump_dir:
        dump = _Dump(opt.dump_dir)
        ir = from_plan(plan)
        dump("prune", ir)
        dump("place_tasks", ir.replace(nodes=tuple(n.replace(task=placement[n.op].to_string()) for n in ir.nodes)))
    return cut(plan, placement)


def run_passes(ir: PlanIR, options: LowerOptions, passes=None) -> PlanIR:
    """Runs `passes` (default: the pipeline) over `ir`, dumping after each when asked."""
    dump = _Dump(options.dump_dir) if options.dump_dir else None
    if dump is not None:
        dump("prune", ir)
    return _run_passes(ir, None, options, passes, dump)


def _run_passes(ir, plan, options, passes=None, dump=None) -> PlanIR:
    """run_passes over `ir`, or over the IR of `plan` (None: `ir`), built only where a pass that is
    not a graph pass needs it."""
    # `plan`: a Plan that graph passes rewrote and `ir` does not show yet (or None).
    for p in (pipeline() if passes is None else passes):
        if not options.enabled(p):
            continue
        on_plan = getattr(p.fn, "on_plan", None)
        if on_plan is not None and dump is None:
            if plan is None:
                plan = ir.plan
            if plan is not None:      # graph passes back to back: no IR between them
                plan = on_plan(plan, options)
                continue
        if plan is not None:
            if ir is None or plan is not ir.plan:
                ir = from_plan(plan)
            plan = None
        ir = p.fn(ir, options)
        if dump is not None:
            dump(p.name, ir)
    if plan is not None and (ir is None or plan is not ir.plan):
        ir = from_plan(plan)
    return ir


def from_plan(plan) -> PlanIR:
    """The IR of a pruned Plan: one node per op, inputs as Ref/Feed/Bound, control edges inside it."""
    feed_index = {t: i for i, t in enumerate(plan.feeds)}
    in_plan = set(plan.ops)
    nodes = []
    for op in plan.ops:
        refs = op.op_def.ref_inputs
        ins = []
        for i, t in enumerate(op.inputs):
            if refs and i in refs:
                src = t.op
                ins.append(Bound(src.name, src.type, src.attrs, src.op_def.resource, t.dtype, t.shape))
            elif t in feed_index:
                ins.append(Feed(feed_index[t]))
            else:
                ins.append(Ref(t.op.name, t.value_index))
        ctrl = op.control_inputs
        nodes.append(Node(op.name, op.type, op.attrs, tuple(ins), tuple([(t.dtype, t.shape) for t in op.outputs]),
                          tuple([c.name for c in ctrl if c in in_plan]) if ctrl else (), "CPU", "", op))
    fetches = tuple(None if t is None else Feed(feed_index[t]) if t in feed_index else Ref(t.op.name, t.value_index)
                    for t in plan.fetches)
    nodes = tuple(nodes)
    targets = tuple(op.name for op in plan.targets)
    return PlanIR(plan.graph, nodes, tuple(plan.feeds), fetches, targets, (nodes, fetches, targets, plan))


# -- passes ----------------------------------------------------------------------------------------------

def place_devices(ir: PlanIR, options: LowerOptions) -> PlanIR:
    """Puts every node on a device of this task (scheduler/placement.py `assign_devices`)."""
    from actorflow.scheduler.devices import gpu_count
    from actorflow.scheduler.placement import assign_devices

    def metadata_only(op_type):
        return has_kernel(op_type, "CPU") and get_kernel(op_type, "CPU").metadata_only
    n_gpu = gpu_count() if options.n_gpu is None else options.n_gpu
    ops = [n.op for n in ir.nodes if n.op is not None]
    devices = assign_devices(ops, n_gpu, options.soft_placement, lambda t: has_kernel(t, "GPU"), metadata_only,
                             options.auto_gpu)
    if devices is None:
        return ir
    return ir.replace(nodes=tuple(n.replace(device=devices.get(n.op, "CPU")) if n.op is not None else n
                                  for n in ir.nodes))


def fold_constants(ir: PlanIR, options: LowerOptions) -> PlanIR:
    """Consts become Literals in their consumers' input slots. A Const with control inputs lives in a
    frame or branch: it stays a node when a consumer would depend on it alone for firing (a loop
    body's constant must run per iteration, or not at all)."""
    consts = [n for n in ir.nodes if n.op_def.actor == "const"]
    if not consts:
        return ir
    guarded = [n for n in consts if (n.op.control_inputs if n.op is not None else n.control)]
    folded = {n.name: Literal(n.attrs["value"]) for n in consts}
    if guarded:
        by = ir.by_name()
        consumers = ir.consumers()

        def const_input(x) -> bool:
            return type(x) in (Literal, Bound) or (type(x) is Ref and by[x.node].op_def.actor == "const")
        for n in guarded:
            if any(by[c].op_def.control_flow is not None or all(const_input(x) for x in by[c].inputs)
                   for c, _ in consumers[n.name]):
                del folded[n.name]
        if not folded:
            return ir

    def sub(x):
        return folded.get(x.node, x) if type(x) is Ref else x
    nodes = []
    for n in ir.nodes:
        if n.name in folded:
            continue
        ins = n.inputs
        new = None
        for j, x in enumerate(ins):
            if type(x) is Ref and x.node in folded:
                if new is None:
                    new = list(ins)
                new[j] = folded[x.node]
        ctrl = n.control
        if ctrl and any(c in folded for c in ctrl):
            ctrl = tuple(c for c in ctrl if c not in folded)
        if new is not None or ctrl is not n.control:
            n = Node(n.name, n.type, n.attrs, ins if new is None else tuple(new), n.outputs, ctrl, n.device, n.task,
                     n.op, n.parts)
        nodes.append(n)
    return ir.replace(nodes=tuple(nodes), fetches=tuple(sub(x) for x in ir.fetches),
                      targets=tuple(t for t in ir.targets if t not in folded))


def _partition(ir: PlanIR, options: LowerOptions) -> PlanIR:
    from actorflow.scheduler.partition import insert_copies
    return insert_copies(ir, options)


def _fuse(ir: PlanIR, options: LowerOptions) -> PlanIR:
    from actorflow.scheduler.fusion import fuse
    return fuse(ir, options)


# -- the graph optimizer and the JIT: passes over the plan's Operations ------------------------------

def graph_pass(fn: Callable) -> Callable:
    """A pipeline pass made of `fn(plan, options) -> plan`, a pass written over the pruned Plan's
    graph Operations (scheduler/optimizer.py, scheduler/jit: they evaluate kernels on op attributes,
    make detached Operations and follow tensors, never touching the user's graph). It runs on the
    Plan the IR stands for (`PlanIR.plan`, kept while the graph passes run back to back, so nothing
    is rebuilt between them) and returns the IR unchanged when `fn` changed nothing. It must run
    before the passes that make nodes of their own (placement, copies, fusion): after them the IR
    no longer stands for a Plan, which is an error naming the pass."""
    def run(ir: PlanIR, options: LowerOptions) -> PlanIR:
        plan = ir.plan
        if plan is None:
            raise ValueError(f"lower: graph pass {fn.__name__!r} must run before the passes that rewrite "
                             "the plan's nodes (register it before 'place_devices')")
        new = fn(plan, options)
        return ir if new is plan else from_plan(new)
    run.__name__ = fn.__name__
    run.on_plan = fn              # run_passes chains graph passes on the Plan without the IR between them
    return run


def _constant_folding(plan, options):
    return _optimizer.constant_folding(plan)


def _arithmetic_optimization(plan, options):
    return _optimizer.arithmetic_optimization(plan)


def _dependency_optimization(plan, options):
    return _optimizer.dependency_optimization(plan)


def _model_pruning(plan, options):
    return _optimizer.prune(plan)


def _jit(plan, options):
    """Clusters and whole loops compiled with numba (scheduler/jit).

    - OptimizerOptions' global_jit_level ON_1/ON_2 (or AF_JIT=1): every compilable op and loop,
      compiled before the first step.
    - DEFAULT (TF's default; AF_JIT unset): the while loops whose every value is small
      (`cluster.small_loop`), in tiered mode: a loop runs as one interpreted kernel call, and the
      session compiles it before a step once its estimated cost passes `TIER_SECONDS`
      (compile.py); no cluster. Those loops are bound by the actors' per-op cost: interpreted, the
      100,000-iteration scalar loop takes 0.49 s against the actors' 1.3 s, compiled 0.1 ms
      (benchmarks/compiler.py). A loop in one call still stops at its step's deadline or
      cancellation (kernels/interrupt.py). Clusters are left out at DEFAULT because they did not
      measure faster there: interpreted, the training steps' clusters ran 1-4% slower than the plan
      without them (a cluster's ops run one by one on one thread, where the pool could split them),
      and they tier up only some 3,000-5,000 steps in, to win about 1% back.
    - OFF (or AF_JIT=0): only the ops `af.xla.experimental.jit_scope()` marked, as TF.
    - AF_JIT=tiered: every compilable op and loop in tiered mode.
    What jit_scope() marks compiles before the first step at every level."""
    env = os.environ.get("AF_JIT")
    tiered = env == "tiered"
    on = (env != "0") if env else options.jit_level in (1, 2)
    small = not env and options.jit_level == 0
    marked = any(op.attrs.get("_XlaCompile") is True for op in plan.ops)
    if not (on or marked or (small and plan.has_control_flow)):
        return plan
    from actorflow.scheduler.jit import jit_pass
    fuse = next((p for p in _PASSES if p.name == "fuse"), None)
    # MatMul/Conv2D + BiasAdd [+ Relu] run best as the fusion pass's GEMM epilogues: no cluster takes them.
    keep = _optimizer._fused_later(plan) if fuse is not None and options.enabled(fuse) else frozenset()
    return jit_pass(plan, level_on=on, mode="tiered" if tiered or small else None, keep=keep, small_loops=small)


register_pass("constant_folding", graph_pass(_constant_folding), switch="constant_folding")
register_pass("arithmetic_optimization", graph_pass(_arithmetic_optimization), switch="arithmetic_optimization")
register_pass("dependency_optimization", graph_pass(_dependency_optimization), switch="dependency_optimization")
register_pass("jit", graph_pass(_jit))
# RewriterConfig(disable_model_pruning=True) turns it off (LowerOptions.from_config).
register_pass("model_pruning", graph_pass(_model_pruning), switch="model_pruning")
register_pass("place_devices", place_devices)
register_pass("fold_constants", fold_constants)
register_pass("partition", _partition)
register_pass("fuse", _fuse, switch="remapping", env="AF_FUSION")
# Two read-modify-writes of one variable in a step run one after the other (scheduler/races.py).
register_pass("serialize_read_modify_writes", _races.serialize_read_modify_writes)


# -- emit ------------------------------------------------------------------------------------------------

def _variable_spec(name, attrs) -> ResourceSpec:
    shape = attrs["shape"]
    return ResourceSpec("variable", attrs.get("shared_name") or name, dtype=attrs["dtype"].np,
                        shape=None if shape.dims is None else shape.dims)


def _resource_spec(b: Bound) -> ResourceSpec:
    if b.resource == "variable":
        return _variable_spec(b.name, b.attrs)
    return ResourceSpec("resource", b.attrs.get("shared_name") or b.name, b.type, attrs=kernel_attrs(b.attrs))


def emit(ir: PlanIR, plan=None) -> ExecPlan:
    """The ExecPlan of a lowered IR: one NodeItem per node, edges as item indices, sinks for the
    fetches and targets. Raises InvalidArgumentError naming an op that has no kernel on its device."""
    nodes = ir.nodes
    index = {n.name: i for i, n in enumerate(nodes)}
    by = {n.name: n for n in nodes}
    defs = [n.op_def for n in nodes]
    kinds = [actor_kind(n, d) for n, d in zip(nodes, defs)]
    enters: dict = {}
    for n, kind in zip(nodes, kinds):
        if kind == "enter":
            fn = n.attrs["frame_name"]
            enters[fn] = enters.get(fn, 0) + 1
    lost = [x.node for x in ir.fetches if type(x) is Ref and x.node not in index]
    if lost:
        raise ValueError(f"lower: the plan fetches outputs of {lost}, which no node of the plan produces")
    outs = [[[] for _ in n.outputs] for n in nodes]
    ctrls = [[] for _ in nodes]
    fetch_outs = [[] for _ in nodes]
    feed_targets = [[] for _ in ir.feeds]
    counts = []
    for i, n in enumerate(nodes):
        n_in = len(n.inputs)
        msgs = 0
        try:
            for slot, x in enumerate(n.inputs):
                if type(x) is Ref:
                    outs[index[x.node]][x.index].append((i, slot))
                    msgs += 1
                elif type(x) is Feed:
                    feed_targets[x.index].append((i, slot))
                    msgs += 1
            for j, c in enumerate(n.control):
                ctrls[index[c]].append((i, n_in + j))
        except KeyError:
            missing = [x.node for x in n.inputs if type(x) is Ref and x.node not in index]
            missing += [c for c in n.control if c not in index]
            raise ValueError(f"lower: node '{n.name}' ({n.type}) reads {missing}, which no node of the plan "
                             "produces (a pass dropped a node without rerouting its consumers)") from None
        counts.append(msgs + len(n.control))
    n_sinks = 0
    const_fetches, feed_fetches = [], []
    for fi, x in enumerate(ir.fetches):
        if type(x) is Ref:
            fetch_outs[index[x.node]].append((x.index, fi))
            n_sinks += 1
        elif type(x) is Feed:
            feed_fetches.append((fi, x.index))
        elif type(x) is Literal:
            const_fetches.append((fi, x.value))
    targets = {t for t in ir.targets if t in index}
    n_sinks += len(targets)
    kernels: dict = {}              # (type, device type) -> KernelDef
    on_devices = any(n.device != "CPU" for n in nodes)
    items = []
    for i, n in enumerate(nodes):
        kind = kinds[i]
        d = defs[i]
        inputs = n.inputs
        template = tuple([x.value if type(x) is Literal else None for x in inputs])
        tdev = tuple([(s, x.device) for s, x in enumerate(inputs) if type(x) is Literal and x.device != "CPU"]) \
            if on_devices else ()
        kdef = None
        in_shapes = in_values = ()
        if kind in ("node", "update", "copy"):
            key = (n.type, _device_type(n.device))
            kdef = kernels.get(key)
            if kdef is None:
                if not has_kernel(*key):
                    raise errors.InvalidArgumentError(
                        n.name, n.op, f"No {key[1]} kernel is registered for op '{n.name}' of type {n.type}")
                kdef = kernels[key] = get_kernel(*key)
            # What the offload policy needs: static input shapes, and constant values where known.
            in_values = tuple([x.value if type(x) is Literal else
                               by[x.node].attrs["value"] if type(x) is Ref and kinds[index[x.node]] == "const" else None
                               for x in inputs])
            in_shapes = tuple([by[x.node].outputs[x.index][1] if type(x) is Ref else ir.value_type(x)[1]
                               for x in inputs])
        attrs = kernel_attrs(n.attrs) if n.attrs and kind in _KINDS_WITH_ATTRS else {}
        resource = None
        bindings = ()
        if kind != "node":
            bounds = [(s, x) for s, x in enumerate(inputs) if type(x) is Bound]
            if kind == "variable" and d.resource == "variable":
                resource = _variable_spec(n.name, n.attrs)
            elif kind in ("variable", "is_initialized", "resource") and bounds:
                resource = _resource_spec(bounds[0][1])
            if kind == "update":
                bindings = tuple((s, _resource_spec(b)) for s, b in bounds)
            elif kind == "resource":
                # The other resources the op uses (a read's filename queue): passed to it in their slots.
                bindings = tuple((s, _resource_spec(b)) for s, b in bounds[1:])
        frame = None
        if kind == "enter":
            fname = n.attrs["frame_name"]
            frame = (fname, bool(n.attrs.get("is_constant", False)), int(n.attrs.get("parallel_iterations", 10)),
                     enters[fname])
        loop_merge = kind == "merge" and any(
            type(x) is Ref and kinds[index[x.node]] == "next_iteration" for x in inputs)
        deferred = False
        if not fetch_outs[i] and n.name not in targets and (any(outs[i]) or ctrls[i]):
            deferred = (all(kinds[c] == "update" for o in outs[i] for c, _ in o)
                        and all(kinds[c] == "update" for c, _ in ctrls[i]))
        items.append(NodeItem(
            name=n.name, op_type=n.type, actor=kind, device=n.device, n_in=len(inputs), n_out=len(n.outputs),
            template=template, template_devices=tdev, count=counts[i], n_ctrl=len(n.control),
            outs=tuple(tuple(o) for o in outs[i]), ctrl=tuple(ctrls[i]), fetch_outs=tuple(fetch_outs[i]),
            is_target=n.name in targets, kernel=kdef, attrs=attrs, in_shapes=in_shapes, in_values=in_values,
            resource=resource, bindings=bindings, frame=frame, loop_merge=loop_merge, offload=d.offload,
            validate_shape=bool(n.attrs.get("validate_shape", True)), parts=n.parts, deferred=deferred, stateful=d.stateful,
            op=n.op))
    sources = tuple(i for i, c in enumerate(counts) if c == 0)
    return ExecPlan(tuple(items), tuple(tuple(t) for t in feed_targets), tuple(const_fetches), tuple(feed_fetches),
                    len(ir.fetches), n_sinks, any(d.control_flow is not None for d in defs), sources, plan, ir)


# The actor kinds whose builders read the node's attributes (a kernel's, a constant's value, a Send's
# key): the others skip converting them.
_KINDS_WITH_ATTRS = frozenset({"node", "update", "copy", "const", "send", "recv", "resource"})


def labels(ir: PlanIR) -> dict:
    """{node name: "name = Type(inputs)"}: how traces name what each actor ran."""
    out = {}
    for n in ir.nodes:
        ins = [_input_name(x, ir.feeds) for x in n.inputs] + ["^" + c for c in n.control]
        out[n.name] = f"{n.name} = {n.type}({', '.join(ins)})"
    return out


def _input_name(x, feeds) -> str:
    if type(x) is Ref:
        return f"{x.node}:{x.index}"
    if type(x) is Feed:
        return feeds[x.index].name
    if type(x) is Bound:
        return f"{x.name}:0"
    return "<const>"


# -- AF_DUMP_PASSES ------------------------------------------------------------------------------------

_DUMPS = itertools.count()


class _Dump:
    """Writes the IR after each pass under `root/<pid>-<n>/`: text, and SVG when `dot` exists."""

    def __init__(self, root: str):
        self.dir = os.path.join(root, f"{os.getpid()}-{next(_DUMPS):03d}")
        os.makedirs(self.dir, exist_ok=True)
        self.n = 0
        self.dot = shutil.which("dot")

    def __call__(self, name: str, ir: PlanIR) -> None:
        base = os.path.join(self.dir, f"{self.n:02d}_{name}")
        self.n += 1
        with open(base + ".txt", "w") as f:
            f.write(ir.to_text())
        src = ir.to_dot()
        if self.dot is None:
            with open(base + ".dot", "w") as f:
                f.write(src)
            return
        try:
            subprocess.run([self.dot, "-Tsvg", "-o", base + ".svg"], input=src.encode(), check=True,
                           timeout=60, capture_output=True)
        except (subprocess.SubprocessError, OSError):
            with open(base + ".dot", "w") as f:       # dot failed or took too long: keep the source
                f.write(src)
