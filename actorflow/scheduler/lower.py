"""Lowering: a pruned plan goes in, an ExecPlan comes out; the runtime only instantiates and runs it.

    plan = make_plan(graph, feeds, fetches, targets)      # prune (scheduler/plan.py)
    exe_plan = lower(plan, devices, LowerOptions(...))     # the passes below, then emit
    Executable(runtime, exe_plan, container)               # actors/executable.py: one actor per item

`lower` first runs the graph optimizer and the JIT over the pruned Plan (scheduler/optimizer.py:
constant folding, arithmetic simplification and CSE, Identity removal, pruning, then
scheduler/jit: clusters and whole loops compiled with numba; switched by RewriterConfig fields and
OptimizerOptions.global_jit_level), then turns the Plan into a `PlanIR` (scheduler/ir.py) and runs
the pass pipeline over it, then `emit` turns the last IR into an `ExecPlan` of frozen `NodeItem`s.
The default pipeline:

1. ``place_devices``: a device of this task for every node ("CPU", "GPU:i"): explicit device
   scopes, colocation with the variables an op touches, GPU kernels and dtypes
   (scheduler/placement.py `assign_devices`).
2. ``fold_constants``: every Const whose consumers would fire anyway becomes a `Literal` in their
   input slots; it gets no actor and costs nothing per step.
3. ``partition``: every edge whose producer's output lives elsewhere than its consumer reads it gets
   a copy node (`_HostToDevice` / `_DeviceToHost`); a folded constant read on a GPU is put there
   once. (Across tasks, the master cuts the graph with `_Send`/`_Recv` pairs: scheduler/partition.py.)
4. ``fuse``: fixed patterns (MatMul/Conv2D + BiasAdd [+ Relu], MatMul + ApplyGradientDescent) become
   one node each (scheduler/fusion.py); RewriterConfig ``remapping`` and ``AF_FUSION=0`` turn it off.

The pass interface (how the optimizer and the JIT plug in):

- A pass is a pure function ``fn(ir: PlanIR, options: LowerOptions) -> PlanIR``. It must not
  mutate its input: it returns ``ir.replace(nodes=...)`` with new `Node`s (``node.replace(...)``)
  where it changes something, or `ir` itself when it changes nothing. It may add, remove and
  replace nodes: a replacement node keeps the name of the node whose outputs it takes over (or the
  pass rewrites every `Ref` to it, fetches included), and every node type needs an OpDef.
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
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from actorflow import errors
from actorflow.graph.ops import compiler_ops as _compiler_ops  # noqa: F401  (the OpDefs of copies and fused ops)
from actorflow.kernels.registry import get_kernel, has_kernel
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
    kernel_attrs,
)
from actorflow.scheduler.optimizer import PassOptions, optimize

__all__ = ["LowerOptions", "Pass", "lower", "from_plan", "emit", "register_pass", "pipeline", "run_passes"]


@dataclass(frozen=True, slots=True)
class LowerOptions:
    soft_placement: bool = False      # allow_soft_placement: a GPU request without a GPU kernel falls back
    auto_gpu: bool = True             # unconstrained float work goes to GPU:0 when there is one
    n_gpu: int | None = None          # GPUs of this process (None: ask CuPy)
    rewrites: tuple = ()              # ((RewriterConfig field, on: bool), ...) set explicitly
    dump_dir: str | None = None       # AF_DUMP_PASSES
    config: object = None             # the session's ConfigProto, for passes with knobs of their own

    @classmethod
    def from_config(cls, config=None, **kw) -> "LowerOptions":
        """The options a session's ConfigProto asks for (plus `kw`), and AF_DUMP_PASSES."""
        rewrites = []
        dump = os.environ.get("AF_DUMP_PASSES") or None
        if config is not None:
            kw.setdefault("soft_placement", bool(getattr(config, "allow_soft_placement", False)))
            ro = getattr(getattr(config, "graph_options", None), "rewrite_options", None)
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
    # The graph optimizer and the JIT (scheduler/optimizer.py, scheduler/jit) rewrite the pruned
    # Plan before it becomes IR: they work on Operations (detached copies, never the user's graph).
    plan = optimize(plan, PassOptions.from_config(opt.config))
    ir = run_passes(from_plan(plan), opt)
    return emit(ir, plan)


def run_passes(ir: PlanIR, options: LowerOptions, passes=None) -> PlanIR:
    """Runs `passes` (default: the pipeline) over `ir`, dumping after each when asked."""
    dump = _Dump(options.dump_dir) if options.dump_dir else None
    if dump is not None:
        dump("prune", ir)
    for p in (pipeline() if passes is None else passes):
        if not options.enabled(p):
            continue
        ir = p.fn(ir, options)
        if dump is not None:
            dump(p.name, ir)
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
            if i in refs:
                src = t.op
                ins.append(Bound(src.name, src.type, src.attrs, src.op_def.resource))
            elif t in feed_index:
                ins.append(Feed(feed_index[t]))
            else:
                ins.append(Ref(t.op.name, t.value_index))
        nodes.append(Node(op.name, op.type, op.attrs, tuple(ins), tuple((t.dtype, t.shape) for t in op.outputs),
                          tuple(c.name for c in op.control_inputs if c in in_plan), op=op))
    fetches = tuple(None if t is None else Feed(feed_index[t]) if t in feed_index else Ref(t.op.name, t.value_index)
                    for t in plan.fetches)
    return PlanIR(plan.graph, tuple(nodes), tuple(plan.feeds), fetches, tuple(op.name for op in plan.targets))


