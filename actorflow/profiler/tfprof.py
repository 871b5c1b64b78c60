"""The model analyzer behind af.profiler: TF's tfprof (tensorflow/core/profiler/internal), in Python.

State: `Stats` keeps one `_Node` per NodeDef of the profiled GraphDef (by name, in name order, as
tfprof's std::map), each with its static facts (op type, the `shape` attribute that counts as its
parameters, output shapes, inputs), its types (op type, the OpLogProto's types such as
'_trainable_variables', the device it ran on) and its FLOP count, plus per-step execution
records from traced runs' RunMetadata. A view ('scope': name hierarchy; 'graph': data flow;
'op': op types) turns
them into a tree of GraphNodeProto / MultiGraphNodeProto with the same accounting, filtering,
ordering and text as tfprof, so that `total_parameters` and `total_float_ops` equal TF's for the
same graph and options.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field

from actorflow import errors
from actorflow.profiler import _tfprof_pb as pb

__all__ = ["Options", "Stats"]

ROOT = "_TFProfRoot"
SCOPE_PARENT = "_TFProfScopeParent"
SHOWN = ("bytes", "micros", "params", "float_ops", "tensor_value", "device", "op_types", "occurrence",
         "input_shapes", "accelerator_micros", "cpu_micros", "peak_bytes", "residual_bytes", "output_bytes")
ORDER_BY = ("name", "bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros", "accelerator_micros",
            "cpu_micros", "params", "float_ops", "occurrence")
OUTPUTS = ("timeline", "stdout", "file", "pprof", "none")
CMDS = ("scope", "graph", "code", "op", "advise")

_ORDER_KEY = {"bytes": "total_requested_bytes", "peak_bytes": "total_peak_bytes",
              "residual_bytes": "total_residual_bytes", "output_bytes": "total_output_bytes",
              "micros": "total_exec_micros", "accelerator_micros": "total_accelerator_exec_micros",
              "cpu_micros": "total_cpu_exec_micros", "params": "total_parameters", "float_ops": "total_float_ops"}

_HELP = {
    "bytes": "requested bytes: The memory requested by the operation, accumulatively.",
    "micros": ("total execution time: Sum of accelerator execution time and cpu execution time.\n"
               "cpu execution time: The time from the start to the end of the operation. It's the sum of actual "
               "cpu run time plus the time that it spends waiting if part of computation is launched "
               "asynchronously.\naccelerator execution time: Time spent executing on the accelerator. This is "
               "normally measured by the actual hardware library."),
    "params": "param: Number of parameters (in the Variable).",
    "float_ops": "flops: Number of float operations. Note: Please read the implementation for the math behind it.",
    "tensor_value": "tensor_value: Not supported now.",
    "device": "device: which device is placed on.",
    "op_types": ("op_types: The attributes of the operation, includes the Kernel name device placed on and "
                 "user-defined strings."),
    "occurrence": "occurrence: The number of times it occurs",
    "input_shapes": "input shape: The shape of input tensors",
    "accelerator_micros": ("accelerator execution time: Time spent executing on the accelerator. This is "
                           "normally measured by the actual hardware library."),
    "cpu_micros": ("cpu execution time: The time from the start to the end of the operation. It's the sum of "
                   "actual cpu run time plus the time that it spends waiting if part of computation is "
                   "launched asynchronously."),
    "peak_bytes": "peak bytes: The peak amount of memory that the operation is holding at some point.",
    "residual_bytes": "residual bytes: The memory not de-allocated after the operation finishes.",
    "output_bytes": ("output bytes: The memory that is output from the operation (not necessarilty allocated by "
                     "the operation)"),
}
_CMD_HELP = {
    "scope": "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.",
    "code": ("code: When python trace is available, the nodes are python lines and their are organized by the "
             "python call stack."),
    "op": ("op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to the same "
           "type are aggregated together."),
}
_CMD_HELP["graph"] = _CMD_HELP["scope"]     # (tfprof's QueryDoc says the same for both)


def _fullmatch(regex: str, s: str) -> bool:
    try:
        return re.fullmatch(regex, s) is not None
    except re.error as e:
        raise errors.InvalidArgumentError(None, None, f"profiler option: invalid regular expression {regex!r}: "
                                          f"{e}") from None


# -- options ---------------------------------------------------------------------------------------

@dataclass
class Options:
    """tfprof's Options, from the dict ProfileOptionBuilder builds (with model_analyzer's defaults for
    missing keys)."""
    max_depth: int = 10
    min_bytes: int = 0
    min_peak_bytes: int = 0
    min_residual_bytes: int = 0
    min_output_bytes: int = 0
    min_micros: int = 0
    min_accelerator_micros: int = 0
    min_cpu_micros: int = 0
    min_params: int = 0
    min_float_ops: int = 0
    min_occurrence: int = 0
    step: int = -1
    order_by: str = "name"
    account_type_regexes: list = field(default_factory=list)
    start_name_regexes: list = field(default_factory=list)
    trim_name_regexes: list = field(default_factory=list)
    show_name_regexes: list = field(default_factory=list)
    hide_name_regexes: list = field(default_factory=list)
    account_displayed_op_only: bool = False
    select: tuple = ()
    output_type: str = "stdout"
    output_options: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, options: dict) -> "Options":
        if not isinstance(options, dict):
            raise TypeError(f"profiler options must be a dict (ProfileOptionBuilder(...).build()), got "
                            f"{type(options).__name__}")
        known = {f for f in cls.__dataclass_fields__} | {"output", "dump_to_file"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise errors.InvalidArgumentError(None, None, f"profiler options: unknown option(s) {unknown}")
        kw = {k: v for k, v in options.items() if k in cls.__dataclass_fields__ and k not in ("select",)}
        for k in ("account_type_regexes", "start_name_regexes", "trim_name_regexes", "show_name_regexes",
                  "hide_name_regexes"):
            kw[k] = list(options.get(k, []))
        kw["select"] = tuple(sorted(set(options.get("select", []))))
        kw["output_type"], kw["output_options"] = _parse_output(options.get("output", "stdout"))
        if options.get("dump_to_file"):
            kw["output_type"], kw["output_options"] = "file", {"outfile": options["dump_to_file"]}
        return cls(**kw)

    def to_string(self) -> str:
        rows = [("-max_depth", self.max_depth), ("-min_bytes", self.min_bytes),
                ("-min_peak_bytes", self.min_peak_bytes), ("-min_residual_bytes", self.min_residual_bytes),
                ("-min_output_bytes", self.min_output_bytes), ("-min_micros", self.min_micros),
                ("-min_accelerator_micros", self.min_accelerator_micros), ("-min_cpu_micros", self.min_cpu_micros),
                ("-min_params", self.min_params), ("-min_float_ops", self.min_float_ops),
                ("-min_occurrence", self.min_occurrence), ("-step", self.step), ("-order_by", self.order_by),
                ("-account_type_regexes", ",".join(self.account_type_regexes)),
                ("-start_name_regexes", ",".join(self.start_name_regexes)),
                ("-trim_name_regexes", ",".join(self.trim_name_regexes)),
                ("-show_name_regexes", ",".join(self.show_name_regexes)),
                ("-hide_name_regexes", ",".join(self.hide_name_regexes)),
                ("-account_displayed_op_only", "true" if self.account_displayed_op_only else "false"),
                ("-select", ",".join(self.select))]
        out = "".join(f"{k:<28}{v}\n" for k, v in rows)
        kv = ",".join(f"{k}={v}" for k, v in sorted(self.output_options.items()))
        return out + f"{'-output':<28}{self.output_type}:{kv}\n"


def _parse_output(spec: str):
    if not spec:
        return "stdout", {}
    kind, _, rest = spec.partition(":")
    if kind not in OUTPUTS:
        raise errors.InvalidArgumentError(None, None, f"profiler option output={spec!r}: unknown output type "
                                          f"{kind!r}, valid types: {','.join(sorted(OUTPUTS))}")
    opts = {}
    for kv in filter(None, rest.split(",")):
        key, _, value = kv.partition("=")
        if not value:
            raise errors.InvalidArgumentError(None, None, f"profiler option output={spec!r}: expected "
                                              f"{kind}:key=value,...")
        if kind in ("stdout", "none") or key != "outfile":
            raise errors.InvalidArgumentError(None, None, f"profiler option output={spec!r}: unrecognized "
                                              f"option {key!r} for output type {kind}")
        opts[key] = value
    if kind in ("timeline", "file", "pprof") and "outfile" not in opts:
        raise errors.InvalidArgumentError(None, None, f"profiler option output={spec!r}: missing outfile, e.g. "
                                          f"{kind}:outfile=...")
    return kind, opts


# -- formatting (tfprof_utils) ---------------------------------------------------------------------

def _scaled(n, units) -> str:
    """n in the first of `units` ((limit, divisor, suffix), ...) it is below, tfprof's two decimals."""
    for limit, div, suffix in units:
        if n < limit:
            return f"{n}{suffix}" if div == 1 else f"{n / div:.2f}{suffix}"
    return ""


