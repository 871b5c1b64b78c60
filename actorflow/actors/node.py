"""Node actors: one per graph node, each with a mailbox of partial inputs per (step, frame, iteration).

An actor is driven by its runtime's dispatcher on the event loop: `deliver` puts a message in the
mailbox; when every input of a tag has arrived the actor is queued, and `fire` runs its kernel
(inline, or on the thread pool when the kernel is expensive) and delivers its outputs to the
mailboxes of its consumers. Actors never share mutable state; a step is a wave of messages.

Tags: the root frame's tag of a step is its StepState itself; loop iterations get tags of their own
(see actorflow.actors.control_flow). Every tag has `.step`.
"""
from __future__ import annotations

import sys

import numpy as np

from actorflow import errors
from actorflow.actors.resource import huge_buffer_wanted, new_buffer
from actorflow.kernels.registry import ELEMENT_NS

__all__ = ["NodeActor", "SingleInputActor", "SourceActor", "VariableActor", "ResourceUpdateActor",
           "IsInitializedActor", "FetchSink", "DEAD", "OFFLOAD_NS", "POOL_HANDOFF_NS"]

# What handing a kernel to the pool costs, in ns: a pool thread's wake-up and the report back. On
# the 2-core development VM, 6-16 us when it is quiet and 30-100 us under load
# (benchmarks/offload_cost.py measures it).
POOL_HANDOFF_NS = 50_000
# Kernels estimated to take longer than this on one core (`cost * unit_ns`, see
# kernels/registry.py) run on the pool, split over its threads where they can be: split in two,
# a kernel of t ns ends after about t/2 + the hand-off, which beats t once t exceeds twice the
# hand-off. (A threshold of 400,000 compared with multiply-adds sent 16 us GEMMs to the pool.)
OFFLOAD_NS = 2 * POOL_HANDOFF_NS


class _Dead:
    """The value of a tensor on an untaken branch (the paper's dead tensor)."""
    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()


def _describe(args) -> str:
    parts = []
    for a in args:
        shape = getattr(a, "shape", None)
        dt = getattr(a, "dtype", None)
        parts.append(f"{dt}{list(shape)}" if shape is not None else type(a).__name__)
    return "(" + ", ".join(parts) + ")"


