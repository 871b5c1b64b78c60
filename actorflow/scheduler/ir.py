"""The compiler's data: the plan IR that passes rewrite, and the ExecPlan the runtime instantiates.

`PlanIR` is a tuple of frozen `Node`s in dependency (graph creation) order plus the plan's feeds,
fetches and targets. A node names its inputs by value, one per input slot:

- `Ref(node, index)`: output `index` of another node of the plan;
- `Feed(index)`: the plan's fed tensor number `index`, delivered by the session each step;
- `Literal(value, device)`: a constant folded into its consumer (put on `device` once, when the
  actor is built);
- `Bound(name, type, attrs, resource)`: a reference input, bound to the resource (variable, queue)
  that op `name` creates, when the actor is built; never a message.

Nodes are immutable: a pass builds new ones (`node.replace(...)`, or `Node(...)` for a node of its
own, with `op=None`) and returns a new PlanIR (`ir.replace(nodes=...)`), so adding, removing and
replacing nodes (a fused chain, a JIT cluster, a whole loop) is the same operation. Every node type
must have an OpDef (actorflow/graph/op_def.py): passes and the emitter read an op's facts there.

`ExecPlan` is the result of lowering: one `NodeItem` per actor, with everything the runtime needs to
build it (the actor rule, the kernel and its attributes, input slots with folded constants, output
and control edges as item indices, frame info, resources to bind, the offload hints) and nothing
that needs the graph or an op-type test.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from actorflow.graph import dtypes
from actorflow.graph.op_def import _OP_DEFS, OpDef
from actorflow.graph.tensor_shape import TensorShape
from actorflow.kernels.registry import get_kernel, has_kernel

__all__ = ["Ref", "Feed", "Literal", "Bound", "Node", "PlanIR", "ResourceSpec", "NodeItem", "ExecPlan",
           "kernel_attrs", "op_def_of", "actor_kind", "node_kernel"]


@dataclass(frozen=True, slots=True)
class Ref:
    """Output `index` of node `node`."""
    node: str
    index: int = 0


@dataclass(frozen=True, slots=True)
class Feed:
    """The plan's fed tensor number `index`."""
    index: int


@dataclass(frozen=True, slots=True, eq=False)
class Literal:
    """A constant folded into its consumer; `device` is where the consumer reads it."""
    value: object
    device: str = "CPU"


@dataclass(frozen=True, slots=True, eq=False)
class Bound:
    """A reference input: the resource that op `name` (of `type`, with `attrs`) creates."""
    name: str
    type: str
    attrs: dict
    resource: str | None      # the creating op's resource kind ("variable", "queue", ...)
    dtype: object = None      # the reference's DType and TensorShape (a variable's value)
    shape: object = None


def op_def_of(op_type: str) -> OpDef:
    """The OpDef of `op_type`; an undefined type raises LookupError naming it."""
    d = _OP_DEFS.get(op_type)
    if d is None:
        raise LookupError(f"Op type '{op_type}' has no OpDef: define it (actorflow/graph/ops) before a pass "
                          "makes nodes of it")
    return d


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    name: str                 # unique in the plan; the actor's name in errors and traces
    type: str                 # op type: the OpDef and kernel to look up
    attrs: dict               # graph attributes (DTypes, TensorShapes); never mutated
    inputs: tuple             # per input slot: Ref | Feed | Literal | Bound
    outputs: tuple            # per output: (DType, TensorShape)
    control: tuple = ()       # names of nodes that must run first
    device: str = "CPU"       # device within the task: "CPU", "GPU:0"
    task: str = ""            # "/job:worker/task:0" in a cluster, "" in a local session
    op: object = None         # the graph Operation it stands for (None for a node a pass made)
    parts: tuple = ()         # ((name, type), ...): the ops a fused node runs, its own last

    @property
    def op_def(self) -> OpDef:
        d = _OP_DEFS.get(self.type)
        return d if d is not None else op_def_of(self.type)

    def replace(self, **changes) -> "Node":
        """A copy with `changes` (dataclasses.replace, written out: passes call it per node)."""
        g = changes.get
        if len(changes) > sum(1 for k in changes if k in _NODE_FIELDS):
            raise TypeError(f"Node.replace: unknown fields {sorted(set(changes) - set(_NODE_FIELDS))}")
        return Node(g("name", self.name), g("type", self.type), g("attrs", self.attrs), g("inputs", self.inputs),
                    g("outputs", self.outputs), g("control", self.control), g("device", self.device),
                    g("task", self.task), g("op", self.op), g("parts", self.parts))


_NODE_FIELDS = frozenset(f.name for f in dataclasses.fields(Node))


