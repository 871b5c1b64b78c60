"""Chrome trace-event timelines of traced steps (tf.compat.v1.client.timeline).

    run_metadata = af.RunMetadata()
    sess.run(train_op, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()
    open("timeline.json", "w").write(trace)     # open in https://ui.perfetto.dev or chrome://tracing

The layout follows TF's Timeline: one process per device (named by "M" metadata events), one
thread per kernel-pool thread or event loop, an "X" complete event per node activation (its name
the op type, `args.name` the node, `args.input<i>` its inputs), and, with `show_dataflow`, a flow
("s" at the producer, "f" at the consumer) per tensor edge, Send to Recv across tasks included.
Differences from TF: an event spans the kernel (`op_start`..`op_end`), not the whole activation
(which is in `args`), because actorflow's event loop interleaves activations; activations that
still overlap on one thread (a Recv waiting for its tensor, a kernel split into pool blocks) go
to extra lanes "<thread> (overlap k)", so that every lane holds properly nested slices. With
`show_memory`, "C" counter events per device give the bytes of the outputs each node produced
(FULL_TRACE records them), not allocator state: actorflow has no allocator to trace.
"""
from __future__ import annotations

import json
import re

__all__ = ["Timeline"]

_LABEL = re.compile(r"(.*) = (.*)\((.*)\)")


class Timeline:
    """A timeline of one step (tf.compat.v1.client.timeline.Timeline).

    `step_stats`: TF's StepStats (the protobuf or actorflow's dataclasses with its field names), or a
    RunMetadata holding one. `graph` is accepted for TF compatibility and unused."""

    def __init__(self, step_stats, graph=None):
        if step_stats is None:
            raise ValueError("Timeline needs step stats: run with af.RunOptions(trace_level=FULL_TRACE) and "
                             "pass run_metadata.step_stats")
        if hasattr(step_stats, "step_stats") and not hasattr(step_stats, "dev_stats"):
            step_stats = step_stats.step_stats
        self._step_stats = step_stats
        self._graph = graph

    def generate_chrome_trace_format(self, show_dataflow: bool = True, show_memory: bool = False,
                                     op_time: str = "schedule") -> str:
        """The step as a JSON string in the Chrome trace-event format ({"traceEvents": [...]}).
        `op_time` is accepted for TF compatibility: events always span the kernel's run."""
        events: list = []
        nodes: list = []          # (pid, tid, ts, dur, name, op, inputs, frame, label)
        for pid, ds in enumerate(self._step_stats.dev_stats):
            events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": f"{ds.device} Compute"}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
            thread_names = dict(ds.thread_names)
            lanes: dict = {}      # real tid -> [end of lane 0, end of lane 1, ...]
            named = set()
            for ns in sorted(ds.node_stats, key=lambda n: (n.all_start_micros + n.op_start_rel_micros)):
                label = ns.timeline_label or f"{ns.node_name} = unknown()"
                first, *rest = label.split("\n")
                m = _LABEL.match(first)
                op = m.group(2) if m else "unknown"
                inputs = [s.strip() for s in m.group(3).split(",") if s.strip()] if m else []
                frame = next((r[len("frame "):] for r in rest if r.startswith("frame ")), "")
                ts = ns.all_start_micros + ns.op_start_rel_micros
                dur = max(0, ns.op_end_rel_micros - ns.op_start_rel_micros)
                tid = ns.thread_id
                ends = lanes.setdefault(tid, [])
                k = next((i for i, end in enumerate(ends) if end <= ts), None)
                if k is None:
                    k = len(ends)
                    ends.append(0)
                ends[k] = ts + dur
                lane = tid if k == 0 else tid + 10_000 * k
                if lane not in named:
                    named.add(lane)
                    base = thread_names.get(tid, "event loop" if tid == 0 else f"thread {tid}")
                    events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": lane,
                                   "args": {"name": base if k == 0 else f"{base} (overlap {k})"}})
                args = {"name": ns.node_name, "op": op, "all_start_micros": ns.all_start_micros,
                        "all_end_rel_micros": ns.all_end_rel_micros}
                for i, inp in enumerate(inputs):
                    args[f"input{i}"] = inp
                args.update((r.split(" ", 1)[0], r) for r in rest if r and not r.startswith("split"))
                out_bytes = sum(o.tensor_description.allocation_description.requested_bytes for o in ns.output)
                if out_bytes:
                    args["output_bytes"] = out_bytes
                events.append({"name": op, "cat": "Op", "ph": "X", "pid": pid, "tid": lane, "ts": ts, "dur": dur,
                               "args": args})
                nodes.append((pid, lane, ts, dur, ns.node_name, inputs, frame))
                if show_memory and out_bytes:
                    events.append({"name": "Output bytes", "cat": "Memory", "ph": "C", "pid": pid,
                                   "ts": ts + dur, "args": {ds.device: out_bytes}})
        if show_dataflow:
            events.extend(_flows(nodes))
        return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})


def _flows(nodes) -> list:
    """Flow events for tensor edges: from each input's producer (among its activations that
    started before the consumer, the latest of the same frame and iteration, else the latest) to
    the consumer; a `_recv/X` also gets one from its `_send/X`."""
    by_name: dict = {}
    for n in nodes:
        by_name.setdefault(n[4], []).append(n)
    out = []
    fid = 0
    for pid, tid, ts, _dur, name, inputs, frame in nodes:
        srcs = [i.lstrip("^").rsplit(":", 1)[0] for i in inputs]
        if name.startswith("_recv/"):
            srcs.append("_send/" + name[len("_recv/"):])
        for src in srcs:
            cands = by_name.get(src)
            if not cands:
                continue
            before = [c for c in cands if c[2] <= ts] or cands[:1]
            same = [c for c in before if c[6] == frame]
            p = (same or before)[-1]
            fid += 1
            # Perfetto binds "s" to the slice open at its time on the producer's lane and "f" to the one
            # open at its time on the consumer's lane, the start first: both inside their own slice, the
            # start no later than the consumer's start (a split kernel's blocks, its consumers here, start
            # before it ends; a flow from its end would bind to whatever runs then on the block's thread).
            s_ts = max(p[2], min(p[2] + max(p[3] - 1, 0), ts))
            out.append({"name": "tensor", "cat": "DataFlow", "ph": "s", "id": fid, "pid": p[0], "tid": p[1],
                        "ts": s_ts, "args": {"name": src}})
            out.append({"name": "tensor", "cat": "DataFlow", "ph": "f", "bp": "e", "id": fid, "pid": pid,
                        "tid": tid, "ts": max(ts, s_ts), "args": {"name": src}})
    return out
