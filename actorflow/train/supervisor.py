"""tf.compat.v1.train.Supervisor and SessionManager: the session bootstrapping of TF-1.x training
programs written before MonitoredTrainingSession.

SessionManager restores a model from the newest checkpoint of a directory, or initializes it (init
op, init function), runs the local init op, and checks readiness (`report_uninitialized_variables`);
a non-chief waits until the chief has made the model ready. Supervisor adds the standard services
on the chief: a checkpoint every `save_model_secs`, summaries every `save_summaries_secs`, a
global_step/sec summary, the graph written to its summary writer; it starts the queue runners and
owns the Coordinator whose stop request `should_stop()` reports. `managed_session()` does all of
this and, at the end, stops the services and closes the session; an OutOfRangeError raised in its
body ends training normally, any other exception is re-raised after the cleanup, as in TF.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading

from actorflow import clock, errors
from actorflow.actors.session import Session
from actorflow.graph.graph import GraphKeys, get_default_graph
from actorflow.train.coordinator import Coordinator, LooperThread

__all__ = ["Supervisor", "SessionManager"]

log = logging.getLogger(__name__)


class SessionManager:
    """Creates sessions whose model is ready: restored from a checkpoint or initialized
    (tf.compat.v1.train.SessionManager)."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None, graph=None,
                 recovery_wait_secs=30, local_init_run_options=None, local_init_feed_dict=None):
        self._graph = graph or get_default_graph()
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._recovery_wait_secs = recovery_wait_secs

    def _session(self, master, config):
        return Session(master, graph=self._graph, config=config)

    def _not_ready(self, sess, op) -> str | None:
        """None when `op` (a report of uninitialized variables) reports nothing, else a message."""
        if op is None:
            return None
        try:
            names = sess.run(op)
        except errors.FailedPreconditionError as e:
            return e.message
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in getattr(names, "tolist", lambda: names)()]
        return f"Variables not initialized: {', '.join(names)}" if names else None

    def _local_init(self, sess) -> str | None:
        if self._local_init_op is None:
            return None
        msg = self._not_ready(sess, self._ready_for_local_init_op)
        if msg is not None:
            return msg
        sess.run(self._local_init_op, self._local_init_feed_dict)
        return None

    def _restore(self, sess, saver, checkpoint_dir, checkpoint_filename_with_path, wait_for_checkpoint,
                 max_wait_secs) -> bool:
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return True
        if not saver or not checkpoint_dir:
            return False
        from actorflow.train.saver import latest_checkpoint
        deadline = clock.monotonic() + max_wait_secs
        path = latest_checkpoint(checkpoint_dir)
        while path is None and wait_for_checkpoint and clock.monotonic() < deadline:
            clock.sleep(min(self._recovery_wait_secs, max(0.0, deadline - clock.monotonic())))
            path = latest_checkpoint(checkpoint_dir)
        if path is None:
            return False
        saver.restore(sess, path)
        return True

    def recover_session(self, master, saver=None, checkpoint_dir=None, checkpoint_filename_with_path=None,
                        wait_for_checkpoint=False, max_wait_secs=7200, config=None):
        """(session, whether the model was restored and is ready)."""
        sess = self._session(master, config)
        try:
            if not self._restore(sess, saver, checkpoint_dir, checkpoint_filename_with_path, wait_for_checkpoint,
                                 max_wait_secs):
                return sess, False
            msg = self._local_init(sess)
            if msg is None:
                msg = self._not_ready(sess, self._ready_op)
            if msg is not None:
                log.info("restoring the model did not make it ready: %s", msg)
                return sess, False
            return sess, True
        except BaseException:
            sess.close()
            raise

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False, max_wait_secs=7200,
                        config=None, init_feed_dict=None, init_fn=None):
        """A session whose model is ready: restored, else initialized with `init_op` / `init_fn`."""
        sess = self._session(master, config)
        try:
            restored = self._restore(sess, saver, checkpoint_dir, checkpoint_filename_with_path,
                                     wait_for_checkpoint, max_wait_secs)
            if not restored:
                if init_op is None and not init_fn and self._local_init_op is None:
                    raise RuntimeError("Model is not initialized and no init_op or init_fn or local_init_op was "
                                       "given")
                if init_op is not None:
                    sess.run(init_op, init_feed_dict)
                if init_fn:
                    init_fn(sess)
            msg = self._local_init(sess)
            if msg is not None:
                raise RuntimeError(f"Init operations did not make model ready for local_init.  Init op: "
                                   f"{_name(init_op)}, init fn: {init_fn}, error: {msg}")
            msg = self._not_ready(sess, self._ready_op)
            if msg is not None:
                raise RuntimeError(f"Init operations did not make model ready.  Init op: {_name(init_op)}, init fn: "
                                   f"{init_fn}, local_init_op: {_name(self._local_init_op)}, error: {msg}")
            return sess
        except BaseException:
            sess.close()
            raise

    def wait_for_session(self, master, config=None, max_wait_secs=float("inf")):
        """A session once another task (the chief) has made the model ready; DeadlineExceededError
        after `max_wait_secs`."""
        deadline = clock.monotonic() + max_wait_secs
        while True:
            sess = self._session(master, config)
            try:
                msg = self._local_init(sess)
                if msg is None:
                    msg = self._not_ready(sess, self._ready_op)
            except BaseException:
                sess.close()
                raise
            if msg is None:
                return sess
            sess.close()
            if clock.monotonic() + self._recovery_wait_secs > deadline:
                raise errors.DeadlineExceededError(None, None, f"Session was not ready after waiting "
                                                               f"{max_wait_secs} secs: {msg}")
            log.info("waiting for the model to be ready: %s", msg)
            clock.sleep(self._recovery_wait_secs)


