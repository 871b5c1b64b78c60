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

`SyncTrainProgram` does the same for training plans: pure kernels plus variable reads and updates,
with the pool's kernels run as blocks shared by the caller and the pool (see its docstring). Measured
on the MLP and convnet steps (benchmarks/sync_train_ab.py, a loaded 2-core VM, alternating in one
process): CPU per step equal to the actors' within noise (MLP ~32-33 ms, convnet ~82 ms); the actor
runtime's loop thread spends 1.1-1.7 ms (MLP) and 2.8-3 ms (convnet) of CPU per step, and its fastest
traced MLP steps have 1-3 ms without any kernel running: the most this path can save.
"""
from __future__ import annotations

import itertools
import os
import threading

import numpy as np

from actorflow import errors
from actorflow.actors.node import (
    OFFLOAD_COST,
    IsInitializedActor,
    NodeActor,
    ResourceUpdateActor,
    SingleInputActor,
    SourceActor,
    VariableActor,
)
from actorflow.actors.resource import VariableResource

__all__ = ["SyncProgram", "SyncTrainProgram", "StepGate"]

# AF_SYNC_TRAIN=0 keeps training steps on the actors (A/B measurements; the tests flip it).
TRAINING_STEPS = os.environ.get("AF_SYNC_TRAIN", "1") != "0"

# The actor rules whose actors are a plain kernel call; each must be a plain NodeActor class.
_PURE_RULES = frozenset({"node", "const", "identity", "noop"})
_PLAIN = (NodeActor, SingleInputActor, SourceActor)
_MAX_REMEMBERED = 64


class SyncProgram:
    """The kernels of one executable in topological order, with where each input comes from."""

    __slots__ = ("code", "fetch_srcs", "n", "dynamic", "too_big")
    stateful = False                      # runs anywhere, the runtime's loop included

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
        wired = _wire(items, actors, plan)
        if wired is None:
            return None
        order, pos, ins, fetch_srcs = wired
        code = []
        for i in order:
            actor = actors[i]
            srcs = tuple((slot, src if src < 0 else pos[src], out) for slot, src, out in ins[i])
            code.append((actor, list(actor.template[:actor.n_in]), srcs, actor.cost))
        return cls(tuple(code), fetch_srcs)

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
                _raise_as(actor, e, args)
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


class StepGate:
    """Who may touch one container's variables now: actor steps (counted; they run on the loop and
    serialize their resource operations there) or one synchronous training step (in its caller's
    thread). A synchronous step starts only when no actor step of the container is in flight and no
    resource it touches is busy; it marks its resources busy for its whole duration, so that an actor
    step starting meanwhile parks its reads and updates of them (as behind an update on the pool)
    until the synchronous step ends. Synchronous steps of one container run one at a time."""

    __slots__ = ("lock", "actor_steps", "started", "sync_lock")

    def __init__(self):
        self.lock = threading.Lock()          # guards the counts and the resources' `busy` marks
        self.actor_steps = 0                  # actor steps in flight
        self.started = 0                      # actor steps ever started
        self.sync_lock = threading.Lock()     # one synchronous step at a time

    def actor_started(self) -> None:
        with self.lock:
            self.actor_steps += 1
            self.started += 1

    def actor_ended(self) -> None:
        with self.lock:
            self.actor_steps -= 1


class SyncTrainProgram:
    """A training step's kernels in topological order, run in the caller's thread.

    For plans without control flow, queues, Send/Recv, device copies or stateful ops other than
    variables, their reads and their updates. Kernels that the actors would send to the kernel pool
    run here too: split into blocks (where the kernel has a splitter), the caller and the pool's
    threads taking blocks until none is left, so one big GEMM still uses every core, with one pool
    wake-up per kernel and no hop through the runtime's loop. Variable reads and updates have the
    actors' semantics (`VariableActor`, `ResourceUpdateActor`: copy-on-write buffers, the same
    errors naming the op); `StepGate` keeps them atomic against actor steps of other threads.
    `run` returns None when the step must go to the actors (an actor step is in flight)."""

    __slots__ = ("code", "fetch_srcs", "n", "resources", "gate", "rt")
    stateful = True                       # never on the runtime's loop: it blocks for the whole step
    blocks_per_thread = 1                 # a split kernel's blocks per thread (more: finer stealing)

    def __init__(self, code, fetch_srcs, resources, gate, rt):
        self.code = code
        self.fetch_srcs = fetch_srcs
        self.n = len(code)
        self.resources = resources        # the VariableResources the step reads or updates
        self.gate = gate
        self.rt = rt

    @classmethod
    def of(cls, exe) -> "SyncTrainProgram | None":
        plan = exe.exec_plan
        if not TRAINING_STEPS or plan.dead_possible or exe.transport is not None:
            return None
        items = plan.items
        actors = exe.actors
        resources: dict = {}
        kinds = []
        for item, actor in zip(items, actors):
            if item.device != "CPU" or item.template_devices:
                return None
            t = type(actor)
            if t is VariableActor or t is IsInitializedActor:
                resources[id(actor.resource)] = actor.resource
                kinds.append(1 if t is VariableActor else 2)
            elif t is ResourceUpdateActor:
                for _, res in actor.refs:
                    resources[id(res)] = res
                kinds.append(3)
            elif item.actor in _PURE_RULES and not item.stateful and t in _PLAIN:
                kinds.append(0)
            else:
                return None
        if not resources:
            return None                   # nothing stateful: SyncProgram's business
        # Variable updates (deferred kernels) go as late as their dependencies allow, as on the pool:
        # the reads of a weight come first, and its update then finds the buffer unshared.
        prog = _wire(items, actors, plan, deferred=[a.deferred for a in actors])
        if prog is None:
            return None
        order, pos, ins, fetch_srcs = prog
        # A value is dropped after its last reader ran (fetched ones are kept): an update then writes
        # its variable in place instead of copying a buffer that only this step's bookkeeping holds.
        last: dict = {}
        for k, i in enumerate(order):
            for _slot, src, _out in ins[i]:
                if src >= 0:
                    last[pos[src]] = k
        fetched = {f[0] for f in fetch_srcs if f is not None}
        frees: list = [[] for _ in order]
        for src, k in last.items():
            if src not in fetched:
                frees[k].append(src)
        for k in range(len(order)):
            if k not in last and k not in fetched:
                frees[k].append(k)            # nobody reads it (a NoOp, an update's output)
        code = []
        for k, i in enumerate(order):
            a = actors[i]
            srcs = tuple((slot, src if src < 0 else pos[src], out) for slot, src, out in ins[i])
            code.append((kinds[i], a, list(a.template[:a.n_in]), srcs, tuple(frees[k])))
        gate = exe.container.gate
        return cls(tuple(code), fetch_srcs, tuple(resources.values()), gate, exe.rt)

    def run(self, feed_values, const_fetches, feed_fetches):
        gate = self.gate
        with gate.sync_lock:
            with gate.lock:
                if gate.actor_steps or any(r.busy is not None for r in self.resources):
                    return None
                for r in self.resources:
                    r.busy = []
                started = gate.started
            try:
                outs = self._steps(feed_values)
            finally:
                with gate.lock:
                    waiting = [r.busy for r in self.resources]
                    for r in self.resources:
                        r.busy = None
                    started = gate.started != started
                if started:
                    # An actor step began meanwhile and may have parked activations behind us: the
                    # loop queues them again. Posted even when the lists look empty, since a park
                    # that saw the mark may still be appending; it ends before this callback runs.
                    try:
                        self.rt.loop.call_soon_threadsafe(_unpark_all, self.rt, waiting)
                    except RuntimeError:          # the runtime's loop is closed
                        pass
        results = []
        for f in self.fetch_srcs:
            if f is None:
                results.append(None)
            else:
                v = outs[f[0]]
                results.append(v if f[1] < 0 else v[f[1]])
        outs = None
        for i, v in const_fetches:
            results[i] = v
        for i, fi in feed_fetches:
            results[i] = feed_values[fi]
        return results

    def _steps(self, feed_values):
        outs = [None] * self.n
        rt = self.rt
        split_ok = rt.threads > 1 and rt.intra_op
        k = 0
        for kind, actor, tpl, srcs, frees in self.code:
            args = tpl.copy()
            for slot, src, o in srcs:
                v = outs[src] if src >= 0 else feed_values[~src]
                args[slot] = v if o < 0 else v[o]
            v = None
            if kind == 1:                                   # VariableV2: its current buffer
                v = actor.resource.value
                if v is None:
                    raise errors.FailedPreconditionError(
                        actor.name, None, f"Attempting to use uninitialized value {actor.name}\n\t "
                        f"[[node {actor.name} (VariableV2)]]")
                outs[k] = v
            elif kind == 2:                                 # IsVariableInitialized
                outs[k] = np.bool_(actor.resource.value is not None)
            else:
                big = actor.offload or (actor.cost is not None and actor.cost(*args) > OFFLOAD_COST)
                try:
                    if kind == 3:
                        outs[k] = self._update(actor, args, big, split_ok)
                    elif big:
                        outs[k] = self._big(actor, args, split_ok)
                    else:
                        outs[k] = actor.fn(*args)
                except Exception as e:  # noqa: BLE001 - reported as the actor reports it, naming the op
                    _raise_as(actor, e, args)
            args = None
            for f in frees:
                outs[f] = None
            k += 1
        return outs

    def _update(self, actor, args, big, split_ok):
        """ResourceUpdateActor.fire and its offloaded form, in this thread."""
        if big:
            for slot, res in actor.refs:
                args[slot] = res.exclusive()
            try:
                return self._big(actor, args, split_ok)
            finally:
                for _, res in actor.refs:
                    res.version += 1
        return actor.update(args)

    def _big(self, actor, args, split_ok):
        """A kernel the actors would run on the pool: its blocks on this thread and the pool's."""
        parts = None
        if split_ok and actor.split is not None:
            try:
                parts = actor.split(self.rt.threads * self.blocks_per_thread, *args)
            except Exception:  # noqa: BLE001 - the plain kernel reports the error
                parts = None
        if parts is None:
            return actor.fn(*args)
        out, thunks, finish = (tuple(parts) + (None, None, None))[:3]
        _run_blocks(self.rt.pool, list(thunks), self.rt.threads)
        return finish() if finish is not None else out