def format_number(n: int) -> str:
    return _scaled(n, ((1000, 1, ""), (1000000, 1000.0, "k"), (1000000000, 1000000.0, "m"),
                       (float("inf"), 1000000000.0, "b")))


def format_time(us: int) -> str:
    return _scaled(us, ((1000, 1, "us"), (1000000, 1000.0, "ms"), (float("inf"), 1000000.0, "sec")))


def format_memory(b: int) -> str:
    return _scaled(b, ((1000, 1, "B"), (1000000, 1000.0, "KB"), (float("inf"), 1000000.0, "MB")))


def _shape_vec(shape_proto) -> list[int]:
    # A scalar (rank 0, known) counts as [1]; an unknown rank as [].
    if not shape_proto.dim and not shape_proto.unknown_rank:
        return [1]
    return [d.size for d in shape_proto.dim]


# -- the graph nodes (TFGraphNode) -----------------------------------------------------------------

_CANONICAL = re.compile(r".*/(device:gpu|gpu|device:cpu|cpu):\d+")


class _Exec:
    """One step's execution record of a node (tfprof's ExecStep, reduced to what the views show)."""
    __slots__ = ("cpu", "accel", "requested", "peak", "residual", "output", "start", "end", "devices")

    def __init__(self):
        self.cpu, self.accel = [], []        # (device, start_us, micros)
        self.requested = self.peak = self.residual = self.output = 0
        self.start = self.end = 0
        self.devices = set()

    @property
    def run_count(self):
        return max(len(self.cpu), len(self.accel))


