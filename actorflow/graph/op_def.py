"""Op definitions: each op type is declared once, with its output inference, its gradient, and
the facts every later layer needs to know about it.

An `OpDef` is callable: ``AddV2(x, y, name=None)`` adds an op to the default graph and returns
its output tensor (or a tuple of them). Its `infer` function receives the op's input tensors and
attributes and returns one ``(dtype, shape)`` pair per output; shape and dtype errors raised there
surface at graph-build time with the op's name attached.

The other fields are read by the compiler (actorflow/scheduler) and the runtime, never replaced by
op-type string tests there:

- `control_flow`: the op's role in frames and dead-tensor propagation ("switch", "merge", "enter",
  "exit", "next_iteration", "loop_cond"), or None.
- `placement`: "host" (always on the CPU: feeds, predicates, Send/Recv), "pass_through" (runs where
  its data lives: Identity, Enter, ...), or None (a compute op, placed by its kernels and dtypes).
- `actor`: the actor rule that runs the op (see actorflow/actors/executable.py `_ACTOR_RULES`):
  "node" (a kernel; with reference inputs to variables, a variable update) by default; "resource"
  (an operation of the queue, accumulator, iterator or reader its input 0 refers to, run by that
  resource, which gets the resources of its other reference inputs as their values: a read's queue);
  "handle" (creates a resource, which its consumers bind by reference: never run); "const",
  "placeholder", "noop", "identity", "variable", "is_initialized", "switch", "merge", "enter",
  "exit", "next_iteration", "send", "recv", "copy".
- `stateful`: the op has side effects or draws random numbers: two equal stateful ops are not the
  same value, and an optimizer pass must never merge, fold or drop one. Every op with reference
  inputs or a resource is stateful.
- `host_inputs`: input slots read on the host whatever the op's device (a Switch's predicate).
- `host_outputs`: the outputs live on the host even when the op runs beside a GPU value.
- `offload`: a cost hint: always run the kernel on the pool (a copy that waits for the GPU).
- `internal`: made by the compiler (fusion, partitioning), never by the Python API.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["OpDef", "define_op", "get_op_def", "find_op_def", "registered_op_defs", "InferenceError",
           "CONTROL_FLOW_ROLES", "ACTOR_KINDS"]

_OP_DEFS: dict[str, "OpDef"] = {}

CONTROL_FLOW_ROLES = frozenset({"switch", "merge", "enter", "exit", "next_iteration", "loop_cond"})
ACTOR_KINDS = frozenset({"node", "const", "placeholder", "noop", "identity", "variable", "is_initialized", "switch",
                         "merge", "enter", "exit", "next_iteration", "send", "recv", "copy", "resource", "handle"})
_PLACEMENTS = (None, "host", "pass_through")


class InferenceError(ValueError):
    """Shape or dtype inference failed; the graph adds the op's name."""


@dataclass(slots=True, eq=False)
class OpDef:
    type: str
    infer: Callable
    # Indices of inputs that are references to a resource (a variable or queue) rather than values.
    ref_inputs: tuple = ()
    # Side effects or randomness: never merged, folded or pruned by an optimizer pass.
    stateful: bool = False
    # The kind of resource this op *creates* ("variable", "queue", ...), or None.
    resource: str | None = None
    grad_fn: Callable | None = None
    control_flow: str | None = None
    placement: str | None = None
    actor: str = "node"
    host_inputs: tuple = ()
    host_outputs: bool = False
    offload: bool = False
    internal: bool = False
    # What Session.run returns for this op's fetched output 0, when not its array:
    # fetch_as(value, tensor, session) (a GetSessionHandle's TensorHandle).
    fetch_as: Callable | None = None

    def __post_init__(self):
        if self.control_flow is not None and self.control_flow not in CONTROL_FLOW_ROLES:
            raise ValueError(f"op {self.type}: unknown control-flow role {self.control_flow!r}")
        if self.placement not in _PLACEMENTS:
            raise ValueError(f"op {self.type}: unknown placement class {self.placement!r}")
        if self.actor not in ACTOR_KINDS:
            raise ValueError(f"op {self.type}: unknown actor kind {self.actor!r}")
        if self.ref_inputs or self.resource is not None:
            self.stateful = True

    def gradient(self, fn):
        """Decorator registering the gradient function ``fn(op, *output_grads) -> input grads``."""
        self.grad_fn = fn
        return fn

    def __call__(self, *inputs, name=None, **attrs):
        from actorflow.graph.graph import get_default_graph
        g = get_default_graph()
        op = g.create_op(self.type, list(inputs), attrs, name=name)
        outs = op.outputs
        if _OP_CALLBACKS:
            outs = _run_op_callbacks(op, outs)
        return outs[0] if len(outs) == 1 else (tuple(outs) if outs else op)


# -- op callbacks (TF's op_callbacks): fn(op, outputs) -> outputs, applied to the outputs an OpDef's
# call returns (every op wrapper's), as tf.debugging.enable_check_numerics uses them. Ops made inside a
# callback are not passed to the callbacks again.
_OP_CALLBACKS: list = []
_callback_state = threading.local()


def add_op_callback(fn) -> None:
    """Calls fn(op, outputs) -> outputs for every op an OpDef call creates from now on."""
    if not callable(fn):
        raise TypeError(f"op callback must be callable, got {type(fn).__name__}")
    if fn not in _OP_CALLBACKS:
        _OP_CALLBACKS.append(fn)


def remove_op_callback(fn) -> None:
    """Stops calling `fn`; a KeyError when it was not added."""
    if fn not in _OP_CALLBACKS:
        raise KeyError(f"{fn!r} is not an op callback")
    _OP_CALLBACKS.remove(fn)


def _run_op_callbacks(op, outs):
    if getattr(_callback_state, "active", False):
        return outs
    _callback_state.active = True
    try:
        for fn in list(_OP_CALLBACKS):
            outs = list(fn(op, list(outs)))
    finally:
        _callback_state.active = False
    return outs


def define_op(type_name: str, infer: Callable, **kw) -> OpDef:
    if type_name in _OP_DEFS:
        raise ValueError(f"Op type '{type_name}' is defined twice")
    d = OpDef(type_name, infer, **kw)
    _OP_DEFS[type_name] = d
    return d


def get_op_def(type_name: str) -> OpDef:
    try:
        return _OP_DEFS[type_name]
    except KeyError:
        raise LookupError(f"Unknown op type '{type_name}'") from None


def find_op_def(type_name: str) -> OpDef | None:
    """The OpDef of `type_name`, or None when no op of that type is defined."""
    return _OP_DEFS.get(type_name)


def registered_op_defs() -> dict:
    """{op type: OpDef} of every defined op (a copy)."""
    return dict(_OP_DEFS)
