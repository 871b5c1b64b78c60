"""Synchronous replicas with backup workers (tf.compat.v1.train.SyncReplicasOptimizer).

The paper's answer to stragglers: run N + b workers, aggregate the first N gradients of each step,
drop the rest. Between-graph replication: every worker builds the same graph (variables on the
parameter servers with `replica_device_setter`) and wraps its optimizer:

    opt = af.train.SyncReplicasOptimizer(af.train.GradientDescentOptimizer(0.1),
                                         replicas_to_aggregate=N, total_num_replicas=N + b)
    train_op = opt.minimize(loss, global_step=global_step)
    hook = opt.make_session_run_hook(is_chief)

With af.train.MonitoredTrainingSession pass `hooks=[hook]`. From a plain loop:

    hook.begin()                                  # after the graph is built
    sess = af.Session(target)
    if is_chief:
        sess.run(af.global_variables_initializer())
    coord = af.train.Coordinator()
    hook.after_create_session(sess, coord)        # waits for the chief; the chief starts its sync loop
    step = sess.run(opt.local_step)               # a worker that joins late starts at the current step
    while step < last_step:                       # loop on the step, not on a count of iterations:
        step = hook.run(sess, train_op, timeout=60)   # a late worker skips steps, and must stop too
    coord.request_stop(); coord.join()            # (the chief: once every worker is done)

`hook.run` is `sess.run(..., timeout=...)` whose timeout error says what the worker was waiting
for; every wait has a timeout, so a worker whose chief died fails instead of hanging.

How a step works, all on the parameter servers:
1. A worker's gradients arrive where their variables live. Then the worker asks the *gate* (a
   ConditionalAccumulator next to the global step, limited to N gradients per step) for admission,
   with its local step, worker index and batch id.
2. Admitted (one of the first N fresh gradients): its gradients go into one accumulator per
   variable. Refused: its gradients are withdrawn from every accumulator, and the gate counts and
   logs the drop, naming worker, step and batch: "late" (the step already had N) or "stale" (it
   was computed for a step that is over).
3. The chief's sync loop (`get_chief_queue_runner()`) takes the N-gradient averages, applies them
   with the wrapped optimizer and increments global_step; only then does it end the step at the
   gate (so nothing of the next step can reach an accumulator early), and release one token (the
   new step) for every worker that contributed to the step, admitted or late.
4. Each worker's train op ends by dequeuing a token: its local step for the next step. A stale
   worker enqueues its own token for the current step first: it is behind, and need not wait.

Differences from TF 1.x, each because TF's behaviour contradicts "exactly the first N":
- TF takes from each variable's accumulator independently, so under a race one variable can
  average gradients from a different set of workers than another, and a take can average more
  than N. Here the gate admits whole gradients, so every accumulator gets the same N.
- TF releases `total_num_replicas` tokens per step whatever happened, so a dead worker's tokens
  pile up and later hand other workers stale steps (wasted gradients). Here the chief releases
  exactly the tokens that waiting workers need, so a worker that dies, even holding a token,
  costs nothing while N workers remain.
- `num_tokens=-1` means max(0, replicas_to_aggregate - total_num_replicas), the tokens needed to
  make progress, not TF's replicas_to_aggregate (which lets every worker compute one step ahead on
  stale parameters).
- Dropped gradients are counted (`dropped_count()`), logged by the parameter server
  (logger actorflow.actors.accumulator), and visible to the worker that sent them (`status`).
"""
from __future__ import annotations

import logging

import numpy as np