class _Node:
    __slots__ = ("name", "op", "id", "shape", "output_shapes", "inputs", "src_output", "op_types", "flops",
                 "execs", "device", "host_device", "attrs", "trace")

    def __init__(self, name, op, node_id, attrs=None):
        self.name, self.op, self.id = name, op, node_id
        self.shape: list[int] = []
        self.output_shapes: dict[int, list[int]] = {}
        self.inputs: dict[int, str] = {}
        self.src_output: dict[str, int] = {}
        self.op_types = {op}
        self.flops = 0
        self.execs: dict[int, _Exec] = {}
        self.device = self.host_device = ""
        self.attrs = attrs
        self.trace = None
        if attrs is not None:
            if "shape" in attrs and attrs["shape"].HasField("shape"):
                self.shape = _shape_vec(attrs["shape"].shape)
            if "_output_shapes" in attrs and attrs["_output_shapes"].HasField("list"):
                for i, s in enumerate(attrs["_output_shapes"].list.shape):
                    self.output_shapes[i] = _shape_vec(s)

    def parameters(self) -> int:
        if self.shape and all(d >= 0 for d in self.shape):
            return math.prod(self.shape)
        return 0

    def _avg(self, step, fn):
        if not self.execs:
            return 0
        if step >= 0:
            e = self.execs.get(step)
            return fn(e) if e is not None else 0
        return sum(fn(e) for e in self.execs.values()) // len(self.execs)

    def run_count(self, step):
        return self._avg(step, lambda e: e.run_count)

    def cpu_micros(self, step):
        return self._avg(step, lambda e: sum(t for _, _, t in e.cpu))

    def accel_micros(self, step):
        return self._avg(step, lambda e: sum(t for _, _, t in e.accel))

    def exec_micros(self, step):
        return self.cpu_micros(step) + self.accel_micros(step)

    def bytes(self, step, kind):
        return self._avg(step, lambda e: getattr(e, kind))

    def float_ops(self, step):
        return self.flops if not self.execs else self.flops * self.run_count(step)

    def input_shapes(self, nodes) -> dict[int, list[int]]:
        out = {}
        for idx, name in sorted(self.inputs.items()):
            src = nodes.get(name)
            out[idx] = list(src.output_shapes.get(self.src_output.get(name, 0), [])) if src is not None else []
        return out

    def add_step_stat(self, step, device, ns):
        dev = device.lower()
        if _CANONICAL.fullmatch(dev):
            if self.device and self.device != dev:
                return
            if not self.device:
                self.device = dev
                self.host_device = re.sub(r"gpu:\d+", "cpu:0", dev)
                self.op_types.add(dev)
        e = self.execs.setdefault(step, _Exec())
        e.devices.add(dev)
        if ns.all_start_micros > 0:
            micros = ns.op_end_rel_micros or 1
            e.start = min(e.start, ns.all_start_micros) if e.start else ns.all_start_micros
            e.end = max(e.end, ns.all_start_micros + micros)
            if "stream" in dev:
                if "stream:all" not in dev:
                    e.accel.append((dev, ns.all_start_micros, micros))
            elif _CANONICAL.fullmatch(dev):
                e.cpu.append((dev, ns.all_start_micros, micros))
        if dev == self.device:
            memory = getattr(ns, "memory", ())
            for m in memory:
                e.requested += m.total_bytes
                e.peak += m.peak_bytes
                e.residual += m.live_bytes
            out_bytes = sum(o.tensor_description.allocation_description.requested_bytes for o in ns.output)
            e.output += out_bytes
            if not memory:
                # actorflow's traces record no allocator statistics: what a kernel allocates is its
                # outputs, so they stand for its requested and peak bytes.
                e.requested += out_bytes
                e.peak += out_bytes


class _Show:
    """A node of a view with its GraphNodeProto (tfprof's ShowNode)."""
    __slots__ = ("node", "proto", "account", "children", "show_children", "text")

    def __init__(self, node: _Node):
        self.node, self.account = node, False
        self.proto = pb.GraphNodeProto()
        self.children: list[_Show] = []
        self.show_children: list[_Show] = []
        self.text = ""
        self.reinit(-1)

    @property
    def name(self):
        return self.node.name

    def reinit(self, step, nodes=None):
        p, n = self.proto, self.node
        p.name = n.name
        del p.devices[:]
        if n.device:
            p.devices.append(n.device)
        p.run_count = n.run_count(step)
        p.exec_micros = n.exec_micros(step)
        p.accelerator_exec_micros = n.accel_micros(step)
        p.cpu_exec_micros = n.cpu_micros(step)
        p.requested_bytes = n.bytes(step, "requested")
        p.peak_bytes = n.bytes(step, "peak")
        p.residual_bytes = n.bytes(step, "residual")
        p.output_bytes = n.bytes(step, "output")
        p.float_ops = n.float_ops(step)
        p.ClearField("input_shapes")
        if nodes is not None:
            for idx, vec in n.input_shapes(nodes).items():
                p.input_shapes[idx].dim.extend(pb_dim(d) for d in vec)
                if not vec:
                    p.input_shapes[idx].unknown_rank = True
        p.parameters = n.parameters()

    def reset_totals(self):
        self.text = ""
        p = self.proto
        for f in _TOTALS:
            setattr(p, f, 0)
        p.total_definition_count = 0
        del p.children[:]

    def add_self(self):
        p = self.proto
        p.total_definition_count += 1
        p.total_run_count += p.run_count
        for f in _TOTALS:
            if f != "total_run_count":
                setattr(p, f, getattr(p, f) + getattr(p, f[len("total_"):]))

    def aggregate(self, other: "_Show"):
        p, o = self.proto, other.proto
        p.total_definition_count += o.total_definition_count
        for f in _TOTALS:
            setattr(p, f, getattr(p, f) + getattr(o, f))