@dataclass(frozen=True, slots=True, eq=False)
class PlanIR:
    graph: object             # the Graph the plan was pruned from
    nodes: tuple              # Node, producers before consumers (loop back edges aside)
    feeds: tuple              # the fed graph Tensors, in feed order
    fetches: tuple            # per fetch: Ref | Feed | Literal, or None for a fetched op
    targets: tuple            # names of nodes run for their effects
    # The pruned Plan (scheduler/plan.py) these nodes stand for, op for op, as (nodes, fetches, targets,
    # Plan): set by `from_plan`; it describes this IR while its nodes, fetches and targets are those
    # very tuples (the graph passes, scheduler/lower.py `graph_pass`, then skip rebuilding the Plan).
    source: tuple | None = None

    @property
    def plan(self):
        """The Plan this IR stands for, op for op, or None once a pass changed its nodes."""
        s = self.source
        if s is not None and s[0] is self.nodes and s[1] is self.fetches and s[2] is self.targets:
            return s[3]
        return None

    def replace(self, **changes) -> "PlanIR":
        return dataclasses.replace(self, **changes)

    def by_name(self) -> dict:
        return {n.name: n for n in self.nodes}

    def consumers(self) -> dict:
        """{node name: [(consumer name, slot), ...]} over Ref inputs (not control edges)."""
        out: dict = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for slot, x in enumerate(n.inputs):
                if type(x) is Ref:
                    out.setdefault(x.node, []).append((n.name, slot))
        return out

    def substitute(self, values: dict | None = None, controls: dict | None = None, drop=()) -> "PlanIR":
        """A copy where every input and fetch `x` that is a key of `values` reads `values[x]` instead
        (a Ref, Feed or Literal), every control edge and target naming a key of `controls` names
        `controls[key]` instead (None: the edge goes), and the nodes named in `drop` are gone: how a
        pass reroutes the consumers of nodes it replaces (one node standing for a loop's Exits:
        {Ref("while/Exit"): Ref("loop"), Ref("while/Exit_1"): Ref("loop", 1)})."""
        values = values or {}
        controls = controls or {}
        drop = set(drop)

        def ctrl(names):
            out = []
            for c in names:
                c = controls.get(c, c)
                if c is not None and c not in drop and c not in out:
                    out.append(c)
            return tuple(out)
        nodes = []
        for n in self.nodes:
            if n.name in drop:
                continue
            ins = tuple(values.get(x, x) if type(x) is Ref else x for x in n.inputs)
            cs = ctrl(n.control) if controls or drop else n.control
            if ins != n.inputs or cs != n.control:
                n = n.replace(inputs=ins, control=cs)
            nodes.append(n)
        fetches = tuple(values.get(x, x) if type(x) is Ref else x for x in self.fetches)
        return self.replace(nodes=tuple(nodes), fetches=fetches, targets=ctrl(self.targets))

    @property
    def has_control_flow(self) -> bool:
        return any(n.op_def.control_flow is not None for n in self.nodes)

    def value_type(self, x):
        """(DType, TensorShape) of an input or fetch `x`."""
        if type(x) is Ref:
            return self.by_name()[x.node].outputs[x.index]
        if type(x) is Feed:
            t = self.feeds[x.index]
            return t.dtype, t.shape
        if type(x) is Literal:
            return None, TensorShape(getattr(x.value, "shape", ()))
        if type(x) is Bound and x.shape is not None:
            return x.dtype, x.shape
        return None, TensorShape(None)

    # -- text and pictures (AF_DUMP_PASSES) -------------------------------------------------------------
    def to_text(self) -> str:
        lines = [f"# {len(self.nodes)} nodes; feeds: {[t.name for t in self.feeds]}; "
                 f"fetches: {[_describe(x, self.feeds) for x in self.fetches]}; targets: {list(self.targets)}"]
        for n in self.nodes:
            ins = [_describe(x, self.feeds) for x in n.inputs] + ["^" + c for c in n.control]
            where = n.device if not n.task else f"{n.task}/{n.device}"
            extra = f"  parts={[p for p, _ in n.parts]}" if n.parts else ""
            attrs = {k: v for k, v in n.attrs.items() if k != "value" and not k.startswith("_")}
            lines.append(f"{n.name} = {n.type}({', '.join(ins)}) @{where}{extra}  {_short(attrs)}")
        return "\n".join(lines) + "\n"

    def to_dot(self) -> str:
        ids = {n.name: f"n{i}" for i, n in enumerate(self.nodes)}
        out = ["digraph plan {", "  rankdir=TB; node [shape=box, fontname=Helvetica, fontsize=10];"]
        for n in self.nodes:
            color = "lightblue" if n.device.startswith("GPU") else ("lightyellow" if n.parts else "white")
            label = f"{n.name}\\n{n.type} @{n.device}".replace('"', "'")
            out.append(f'  {ids[n.name]} [label="{label}", style=filled, fillcolor={color}];')
        for i, t in enumerate(self.feeds):
            out.append(f'  feed{i} [label="feed {t.name}", shape=ellipse];')
        for n in self.nodes:
            for slot, x in enumerate(n.inputs):
                if type(x) is Ref and x.node in ids:
                    out.append(f'  {ids[x.node]} -> {ids[n.name]} [label="{x.index}:{slot}"];')
                elif type(x) is Feed:
                    out.append(f"  feed{x.index} -> {ids[n.name]};")
            for c in n.control:
                if c in ids:
                    out.append(f"  {ids[c]} -> {ids[n.name]} [style=dashed];")
        for i, x in enumerate(self.fetches):
            if type(x) is Ref and x.node in ids:
                out.append(f'  fetch{i} [label="fetch {i}", shape=ellipse]; {ids[x.node]} -> fetch{i};')
        out.append("}")
        return "\n".join(out) + "\n"


