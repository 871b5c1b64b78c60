"""af.profiler: TF 1.x's model analyzer (tf.compat.v1.profiler): parameter and FLOP counts, and
time and memory of traced runs, by name scope or op type.

    opts = af.profiler.ProfileOptionBuilder.trainable_variables_parameter()
    stats = af.profiler.profile(graph, options=opts)      # prints TF's report, returns GraphNodeProto
    stats.total_parameters
    af.profiler.profile(graph, options=af.profiler.ProfileOptionBuilder.float_operation()).total_float_ops

The counts follow TF's rules exactly: a node's parameters are the product of its `shape` attribute
(variables, placeholders), FLOPs come from the per-op statistics of af.profiler.flops (TF's
RegisterStatistics functions), and the views, filters, ordering and text are tfprof's. Differences:
the timeline output is not implemented (UnimplementedError); the 'code' view finds no Python traces
(actorflow ops record none), so it reports "No code trace information" as TF does for an op log
without traces, and pprof output (the code view's only) gives TF's empty root; an invalid option
raises InvalidArgumentError where TF prints to stderr and returns an empty proto.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.profiler.flops import oplog_and_graph_def, write_op_log
from actorflow.profiler.option_builder import ProfileOptionBuilder

__all__ = ["AdviceProto", "GraphNodeProto", "MultiGraphNodeProto", "OpLogProto", "ProfileOptionBuilder", "Profiler",
           "advise", "profile", "write_op_log"]

ALL_ADVICE = {"ExpensiveOperationChecker": {}, "AcceleratorUtilizationChecker": {}, "JobChecker": {},
              "OperationChecker": {}}

_DEFAULT = 0


def __getattr__(name):
    # The protobuf classes come from the `tensorboard` package (the summary extra), loaded on first use.
    if name == "OpLogProto":
        from actorflow.protos import require
        return require("tensorboard.compat.proto.tfprof_log_pb2").OpLogProto
    if name in ("GraphNodeProto", "MultiGraphNodeProto", "AdviceProto"):
        from actorflow.profiler import _tfprof_pb
        return getattr(_tfprof_pb, name)
    raise AttributeError(f"module 'actorflow.profiler' has no attribute {name!r}")


def _graph(graph):
    if graph is None:
        from actorflow.graph.graph import get_default_graph
        return get_default_graph()
    return graph


def _check_cmd(cmd):
    if cmd not in ("scope", "graph", "op", "code"):
        raise errors.InvalidArgumentError(None, None, f"unknown cmd: {cmd}\n")


def profile(graph=None, run_meta=None, op_log=None, cmd="scope", options=_DEFAULT):
    """Profiles `graph` (tf.compat.v1.profiler.profile): `cmd` 'scope' (by name scope) or 'graph' (by
    data flow), each returning a GraphNodeProto, or 'op' (by op type; a MultiGraphNodeProto); `options` a ProfileOptionBuilder dict
    (default: trainable_variables_parameter()). Prints TF's report to stdout, writes it to a file or
    nothing, as options['output'] says. `run_meta` (a traced run's RunMetadata) adds times, memory and
    run-time shapes."""
    from actorflow.profiler.tfprof import Options, Stats
    _check_cmd(cmd)
    graph = _graph(graph)
    if options == _DEFAULT:
        options = ProfileOptionBuilder.trainable_variables_parameter()
    opts = Options.from_dict(options)
    log, graph_def = oplog_and_graph_def(graph, op_log, run_meta, add_trace=cmd == "code")
    stats = Stats(graph_def)
    if run_meta is not None and getattr(run_meta, "step_stats", None) is not None:
        stats.add_run_meta(0, run_meta)
    stats.add_op_log(log)
    return stats.show(cmd, opts)


def advise(graph=None, run_meta=None, options=_DEFAULT):
    """Runs the advisor's checkers on `graph` (tf.compat.v1.profiler.advise); returns an AdviceProto
    with one report per checker named in `options` (default: all)."""
    from actorflow.profiler.advisor import advise as _advise
    from actorflow.profiler.tfprof import Stats
    graph = _graph(graph)
    if options == _DEFAULT:
        options = dict(ALL_ADVICE)
    log, graph_def = oplog_and_graph_def(graph, None, run_meta, add_trace=True)
    stats = Stats(graph_def)
    if run_meta is not None and getattr(run_meta, "step_stats", None) is not None:
        stats.add_run_meta(0, run_meta)
    stats.add_op_log(log)
    return _advise(stats, options)


class Profiler:
    """A multi-step profiler (tf.compat.v1.profiler.Profiler): build it on a graph, `add_step` the
    RunMetadata of traced runs, then `profile_name_scope` / `profile_operations` / `advise`. Unlike
    TF, several Profilers may live at once (TF allows one per process)."""

    def __init__(self, graph=None, op_log=None):
        from actorflow.profiler.tfprof import Stats
        self._graph = _graph(graph)
        log, graph_def = oplog_and_graph_def(self._graph, op_log=op_log)
        self._stats = Stats(graph_def, log)
        self._coverage = 0.0

    def add_step(self, step, run_meta):
        """Adds the statistics of one traced run (`run_meta`) as step `step`."""
        log, graph_def = oplog_and_graph_def(self._graph, run_meta=run_meta)
        self._stats.add_graph(graph_def)
        self._stats.add_run_meta(int(step), run_meta)
        self._stats.add_op_log(log)
        self._coverage = self._stats.coverage()

    def profile_python(self, options):
        """The 'code' view (Python call stacks): actorflow records none, so this reports as TF does
        without traces."""
        return self._stats.show("code", _options(options))

    def profile_operations(self, options):
        """The 'op' view: statistics per op type; a MultiGraphNodeProto."""
        return self._stats.show("op", _options(options))

    def profile_name_scope(self, options):
        """The 'scope' view: statistics per name scope; a GraphNodeProto."""
        return self._stats.show("scope", _options(options))

    def profile_graph(self, options):
        """The 'graph' view: statistics along the data flow (a node's children are its inputs); a
        GraphNodeProto."""
        return self._stats.show("graph", _options(options))

    def advise(self, options):
        """Runs the advisor's checkers named in `options` (a dict like ALL_ADVICE; None: none)."""
        from actorflow.profiler.advisor import advise as _advise
        return _advise(self._stats, options)

    def serialize_to_string(self):
        """The profile as a serialized ProfileProto (for the tfprof command-line tool)."""
        return self._stats.to_profile_proto().SerializeToString()

    def _write_profile(self, filename):
        with open(filename, "wb") as f:
            f.write(self.serialize_to_string())


def _options(options):
    from actorflow.profiler.tfprof import Options
    return Options.from_dict(options)
