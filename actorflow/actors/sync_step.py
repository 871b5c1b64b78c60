"""The synchronous fast path: a step of a small pure plan run straight through in the caller's thread.

A step on the actor runtime costs one cross-thread hand-off to the runtime's loop and one back
(tens of microseconds, more on a loaded machine), whatever the plan. When a plan holds only pure
CPU kernels (no variables, queues, control flow, random or other stateful ops, Send/Recv or device
copies) and none of them is expensive enough for the kernel pool, nothing in the step can wait,
interleave with other steps or be observed half-done: running its kernels one after another in
topological order, in the thread that asked for the step, gives the same values and the same
errors (`NodeActor.error`, naming the op) as the actors would, without the hand-off. This is TF's
direct-session fast path for small graphs in spirit: the executor runs inline.

`SyncProgram.of(executable)` is None for a plan that does not qualify. `run(feed_values)` returns
the fetched values, raises the failing op's error, or returns None when a kernel whose cost is
only known from its input values turns out to be worth the pool: nothing has been changed yet
(every kernel is pure), and the caller runs the step on the actors instead.
"""
from __future__ import annotations

from actorflow.actors.node import OFFLOAD_COST, NodeActor, SingleInputActor, SourceActor

__all__ = ["SyncProgram"]

# The actor rules whose actors are a plain kernel call; each must be a plain NodeActor class.
_PURE_RULES = frozenset({"node", "const", "identity", "noop"})
_PLAIN = (NodeActor, SingleInputActor, SourceActor)
_MAX_REMEMBERED = 64


class SyncProgram:
    """The kernels of one executable in topological order, with where each input comes from."""

    __slots__ = ("code", "fetch_srcs", "n", "dynamic", "too_big")

    def __init__(self, code, fetch_srcs):
        self.code = code              # per kernel: (actor, input template, ((slot, src, out)...), cost)
        self.fetch_srcs = fetch_srcs  # per fetch: (src, out) or None (a constant or a fed value)
        self.n = len(code)
        # Kernels whose cost is known only from their inputs: the feed shapes that turned out worth
        # the pool are remembered, so that a step with those shapes goes to the actors at once
        # instead of computing its cheap kernels twice (a guess: the actors are right either way).
        self.dynamic = any(c[3] is not None for c in code)
        self.too_big: set = set()

    @classmethod
    def of(cls, exe) -> "SyncProgram | None":
        """The program of executable `exe`, or None when its plan does not qualify (see above)."""
        plan = exe.exec_plan
        if plan.dead_possible:
            return None
        items = plan.items
        actors = exe.actors
        for item, actor in zip(items, actors):
            if (item.actor not in _PURE_RULES or item.stateful or item.device != "CPU" or item.template_devices
                    or type(actor) not in _PLAIN or actor.offload):
                return None
        # Where each message input comes from: src >= 0 is a kernel (its position in `code`),
        # src < 0 the feed ~src; out is the output index of a multi-output kernel, -1 otherwise.
        ins: list = [[] for _ in items]
        after: list = [[] for _ in items]
        for i, item in enumerate(items):
            multi = item.n_out != 1
            for o, consumers in enumerate(item.outs):
                for c, slot in consumers:
                    ins[c].append((slot, i, o if multi else -1))
                    after[i].append(c)
            for c, _slot in item.ctrl:
                after[i].append(c)
        for fi, targets in enumerate(plan.feed_targets):
            for c, slot in targets:
                ins[c].append((slot, ~fi, -1))
        order = _topological(items, after)
        if order is None:
            return None
        pos = {i: k for k, i in enumerate(order)}
        code = []
        for i in order:
            actor = actors[i]
            srcs = tuple((slot, src if src < 0 else pos[src], out) for slot, src, out in ins[i])
            code.append((actor, list(actor.template[:actor.n_in]), srcs, actor.cost))
        fetch_srcs: list = [None] * plan.n_fetches
        for i, item in enumerate(items):
            multi = item.n_out != 1
            for o, fi in item.fetch_outs:
                fetch_srcs[fi] = (pos[i], o if multi else -1)
        return cls(tuple(code), tuple(fetch_srcs))

    def run(self, feed_values, const_fetches, feed_fetches):
        """The fetched values of one step, or None when a kernel is worth the pool after all."""
        if self.dynamic:
            shapes = tuple([getattr(v, "shape", None) for v in feed_values])
            if shapes in self.too_big:
                return None
        outs = [None] * self.n
        k = 0
        for actor, tpl, srcs, cost in self.code:
            args = tpl.copy()
            for slot, src, o in srcs:
                v = outs[src] if src >= 0 else feed_values[~src]
                args[slot] = v if o < 0 else v[o]
            if cost is not None and cost(*args) > OFFLOAD_COST:
                if len(self.too_big) >= _MAX_REMEMBERED:
                    self.too_big.clear()
                self.too_big.add(shapes)
                return None
            try:
                outs[k] = actor.fn(*args)
            except Exception as e:  # noqa: BLE001 - reported as the actor reports it, naming the op
                err = actor.error(e, args)
                if err is e:
                    raise
                raise err from e
            k += 1
        results = []
        for f in self.fetch_srcs:
            if f is None:
                results.append(None)
            else:
                v = outs[f[0]]
                results.append(v if f[1] < 0 else v[f[1]])
        for i, v in const_fetches:
            results[i] = v
        for i, fi in feed_fetches:
            results[i] = feed_values[fi]
        return results


def _topological(items, after):
    """Item indices in an order where every item follows the items it reads or waits for; None
    when there is a cycle (only loops have one, and they never get here)."""
    indeg = [0] * len(items)
    for succ in after:
        for c in succ:
            indeg[c] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for c in after[i]:
            indeg[c] -= 1
            if not indeg[c]:
                ready.append(c)
    return order if len(order) == len(items) else None
