"""FLOP statistics per op type (TF's `ops.RegisterStatistics(type, "flops")` functions from
python/profiler/internal/flops_registry.py and python/ops/nn_ops.py) and the OpLogProto that the
profiler reads them from (tfprof_logger.py).

A statistic is `fn(graph, node_def) -> int`: it reads the static shapes of the node's inputs and
outputs from `graph` and raises ValueError when one it needs is not fully defined (the op is then
counted as having no FLOP statistic, as TF does). The counts are TF's conventions, not the work
actorflow's kernels do: a MatMul is 2*k per output element, an element-wise binary op one per
output element, a Softmax five per element, and ops with no registered statistic count zero.
"""
from __future__ import annotations

import math
import sys

__all__ = ["TRAINABLE_VARIABLES", "RegisterStatistics", "float_ops", "merge_default_with_oplog",
           "oplog_and_graph_def", "write_op_log"]

TRAINABLE_VARIABLES = "_trainable_variables"

_FLOPS: dict[str, callable] = {}


def RegisterStatistics(op_type: str, statistic_type: str = "flops"):  # noqa: N802 (TF's name)
    """Decorator registering `fn(graph, node_def) -> int` as `op_type`'s FLOP count
    (ops.RegisterStatistics(op_type, "flops") in TF; only the "flops" statistic exists here)."""
    if statistic_type != "flops":
        raise ValueError(f"RegisterStatistics: only the 'flops' statistic is supported, not {statistic_type!r}")

    def deco(fn):
        if op_type in _FLOPS:
            raise KeyError(f"RegisterStatistics: {op_type!r} already has a 'flops' statistic")
        _FLOPS[op_type] = fn
        return fn
    return deco


def _shape(graph, name: str) -> list[int]:
    """The fully defined static shape of tensor `name` ("op" meaning "op:0"), else ValueError."""
    if name.startswith("^"):
        name = name[1:]
    shape = graph.get_tensor_by_name(name if ":" in name else name + ":0").shape
    dims = shape.as_list() if shape.dims is not None else None
    if dims is None or any(d is None for d in dims):
        raise ValueError(f"Shape of tensor {name!r} is not fully defined: {shape}")
    return dims


def _n(dims) -> int:
    return math.prod(dims)


def _unary(k=1):
    return lambda graph, node: _n(_shape(graph, node.input[0])) * k


def _binary(k=1):
    return lambda graph, node: _n(_shape(graph, node.name)) * k


def _reduction(reduce_flops=1, finalize_flops=0):
    def fn(graph, node):
        return (_n(_shape(graph, node.input[0])) * reduce_flops
                + _n(_shape(graph, node.name)) * (finalize_flops - reduce_flops))
    return fn


for _t in ("Reciprocal", "Square", "Log", "Neg", "AssignSub", "AssignAdd"):
    RegisterStatistics(_t)(_unary())
RegisterStatistics("Rsqrt")(_unary(2))
RegisterStatistics("Softmax")(_unary(5))
RegisterStatistics("L2Loss")(lambda graph, node: _n(_shape(graph, node.input[0])) * 3 - 1)
for _t in ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "GreaterEqual", "Greater",
           "LessEqual", "Less", "Equal", "NotEqual"):
    RegisterStatistics(_t)(_binary())
RegisterStatistics("RsqrtGrad")(_binary(4))
RegisterStatistics("SquaredDifference")(_binary(2))
RegisterStatistics("Mean")(_reduction(1, 1))
for _t in ("Sum", "ArgMax", "ArgMin", "BiasAddGrad"):
    RegisterStatistics(_t)(_reduction(1, 0))


def _nhwc(node):
    if node.attr["data_format"].s != b"NHWC":
        raise ValueError(f"{node.op} {node.name!r}: only NHWC format is supported in flops computations")


def _ints(node, attr):
    return list(node.attr[attr].list.i)


@RegisterStatistics("AvgPool")
@RegisterStatistics("MaxPool")
def _pool(graph, node):
    _nhwc(node)
    return math.prod(_ints(node, "ksize")) * _n(_shape(graph, node.name))


@RegisterStatistics("AvgPoolGrad")
def _avg_pool_grad(graph, node):
    _nhwc(node)
    return math.prod(_ints(node, "ksize")) * _n(_shape(graph, node.input[1])) * 2