from actorflow import clock, errors
from actorflow.graph import dtypes
from actorflow.graph.device_spec import DeviceSpec
from actorflow.graph.graph import GraphKeys, convert_to_tensor
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.ops import conditional_accumulator_ops as accumulators
from actorflow.graph.ops.array_ops import fill, reshape
from actorflow.graph.ops.constant import constant, group, identity, no_op
from actorflow.graph.ops.data_flow_ops import FIFOQueue
from actorflow.graph.ops.math_ops import cast, equal, where
from actorflow.graph.variables import Variable, assign, assign_add, is_variable_initialized
from actorflow.train.coordinator import Coordinator
from actorflow.train.optimizer import Optimizer, WrappedOptimizer
from actorflow.train.queue_runner import QueueRunner
from actorflow.train.session_run_hook import SessionRunHook

__all__ = ["SyncReplicasOptimizer"]

log = logging.getLogger(__name__)


class SyncReplicasOptimizer(WrappedOptimizer):
    """Aggregates the gradients of `replicas_to_aggregate` replicas per step, then applies them
    with `opt` (tf.compat.v1.train.SyncReplicasOptimizer); see the module docstring.

    `total_num_replicas` (default: replicas_to_aggregate) counts every worker; the extra ones are
    backups. `worker_index` (actorflow extension) names this worker in drop reports; by default it
    is the task index of the device this graph's ops are placed on (replica_device_setter), else -1.
    """

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None, variable_averages=None,
                 variables_to_average=None, use_locking=False, name="sync_replicas", worker_index=None):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if int(replicas_to_aggregate) < 1:
            raise ValueError(f"replicas_to_aggregate must be >= 1, got {replicas_to_aggregate}")
        if int(total_num_replicas) < 1:
            raise ValueError(f"total_num_replicas must be >= 1, got {total_num_replicas}")
        super().__init__(use_locking, name)
        log.info("SyncReplicas: replicas_to_aggregate=%s; total_num_replicas=%s", replicas_to_aggregate,
                 total_num_replicas)
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._worker_index = worker_index
        self._gradients_applied = False
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list: list = []
        self._gate = None
        self._local_step = None
        self._status = None
        self._step_of_status = None
        self._dropped = None
        self.local_step_init_op = None
        self.chief_init_op = None
        self.ready_for_local_init_op = None

    # -- the Optimizer API ------------------------------------------------------------------------------
    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients (tf.compat.v1.train.SyncReplicasOptimizer.compute_gradients)."""
        return self._opt.compute_gradients(*args, **kwargs)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=Optimizer.GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None, grad_loss=None,
                 batch_id=None):
        """compute_gradients + apply_gradients; `batch_id` as for apply_gradients."""
        grads_and_vars = self.compute_gradients(loss, var_list=var_list, gate_gradients=gate_gradients,
                                                aggregation_method=aggregation_method,
                                                colocate_gradients_with_ops=colocate_gradients_with_ops,
                                                grad_loss=grad_loss)
        if not any(g is not None for g, _ in grads_and_vars):
            raise ValueError(f"No gradients provided for any variable: {[str(v) for _, v in grads_and_vars]}")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name, batch_id=batch_id)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, batch_id=None):
        """Builds this worker's train op (contribute the gradients, then wait for the next step's
        token) and the chief's aggregated update; returns the train op
        (tf.compat.v1.train.SyncReplicasOptimizer.apply_gradients). As in TF it is a tensor: running
        it gives the worker's new local step, the global step it will compute its next gradient for;
        loop until that reaches the last step, so that every worker, late ones included, finishes.

        `batch_id` (actorflow extension): an integer scalar tensor naming the input batch, reported
        with the gradient if it is dropped so the input pipeline can re-queue it.
        """
        present, batch_id = self._check_arguments(grads_and_vars, global_step, batch_id)
        graph = global_step.graph
        self._global_step = global_step
        gs_dev = global_step.op.device
        with graph.as_default(), graph.name_scope(None), graph.name_scope(self._name):
            dummy_queue = self._make_state(graph, global_step, gs_dev)
            arrived, keep_step = self._arrive_and_admit(graph, present, gs_dev, batch_id)        # 1.
            train_ops, aggregated, var_list = self._accumulate(graph, arrived, keep_step)        # 2.
            self._build_chief_update(graph, aggregated, var_list, global_step, gs_dev, dummy_queue)  # 3.
            train_op = self._build_train_op(graph, train_ops, gs_dev, name)                      # 4.
            self._build_init_ops(graph, global_step, gs_dev)
        ops = graph.get_collection_ref(GraphKeys.TRAIN_OP)
        if train_op.op not in ops:
            ops.append(train_op.op)
        self._gradients_applied = True
        return train_op

    def _check_arguments(self, grads_and_vars, global_step, batch_id):
        """(the (gradient, variable) pairs that have a gradient, batch_id as an int64 tensor or None);
        raises on what apply_gradients cannot take."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        if self._gradients_applied:
            raise ValueError(f"SyncReplicasOptimizer '{self._name}': apply_gradients can be called only once")
        present = [(g, v) for g, v in grads_and_vars if g is not None]
        if not present:
            raise ValueError(f"No gradients provided for any variable: {[str(v) for _, v in grads_and_vars]}")
        if batch_id is not None:
            batch_id = convert_to_tensor(batch_id)
            if not batch_id.dtype.is_integer:
                raise TypeError(f"batch_id must be an integer tensor, got {batch_id.dtype.name} ('{batch_id.name}')")
            if batch_id.dtype is not dtypes.int64:
                batch_id = cast(batch_id, dtypes.int64)
        return present, batch_id

    def _make_state(self, graph, global_step, gs_dev):
        """This worker's local step; on the global step's device, the gate (admits N gradients a
        step) and the token queue. Returns the chief loop's dummy queue."""
        # The local step lives on this worker, not on a parameter server: every worker has its own.
        local_anchor = no_op(name="local_anchor")
        worker = self._worker_index
        if worker is None:
            task = DeviceSpec.from_string(local_anchor.device or "").task
            worker = -1 if task is None else task
        self._worker = int(worker)
        with graph.control_dependencies(None), graph.colocate_with(local_anchor):
            self._local_step = Variable(0, trainable=False, collections=[GraphKeys.LOCAL_VARIABLES],
                                        dtype=global_step.dtype, name="sync_rep_local_step")
        self.local_step_init_op = assign(self._local_step, global_step, name="local_step_init").op

        with graph.control_dependencies(None), graph.device(gs_dev):
            self._gate = accumulators.ConditionalAccumulator(
                dtypes.float32, shape=[], shared_name=f"{self._name}/gate", name="gate",
                max_accumulated=self._replicas_to_aggregate)
            self._sync_token_queue = FIFOQueue(-1, global_step.dtype, shapes=[[]], name="sync_token_q",
                                               shared_name=f"{self._name}/sync_token_q")
            # The chief's sync loop needs a queue to be a QueueRunner; TF uses a dummy one too, so
            # that stopping the loop never closes the real token queue.
            return FIFOQueue(1, dtypes.int32, shapes=[[]], name="dummy_queue",
                             shared_name=f"{self._name}/dummy_queue")

    def _arrive_and_admit(self, graph, present, gs_dev, batch_id):
        """Step 1. Every gradient arrives where its variable lives before this worker asks for
        admission, so an admitted worker that dies right after cannot leave an accumulator short of
        N. Returns (the arrived (gradient, variable) pairs, the step to contribute them at: the local
        step when admitted, -1 when refused)."""
        arrived = []
        with graph.name_scope("arrive"):
            for g, v in present:
                with graph.colocate_with(v.op):
                    if isinstance(g, IndexedSlices):
                        arrived.append((IndexedSlices(identity(g.values), identity(g.indices), g.dense_shape), v))
                    else:
                        arrived.append((identity(g), v))
        deps = []
        for g, _ in arrived:
            deps.extend([g.values, g.indices] if isinstance(g, IndexedSlices) else [g])
        # The worker's local step as the step first reads it (nothing in the step changes it before
        # the train op's last assignment): read outside the control dependencies below, which would
        # make it a fresh read after the gradients.
        local_step = self._local_step.value()
        with graph.device(gs_dev):
            with graph.control_dependencies(deps):
                one = convert_to_tensor(1.0, dtype=dtypes.float32, name="contribution")
                self._status, self._step_of_status = self._gate.try_apply_grad(
                    one, local_step=local_step, worker=self._worker, batch_id=batch_id, name="admit")
            accepted = equal(self._status, accumulators.ACCEPTED, name="accepted")
            # A refused gradient is withdrawn (a negative step) from every accumulator.
            keep_step = where(accepted, local_step,
                              convert_to_tensor(-1, dtype=dtypes.int64), name="keep_step")
            self._accepted = accepted
            self._dropped = self._gate.num_dropped(name="dropped_gradients")
        return arrived, keep_step

    def _accumulate(self, graph, arrived, keep_step):
        """Step 2. One accumulator per variable, where the variable lives. Returns (this worker's
        contributions, the chief's N-averages, their variables)."""
        N = self._replicas_to_aggregate
        train_ops = []
        aggregated = []
        var_list = []
        for g, v in arrived:
            var_list.append(v)
            with graph.device(None), graph.colocate_with(v.op):
                shared = v.name + "/grad_accum"
                if isinstance(g, IndexedSlices):
                    acc = accumulators.SparseConditionalAccumulator(g.dtype, shape=v.shape, shared_name=shared,
                                                                    name="grad_accum")
                    train_ops.append(acc.apply_indexed_slices_grad(g, local_step=keep_step))
                    aggregated.append(acc.take_indexed_slices_grad(N))
                else:
                    acc = accumulators.ConditionalAccumulator(g.dtype, shape=v.shape, shared_name=shared,
                                                              name="grad_accum")
                    train_ops.append(acc.apply_grad(g, local_step=keep_step))
                    aggregated.append(acc.take_grad(N))
            self._accumulator_list.append((acc, v.device))
        return train_ops, aggregated, var_list

    def _build_chief_update(self, graph, aggregated, var_list, global_step, gs_dev, dummy_queue) -> None:
        """Step 3. The chief's update: the N-averages are applied, and only then does the gate's take
        end the step. Until it does, the gate refuses everything (it has its N), so no gradient of
        the next step can reach an accumulator before that accumulator's take, and a stale worker
        released by the gate's new step computes on the updated parameters."""
        N = self._replicas_to_aggregate
        update_op = self._opt.apply_gradients(list(zip(aggregated, var_list)), global_step)
        with graph.device(gs_dev):
            with graph.control_dependencies([update_op]):
                new_step = _new_global_step(update_op, global_step)
                gate_take = self._gate.take_grad(N, name="end_step")
            with graph.control_dependencies([gate_take]):
                # One token per worker waiting on this step: the N admitted and the late ones.
                late = self._gate.num_dropped(kind="late_last_take", name="late_this_step")
                n_tokens = cast(late, dtypes.int32) + N
                tokens = fill(reshape(n_tokens, [1]), new_step, name="tokens")
                sync_op = self._sync_token_queue.enqueue_many((tokens,), name="release")
            if self._variable_averages is not None:
                with graph.control_dependencies([sync_op]):
                    sync_op = self._variable_averages.apply(self._variables_to_average)
            self._chief_queue_runner = QueueRunner(dummy_queue, [sync_op])

    def _build_train_op(self, graph, train_ops, gs_dev, name):
        """Step 4. This worker's train op: contribute, then wait for the token of its next step."""
        with graph.device(gs_dev):
            with graph.control_dependencies(train_ops):
                stale = cast(equal(self._status, accumulators.STALE), dtypes.int32)
                self_token = self._sync_token_queue.enqueue_many(
                    (fill(reshape(stale, [1]), self._step_of_status),), name="catch_up")
            with graph.control_dependencies([self_token]):
                token = self._sync_token_queue.dequeue(name="token")
        # As TF's, the train op is the assignment: running it gives the step the worker is at next.
        return assign(self._local_step, token, name=name or "train_op")

    def _build_init_ops(self, graph, global_step, gs_dev) -> None:
        """The chief's init (local step and every accumulator at the global step), the op that
        closes the gate when training ends, and the readiness check for local init."""
        chief_init = [assign(self._local_step, global_step, name="chief_local_step_init").op]
        for acc, _ in [(self._gate, gs_dev)] + self._accumulator_list:
            with graph.device(None), graph.colocate_with(acc.accumulator_ref.op):
                chief_init.append(acc.set_global_step(global_step, name="SetGlobalStep"))
        self.chief_init_op = group(*chief_init, name="chief_init")
        # When training ends, the gate takes no more gradients: any that still come are stale,
        # dropped and reported, never accepted into a step that will not be applied.
        with graph.device(None), graph.colocate_with(self._gate.accumulator_ref.op):
            self._close_gate_op = self._gate.set_global_step(
                constant(np.iinfo(global_step.dtype.np).max // 2, dtype=global_step.dtype), name="close_gate")
        with graph.device(gs_dev):
            self._gs_initialized = _is_initialized(global_step)
        self.ready_for_local_init_op = self._gs_initialized

    # -- what the chief and the workers run ----------------------------------------------------------
    def get_chief_queue_runner(self) -> QueueRunner:
        """The QueueRunner of the chief's sync loop (tf.train.SyncReplicasOptimizer.get_chief_queue_runner)."""
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_init_tokens_op(self, num_tokens=-1):
        """An op that puts `num_tokens` tokens for the current step in the token queue
        (tf.train.SyncReplicasOptimizer.get_init_tokens_op). -1: the tokens needed for progress,
        max(0, replicas_to_aggregate - total_num_replicas) (TF: replicas_to_aggregate)."""
        from actorflow.graph.ops.array_ops import fill
        from actorflow.graph.ops.constant import no_op
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        needed = max(0, self._replicas_to_aggregate - self._total_num_replicas)
        if num_tokens == -1:
            num_tokens = needed
        elif num_tokens < needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} (given) < {needed} "
                             "(replicas_to_aggregate - total_num_replicas)")
        graph = self._global_step.graph
        with graph.as_default(), graph.name_scope(None), graph.device(self._global_step.op.device):
            if num_tokens > 0:
                return self._sync_token_queue.enqueue_many((fill([num_tokens], self._global_step),),
                                                           name=f"{self._name}/init_tokens")
            return no_op(name=f"{self._name}/no_init_tokens")

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """A hook that initializes the replica and, on the chief, starts the sync loop
        (tf.train.SyncReplicasOptimizer.make_session_run_hook); see the module docstring for a plain loop."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)

    # -- reports -------------------------------------------------------------------------------------------
    @property
    def status(self):
        """This worker's outcome for the step its train op ran, int32: ACCEPTED (0), STALE (1) or
        LATE (2) (conditional_accumulator_ops). Fetch it with the train op (actorflow extension)."""
        self._check_applied()
        return self._status

    @property
    def accepted(self):
        """Whether this worker's gradient of the step was among the N applied, bool (actorflow extension)."""
        self._check_applied()
        return self._accepted

    @property
    def dropped_gradients(self):
        """The number of gradients dropped so far by every worker, int64 (actorflow extension)."""
        self._check_applied()
        return self._dropped

    def dropped_count(self, kind="all", name=None):
        """An op reading the drop counter: kind "all", "stale" or "late" (actorflow extension)."""
        self._check_applied()
        graph = self._global_step.graph
        with graph.as_default():
            return self._gate.num_dropped(kind=kind, name=name or f"{self._name}/dropped_{kind}")

    @property
    def local_step(self):
        """This worker's local step variable (the step its next gradient is for)."""
        self._check_applied()
        return self._local_step

    @property
    def worker_index(self) -> int:
        self._check_applied()
        return self._worker

    def _check_applied(self):
        if not self._gradients_applied:
            raise ValueError(f"SyncReplicasOptimizer '{self._name}': call apply_gradients() (or minimize()) first")



