"""Partitioning: one subgraph per task, with a _Send/_Recv pair on every edge that crosses tasks.

Constants are copied to every task that uses them instead of being sent. A control edge that
crosses tasks becomes a _Send of a scalar, gated by the control source, and a _Recv that the
destination op takes as a control input. Feeds become placeholders of the tasks that consume them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Graph, Operation
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["Partition", "partition"]


@dataclass(slots=True)
class Partition:
    task: str                         # "/job:worker/task:0"
    graph: Graph
    feeds: list = field(default_factory=list)      # (feed index in the plan, placeholder name in this graph)
    fetches: list = field(default_factory=list)    # (fetch index in the plan, tensor name in this graph)
    targets: list = field(default_factory=list)    # op names to run (including every _Send)


def _task(spec) -> str:
    return f"/job:{spec.job}/task:{spec.task}"


def _copy(g: Graph, op: Operation, inputs, control, device: str, attrs=None) -> Operation:
    return g._insert_op(op.name, op.type, inputs, control, dict(attrs if attrs is not None else op.attrs), device,
                        [(t.dtype, t.shape) for t in op.outputs])


def _dependency_order(ops) -> list:
    """`ops` with every op after its inputs and control inputs (loop back edges aside).

    Creation order is not enough: a while loop's gradient adds control inputs to ops built before
    the ops they wait for (the trip count waits for the pushes of saved values).
    """
    members = set(ops)
    order, state = [], {}
    for root in ops:
        if root in state:
            continue
        stack = [(root, False)]
        while stack:
            op, done = stack.pop()
            if done:
                state[op] = 2
                order.append(op)
                continue
            if state.get(op):
                continue
            state[op] = 1
            stack.append((op, True))
            deps = [t.op for t in op.inputs if not (op.type == "Merge" and t.op.type == "NextIteration")]
            deps += list(op.control_inputs)
            for d in reversed(deps):
                if d in members and not state.get(d):
                    stack.append((d, False))
    return order


def partition(plan, placement: dict) -> dict[str, Partition]:
    """Splits `plan` by `placement` ({op: DeviceSpec}); returns {task name: Partition}."""
    parts: dict[str, Partition] = {}

    def part(task) -> Partition:
        p = parts.get(task)
        if p is None:
            p = parts[task] = Partition(task, Graph())
            p.graph.seed = plan.graph.seed
        return p

    feed_index = {t: i for i, t in enumerate(plan.feeds)}
    copies: dict[tuple[str, Operation], Operation] = {}
    sends: dict = {}
    recvs: dict = {}
    ctrl_recvs: dict = {}
    feed_phs: dict = {}

    def const_in(task, const_op):
        key = (task, const_op)
        c = copies.get(key)
        if c is None:
            c = copies[key] = _copy(part(task).graph, const_op, [], [], task)
        return c

    def value_in(task, t):
        """The tensor `t` as seen from `task`: local, a copied constant, a feed, or a _Recv."""
        if t in feed_index:
            key = (task, t)
            ph = feed_phs.get(key)
            if ph is None:
                p = part(task)
                name = f"_feed/{t.op.name}/{t.value_index}"
                ph = p.graph._insert_op(name, "Placeholder", [], [], {"dtype": t.dtype, "shape": t.shape},
                          task, [(t.dtype, t.shape)]).outputs[0]
                feed_phs[key] = ph
                p.feeds.append((feed_index[t], ph.name))
            return ph
        src = t.op
        if src.type == "Const" and not src.control_inputs:
            return const_in(task, src).outputs[t.value_index]
        src_task = _task(placement[src])
        if src_task == task:
            return copies[(task, src)].outputs[t.value_index]
        key = (t, task)
        r = recvs.get(key)
        if r is None:
            edge = f"{t.name};{src_task}->{task}"
            sp = part(src_task)
            s = sp.graph._insert_op(f"_send/{t.op.name}_{t.value_index}/{len(sends)}", "_Send",
                     [copies[(src_task, src)].outputs[t.value_index]], [],
                     {"key": edge, "send_device": src_task, "recv_device": task}, src_task, [])
            sends[key] = s
            sp.targets.append(s.name)
            rp = part(task)
            r = rp.graph._insert_op(f"_recv/{t.op.name}_{t.value_index}/{len(recvs)}", "_Recv", [], [],
                     {"key": edge, "send_device": src_task, "recv_device": task, "tensor_type": t.dtype,
                      "shape": t.shape}, task, [(t.dtype, t.shape)]).outputs[0]
            recvs[key] = r
        return r

    def control_in(task, c: Operation):
        if c.type == "Const" and not c.control_inputs:
            return None
        src_task = _task(placement[c])
        if src_task == task:
            return copies[(task, c)]
        key = (c, task)
        r = ctrl_recvs.get(key)
        if r is None:
            edge = f"^{c.name};{src_task}->{task}"
            sp = part(src_task)
            zero = np.zeros((), np.int8)
            s = sp.graph._insert_op(f"_send/^{c.name}/{len(sends)}", "_Send",
                     [sp.graph._insert_op(f"_send/^{c.name}/{len(sends)}/token", "Const", [], [],
                           {"value": zero, "dtype": dtypes.int8}, src_task, [(dtypes.int8, TensorShape([]))]).outputs[0]],
                     [copies[(src_task, c)]],
                     {"key": edge, "send_device": src_task, "recv_device": task}, src_task, [])
            sends[key] = s
            sp.targets.append(s.name)
            rp = part(task)
            r = rp.graph._insert_op(f"_recv/^{c.name}/{len(ctrl_recvs)}", "_Recv", [], [],
                     {"key": edge, "send_device": src_task, "recv_device": task, "tensor_type": dtypes.int8,
                      "shape": TensorShape([])}, task, [(dtypes.int8, TensorShape([]))])
            ctrl_recvs[key] = r
        return r

    # Ops in dependency order, except loop back edges (Merge <- NextIteration), which are patched after.
    back_edges = []
    for op in _dependency_order(plan.ops):
        task = _task(placement[op])
        if op.type == "Const" and not op.control_inputs or (task, op) in copies:
            continue
        inputs = []
        for i, t in enumerate(op.inputs):
            if i in op.op_def.ref_inputs:
                # A reference to a variable: the variable op lives (unrun) in the same partition.
                key = (task, t.op)
                if key not in copies:
                    copies[key] = _copy(part(task).graph, t.op, [], [], placement[t.op].to_string())
                inputs.append(copies[key].outputs[t.value_index])
            elif op.type == "Merge" and t.op.type == "NextIteration" and (task, t.op) not in copies:
                inputs.append(None)
                back_edges.append((op, i, t))
            else:
                inputs.append(value_in(task, t))
        ctrl = [x for x in (control_in(task, c) for c in op.control_inputs if c in placement) if x is not None]
        pending_inputs = [x if x is not None else value_in(task, op.inputs[0]) for x in inputs]
        copies[(task, op)] = _copy(part(task).graph, op, pending_inputs, ctrl, placement[op].to_string())
    for op, i, t in back_edges:
        task = _task(placement[op])
        copies[(task, op)]._update_input(i, value_in(task, t))
    for i, t in enumerate(plan.fetches):
        if t is None or t in feed_index:
            continue
        if t.op.type == "Const" and not t.op.control_inputs:
            continue
        task = _task(placement[t.op])
        part(task).fetches.append((i, t.name))
    for op in plan.targets:
        if op in placement:
            task = _task(placement[op])
            part(task).targets.append(op.name)
    return parts