def _unpark_all(rt, waiting) -> None:
    for w in waiting:
        if w:
            VariableResource.unpark(rt, w)


def _run_blocks(pool, thunks, threads) -> None:
    """Runs every thunk, on this thread and up to `threads - 1` pool threads that take the next
    block as they free up; returns when all have ended, raising the first error."""
    n = len(thunks)
    claim = itertools.count().__next__       # atomic under the GIL
    state = [n, None]                          # blocks left, first error
    lock = threading.Lock()
    done = threading.Event()

    def work():
        while True:
            i = claim()
            if i >= n:
                return
            thunk, thunks[i] = thunks[i], None
            try:
                thunk()
            except BaseException as e:  # noqa: BLE001 - raised by the caller
                state[1] = state[1] or e
            thunk = None
            with lock:
                state[0] -= 1
                last = not state[0]
            if last:
                done.set()

    try:
        for _ in range(min(threads, n) - 1):
            pool.submit(work)
    except RuntimeError:              # the pool is shut down (the runtime is closing): this thread does it all
        pass
    work()
    done.wait()
    if state[1] is not None:
        raise state[1]


def _raise_as(actor, e, args):
    """Raises the error the actor path reports for kernel error `e` (naming the op), chained to `e`."""
    err = actor.error(e, args)
    if err is e:
        raise e
    raise err from e


