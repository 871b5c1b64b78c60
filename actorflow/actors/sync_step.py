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

A pure plan whose kernels are worth the pool runs through too, off the runtime's loop: in the
caller's thread for `Session.run`, and for `arun` as one task on a pool thread
(`Executable.run_whole`; LocalBackend), the big kernels split into blocks that idle pool threads
share. So does an `arun` of a plan that only reads its variables (SyncTrainProgram without
updates: a served model's), which runs on the loop itself while its kernels are cheap. On the
actors each big kernel is a hand-off to the pool and one back through the loop; under a busy loop
(a model server's HTTP work) every one of them waits for the loop's turn, and a batched convnet
step of 8 kernels took 1.1 ms of wall time against 0.3 ms of work. As one task it costs the loop
one hand-off each way.

`SyncTrainProgram` does the same for training plans: pure kernels plus variable reads and updates,
with the pool's kernels run as blocks shared by the caller and the pool (see its docstring). Measured
on the MLP and convnet steps (benchmarks/sync_train_ab.py, a loaded 2-core VM, alternating in one
process): CPU per step equal to the actors' within noise (MLP ~32-33 ms, convnet ~82 ms); the actor
runtime's loop thread spends 1.1-1.7 ms (MLP) and 2.8-3 ms (convnet) of CPU per step, and its fastest
traced MLP steps have 1-3 ms without any kernel running: the most this path can save.
"""
from __future__ import annotations

import functools
import os
import threading
import time

import numpy as np

from actorflow import errors
from actorflow.actors.node import (
    IsInitializedActor,
    NodeActor,
    ResourceUpdateActor,
    SingleInputActor,
    SourceActor,
    VariableActor,
)
from actorflow.actors.pool import block_worker, on_pool_thread
from actorflow.actors.resource import VariableResource

__all__ = ["SyncProgram", "SyncTrainProgram", "StepGate"]

# AF_SYNC_TRAIN=0 keeps training steps on the actors (A/B measurements; the tests flip it).
TRAINING_STEPS = os.environ.get("AF_SYNC_TRAIN", "1") != "0"

# The actor rules whose actors are a plain kernel call; each must be a plain NodeActor class.
_PURE_RULES = frozenset({"node", "const", "identity", "noop"})
_PLAIN = (NodeActor, SingleInputActor, SourceActor)
_MAX_REMEMBERED = 64
# A group of a training step's closing updates (SyncTrainProgram._tail) that took less than this
# runs in one thunk with the other small ones, not on a thread of its own: handing a block to
# another thread and meeting it again costs 20-150 us on these VMs. A small model's SGD step (batch 8,
# 4-16-3) took 206-236 us (median) with a thread per group and 138 us with them merged (A/B in one
# process, alternating).
SERIAL_GROUP_S = 100e-6


class SyncProgram:
    """The kernels of one executable in topological order, with where each input comes from."""

    __slots__ = ("code", "fetch_srcs", "n", "dynamic", "too_big", "always_big", "stoppable")
    stateful = False                      # runs anywhere, the runtime's loop included
    updates = False                       # changes no variable

    def __init__(self, code, fetch_srcs, always_big=False, stoppable=False):
        self.code = code              # per kernel: (actor, input template, ((slot, src, out)...), cost, limit)
        self.fetch_srcs = fetch_srcs  # per fetch: (src, out) or None (a constant or a fed value)
        self.n = len(code)
        # Kernels whose cost is known only from their inputs: the feed shapes that turned out worth
        # the pool are remembered, so that a step with those shapes goes to the actors at once
        # instead of computing its cheap kernels twice (a guess: the actors are right either way).
        self.dynamic = any(c[3] is not None for c in code)
        self.too_big: set = set()
        self.always_big = always_big  # a kernel always worth the pool (its cost known from the plan)
        # a kernel (a whole loop) that a deadline stops: when it is worth the pool, the actors run it
        self.stoppable = stoppable

    @classmethod
    def of(cls, exe) -> "SyncProgram | None":
        """The program of executable `exe`, or None when its plan does not qualify (see above)."""
        plan = exe.exec_plan
        if plan.dead_possible:
            return None
        items = plan.items
        actors = exe.actors
        always_big = stoppable = False
        for item, actor in zip(items, actors):
            if (item.actor not in _PURE_RULES or item.stateful or item.device != "CPU" or item.template_devices
                    or type(actor) not in _PLAIN):
                return None
            if getattr(actor.fn, "interruptible", False):
                # (a whole loop as one kernel: worth the pool, it goes to the actors, where its step's
                # deadline or cancellation stops it)
                if actor.offload:
                    return None
                stoppable = True
            always_big = always_big or actor.offload
        wired = _wire(items, actors, plan)
        if wired is None:
            return None
        order, pos, ins, fetch_srcs = wired
        code = []
        for i in order:
            actor = actors[i]
            srcs = tuple((slot, src if src < 0 else pos[src], out) for slot, src, out in ins[i])
            code.append((actor, list(actor.template[:actor.n_in]), srcs, actor.cost, actor.limit))
        return cls(tuple(code), fetch_srcs, always_big, stoppable)

    def run(self, feed_values, const_fetches, feed_fetches, rt=None):
        """The fetched values of one step, or None when a kernel is worth the pool after all.

        `rt` (the Runtime): the caller is not its loop but a thread that may block for the whole
        step (a session's caller, or a pool thread running the step as one task): a kernel worth
        the pool runs here too, split into blocks that the pool's idle threads share
        (SyncTrainProgram's way), and the step never returns None."""
        if rt is None and (self.always_big or (self.dynamic and _shapes(feed_values) in self.too_big)):
            return None
        split_ok = rt is not None and rt.threads > 1 and rt.intra_op
        outs = [None] * self.n
        k = 0
        for actor, tpl, srcs, cost, limit in self.code:
            args = tpl.copy()
            for slot, src, o in srcs:
                v = outs[src] if src >= 0 else feed_values[~src]
                args[slot] = v if o < 0 else v[o]
            big = actor.offload or (cost is not None and cost(*args) > limit)
            if big and rt is None:
                _remember(self.too_big, feed_values)
                return None
            try:
                outs[k] = _run_big(rt, actor, args, split_ok) if big else actor.fn(*args)
            except Exception as e:  # noqa: BLE001 - reported as the actor reports it, naming the op
                _raise_as(actor, e, args)
            k += 1
        return _results(self.fetch_srcs, outs, feed_values, const_fetches, feed_fetches)


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

    __slots__ = ("code", "fetch_srcs", "n", "resources", "gate", "rt", "tail", "group_s", "updates", "too_big")
    stateful = True                       # never on the runtime's loop: it blocks for the whole step
    stoppable = False                     # (a whole loop as one kernel makes a plan the actors')
    blocks_per_thread = 1                 # a split kernel's blocks per thread (more: finer stealing)

    def __init__(self, code, fetch_srcs, resources, gate, rt, tail=None):
        self.code = code
        self.fetch_srcs = fetch_srcs
        self.n = len(code)
        self.resources = resources        # the VariableResources the step reads or updates
        self.gate = gate
        self.rt = rt
        self.tail = tail                  # (start, groups, after) of the variable updates (see _tail)
        self.updates = any(c[0] == 3 for c in code)     # False: it only reads its variables
        self.too_big: set = set()         # feed shapes whose read-only step was worth the pool on the loop
        # seconds each group of the tail took when it last ran as a chain (None: not yet run)
        self.group_s = [None] * len(tail[1]) if tail is not None else []

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
            elif (item.actor in _PURE_RULES and not item.stateful and t in _PLAIN
                  and not getattr(actor.fn, "interruptible", False)):
                # (a whole loop as one kernel goes to the actors: there its step's deadline stops it)
                kinds.append(0)
            else:
                return None
        if not resources:
            return None                   # nothing stateful: SyncProgram's business
        # Variable updates (deferred kernels) go as late as their dependencies allow, as on the pool:
        # the reads of a weight come first, and its update then finds the buffer unshared.
        # (Updates of one variable that race keep the order the plan gives them: scheduler/races.py.)
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
        return cls(tuple(code), fetch_srcs, tuple(resources.values()), gate, exe.rt,
                   _update_tail(items, order, pos, code))

    def run(self, feed_values, const_fetches, feed_fetches, on_loop=False):
        """The fetched values of one step, or None when it must go to the actors. `on_loop`: the caller
        is the runtime's loop, where only a step that reads its variables runs, and only while its
        kernels are cheap (None at the first one worth the pool, as SyncProgram) and no synchronous
        step of another thread holds the gate (the loop never waits for one)."""
        gate = self.gate
        if on_loop:
            if self.updates or (self.too_big and _shapes(feed_values) in self.too_big):
                return None
            if not gate.sync_lock.acquire(blocking=False):
                return None
        else:
            gate.sync_lock.acquire()
        try:
            with gate.lock:
                if gate.actor_steps or any(r.busy is not None for r in self.resources):
                    return None
                for r in self.resources:
                    r.busy = []
                started = gate.started
            try:
                outs = self._steps(feed_values, on_loop)
            except _WorthThePool:
                _remember(self.too_big, feed_values)
                return None
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
        finally:
            gate.sync_lock.release()
        return _results(self.fetch_srcs, outs, feed_values, const_fetches, feed_fetches)

    def _steps(self, feed_values, on_loop=False):
        outs = [None] * self.n
        rt = self.rt
        split_ok = rt.threads > 1 and rt.intra_op
        stop = self.tail[0] if self.tail is not None and split_ok else self.n
        for k in range(stop):
            self._entry(k, outs, feed_values, split_ok, on_loop)
            for f in self.code[k][4]:
                outs[f] = None
        if stop < self.n:
            self._tail(outs, feed_values)
        return outs

    def _args(self, k, outs, feed_values):
        _kind, _actor, tpl, srcs, _frees = self.code[k]
        args = tpl.copy()
        for slot, src, o in srcs:
            v = outs[src] if src >= 0 else feed_values[~src]
            args[slot] = v if o < 0 else v[o]
        return args

    def _entry(self, k, outs, feed_values, split_ok, on_loop=False):
        """Runs entry k of the program into outs[k]; on the loop, raises _WorthThePool instead of
        running a kernel worth the pool."""
        kind, actor = self.code[k][:2]
        if kind == 1:                                   # VariableV2: its current buffer
            v = actor.resource.value
            if v is None:
                raise errors.FailedPreconditionError(
                    actor.name, None, f"Attempting to use uninitialized value {actor.name}\n\t "
                    f"[[node {actor.name} (VariableV2)]]")
            outs[k] = v
            return
        if kind == 2:                                   # IsVariableInitialized
            outs[k] = np.bool_(actor.resource.value is not None)
            return
        args = self._args(k, outs, feed_values)
        big = actor.offload or (actor.cost is not None and actor.cost(*args) > actor.limit)
        if big and on_loop:
            raise _WorthThePool
        try:
            if kind == 3:
                outs[k] = self._update(actor, args, big, split_ok)
            elif big:
                outs[k] = self._big(actor, args, split_ok)
            else:
                outs[k] = actor.fn(*args)
        except Exception as e:  # noqa: BLE001 - reported as the actor reports it, naming the op
            _raise_as(actor, e, args)

    def _tail(self, outs, feed_values):
        """The variable updates that end a training step, run as one set of blocks.

        After the backward pass's last input gradient, the rest of the step is weight updates and
        the small kernels that feed them (a bias gradient), in groups that do not depend on each
        other (see _update_tail). Run one after another, each big update is split over the threads
        and they meet at a barrier after each, while the small kernels run on one thread with the
        other idle. Here a big update that is a group by itself is split into blocks as `_update`
        splits it, a group led by a kernel worth splitting runs first, in order, and every other
        group is one block running its kernels in order; the threads take blocks until none is
        left: one barrier in all. The kernels run on the same
        values as in order, so the results are the same bit for bit; what runs after the groups
        (the train op's NoOp) runs in order afterwards."""
        start, groups, after = self.tail
        code = self.code
        group_s = self.group_s
        # (by measured time only on a real pool: a simulation's pool runs in virtual time, where a
        # choice made on wall-clock time would differ from one replay to the next)
        timed = hasattr(self.rt.pool, "team")
        blocks, chains, finals, updated, small = [], [], [], [], []
        try:
            for gi, group in enumerate(groups):
                k = group[0]
                kind, actor = code[k][:2]
                if len(group) == 1 and kind == 3:
                    args = self._args(k, outs, feed_values)
                    if actor.offload or (actor.cost is not None and actor.cost(*args) > actor.limit):
                        for slot, res in actor.refs:
                            args[slot] = res.exclusive()
                        updated.append(actor)
                        parts = None
                        if actor.split is not None:
                            try:
                                parts = actor.split(self.rt.threads * self.blocks_per_thread, *args)
                            except Exception:  # noqa: BLE001 - the plain kernel reports the error
                                parts = None
                        if parts is None:
                            blocks.append(_tagged(actor, args, _store(outs, k, actor.fn, args)))
                            continue
                        out, thunks, finish = (tuple(parts) + (None, None, None))[:3]
                        blocks += [_tagged(actor, args, t) for t in thunks]
                        finals.append((k, actor, args, out, finish))
                        continue
                if actor.split is not None and kind != 3:
                    args = self._args(k, outs, feed_values)
                    if actor.offload or (actor.cost is not None and actor.cost(*args) > actor.limit):
                        # A group led by a kernel worth splitting (a filter gradient before its
                        # update) runs now, in order, its kernels split over every thread.
                        args = None
                        for kk in group:
                            self._entry(kk, outs, feed_values, True)
                        continue
                    args = None
                t = group_s[gi]
                if t is not None and t < SERIAL_GROUP_S and timed:
                    small.append(gi)          # not worth a thread of its own: with the other small ones
                else:
                    chains.append(functools.partial(self._chains, (gi,), outs, feed_values))
            if small:
                chains.append(functools.partial(self._chains, tuple(small), outs, feed_values))
            thunks = blocks + chains
            if len(thunks) == 1:
                thunks[0]()                   # nothing to run beside it: no hand-off
            elif thunks:
                _run_blocks(self.rt.pool, thunks, self.rt.threads)
            for k, actor, args, out, finish in finals:
                outs[k] = out if finish is None else _tagged(actor, args, finish, True)()
        except _KernelError as e:
            if e.kernel_args is None:
                raise e.error from e.error.__cause__
            _raise_as(e.actor, e.error, e.kernel_args)
        finally:
            for actor in updated:
                for _, res in actor.refs:
                    res.version += 1
        for k in after:
            self._entry(k, outs, feed_values, False)
        for k in range(start, self.n):
            for f in code[k][4]:
                outs[f] = None

    def _chains(self, group_ids, outs, feed_values):
        """The kernels of the tail's groups `group_ids`, each group in order, on this thread; a big one
        splits as it would in order (same blocks, same sums: the same bits), its blocks shared with
        idle threads. Each group's time is kept (group_s): next step, groups that took under
        SERIAL_GROUP_S share one thunk instead of a thread each."""
        groups, group_s = self.tail[1], self.group_s
        for gi in group_ids:
            t0 = time.perf_counter()
            for k in groups[gi]:
                try:
                    self._entry(k, outs, feed_values, True)
                except Exception as e:  # noqa: BLE001 - already the actor's error; the caller raises it
                    raise _KernelError(self.code[k][1], e, None) from e
            group_s[gi] = time.perf_counter() - t0

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
        return _run_big(self.rt, actor, args, split_ok, self.blocks_per_thread)


def _run_big(rt, actor, args, split_ok, blocks_per_thread=1):
    """Kernel `actor` on `args`, worth the pool, run in this thread: split into blocks (where it has a
    splitter and `split_ok`) that this thread and the pool's idle threads take, else whole."""
    parts = None
    if split_ok and actor.split is not None:
        try:
            parts = actor.split(rt.threads * blocks_per_thread, *args)
        except Exception:  # noqa: BLE001 - the plain kernel reports the error
            parts = None
    if parts is None:
        return actor.fn(*args)
    out, thunks, finish = (tuple(parts) + (None, None, None))[:3]
    _run_blocks(rt.pool, list(thunks), rt.threads)
    return finish() if finish is not None else out


class _WorthThePool(Exception):
    """A kernel of a step running on the runtime's loop is worth the pool: the step goes elsewhere."""


def _shapes(feed_values) -> tuple:
    return tuple([getattr(v, "shape", None) for v in feed_values])


def _remember(too_big: set, feed_values) -> None:
    """Notes the feed shapes of a step that turned out worth the pool (a bounded set)."""
    if len(too_big) >= _MAX_REMEMBERED:
        too_big.clear()
    too_big.add(_shapes(feed_values))


def _results(fetch_srcs, outs, feed_values, const_fetches, feed_fetches) -> list:
    """A step's fetched values: kernel outputs by (position, output index or -1 for the whole
    result), then fetched constants and fed tensors in their places."""
    results = []
    for f in fetch_srcs:
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


def _unpark_all(rt, waiting) -> None:
    for w in waiting:
        if w:
            VariableResource.unpark(rt, w)


def _run_blocks(pool, thunks, threads) -> None:
    """Runs every thunk, on this thread and up to `threads - 1` pool threads that take the next
    block as they free up; returns when all have ended, raising the first error. The pool's
    `SpinTeam` runs them when it is free (its helpers start without a wake-up: see pool.py), except
    on a pool thread (a whole step run as one task, as a model server's batches are): its helpers
    would spin between steps on the cores that the server's loop needs (a batched convnet step
    every millisecond took 0.58 ms of CPU for 0.34 ms of wall time with the team, 0.33 without)."""
    team = getattr(pool, "team", None)
    if team is not None and len(thunks) > 1 and not on_pool_thread():
        team = team()
        if team is not None and team.run(thunks):
            return
    n = len(thunks)
    state = [n, None]                          # blocks left, first error
    done = threading.Event()
    work = block_worker(thunks, state, done.set)
    try:
        for _ in range(min(threads, n) - 1):
            pool.submit(work)
    except RuntimeError:              # the pool is shut down (the runtime is closing): this thread does it all
        pass
    work()
    done.wait()
    if state[1] is not None:
        raise state[1]


class _KernelError(Exception):
    """An error of one kernel among blocks of several (SyncTrainProgram._tail): `actor` is its kernel,
    `args` its arguments (None: `error` is already the error the actor reports)."""

    def __init__(self, actor, error, args):
        super().__init__(str(error))
        self.actor, self.error, self.kernel_args = actor, error, args


def _tagged(actor, args, thunk, result=False):
    """`thunk` with its errors tagged with the kernel they belong to (returning its result if `result`)."""
    def block():
        try:
            r = thunk()
        except Exception as e:  # noqa: BLE001 - raised by the caller as the actor's error
            raise _KernelError(actor, e, args) from e
        return r if result else None
    return block


def _store(outs, k, fn, args):
    def run():
        outs[k] = fn(*args)
    return run


def _update_tail(items, order, pos, code):
    """(start, groups, after) for SyncTrainProgram._tail, or None.

    `start`: the position of the first variable update, when everything from there on is updates
    and stateless kernels (no variable read, whose value would depend on when it runs). `groups`:
    those positions split into groups that do not depend on each other, each in order: a kernel
    joins the group of the kernels of the tail it reads or waits for, and updates of the same
    variable share a group. `after`: the kernels that depend on several groups (the train op's
    NoOp), and what depends on them, run in order after the groups. None when there are fewer than
    two groups (nothing to run side by side)."""
    n = len(code)
    start = next((k for k in range(n) if code[k][0] == 3), None)
    if start is None or any(code[k][0] in (1, 2) for k in range(start, n)):
        return None
    preds: list = [set() for _ in range(n)]
    for k in range(start, n):
        preds[k].update(src for _slot, src, _out in code[k][3] if src >= start)
    for k, i in enumerate(order):
        for c, _slot in items[i].ctrl:
            if pos[c] >= start and k >= start:
                preds[pos[c]].add(k)
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    after: list = []
    late: set = set()
    late_res: set = set()               # variables that a kernel run after the groups updates
    owner: dict = {}                    # resource id -> a position that updates it
    for k in range(start, n):
        ps = preds[k]
        roots = {find(p) for p in ps}
        refs = {id(res) for _slot, res in code[k][1].refs} if code[k][0] == 3 else set()
        if ps & late or len(roots) > 1 or refs & late_res:
            after.append(k)
            late.add(k)
            late_res |= refs
            continue
        for r in roots:
            parent[k] = r
        for r in refs:
            a, b = find(owner.setdefault(r, k)), find(k)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict = {}
    for k in range(start, n):
        if k not in late:
            groups.setdefault(find(k), []).append(k)
    if len(groups) < 2:
        return None
    return start, tuple(tuple(g) for g in groups.values()), tuple(after)


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