class NodeActor:
    """A stateless op: fires its kernel when all inputs of a tag are present."""

    __slots__ = ("name", "op_type", "fn", "n_in", "template", "pending", "outs", "ctrl", "rt",
                 "cost", "limit", "offload", "multi", "n_out", "split", "parts", "deferred")

    releases = False                      # True: `release(args)` runs when an offloaded call ends

    def __init__(self, rt, name, op_type, fn, n_in, template, cost=None, offload=False, n_out=1, limit=None):
        self.rt = rt
        self.name = name
        self.op_type = op_type
        self.fn = fn
        self.n_in = n_in
        self.template = template          # [input values..., control placeholders..., count]
        self.pending: dict = {}
        self.outs: tuple = ()             # per output: tuple of (consumer, slot)
        self.ctrl: tuple = ()             # (consumer, slot) for control edges
        self.cost = cost                  # callable(*args) -> estimated cost, or None
        # Offload when cost(*args) > limit: OFFLOAD_NS in the cost's units (element operations unless
        # the executable says otherwise, from the kernel's unit_ns).
        self.limit = limit if limit is not None else OFFLOAD_NS / ELEMENT_NS
        self.offload = offload            # True: always offload; False: decide by cost
        self.n_out = n_out
        self.multi = n_out != 1
        self.split = None                 # intra-op splitter of the kernel, when it has one
        self.parts = None                 # a fused op: ((name, type), ...) of the ops it runs
        # True for variable updates and kernels whose outputs go only to updates (weight
        # gradients): the pool runs them after kernels on the critical path.
        self.deferred = False

    # -- mailbox ------------------------------------------------------------------------------
    def deliver(self, tag, slot, value):
        pending = self.pending
        entry = pending.get(tag)
        if entry is None:
            entry = pending[tag] = self.template.copy()
        entry[slot] = value
        c = entry[-1] - 1
        if c:
            entry[-1] = c
            return
        del pending[tag]
        n_in = self.n_in
        if len(entry) > n_in + 1 and tag.step.dead_possible and any(v is DEAD for v in entry[n_in:-1]):
            entry = [DEAD] * max(n_in, 1)     # a dead control input makes the op dead
        else:
            del entry[n_in:]
        # rt.enqueue(self, tag, entry), inlined: this is the hop between two actors.
        tag.outstanding += 1
        rt = self.rt
        rt.ready.append((self, tag, entry))
        if not rt.scheduled:
            rt.scheduled = True
            rt.loop.call_soon(rt._pump)

    def initial_args(self):
        return self.template[:self.n_in]

    # -- firing -------------------------------------------------------------------------------
    def fire(self, tag, args):
        step = tag.step
        if step.error is not None:
            return
        if step.dead_possible:
            for a in args:
                if a is DEAD:
                    self.emit_dead(tag)
                    return
        if self.offload or (self.cost is not None and self.cost(*args) > self.limit):
            self.rt.offload(self, tag, args)
            return
        try:
            out = self.fn(*args)
        except Exception as e:  # noqa: BLE001 - any kernel failure fails only this step
            step.fail(self.error(e, args, tag))
            return
        self.emit(tag, out)

    def skips(self, step, tag, args) -> bool:
        """True when this activation must not run: its step failed, or an input is dead (then the
        actor forwards DEAD). The hot NodeActor.fire inlines the same test."""
        if step.error is not None:
            return True
        if step.dead_possible and any(a is DEAD for a in args):
            self.emit_dead(tag)
            return True
        return False

    def emit(self, tag, out):
        tr = tag.step.trace
        if tr is not None:                # a traced step (actors/tracing.py): note the outputs
            tr.emitted(self, tag, out)
        if self.multi:
            for i, consumers in enumerate(self.outs):
                v = out[i]
                for consumer, slot in consumers:
                    consumer.deliver(tag, slot, v)
        else:
            for consumer, slot in self.outs[0]:
                consumer.deliver(tag, slot, out)
        for consumer, slot in self.ctrl:
            consumer.deliver(tag, slot, None)

    def emit_dead(self, tag):
        for consumers in self.outs:
            for consumer, slot in consumers:
                consumer.deliver(tag, slot, DEAD)
        for consumer, slot in self.ctrl:
            consumer.deliver(tag, slot, DEAD)

    def error(self, e: BaseException, args, tag=None) -> errors.OpError:
        name, op_type = self.name, self.op_type
        part = getattr(e, "part", None)
        if self.parts is not None:
            # A fused op names the original op that failed, and the group it ran in.
            if part is not None and isinstance(getattr(e, "error", None), BaseException):
                e = e.error
                name, op_type = self.parts[part]
            group = ", ".join(n for n, _ in self.parts)
            op_type = f"{op_type}, fused as {self.op_type} of {group}"
        where = ""
        if tag is not None and tag.frame is not None:
            parts = []
            t = tag
            while t.frame is not None:
                parts.append(f"iteration {t.iter} of loop '{t.frame.name}'")
                t = t.frame.parent
            where = " in " + ", in ".join(parts)
        if isinstance(e, errors.OpError):
            if e.node_def is None or e.node_def == getattr(e, "_resource", None):
                e.node_def = name
            if f"[[node {name}" not in e.message:
                e.message = f"{e.message}\n\t [[node {name} ({op_type}){where}]]"
                e.args = (e.message,)
            return e
        cls = errors.ResourceExhaustedError if isinstance(e, MemoryError) else errors.InvalidArgumentError
        return cls(name, None, f"{type(e).__name__}: {e}\n\t [[node {name} ({op_type}) "
                               f"with input shapes {_describe(args)}{where}]]")

    def drop(self, step) -> None:
        """Forgets the partial inputs of an aborted step."""
        pending = self.pending
        if not pending:
            return
        for tag in [t for t in pending if t.step is step]:
            del pending[tag]

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