def _wire(items, actors, plan, deferred=None):
    """(order, position of each item in it, message inputs per item, fetch sources), or None.
    Message inputs: (slot, src, out), src >= 0 a kernel (its item index), src < 0 the feed ~src; out
    the output index of a multi-output kernel, -1 otherwise."""
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
    order = _topological(items, after, deferred)
    if order is None:
        return None
    pos = {i: k for k, i in enumerate(order)}
    fetch_srcs: list = [None] * plan.n_fetches
    for i, item in enumerate(items):
        multi = item.n_out != 1
        for o, fi in item.fetch_outs:
            fetch_srcs[fi] = (pos[i], o if multi else -1)
    return order, pos, ins, tuple(fetch_srcs)


def _topological(items, after, deferred=None):
    """Item indices in an order where every item follows the items it reads or waits for; None
    when there is a cycle (only loops have one, and they never get here). Items marked in
    `deferred` wait until nothing else is ready."""
    indeg = [0] * len(items)
    for succ in after:
        for c in succ:
            indeg[c] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    later: list = []
    order = []
    while ready or later:
        i = ready.pop() if ready else later.pop()
        order.append(i)
        for c in after[i]:
            indeg[c] -= 1
            if not indeg[c]:
                (later if deferred is not None and deferred[c] else ready).append(c)
    return order if len(order) == len(items) else None
