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
    return Plan(graph, ops, tuple(feeds), tuple(fetches), tuple(targets), has_cf)