class SingleInputActor(NodeActor):
    """An actor with exactly one message input: no mailbox bookkeeping needed."""

    __slots__ = ()

    def deliver(self, tag, slot, value):
        args = self.template[:self.n_in]
        if slot < self.n_in:
            args[slot] = value
        elif value is DEAD:
            args = [DEAD] * max(self.n_in, 1)
        # rt.enqueue(self, tag, args), inlined: this is the hop between two actors.
        tag.outstanding += 1
        rt = self.rt
        rt.ready.append((self, tag, args))
        if not rt.scheduled:
            rt.scheduled = True
            rt.loop.call_soon(rt._pump)


class SourceActor(NodeActor):
    """An op with no message inputs (a random op, a NoOp with no dependencies, ...)."""
    __slots__ = ()


class VariableActor(NodeActor):
    """Emits the current value of a variable resource (the VariableV2 op)."""

    __slots__ = ("resource",)

    def __init__(self, rt, name, resource, n_in, template):
        super().__init__(rt, name, "VariableV2", None, n_in, template)
        self.resource = resource

    def fire(self, tag, args):
        step = tag.step
        if self.skips(step, tag, args):
            return
        res = self.resource
        if res.busy is not None:          # an update is writing it on the pool: read after it
            res.park(self, tag, args)
            return
        v = res.value
        if v is None:
            step.fail(errors.FailedPreconditionError(
                self.name, None, f"Attempting to use uninitialized value {self.name}\n\t [[node {self.name} (VariableV2)]]"))
            return
        self.emit(tag, v)


class IsInitializedActor(NodeActor):
    __slots__ = ("resource",)

    def __init__(self, rt, name, resource, n_in, template):
        super().__init__(rt, name, "IsVariableInitialized", None, n_in, template)
        self.resource = resource

    def fire(self, tag, args):
        if tag.step.error is not None:
            return
        self.emit(tag, np.bool_(self.resource.value is not None))


