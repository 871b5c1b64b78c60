"""Instantiation: the actors of one prepared plan, wired, alive across steps; `start` launches a step."""
from __future__ import annotations

import os

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
from actorflow.actors.pool import offload_policy
from actorflow.actors.resource import ResourceContainer
from actorflow.actors.sendrecv import RecvActor, SendActor
from actorflow.actors.step import StepState
from actorflow.graph import dtypes
from actorflow.graph.tensor_shape import TensorShape
from actorflow.kernels.registry import get_kernel
from actorflow.scheduler.fusion import find_fusions
from actorflow.scheduler.plan import Plan

__all__ = ["Executable", "kernel_attrs"]


def kernel_attrs(attrs: dict) -> dict:
    """Graph attributes as plain values for kernels: numpy dtypes, shape tuples (-1 unknown)."""
    def conv(v):
        if isinstance(v, dtypes.DType):
            return v.np
        if isinstance(v, TensorShape):
            return None if v.dims is None else tuple(-1 if d is None else d for d in v.dims)
        if isinstance(v, tuple):
            return tuple(conv(x) for x in v)
        return v
    return {k: conv(v) for k, v in attrs.items()}


class Executable:
    """The actors of one prepared plan, alive across steps; `start` launches one step."""

    def __init__(self, runtime: Runtime, plan: Plan, container: ResourceContainer, transport=None,
                 soft_placement=False, auto_gpu=True, fuse=True):
        self.rt = runtime
        self.transport = transport         # Send/Recv across tasks (a worker service), or None
        self.plan = plan
        self.container = container         # its resources (graph functions run against the same)
        # {op: "CPU" | "GPU:i"}, or None when everything runs on the CPU.
        self.devices = _assign_devices(plan, soft_placement, auto_gpu)
        self._kdefs: dict = {}             # op -> the KernelDef its actor runs
        self.dead_possible = plan.has_control_flow
        # {root op: Fusion}: chains of ops that run as one kernel; their inner ops get no actor.
        self.fusions = find_fusions(plan, self._on_cpu) if fuse and _fusion_enabled() else {}
        fused_away = {p for f in self.fusions.values() for p in f.parts[:-1]}
        feed_index = {t: i for i, t in enumerate(plan.feeds)}
        in_plan = set(plan.ops)
        self.actors: dict = {}            # Operation -> actor
        self.sources: list = []
        self.feed_targets = [[] for _ in plan.feeds]
        self.const_fetches: list = []     # (result index, value)
        self.feed_fetches: list = []      # (result index, feed index)

        self._enter_counts: dict = {}
        for op in plan.ops:
            if op.type == "Enter":
                fn = op.attrs["frame_name"]
                self._enter_counts[fn] = self._enter_counts.get(fn, 0) + 1
        # Which ops need an actor: everything but Consts (folded into consumers).
        # A Const with control inputs lives in a frame or branch: it must run (and die) with it.
        # It can still be folded into consumers that fire in the same frame anyway, through another input.
        folded = {op for op in plan.ops if op.type == "Const" and _foldable(op, in_plan, feed_index)}
        for op in plan.ops:
            if op in folded or op in fused_away:
                continue
            self.actors[op] = None
        # Count message inputs and build templates.
        specs = {}
        for op in self.actors:
            fusion = self.fusions.get(op)
            inputs = op.inputs if fusion is None else fusion.inputs
            ref_inputs = op.op_def.ref_inputs if fusion is None else fusion.ref_inputs
            n_in = len(inputs)
            template = [None] * n_in
            msg_inputs = []           # (slot, producer op, output index)
            refs = []
            for i, t in enumerate(inputs):
                if i in ref_inputs:
                    refs.append((i, t.op))
                elif t in feed_index:
                    self.feed_targets[feed_index[t]].append((op, i))
                    msg_inputs.append((i, None, None))
                elif t.op in folded:
                    template[i] = t.op.attrs["value"]
                else:
                    msg_inputs.append((i, t.op, t.value_index))
            ctrl = [c for c in op.control_inputs if c in self.actors]
            if fusion is not None:
                ctrl += [c for c in fusion.extra_control if c in self.actors and c not in ctrl]
            specs[op] = (n_in, template, msg_inputs, refs, ctrl)

        for op, (n_in, template, msg_inputs, refs, ctrl) in specs.items():
            count = len(msg_inputs) + len(ctrl)
            tpl = template + [None] * len(ctrl) + [count]
            actor = self._make_actor(op, n_in, tpl, count, refs, container)
            self.actors[op] = actor
            if count == 0:
                self.sources.append(actor)

        # Wire edges; an edge between devices goes through a copy actor.
        outs = {op: [[] for _ in op.outputs] for op in self.actors}
        ctrls = {op: [] for op in self.actors}
        self._copies: dict = {}            # (source, device) -> copy actor
        devices = self.devices
        for op, (n_in, _template, msg_inputs, _refs, ctrl) in specs.items():
            actor = self.actors[op]
            if devices is not None:
                self._place_constants(op, actor, _template)
            for slot, producer, idx in msg_inputs:
                if producer is not None:
                    want = self._input_device(op, slot) if devices is not None else None
                    if want is not None and want != self._output_device(producer):
                        c, new = self._copy_actor((producer, idx), want, producer.outputs[idx].name)
                        if new:
                            outs[producer][idx].append((c, 0))
                        c.outs[0].append((actor, slot))
                    else:
                        outs[producer][idx].append((actor, slot))
            for j, c in enumerate(ctrl):
                ctrls[c].append((actor, n_in + j))
        n_sinks = 0
        for i, t in enumerate(plan.fetches):
            if t is None:
                continue
            if t in feed_index:
                self.feed_fetches.append((i, feed_index[t]))
            elif t.op in folded:
                self.const_fetches.append((i, t.op.attrs["value"]))
            else:
                outs[t.op][t.value_index].append((FetchSink(i), 0))
                n_sinks += 1
        for op in plan.targets:
            if op in self.actors:
                ctrls[op].append((FetchSink(None), 0))
                n_sinks += 1
        for op, actor in self.actors.items():
            actor.outs = tuple(tuple(o) for o in outs[op])
            actor.ctrl = tuple(ctrls[op])
        # Feeds go straight to the actors' mailboxes at each step (through a copy to a GPU consumer).
        feed_targets = []
        for fi, targets in enumerate(self.feed_targets):
            direct = []
            for op, slot in targets:
                want = self._input_device(op, slot) if devices is not None else None
                if want is not None and want != "CPU":
                    c, new = self._copy_actor(("feed", fi), want, plan.feeds[fi].name)
                    if new:
                        direct.append((c, 0))
                    c.outs[0].append((self.actors[op], slot))
                else:
                    direct.append((self.actors[op], slot))
            feed_targets.append(tuple(direct))
        self.feed_targets = feed_targets
        for c in self._copies.values():
            c.outs = tuple(tuple(o) for o in c.outs)
        self.n_sinks = n_sinks
        self._actor_list = list(self.actors.values()) + list(self._copies.values())
        _mark_deferred(self.actors, plan.ops)

    # -- devices ------------------------------------------------------------------------------
    def _on_cpu(self, op) -> bool:
        return self.devices is None or self.devices.get(op, "CPU") == "CPU"

    def _output_device(self, op) -> str:
        if op.type == "IsVariableInitialized":
            return "CPU"
        return self.devices.get(op, "CPU")

    def _input_device(self, op, slot):
        """The device input `slot` of `op` must be on, or None when any device will do."""
        dev = self.devices.get(op, "CPU")
        kdef = self._kdefs.get(op)
        if dev == "CPU":
            return None if kdef is not None and kdef.metadata_only else "CPU"
        if kdef is not None and kdef.device_inputs is not None:
            return dev if slot in kdef.device_inputs else "CPU"
        if kdef is not None and kdef.host_inputs and (slot in kdef.host_inputs
                                                      or slot - len(op.inputs) in kdef.host_inputs):
            return "CPU"
        if slot == 1 and op.type in ("Switch", "RefSwitch"):
            return "CPU"                 # the predicate is read on the host
        return dev

    def _place_constants(self, op, actor, template) -> None:
        """Folded constants feeding a GPU input are copied to the GPU once, when the actor is built."""
        for slot in range(actor.n_in):
            v = template[slot]
            if v is None:
                continue
            want = self._input_device(op, slot)
            if want is not None and want != "CPU":
                actor.template[slot] = _copy_kernel(want)(v)

    def _copy_actor(self, key, device, what):
        """(the actor copying `key`, a producer's output or a feed, to `device`; True when it was
        just made and still needs an edge from its source)."""
        c = self._copies.get((key, device))
        if c is not None:
            return c, False
        to_host = device == "CPU"
        # A copy to the host waits for the GPU: it runs on the pool, never on the loop.
        c = SingleInputActor(self.rt, f"{what}/_copy_to_{device}", "_DeviceToHost" if to_host else "_HostToDevice",
                             _copy_kernel(device), 1, [None, 1], offload=to_host)
        c.outs = ([],)
        self._copies[(key, device)] = c
        return c, True

    def _make_actor(self, op, n_in, tpl, count, refs, container):
        rt = self.rt
        name = op.name
        device_type = "CPU"
        if self.devices is not None and self.devices.get(op, "CPU") != "CPU":
            device_type = "GPU"
        if op.type == "VariableV2":
            res = _variable_resource(container, op)
            return VariableActor(rt, name, res, n_in, tpl)
        if op.type == "_RefRead":
            return VariableActor(rt, name, _variable_resource(container, refs[0][1]), n_in, tpl)
        if op.type == "IsVariableInitialized":
            return IsInitializedActor(rt, name, _variable_resource(container, refs[0][1]), n_in, tpl)
        cf = _CONTROL_FLOW_ACTORS.get(op.type)
        if cf is not None:
            return self._make_cf_actor(cf, op, n_in, tpl)
        if op.type in ("_Send", "_Recv"):
            if self.transport is None:
                raise errors.InvalidArgumentError(name, op, f"op '{name}' ({op.type}) needs a cluster transport")
            if op.type == "_Send":
                a = SendActor(rt, name, op.type, None, n_in, tpl, n_out=0)
                a.dst = op.attrs["recv_device"]
            else:
                a = RecvActor(rt, name, op.type, None, n_in, tpl)
            a.transport = self.transport
            a.key = op.attrs["key"]
            return a
        if op.type == "Const":
            value = op.attrs["value"]
            if device_type == "GPU":
                value = _copy_kernel(self.devices[op])(value)
            cls = _actor_class(count)
            return cls(rt, name, "Const", lambda: value, n_in, tpl)
        if op.type in ("Placeholder",):
            raise errors.InvalidArgumentError(name, op, f"placeholder '{name}' must be fed")
        if refs and refs[0][1].op_def.resource != "variable":
            res = _resource(container, refs[0][1])
            return AsyncResourceActor(rt, name, op.type, None, n_in, tpl, res, kernel_attrs(op.attrs), len(op.outputs))
        if op.type in ("NoOp", "ControlTrigger"):
            cls = _actor_class(count)
            return cls(rt, name, op.type, _noop, n_in, tpl, n_out=0)
        fusion = self.fusions.get(op)
        op_type, attrs = (op.type, op.attrs) if fusion is None else (fusion.type, fusion.attrs)
        inputs = op.inputs if fusion is None else fusion.inputs
        try:
            kdef = get_kernel(op_type, device_type)
        except LookupError:
            raise errors.InvalidArgumentError(
                name, op, f"No {device_type} kernel is registered for op '{name}' of type {op_type}") from None
        self._kdefs[op] = kdef
        try:
            fn = kdef.factory(kernel_attrs(attrs))
        except Exception as e:  # noqa: BLE001
            raise errors.InvalidArgumentError(name, op, f"Cannot build the {op_type} kernel of op '{name}': {e}") from e
        offload, cost = offload_policy(inputs, kdef)
        if refs:
            bound = tuple((slot, _variable_resource(container, vop)) for slot, vop in refs)
            a = ResourceUpdateActor(rt, name, op_type, fn, n_in, tpl, bound,
                                    validate_shape=op.attrs.get("validate_shape", True))
            if kdef.cost is not None:       # an update worth the pool (a fused GEMM update)
                a.offload, a.cost = offload, cost
        else:
            cls = _actor_class(count)
            a = cls(rt, name, op_type, fn, n_in, tpl, cost=cost, offload=offload, n_out=len(op.outputs))
        if kdef.split is not None and (offload or cost is not None):
            a.split = kdef.split(kernel_attrs(attrs))
        if fusion is not None:
            a.parts = tuple((p.name, p.type) for p in fusion.parts)
        return a

    def _make_cf_actor(self, cls, op, n_in, tpl):
        if op.type == "Merge" and any(t.op.type == "NextIteration" for t in op.inputs):
            cls = LoopMergeActor
        if op.type in ("LoopCond",):
            return SingleInputActor(self.rt, op.name, op.type, _identity, n_in, tpl)
        a = cls(self.rt, op.name, op.type, None, n_in, tpl, n_out=len(op.outputs))
        if cls is EnterActor:
            a.frame_name = op.attrs["frame_name"]
            a.is_constant = bool(op.attrs.get("is_constant", False))
            a.parallel = int(op.attrs.get("parallel_iterations", 10))
            a.n_enters = self._enter_counts[a.frame_name]
        return a

    # -- steps --------------------------------------------------------------------------------
    def start(self, feed_values, done_cb, step_id=None, trace=None) -> StepState:
        """Launches one step; must be called on the runtime's loop. `done_cb(results, error)`.
        `trace`: a StepTracer (actors/tracing.py) that records the step; it is finalized
        (`trace.result`) on the loop just before `done_cb` runs."""
        rt = self.rt
        if trace is not None:
            done_cb = _traced_done(rt, trace, done_cb)
            rt.tracing += 1
        step = StepState(self, step_id or rt.next_step_id(), len(self.plan.fetches), done_cb)
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

    def drop(self, step) -> None:
        for a in self._actor_list:
            if a.pending:
                a.drop(step)


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


