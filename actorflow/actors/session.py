"""Session: prepares plans, runs steps on the runtime, and returns fetched values (tf.compat.v1.Session)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Mapping

import numpy as np

from actorflow import clock, errors
from actorflow.actors.dispatcher import default_runtime
from actorflow.actors.executable import Executable
from actorflow.actors.resource import ResourceContainer
from actorflow.graph import dtypes
from actorflow.graph.graph import (
    Graph,
    Operation,
    Tensor,
    default_session,
    get_default_graph,
    get_default_session,
    pop_default_session,
    push_default_session,
)
from actorflow.scheduler.lower import LowerOptions, lower
from actorflow.scheduler.plan import make_plan

__all__ = ["Session", "InteractiveSession", "get_default_session", "ConfigProto", "RunOptions",
           "RunMetadata", "GPUOptions", "GraphOptions", "RewriterConfig", "OptimizerOptions", "LocalBackend",
           "set_remote_backend"]


class GPUOptions:
    def __init__(self, allow_growth=False, per_process_gpu_memory_fraction=1.0, visible_device_list=""):
        self.allow_growth = allow_growth
        self.per_process_gpu_memory_fraction = per_process_gpu_memory_fraction
        self.visible_device_list = visible_device_list


class RewriterConfig:
    """Graph rewrites (TF's rewriter_config_pb2.RewriterConfig). Each field (TF's names) is a switch
    DEFAULT / ON / OFF of the compiler pass registered under it (scheduler/lower.py `register_pass`);
    `remapping` is the fusion of MatMul + BiasAdd [+ Relu] and of MatMul + ApplyGradientDescent into
    one kernel each. Fields no pass reads are kept and ignored."""

    DEFAULT, ON, OFF = 0, 1, 2

    def __init__(self, remapping=0, **switches):
        self.remapping = remapping
        for k, v in switches.items():
            setattr(self, k, v)


class OptimizerOptions:
    """tf.compat.v1.OptimizerOptions: `global_jit_level` (ON_1/ON_2 compile clusters of
    element-wise ops and whole while loops with numba, as XLA's auto-clustering, before the first
    step; OFF compiles only what `af.xla.experimental.jit_scope()` marks). DEFAULT runs each while
    loop whose values are all small as one kernel call, interpreted, and compiles it once it has
    run long enough for compiling to pay; it leaves every other op to the actors (TF's DEFAULT
    compiles nothing; scheduler/lower.py's _jit says why this one does). AF_JIT=tiered does the same
    for every cluster and loop; AF_JIT=0 is OFF, AF_JIT=1 is ON_1."""

    DEFAULT, OFF, ON_1, ON_2 = 0, -1, 1, 2
    L0, L1 = -1, 0

    def __init__(self, global_jit_level=0, do_constant_folding=True, **unused):
        self.global_jit_level = global_jit_level
        self.do_constant_folding = do_constant_folding


class GraphOptions:
    """tf.compat.v1.GraphOptions: carries the `rewrite_options` (a RewriterConfig) and the
    `optimizer_options` (an OptimizerOptions)."""

    def __init__(self, rewrite_options=None, optimizer_options=None, **unused):
        self.rewrite_options = rewrite_options or RewriterConfig()
        self.optimizer_options = optimizer_options or OptimizerOptions()


class ConfigProto:
    """Session configuration (tf.compat.v1.ConfigProto); the fields actorflow honours.

    `inter_op_parallelism_threads` < 0 (TF: "all operations are performed in caller's thread"): no
    kernel of this session's steps goes to the runtime's kernel pool; each runs where its step runs
    (the runtime's loop, or the calling thread on the synchronous path). For a server whose loop is
    busy with requests and whose steps are small, the pool's hand-offs cost more than they save.
    0 or more: the runtime's shared pool, as before (actorflow does not size a pool per session)."""

    def __init__(self, allow_soft_placement=False, log_device_placement=False, inter_op_parallelism_threads=0,
                 intra_op_parallelism_threads=0, device_count=None, operation_timeout_in_ms=0,
                 gpu_options=None, device_filters=None, graph_options=None, experimental=None, **unused):
        self.allow_soft_placement = allow_soft_placement
        self.log_device_placement = log_device_placement
        self.inter_op_parallelism_threads = inter_op_parallelism_threads
        self.intra_op_parallelism_threads = intra_op_parallelism_threads
        self.device_count = dict(device_count or {})
        self.operation_timeout_in_ms = operation_timeout_in_ms
        self.gpu_options = gpu_options or GPUOptions()
        self.device_filters = list(device_filters or [])
        self.graph_options = graph_options or GraphOptions()
        self.experimental = experimental or ConfigProto.Experimental()

    class Experimental:
        """TF's ConfigProto.Experimental; actorflow adds `dump_passes_dir`: write the plan after each
        compiler pass there, as text and SVG (as the AF_DUMP_PASSES environment variable does)."""

        def __init__(self, dump_passes_dir=None, **unused):
            self.dump_passes_dir = dump_passes_dir


class RunOptions:
    """Per-call options (tf.compat.v1.RunOptions): `timeout_in_ms`, `trace_level` (SOFTWARE_TRACE
    records per-node times into `RunMetadata.step_stats`; FULL_TRACE adds output sizes;
    HARDWARE_TRACE is taken as SOFTWARE_TRACE: there is no device tracer), and `output_device`
    ("cpu" gives numpy arrays; "gpu" leaves GPU results as CuPy arrays)."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    def __init__(self, timeout_in_ms=0, trace_level=0, output_device="cpu"):
        self.timeout_in_ms = timeout_in_ms
        self.trace_level = trace_level
        self.output_device = output_device


class RunMetadata:
    """What a traced run reports (tf.compat.v1.RunMetadata). `step_stats` is TF's StepStats
    (TensorBoard's protobuf class when the `tensorboard` package is installed, else dataclasses
    with the same field names; see actorflow/actors/tracing.py). actorflow adds `clock_offsets`:
    for a cluster run, {task: {"offset_us", "round_trip_us"}}, the offset subtracted from that
    task's clock to put its stats on this process's clock (NTP-style, from the run_graph round trip)."""

    def __init__(self):
        self.step_stats = None
        self.clock_offsets = {}


class FeedError(errors.InvalidArgumentError, ValueError):
    """A fed value does not fit its placeholder (also a ValueError, as TF 1.x raises)."""


class FeedTypeError(errors.InvalidArgumentError, TypeError):
    """A fed Python int does not fit the placeholder's dtype (a TypeError, as TF 1.x raises)."""


class FetchError(errors.InvalidArgumentError, TypeError):
    """A fetch is not a graph element of this session's graph."""


def _feed_items(items):
    """(key, value) feed pairs with tuple keys (an RNN's LSTMStateTuple state...) fed leaf by leaf
    from a value of the same structure, as TF 1.x's Session.run does."""
    for key, value in items:
        if isinstance(key, tuple):
            if not isinstance(value, (tuple, list)) or len(value) != len(key):
                raise FeedError(None, None, f"The feed_dict key {key!r} is a structure of {len(key)} tensors; its "
                                f"value must be a tuple or list of {len(key)} values, got {type(value).__name__}")
            yield from _feed_items(zip(key, value))
        else:
            yield key, value


# -- fetch structures ----------------------------------------------------------------------------

def _flatten_fetches(fetches, graph, out: list):
    """Appends graph elements to `out`; returns a function rebuilding the structure from values."""
    if isinstance(fetches, (Tensor, Operation, str)) or hasattr(fetches, "_as_graph_element"):
        try:
            el = graph.as_graph_element(fetches)
        except (KeyError, ValueError, TypeError) as e:
            raise FetchError(None, None, f"Fetch argument {fetches!r} cannot be interpreted as a Tensor. ({e})") from None
        i = len(out)
        out.append(el)
        return lambda vals: vals[i]
    if fetches is None:
        raise FetchError(None, None, "Fetch argument None has invalid type <class 'NoneType'>")
    if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
        subs = [_flatten_fetches(f, graph, out) for f in fetches]
        cls = getattr(fetches, "_value_type", type(fetches))      # a SparseTensor's is SparseTensorValue
        return lambda vals: cls(*[s(vals) for s in subs])
    if isinstance(fetches, (list, tuple)):
        subs = [_flatten_fetches(f, graph, out) for f in fetches]
        cls = type(fetches)
        return lambda vals: cls(s(vals) for s in subs)
    if isinstance(fetches, Mapping):
        items = [(k, _flatten_fetches(v, graph, out)) for k, v in fetches.items()]
        cls = type(fetches)
        if cls is dict or not callable(cls):
            return lambda vals: {k: s(vals) for k, s in items}
        return lambda vals: cls((k, s(vals)) for k, s in items)
    raise FetchError(None, None, f"Fetch argument {fetches!r} has invalid type {type(fetches)}, must be a string "
                                 "or Tensor. (Can not convert a {0} into a Tensor or Operation.)".format(type(fetches).__name__))


def _convert_feed(t: Tensor, value):
    """A fed value as the array the step receives, converted as TF 1.x's Session does:
    `np.asarray(value, dtype=placeholder_dtype)`, so a float64 array fed to an int32 placeholder
    truncates as numpy casts, a list of mixed ints and floats is accepted, and a Python int that
    does not fit the dtype is refused. Strings (`af.string`) become object arrays of bytes."""
    want = t.dtype
    tv = type(value)
    if (tv is np.ndarray or isinstance(value, np.generic)) and value.dtype == want.np and not want.is_string:
        # Already of the placeholder's dtype (the common case of a program feeding its own arrays):
        # np.asarray keeps the array as it is, and no cast can overflow.
        arr = value if tv is np.ndarray else np.asarray(value)
        if not _shape_fits(t.shape.dims, arr.shape):
            raise FeedError(t.op.name, None, f"Cannot feed value of shape {tuple(arr.shape)} for Tensor '{t.name}', "
                                             f"which has shape {t.shape} (dtype {want.name})")
        return arr
    if hasattr(value, "_feed_value"):
        value = value._feed_value()      # a TensorHandle feeds the tensor it stands for, as in TF
    if isinstance(value, Tensor):
        raise FeedError(t.op.name, None, f"The value of a feed cannot be an af.Tensor object ('{value.name}'). "
                                         f"Acceptable feed values include Python scalars, strings, lists, numpy ndarrays.")
    # A CuPy array is taken as it is: it stays on its GPU (ops on the CPU get a copy).
    if type(value) is not np.ndarray and hasattr(value, "__cuda_array_interface__"):
        arr = value if value.dtype == want.np else value.astype(want.np)
    elif want.is_string:
        try:
            arr = dtypes.string_array(value)
        except (TypeError, ValueError) as e:
            raise FeedError(t.op.name, None, f"Cannot feed value {value!r} for string tensor '{t.name}': {e}") from None
    else:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and want.is_integer \
                and not want.min <= int(value) <= want.max:
            raise FeedTypeError(t.op.name, None, f"Type of feed value {value} with type {type(value)} is not compatible "
                                             f"with Tensor type {want.name} of '{t.name}'")
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                arr = np.asarray(value, dtype=want.np)
        except (TypeError, ValueError, OverflowError) as e:
            raise FeedError(t.op.name, None, f"Cannot convert feed value {value!r} for tensor '{t.name}' to "
                                             f"{want.name}: {e}") from None
    if not _shape_fits(t.shape.dims, arr.shape):
        raise FeedError(t.op.name, None, f"Cannot feed value of shape {tuple(arr.shape)} for Tensor '{t.name}', which "
                                         f"has shape {t.shape} (dtype {want.name})")
    return arr


# Signatures a session keeps (a program that builds a new fetch list per call keeps at most this many).
_MAX_SIGNATURES = 1024
_PLAIN_FETCH = (Tensor, Operation, str)


def _signature_key(fetches, feed_dict):
    """A hashable key standing for `fetches` and the keys of `feed_dict` when both are plain (a
    tensor, op or name, or a list or tuple of them; a dict fed by tensors or names), else None:
    then every run interprets them afresh."""
    tf = type(fetches)
    if tf in _PLAIN_FETCH:
        fkey = fetches
    elif (tf is list or tf is tuple) and all(type(f) in _PLAIN_FETCH for f in fetches):
        fkey = (tf, tuple(fetches))
    else:
        return None
    if not feed_dict:
        return fkey, ()
    if type(feed_dict) is not dict:
        return None
    return fkey, tuple(feed_dict)


def _shape_fits(dims, shape) -> bool:
    """Whether an array of `shape` fits static `dims` (TensorShape.dims: None, or int-or-None each)."""
    if dims is None:
        return True
    if len(dims) != len(shape):
        return False
    for d, n in zip(dims, shape):
        if d is not None and d != n:
            return False
    return True


# -- backends ------------------------------------------------------------------------------------
log = logging.getLogger(__name__)
_log_device_placement = False      # tf.debugging.set_log_device_placement's switch, for every session
_LOCAL_TASK = "/job:localhost/replica:0/task:0/device:"


def set_log_device_placement(enabled: bool) -> None:
    """Logs, at INFO, where each op of every plan a session builds runs, as TF 1.x logs
    `name: (Type): /job:localhost/replica:0/task:0/device:CPU:0` (tf.debugging.set_log_device_placement;
    `ConfigProto(log_device_placement=True)` does it for one session)."""
    global _log_device_placement
    _log_device_placement = bool(enabled)


def get_log_device_placement() -> bool:
    """Whether set_log_device_placement is on (tf.debugging.get_log_device_placement)."""
    return _log_device_placement


def _log_placement(exec_plan) -> None:
    for item in exec_plan.items:
        device = item.device if ":" in item.device else f"{item.device}:0"
        log.info("%s: (%s): %s%s", item.name, item.op_type, _LOCAL_TASK, device)


# Ops whose CPU kernels make float32 GEMMs that actorflow's SGEMM may take (kernels/cpu/blas.py)
_MATMUL_OPS = {"MatMul": "transpose_a", "_FusedMatMul": "transpose_a", "BatchMatMul": "adj_x",
               "BatchMatMulV2": "adj_x", "BatchMatMulV3": "adj_x"}
_CONV_OPS = frozenset({"Conv2D", "_FusedConv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"})


def _may_use_sgemm(op) -> bool:
    """Whether `op` makes a float32 product that blas.matmul could give actorflow's SGEMM: a
    convolution, or a product that blas.wide takes (its dimensions as far as the graph knows them)."""
    from actorflow.graph import dtypes
    from actorflow.kernels.cpu import blas
    flag = _MATMUL_OPS.get(op.type)
    if (flag is None and op.type not in _CONV_OPS) or not op.outputs or op.outputs[0].dtype != dtypes.float32:
        return False
    if flag is None:
        return True
    out, a = op.outputs[0].shape, op.inputs[0].shape
    if out.ndims is None or out.ndims < 2 or a.ndims is None or a.ndims < 2:
        return True
    m, n = out.as_list()[-2:]
    try:
        k = a.as_list()[-2] if op.get_attr(flag) else a.as_list()[-1]
    except (KeyError, ValueError):
        k = None
    return blas.wide(m, n, k)


def _prepare_gemm(ops) -> None:
    """Loads actorflow's SGEMM (blas.prepare) when one of `ops` may take it (`_may_use_sgemm`): a
    session's graph's ops when it is created, and each plan's (for ops added since), so that its load
    (0.05-0.1 s, and numba's start where nothing else has imported numba yet) is part of the session's
    setup, not of its first step. A graph of numpy kernels and small products never imports numba
    for it."""
    from actorflow.kernels.cpu import blas
    if not blas.settled() and any(_may_use_sgemm(op) for op in ops):
        blas.prepare()


class LocalBackend:
    """Runs a session's steps on this process's runtime; the session's variables live in its
    container (TF 1.x: a local session owns its state).

    A backend is what a Session talks to: `build(plan, timeout) -> executable`,
    `run(exe, feed_values, timeout, trace=None) -> values`, `await arun(...)`,
    `tracer(exe, level)` (what `run` takes as `trace`), `fill_metadata(tracer, run_metadata)` and
    `close()`. The remote one (a cluster's master, actorflow/cluster/remote.py) is installed by the
    cluster layer with `set_remote_backend`.

    A plan of cheap pure CPU kernels (`Executable.sync`, actors/sync_step.py) runs straight through
    in the calling thread, without the round trip to the runtime's loop. A pure plan whose kernels
    are worth the pool runs through too, off the loop: in the calling thread of `run` (without a
    deadline), and for `arun` as one task on a pool thread (`_offload`). A traced step, and a
    `run` with a deadline whose kernels turn out expensive, run on the actors. A training plan
    without control flow (`SyncTrainProgram`) also runs in the calling thread of `run`; for `arun`,
    one that only reads its variables runs on the loop while its kernels are cheap and as one pool
    task otherwise, and one that updates them runs on the actors."""

    def __init__(self, graph, config):
        self.rt = default_runtime()
        self.container = ResourceContainer()
        self.config = config
        _prepare_gemm(graph.get_operations())

    def build(self, plan, timeout=None):
        inline = (getattr(self.config, "inter_op_parallelism_threads", 0) or 0) < 0
        _prepare_gemm(plan.ops)
        exec_plan = lower(plan, None, LowerOptions.from_config(self.config))
        if getattr(self.config, "log_device_placement", False) or _log_device_placement:
            _log_placement(exec_plan)
        return Executable(self.rt, exec_plan, self.container, inline=inline)

    def tracer(self, exe, level):
        from actorflow.actors.tracing import StepTracer
        return StepTracer(exe, level, "/job:localhost/replica:0/task:0/device:CPU:0")

    @staticmethod
    def fill_metadata(tracer, run_metadata) -> None:
        from actorflow.actors.tracing import step_stats_from_dict
        if tracer.result is not None:
            run_metadata.step_stats = step_stats_from_dict(tracer.result)

    def _launch(self, exe, feed_values, done, timeout, holder, tracer=None, sync=True):
        """On the runtime loop: start a step, arm its deadline. A plan of cheap pure kernels runs
        straight through here (unless `sync` is False: the caller tried that already); a plan that
        only computes, and cannot run here, runs as one task on a pool thread (`_offload`)."""
        if sync and tracer is None and exe.sync is not None:
            try:
                results = exe.run_sync(feed_values, on_loop=True)
            except Exception as e:  # noqa: BLE001
                done(None, e)
                return
            if results is not None:
                done(results, None)
                return
        if tracer is None and exe.whole:
            self._offload(exe, feed_values, done, timeout, holder)
            return
        self._start(exe, feed_values, done, timeout, holder, tracer)

    def _start(self, exe, feed_values, done, timeout, holder, tracer=None):
        """On the runtime loop: start a step on the actors and arm its deadline."""
        loop = self.rt.loop
        handle = None

        def finished(results, error):
            if handle is not None:
                handle.cancel()
            done(results, error)

        try:
            step = exe.start(feed_values, finished, trace=tracer)
        except Exception as e:  # noqa: BLE001
            done(None, e)
            return
        holder.append(step)
        if timeout is not None and not step.finished:
            handle = loop.call_later(timeout, step.fail, errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout:g} s waiting for step {step.step_id} to finish"))

    def _offload(self, exe, feed_values, done, timeout, holder):
        """On the runtime loop: one step of a plan that only computes (no variable updates) as one
        task on a pool thread (`Executable.run_whole`), its big kernels split over the pool's idle
        threads; `done` is called on the loop. A deadline answers DeadlineExceededError at once;
        the task, which changes nothing, ends on its own and its result is dropped. When the step
        cannot run through (its variables are busy with another step) it goes to the actors."""
        loop = self.rt.loop
        handle = None
        ended = False

        def end(results, error):
            nonlocal ended
            if ended:
                return
            ended = True
            if handle is not None:
                handle.cancel()
            if results is None and error is None:
                self._start(exe, feed_values, done, timeout, holder)
            else:
                done(results, error)

        def task():
            try:
                results, error = exe.run_whole(feed_values), None
            except Exception as e:  # noqa: BLE001 - the failing op's error, for the caller
                results, error = None, e
            try:
                loop.call_soon_threadsafe(end, results, error)
            except RuntimeError:          # the runtime's loop closed meanwhile: nobody is waiting
                pass

        try:
            self.rt.pool.submit(task)
        except RuntimeError as e:         # the pool is shut down (the runtime is closing)
            done(None, errors.CancelledError(None, None, f"Step not run: {e}"))
            return
        if timeout is not None:
            handle = loop.call_later(timeout, end, None, errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout:g} s waiting for the step to finish"))

    def run(self, exe, feed_values, timeout, trace=None):
        rt = self.rt
        if rt.in_loop():
            raise RuntimeError("Session.run() was called on the actorflow runtime's own event loop; "
                               "use `await sess.arun(...)` there.")
        if exe.tiered and exe.tier_due():
            exe.tier_up()                 # in the caller's thread, between steps
        if trace is None and exe.sync is not None:
            # A plan of cheap pure kernels: run here, without the round trip through the loop.
            results = exe.run_sync(feed_values)
            if results is not None:
                return results
            if timeout is None and exe.whole and not exe.sync.stateful:
                # Pure kernels worth the pool: here too, split over the pool's idle threads.
                return exe.run_whole(feed_values)
        cf = concurrent.futures.Future()

        def done(results, error):
            if error is not None:
                cf.set_exception(error)
            else:
                cf.set_result(results)

        holder: list = []
        rt.loop.call_soon_threadsafe(self._launch, exe, feed_values, done, timeout, holder, trace, False)
        try:
            return cf.result()
        except BaseException as e:
            if not isinstance(e, Exception):      # KeyboardInterrupt and the like: abandon the step
                rt.loop.call_soon_threadsafe(lambda: holder and holder[0].fail(
                    errors.CancelledError(None, None, "Step cancelled by the caller")))
            raise

    async def arun(self, exe, feed_values, timeout, trace=None):
        rt = self.rt
        loop = asyncio.get_running_loop()
        if exe.tiered and exe.tier_due():
            await asyncio.to_thread(exe.tier_up)      # never on an event loop
        fut = loop.create_future()
        holder: list = []
        if loop is rt.loop:
            if trace is None and exe.sync is not None:
                # What the actors would run inline in one callback anyway, minus the messages.
                results = exe.run_sync(feed_values, on_loop=True)
                if results is not None:
                    return results

            def done(results, error):
                if not fut.done():
                    (fut.set_exception(error) if error is not None else fut.set_result(results))
            self._launch(exe, feed_values, done, timeout, holder, trace, False)
        else:
            def _set(results, error):
                if not fut.done():
                    (fut.set_exception(error) if error is not None else fut.set_result(results))

            def done(results, error):
                try:
                    loop.call_soon_threadsafe(_set, results, error)
                except RuntimeError:      # the caller's loop closed meanwhile: nobody is waiting
                    pass
            rt.loop.call_soon_threadsafe(self._launch, exe, feed_values, done, timeout, holder, trace)
        try:
            return await fut
        except asyncio.CancelledError:
            rt.call_soon(lambda: holder and holder[0].fail(errors.CancelledError(None, None, "Step cancelled by the caller")))
            raise

    def close(self) -> None:
        self.container.clear()


# Installed by actorflow.cluster (`import actorflow` does it): (target, graph, config) -> backend.
_remote_backend = None
# Installed by actorflow.config: () -> the ConfigProto a session made without one uses (TF 2's
# Session takes context.context().config: what tf.config set).
_default_config = None


def set_remote_backend(factory) -> None:
    """Installs the backend of sessions with a `target` (the cluster layer's master)."""
    global _remote_backend
    _remote_backend = factory


class Session:
    """Runs fetches of a graph (tf.compat.v1.Session).

    `run` blocks the calling thread; `await arun(...)` never blocks the caller's event loop. Several
    runs may be in flight at once. Local sessions own their variables' state (as in TF 1.x); with a
    cluster `target`, state lives on the parameter servers and is shared by every client.
    """

    def __init__(self, target="", graph: Graph | None = None, config: ConfigProto | None = None):
        self._graph = graph if graph is not None else get_default_graph()
        self._config = config or (_default_config() if _default_config is not None else ConfigProto())
        self._target = target or ""
        self._closed = False
        self._cache: dict = {}
        self._cache_lock = threading.Lock()
        self._signatures: dict = {}       # _signature_key -> (executable, rebuild, ((feed position, tensor)...))
        if self._target:
            if _remote_backend is None:
                raise errors.UnimplementedError(
                    None, None, f"Session target {self._target!r} needs the cluster layer: import actorflow "
                    "(or actorflow.cluster) before creating the session")
            self._backend = _remote_backend(self._target, self._graph, self._config)
        else:
            self._backend = LocalBackend(self._graph, self._config)
        self._default_cm = None

    # -- properties -----------------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def graph_def(self):
        """The session's graph as a GraphDef (tf.Session.graph_def: `graph.as_graph_def()`)."""
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> str:
        return self._target

    def list_devices(self):
        from actorflow.scheduler.devices import local_devices
        return local_devices()

    # -- preparation -------------------------------------------------------------------------------
    def _prepare(self, fetches, feed_dict, timeout=None):
        """(executable, rebuild, feed values) of one run. What depends only on the signature (the
        fetches and the feed_dict's keys, in order) is looked up once and kept, as TF's
        `make_callable` keeps it: a repeated run only converts its feed values."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        key = _signature_key(fetches, feed_dict)
        if key is not None:
            sig = self._signatures.get(key)
            if sig is not None:
                exe, rebuild, feeds = sig
                if not feeds:
                    return exe, rebuild, []
                values = list(feed_dict.values())
                return exe, rebuild, [_convert_feed(t, values[p]) for p, t in feeds]
        g = self._graph
        rebuild, fetch_tensors, targets = self._fetch_structure(fetches)
        feed_tensors = []
        feed_values = []
        feeds = []                 # (position in feed_dict, tensor): what a repeated run converts
        if feed_dict:
            for pos, (key_, value) in enumerate(feed_dict.items()):
                if isinstance(key_, tuple):
                    feeds = None   # a structure fed leaf by leaf: not kept
                for k, v in _feed_items([(key_, value)]):
                    try:
                        t = g.as_graph_element(k, allow_operation=False)
                    except (KeyError, ValueError, TypeError) as e:
                        raise FeedError(None, None, f"Cannot interpret feed_dict key {k!r} as a Tensor: {e}") from None
                    if t in feed_tensors:
                        continue
                    feed_tensors.append(t)
                    feed_values.append(_convert_feed(t, v))
                    if feeds is not None:
                        feeds.append((pos, t))
        exe = self._executable(fetch_tensors, targets, feed_tensors, timeout)
        rebuild = self._wrap_fetches(rebuild, fetch_tensors)
        if key is not None and feeds is not None:
            if len(self._signatures) >= _MAX_SIGNATURES:
                self._signatures.clear()
            self._signatures[key] = (exe, rebuild, tuple(feeds))
        return exe, rebuild, feed_values

    def _fetch_structure(self, fetches):
        """(rebuild, fetched tensors with None for ops, target ops) of `fetches`."""
        elements: list = []
        rebuild = _flatten_fetches(fetches, self._graph, elements)
        fetch_tensors = []
        targets = []
        for el in elements:
            if isinstance(el, Operation):
                fetch_tensors.append(None)
                if el not in targets:
                    targets.append(el)
            else:
                fetch_tensors.append(el)
        return rebuild, fetch_tensors, targets

    def _wrap_fetches(self, rebuild, fetch_tensors):
        """`rebuild`, first turning the values of fetched tensors whose OpDef says `fetch_as` (a
        session handle's) into what it gives."""
        special = [(i, t) for i, t in enumerate(fetch_tensors)
                   if t is not None and t.op.op_def.fetch_as is not None and t.value_index == 0]
        if not special:
            return rebuild

        def wrapped(values):
            values = list(values)
            for i, t in special:
                values[i] = t.op.op_def.fetch_as(values[i], t, self)
            return rebuild(values)
        return wrapped

    def _executable(self, fetch_tensors, targets, feed_tensors, timeout=None):
        """The executable of one (fetches, targets, feeds), lowered and built once."""
        key = (tuple(fetch_tensors), tuple(targets), tuple(feed_tensors))
        exe = self._cache.get(key)
        if exe is None:
            g = self._graph
            with clock.holding(self._cache_lock):
                exe = self._cache.get(key)
                if exe is None:
                    with clock.holding(g._lock):
                        plan = make_plan(g, feed_tensors, fetch_tensors, targets)
                        # Registering with a cluster's tasks ends at the step's deadline.
                        exe = self._backend.build(plan, timeout)
                    self._cache[key] = exe
        return exe

    def _timeout(self, options, timeout):
        if timeout is not None:
            return timeout
        if options is not None and getattr(options, "timeout_in_ms", 0):
            return options.timeout_in_ms / 1000.0
        if self._config.operation_timeout_in_ms:
            return self._config.operation_timeout_in_ms / 1000.0
        return None

    @staticmethod
    def _finish_values(values, options=None):
        """Fetched values for the caller: read-only buffers copied, GPU arrays copied to the host
        unless `RunOptions(output_device="gpu")` asks to keep them as CuPy arrays, scalars as numpy
        scalars (bytes for strings), as TF 1.x returns them."""
        keep_gpu = options is not None and getattr(options, "output_device", "cpu") == "gpu"
        out = []
        for v in values:
            if not keep_gpu and not isinstance(v, np.ndarray) and hasattr(v, "__cuda_array_interface__"):
                v = v.get()
            if isinstance(v, np.ndarray):
                if v.ndim == 0:
                    # A scalar fetches as a numpy scalar (np.float32, ...) and a scalar string as
                    # bytes, as in TF; either way a copy, never a view of runtime state.
                    v = v.item() if v.dtype == object else v[()]
                elif not v.flags.writeable:
                    v = v.copy()
            out.append(v)
        return out

    # -- running -----------------------------------------------------------------------------------
    def _tracer(self, exe, options, run_metadata):
        """What the backend traces the step into when `options` ask for a trace and
        `run_metadata` can take it, else None."""
        level = getattr(options, "trace_level", 0) if options is not None else 0
        if not level or run_metadata is None:
            return None
        return self._backend.tracer(exe, level)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None, timeout=None):
        """Runs the ops needed for `fetches` and returns their values in the same structure.
        With `options=RunOptions(trace_level=...)` and a `run_metadata`, fills
        `run_metadata.step_stats` (TF's StepStats) as TF does."""
        timeout = self._timeout(options, timeout)
        exe, rebuild, feed_values = self._prepare(fetches, feed_dict, timeout)
        return self._run_prepared(exe, rebuild, feed_values, options, run_metadata, timeout)

    def _run_prepared(self, exe, rebuild, feed_values, options, run_metadata, timeout):
        """One blocking step of a prepared signature: what `run` and `make_callable`'s callables share."""
        tracer = self._tracer(exe, options, run_metadata)
        if tracer is None:
            results = self._backend.run(exe, feed_values, timeout)
        else:
            results = self._backend.run(exe, feed_values, timeout, trace=tracer)
            self._backend.fill_metadata(tracer, run_metadata)
        return rebuild(self._finish_values(results, options))

    async def arun(self, fetches, feed_dict=None, options=None, run_metadata=None, timeout=None):
        """Like `run`, for programs with their own event loop; never blocks that loop."""
        timeout = self._timeout(options, timeout)
        sim = clock.installed()
        if sim is not None:
            # sim: preparing may register with the tasks, a blocking call: a simulated thread does it
            exe, rebuild, feed_values = await sim.run_blocking(self._prepare, fetches, feed_dict, timeout)
        else:
            exe, rebuild, feed_values = self._prepare(fetches, feed_dict, timeout)
        tracer = self._tracer(exe, options, run_metadata)
        if tracer is None:
            results = await self._backend.arun(exe, feed_values, timeout)
        else:
            results = await self._backend.arun(exe, feed_values, timeout, trace=tracer)
            self._backend.fill_metadata(tracer, run_metadata)
        return rebuild(self._finish_values(results, options))

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A Python callable running one step: `fetches` (any structure `run` takes) with the
        elements of `feed_list` (feed_dict keys) fed from its positional arguments, returning what
        `run(fetches, ...)` returns (tf.compat.v1.Session.make_callable).

        The fetches and feeds are interpreted here, once, and the step is compiled at the first
        call; a call then only converts its feed values and runs. With `accept_options=True` (or a
        `feed_list`, as in TF) the callable also takes `options=` and `run_metadata=` keywords, as
        `run` does. Differs from TF: a call with more or fewer arguments than `feed_list` has
        raises a TypeError (TF ignores extra arguments)."""
        if feed_list is not None and not isinstance(feed_list, (list, tuple)):
            raise TypeError(f"Argument `feed_list` must be a list or tuple. Received: feed_list={feed_list}")
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        return _Callable(self, fetches, list(feed_list or ()), accept_options or feed_list is not None)

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Releases this session's executables and (local) variable state."""
        if self._closed:
            return
        self._closed = True
        self._cache.clear()
        self._signatures.clear()
        self._backend.close()

    def as_default(self):
        """A context manager making this the default session of the thread (tf.Session.as_default)."""
        return default_session(self)

    def __enter__(self):
        self._default_cm = self.as_default()
        self._graph_cm = self._graph.as_default()
        self._graph_cm.__enter__()
        self._default_cm.__enter__()
        return self

    def __exit__(self, *exc):
        self._default_cm.__exit__(*exc)
        self._graph_cm.__exit__(*exc)
        self.close()
        return False

    async def __aenter__(self):
        return self.__enter__()

    async def __aexit__(self, *exc):
        return self.__exit__(*exc)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class _Callable:
    """What `Session.make_callable` returns: a step of one fetch/feed signature, interpreted once."""

    __slots__ = ("sess", "fetches", "feed_list", "accept_options", "rebuild", "fetch_tensors", "targets",
                 "feed_tensors", "exe", "generic")

    def __init__(self, sess, fetches, feed_list, accept_options):
        self.sess = sess
        self.fetches = fetches
        self.feed_list = feed_list
        self.accept_options = accept_options
        self.rebuild, self.fetch_tensors, self.targets = sess._fetch_structure(fetches)
        g = sess._graph
        tensors = []
        # A structure key (a tuple of tensors, fed leaf by leaf) or a tensor listed twice: each call
        # goes through `run`'s feed_dict handling, which already knows those cases.
        self.generic = any(isinstance(k, tuple) for k in feed_list)
        if not self.generic:
            for k in feed_list:
                try:
                    t = g.as_graph_element(k, allow_operation=False)
                except (KeyError, ValueError, TypeError) as e:
                    raise FeedError(None, None, f"Cannot interpret feed_list element {k!r} as a Tensor: {e}") from None
                if t in tensors:
                    self.generic = True
                    break
                tensors.append(t)
        self.feed_tensors = tensors
        self.exe = None

    def __call__(self, *args, options=None, run_metadata=None):
        feed_list = self.feed_list
        if len(args) != len(feed_list):
            raise TypeError(f"This callable feeds {len(feed_list)} tensors "
                            f"({', '.join(getattr(k, 'name', str(k)) for k in feed_list) or 'none'}); "
                            f"it was called with {len(args)} arguments")
        if (options is not None or run_metadata is not None) and not self.accept_options:
            raise TypeError("This callable was made without accept_options=True: it takes no options or run_metadata")
        sess = self.sess
        if self.generic:
            return sess.run(self.fetches, dict(zip(feed_list, args)), options=options, run_metadata=run_metadata)
        if sess._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        timeout = sess._timeout(options, None)
        feed_values = [_convert_feed(t, v) for t, v in zip(self.feed_tensors, args)]
        exe = self.exe
        if exe is None:
            exe = self.exe = sess._executable(self.fetch_tensors, self.targets, self.feed_tensors, timeout)
        return sess._run_prepared(exe, self.rebuild, feed_values, options, run_metadata, timeout)

    def __repr__(self):
        return f"<make_callable of {self.fetches!r}, feeding {self.feed_list!r}>"


class InteractiveSession(Session):
    """A session that installs itself as the default (tf.compat.v1.InteractiveSession)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        push_default_session(self)

    def close(self):
        super().close()
        pop_default_session(self)
