"""Smaller tf.compat.v1.train utilities: checkpoints_iterator, get_checkpoint_mtimes,
remove_checkpoint, summary_iterator, basic_train_loop, match_filenames_once, and the hooks
FinalOpsHook, FeedFnHook and GlobalStepWaiterHook."""
from __future__ import annotations

import glob
import logging
import os

from actorflow import clock, errors
from actorflow.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = ["checkpoints_iterator", "get_checkpoint_mtimes", "remove_checkpoint", "summary_iterator",
           "basic_train_loop", "match_filenames_once", "FinalOpsHook", "FeedFnHook", "GlobalStepWaiterHook"]

log = logging.getLogger(__name__)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None, timeout_fn=None):
    """Yields each new latest checkpoint of `checkpoint_dir` as it appears; stops after `timeout`
    seconds without one (unless `timeout_fn` says to go on) (tf.train.checkpoints_iterator)."""
    from actorflow.train.saver import latest_checkpoint
    last = None
    while True:
        deadline = None if timeout is None else clock.monotonic() + timeout
        path = None
        while True:
            path = latest_checkpoint(checkpoint_dir)
            if path is not None and path != last:
                break
            if deadline is not None and clock.monotonic() >= deadline:
                path = None
                break
            clock.sleep(1.0 if deadline is None else min(1.0, max(0.0, deadline - clock.monotonic())))
        if path is None:
            if timeout_fn is not None and not timeout_fn():
                continue
            return
        start = clock.monotonic()
        last = path
        yield path
        wait = min_interval_secs - (clock.monotonic() - start)
        if wait > 0:
            clock.sleep(wait)


def get_checkpoint_mtimes(checkpoint_prefixes) -> list:
    """The modification times of checkpoints, by their prefixes (tf.train.get_checkpoint_mtimes);
    a prefix with no checkpoint is skipped."""
    out = []
    for prefix in checkpoint_prefixes:
        index = prefix + ".index"
        if os.path.exists(index):
            out.append(os.path.getmtime(index))
    return out


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=None, meta_graph_suffix="meta") -> None:
    """Deletes the files of a checkpoint (tf.train.remove_checkpoint)."""
    from actorflow.train.saver import _delete_checkpoint
    _delete_checkpoint(checkpoint_prefix)


def summary_iterator(path):
    """The Event protobufs of a TensorBoard event file (tf.train.summary_iterator)."""
    from actorflow.protos import require
    from actorflow.tfrecord import RecordReader
    event_pb2 = require("tensorboard.compat.proto.event_pb2")
    for record in RecordReader(str(path)):
        yield event_pb2.Event.FromString(record)


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Runs `train_step_fn(session, *args, **kwargs)` in a supervisor's managed session until it
    should stop (tf.train.basic_train_loop)."""
    if args is None:
        args = []
    if kwargs is None:
        kwargs = {}
    should_retry = True
    while should_retry:
        try:
            should_retry = False
            with supervisor.managed_session(master) as sess:
                while not supervisor.should_stop():
                    train_step_fn(sess, *args, **kwargs)
        except errors.AbortedError:
            should_retry = True


def match_filenames_once(pattern, name=None):
    """A local variable holding the files matching `pattern` (a glob, or a list of them), set when
    local variables are initialized (tf.train.match_filenames_once)."""
    import numpy as np

    from actorflow.graph import dtypes
    from actorflow.graph.graph import GraphKeys
    from actorflow.graph.ops import script_ops
    from actorflow.graph.variables import Variable
    patterns = [pattern] if isinstance(pattern, (str, bytes)) else list(pattern)

    def matching():
        files = []
        for p in patterns:
            p = p.decode() if isinstance(p, bytes) else str(p)
            files += sorted(glob.glob(p))
        return np.array([f.encode() for f in files], dtype=object).reshape(-1)
    initial = script_ops.py_func(matching, [], dtypes.string, stateful=True, name="matching_filenames")
    return Variable(initial, trainable=False, validate_shape=False, collections=[GraphKeys.LOCAL_VARIABLES],
                    name=name or "matching_filenames")


class FinalOpsHook(SessionRunHook):
    """Runs `final_ops` when the session ends; their values are `final_ops_values`
    (tf.train.FinalOpsHook)."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._feed = final_ops_feed_dict
        self._values = None

    @property
    def final_ops_values(self):
        return self._values

    def end(self, session):
        if self._final_ops is not None:
            self._values = session.run(self._final_ops, feed_dict=self._feed)


class FeedFnHook(SessionRunHook):
    """Adds `feed_fn()`'s feed dict to every run (tf.train.FeedFnHook)."""

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class GlobalStepWaiterHook(SessionRunHook):
    """Delays the first run until the global step reaches `wait_until_step` (another worker's
    progress) (tf.train.GlobalStepWaiterHook)."""

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step
        self._waited = False

    def begin(self):
        from actorflow.train.training_util import get_global_step
        self._global_step = get_global_step()
        if self._global_step is None:
            raise RuntimeError("Global step should be created to use GlobalStepWaiterHook.")

    def before_run(self, run_context):
        if self._waited or self._wait_until_step <= 0:
            self._waited = True
            return None
        while not run_context.session.should_stop() if hasattr(run_context.session, "should_stop") else True:
            step = int(run_context.session.run(self._global_step))
            if step >= self._wait_until_step:
                break
            clock.sleep(0.5)
        self._waited = True
        return None
