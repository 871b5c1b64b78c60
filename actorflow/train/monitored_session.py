"""MonitoredTrainingSession: initialize or restore, run hooks, save, and recover from failures.

A MonitoredSession re-creates its session when a run fails with UnavailableError, AbortedError or
(after a parameter server restarted empty) FailedPreconditionError, then retries the run. Session
creation is where recovery happens: the chief restores the latest good checkpoint only when the
variables are gone (a restarted PS), so a restarted worker rejoins without resetting anyone's
progress; other workers wait until the chief has made the variables ready.
"""
from __future__ import annotations

import logging

import numpy as np

from actorflow import clock, errors
from actorflow.actors.session import Session
from actorflow.graph.graph import GraphKeys, get_default_graph
from actorflow.train.session_run_hook import (
    CheckpointSaverHook,
    SessionRunContext,
    SessionRunValues,
    StepCounterHook,
)

__all__ = ["Scaffold", "SessionCreator", "ChiefSessionCreator", "WorkerSessionCreator", "MonitoredSession",
           "MonitoredTrainingSession", "SingularMonitoredSession"]

log = logging.getLogger(__name__)

_RECOVERABLE = (errors.UnavailableError, errors.AbortedError, errors.FailedPreconditionError)
_USE_DEFAULT = object()


class Scaffold:
    """The graph pieces a monitored session needs: init op, ready check, saver (tf.train.Scaffold)."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None, local_init_op=None,
                 saver=None):
        self.init_op = init_op
        self.init_feed_dict = init_feed_dict
        self.init_fn = init_fn
        self.ready_op = ready_op
        self.local_init_op = local_init_op
        self.saver = saver
        self._var_names = None
        self._finalized = False

    def finalize(self):
        if self._finalized:
            return self
        from actorflow.graph.ops.array_ops import stack
        from actorflow.graph.variables import (
            global_variables,
            global_variables_initializer,
            is_variable_initialized,
            local_variables_initializer,
        )
        g = get_default_graph()
        variables = global_variables()
        if self.init_op is None:
            self.init_op = global_variables_initializer()
        if self.local_init_op is None:
            # TF's Scaffold.default_local_init_op: local variables and lookup tables.
            from actorflow.graph.ops.constant import group
            from actorflow.graph.ops.lookup_ops import tables_initializer
            self.local_init_op = group(local_variables_initializer(), tables_initializer())
        if self.ready_op is None and variables:
            self.ready_op = stack([is_variable_initialized(v) for v in variables], name="ready_check")
        self._var_names = [v.op.name for v in variables]
        if self.saver is None:
            savers = g.get_collection(GraphKeys.SAVERS)
            if savers:
                self.saver = savers[0]
            elif variables:
                from actorflow.train.saver import Saver
                self.saver = Saver()
                g.add_to_collection(GraphKeys.SAVERS, self.saver)
        self._finalized = True
        return self

    def uninitialized(self, sess) -> list:
        """Names of the variables that are not initialized in `sess` (its cluster's state)."""
        if self.ready_op is None:
            return []
        flags = np.asarray(sess.run(self.ready_op))
        return [n for n, ok in zip(self._var_names, flags) if not ok]


def _retry(fn, max_wait_secs: float, what: str):
    """Calls fn() until it stops raising recoverable errors or `max_wait_secs` pass."""
    deadline = clock.monotonic() + max_wait_secs
    delay = 0.05
    while True:
        try:
            return fn()
        except _RECOVERABLE as e:
            if clock.monotonic() + delay > deadline:
                raise errors.DeadlineExceededError(None, None, f"{what} did not succeed within {max_wait_secs:g} s: "
                                                               f"{e.message}") from e
            log.info("%s: %s; retrying", what, e.message.splitlines()[0])
            clock.sleep(delay)
            delay = min(delay * 2, 1.0)


class SessionCreator:
    """A factory of sessions for MonitoredSession (tf.compat.v1.train.SessionCreator): subclasses
    implement `create_session()`, which MonitoredSession calls at start and again after an
    AbortedError or UnavailableError to recover."""

    def create_session(self):
        raise NotImplementedError(f"{type(self).__name__} must implement create_session()")


class ChiefSessionCreator(SessionCreator):
    """Creates the chief's session: restores or initializes the variables only when they are missing."""

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None, checkpoint_filename_with_path=None,
                 max_wait_secs=7200):
        self.scaffold = scaffold or Scaffold()
        self.master = master
        self.config = config
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_path = checkpoint_filename_with_path
        self.max_wait_secs = max_wait_secs
        self.restored_from = None

    def create_session(self):
        self.scaffold.finalize()
        return _retry(self._create, self.max_wait_secs, "creating the chief session")

    def _create(self):
        sess = Session(self.master, config=self.config)
        try:
            missing = self.scaffold.uninitialized(sess)
            if missing:
                path = self._restore(sess)
                if path is not None:
                    log.info("chief restored %d variables from %s", len(missing), path)
                else:
                    sess.run(self.scaffold.init_op, self.scaffold.init_feed_dict)
                    if self.scaffold.init_fn is not None:
                        self.scaffold.init_fn(self.scaffold, sess)
            if self.scaffold.local_init_op is not None:
                sess.run(self.scaffold.local_init_op)
            return sess
        except BaseException:
            sess.close()
            raise


    def _restore(self, sess):
        """Restores from the explicit checkpoint (its errors raised), else from the newest good one of
        the checkpoint directory; returns its path, or None when there is nothing to restore.

        A malformed, corrupt or unauthenticated checkpoint (one without a valid HMAC under the cluster
        token, in a distributed session) is skipped for the previous good one, with a warning naming
        it and why: one bad newer checkpoint never stops training from starting."""
        saver = self.scaffold.saver
        if saver is None:
            return None
        if self.checkpoint_path:
            saver.restore(sess, self.checkpoint_path)
            self.restored_from = self.checkpoint_path
            return self.checkpoint_path
        if not self.checkpoint_dir:
            return None
        from actorflow.train.saver import latest_checkpoint
        key = saver.checkpoint_key_for(sess)
        for attempt in range(3):
            path = latest_checkpoint(self.checkpoint_dir, key=key)
            if path is None:
                return None
            try:
                saver.restore(sess, path)
            except errors.DataLossError as e:
                # It went bad between the check and the read (a concurrent writer, a failing disk): look
                # again, which skips it now; give up if it keeps happening.
                log.warning("skipping checkpoint %s: %s", path, e.message)
                if attempt == 2:
                    raise
                continue
            self.restored_from = path
            return path