_TOTALS = ("total_run_count", "total_exec_micros", "total_accelerator_exec_micros", "total_cpu_exec_micros",
           "total_requested_bytes", "total_peak_bytes", "total_residual_bytes", "total_output_bytes",
           "total_parameters", "total_float_ops")


def pb_dim(size):
    from actorflow.protos import tensor_shape_pb2
    return tensor_shape_pb2.TensorShapeProto.Dim(size=size)


# -- the views -------------------------------------------------------------------------------------

class _View:
    """What the scope and op views share (tfprof's TFShow / TFMultiShow)."""

    def __init__(self, stats: "Stats"):
        self.stats = stats

    @staticmethod
    def _passes(p, opts, depth, totals: bool) -> bool:
        params = p.total_parameters if totals else p.parameters
        flops = p.total_float_ops if totals else p.float_ops
        if (p.total_requested_bytes < opts.min_bytes or p.total_peak_bytes < opts.min_peak_bytes
                or p.total_residual_bytes < opts.min_residual_bytes or p.total_output_bytes < opts.min_output_bytes
                or p.total_exec_micros < opts.min_micros
                or p.total_accelerator_exec_micros < opts.min_accelerator_micros
                or p.total_cpu_exec_micros < opts.min_cpu_micros or params < opts.min_params
                or flops < opts.min_float_ops or depth > opts.max_depth):
            return False
        if not totals and p.run_count < opts.min_occurrence:
            return False
        return True

    @staticmethod
    def _name_shown(name, opts) -> bool:
        if not (opts.show_name_regexes == [".*"] or any(_fullmatch(r, name) for r in opts.show_name_regexes)):
            return False
        return not any(_fullmatch(r, name) for r in opts.hide_name_regexes)

    @staticmethod
    def _trim(name, opts) -> bool:
        return any(_fullmatch(r, name) for r in opts.trim_name_regexes)

    @staticmethod
    def _sort(nodes, opts):
        if not opts.order_by or not nodes:
            return list(nodes)
        key = _ORDER_KEY.get(opts.order_by)
        if key is None:     # 'name', and 'occurrence' (which tfprof orders by name too)
            return sorted(nodes, key=lambda n: n.name)
        return sorted(nodes, key=lambda n: -getattr(n.proto, key))


class _ScopeView(_View):
    """Nodes organized by name scope (tfprof's TFScope)."""

    def __init__(self, stats):
        super().__init__(stats)
        nodes: dict[str, _Show] = {}
        for name, node in stats.nodes.items():
            nodes.setdefault(name, _Show(node))
            while "/" in name:
                name = name.rsplit("/", 1)[0]
                if name not in nodes:
                    nodes[name] = _Show(_Node(name, SCOPE_PARENT, -1))
        roots = []
        for name in sorted(nodes):
            if "/" in name:
                nodes[name.rsplit("/", 1)[0]].children.append(nodes[name])
            else:
                roots.append(nodes[name])
        self.root = _Show(_Node(ROOT, SCOPE_PARENT, -1))
        self.root.children = roots

    def show(self, opts: Options):
        root = self.root
        root.reset_totals()
        roots = self._account(root.children, opts)
        root.show_children = []
        for n in roots:
            root.aggregate(n)
        if opts.start_name_regexes != [".*"]:
            roots = self._search_root(roots, opts.start_name_regexes)
        return self._render(root, roots, opts)

    def _render(self, root, roots, opts):
        """The shown tree under `root`: its proto, and the text with the options' legend first."""
        root.show_children = list(roots)
        root = self._print([root], opts, 1, 0)[0]
        root.text = self.stats.legend(opts) + root.text
        text = [root.text]
        self._format(root.show_children, text, root.proto)
        return root.proto, "".join(text)

    def _format(self, nodes, text, proto):
        for n in nodes:
            text.append(n.text)
            child = proto.children.add()
            child.MergeFrom(n.proto)
            self._format(n.show_children, text, child)

    def _search_root(self, roots, regexes):
        out = []
        for r in roots:
            if any(_fullmatch(x, r.name) for x in regexes):
                out.append(r)
            else:
                out.extend(self._search_root(r.show_children, regexes))
        return out

    def _should_show(self, n, opts, depth):
        if n.name == ROOT:
            return True
        return self._passes(n.proto, opts, depth, totals=False) and self._name_shown(n.name, opts)

    def _visit(self, n) -> bool:
        """Whether to print `n` now (the graph view prints a node reached twice only once)."""
        return True

    def _print(self, roots, opts, depth, indent):
        shown = []
        for n in roots:
            if not self._visit(n):
                continue
            show = self._should_show(n, opts, depth)
            ident = indent + 2 if show else indent
            cnodes = []
            if not self._trim(n.name, opts) and depth <= opts.max_depth:
                cnodes = self._print(n.show_children, opts, depth + 1, ident)
            if show:
                n.show_children = []
                if opts.account_displayed_op_only:
                    n.reset_totals()
                    n.add_self()
                for c in self._sort(cnodes, opts):
                    n.show_children.append(c)
                    if opts.account_displayed_op_only:
                        n.aggregate(c)
                n.text = " " * indent + self.stats.format_node(n, opts) + "\n"
                shown.append(n)
            else:
                shown.extend(cnodes)
        return shown

    def _account(self, roots, opts):
        out = []
        for n in roots:
            n.reset_totals()
            cnodes = self._account(n.children, opts)
            n.account = self.stats.reaccount(n, opts)
            if n.account or cnodes:
                n.show_children = []
                n.reset_totals()
                n.add_self()
                for c in cnodes:
                    n.aggregate(c)
                    n.show_children.append(c)
                out.append(n)
        return out


