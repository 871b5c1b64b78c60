"""Step traces: what `RunOptions(trace_level=SOFTWARE_TRACE | FULL_TRACE)` records about one step.

A traced step carries a StepTracer in `StepState.trace`. Untraced steps pay nothing per kernel:
the dispatcher tests one runtime counter per pump call (not per kernel) and runs its traced twin
only while a traced step is in flight; `NodeActor.emit` tests `tag.step.trace` once.

Per activation (one node, one (frame, iteration) tag) a record holds, in microseconds of this
process's clock (wall-clock epoch, advanced by the monotonic counter so that it never jumps):
- `all_start`: the dispatcher took the activation (for a kernel sent to the pool: when the loop
  handed it over, also `scheduled_micros`);
- `op_start`/`op_end`: the kernel ran (on the pool: first block start to last block end; a Recv:
  from asking the rendezvous to the tensor's arrival);
- `all_end`: its outputs were delivered to the consumers' mailboxes.
A kernel split into blocks (actors/pool.py) adds one record per block, named
`<node>/_block_<i>`, on the pool thread that ran it. Send and Recv records name the peer and the
bytes moved; records inside a while loop name the frame and iteration. `step_stats()` turns the
records into TF's StepStats protobuf (TensorBoard's generated classes, `tensorboard` package), or,
without that package, into dataclasses with the same field names.
"""
from __future__ import annotations

import dataclasses
import threading
import time

from actorflow import clock as _clock
from actorflow.actors.sendrecv import frame_key

__all__ = ["StepTracer", "now_us", "SOFTWARE_TRACE", "FULL_TRACE", "step_stats_from_dict", "shift_step_stats"]

SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 1, 2, 3

# Wall-clock epoch (for alignment across processes) advanced by perf_counter (monotonic, ns).
_EPOCH_NS = time.time_ns() - time.perf_counter_ns()
_perf_ns = time.perf_counter_ns


def now_us() -> int:
    """This process's trace clock, in microseconds since the epoch (virtual under a simulation)."""
    if _clock._hook is not None:
        return int(_clock._hook.time() * 1e6)
    return (_perf_ns() + _EPOCH_NS) // 1000


_thread_ids: dict = {}
_thread_lock = threading.Lock()


def thread_id() -> int:
    """A small, stable id for the calling thread: 0 is the runtime's event loop (`actorflow-runtime`
    or a worker server's loop), i + 1 the kernel pool's thread i, others numbered after."""
    ident = threading.get_ident()
    tid = _thread_ids.get(ident)
    if tid is None:
        with _thread_lock:
            name = threading.current_thread().name
            if name.startswith("actorflow-kernel_"):
                try:
                    tid = int(name.rsplit("_", 1)[1]) + 1
                except ValueError:
                    tid = 100 + len(_thread_ids)
            else:
                tid = 100 + len(_thread_ids)
            _thread_ids[ident] = tid
            _thread_names[tid] = name
    return tid


_thread_names: dict = {}


class Record:
    """One activation of one node (or one block of a split kernel)."""
    __slots__ = ("name", "op", "device", "all_start", "op_start", "op_end", "all_end", "thread", "scheduled",
                 "outputs", "frame", "extra", "blocks")

    def __init__(self, name, op, device, t0, thread):
        self.name, self.op, self.device = name, op, device
        self.all_start = self.op_start = self.op_end = self.all_end = t0
        self.thread = thread
        self.scheduled = 0
        self.outputs = None
        self.frame = ""
        self.extra = ""
        self.blocks = None




def _describe_output(v):
    """(dtype name, shape, nbytes) of an output value, or None for DEAD / a non-tensor."""
    nbytes = getattr(v, "nbytes", None)
    if nbytes is None:
        return None
    dt = getattr(v, "dtype", None)
    return (str(dt), tuple(int(d) for d in getattr(v, "shape", ())), int(nbytes))