@RegisterStatistics("MaxPoolGrad")
def _max_pool_grad(graph, node):
    _nhwc(node)
    out = _n(_shape(graph, node.input[1]))
    return math.prod(_ints(node, "ksize")) * out + out


@RegisterStatistics("Conv2DBackpropInput")
def _conv2d_backprop_input(graph, node):
    _nhwc(node)
    out = _shape(graph, node.name)
    kernel = _shape(graph, node.input[1])
    s = _ints(node, "strides")
    return int(2 * _n(out) * _n(kernel) / (out[-1] * s[1] * s[2]))


@RegisterStatistics("Conv2DBackpropFilter")
def _conv2d_backprop_filter(graph, node):
    _nhwc(node)
    image = _shape(graph, node.input[0])
    kernel = _shape(graph, node.name)
    s = _ints(node, "strides")
    return int(2 * _n(image) * _n(kernel) / (image[-1] * s[1] * s[2]))


@RegisterStatistics("AddN")
def _add_n(graph, node):
    inputs = [i for i in node.input if not i.startswith("^")]
    if not inputs:
        return 0
    return _n(_shape(graph, inputs[0])) * (len(inputs) - 1)


@RegisterStatistics("MatMul")
def _matmul(graph, node):
    a = _shape(graph, node.input[0])
    k = a[0] if node.attr["transpose_a"].b else a[1]
    return k * _n(_shape(graph, node.name)) * 2


@RegisterStatistics("BatchMatMul")
@RegisterStatistics("BatchMatMulV2")
@RegisterStatistics("BatchMatMulV3")
def _batch_matmul(graph, node):
    a = _shape(graph, node.input[0])
    # TF reads `transpose_a`, which BatchMatMul's NodeDef lacks (its attribute is adj_x): k is
    # always the last dimension of `a`. Kept so that the counts equal TF's.
    k = a[-2] if node.attr["transpose_a"].b else a[-1]
    return k * _n(_shape(graph, node.name)) * 2


@RegisterStatistics("Conv3D")
def _conv3d(graph, node):
    _shape(graph, node.input[0])
    f = _shape(graph, node.input[1])
    return _n(_shape(graph, node.name)) * f[3] * f[0] * f[1] * f[2] * 2


@RegisterStatistics("Conv2D")
def _conv2d(graph, node):
    _shape(graph, node.input[0])
    f = _shape(graph, node.input[1])
    return _n(_shape(graph, node.name)) * f[2] * f[0] * f[1] * 2


@RegisterStatistics("DepthwiseConv2dNative")
@RegisterStatistics("Dilation2D")
def _depthwise(graph, node):
    _shape(graph, node.input[0])
    f = _shape(graph, node.input[1])
    return _n(_shape(graph, node.name)) * f[0] * f[1] * 2


@RegisterStatistics("BiasAdd")
def _bias_add(graph, node):
    return _n(_shape(graph, node.input[0]))


def float_ops(graph, node_def) -> int | None:
    """The FLOP count of `node_def` (a NodeDef of `graph`): an int, 0 for an op type without a
    statistic, None when a shape it needs is not fully defined (TF's get_stats_for_node_def)."""
    fn = _FLOPS.get(node_def.op)
    if fn is None:
        return 0
    try:
        return int(fn(graph, node_def))
    except ValueError:
        return None


def _fill_shapes(graph, run_meta):
    """Merges the run-time output shapes of a traced run into the graph's static ones (TF's
    _fill_missing_graph_shape), so that FLOPs of ops with unknown static shapes can be counted."""
    from actorflow.graph.tensor_shape import TensorShape
    for dev in run_meta.step_stats.dev_stats:
        for ns in dev.node_stats:
            if not ns.output:
                continue
            try:
                op = graph.get_operation_by_name(ns.node_name)
            except (KeyError, ValueError):
                continue
            if len(ns.output) != len(op.outputs):
                continue
            for i, out in enumerate(ns.output):
                t = op.outputs[i]
                if t.shape.is_fully_defined():
                    continue
                dims = [d.size for d in out.tensor_description.shape.dim]
                try:
                    t.set_shape(t.shape.merge_with(TensorShape(dims)))
                except ValueError as e:
                    sys.stderr.write(f"Node {ns.node_name} incompatible shapes: {e}.\n")


