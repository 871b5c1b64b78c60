"""Control-flow actors: Switch, Merge, Enter, Exit, NextIteration (the paper's section 3.4).

Dead tensors: Switch sends DEAD to its untaken output; an op with a DEAD input forwards DEAD without
running; Merge forwards its first live input and is dead only when all inputs are; NextIteration
drops DEAD (that is how a loop ends); Exit drops DEAD unless the whole frame was entered dead.

Frames and iterations of while loops (FrameState, IterTag: per-step state, kept here beside the
actors that use it) are the tags of messages inside a loop, and say when they end. A frame is one
execution of a loop: (parent tag, frame name). Each iteration has an IterTag; an actor's mailbox is
keyed by tag, so iterations (and concurrent steps) never mix. Every activation queued for a tag, and
a live child frame, counts in `tag.outstanding` (the dispatcher's activation API keeps the count,
actors/dispatcher.py); an iteration is done when it has nothing outstanding, its predecessor is
done, and (for iteration 0) every Enter of the frame has arrived. Done iterations are forgotten at
once, so a loop runs in memory bounded by `parallel_iterations`.
"""
from __future__ import annotations

import numpy as np

from actorflow.actors.node import DEAD, NodeActor

__all__ = ["SwitchActor", "MergeActor", "LoopMergeActor", "EnterActor", "ExitActor", "NextIterationActor",
           "IterTag", "FrameState"]

_INDEX = (np.int32(0), np.int32(1), np.int32(2), np.int32(3))


class SwitchActor(NodeActor):
    __slots__ = ()

    def fire(self, tag, args):
        step = tag.step
        if step.error is not None:
            return
        data, pred = args
        if data is DEAD or pred is DEAD:
            self.emit_dead(tag)
            return
        taken = 1 if pred else 0
        for consumer, slot in self.outs[taken]:
            consumer.deliver(tag, slot, data)
        for consumer, slot in self.outs[1 - taken]:
            consumer.deliver(tag, slot, DEAD)
        for consumer, slot in self.ctrl:
            consumer.deliver(tag, slot, None)


class MergeActor(NodeActor):
    """A cond merge: all inputs arrive for each tag, one of them live."""

    __slots__ = ()

    def deliver(self, tag, slot, value):
        pending = self.pending
        entry = pending.get(tag)
        if entry is None:
            entry = pending[tag] = [0, False]        # arrived, fired
        entry[0] += 1
        if slot < self.n_in and value is not DEAD and not entry[1]:
            entry[1] = True
            self.rt.enqueue(self, tag, (value, slot))
        if entry[0] == self.template[-1]:
            del pending[tag]
            if not entry[1]:
                self.rt.enqueue(self, tag, (DEAD, -1))

    def fire(self, tag, args):
        if tag.step.error is not None:
            return
        value, index = args
        if value is DEAD:
            self.emit_dead(tag)
        else:
            self.emit(tag, (value, _INDEX[index] if index < 4 else np.int32(index)))


class LoopMergeActor(MergeActor):
    """A loop merge: exactly one input arrives per iteration (Enter at 0, NextIteration after)."""

    __slots__ = ()

    def deliver(self, tag, slot, value):
        self.rt.enqueue(self, tag, (value, slot))


class EnterActor(NodeActor):
    __slots__ = ("frame_name", "is_constant", "parallel", "n_enters")

    def fire(self, tag, args):
        step = tag.step
        if step.error is not None:
            return
        value = args[0]
        frames = step.frames
        if frames is None:
            frames = step.frames = {}
        key = (tag, self.frame_name)
        frame = frames.get(key)
        if frame is None:
            frame = frames[key] = FrameState(self.rt, step, self.frame_name, tag, key, self.parallel,
                                             self.n_enters)
        if self.is_constant:
            frame.add_constant(self.outs[0], value)
        else:
            if value is DEAD:
                frame.dead = True
            t0 = frame.iters.get(0)
            if t0 is not None:
                for consumer, slot in self.outs[0]:
                    consumer.deliver(t0, slot, value)
                for consumer, slot in self.ctrl:
                    consumer.deliver(t0, slot, None if value is not DEAD else DEAD)
        frame.enter_arrived()


