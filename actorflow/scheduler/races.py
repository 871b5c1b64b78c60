"""The `serialize_read_modify_writes` pass: two read-modify-writes of one variable in one step run one
after the other, as TF's executor runs them.

A read-modify-write is a fresh read of a variable (`_RefRead`: a read built inside
``control_dependencies``, `Variable._conversion_tensor`) feeding, within a few cheap ops, an update of
the same variable: Adam's ``beta1_power.assign(beta1_power * beta1)`` after its updates. One
AdamOptimizer applying two gradient lists in one step (a coupled GAN's shared and private weights)
builds two of them on one accumulator. Nothing in the graph orders them, and run breadth-first both
reads precede both writes, so the powers advance once a step instead of twice. TF's executor runs the
cheap read, multiply and assign of each inline, back to back, so its steps advance them twice. The pass
adds a control edge from the first pair's update to the second pair's read (in the order the reads
were built), on both the actors and the synchronous path, unless the second read already precedes the
first update (an edge would close a cycle) or the pairs are ordered already. Plans with control flow
are left as they are (their reads run per iteration).
"""
from __future__ import annotations

from actorflow.scheduler.ir import Bound, PlanIR, Ref

__all__ = ["serialize_read_modify_writes"]

_HOPS = 4               # ops between a read and the update it feeds (read, multiply, cast, assign)


def _variables(node) -> list:
    return [x.name for x in node.inputs if isinstance(x, Bound) and x.resource == "variable"]


def serialize_read_modify_writes(ir: PlanIR, options) -> PlanIR:
    nodes = ir.nodes
    reads: dict = {}                     # read node -> the variable it reads
    for n in nodes:
        if n.type == "_RefRead":
            for v in _variables(n):
                reads[n.name] = v
    if len(reads) < 2 or any(n.op_def.control_flow is not None for n in nodes):
        return ir
    by = {n.name: n for n in nodes}
    read_vars = set(reads.values())
    pairs: dict = {}                     # variable -> [(read, update)]
    for n in nodes:
        if n.name in reads:
            continue
        for v in _variables(n):
            read = _feeding_read(n, v, by, reads) if v in read_vars else None
            if read is not None:
                pairs.setdefault(v, []).append((read, n.name))
    pos = {n.name: i for i, n in enumerate(nodes)}
    extra: dict = {}                     # read -> updates it must wait for
    for ps in pairs.values():
        if len(ps) < 2:
            continue
        ps.sort(key=lambda p: pos[p[0]])
        for (r1, u1), (r2, _u2) in zip(ps, ps[1:]):
            if r1 == r2:
                continue
            if r2 in _ancestors(u1, by) or u1 in _ancestors(r2, by):
                continue
            extra.setdefault(r2, []).append(u1)
    if not extra:
        return ir
    changed = [n.replace(control=n.control + tuple(extra[n.name])) if n.name in extra else n for n in nodes]
    return ir.replace(nodes=_stable_topological(changed))


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