# -- passes ----------------------------------------------------------------------------------------------

def actor_kind(node: Node) -> str:
    """The actor rule of `node`: its OpDef's, with a kernel op bound to a variable an "update" and one
    bound to another resource (a queue, an accumulator) that resource's operation ("resource")."""
    kind = node.op_def.actor
    if kind != "node":
        return kind
    for x in node.inputs:
        if type(x) is Bound:
            return "update" if x.resource == "variable" else "resource"
    return "node"


def _device_type(device: str) -> str:
    return "CPU" if device == "CPU" else "GPU"


def node_kernel(node: Node):
    """The KernelDef `node` runs on its device, or None (not a kernel op, or none registered)."""
    if actor_kind(node) not in ("node", "update"):
        return None
    dt = _device_type(node.device)
    return get_kernel(node.type, dt) if has_kernel(node.type, dt) else None


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
    by = ir.by_name()
    consumers = ir.consumers()

    def const_input(x) -> bool:
        return type(x) in (Literal, Bound) or (type(x) is Ref and by[x.node].op_def.actor == "const")

    folded = {}
    for n in ir.nodes:
        if n.op_def.actor != "const":
            continue
        has_control = bool(n.op.control_inputs) if n.op is not None else bool(n.control)
        if has_control and any(by[c].op_def.control_flow is not None or all(const_input(x) for x in by[c].inputs)
                               for c, _ in consumers[n.name]):
            continue
        folded[n.name] = n.attrs["value"]
    if not folded:
        return ir

    def sub(x):
        return Literal(folded[x.node]) if type(x) is Ref and x.node in folded else x
    nodes = []
    for n in ir.nodes:
        if n.name in folded:
            continue
        if any(type(x) is Ref and x.node in folded for x in n.inputs) or any(c in folded for c in n.control):
            n = n.replace(inputs=tuple(sub(x) for x in n.inputs), control=tuple(c for c in n.control if c not in folded))
        nodes.append(n)
    return ir.replace(nodes=tuple(nodes), fetches=tuple(sub(x) for x in ir.fetches),
                      targets=tuple(t for t in ir.targets if t not in folded))


def output_device(node: Node) -> str:
    return "CPU" if node.op_def.host_outputs else node.device


def input_device(node: Node, slot: int):
    """The device input `slot` of `node` must be on, or None when any device will do."""
    dev = node.device
    kdef = node_kernel(node)
    if dev == "CPU":
        return None if kdef is not None and kdef.metadata_only else "CPU"
    if kdef is not None and kdef.device_inputs is not None:
        return dev if slot in kdef.device_inputs else "CPU"
    if kdef is not None and kdef.host_inputs and (slot in kdef.host_inputs
                                                  or slot - len(node.inputs) in kdef.host_inputs):
        return "CPU"
    if slot in node.op_def.host_inputs:
        return "CPU"                 # read on the host (a Switch's predicate)
    return dev


def partition(ir: PlanIR, options: LowerOptions) -> PlanIR:
    """A copy node on every edge whose value lives on another device than its consumer reads it on
    (one per value and device); folded constants read on a GPU are marked to be put there once."""
    if all(n.device == "CPU" for n in ir.nodes):
        return ir
    by = ir.by_name()
    copies: dict = {}
    nodes = []
    for n in ir.nodes:
        ins = list(n.inputs)
        for slot, x in enumerate(n.inputs):
            if type(x) is Bound:
                continue
            want = input_device(n, slot)
            if want is None:
                continue
            if type(x) is Literal:
                if want != "CPU":
                    ins[slot] = Literal(x.value, want)
                continue
            have = "CPU" if type(x) is Feed else output_device(by[x.node])
            if want == have:
                continue
            c = copies.get((x, want))
            if c is None:
                what = ir.feeds[x.index].name if type(x) is Feed else f"{x.node}:{x.index}"
                to_host = want == "CPU"
                dtype, shape = (ir.feeds[x.index].dtype, ir.feeds[x.index].shape) if type(x) is Feed \
                    else by[x.node].outputs[x.index]
                c = copies[(x, want)] = Node(f"{what}/_copy_to_{want}", "_DeviceToHost" if to_host else "_HostToDevice",
                                             {"device": want}, (x,), ((dtype, shape),), (),
                                             have if to_host else want, n.task)
                nodes.append(c)
            ins[slot] = Ref(c.name, 0)
        nodes.append(n.replace(inputs=tuple(ins)) if ins != list(n.inputs) else n)
    return ir.replace(nodes=tuple(nodes))