class ExitActor(NodeActor):
    __slots__ = ()

    def fire(self, tag, args):
        if tag.step.error is not None:
            return
        value = args[0]
        frame = tag.frame
        if value is DEAD and not frame.dead:
            return
        parent = frame.parent
        for consumer, slot in self.outs[0]:
            consumer.deliver(parent, slot, value)
        for consumer, slot in self.ctrl:
            consumer.deliver(parent, slot, None if value is not DEAD else DEAD)


class NextIterationActor(NodeActor):
    __slots__ = ()

    def fire(self, tag, args):
        if tag.step.error is not None:
            return
        value = args[0]
        if value is DEAD:
            return
        tag.frame.next_iteration(tag, self.outs[0], value)


# -- frames and iterations ----------------------------------------------------------------------
class IterTag:
    __slots__ = ("step", "frame", "iter", "outstanding", "__weakref__")

    def __init__(self, step, frame, it):
        self.step = step
        self.frame = frame
        self.iter = it
        self.outstanding = 0

    def __repr__(self):
        return f"<{self.frame.name}:{self.iter} of step {self.step.step_id}>"


class FrameState:
    __slots__ = ("rt", "step", "name", "parent", "key", "parallel", "pending_enters", "iters", "base", "next_iter",
                 "constants", "deferred", "dead", "done")

    def __init__(self, rt, step, name, parent, key, parallel, n_enters):
        self.rt = rt
        self.step = step
        self.name = name
        self.parent = parent              # the tag this frame was entered from
        self.key = key
        self.parallel = max(1, parallel)
        self.pending_enters = n_enters    # Enters (constant or not) yet to arrive
        self.iters: dict[int, IterTag] = {0: IterTag(step, self, 0)}
        self.base = 0                     # lowest iteration not yet done
        self.next_iter = 1                # next iteration number to create
        self.constants: list = []         # (consumers, value): loop invariants for every iteration
        self.deferred: dict[int, list] = {}   # iteration -> [(consumers, value)] beyond the window
        self.dead = False
        self.done = False
        rt.begin_async(parent)            # a live child frame keeps its parent iteration open

    # -- iterations ------------------------------------------------------------------------------
    def _create(self, it: int) -> IterTag:
        tag = IterTag(self.step, self, it)
        self.iters[it] = tag
        self.next_iter = it + 1
        for consumers, value in self.constants:
            for consumer, slot in consumers:
                consumer.deliver(tag, slot, value)
        return tag

    def add_constant(self, consumers, value) -> None:
        self.constants.append((consumers, value))
        for tag in list(self.iters.values()):
            for consumer, slot in consumers:
                consumer.deliver(tag, slot, value)

    def next_iteration(self, from_tag: IterTag, consumers, value) -> None:
        """Delivers a NextIteration value from iteration i to i+1, creating or deferring i+1."""
        it = from_tag.iter + 1
        tag = self.iters.get(it)
        if tag is None:
            if it < self.base:                # already done: cannot happen for a well-formed loop
                raise RuntimeError(f"loop {self.name}: value for finished iteration {it}")
            if it >= self.base + self.parallel:
                # Beyond the parallel_iterations window: wait until earlier iterations finish.
                self.deferred.setdefault(it, []).append((consumers, value))
                return
            tag = self._create(it)
        for consumer, slot in consumers:
            consumer.deliver(tag, slot, value)

    def enter_arrived(self) -> None:
        self.pending_enters -= 1
        if self.pending_enters == 0:
            self.quiet(self.iters.get(0))

    def quiet(self, tag) -> None:
        """Called when `tag` has nothing outstanding: retire finished iterations in order."""
        if self.done or tag is None or tag.iter != self.base or self.step.error is not None:
            return
        iters = self.iters
        while True:
            cur = iters.get(self.base)
            if cur is None or cur.outstanding or (self.base == 0 and self.pending_enters > 0):
                break
            del iters[self.base]
            self.base += 1
            limit = self.base + self.parallel
            # Release iterations that the window now admits.
            for it in sorted(k for k in self.deferred if k < limit):
                items = self.deferred.pop(it)
                t = iters.get(it) or self._create(it)
                for consumers, value in items:
                    for consumer, slot in consumers:
                        consumer.deliver(t, slot, value)
        if not iters and not self.deferred:
            self._finish()

    def _finish(self) -> None:
        self.done = True
        frames = self.step.frames
        if frames is not None:
            frames.pop(self.key, None)
        self.rt.end_async(self.parent)