class _GraphView(_ScopeView):
    """Nodes organized by data flow: each node's children are its inputs, the roots the nodes no
    other node reads (tfprof's TFGraph). A node reached twice is shown once, where first reached."""

    def __init__(self, stats):
        _View.__init__(self, stats)
        nodes = {name: _Show(node) for name, node in stats.nodes.items()}
        read = set()
        for show in nodes.values():
            for _, src in sorted(show.node.inputs.items()):
                read.add(src)
                if src in nodes:
                    show.children.append(nodes[src])
        self.root = _Show(_Node(ROOT, "_TFProfGraphParent", -1))
        self.root.children = [nodes[n] for n in sorted(nodes) if n not in read]

    def show(self, opts: Options):
        root = self.root
        root.reset_totals()
        root.show_children = []
        roots = self._account(root.children, opts, set())
        for n in roots:
            root.aggregate(n)
        if opts.start_name_regexes != [".*"]:
            roots = self._search_root(roots, opts.start_name_regexes, set())
        self._seen = set()
        return self._render(root, roots, opts)

    def _search_root(self, roots, regexes, seen):
        out = []
        for r in roots:
            if r.name in seen:
                continue
            seen.add(r.name)
            if any(_fullmatch(x, r.name) for x in regexes):
                out.append(r)
            else:
                out.extend(self._search_root(r.show_children, regexes, seen))
        return out

    def _visit(self, n) -> bool:
        if n.name in self._seen:
            return False
        self._seen.add(n.name)
        return True

    def _account(self, roots, opts, seen):
        out = []
        for n in roots:
            if n.name in seen:
                continue
            seen.add(n.name)
            cnodes = self._account(n.children, opts, seen)
            n.account = self.stats.reaccount(n, opts)
            if n.account:
                n.show_children = []
                n.reset_totals()
                n.add_self()
                for c in cnodes:
                    n.aggregate(c)
                    n.show_children.append(c)
                out.append(n)
            else:
                out.extend(cnodes)
        return out


class _Multi:
    """An op type's nodes (tfprof's TFMultiGraphNode + ShowMultiNode)."""
    __slots__ = ("name", "nodes", "proto", "account", "snapshot", "text", "op_types")

    def __init__(self, name):
        self.name, self.nodes, self.account, self.text = name, {}, False, ""
        self.proto = pb.MultiGraphNodeProto(name=name)
        self.snapshot, self.op_types = {}, set()

    def reinit(self, step, regexes, all_nodes) -> bool:
        if not regexes:
            picked = []
        elif regexes == [".*"]:
            picked = list(self.nodes.values())
        else:
            picked = []
            for r in regexes:
                picked.extend(n for n in self.nodes.values() if any(_fullmatch(r, t) for t in n.op_types))
        matched = bool(picked) or regexes == [".*"]
        p = self.proto
        del p.graph_nodes[:]
        self.snapshot = {n.name: n for n in picked}
        self.op_types = set().union(*(n.op_types for n in picked)) if picked else set()
        sums = dict.fromkeys(("exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes",
                              "peak_bytes", "residual_bytes", "output_bytes", "float_ops", "parameters"), 0)
        for n in picked:
            sums["exec_micros"] += n.exec_micros(step)
            sums["accelerator_exec_micros"] += n.accel_micros(step)
            sums["cpu_exec_micros"] += n.cpu_micros(step)
            for k in ("requested", "peak", "residual", "output"):
                sums[k + "_bytes"] += n.bytes(step, k)
            sums["float_ops"] += n.float_ops(step)
            sums["parameters"] += n.parameters()
        for name in sorted(self.snapshot):
            s = _Show(self.snapshot[name])
            s.reinit(step, all_nodes)
            s.add_self()
            p.graph_nodes.add().MergeFrom(s.proto)
        p.name = self.name
        for k, v in sums.items():
            setattr(p, k, v)
        return matched

    def reset_totals(self):
        self.text = ""
        for f in _TOTALS:
            if f != "total_run_count":
                setattr(self.proto, f, 0)
        del self.proto.children[:]

    def add_self(self):
        for f in _TOTALS:
            if f != "total_run_count":
                setattr(self.proto, f, getattr(self.proto, f) + getattr(self.proto, f[len("total_"):]))

    def aggregate(self, other):
        for f in _TOTALS:
            if f != "total_run_count":
                setattr(self.proto, f, getattr(self.proto, f) + getattr(other.proto, f))