class StepTracer:
    """Collects the records of one traced step of one executable (one task's partition)."""

    def __init__(self, executable, level: int, device: str):
        self.level = level
        self.full = level >= FULL_TRACE
        self.device = device
        self.records: list = []
        self.open: dict = {}              # (actor id, tag id) -> Record awaiting its outputs
        self._labels, self._devices = _labels(executable)
        self.result = None                # to_dict(), taken on the loop when the step ends

    # -- called by the runtime (loop thread) ----------------------------------------------------
    def begin(self, actor, tag, t0) -> Record:
        name = actor.name
        dev = self.device
        d = self._devices.get(name)
        if d is not None:
            dev = dev.rsplit("device:", 1)[0] + "device:" + d
        rec = Record(name, actor.op_type, dev, t0, 0)
        if tag.frame is not None:
            rec.frame = frame_key(tag)
        self.records.append(rec)
        self.open[(actor, tag)] = rec
        return rec

    def fired(self, actor, tag, args, rec, t1) -> None:
        rec.op_end = t1
        if rec.all_end < t1:
            rec.all_end = t1
        dst = getattr(actor, "dst", None)
        if dst is not None and args:          # a Send: bytes and the receiving device
            info = _describe_output(args[0])
            rec.extra = f"send {info[2] if info else 0} bytes to {dst}"

    def emitted(self, actor, tag, out) -> None:
        rec = self.open.get((actor, tag))
        if rec is None:
            return
        t = now_us()
        rec.all_end = t
        if self.full and out is not None:
            if actor.multi:
                rec.outputs = [_describe_output(v) for v in out]
            else:
                rec.outputs = [_describe_output(out)]

    def received(self, actor, tag, value, peer) -> None:
        rec = self.open.get((actor, tag))
        if rec is None:
            return
        t = now_us()
        rec.op_end = rec.all_end = t
        info = _describe_output(value)
        rec.extra = f"recv {info[2] if info else 0} bytes from {peer}"

    def offloaded(self, actor, tag, n_blocks):
        """The activation went to the pool: the record's kernel times come from the pool threads."""
        rec = self.open.get((actor, tag))
        if rec is None:
            return None
        rec.scheduled = rec.all_start
        rec.op_start = 0
        rec.op_end = 0
        if n_blocks:
            rec.blocks = [None] * n_blocks
        return rec

    # -- output ----------------------------------------------------------------------------------
    def _fix(self, rec):
        """Clamps a record's times so that they nest (a kernel cancelled on the pool has none)."""
        if rec.blocks:
            done = [b for b in rec.blocks if b is not None]
            if done:
                rec.op_start = min(b[1] for b in done)
                rec.op_end = max(b[2] for b in done)
        if not rec.op_start or rec.op_start < rec.all_start:
            rec.op_start = rec.all_start
        if rec.op_end < rec.op_start:
            rec.op_end = rec.op_start
        if rec.all_end < rec.op_end:
            rec.all_end = rec.op_end

    def to_dict(self) -> dict:
        """The stats as plain lists (msgpack-able): {device: [record tuples]} plus thread names."""
        devs: dict = {}
        labels = self._labels
        for rec in self.records:
            self._fix(rec)
            label = labels.get(rec.name) or f"{rec.name} = {rec.op}()"
            if rec.frame:
                label += f"\nframe {rec.frame}"
            if rec.extra:
                label += "\n" + rec.extra
            if rec.blocks:
                label += f"\nsplit into {len(rec.blocks)} blocks"
            outs = [list(o) if o is not None else None for o in (rec.outputs or ())]
            devs.setdefault(rec.device, []).append(
                [rec.name, rec.all_start, rec.op_start - rec.all_start, rec.op_end - rec.all_start,
                 rec.all_end - rec.all_start, rec.thread, rec.scheduled, label, outs])
            for i, b in enumerate(rec.blocks or ()):
                if b is None:
                    continue
                bt, b0, b1 = b
                devs[rec.device].append(
                    [f"{rec.name}/_block_{i}", b0, 0, b1 - b0, b1 - b0, bt, rec.all_start,
                     f"{rec.name}/_block_{i} = {rec.op}({rec.name})\nblock {i} of {len(rec.blocks)}", []])
        return {"devices": devs, "threads": {str(k): v for k, v in _thread_names.items()}}

    def step_stats(self):
        """TF's StepStats for this step (see `step_stats_from_dict`)."""
        return step_stats_from_dict(self.to_dict())


def _labels(executable):
    """({actor name: 'name = Op(inputs)'}, {actor name: device, for actors off the CPU}) of an
    executable's plan, made once."""
    cached = getattr(executable, "_trace_labels", None)
    if cached is not None:
        return cached
    from actorflow.scheduler.lower import labels
    ep = getattr(executable, "exec_plan", None)
    items = getattr(ep, "items", ())
    cached = (labels(ep.ir) if getattr(ep, "ir", None) is not None else {},
              {it.name: it.device for it in items if it.device != "CPU" and it.op is not None})
    try:
        executable._trace_labels = cached
    except AttributeError:
        pass
    return cached