def _assign_devices(plan, soft, auto_gpu):
    from actorflow.kernels.registry import has_kernel
    from actorflow.scheduler.devices import gpu_count
    from actorflow.scheduler.placement import assign_devices
    def metadata_only(op_type):
        return has_kernel(op_type, "CPU") and get_kernel(op_type, "CPU").metadata_only
    return assign_devices(plan.ops, gpu_count(), soft, lambda t: has_kernel(t, "GPU"), metadata_only, auto_gpu)


def _foldable(const_op, in_plan, feed_index) -> bool:
    """A Const folds into its consumers unless one of them would depend on it alone for firing
    (a Const inside a loop body or branch must then run, per iteration or not at all)."""
    if not const_op.control_inputs:
        return True
    for t in const_op.outputs:
        for c in t._consumers:
            if c in in_plan and (c.type in _CONTROL_FLOW_ACTORS or all(
                    x.op.type == "Const" or i in c.op_def.ref_inputs for i, x in enumerate(c.inputs))):
                return False
    return True


def _actor_class(count: int):
    """The plainest actor class for an op with `count` message inputs."""
    return SourceActor if count == 0 else (SingleInputActor if count == 1 else NodeActor)


def _noop(*args):
    return None


def _identity(x):
    return x


_CONTROL_FLOW_ACTORS = {"Switch": SwitchActor, "Merge": MergeActor, "Enter": EnterActor, "Exit": ExitActor,
                        "NextIteration": NextIterationActor, "LoopCond": SingleInputActor, "RefSwitch": SwitchActor}


