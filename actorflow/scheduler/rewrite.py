"""Editing a plan without touching its graph: the machinery under the optimizer and JIT passes.

A pass records what it wants (this tensor is now that one; this op is gone; here is a new op) on a
`PlanEdit`, and `finish()` returns a new `Plan`. New ops, and copies of the ops whose inputs
changed, are *detached*: real `Operation`s of the plan's graph (same names, types, attributes,
devices) that the graph itself does not list, so the user's graph, its other plans and its
sessions never see them. Fetched tensors are replaced in the plan's `fetches`; fed tensors and
their producers are never replaced.
"""
from __future__ import annotations

from actorflow.errors import InternalError
from actorflow.graph.graph import Operation
from actorflow.scheduler.plan import Plan

__all__ = ["PlanEdit", "new_op", "loop_frames"]


def new_op(graph, name, op_type, inputs, control, attrs, output_specs, device="") -> Operation:
    """A detached op of `graph`; the consumers lists of its own outputs are kept, not of its inputs."""
    return Operation(graph, name, op_type, tuple(inputs), list(control), attrs, device, output_specs)


class PlanEdit:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.fed = frozenset(plan.feeds)
        self.subst: dict = {}          # tensor -> tensor
        self.removed: set = set()
        self.added: list = []

    def replace(self, old, new) -> None:
        """Every use of tensor `old` in the plan (inputs, fetches) becomes `new`."""
        if old is not new:
            self.subst[old] = new

    def remove(self, op) -> None:
        self.removed.add(op)

    def add(self, op) -> None:
        self.added.append(op)

    def resolve(self, t):
        seen = 0
        while t in self.subst:
            t = self.subst[t]
            seen += 1
            if seen > 10_000:
                raise RuntimeError(f"plan rewrite: a cycle of replacements through {t.name}")
        return t

    def finish(self) -> Plan:
        plan = self.plan
        if not self.subst and not self.removed and not self.added:
            return plan
        ops = [op for op in plan.ops if op not in self.removed] + self.added
        # Ops to copy: those with a replaced input or a copied/removed control input (a fixpoint:
        # loops have back edges).
        clones: dict = {}
        changed = True
        while changed:
            changed = False
            for op in ops:
                if op in clones:
                    continue
                if any(self.resolve(t) is not t or t.op in clones for t in op.inputs) or any(
                        c in clones or c in self.removed for c in op.control_inputs):
                    clones[op] = None
                    changed = True
        for op in clones:
            clones[op] = new_op(op.graph, op.name, op.type, op.inputs, (), op.attrs,
                                [(t.dtype, t.shape) for t in op.outputs], op.device)
        out_map = {}
        for op, c in clones.items():
            for t, ct in zip(op.outputs, c.outputs):
                out_map[t] = ct

        def final(t):
            t = self.resolve(t)
            return out_map.get(t, t)
        for op, c in clones.items():
            c.inputs = tuple(final(t) for t in op.inputs)
            ctrl = []
            for x in op.control_inputs:
                if x in self.removed:
                    raise RuntimeError(f"plan rewrite removed '{x.name}', a control input of '{op.name}'")
                ctrl.append(clones.get(x) or x)
            c.control_inputs = ctrl
        new_ops = [clones.get(op, op) for op in ops]
        detached = set(self.added) | set(clones.values())
        for op in detached:                      # consumers of detached tensors (never of the graph's)
            for t in op.inputs:
                if t.op in detached and op not in t._consumers:
                    t._consumers.append(op)
        fed = set(plan.feeds)
        fetches = tuple(None if t is None else (t if t in fed else final(t)) for t in plan.fetches)
        targets = tuple(clones.get(op, op) for op in plan.targets)
        return Plan(plan.graph, _toposort(new_ops), plan.feeds, fetches, targets, plan.has_control_flow)


def _toposort(ops) -> tuple:
    """`ops` in an order where producers come first (ignoring loops' back edges), stable."""
    index = {op: i for i, op in enumerate(ops)}
    deps = {}
    for op in ops:
        d = set()
        if op.type != "Merge" or not any(t.op.type == "NextIteration" for t in op.inputs):
            d.update(t.op for t in op.inputs if t.op in index)
        else:
            d.update(t.op for t in op.inputs if t.op in index and t.op.type != "NextIteration")
        d.update(c for c in op.control_inputs if c in index)
        d.discard(op)
        deps[op] = d
    done: set = set()
    entered: set = set()                # expanded, its dependencies not all done yet
    out = []
    for op in ops:
        stack = [(op, False)]
        while stack:
            o, expanded = stack.pop()
            if o in done:
                continue
            if expanded:
                done.add(o)
                out.append(o)
                continue
            if o in entered:            # reached again from one of its own dependencies
                raise InternalError(f"plan rewrite: a cycle through op '{o.name}' ({o.type}) "
                                    "that is not a while loop's back edge")
            entered.add(o)
            stack.append((o, True))
            ds = deps[o]
            for d in (sorted(ds, key=index.get, reverse=True) if len(ds) > 1 else ds):
                if d not in done:
                    stack.append((d, False))
    return tuple(out)


def loop_frames(plan: Plan) -> dict:
    """{op: frame name or None} for the ops of `plan`: the innermost while loop an op runs in
    (ops of a cond's branches are in the frame around them)."""
    frame: dict = {}
    parent: dict = {}                   # frame -> enclosing frame
    for op in plan.ops:                 # topological but for back edges, which never set a frame
        f = None
        srcs = [t.op for t in op.inputs if t.op.type != "NextIteration"] + list(op.control_inputs)
        for s in srcs:
            if s in frame:
                sf = frame[s]
                if s.type == "Exit":
                    sf = parent.get(sf)
                f = sf
                if f is not None:
                    break
        if op.type == "Enter":
            name = op.attrs["frame_name"]
            parent.setdefault(name, f)
            f = name
        frame[op] = f
    return frame