def _logged_ops(graph, run_meta=None, add_trace=True, add_trainable_var=True):
    from actorflow.protos import require
    tfprof_log_pb2 = require("tensorboard.compat.proto.tfprof_log_pb2")
    if run_meta is not None and getattr(run_meta, "step_stats", None) is not None:
        _fill_shapes(graph, run_meta)
    logged, string_to_id = {}, {"none": 0}

    def sid(s):
        return string_to_id.setdefault(s, len(string_to_id))
    missing = 0
    graph_def = graph.as_graph_def(add_shapes=True)
    for node in graph_def.node:
        flops = float_ops(graph, node)
        if flops is None:
            missing += 1
        entry = tfprof_log_pb2.OpLogEntry(name=node.name)
        add = False
        if flops:
            entry.float_ops = flops
            add = True
        if add_trace:
            for filename, lineno, funcname, line in _traceback(graph, node.name):
                tr = entry.code_def.traces.add()
                tr.file_id = sid(filename) if filename else 0
                tr.lineno = lineno if lineno else -1
                tr.function_id = sid(funcname) if funcname else 0
                tr.line_id = sid(line) if line else 0
                tr.func_start_line = -1
            add = True
        if add:
            logged[node.name] = entry
    if add_trainable_var:
        from actorflow.graph.graph import GraphKeys
        for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES):
            name = v.op.name
            if name not in logged:
                logged[name] = tfprof_log_pb2.OpLogEntry(name=name)
            logged[name].types.append(TRAINABLE_VARIABLES)
    if missing and run_meta is None:
        sys.stderr.write(f"{missing} ops no flops stats due to incomplete shapes.\n")
    return logged, string_to_id, graph_def


def _traceback(graph, name):
    """The Python stack that created op `name`, when the graph recorded one (actorflow records none)."""
    op = graph.get_operation_by_name(name)
    return getattr(op, "traceback", None) or ()


def merge_default_with_oplog(graph, op_log=None, run_meta=None, add_trace=True, add_trainable_var=True):
    """The OpLogProto of `graph` (FLOPs of ops with a statistic, '_trainable_variables' types) merged
    with the caller's `op_log` (TF's tfprof_logger.merge_default_with_oplog)."""
    if graph is None:
        from actorflow.graph.graph import get_default_graph
        graph = get_default_graph()
    return oplog_and_graph_def(graph, op_log, run_meta, add_trace, add_trainable_var)[0]


def oplog_and_graph_def(graph, op_log=None, run_meta=None, add_trace=True, add_trainable_var=True):
    """merge_default_with_oplog's OpLogProto, and the GraphDef (with shapes) it was made from."""
    from actorflow.protos import require
    tfprof_log_pb2 = require("tensorboard.compat.proto.tfprof_log_pb2")
    out = tfprof_log_pb2.OpLogProto()
    logged, string_to_id, graph_def = _logged_ops(graph, run_meta, add_trace, add_trainable_var)
    if not op_log:
        out.log_entries.extend(logged.values())
    else:
        entries = {e.name: e for e in op_log.log_entries}
        for name, entry in logged.items():
            if name in entries:
                mine = entries[name]
                mine.types.extend(entry.types)
                if entry.float_ops > 0 and mine.float_ops == 0:
                    mine.float_ops = entry.float_ops
                if entry.code_def.traces and not mine.code_def.traces:
                    mine.code_def.MergeFrom(entry.code_def)
            else:
                entries[name] = entry
        out.log_entries.extend(entries.values())
    for s, i in string_to_id.items():
        out.id_to_string[i] = s
    return out, graph_def


def write_op_log(graph, log_dir, op_log=None, run_meta=None, add_trace=True):
    """Writes `graph`'s OpLogProto (merged with `op_log`) to `log_dir`/tfprof_log
    (tf.compat.v1.profiler.write_op_log), for the tfprof command-line tool."""
    import os

    from actorflow.graph.graph import get_default_graph
    graph = graph if graph is not None else get_default_graph()
    log = merge_default_with_oplog(graph, op_log, run_meta, add_trace)
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "tfprof_log"), "wb") as f:
        f.write(log.SerializeToString())
