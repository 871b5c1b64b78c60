"""Instantiation: the actors of one ExecPlan (scheduler/lower.py), wired, alive across steps;
`start` launches a step.

Each NodeItem names its actor rule (`item.actor`); `_ACTOR_RULES` maps a rule to the function that
builds the actor. Nothing here looks at op types: what an op is, where it runs and how it is wired
was decided by the compiler.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.actors.control_flow import (
    EnterActor,
    ExitActor,
    LoopMergeActor,
    MergeActor,
    NextIterationActor,
    SwitchActor,
)
from actorflow.actors.dispatcher import Runtime
from actorflow.actors.node import (
    AsyncResourceActor,
    FetchSink,
    IsInitializedActor,
    NodeActor,
    ResourceUpdateActor,
    SingleInputActor,
    SourceActor,
    VariableActor,
)
from actorflow.actors.pool import KernelPool, offload_policy
from actorflow.actors.resource import ResourceContainer
from actorflow.actors.sendrecv import RecvActor, SendActor
from actorflow.actors.step import StepState
from actorflow.actors.sync_step import SyncProgram, SyncTrainProgram
from actorflow.kernels.registry import get_kernel
from actorflow.scheduler.ir import ExecPlan, _device_type, kernel_attrs

__all__ = ["Executable", "kernel_attrs"]


class Executable:
    """The actors of one ExecPlan (scheduler.lower's output), alive across steps; `start` launches
    one step."""

    def __init__(self, runtime: Runtime, plan: ExecPlan, container: ResourceContainer, transport=None,
                 inline: bool = False):
        self.rt = runtime
        # inline: every kernel runs where the step runs (the loop, or the caller's thread on the
        # synchronous path), never on the kernel pool (TF: inter_op_parallelism_threads < 0);
        # except a whole loop run as one kernel call, whose length is unknown: on the loop it would
        # keep the step's deadline from firing (kernels/interrupt.py).
        self.inline = inline
        self.transport = transport         # Send/Recv across tasks (a worker service), or None
        self.exec_plan = plan
        self.plan = plan.plan              # the pruned Plan (feeds, fetches, ops)
        self.container = container         # its resources (graph functions run against the same)
        self.dead_possible = plan.dead_possible
        items = plan.items
        actors = [self._make_actor(item) for item in items]
        for item, actor in zip(items, actors):
            outs = [[(actors[c], slot) for c, slot in o] for o in item.outs]
            for idx, fi in item.fetch_outs:
                outs[idx].append((FetchSink(fi), 0))
            ctrl = [(actors[c], slot) for c, slot in item.ctrl]
            if item.is_target:
                ctrl.append((FetchSink(None), 0))
            actor.outs = tuple(tuple(o) for o in outs)
            actor.ctrl = tuple(ctrl)
        self.actors = actors
        self.sources = [actors[i] for i in plan.sources]
        self.feed_targets = [tuple((actors[i], slot) for i, slot in targets) for targets in plan.feed_targets]
        self.const_fetches = plan.const_fetches
        self.feed_fetches = plan.feed_fetches
        self.n_sinks = plan.n_sinks
        self._actor_list = actors
        # A plan of cheap pure kernels also runs straight through in the caller's thread.
        self.sync = None
        if transport is None:
            self.sync = SyncProgram.of(self) or SyncTrainProgram.of(self)
        # A step of a plan that only computes (pure kernels and variable reads) can also run through
        # off the loop (`run_whole`), on a runtime whose pool is real threads (a simulation's pool
        # runs kernels in virtual time, where it models them), unless every kernel must run where
        # its step runs (`inline`: an arun on the runtime's loop keeps them there).
        self.whole = (self.sync is not None and not self.sync.updates and not self.sync.stoppable
                      and not inline and isinstance(runtime.pool, KernelPool))
        # JIT kernels in tiered mode (AF_JIT=tiered): the session compiles each, before a step,
        # once its interpreted ops have run long enough (scheduler/jit/compile.py).
        self.tiered = tuple(a.fn for a in actors if callable(getattr(getattr(a, "fn", None), "tier_due", None)))

    def tier_due(self) -> bool:
        """Whether a tiered JIT kernel of this executable should compile before the next step."""
        return any(k.tier_due() for k in self.tiered)

    def tier_up(self) -> None:
        """Compiles the tiered kernels that are due, in this thread (never an event loop's)."""
        for k in self.tiered:
            if k.tier_due():
                k.tier_up()

    @property
    def devices(self):
        """{graph op: "CPU" | "GPU:i"} of the ops this executable runs, or None when all run on the CPU."""
        devs = {it.op: it.device for it in self.exec_plan.items if it.op is not None}
        return devs if any(d != "CPU" for d in devs.values()) else None

    def _make_actor(self, item):
        tpl = list(item.template)
        for slot, device in item.template_devices:
            tpl[slot] = _copy_kernel(device)(tpl[slot])
        tpl += [None] * item.n_ctrl + [item.count]
        try:
            rule = _ACTOR_RULES[item.actor]
        except KeyError:
            raise errors.InvalidArgumentError(item.name, item.op, f"op '{item.name}' ({item.op_type}) has an "
                                              f"unknown actor kind {item.actor!r}") from None
        a = rule(self, item, tpl)
        if item.deferred:
            a.deferred = True
        return a

    def _random_kernel(self, op, device):
        """The session's kernel of random op `op` (what its actor would run), keyed as `_kernel_actor` keys it."""
        kdef = get_kernel(op.type, _device_type(device))
        return self.container.stateful_kernel(op, (device, kdef), lambda: kdef.factory(kernel_attrs(op.attrs)))

    def _kernel_actor(self, item, tpl):
        rt = self.rt
        try:
            if item.kernel.session_state and item.op is not None:
                # One kernel per op for the whole session: a random op's stream continues from
                # plan to plan (a step fetching the loss, then one fetching the accuracy).
                fn = self.container.stateful_kernel(item.op, (item.device, item.kernel),
                                                    lambda: item.kernel.factory(item.attrs))
            else:
                fn = item.kernel.factory(item.attrs)
            random_ops = getattr(fn, "random_ops", ())
            if random_ops:
                # A compiled loop's random ops draw from the streams their own actors would (one
                # kernel per op for the session, as above): the loop's and the op's runs interleave.
                fn.bind_random([self._random_kernel(op, item.device) for op in random_ops])
        except Exception as e:  # noqa: BLE001
            raise errors.InvalidArgumentError(item.name, item.op, f"Cannot build the {item.op_type} kernel of op "
                                                                  f"'{item.name}': {e}") from e
        offload, cost, limit = ((False, None, None) if self.inline and not getattr(fn, "interruptible", False)
                                else offload_policy(item.in_shapes, item.in_values, item.kernel))
        if item.actor == "update":
            bound = tuple((slot, self._resource(spec)) for slot, spec in item.bindings)
            a = ResourceUpdateActor(rt, item.name, item.op_type, fn, item.n_in, tpl, bound,
                                    validate_shape=item.validate_shape)
            if item.kernel.cost is not None:       # an update worth the pool (a fused GEMM update)
                a.offload, a.cost, a.limit = offload, cost, limit
        else:
            cls = _actor_class(item.count)
            a = cls(rt, item.name, item.op_type, fn, item.n_in, tpl, cost=cost, offload=offload, n_out=item.n_out,
                    limit=limit)
        if item.kernel.split is not None and (offload or cost is not None):
            a.split = item.kernel.split(item.attrs)
        if item.parts:
            a.parts = item.parts
        return a

    def _resource(self, spec):
        """The resource `spec` (a ResourceSpec) names, from this executable's container."""
        if spec.kind == "variable":
            return self.container.variable(spec.name, spec.dtype, spec.shape)
        from actorflow.actors.resource import resource_factory
        factory = resource_factory(spec.op_type)
        return self.container.resource(spec.name, spec.op_type, lambda: factory(spec.name, spec.attrs))

    def _transported(self, a, item):
        if self.transport is None:
            raise errors.InvalidArgumentError(item.name, item.op,
                                              f"op '{item.name}' ({item.op_type}) needs a cluster transport")
        a.transport = self.transport
        a.key = item.attrs["key"]
        return a

    # -- steps --------------------------------------------------------------------------------
    def start(self, feed_values, done_cb, step_id=None, trace=None) -> StepState:
        """Launches one step; must be called on the runtime's loop. `done_cb(results, error)`.
        `trace`: a StepTracer (actors/tracing.py) that records the step; it is finalized
        (`trace.result`) on the loop just before `done_cb` runs."""
        rt = self.rt
        gate = getattr(self.container, "gate", None)
        if gate is not None:
            # Counted, so that a synchronous training step of the container waits its turn.
            gate.actor_started()
            done_cb = _counted_done(gate, done_cb)
        if trace is not None:
            done_cb = _traced_done(rt, trace, done_cb)
            rt.tracing += 1
        step = StepState(self, step_id or rt.next_step_id(), self.exec_plan.n_fetches, done_cb)
        step.trace = trace
        results = step.results
        for i, v in self.const_fetches:
            results[i] = v
        for i, fi in self.feed_fetches:
            results[i] = feed_values[fi]
        if step.remaining == 0:
            step.finish()
            return step
        for fi, targets in enumerate(self.feed_targets):
            v = feed_values[fi]
            for actor, slot in targets:
                actor.deliver(step, slot, v)
        rt.start(step, [(actor, actor.initial_args()) for actor in self.sources])
        return step

    def run_sync(self, feed_values, on_loop=False):
        """The fetched values of one step run in the calling thread (actors/sync_step.py), or None
        when this plan must run on the actors (`start`). `on_loop`: the caller is the runtime's
        loop, where a training step (which blocks for its whole duration) never runs, and a step
        that only reads its variables runs while its kernels are cheap."""
        sync = self.sync
        if sync is None:
            return None
        if on_loop and sync.stateful:
            return sync.run(feed_values, self.const_fetches, self.feed_fetches, on_loop=True)
        return sync.run(feed_values, self.const_fetches, self.feed_fetches)

    def run_whole(self, feed_values):
        """One step of a plan that only computes (`whole`), run through in the calling thread, which
        is not the runtime's loop and may block for the whole step: kernels worth the pool run here,
        split into blocks that the pool's idle threads share (actors/sync_step.py). None when the
        step must go to the actors (its variables are busy with an actor step)."""
        sync = self.sync
        if sync.stateful:
            return sync.run(feed_values, self.const_fetches, self.feed_fetches)
        return sync.run(feed_values, self.const_fetches, self.feed_fetches, rt=self.rt)

    def drop(self, step) -> None:
        for a in self._actor_list:
            if a.pending:
                a.drop(step)


def _counted_done(gate, done_cb):
    def done(results, error):
        gate.actor_ended()
        done_cb(results, error)
    return done


def _traced_done(rt, trace, done_cb):
    """Wraps a traced step's `done_cb`: stops tracing, and lets activations already queued (a
    variable update beside the fetches) record their end before the stats are collected."""
    def done(results, error):
        rt.tracing -= 1

        def later():
            trace.result = trace.to_dict()
            done_cb(results, error)
        rt.loop.call_soon(later)
    return done


def _copy_kernel(device: str):
    """The kernel copying a value to `device` ("CPU" or "GPU:i")."""
    op_type = "_DeviceToHost" if device == "CPU" else "_HostToDevice"
    return get_kernel(op_type, "GPU").factory({"device": device})


def _actor_class(count: int):
    """The plainest actor class for an op with `count` message inputs."""
    return SourceActor if count == 0 else (SingleInputActor if count == 1 else NodeActor)


def _noop(*args):
    return None


def _identity(x):
    return x


# -- actor rules: OpDef.actor (refined by the compiler) -> the actor that runs a NodeItem -------------

def _node(exe, item, tpl):
    return exe._kernel_actor(item, tpl)


def _copy(exe, item, tpl):
    fn = item.kernel.factory(item.attrs)
    return SingleInputActor(exe.rt, item.name, item.op_type, fn, item.n_in, tpl, offload=item.offload)


def _const(exe, item, tpl):
    value = item.attrs["value"]
    if item.device != "CPU":
        value = _copy_kernel(item.device)(value)
    return _actor_class(item.count)(exe.rt, item.name, item.op_type, lambda: value, item.n_in, tpl)


def _placeholder(exe, item, tpl):
    raise errors.InvalidArgumentError(item.name, item.op, f"placeholder '{item.name}' must be fed")


def _handle(exe, item, tpl):
    raise errors.InvalidArgumentError(item.name, item.op, f"op '{item.name}' ({item.op_type}) creates a resource: its "
                                      "consumers bind it by reference, it cannot run or be fetched itself")


def _noop_actor(exe, item, tpl):
    return _actor_class(item.count)(exe.rt, item.name, item.op_type, _noop, item.n_in, tpl, n_out=0)


def _identity_actor(exe, item, tpl):
    return SingleInputActor(exe.rt, item.name, item.op_type, _identity, item.n_in, tpl)


def _variable(exe, item, tpl):
    return VariableActor(exe.rt, item.name, exe._resource(item.resource), item.n_in, tpl)


def _is_initialized(exe, item, tpl):
    return IsInitializedActor(exe.rt, item.name, exe._resource(item.resource), item.n_in, tpl)


def _async_resource(exe, item, tpl):
    # The op's other resources (a reader's filename queue) reach it as the values of their slots.
    for slot, spec in item.bindings:
        tpl[slot] = exe._resource(spec)
    return AsyncResourceActor(exe.rt, item.name, item.op_type, None, item.n_in, tpl, exe._resource(item.resource),
                              item.attrs, item.n_out)


def _control_flow(cls):
    def make(exe, item, tpl):
        return cls(exe.rt, item.name, item.op_type, None, item.n_in, tpl, n_out=item.n_out)
    return make


def _merge(exe, item, tpl):
    cls = LoopMergeActor if item.loop_merge else MergeActor
    return cls(exe.rt, item.name, item.op_type, None, item.n_in, tpl, n_out=item.n_out)


def _enter(exe, item, tpl):
    a = EnterActor(exe.rt, item.name, item.op_type, None, item.n_in, tpl, n_out=item.n_out)
    a.frame_name, a.is_constant, a.parallel, a.n_enters = item.frame
    return a


def _send(exe, item, tpl):
    a = SendActor(exe.rt, item.name, item.op_type, None, item.n_in, tpl, n_out=0)
    a.dst = item.attrs["recv_device"]
    return exe._transported(a, item)


def _recv(exe, item, tpl):
    return exe._transported(RecvActor(exe.rt, item.name, item.op_type, None, item.n_in, tpl), item)


_ACTOR_RULES = {
    "node": _node, "update": _node, "copy": _copy, "const": _const, "placeholder": _placeholder,
    "noop": _noop_actor, "identity": _identity_actor, "variable": _variable, "is_initialized": _is_initialized,
    "resource": _async_resource, "switch": _control_flow(SwitchActor), "merge": _merge, "enter": _enter,
    "exit": _control_flow(ExitActor), "next_iteration": _control_flow(NextIterationActor), "send": _send,
    "recv": _recv, "handle": _handle,
}