# -- StepStats ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class AllocationDescription:
    requested_bytes: int = 0
    allocated_bytes: int = 0
    allocator_name: str = "cpu"


@dataclasses.dataclass
class TensorDescription:
    dtype: str = ""
    shape: list = dataclasses.field(default_factory=list)
    allocation_description: AllocationDescription = dataclasses.field(default_factory=AllocationDescription)


@dataclasses.dataclass
class NodeOutput:
    slot: int = 0
    tensor_description: TensorDescription = dataclasses.field(default_factory=TensorDescription)


@dataclasses.dataclass
class NodeExecStats:
    node_name: str = ""
    all_start_micros: int = 0
    op_start_rel_micros: int = 0
    op_end_rel_micros: int = 0
    all_end_rel_micros: int = 0
    scheduled_micros: int = 0
    thread_id: int = 0
    timeline_label: str = ""
    output: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class DeviceStepStats:
    device: str = ""
    node_stats: list = dataclasses.field(default_factory=list)
    thread_names: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class StepStats:
    dev_stats: list = dataclasses.field(default_factory=list)


def _proto_module():
    try:
        from tensorboard.compat.proto import step_stats_pb2
        return step_stats_pb2
    except ImportError:
        return None


def step_stats_from_dict(d: dict, into=None):
    """Builds (or extends `into`) TF's StepStats from `StepTracer.to_dict()` output: the protobuf
    class of the `tensorboard` package when it is installed, else the dataclasses above."""
    pb = _proto_module()
    if into is None:
        into = pb.StepStats() if pb is not None else StepStats()
    threads = {int(k): v for k, v in (d.get("threads") or {}).items()}
    for device, recs in d["devices"].items():
        if pb is not None:
            ds = into.dev_stats.add()
            ds.device = device
        else:
            ds = DeviceStepStats(device=device)
            into.dev_stats.append(ds)
        used = set()
        for name, t0, ops, ope, alle, tid, sched, label, outs in recs:
            if pb is not None:
                ns = ds.node_stats.add()
            else:
                ns = NodeExecStats()
                ds.node_stats.append(ns)
            ns.node_name = name
            ns.all_start_micros = int(t0)
            ns.op_start_rel_micros = int(ops)
            ns.op_end_rel_micros = int(ope)
            ns.all_end_rel_micros = int(alle)
            ns.scheduled_micros = int(sched)
            ns.thread_id = int(tid)
            ns.timeline_label = label
            used.add(int(tid))
            for slot, o in enumerate(outs or ()):
                if o is None:
                    continue
                dtype, shape, nbytes = o
                if pb is not None:
                    no = ns.output.add()
                    no.slot = slot
                    td = no.tensor_description
                    for dim in shape:
                        td.shape.dim.add().size = int(dim)
                    td.allocation_description.requested_bytes = int(nbytes)
                    td.allocation_description.allocated_bytes = int(nbytes)
                    td.allocation_description.allocator_name = "cpu"
                    dt = _tf_dtype(dtype)
                    if dt is not None:
                        td.dtype = dt
                else:
                    ns.output.append(NodeOutput(slot, TensorDescription(
                        dtype, list(shape), AllocationDescription(int(nbytes), int(nbytes)))))
        for tid in sorted(used):
            name = "event loop" if tid == 0 else threads.get(tid, f"thread {tid}")
            ds.thread_names[tid] = name
    return into


def _tf_dtype(np_name: str):
    try:
        import numpy as np

        from actorflow.graph import dtypes
        return dtypes.as_dtype(np.dtype(np_name)).as_datatype_enum
    except Exception:  # noqa: BLE001 - strings and object arrays: leave DT_INVALID
        return None


def shift_step_stats(d: dict, offset_us: int) -> dict:
    """Moves every absolute time in a `to_dict()` result by `offset_us` (a remote task's clock onto
    the master's)."""
    for recs in d["devices"].values():
        for r in recs:
            r[1] = int(r[1]) + offset_us
            if r[6]:
                r[6] = int(r[6]) + offset_us
    return d