def _describe(x, feeds) -> str:
    if type(x) is Ref:
        return f"{x.node}:{x.index}" if x.index else x.node
    if type(x) is Feed:
        return f"feed[{feeds[x.index].name}]"
    if type(x) is Literal:
        v = x.value
        s = f"const{list(getattr(v, 'shape', ()))}" if getattr(v, "size", 1) > 4 else f"const({v!r})"
        return s if x.device == "CPU" else f"{s}@{x.device}"
    if type(x) is Bound:
        return f"&{x.name}"
    return "None"


def _short(attrs: dict) -> str:
    if not attrs:
        return ""
    parts = []
    for k, v in sorted(attrs.items()):
        s = repr(v)
        parts.append(f"{k}={s if len(s) <= 40 else s[:37] + '...'}")
    return "{" + ", ".join(parts) + "}"


def actor_kind(node: Node, op_def: OpDef | None = None) -> str:
    """The actor rule of `node`: its OpDef's, with a kernel op bound to a variable an "update" and one
    bound to another resource (a queue, an accumulator) that resource's operation ("resource")."""
    kind = (op_def or node.op_def).actor
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


# -- the executable plan -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource an actor binds to when it is built: a variable (`dtype`, `shape`) or a resource
    made by `factory_type`'s factory (a queue, an accumulator, an iterator) with `attrs`."""
    kind: str                 # "variable" | "resource"
    name: str                 # the shared name in the container
    op_type: str = ""         # the creating op's type (kind "resource")
    dtype: object = None      # numpy dtype (kind "variable")
    shape: tuple | None = None
    attrs: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeItem:
    """One actor of an ExecPlan: all the runtime needs to build it, computed once per plan."""
    name: str
    op_type: str              # the kernel's op type, for errors and traces only
    actor: str                # the actor rule (OpDef.actor, refined: "update", "resource")
    device: str               # "CPU" | "GPU:i"
    n_in: int                 # input slots
    n_out: int
    template: tuple           # per input slot: a folded constant, or None (a message or a bound ref)
    template_devices: tuple   # (slot, device): folded constants to put on a device when built
    count: int                # messages per activation: data inputs plus control inputs
    n_ctrl: int               # control inputs (their slots follow the input slots)
    outs: tuple               # per output: ((item index, slot), ...)
    ctrl: tuple               # control edges: ((item index, slot), ...)
    fetch_outs: tuple = ()    # (output index, fetch index): outputs the step returns
    is_target: bool = False   # the step waits for this item to run
    kernel: object = None     # its KernelDef (actors "node", "update", "copy")
    attrs: dict = dataclasses.field(default_factory=dict)   # kernel attributes, plain values
    in_shapes: tuple = ()     # static input shapes (TensorShape), for the offload policy
    in_values: tuple = ()     # per input slot: a known constant value, or None
    resource: ResourceSpec | None = None   # what "variable", "is_initialized", "resource" actors bind
    bindings: tuple = ()      # (slot, ResourceSpec): the variables an "update" writes; the resources a
                              # "resource" op uses besides `resource` (a reader's queue)
    frame: tuple | None = None   # "enter": (frame name, is_constant, parallel_iterations, enters of the frame)
    loop_merge: bool = False  # a "merge" fed by a NextIteration
    offload: bool = False     # OpDef hint: always run on the pool
    validate_shape: bool = True
    parts: tuple = ()         # ((name, type), ...) of the ops a fused item runs
    deferred: bool = False    # its outputs go only to variable updates
    stateful: bool = False    # OpDef.stateful: side effects or random draws (never run off the loop)
    op: object = None         # the graph op (for error messages), or None


@dataclass(frozen=True, slots=True)
class ExecPlan:
    items: tuple              # NodeItem
    feed_targets: tuple       # per feed: ((item index, slot), ...)
    const_fetches: tuple      # (fetch index, value)
    feed_fetches: tuple       # (fetch index, feed index)
    n_fetches: int
    n_sinks: int              # fetches and targets the step waits for
    dead_possible: bool       # the plan has control flow: DEAD values can travel
    sources: tuple            # item indices with no inputs to wait for
    plan: object = None       # the pruned Plan it was lowered from (feeds, fetches, graph)
    ir: object = None         # the last PlanIR (what traces and dumps describe)


def kernel_attrs(attrs: dict) -> dict:
    """Graph attributes as plain values for kernels: numpy dtypes, shape tuples (-1 unknown)."""
    def conv(v):
        if isinstance(v, dtypes.DType):
            return v.np
        if isinstance(v, TensorShape):
            return None if v.dims is None else tuple(-1 if d is None else d for d in v.dims)
        if isinstance(v, tuple):
            return tuple(conv(x) for x in v)
        return v
    return {k: conv(v) for k, v in attrs.items()}
