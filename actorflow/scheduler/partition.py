"""Partitioning: a transfer node on every edge whose value lives elsewhere than its consumer reads it.

One rule, at two levels. Within a task (`insert_copies`, the "partition" pass of every task's
pipeline): an edge between devices gets a copy node (`_HostToDevice` / `_DeviceToHost`), one per
value and device. Between tasks (`cut`, run by the master): the plan is split into one subgraph per
task, the wire format of a registration, with a `_Send`/`_Recv` pair on every edge that crosses
tasks. Constants are copied to every task that uses them instead of being sent. A control edge that
crosses tasks becomes a _Send of a scalar, gated by the control source, and a _Recv that the
destination op takes as a control input. Feeds become placeholders of the tasks that consume them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Graph, Operation
from actorflow.graph.tensor_shape import TensorShape
from actorflow.scheduler.ir import Bound, Feed, Literal, Node, PlanIR, Ref, node_kernel

__all__ = ["Partition", "partition", "cut", "insert_copies", "input_device", "output_device"]


@dataclass(slots=True)
class Partition:
    task: str                         # "/job:worker/task:0"
    graph: Graph
    feeds: list = field(default_factory=list)      # (feed index in the plan, placeholder name in this graph)
    fetches: list = field(default_factory=list)    # (fetch index in the plan, tensor name in this graph)
    targets: list = field(default_factory=list)    # op names to run (including every _Send)


# -- within a task: copy nodes ----------------------------------------------------------------------

def output_device(node: Node) -> str:
    return "CPU" if node.op_def.host_outputs else node.device


def input_device(node: Node, slot: int):
    """The device input `slot` of `node` must be on, or None when any device will do."""
    dev = node.device
    kdef = node_kernel(node)
    if dev == "CPU":
        return None if kdef is not None and kdef.metadata_only else "CPU"
    if kdef is not None and kdef.device_inputs is not None:
        return dev if slot in kdef.device_inputs else "CPU"
    if kdef is not None and kdef.host_inputs and (slot in kdef.host_inputs
                                                  or slot - len(node.inputs) in kdef.host_inputs):
        return "CPU"
    if slot in node.op_def.host_inputs:
        return "CPU"                 # read on the host (a Switch's predicate)
    return dev


def insert_copies(ir: PlanIR, options=None) -> PlanIR:
    """A copy node on every edge whose value lives on another device than its consumer reads it on
    (one per value and device); folded constants read on a GPU are marked to be put there once."""
    if all(n.device == "CPU" for n in ir.nodes):
        return ir
    by = ir.by_name()
    copies: dict = {}
    nodes = []
    for n in ir.nodes:
        ins = list(n.inputs)
        for slot, x in enumerate(n.inputs):
            if type(x) is Bound:
                continue
            want = input_device(n, slot)
            if want is None:
                continue
            if type(x) is Literal:
                if want != "CPU":
                    ins[slot] = Literal(x.value, want)
                continue
            have = "CPU" if type(x) is Feed else output_device(by[x.node])
            if want == have:
                continue
            c = copies.get((x, want))
            if c is None:
                what = ir.feeds[x.index].name if type(x) is Feed else f"{x.node}:{x.index}"
                to_host = want == "CPU"
                dtype, shape = (ir.feeds[x.index].dtype, ir.feeds[x.index].shape) if type(x) is Feed \
                    else by[x.node].outputs[x.index]
                c = copies[(x, want)] = Node(f"{what}/_copy_to_{want}", "_DeviceToHost" if to_host else "_HostToDevice",
                                             {"device": want}, (x,), ((dtype, shape),), (),
                                             have if to_host else want, n.task)
                nodes.append(c)
            ins[slot] = Ref(c.name, 0)
        nodes.append(n.replace(inputs=tuple(ins)) if ins != list(n.inputs) else n)
    return ir.replace(nodes=tuple(nodes))


# -- between tasks: the cut ----------------------------------------------------------------------------

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
            merge = op.op_def.control_flow == "merge"
            deps = [t.op for t in op.inputs if not (merge and t.op.op_def.control_flow == "next_iteration")]
            deps += list(op.control_inputs)
            for d in reversed(deps):
                if d in members and not state.get(d):
                    stack.append((d, False))
    return order


def partition(plan, placement: dict) -> dict[str, Partition]:
    """Splits `plan` by `placement` ({op: DeviceSpec}); returns {task name: Partition}."""
    return _Partitioner(plan, placement).run()


def cut(plan, placement: dict) -> tuple[dict[str, Partition], list]:
    """`partition`, and the fetches no task computes: [(fetch index, ("feed", feed index) |
    ("const", value))], answered by whoever runs the step."""
    p = _Partitioner(plan, placement)
    parts = p.run()
    local = []
    for i, t in enumerate(plan.fetches):
        if t is None:
            continue
        if t in p.feed_index:
            local.append((i, ("feed", p.feed_index[t])))
        elif _is_free_const(t.op):
            local.append((i, ("const", t.op.attrs["value"])))
    return parts, local


class _Partitioner:
    """The state of one cut: the partitions made so far and what each task already has of the
    plan (op copies, constants, feed placeholders, received tensors and control tokens)."""

    def __init__(self, plan, placement: dict):
        self.plan = plan
        self.placement = placement
        self.parts: dict[str, Partition] = {}
        self.feed_index = {t: i for i, t in enumerate(plan.feeds)}
        self.copies: dict[tuple[str, Operation], Operation] = {}   # (task, plan op) -> its op in that task's graph
        self.sends: dict = {}
        self.recvs: dict = {}
        self.ctrl_recvs: dict = {}
        self.feed_phs: dict = {}

    def run(self) -> dict[str, Partition]:
        plan, placement, copies = self.plan, self.placement, self.copies
        # Ops in dependency order, except loop back edges (Merge <- NextIteration), patched after.
        back_edges = []
        for op in _dependency_order(plan.ops):
            task = _task(placement[op])
            if _is_free_const(op) or (task, op) in copies:
                continue
            inputs = []
            for i, t in enumerate(op.inputs):
                if i in op.op_def.ref_inputs:
                    # A reference to a variable: the variable op lives (unrun) in the same partition.
                    key = (task, t.op)
                    if key not in copies:
                        copies[key] = _copy(self.part(task).graph, t.op, [], [], placement[t.op].to_string())
                    inputs.append(copies[key].outputs[t.value_index])
                elif (op.op_def.control_flow == "merge" and t.op.op_def.control_flow == "next_iteration"
                      and (task, t.op) not in copies):
                    inputs.append(None)
                    back_edges.append((op, i, t))
                else:
                    inputs.append(self.value_in(task, t))
            ctrl = [x for x in (self.control_in(task, c) for c in op.control_inputs if c in placement) if x is not None]
            pending_inputs = [x if x is not None else self.value_in(task, op.inputs[0]) for x in inputs]
            copies[(task, op)] = _copy(self.part(task).graph, op, pending_inputs, ctrl, placement[op].to_string())
        for op, i, t in back_edges:
            task = _task(placement[op])
            copies[(task, op)]._update_input(i, self.value_in(task, t))
        for i, t in enumerate(plan.fetches):
            if t is None or t in self.feed_index or _is_free_const(t.op):
                continue
            self.part(_task(placement[t.op])).fetches.append((i, t.name))
        for op in plan.targets:
            if op in placement:
                self.part(_task(placement[op])).targets.append(op.name)
        return self.parts

    def part(self, task) -> Partition:
        p = self.parts.get(task)
        if p is None:
            p = self.parts[task] = Partition(task, Graph())
            p.graph.seed = self.plan.graph.seed
        return p

    def const_in(self, task, const_op):
        key = (task, const_op)
        c = self.copies.get(key)
        if c is None:
            c = self.copies[key] = _copy(self.part(task).graph, const_op, [], [], task)
        return c

    def value_in(self, task, t):
        """The tensor `t` as seen from `task`: local, a copied constant, a feed, or a _Recv."""
        if t in self.feed_index:
            key = (task, t)
            ph = self.feed_phs.get(key)
            if ph is None:
                p = self.part(task)
                name = f"_feed/{t.op.name}/{t.value_index}"
                ph = p.graph._insert_op(name, "Placeholder", [], [], {"dtype": t.dtype, "shape": t.shape},
                                        task, [(t.dtype, t.shape)]).outputs[0]
                self.feed_phs[key] = ph
                p.feeds.append((self.feed_index[t], ph.name))
            return ph
        src = t.op
        if _is_free_const(src):
            return self.const_in(task, src).outputs[t.value_index]
        src_task = _task(self.placement[src])
        if src_task == task:
            return self.copies[(task, src)].outputs[t.value_index]
        key = (t, task)
        r = self.recvs.get(key)
        if r is None:
            edge = f"{t.name};{src_task}->{task}"
            sp = self.part(src_task)
            s = sp.graph._insert_op(f"_send/{t.op.name}_{t.value_index}/{len(self.sends)}", "_Send",
                                    [self.copies[(src_task, src)].outputs[t.value_index]], [],
                                    {"key": edge, "send_device": src_task, "recv_device": task}, src_task, [])
            self.sends[key] = s
            sp.targets.append(s.name)
            rp = self.part(task)
            r = rp.graph._insert_op(f"_recv/{t.op.name}_{t.value_index}/{len(self.recvs)}", "_Recv", [], [],
                                    {"key": edge, "send_device": src_task, "recv_device": task,
                                     "tensor_type": t.dtype, "shape": t.shape}, task, [(t.dtype, t.shape)]).outputs[0]
            self.recvs[key] = r
        return r

    def control_in(self, task, c: Operation):
        """The op of `task` standing for control input `c`: itself, or a _Recv of a token that
        `c`'s task sends once `c` has run (None for a free constant, which is always ready)."""
        if _is_free_const(c):
            return None
        src_task = _task(self.placement[c])
        if src_task == task:
            return self.copies[(task, c)]
        key = (c, task)
        r = self.ctrl_recvs.get(key)
        if r is None:
            edge = f"^{c.name};{src_task}->{task}"
            sp = self.part(src_task)
            n = len(self.sends)
            token = sp.graph._insert_op(f"_send/^{c.name}/{n}/token", "Const", [], [],
                                        {"value": np.zeros((), np.int8), "dtype": dtypes.int8}, src_task,
                                        [(dtypes.int8, TensorShape([]))]).outputs[0]
            s = sp.graph._insert_op(f"_send/^{c.name}/{n}", "_Send", [token], [self.copies[(src_task, c)]],
                                    {"key": edge, "send_device": src_task, "recv_device": task}, src_task, [])
            self.sends[key] = s
            sp.targets.append(s.name)
            rp = self.part(task)
            r = rp.graph._insert_op(f"_recv/^{c.name}/{len(self.ctrl_recvs)}", "_Recv", [], [],
                                    {"key": edge, "send_device": src_task, "recv_device": task,
                                     "tensor_type": dtypes.int8, "shape": TensorShape([])},
                                    task, [(dtypes.int8, TensorShape([]))])
            self.ctrl_recvs[key] = r
        return r


def _is_free_const(op) -> bool:
    """A constant with no control inputs: every task that reads it gets its own copy."""
    return op.op_def.actor == "const" and not op.control_inputs
