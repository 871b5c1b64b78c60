"""af.contrib.summary: TF 1.x's op-based summaries (tf.contrib.summary, summary_ops_v2 in graph mode),
the API TPUEstimator host_calls and TF 1.13-1.15 programs write TensorBoard files with.

A writer (`create_file_writer(logdir)`) made the default with `writer.as_default()`, and a recording
condition (`always_record_summaries()`, `never_record_summaries()`,
`record_summaries_every_n_global_steps(n)`), turn each `scalar`/`histogram`/`image`/`audio`/`generic`
call into an op that writes its summary to the writer's event file when it runs, at `step` (default:
the global step), under the recording condition. Without a default writer, or under
`never_record_summaries()`, a summary call gives a no-op, as in TF. The ops are kept in a collection
for `all_summary_ops()`; `summary_writer_initializer_op()` gives the writers' init ops and
`initialize(session=...)` runs them. `flush()` and `writer.close()` are ops too.

The event file is TensorBoard's own format, written by af.summary.FileWriter from the session's
process when the write op runs (a py_func). Differs from TF: `create_db_writer` (SQLite) is not
supported.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import (
    Tensor,
    add_to_collection,
    convert_to_tensor,
    get_collection,
    get_default_graph,
    name_scope,
)
from actorflow.graph.ops import summary_ops
from actorflow.graph.ops.constant import constant, no_op
from actorflow.graph.ops.script_ops import py_func
from actorflow.summary.writer import FileWriter
from actorflow.train.training_util import get_global_step

__all__ = ["SummaryWriter", "create_file_writer", "create_summary_file_writer", "always_record_summaries",
           "never_record_summaries", "record_summaries_every_n_global_steps", "should_record_summaries",
           "scalar", "histogram", "image", "audio", "generic", "all_summary_ops", "summary_writer_initializer_op",
           "initialize", "flush", "eval_dir", "create_db_writer"]

_SUMMARY_COLLECTION = "_SUMMARY_V2"
_WRITER_INIT_COLLECTION = "_SUMMARY_WRITER_INIT_OP"
_WRITER_FLUSH_COLLECTION = "_SUMMARY_WRITER_FLUSH_OP"     # run by TPUEstimator's host_call hook at its end
_WRITERS = "_SUMMARY_WRITERS"
_state = threading.local()


def _stack(name):
    if not hasattr(_state, name):
        setattr(_state, name, [])
    return getattr(_state, name)


class SummaryWriter:
    """A summary file writer (tf.contrib.summary.SummaryWriter): its event file opens when `init()`
    runs, or at the first summary it writes."""

    def __init__(self, logdir, max_queue=10, flush_millis=None, filename_suffix=None, name=None):
        self._logdir = str(logdir)
        self._max_queue = 10 if max_queue is None else int(max_queue)
        self._flush_secs = 120 if flush_millis is None else max(float(flush_millis) / 1000.0, 0.001)
        self._suffix = filename_suffix or ".v2"
        self._name = name or "summary_writer"
        self._file = None
        self._lock = threading.Lock()
        with name_scope(self._name):
            self._init_op = py_func(self._init, [], [], name="init")
            self._flush_op = py_func(self._flush, [], [], name="flush")
        add_to_collection(_WRITER_INIT_COLLECTION, self._init_op)
        add_to_collection(_WRITER_FLUSH_COLLECTION, self._flush_op)
        add_to_collection(_WRITERS, self)

    @property
    def logdir(self):
        return self._logdir

    def _open(self):
        with self._lock:
            if self._file is None:
                self._file = FileWriter(self._logdir, max_queue=self._max_queue, flush_secs=self._flush_secs,
                                        filename_suffix=self._suffix)
            return self._file

    def _init(self):
        self._open()

    def _write(self, serialized, step):
        self._open().add_summary(serialized, int(step))
        return np.bool_(True)

    def _flush(self):
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def _close(self):
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def init(self):
        """The op that opens the event file."""
        return self._init_op

    def flush(self):
        """An op that flushes the queued events to the file."""
        return self._flush_op

    def close(self):
        """An op that flushes and closes the file (a later summary opens a new one)."""
        return py_func(self._close, [], [], name=f"{self._name}_close")

    @contextlib.contextmanager
    def as_default(self):
        """Summaries built inside the block write here."""
        stack = _stack("writers")
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    def set_as_default(self):
        """Makes this the default writer for the rest of the thread."""
        _stack("writers").append(self)


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None, name=None):
    """A SummaryWriter for an event file in `logdir` (tf.contrib.summary.create_file_writer)."""
    if logdir is None:
        raise ValueError("create_file_writer: logdir is None (TF's no-op writer is not supported)")
    if isinstance(logdir, Tensor):
        raise TypeError("create_file_writer: logdir must be a Python string here, not a tensor")
    return SummaryWriter(logdir, max_queue, flush_millis, filename_suffix, name)


create_summary_file_writer = create_file_writer


def create_db_writer(*args, **kwargs):
    raise NotImplementedError("tf.contrib.summary.create_db_writer (SQLite summaries) is not supported by "
                              "actorflow; use create_file_writer")


@contextlib.contextmanager
def _recording(condition):
    stack = _stack("record")
    stack.append(condition)
    try:
        yield
    finally:
        stack.pop()


def always_record_summaries():
    """Summaries built inside the block write every time they run."""
    return _recording(True)


def never_record_summaries():
    """Summaries built inside the block are no-ops."""
    return _recording(False)


def record_summaries_every_n_global_steps(n, global_step=None):
    """Summaries built inside the block write when the global step is a multiple of `n`."""
    if global_step is None:
        global_step = get_global_step()
        if global_step is None:
            raise ValueError("record_summaries_every_n_global_steps: the graph has no global step")
    from actorflow.graph.ops import math_ops
    with name_scope("record_summaries_every_n_global_steps"):
        step = convert_to_tensor(global_step)
        cond = math_ops.equal(math_ops.floormod(step, math_ops.cast(n, step.dtype)), 0)
    return _recording(cond)


def should_record_summaries():
    """The recording condition in effect: a Python bool or a boolean tensor (False outside any block)."""
    stack = _stack("record")
    return stack[-1] if stack else False


def _default_writer():
    stack = _stack("writers")
    return stack[-1] if stack else None


def _write(build, name, family, step):
    writer = _default_writer()
    record = should_record_summaries()
    if writer is None or record is False:
        return no_op()
    from actorflow.graph.control_flow import cond
    with name_scope(name if family is None else f"{family}/{name}") as scope:
        tag = scope.rstrip("/")
        if step is None:
            step = get_global_step()
            if step is None:
                raise ValueError(f"summary '{tag}': no step given and the graph has no global step")
        step = convert_to_tensor(step)

        def write():
            serialized = build(tag)
            done = py_func(writer._write, [serialized, step], dtypes.bool_, name="write")
            done.set_shape([])
            return done
        if record is True:
            op = write()
        else:
            op = cond(record, write, lambda: constant(False), name="record")
    add_to_collection(_SUMMARY_COLLECTION, op)
    return op


def scalar(name, tensor, family=None, step=None):
    """Writes a scalar summary when run (tf.contrib.summary.scalar)."""
    return _write(lambda tag: summary_ops.ScalarSummary(_value(tensor), tag=tag, name="scalar"), name, family, step)


def histogram(name, tensor, family=None, step=None):
    """Writes a histogram summary when run (tf.contrib.summary.histogram)."""
    return _write(lambda tag: summary_ops.HistogramSummary(_value(tensor), tag=tag, name="histogram"),
                  name, family, step)


def image(name, tensor, bad_color=None, max_images=3, family=None, step=None):
    """Writes an image summary when run (tf.contrib.summary.image)."""
    return _write(lambda tag: summary_ops.ImageSummary(_value(tensor), tag=tag, max_images=int(max_images),
                                                       name="image"), name, family, step)


def audio(name, tensor, sample_rate, max_outputs, family=None, step=None):
    """Writes an audio summary when run (tf.contrib.summary.audio)."""
    def build(tag):
        rate = sample_rate if isinstance(sample_rate, Tensor) else convert_to_tensor(sample_rate, dtypes.float32)
        return summary_ops.AudioSummaryV2(_value(tensor), rate, tag=tag, max_outputs=int(max_outputs), name="audio")
    return _write(build, name, family, step)


def generic(name, tensor, metadata=None, family=None, step=None):
    """Writes a tensor summary when run (tf.contrib.summary.generic)."""
    meta = summary_ops._metadata_bytes(metadata)
    return _write(lambda tag: summary_ops.TensorSummaryV2(_value(tensor), tag=tag, serialized_summary_metadata=meta,
                                                          name="generic"), name, family, step)


def _value(x):
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def all_summary_ops():
    """The summary ops built in the default graph (tf.contrib.summary.all_summary_ops)."""
    return list(get_collection(_SUMMARY_COLLECTION))


def summary_writer_initializer_op():
    """The init ops of the writers created in the default graph."""
    return list(get_collection(_WRITER_INIT_COLLECTION))


def initialize(graph=None, session=None):
    """Runs the writers' init ops in `session` (the default session when None)
    (tf.contrib.summary.initialize). `graph`, when given, is written to each writer's event file."""
    from actorflow.graph.graph import get_default_session
    sess = session or get_default_session()
    if sess is None:
        raise ValueError("initialize: no session given and no default session")
    ops = summary_writer_initializer_op()
    if ops:
        sess.run(ops)
    if graph is not None:
        g = graph if hasattr(graph, "get_operations") else get_default_graph()
        for w in get_collection(_WRITERS):
            w._open().add_graph(g)


def flush(writer=None, name=None):
    """An op that flushes `writer` (the default writer when None) (tf.contrib.summary.flush)."""
    writer = writer or _default_writer()
    if writer is None:
        return no_op()
    return writer.flush()


def eval_dir(model_dir, name=None):
    """The directory an evaluation's summaries go to: model_dir/eval[_name]."""
    import os
    return os.path.join(model_dir, "eval" if not name else "eval_" + name)