class ResourceUpdateActor(NodeActor):
    """An op that updates variables in place (Assign, ScatterAdd, ApplyAdam, ...).

    Its ref inputs are bound to resources when the actor is built; the resources' buffers are made
    exclusive (copy-on-write) just before the kernel mutates them. Runs inline on the event loop,
    which serializes all updates of a resource. An update with a cost estimate (a fused GEMM
    update) may run on the pool instead: its resources are marked busy meanwhile, and every read or
    update of them waits for it, so the update stays atomic for everyone else.
    """

    __slots__ = ("refs", "is_assign", "validate_shape")
    releases = True

    def __init__(self, rt, name, op_type, fn, n_in, template, refs, validate_shape=True):
        super().__init__(rt, name, op_type, fn, n_in, template)
        self.deferred = True
        self.refs = refs                  # tuple of (slot, VariableResource)
        self.is_assign = op_type == "Assign"
        self.validate_shape = validate_shape

    def fire(self, tag, args):
        step = tag.step
        if self.skips(step, tag, args):
            return
        for _, res in self.refs:
            if res.busy is not None:
                res.park(self, tag, args)
                return
        if self.offload or (self.cost is not None and self.cost(*args) > self.limit):
            try:
                for slot, res in self.refs:
                    args[slot] = res.exclusive()
            except Exception as e:  # noqa: BLE001
                step.fail(self.error(e, args, tag))
                return
            for _, res in self.refs:
                res.busy = []
            self.rt.offload(self, tag, args)
            return
        try:
            out = self.update(args)
        except Exception as e:  # noqa: BLE001
            step.fail(self.error(e, args, tag))
            return
        self.emit(tag, out)

    def update(self, args):
        """Runs the update in this thread on exclusive buffers, and returns its output (the
        updated value): the kernel's result is stored, or, when it mutated the buffer in place,
        the resource's version is bumped."""
        if self.is_assign:
            return self._assign(args)
        for slot, res in self.refs:
            args[slot] = res.exclusive()
        out = self.fn(*args)
        res0 = self.refs[0][1]
        if out is not res0.value:
            res0.store(out)
        else:
            res0.version += 1
        return out

    def release(self, args) -> None:
        """An offloaded update ended (done or failed): the resources are free again, and the
        activations parked behind it are queued."""
        for _, res in self.refs:
            res.version += 1
            waiting, res.busy = res.busy, None
            if waiting:
                res.unpark(self.rt, waiting)

    def _assign(self, args):
        res = self.refs[0][1]
        value = args[1]
        # A GPU (CuPy) value assigned to a variable living on the GPU stays a CuPy array.
        on_device = type(value) is not np.ndarray and hasattr(value, "__cuda_array_interface__")
        if not on_device:
            value = np.asarray(value, dtype=res.dtype)
        elif value.dtype != res.dtype:
            value = value.astype(res.dtype)
        if self.validate_shape and res.shape is not None and not _shape_ok(res.shape, value.shape):
            raise errors.InvalidArgumentError(
                self.name, None, f"Assign requires shapes of both tensors to match. lhs shape= "
                f"{list(res.shape)} rhs shape= {list(value.shape)}")
        # An Assign overwrites every element: a buffer someone else still holds (a read of this
        # step's) is replaced below, not copied first and then overwritten (Adam's sparse path assigns
        # its decayed slots each step: in word2vec, two 30 MB copies where one does).
        shared = res.shared()
        cur = res.value
        if (cur is not None and cur.shape == value.shape and (not on_device or type(cur) is type(value))
                and not shared):
            args[0] = cur
            out = self.fn(*args)
            res.version += 1
            return out
        # A value nobody else holds (a freshly computed or restored array) is adopted, not copied
        # (CuPy flags have no `writeable`). References: args[1], `value`, getrefcount's argument.
        owned = value.flags.c_contiguous if on_device else value.flags.writeable
        if (value is args[1] and owned and value.base is None and sys.getrefcount(value) <= 3
                and not huge_buffer_wanted(value)):
            args[1] = None
            res.store(value)
            return value
        new = value.copy() if on_device else new_buffer(value)     # big CPU buffers: in huge pages
        res.store(new)
        return new


def _shape_ok(declared, actual) -> bool:
    if len(declared) != len(actual):
        return False
    return all(d is None or d == a for d, a in zip(declared, actual))


class AsyncResourceActor(NodeActor):
    """An op on a resource whose operations may wait (queues, accumulators).

    The resource calls `done(result, error)` when the operation completes, possibly much later;
    meanwhile the actor's iteration stays open (counted as outstanding).
    """

    __slots__ = ("resource", "attrs")

    def __init__(self, rt, name, op_type, fn, n_in, tpl, resource, attrs, n_out):
        super().__init__(rt, name, op_type, fn, n_in, tpl, n_out=n_out)
        self.resource = resource
        self.attrs = attrs

    def fire(self, tag, args):
        step = tag.step
        if self.skips(step, tag, args):
            return
        rt = self.rt
        rt.begin_async(tag)

        def done(result, error):
            if error is not None:
                step.fail(self.error(error, args[1:], tag))
            elif step.error is None:
                self.emit(tag, result)
            rt.end_async(tag)

        try:
            self.resource.run(self.op_type, self.attrs, args[1:], done, step)
        except Exception as e:  # noqa: BLE001
            done(None, e)


class FetchSink:
    """Receives one fetched value (or a target's completion) of a step."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index              # position in the results, or None for a target

    def deliver(self, tag, slot, value):
        step = tag.step
        if step.error is not None:
            return
        if self.index is not None:
            step.results[self.index] = value
        step.remaining -= 1
        if step.remaining == 0:
            step.finish()

    def drop(self, step):
        pass