def _resource(container, op):
    """The (shared) resource created by `op` (a queue, an accumulator, ...) in `container`."""
    from actorflow.actors.resource import resource_factory
    name = op.attrs.get("shared_name") or op.name
    factory = resource_factory(op.type)
    return container.resource(name, op.type, lambda: factory(name, kernel_attrs(op.attrs)))


def _variable_resource(container, var_op):
    a = var_op.attrs
    name = a.get("shared_name") or var_op.name
    shape = a["shape"]
    return container.variable(name, a["dtype"].np, None if shape.dims is None else shape.dims)


def _mark_deferred(actors: dict, ops) -> None:
    """Marks the actors whose outputs go only to variable updates (a weight gradient: a
    Conv2DBackpropFilter, an unfused dW MatMul): the pool runs them, like the updates, after work
    on the critical path. Only one level: in a training step everything in the backward pass
    ends in updates, but an input gradient leads on to the next layer's kernels first."""
    for op in ops:
        a = actors.get(op)
        if a is None or a.deferred:
            continue
        consumers = [c for outs in a.outs for c, _ in outs] + [c for c, _ in a.ctrl]
        a.deferred = bool(consumers) and all(isinstance(c, ResourceUpdateActor) for c in consumers)


def _fusion_enabled() -> bool:
    return os.environ.get("AF_FUSION", "1") != "0"