class WorkerSessionCreator(SessionCreator):
    """Creates a non-chief session: waits until the chief has made every variable ready."""

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=7200, poll_secs=0.1):
        self.scaffold = scaffold or Scaffold()
        self.master = master
        self.config = config
        self.max_wait_secs = max_wait_secs
        self.poll_secs = poll_secs

    def create_session(self):
        self.scaffold.finalize()
        deadline = clock.monotonic() + self.max_wait_secs
        sess = _retry(lambda: Session(self.master, config=self.config), self.max_wait_secs, "connecting")
        while True:
            try:
                missing = self.scaffold.uninitialized(sess)
            except _RECOVERABLE:
                missing = ["<unreachable>"]
            if not missing:
                break
            if clock.monotonic() > deadline:
                sess.close()
                raise errors.DeadlineExceededError(None, None, f"variables {missing[:5]} were not initialized by the "
                                                               f"chief within {self.max_wait_secs:g} s")
            clock.sleep(self.poll_secs)
        if self.scaffold.local_init_op is not None:
            sess.run(self.scaffold.local_init_op)
        return sess


class MonitoredSession:
    """A session that runs hooks around every run and recovers from lost tasks (tf.train.MonitoredSession)."""

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120, max_recoveries=20):
        self._creator = session_creator or ChiefSessionCreator()
        self._hooks = list(hooks or [])
        self._max_recoveries = max_recoveries
        self._grace = stop_grace_period_secs
        self.recoveries = 0
        # Recovered failures by error class ("UnavailableError": 2, ...), for soak tests and logs.
        self.recovered_errors: dict = {}
        self._stop = False
        # Test-only: a planted bug for the simulator's tests (tests/test_detsim.py), off unless a
        # test sets it: after a recovery, every run is sent twice, applying its gradient twice.
        self._planted_double_apply = False
        from actorflow.train.coordinator import Coordinator
        self._coord = Coordinator()
        for h in self._hooks:
            h.begin()
        get_default_graph()
        self._sess = None
        self._create()

    def _create(self):
        """Creates the session and runs the hooks' after_create_session; a recoverable failure in
        either (a connection reset under the hooks' first runs) creates it again, as TF's
        _RecoverableSession does, up to max_recoveries times."""
        failures = 0
        delay = 0.05
        while True:
            sess = None
            try:
                sess = self._sess = self._creator.create_session()
                for h in self._hooks:
                    h.after_create_session(sess, self._coord)
                return
            except _RECOVERABLE as e:
                failures += 1
                if failures > self._max_recoveries:
                    raise
                log.warning("creating the session failed (%s); creating it again", e.message.splitlines()[0])
                if sess is not None:
                    try:
                        sess.close()
                    except Exception:  # noqa: BLE001
                        pass
                clock.sleep(delay)
                delay = min(delay * 2, 1.0)

    @property
    def graph(self):
        return self._sess.graph

    def should_stop(self) -> bool:
        return self._stop or self._coord.should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs with hooks; on a recoverable failure re-creates the session and runs again."""
        failures = 0
        while True:
            try:
                return self._run_with_hooks(fetches, feed_dict, options, run_metadata)
            except _RECOVERABLE as e:
                failures += 1
                self.recoveries += 1
                self.recovered_errors[type(e).__name__] = self.recovered_errors.get(type(e).__name__, 0) + 1
                if failures > self._max_recoveries:
                    raise
                log.warning("run failed (%s); re-creating the session (recovery %d)",
                            e.message.splitlines()[0], self.recoveries)
                try:
                    self._sess.close()
                except Exception:  # noqa: BLE001
                    pass
                self._create()

    def _run_with_hooks(self, fetches, feed_dict, options, run_metadata=None):
        from actorflow.actors.session import RunMetadata, RunOptions
        ctx = SessionRunContext((fetches, feed_dict), self._sess)
        extra = {}
        feeds = dict(feed_dict or {})
        user_trace = getattr(options, "trace_level", 0) or 0
        trace = user_trace
        for i, h in enumerate(self._hooks):
            args = h.before_run(ctx)
            if args is not None:
                if args.fetches is not None:                # (a hook may only feed: FeedFnHook)
                    extra[i] = args.fetches
                if args.feed_dict:
                    feeds.update(args.feed_dict)
                if args.options is not None and getattr(args.options, "timeout_in_ms", 0):
                    # The tightest deadline any hook asks for wins.
                    if options is None or not getattr(options, "timeout_in_ms", 0) or \
                            args.options.timeout_in_ms < options.timeout_in_ms:
                        options = args.options
                if args.options is not None:
                    # As TF's MonitoredSession: the highest trace level any hook asks for wins.
                    trace = max(trace, getattr(args.options, "trace_level", 0) or 0)
        if trace > (getattr(options, "trace_level", 0) or 0):
            options = RunOptions(timeout_in_ms=getattr(options, "timeout_in_ms", 0) or 0, trace_level=trace)
        if trace and run_metadata is None:
            run_metadata = RunMetadata()
        results = self._sess.run({"user": fetches, "hooks": extra}, feeds or None, options=options,
                                 run_metadata=run_metadata)
        if self._planted_double_apply and self.recoveries:
            results = self._sess.run({"user": fetches, "hooks": extra}, feeds or None, options=options)
        for i, h in enumerate(self._hooks):
            h.after_run(ctx, SessionRunValues(results["hooks"].get(i), options, run_metadata))
        if ctx.stop_requested:
            self._stop = True
        return results["user"]

    def run_step_fn(self, step_fn):
        return step_fn(_StepContext(self))

    def close(self):
        if self._sess is None:
            return
        self._coord.request_stop()
        try:
            for h in self._hooks:
                self._end_hook(h)
        finally:
            try:
                self._coord.join(stop_grace_period_secs=self._grace, ignore_live_threads=True)
            except Exception:  # noqa: BLE001 - threads' errors were reported by the coordinator
                log.warning("a coordinated thread failed", exc_info=True)
            self._sess.close()
            self._sess = None

    def _end_hook(self, h) -> None:
        """h.end(session). A recoverable failure there (a connection reset under the final checkpoint's
        save) is retried on a new session to the same master, with backoff, for at most
        min(stop_grace_period_secs, 10) seconds: one lost frame must not cost the final checkpoint.
        TF gives up at the first error; a retry runs on the cluster's state as it is (a parameter
        server that restarted empty fails it again: nothing uninitialized is saved)."""
        master = getattr(self._creator, "master", None)
        deadline = clock.monotonic() + min(self._grace, 10.0)
        delay = 0.05
        sess = self._sess
        try:
            while True:
                try:
                    if sess is None:
                        sess = Session(master, graph=self._sess.graph, config=getattr(self._creator, "config", None))
                    h.end(sess)
                    return
                except _RECOVERABLE as e:
                    why = e.message.splitlines()[0]
                    if master is None or clock.monotonic() + delay > deadline:
                        log.warning("hook %s could not finish: %s", type(h).__name__, why)
                        return
                    self.recoveries += 1
                    self.recovered_errors[type(e).__name__] = self.recovered_errors.get(type(e).__name__, 0) + 1
                    log.warning("hook %s could not finish (%s); retrying on a new session", type(h).__name__, why)
                    clock.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    if sess is not None and sess is not self._sess:
                        sess.close()
                    sess = None
        finally:
            if sess is not None and sess is not self._sess:
                sess.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False


class _StepContext:
    def __init__(self, ms):
        self.session = ms._sess
        self._ms = ms

    def run_with_hooks(self, *args, **kw):
        return self._ms.run(*args, **kw)

    def request_stop(self):
        self._ms._stop = True


class SingularMonitoredSession(MonitoredSession):
    def __init__(self, hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None):
        super().__init__(ChiefSessionCreator(scaffold, master, config, checkpoint_dir), hooks)


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None, hooks=None,  # noqa: N802
                             chief_only_hooks=None, save_checkpoint_secs=_USE_DEFAULT, save_summaries_steps=_USE_DEFAULT,
                             save_summaries_secs=_USE_DEFAULT, config=None, stop_grace_period_secs=120,
                             log_step_count_steps=100, max_wait_secs=7200, save_checkpoint_steps=_USE_DEFAULT,
                             summary_dir=None):
    """A MonitoredSession for training (tf.compat.v1.train.MonitoredTrainingSession).

    The chief initializes or restores from `checkpoint_dir` and saves checkpoints every
    `save_checkpoint_steps` steps or `save_checkpoint_secs` seconds (600 s by default); workers wait
    for the chief. Lost tasks are recovered from transparently (see module docstring). The chief writes
    TensorBoard summaries to `summary_dir` (default `checkpoint_dir`): the graph's merged summaries every
    `save_summaries_steps` steps (100 by default) or `save_summaries_secs` seconds, and `global_step/sec`
    every `log_step_count_steps` steps.
    """
    scaffold = scaffold or Scaffold()
    hooks = list(hooks or [])
    if is_chief:
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir, max_wait_secs=max_wait_secs)
        hooks += list(chief_only_hooks or [])
        if checkpoint_dir:
            steps = None if save_checkpoint_steps is _USE_DEFAULT else save_checkpoint_steps
            secs = None if save_checkpoint_secs is _USE_DEFAULT else save_checkpoint_secs
            if steps is None and secs is None and save_checkpoint_secs is _USE_DEFAULT:
                secs = 600
            if steps is not None or secs is not None:
                hooks.append(CheckpointSaverHook(checkpoint_dir, save_secs=None if steps is not None else secs,
                                                 save_steps=steps, scaffold=scaffold))
        hooks += _summary_hooks(scaffold, summary_dir or checkpoint_dir, save_summaries_steps, save_summaries_secs,
                                log_step_count_steps)
    else:
        creator = WorkerSessionCreator(scaffold, master, config, max_wait_secs=max_wait_secs)
    return MonitoredSession(creator, hooks, stop_grace_period_secs)



def _summary_hooks(scaffold, summary_dir, save_summaries_steps, save_summaries_secs, log_step_count_steps):
    """The chief's summary hooks, as TF's MonitoredTrainingSession adds them: a StepCounterHook (logging
    global steps per second, and writing them to `summary_dir` when there is one) and, with a
    `summary_dir`, a SummarySaverHook. Both need a global step; without one there are none."""
    from actorflow.train.summary_hooks import SummarySaverHook
    from actorflow.train.training_util import get_global_step
    if save_summaries_steps is _USE_DEFAULT and save_summaries_secs is _USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is _USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is _USE_DEFAULT:
        save_summaries_steps = None
    if get_global_step() is None:
        return []
    hooks = []
    if log_step_count_steps and log_step_count_steps > 0:
        hooks.append(StepCounterHook(every_n_steps=log_step_count_steps, output_dir=summary_dir))
    if summary_dir and ((save_summaries_steps and save_summaries_steps > 0) or
                        (save_summaries_secs and save_summaries_secs > 0)):
        hooks.append(SummarySaverHook(scaffold=scaffold, save_steps=save_summaries_steps or None,
                                      save_secs=save_summaries_secs or None, output_dir=summary_dir))
    return hooks