class _OpView(_View):
    """Nodes grouped by op type (tfprof's TFOp)."""

    def __init__(self, stats):
        super().__init__(stats)
        self.types: dict[str, _Multi] = {}
        for node in stats.nodes.values():
            self.types.setdefault(node.op, _Multi(node.op)).nodes.setdefault(node.name, node)
        self.types = dict(sorted(self.types.items()))
        self.root = _Multi(ROOT)

    def show(self, opts: Options):
        root = self.root
        root.reset_totals()
        if not self.types:
            return root.proto, ""
        nodes = []
        for m in self.types.values():
            m.account = m.reinit(opts.step, opts.account_type_regexes, self.stats.nodes)
            m.reset_totals()
            m.add_self()
            nodes.append(m)
        nodes = self._sort(nodes, opts)
        pre, accounted = None, []
        for m in reversed(nodes):
            if m.account:
                if pre is not None:
                    m.aggregate(pre)
                accounted.append(m)
                pre = m
        accounted.reverse()
        if pre is not None:
            root.aggregate(pre)
        start = 0
        if opts.start_name_regexes and opts.start_name_regexes != [".*"]:
            start = next((i for i, m in enumerate(accounted)
                          if any(_fullmatch(r, m.name) for r in opts.start_name_regexes)), len(accounted))
        shown = []
        for depth, m in enumerate(accounted[start:]):
            if self._trim(m.name, opts) or depth > opts.max_depth:
                break
            if self._passes(m.proto, opts, depth, totals=True) and self._name_shown(m.name, opts):
                shown.append(m)
        pre = None
        for m in reversed(shown):
            if opts.account_displayed_op_only:
                m.reset_totals()
                m.add_self()
                if pre is not None:
                    m.aggregate(pre)
            pre = m
        if opts.account_displayed_op_only:
            root.reset_totals()
            if pre is not None:
                root.aggregate(pre)
        text = self.stats.legend(opts, multi=True) + "".join(self._format(m, opts) for m in shown)
        cur = root.proto
        for m in shown:
            del cur.children[:]
            cur = cur.children.add()
            cur.CopyFrom(m.proto)
        return root.proto, text

    def _format(self, m, opts):
        p, r = m.proto, self.root.proto
        sel = set(opts.select)
        attrs = []

        def pct(total, mine, root_total):
            if total <= 0:
                return 0.0, 0.0
            return 100.0 * total / root_total, 100.0 * mine / root_total

        def mem(total, root_total, mine):
            a, b = (100.0 * total / root_total, 100.0 * mine / root_total) if mine > 0 else (0.0, 0.0)
            return f"{format_memory(mine)} ({a:.2f}%, {b:.2f}%)".rjust(30)

        for key, f in (("bytes", "requested_bytes"), ("peak_bytes", "peak_bytes"),
                       ("residual_bytes", "residual_bytes"), ("output_bytes", "output_bytes")):
            if key in sel:
                attrs.append(mem(getattr(p, "total_" + f), getattr(r, "total_" + f), getattr(p, f)))

        def tm(f):
            a, b = pct(getattr(p, "total_" + f), getattr(p, f), getattr(r, "total_" + f))
            return f"{format_time(getattr(p, f))} ({a:.2f}%, {b:.2f}%)".rjust(30)
        if "micros" in sel:
            attrs += [tm("exec_micros"), tm("accelerator_exec_micros"), tm("cpu_exec_micros")]
        else:
            if "accelerator_micros" in sel:
                attrs.append(tm("accelerator_exec_micros"))
            if "cpu_micros" in sel:
                attrs.append(tm("cpu_exec_micros"))
        if "params" in sel:
            a, b = pct(p.total_parameters, p.parameters, r.total_parameters)
            attrs.append(f"{format_number(p.parameters)} params ({a:.2f}%, {b:.2f}%)".rjust(30))
        if "float_ops" in sel:
            a, b = pct(p.total_float_ops, p.float_ops, r.total_float_ops)
            attrs.append(f"{format_number(p.float_ops)} float_ops ({a:.2f}%, {b:.2f}%)".rjust(30))
        if "device" in sel:
            attrs.append("|".join(sorted({n.device for n in m.snapshot.values()})))
        if "op_types" in sel:
            attrs.append("|".join(sorted(m.op_types)))
        if "occurrence" in sel:
            runs = sum(g.run_count for g in p.graph_nodes)
            attrs.append(f"{runs}|{len(p.graph_nodes)}".rjust(10))
        line = f"{m.name:<25}{', '.join(attrs)}\n"
        if "input_shapes" in sel:
            shapes = self._input_shapes(p)
            if shapes:
                line = f"{line}\n{shapes}\n\n"
        return line

    @staticmethod
    def _input_shapes(p):
        seen: dict[str, list[int]] = {}
        for g in p.graph_nodes:
            parts = []
            for idx in sorted(g.input_shapes):
                vec = _shape_vec(g.input_shapes[idx])
                parts.append(f"{idx}:{'x'.join(map(str, vec))}" if vec else f"{idx}:unknown")
            key = "input_type: " + ",\t".join(parts)
            c = seen.setdefault(key, [0, 0, 0])
            c[0] += 1
            c[1] += g.run_count
            c[2] += g.exec_micros
        items = sorted(sorted(seen.items()), key=lambda kv: -kv[1][1])
        return "\n".join(f"{k}\t(run*{c[1]}|defined*{c[0]})\texec_time: {format_time(c[2])}" for k, c in items)


# -- the model -------------------------------------------------------------------------------------

