"""The profiler's advisor (tfprof's Advisor and its three public checkers): common configuration
problems (OperationChecker), the most expensive op types and graph nodes of traced runs
(ExpensiveOperationChecker) and accelerator utilization (AcceleratorUtilizationChecker)."""
from __future__ import annotations

import sys

from actorflow import errors
from actorflow.profiler import _tfprof_pb as pb
from actorflow.profiler.tfprof import Options, Stats, format_time

__all__ = ["advise"]

CHECKERS = ("AcceleratorUtilizationChecker", "OperationChecker", "ExpensiveOperationChecker")
_PRINT_ORDER = ("ExpensiveOperationChecker", "AcceleratorUtilizationChecker", "OperationChecker")


def _on_accelerator(device: str) -> bool:
    return "gpu" in device.lower()


def _operation(stats: Stats) -> list[str]:
    batch_norm = fused = nchw = False
    for node in stats.nodes.values():
        batch_norm |= "BatchNorm" in node.name
        fused |= "FusedBatchNorm" in node.op_types
        attr = node.attrs.get("data_format") if node.attrs is not None else None
        if attr is not None and attr.s == b"NHWC" and _on_accelerator(node.device):
            nchw = True
    out = []
    if batch_norm and not fused:
        out.append("Maybe use faster FusedBatchNorm instead of BatchNorm")
    if nchw:
        out.append("Found operation using NHWC data_format on GPU. Maybe NCHW is faster.")
    return out


def _expensive(stats: Stats) -> list[str]:
    name = "ExpensiveOperationChecker"
    out = []
    if not stats.steps:
        sys.stderr.write(f"Missing RunMetadata info. Skip {name}\n")
        sys.stderr.write(f"Missing run_meta for {name}\n")
    else:
        opts = Options(max_depth=3, min_micros=1, order_by="micros", account_type_regexes=[".*"],
                       start_name_regexes=[".*"], show_name_regexes=[".*"], select=("micros", "occurrence"),
                       output_type="none")
        root = stats.show("op", opts)
        node, lines = root, []
        for i in range(3):
            if not node.children:
                break
            node = node.children[0]
            lines.append(f"top {i + 1} operation type: {node.name}, cpu: {format_time(node.cpu_exec_micros)}, "
                         f"accelerator: {format_time(node.accelerator_exec_micros)}, "
                         f"total: {format_time(node.exec_micros)} "
                         f"({100.0 * node.exec_micros / (root.total_exec_micros + 1e-10):.2f}%)")
        if root.children:
            out.append("\n".join(lines))
    opts = Options(max_depth=100, min_micros=100, order_by="micros", account_type_regexes=[".*"],
                   start_name_regexes=[".*"], show_name_regexes=[".*"], select=("micros",), output_type="none")
    root = stats.show("scope", opts)
    if root.children:
        out.append("\n".join(
            f"top {i + 1} graph node: {c.name}, cpu: {format_time(c.cpu_exec_micros)}, "
            f"accelerator: {format_time(c.accelerator_exec_micros)}, total: {format_time(c.exec_micros)}"
            for i, c in enumerate(root.children[:3])))
    if not stats.has_trace:
        sys.stderr.write(f"Missing op_log (code traces) for {name}\n")
    return out


def _utilization(stats: Stats) -> list[str]:
    per_device: dict[str, list[int]] = {}
    for node in stats.nodes.values():
        if not node.execs or not _on_accelerator(node.device):
            continue
        e = node.execs[max(node.execs)]
        s = per_device.setdefault(node.device, [0, 0, 0])
        s[0] = e.start if s[0] == 0 else (min(s[0], e.start) if e.start else s[0])
        s[1] = max(s[1], e.end)
        s[2] += sum(t for _, _, t in e.accel)
    out = []
    for dev in sorted(per_device):
        start, end, busy = per_device[dev]
        if end - start <= 0:
            continue
        u = busy / (end - start)
        out.append(f"device: {dev} utilization: {u:.2f}" if u >= 0.5 else f"device: {dev} low utilization: {u:.2f}")
    return out


def advise(stats: Stats, options) -> "pb.AdviceProto":
    """Runs the checkers named in `options` ({name: {option: value}}; None runs none) on `stats`,
    prints their reports as TF does, and returns the AdviceProto."""
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"advise options must be a dict of checker name -> options, got {type(options).__name__}")
    options = options or {}
    for name in options:
        if name not in CHECKERS and name != "JobChecker":
            raise errors.InvalidArgumentError(None, None, f"advise: unknown checker {name!r}; known: "
                                              f"{', '.join(CHECKERS)}")
    ret = pb.AdviceProto()
    run = {"AcceleratorUtilizationChecker": _utilization, "OperationChecker": _operation,
           "ExpensiveOperationChecker": _expensive}
    for name in CHECKERS:          # the order TF runs them in
        if name in options:
            ret.checkers[name].reports.extend(run[name](stats))
    text = "".join(f"\n{name}:\n" + "".join(f"{r}\n" for r in ret.checkers[name].reports)
                   for name in _PRINT_ORDER if name in ret.checkers)
    sys.stdout.write(text)
    sys.stdout.flush()
    return ret
