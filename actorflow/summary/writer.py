"""FileWriter and FileWriterCache (tf.compat.v1.summary): TensorBoard event files.

A FileWriter owns one `events.out.tfevents.*` file in its log directory, written by TensorBoard's
own EventFileWriter (TFRecord framing with masked CRC32C, `Event` protobufs, a background thread
that writes a bounded queue of `max_queue` events and flushes every `flush_secs` seconds).
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np

from actorflow import errors
from actorflow.graph.graph import Graph, get_default_graph
from actorflow.protos import require

__all__ = ["FileWriter", "FileWriterCache"]

log = logging.getLogger(__name__)


def _event_pb2():
    return require("tensorboard.compat.proto.event_pb2")


def _summary_pb2():
    return require("tensorboard.compat.proto.summary_pb2")


class FileWriter:
    """Writes Summary protos, graphs, run metadata and session logs to an event file in `logdir`
    (tf.compat.v1.summary.FileWriter).

    The file is created at once (with the directory, when missing), named
    `events.out.tfevents.<time>.<host>.<pid>.<n><filename_suffix>`; its first event holds the file
    version. `graph` (an af.Graph, e.g. `sess.graph`) is written as a GraphDef that TensorBoard's
    graph tab shows. Events are queued (at most `max_queue`) and written by a background thread,
    flushed every `flush_secs` seconds, on `flush()` and on `close()`. As in TF, events added after
    `close()` are dropped until `reopen()`. Differs from TF: `session=` (TF's graph-mode summary
    writer resource) is not supported, and no MetaGraphDef is written.
    """

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None, filename_suffix=None,
                 session=None):
        if session is not None:
            raise NotImplementedError("FileWriter(session=...) (a summary writer resource) is not supported by "
                                      "actorflow; pass only logdir")
        logdir = str(logdir)
        if not logdir:
            raise ValueError("FileWriter needs a log directory (logdir is empty)")
        self._logdir = logdir
        self._max_queue = int(max_queue)
        self._flush_secs = flush_secs
        self._suffix = filename_suffix or ""
        self._lock = threading.RLock()
        self._seen_summary_tags: set[str] = set()
        self._run_metadata_tags: set[str] = set()
        self._closed = True
        self._writer = None
        self._open()
        if graph is not None or graph_def is not None:
            self.add_graph(graph=graph, graph_def=graph_def)

    def _open(self):
        efw = require("tensorboard.summary.writer.event_file_writer")
        try:
            self._writer = efw.EventFileWriter(self._logdir, max_queue_size=self._max_queue,
                                               flush_secs=self._flush_secs, filename_suffix=self._suffix)
        except OSError as e:
            from actorflow.gfile import os_error
            raise os_error(e, f"Cannot create an event file in '{self._logdir}'") from e
        self._closed = False
        log.debug("writing events to %s", self._writer._file_name)

    # -- events --------------------------------------------------------------------------------------------
    def add_event(self, event):
        """Adds an `Event` protobuf (af.Event) to the file, as it is."""
        if not hasattr(event, "SerializeToString") or type(event).__name__ != "Event":
            raise TypeError(f"add_event takes an af.Event protobuf, got {type(event).__name__}")
        with self._lock:
            if self._closed:
                log.debug("FileWriter for %s is closed; event dropped", self._logdir)
                return
            self._writer.add_event(event)

    def _add_event(self, event, step):
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    def add_summary(self, summary, global_step=None):
        """Adds a summary at `global_step` (tf.compat.v1.summary.FileWriter.add_summary).

        `summary` is what a summary op fetches (serialized `Summary` bytes, or a 0-d string array of
        them) or an `af.Summary` protobuf built by hand. As in TF, a value's plugin metadata is kept
        only the first time its tag is written, to save space.
        """
        pb = _summary_pb2()
        if isinstance(summary, np.ndarray) and summary.dtype == object and summary.size == 1:
            summary = summary.reshape(()).item()
        if isinstance(summary, (bytes, bytearray, memoryview)):
            from google.protobuf.message import DecodeError
            parsed = pb.Summary()
            try:
                parsed.ParseFromString(bytes(summary))
            except DecodeError as e:
                raise errors.InvalidArgumentError(None, None, f"add_summary: the {len(summary)} bytes given are not "
                                                              f"a serialized Summary protobuf: {e}") from None
            summary = parsed
        elif isinstance(summary, pb.Summary):
            summary = _copy(summary)
        else:
            raise TypeError(f"add_summary takes a Summary protobuf or its serialized bytes (a fetched summary op), "
                            f"got {type(summary).__name__}")
        with self._lock:
            for value in summary.value:
                if not value.HasField("metadata"):
                    continue
                if value.tag in self._seen_summary_tags:
                    value.ClearField("metadata")
                    continue
                self._seen_summary_tags.add(value.tag)
        self._add_event(_event_pb2().Event(summary=summary), global_step)

    def add_session_log(self, session_log, global_step=None):
        """Adds a `SessionLog` (af.SessionLog: START, STOP, CHECKPOINT) at `global_step`."""
        ev = _event_pb2()
        if not isinstance(session_log, ev.SessionLog):
            raise TypeError(f"add_session_log takes an af.SessionLog protobuf, got {type(session_log).__name__}")
        self._add_event(ev.Event(session_log=session_log), global_step)

    def add_graph(self, graph, global_step=None, graph_def=None):
        """Writes `graph` (an af.Graph, such as `sess.graph`) as a GraphDef for TensorBoard's graph tab;
        a GraphDef protobuf is accepted too (deprecated in TF, as here)."""
        graph_pb2 = require("tensorboard.compat.proto.graph_pb2")
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
        if isinstance(graph, Graph) or isinstance(graph_def, Graph):
            if not isinstance(graph, Graph):
                log.warning("When passing a `Graph` object, please use the `graph` named argument instead of "
                            "`graph_def`.")
                graph = graph_def
            from actorflow.summary.graph_def import as_graph_def
            true_graph_def = as_graph_def(graph, add_shapes=True)
        elif isinstance(graph, graph_pb2.GraphDef) or isinstance(graph_def, graph_pb2.GraphDef):
            log.warning("Passing a `GraphDef` to the SummaryWriter is deprecated. Pass a `Graph` object instead, "
                        "such as `sess.graph`.")
            true_graph_def = graph if isinstance(graph, graph_pb2.GraphDef) else graph_def
        else:
            raise TypeError("The passed graph must be an instance of `Graph` or the deprecated `GraphDef`")
        self._add_event(_event_pb2().Event(graph_def=true_graph_def.SerializeToString()), global_step)

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        """Adds the metadata of one `Session.run` under `tag` (TensorBoard's graph tab lists it by tag).

        `run_metadata` is an af.RunMetadata or a RunMetadata protobuf; a tag used twice is a
        ValueError, as in TF. The step stats of a traced run (`RunOptions(trace_level=FULL_TRACE)`)
        go in the record, so TensorBoard's graph tab shows the time and output sizes per node.
        """
        config_pb2 = require("tensorboard.compat.proto.config_pb2")
        with self._lock:
            if tag in self._run_metadata_tags:
                raise ValueError("The provided tag was already used for this event type")
            self._run_metadata_tags.add(tag)
        if isinstance(run_metadata, config_pb2.RunMetadata):
            data = run_metadata.SerializeToString()
        elif hasattr(run_metadata, "step_stats"):
            proto = config_pb2.RunMetadata()
            stats = run_metadata.step_stats
            if stats is not None and hasattr(stats, "SerializeToString"):
                proto.step_stats.CopyFrom(stats)
            data = proto.SerializeToString()
        else:
            raise TypeError(f"add_run_metadata takes an af.RunMetadata, got {type(run_metadata).__name__}")
        ev = _event_pb2()
        self._add_event(ev.Event(tagged_run_metadata=ev.TaggedRunMetadata(tag=str(tag), run_metadata=data)),
                        global_step)

    # -- file life -----------------------------------------------------------------------------------------
    def get_logdir(self) -> str:
        """The directory this writer writes its event file to."""
        return self._logdir

    def flush(self):
        """Writes every queued event to disk (blocks until they are written)."""
        with self._lock:
            if not self._closed:
                self._writer.flush()

    def close(self):
        """Flushes and closes the event file; later events are dropped until `reopen()`."""
        with self._lock:
            if not self._closed:
                self._writer.close()
                self._closed = True

    def reopen(self):
        """Opens a new event file in the same directory after `close()`; a no-op while open."""
        with self._lock:
            if self._closed:
                self._open()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def __repr__(self):
        return f"<af.summary.FileWriter logdir={self._logdir!r}{' closed' if self._closed else ''}>"


def _copy(msg):
    out = type(msg)()
    out.CopyFrom(msg)
    return out


class FileWriterCache:
    """One FileWriter per log directory, shared by every user of the directory
    (tf.compat.v1.summary.FileWriterCache; the hooks of a monitored session use it)."""

    _cache: dict = {}
    _lock = threading.RLock()

    @staticmethod
    def get(logdir):
        """The cached FileWriter of `logdir`, created (with the default graph) on first use."""
        with FileWriterCache._lock:
            key = str(logdir)
            if key not in FileWriterCache._cache:
                FileWriterCache._cache[key] = FileWriter(key, graph=get_default_graph())
            return FileWriterCache._cache[key]

    @staticmethod
    def clear():
        """Closes every cached writer and empties the cache."""
        with FileWriterCache._lock:
            for w in FileWriterCache._cache.values():
                w.close()
            FileWriterCache._cache = {}