class Stats:
    """A profiled graph: its nodes, their FLOPs and types from an OpLogProto, and the traced steps
    added to it (tfprof's TFStats)."""

    def __init__(self, graph_def=None, op_log=None):
        self.nodes: dict[str, _Node] = {}
        self.steps: set[int] = set()
        self.id_to_string: dict[int, str] = {}
        self.has_trace = False
        self._views: dict[str, object] = {}
        if graph_def is not None:
            self.add_graph(graph_def)
        if op_log is not None:
            self.add_op_log(op_log)

    def add_graph(self, graph_def):
        added = {}
        for nd in graph_def.node:
            if nd.name in self.nodes:
                continue
            self.nodes[nd.name] = added[nd.name] = _Node(nd.name, nd.op, len(self.nodes), nd.attr)
        for nd in graph_def.node:
            node = added.get(nd.name)
            if node is None:
                continue
            for i, inp in enumerate(nd.input):
                src, out = inp, 0
                if ":" in inp:
                    src, idx = inp.split(":", 1)
                    out = int(idx)
                src = src[1:] if src.startswith("^") else src
                node.inputs[i] = src
                node.src_output[src] = out
        if added:
            self.nodes = dict(sorted(self.nodes.items()))
            self._views.clear()

    def add_op_log(self, op_log):
        for k, v in op_log.id_to_string.items():
            self.id_to_string.setdefault(k, v)
        for entry in op_log.log_entries:
            node = self.nodes.get(entry.name)
            if node is None:
                continue
            node.op_types.update(entry.types)
            if entry.float_ops:
                node.flops = entry.float_ops
            if entry.HasField("code_def") and entry.code_def.traces:
                self.has_trace = True
                node.trace = entry.code_def

    def add_run_meta(self, step, run_meta):
        stats = getattr(run_meta, "step_stats", None)
        if stats is None:
            raise errors.InvalidArgumentError(None, None, f"profiler: the RunMetadata of step {step} has no "
                                              "step_stats (run with RunOptions(trace_level=FULL_TRACE))")
        self.steps.add(step)
        for dev in stats.dev_stats:
            for ns in dev.node_stats:
                name = ns.node_name.split(":", 1)[0]
                node = self.nodes.get(name)
                if node is None:
                    if name in ("RecvTensor", "_SOURCE") or "MEMCPY" in name:
                        continue
                    node = self.nodes[name] = _Node(name, name, len(self.nodes))
                    self._views.clear()
                node.add_step_stat(step, dev.device, ns)
        self.nodes = dict(sorted(self.nodes.items()))

    def coverage(self) -> float:
        ran = sum(1 for n in self.nodes.values() if n.execs and n.id >= 0)
        return ran / max(1, len(self.nodes))

    def reaccount(self, show: _Show, opts) -> bool:
        show.reinit(opts.step, self.nodes)
        if opts.account_type_regexes == [".*"]:
            return True
        return any(_fullmatch(r, t) for r in opts.account_type_regexes for t in show.node.op_types)

    # text
    @staticmethod
    def legend(opts, multi=False) -> str:
        sel = set(opts.select)
        if multi:
            order = [("bytes", "requested bytes"), ("peak_bytes", "peak bytes"), ("residual_bytes", "residual bytes"),
                     ("output_bytes", "output bytes")]
        else:
            order = [("params", "# parameters"), ("float_ops", "# float_ops"), ("bytes", "requested bytes"),
                     ("peak_bytes", "peak bytes"), ("residual_bytes", "residual bytes"),
                     ("output_bytes", "output bytes")]
        legends = [text for key, text in order if key in sel]
        if "micros" in sel:
            legends += ["total execution time", "accelerator execution time", "cpu execution time"]
        else:
            legends += [t for k, t in (("accelerator_micros", "accelerator execution time"),
                                       ("cpu_micros", "cpu execution time")) if k in sel]
        if multi:
            legends += [t for k, t in (("params", "# parameters"), ("float_ops", "# float_ops")) if k in sel]
        legends += [t for k, t in (("device", "assigned devices"), ("op_types", "op types"),
                                   ("occurrence", "op occurrence (run|defined)" if multi else "op count (run|defined)"),
                                   ("input_shapes", "input shapes")) if k in sel]
        return f"node name | {' | '.join(legends)}\n"

    def format_node(self, n: _Show, opts) -> str:
        sel, p, acc = set(opts.select), n.proto, n.account
        info = []

        def pair(mine: str, total: str) -> str:
            return f"{mine}/{total}" if acc else f"--/{total}"
        if "params" in sel:
            if n.node.shape:
                info.append("x".join(map(str, n.node.shape)))
            info.append(pair(format_number(p.parameters), format_number(p.total_parameters)) + " params")
        if "float_ops" in sel:
            info.append(pair(format_number(p.float_ops), format_number(p.total_float_ops)) + " flops")
        for key, f in (("bytes", "requested_bytes"), ("peak_bytes", "peak_bytes"), ("residual_bytes", "residual_bytes"),
                       ("output_bytes", "output_bytes")):
            if key in sel:
                info.append(pair(format_memory(getattr(p, f)), format_memory(getattr(p, "total_" + f))))

        def tm(f):
            return pair(format_time(getattr(p, f)), format_time(getattr(p, "total_" + f)))
        if "micros" in sel:
            info += [tm("exec_micros"), tm("accelerator_exec_micros"), tm("cpu_exec_micros")]
        else:
            if "accelerator_micros" in sel:
                info.append(tm("accelerator_exec_micros"))
            if "cpu_micros" in sel:
                info.append(tm("cpu_exec_micros"))
        if "device" in sel and p.devices:
            info.append("|".join(p.devices))
        if "op_types" in sel:
            info.append("|".join(sorted(n.node.op_types)))
        if "occurrence" in sel:
            run = pair(format_number(p.run_count), format_number(p.total_run_count))
            definition = ("1/" if acc else "--/") + format_number(p.total_definition_count)
            info.append(f"{run}|{definition}")
        if "input_shapes" in sel:
            shapes = [f"{i}:{'x'.join(map(str, v))}" if v else f"{i}:unknown"
                      for i, v in n.node.input_shapes(self.nodes).items()]
            info.append("|".join(shapes))
        return f"{n.name} ({', '.join(info)})"

    @staticmethod
    def query_doc(cmd, opts) -> str:
        helps = [_HELP.get(s, f"Unknown select: {s}") for s in opts.select]
        return f"\nDoc:\n{_CMD_HELP.get(cmd, 'Unknown command: ' + cmd)}\n" + "\n".join(helps) + "\n\n"

    def show(self, cmd: str, opts: Options):
        """Runs view `cmd` ('scope', 'graph', 'op' or 'code') with `opts`; prints or writes its text as
        the options say; returns its GraphNodeProto (scope, graph) or MultiGraphNodeProto (op, code)."""
        if opts.step >= 0 and opts.step not in self.steps:
            sys.stderr.write(f"Options -step={opts.step} not found.\nAvailable steps: "
                             + "".join(f"{s} " for s in sorted(self.steps)) + "\n")
            return pb.MultiGraphNodeProto() if cmd in ("op", "code") else pb.GraphNodeProto()
        if cmd == "code":
            # actorflow's ops record no Python call stacks (and TF's do only when the op log says so).
            if not self.has_trace:
                sys.stderr.write("No code trace information\n")
                return pb.MultiGraphNodeProto()
        if cmd not in ("scope", "op", "graph"):
            raise errors.InvalidArgumentError(None, None, f"unknown cmd: {cmd}\n")
        if opts.output_type == "pprof":
            # Only the code view writes pprof files, and actorflow has no code view's traces: TF says so
            # and returns the view's empty root.
            sys.stderr.write("Only 'code' view supports pprof output now.\n")
            return pb.MultiGraphNodeProto(name=ROOT) if cmd == "op" else pb.GraphNodeProto(name=ROOT)
        if opts.output_type == "timeline":
            raise errors.UnimplementedError(None, None, "af.profiler: the timeline output is not implemented "
                                            "(af.client.timeline makes Chrome traces of a RunMetadata)")
        view = self._views.get(cmd)
        if view is None:
            view = self._views[cmd] = {"scope": _ScopeView, "graph": _GraphView, "op": _OpView}[cmd](self)
        proto, text = view.show(opts)
        prefix = self.query_doc(cmd, opts) + "Profile:\n"
        if opts.output_type == "stdout":
            sys.stdout.write("\n=========================Options=============================\n"
                             + opts.to_string()
                             + "\n==================Model Analysis Report======================\n"
                             + prefix + text
                             + "\n======================End of Report==========================\n")
            sys.stdout.flush()
        elif opts.output_type == "file":
            with open(opts.output_options["outfile"], "w") as f:
                f.write(prefix + text)
        out = type(proto)()
        out.CopyFrom(proto)
        return out

    def to_profile_proto(self):
        """This profile as TF's ProfileProto (tensorboard's tfprof_log_pb2), as Profiler.serialize_to_string
        writes it."""
        from actorflow.protos import require
        log = require("tensorboard.compat.proto.tfprof_log_pb2")
        prof = log.ProfileProto(has_trace=self.has_trace, miss_accelerator_stream=False)
        for k, v in self.id_to_string.items():
            prof.id_to_string[k] = v
        for node in self.nodes.values():
            if node.id < 0:
                continue
            pn = prof.nodes[node.id]
            pn.name, pn.op, pn.id, pn.float_ops = node.name, node.op, node.id, node.flops
            pn.canonical_device, pn.host_device = node.device, node.host_device
            pn.shape.extend(node.shape)
            pn.op_types.extend(sorted(node.op_types))
            for idx, src in node.inputs.items():
                if src in self.nodes:
                    pn.inputs[idx] = self.nodes[src].id
            for idx, vec in node.input_shapes(self.nodes).items():
                pn.input_shapes[idx].int64_values.extend(vec)
            for idx, vec in node.output_shapes.items():
                pn.output_shapes[idx].int64_values.extend(vec)
            for src, out in node.src_output.items():
                if src in self.nodes:
                    pn.src_output_index[self.nodes[src].id] = out
            if node.attrs is not None:
                for k, v in node.attrs.items():
                    if k != "_af":
                        pn.attrs[k].ParseFromString(v.SerializeToString())
            if node.trace is not None:
                pn.trace.CopyFrom(node.trace)
            for step, e in node.execs.items():
                ex = pn.execs[step]
                ex.run_count, ex.all_start_micros, ex.latest_end_micros = e.run_count, e.start, e.end
                for dev, start, micros in e.cpu:
                    ex.cpu_execs[dev].times.add().int64_values.extend([start, micros])
                for dev, start, micros in e.accel:
                    ex.accelerator_execs[dev].times.add().int64_values.extend([start, micros])
                mem = ex.memory_execs.add()
                mem.requested_bytes, mem.peak_bytes = e.requested, e.peak
                mem.residual_bytes, mem.output_bytes = e.residual, e.output
                ex.devices.extend(sorted(e.devices))
        prof.steps.extend(sorted(self.steps))
        return prof
