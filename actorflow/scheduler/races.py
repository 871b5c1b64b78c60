"""The `serialize_read_modify_writes` pass: the writes of one variable that nothing in a step's plan
orders get the order TF's executor gives them, as control edges, so the actors and the synchronous
training path (actors/sync_step.py) run them alike.

- Two updates of one variable run in the order their inputs become ready, taken as their depth (the
  longest path from the step's sources), then their position. In ``sess.run([train_op, clip_op])``
  (a WGAN's weight clipping) the clip's assign, two ops from the variable, goes before the optimizer's
  update at the end of the backward pass, which then applies on top of the clipped value. The other
  order (the synchronous path runs every update as late as its inputs allow, and the clip's input
  waited as long) overwrote every update with the clip of the old value.
- Two read-modify-writes of one variable run one after the other. A read-modify-write is a fresh read
  (`_RefRead`: a read built inside ``control_dependencies``, `Variable._conversion_tensor`) feeding,
  within a few cheap ops, an update of the same variable: Adam's ``beta1_power.assign(beta1_power *
  beta1)`` after its updates. One AdamOptimizer applying two gradient lists in one step (a coupled
  GAN's shared and private weights) builds two of them on one accumulator; run breadth-first, both
  reads preceded both writes and the powers advanced once a step. TF's executor runs the cheap read,
  multiply and assign of each inline, back to back, so its steps advance them twice. The second read
  waits for the first pair's update (in the order the reads were built), unless it already precedes
  that update (an edge would close a cycle) or the pairs are ordered already.

An edge is added only where neither node already precedes the other in the plan with the edges added
so far, so the plan stays acyclic. Plans with control flow are left as they are (their reads and
updates run per iteration).
"""
from __future__ import annotations

from actorflow.scheduler.ir import Bound, PlanIR, Ref, actor_kind

__all__ = ["serialize_read_modify_writes"]

_HOPS = 4               # ops between a read and the update it feeds (read, multiply, cast, assign)


def _variables(node) -> list:
    return [x.name for x in node.inputs if isinstance(x, Bound) and x.resource == "variable"]


def serialize_read_modify_writes(ir: PlanIR, options) -> PlanIR:
    nodes = ir.nodes
    updates: dict = {}                   # variable -> its update nodes, in plan order
    reads: dict = {}                     # fresh read node -> the variable it reads
    for n in nodes:
        if n.type == "_RefRead":
            for v in _variables(n):
                reads[n.name] = v
        elif actor_kind(n) == "update":
            for v in _variables(n):
                updates.setdefault(v, []).append(n)
    if not any(len(us) > 1 for us in updates.values()) or any(n.op_def.control_flow is not None for n in nodes):
        return ir
    by = {n.name: n for n in nodes}       # the plan with the edges added so far
    pos = {n.name: i for i, n in enumerate(nodes)}

    def wait(node, first) -> None:       # `node` runs after `first`, unless that would close a cycle
        if node != first and first not in _ancestors(node, by) and node not in _ancestors(first, by):
            by[node] = by[node].replace(control=by[node].control + (first,))
    for v, us in updates.items():        # read-modify-writes of one variable: in the order of their reads
        pairs = sorted(((r, u.name) for u in us if (r := _feeding_read(u, v, by, reads)) is not None),
                       key=lambda p: pos[p[0]])
        for (_r1, u1), (r2, _u2) in zip(pairs, pairs[1:]):
            wait(r2, u1)
    depth = _depths(nodes)
    for us in updates.values():          # updates of one variable: by depth, then position
        us = sorted(us, key=lambda n: (depth[n.name], pos[n.name]))
        for a, b in zip(us, us[1:]):
            wait(b.name, a.name)
    changed = [by[n.name] for n in nodes]
    if all(c is n for c, n in zip(changed, nodes)):
        return ir
    return ir.replace(nodes=_stable_topological(changed))


def _depths(nodes) -> dict:
    """Each node's longest path from the plan's sources (`nodes` are producers first)."""
    depth: dict = {}
    for n in nodes:
        deps = [x.node for x in n.inputs if isinstance(x, Ref)] + list(n.control)
        depth[n.name] = 1 + max((depth.get(d, 0) for d in deps), default=0)
    return depth


def _feeding_read(node, var, by, reads):
    """The fresh read of `var` among `node`'s data inputs up to _HOPS ops back, or None."""
    frontier = [x.node for x in node.inputs if isinstance(x, Ref)]
    seen: set = set()
    for _ in range(_HOPS):
        nxt = []
        for name in frontier:
            if name in seen or name not in by:
                continue
            seen.add(name)
            if reads.get(name) == var:
                return name
            nxt += [x.node for x in by[name].inputs if isinstance(x, Ref)]
        frontier = nxt
    return None


def _ancestors(name, by) -> set:
    out: set = set()
    stack = [name]
    while stack:
        n = by.get(stack.pop())
        if n is None:
            continue
        for src in [x.node for x in n.inputs if isinstance(x, Ref)] + list(n.control):
            if src not in out:
                out.add(src)
                stack.append(src)
    return out


def _stable_topological(nodes) -> tuple:
    """`nodes` with producers (data and control) before consumers, otherwise in their order."""
    names = {n.name for n in nodes}
    deps = {n.name: {x.node for x in n.inputs if isinstance(x, Ref) and x.node in names}
            | {c for c in n.control if c in names} for n in nodes}
    done: set = set()
    out: list = []
    pending = list(nodes)
    while pending:
        rest = []
        for n in pending:
            if deps[n.name] <= done:
                out.append(n)
                done.add(n.name)
            else:
                rest.append(n)
        if len(rest) == len(pending):          # a cycle: impossible (checked when the edges were added)
            raise AssertionError("serialize_read_modify_writes: the plan has a cycle")
        pending = rest
    return tuple(out)
