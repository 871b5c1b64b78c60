"""Prepare: from (graph, feeds, fetches, targets) to the pruned set of ops a step must run.

Pure functions over the graph; the result (`Plan`) is what `scheduler.lower` compiles (its first
stage, "prune"), once per signature.
"""
from __future__ import annotations

from dataclasses import dataclass

from actorflow import errors
from actorflow.graph.graph import Graph, Operation

__all__ = ["Plan", "make_plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    graph: Graph
    ops: tuple              # pruned ops in graph (topological creation) order
    feeds: tuple            # fed tensors, in feed order
    fetches: tuple          # fetched tensors (None for fetched ops), in fetch order
    targets: tuple          # ops to run whose outputs are not fetched
    has_control_flow: bool


def make_plan(graph: Graph, feeds, fetches, targets) -> Plan:
    """Prunes `graph` to the ops that `fetches` and `targets` need, given that `feeds` are supplied.

    A fed tensor cuts off its producer (unless the producer is needed for another reason).
    Raises InvalidArgumentError naming the first placeholder that is needed but not fed.
    """
    fed = set(feeds)
    needed: set[Operation] = set()
    stack: list[Operation] = []
    for t in fetches:
        if t is not None and t not in fed:
            stack.append(t.op)
    stack.extend(targets)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        refs = op.op_def.ref_inputs
        for i, t in enumerate(op.inputs):
            # A fed tensor cuts off its producer; a ref input is bound to its resource, not run.
            if t in fed or i in refs:
                continue
            stack.append(t.op)
        # A control dependency on an op whose outputs are all fed is satisfied by the feeds.
        stack.extend(c for c in op.control_inputs if not (c.outputs and all(t in fed for t in c.outputs)))
    for op in needed:
        if op.op_def.actor == "placeholder":
            t = op.outputs[0]
            shape = op.attrs["shape"]
            raise errors.InvalidArgumentError(
                op.name, op, f"You must feed a value for placeholder tensor '{t.name}' with dtype "
                f"{op.attrs['dtype'].name} and shape {shape}")
    # Frame/loop structure must be complete: a pruned loop would deadlock, so keep whole frames.
    ops = tuple(op for op in graph._ops if op in needed)
    has_cf = any(op.op_def.control_flow is not None for op in ops)
    if has_cf:
        check_frames(ops, fed)
    return Plan(graph, ops, tuple(feeds), tuple(fetches), tuple(targets), has_cf)


def _frame_free(op: Operation) -> bool:
    """A source that needs no frame: a Const with no control inputs (folded into each consumer) or a
    resource op (bound, not run)."""
    return not op.inputs and not op.control_inputs and (op.op_def.actor == "const" or op.op_def.resource is not None)


def check_frames(ops, fed=()) -> None:
    """Every edge of a plan with while loops must stay in one frame or cross through Enter (into a
    loop) or Exit (out of it), as in TensorFlow: an op reading a value of another frame directly
    would wait forever for it. Raises InvalidArgumentError naming the op and its two inputs."""
    members = set(ops)
    frame: dict = {}                    # op -> the frame it runs in ("" is the root)
    parent: dict = {}                   # frame -> enclosing frame

    def sources(op):
        refs = op.op_def.ref_inputs
        back = op.op_def.control_flow == "merge"
        for i, t in enumerate(op.inputs):
            s = t.op
            if i in refs or t in fed or s not in members or _frame_free(s):
                continue
            if back and s.op_def.control_flow == "next_iteration":
                continue
            yield s
        for s in op.control_inputs:
            if s in members and not _frame_free(s):
                yield s

    def out_frame(s):
        f = frame[s]
        return parent.get(f, "") if s.op_def.control_flow == "exit" else f

    for op in ops:                      # topological but for back edges
        f = next((out_frame(s) for s in sources(op) if s in frame), "")
        if op.op_def.control_flow == "enter":
            name = op.attrs["frame_name"]
            if parent.setdefault(name, f) != f:
                raise errors.InvalidArgumentError(
                    op.name, op, f"Enter '{op.name}' enters frame '{name}' from frame '{f}', but the frame "
                    f"was entered from frame '{parent[name]}' elsewhere")
            f = name
        frame[op] = f
    for op in ops:
        want = parent[frame[op]] if op.op_def.control_flow == "enter" else frame[op]
        for s in sources(op):
            got = out_frame(s)
            if got != want:
                first = next((x for x in sources(op) if out_frame(x) == want), None)
                raise errors.InvalidArgumentError(
                    op.name, op, f"'{op.name}' ({op.type}) has inputs from different frames. The input "
                    f"'{s.name}' is in frame '{got}'."
                    + (f" The input '{first.name}' is in frame '{want}'." if first is not None
                       else f" '{op.name}' runs in frame '{want}'.")
                    + " A value crosses into a while loop through Enter and out of it through Exit "
                    "(build the op inside the loop's body, or pass the value in as a loop variable)")