def _new_global_step(update_op, global_step):
    """The global step after `update_op`: the output of its increment. A variable read would give
    the step-start snapshot (actorflow's reads are snapshots), hence not simply `global_step`."""
    if getattr(update_op, "type", None) in ("AssignAdd",) and update_op.outputs:
        return update_op.outputs[0]
    return assign_add(global_step, 0, name="read_global_step")


def _is_initialized(var):
    return is_variable_initialized(var)


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Initializes a replica, and on the chief starts the sync loop (TF's _SyncReplicasOptimizerHook).

    `after_create_session` waits (up to `ready_timeout_secs`, default 300 s) for the chief to
    initialize the global step. `run(sess, fetches, ...)` is a plain-loop helper that turns a step
    timeout into an error saying what the worker was waiting for.
    """

    def __init__(self, sync_optimizer, is_chief, num_tokens, ready_timeout_secs=300.0):
        self._sync_optimizer = sync_optimizer
        self._is_chief = bool(is_chief)
        self._num_tokens = num_tokens
        self._ready_timeout_secs = float(ready_timeout_secs)
        self._own_coord = None
        self._threads: list = []
        self._begun = False

    def begin(self):
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradients should be called before using the hook.")
        if self._begun:
            return
        self._begun = True
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
            # At the end, one token per replica releases any worker still waiting for the next
            # step; it then sees the final global step and stops instead of waiting forever.
            self._release_op = opt.get_init_tokens_op(opt._total_num_replicas)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None
        self._ready_op = opt.ready_for_local_init_op

    def after_create_session(self, session, coord):
        """Waits for the global step, runs the replica's local init, and on the chief adds the
        initial tokens and starts the sync loop's thread (registered with `coord`)."""
        self.begin()
        deadline = clock.monotonic() + self._ready_timeout_secs
        while not bool(session.run(self._ready_op)):
            if clock.monotonic() > deadline:
                raise errors.DeadlineExceededError(
                    None, None, f"SyncReplicasOptimizer: the global step was not initialized within "
                                f"{self._ready_timeout_secs:g} s; the chief initializes it")
            clock.sleep(0.05)
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            if not isinstance(coord, Coordinator):
                # A coordinator without thread registration: stop our own at `end`.
                self._own_coord = coord = Coordinator()
            self._threads = self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)

    def end(self, session):
        if self._is_chief:
            try:
                session.run(self._sync_optimizer._close_gate_op, timeout=10)
                session.run(self._release_op, timeout=10)
            except errors.OpError as e:
                log.warning("could not release the workers' tokens at the end: %s", e.message.splitlines()[0])
        if self._own_coord is not None:
            self._own_coord.request_stop()
            self._own_coord.join(self._threads, stop_grace_period_secs=10, ignore_live_threads=True)

    def run(self, session, fetches, feed_dict=None, timeout=None, options=None):
        """`session.run(fetches, feed_dict, timeout=...)`; a timeout raises DeadlineExceededError
        saying that the worker waited for the chief's next token (actorflow extension)."""
        try:
            return session.run(fetches, feed_dict, options=options, timeout=timeout)
        except errors.DeadlineExceededError as e:
            opt = self._sync_optimizer
            raise errors.DeadlineExceededError(
                None, None, f"SyncReplicasOptimizer '{opt._name}' (worker {opt._worker}): the step did not "
                            f"finish in time: after contributing its gradients a worker waits for the chief to "
                            f"aggregate {opt._replicas_to_aggregate} of them and release the next step's token. "
                            f"Is the chief's sync loop running, and are at least {opt._replicas_to_aggregate} "
                            f"workers alive? ({e.message.splitlines()[0]})") from e