def _name(op):
    return getattr(op, "name", op)


class Supervisor:
    """Training supervision for TF-1.x programs (tf.compat.v1.train.Supervisor)."""

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT, is_chief=True,
                 init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, logdir=None,
                 summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs=120,
                 save_model_secs=600, recovery_wait_secs=30, stop_grace_secs=120, checkpoint_basename="model.ckpt",
                 session_manager=None, summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        from actorflow.graph.ops.constant import group
        from actorflow.graph.ops.misc_ops import report_uninitialized_variables
        from actorflow.graph.ops.summary_ops import merge_all
        from actorflow.graph.variables import (
            global_variables,
            global_variables_initializer,
            local_variables_initializer,
        )
        from actorflow.train.training_util import get_global_step
        self._graph = graph or get_default_graph()
        self._is_chief = is_chief
        self._logdir = logdir
        self._coord = Coordinator()
        self._started_threads: list = []
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._init_feed_dict = init_feed_dict
        self._save_summaries_secs = save_summaries_secs
        self._save_model_secs = save_model_secs
        g = self._graph
        with g.as_default():
            if ready_op is Supervisor.USE_DEFAULT:
                ready_op = (g.get_collection(GraphKeys.READY_OP) or [None])[0] or report_uninitialized_variables()
            if ready_for_local_init_op is Supervisor.USE_DEFAULT:
                ready_for_local_init_op = None
            if init_op is Supervisor.USE_DEFAULT:
                init_op = (g.get_collection(GraphKeys.INIT_OP) or [None])[0] or global_variables_initializer()
            if local_init_op is Supervisor.USE_DEFAULT:
                local_init_op = (g.get_collection(GraphKeys.LOCAL_INIT_OP) or [None])[0]
                if local_init_op is None:
                    from actorflow.graph.graph import get_collection
                    tables = get_collection("table_initializer")
                    local_init_op = group(local_variables_initializer(), *tables)
            if summary_op is Supervisor.USE_DEFAULT:
                summary_op = (g.get_collection(GraphKeys.SUMMARY_OP) or [None])[0] or merge_all()
            if saver is Supervisor.USE_DEFAULT:
                saver = (g.get_collection(GraphKeys.SAVERS) or [None])[0]
                if saver is None and global_variables():
                    from actorflow.train.saver import Saver
                    saver = Saver()
                    g.add_to_collection(GraphKeys.SAVERS, saver)
            if global_step is Supervisor.USE_DEFAULT:
                global_step = get_global_step()
            if summary_writer is Supervisor.USE_DEFAULT:
                summary_writer = None
                if is_chief and logdir:
                    from actorflow.summary.writer import FileWriter
                    summary_writer = FileWriter(logdir)
        self._ready_op, self._init_op, self._local_init_op = ready_op, init_op, local_init_op
        self._summary_op, self._saver, self._global_step = summary_op, saver, global_step
        self._summary_writer = summary_writer
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        self._session_manager = session_manager or SessionManager(
            local_init_op=local_init_op, ready_op=ready_op, ready_for_local_init_op=ready_for_local_init_op,
            graph=g, recovery_wait_secs=recovery_wait_secs)
        g.finalize()

    # -- what it holds ---------------------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # -- sessions --------------------------------------------------------------------------------------
    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False, max_wait_secs=7200,
                                    start_standard_services=True):
        """The chief's session (restored from logdir's newest checkpoint, else initialized), with the
        standard services started; a non-chief's once the chief has made the model ready."""
        self._coord.clear_stop()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            if start_standard_services:
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config, max_wait_secs=max_wait_secs)
        if start_standard_services:
            self.start_queue_runners(sess)
        return sess

    def start_standard_services(self, sess) -> list:
        """The chief's checkpoint, summary and step-rate threads (each where it has what it needs)."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because only chief "
                               "supervisors can write events.")
        threads = []
        if self._summary_writer is not None:
            self._summary_writer.add_graph(self._graph)
            if self._save_summaries_secs and self._summary_op is not None:
                threads.append(_SummaryThread(self, sess))
            if self._save_summaries_secs and self._global_step is not None:
                threads.append(_StepCounterThread(self, sess))
        if self._saver is not None and self._save_path and self._save_model_secs:
            threads.append(_CheckpointThread(self, sess))
        for t in threads:
            t.start()
        self._started_threads.extend(threads)
        return threads

    def start_queue_runners(self, sess, queue_runners=None) -> list:
        from actorflow.train.queue_runner import start_queue_runners
        if queue_runners is None:
            threads = start_queue_runners(sess, coord=self._coord)
        else:
            threads = []
            for qr in queue_runners:
                threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True, start=True))
        self._started_threads.extend(threads)
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Runs `target` every `timer_interval_secs` in a thread until the supervisor stops."""
        t = LooperThread(self._coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        t.start()
        self._started_threads.append(t)
        return t

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False) -> None:
        """Stops the services and queue runners (re-raising an exception one of them reported)."""
        self._coord.request_stop()
        try:
            self._coord.join(threads if threads is not None else self._started_threads,
                             stop_grace_period_secs=self._stop_grace_secs, ignore_live_threads=ignore_live_threads)
        finally:
            self._started_threads = []
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()

    def request_stop(self, ex=None) -> None:
        self._coord.request_stop(ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self):
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    def summary_computed(self, sess, summary, global_step=None) -> None:
        """Writes a summary the caller computed (at the current global step by default)."""
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = int(sess.run(self._global_step))
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True, close_summary_writer=True):
        """A session to train in: prepared (restored or initialized), services and queue runners
        running; stopped and closed at the end."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(master=master, config=config,
                                                    start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - recorded; OutOfRangeError is a clean stop, others re-raised
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    sess.close()


class _ServiceThread(LooperThread):
    def __init__(self, sv, sess, interval):
        super().__init__(sv.coord, interval)
        self._sv, self._sess = sv, sess


class _CheckpointThread(_ServiceThread):
    def __init__(self, sv, sess):
        super().__init__(sv, sess, sv.save_model_secs)

    def run_loop(self):
        self._sv.saver.save(self._sess, self._sv.save_path, global_step=self._sv.global_step)


class _SummaryThread(_ServiceThread):
    def __init__(self, sv, sess):
        super().__init__(sv, sess, sv.save_summaries_secs)

    def run_loop(self):
        sv = self._sv
        if sv.global_step is not None:
            summary, step = self._sess.run([sv.summary_op, sv.global_step])
        else:
            summary, step = self._sess.run(sv.summary_op), None
        if summary is not None:
            sv.summary_writer.add_summary(summary, None if step is None else int(step))


class _StepCounterThread(_ServiceThread):
    def __init__(self, sv, sess):
        super().__init__(sv, sess, sv.save_summaries_secs)
        self._last = None
        self._lock = threading.Lock()

    def start_loop(self):
        self._last = (int(self._sess.run(self._sv.global_step)), clock.monotonic())

    def run_loop(self):
        from actorflow import summary as _summary
        step, now = int(self._sess.run(self._sv.global_step)), clock.monotonic()
        last_step, last_time = self._last
        self._last = (step, now)
        if now > last_time:
            rate = (step - last_step) / (now - last_time)
            s = _summary.Summary(value=[_summary.Summary.Value(tag="global_step/sec", simple_value=rate)])
            self._sv.summary_writer.add_summary(s, step)