def _fuse(ir: PlanIR, options: LowerOptions) -> PlanIR:
    from actorflow.scheduler.fusion import fuse
    return fuse(ir, options)


register_pass("place_devices", place_devices)
register_pass("fold_constants", fold_constants)
register_pass("partition", partition)
register_pass("fuse", _fuse, switch="remapping", env="AF_FUSION")


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
    enters: dict = {}
    for n in nodes:
        if n.op_def.control_flow == "enter":
            fn = n.attrs["frame_name"]
            enters[fn] = enters.get(fn, 0) + 1
    outs = [[[] for _ in n.outputs] for n in nodes]
    ctrls = [[] for _ in nodes]
    fetch_outs = [[] for _ in nodes]
    feed_targets = [[] for _ in ir.feeds]
    counts = []
    for i, n in enumerate(nodes):
        n_in = len(n.inputs)
        msgs = 0
        for slot, x in enumerate(n.inputs):
            if type(x) is Ref:
                outs[index[x.node]][x.index].append((i, slot))
                msgs += 1
            elif type(x) is Feed:
                feed_targets[x.index].append((i, slot))
                msgs += 1
        for j, c in enumerate(n.control):
            ctrls[index[c]].append((i, n_in + j))
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
    kinds = [actor_kind(n) for n in nodes]
    items = []
    for i, n in enumerate(nodes):
        kind = kinds[i]
        d = n.op_def
        template = tuple(x.value if type(x) is Literal else None for x in n.inputs)
        tdev = tuple((s, x.device) for s, x in enumerate(n.inputs) if type(x) is Literal and x.device != "CPU")
        kdef = None
        if kind in ("node", "update", "copy"):
            dt = _device_type(n.device)
            if not has_kernel(n.type, dt):
                raise errors.InvalidArgumentError(
                    n.name, n.op, f"No {dt} kernel is registered for op '{n.name}' of type {n.type}")
            kdef = get_kernel(n.type, dt)
        attrs = kernel_attrs(n.attrs)
        bounds = [(s, x) for s, x in enumerate(n.inputs) if type(x) is Bound]
        resource = None
        if kind == "variable" and d.resource == "variable":
            resource = _variable_spec(n.name, n.attrs)
        elif kind in ("variable", "is_initialized", "resource") and bounds:
            resource = _resource_spec(bounds[0][1])
        bindings = tuple((s, _resource_spec(b)) for s, b in bounds) if kind == "update" else ()
        frame = None
        if kind == "enter":
            fname = n.attrs["frame_name"]
            frame = (fname, bool(n.attrs.get("is_constant", False)), int(n.attrs.get("parallel_iterations", 10)),
                     enters[fname])
        loop_merge = kind == "merge" and any(
            type(x) is Ref and by[x.node].op_def.control_flow == "next_iteration" for x in n.inputs)
        in_values = tuple(x.value if type(x) is Literal else
                          by[x.node].attrs["value"] if type(x) is Ref and kinds[index[x.node]] == "const" else None
                          for x in n.inputs)
        in_shapes = tuple(ir.value_type(x)[1] if type(x) is not Ref else by[x.node].outputs[x.index][1]
                          for x in n.inputs)
        consumers = [kinds[c] for o in outs[i] for c, _ in o] + [kinds[c] for c, _ in ctrls[i]]
        deferred = (bool(consumers) and not fetch_outs[i] and n.name not in targets
                    and all(k == "update" for k in consumers))
        label_ins = [_input_name(x, ir.feeds) for x in n.inputs] + ["^" + c for c in n.control]
        items.append(NodeItem(
            name=n.name, op_type=n.type, actor=kind, device=n.device, n_in=len(n.inputs), n_out=len(n.outputs),
            template=template, template_devices=tdev, count=counts[i], n_ctrl=len(n.control),
            outs=tuple(tuple(o) for o in outs[i]), ctrl=tuple(ctrls[i]), fetch_outs=tuple(fetch_outs[i]),
            is_target=n.name in targets, kernel=kdef, attrs=attrs, in_shapes=in_shapes, in_values=in_values,
            resource=resource, bindings=bindings, frame=frame, loop_merge=loop_merge, offload=d.offload,
            validate_shape=bool(n.attrs.get("validate_shape", True)), parts=n.parts, deferred=deferred,
            label=f"{n.name} = {n.type}({', '.join(label_ins)})", op=n.op))
    sources = tuple(i for i, c in enumerate(counts) if c == 0)
    return ExecPlan(tuple(items), tuple(tuple(t) for t in feed_targets), tuple(const_fetches), tuple(feed_fetches),
                    len(ir.fetches), n_sinks, ir.has_control_flow, sources, plan)


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
