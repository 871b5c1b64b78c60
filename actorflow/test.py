"""tf.test for TF-1.x style test files: `TestCase` (unittest with sessions on a fresh default graph
and TF's array assertions), `main`, the device queries, the numeric gradient checker
(`compute_gradient`, `compute_gradient_error`, as TF 1.x's gradient_checker), `Benchmark`,
`create_local_cluster` and `assert_equal_graph_def`.

A test file written for TF 1.x (`class MyTest(tf.test.TestCase)` ... `tf.test.main()`) runs
unchanged with `import actorflow as tf`, under `python file.py` and under pytest.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import tempfile
import time
import unittest
from collections.abc import Mapping
from unittest import mock  # noqa: F401  (tf.test.mock is unittest.mock)

import numpy as np

from actorflow import errors
from actorflow.actors.session import Session
from actorflow.graph import graph as _graph
from actorflow.graph.graph import Tensor, get_default_session
from actorflow.graph.indexed_slices import IndexedSlices

__all__ = ["Benchmark", "TestCase", "assert_equal_graph_def", "benchmark_config", "compute_gradient",
           "compute_gradient_error", "create_local_cluster", "disable_with_predicate", "get_temp_dir",
           "gpu_device_name", "is_built_with_cuda", "is_built_with_gpu_support", "is_built_with_rocm",
           "is_built_with_xla", "is_cpu_target_available", "is_gpu_available", "main", "mock",
           "with_eager_op_as_function", "run_benchmarks"]

DEFAULT_GRAPH_SEED = 87654321        # TF's random_seed.DEFAULT_GRAPH_SEED
_temp_dir = None


# -- devices -----------------------------------------------------------------------------------

def _gpus() -> list:
    from actorflow.scheduler.devices import local_devices
    return [d for d in local_devices() if d.device_type == "GPU"]


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None) -> bool:
    """Whether a GPU device is usable (tf.test.is_gpu_available): CuPy sees a CUDA device whose
    compute capability is at least `min_cuda_compute_capability` ((major, minor)) when given."""
    gpus = _gpus()
    if not gpus:
        return False
    if min_cuda_compute_capability is None:
        return True
    import cupy
    for i in range(len(gpus)):
        props = cupy.cuda.runtime.getDeviceProperties(i)
        if (props["major"], props["minor"]) >= tuple(min_cuda_compute_capability):
            return True
    return False


def gpu_device_name() -> str:
    """The name of the first GPU device ('/device:GPU:0'), or '' when there is none (tf.test.gpu_device_name)."""
    return "/device:GPU:0" if _gpus() else ""


def is_built_with_cuda() -> bool:
    """Whether the CUDA kernels can load: CuPy is installed (tf.test.is_built_with_cuda)."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


is_built_with_gpu_support = is_built_with_cuda


def is_built_with_rocm() -> bool:
    """Always False: actorflow has no ROCm kernels (tf.test.is_built_with_rocm)."""
    return False


def is_built_with_xla() -> bool:
    """True: `af.xla.experimental.jit_scope` and `global_jit_level` compile clusters (with numba,
    not XLA) (tf.test.is_built_with_xla)."""
    return True


def is_cpu_target_available(cpu) -> bool:
    """Whether the named CPU target is available to the JIT (tf.test.is_cpu_target_available): only
    the host CPU ('x86' or 'arm' by this machine)."""
    import platform
    machine = platform.machine().lower()
    want = str(cpu).lower()
    return want in machine or (want == "x86" and machine in ("x86_64", "amd64", "i686"))


def get_temp_dir() -> str:
    """A temporary directory for this process's tests, made on first use (tf.test.get_temp_dir)."""
    global _temp_dir
    if _temp_dir is None:
        _temp_dir = tempfile.mkdtemp(prefix="actorflow_test_")
    return _temp_dir


def main(argv=None):
    """Runs the tests of `__main__` with unittest (tf.test.main); exits with its status. As TF's
    (absltest's), the command line's flags defined with tf.flags / absl are parsed first and the rest
    goes to unittest: a test module whose tests read FLAGS runs as `python -m test --output_dir=...`.
    With `--benchmarks=REGEX` (or `all`) it runs instead the `benchmark*` methods of the Benchmark
    subclasses in `__main__` whose `module.Class.method` name REGEX searches, as TF's does."""
    import sys

    from absl import flags as absl_flags
    argv = list(sys.argv if argv is None else argv)
    flags = [a for a in argv[1:] if a.startswith("--benchmarks=")]
    if flags:
        run_benchmarks(flags[-1].split("=", 1)[1], sys.modules["__main__"])
        return None
    try:
        argv = absl_flags.FLAGS(argv, known_only=True)
    except absl_flags.Error as e:
        raise SystemExit(f"{argv[0]}: {e}") from None
    return unittest.main(module="__main__", argv=argv)


def run_benchmarks(regex: str, module) -> list:
    """Runs the matching `benchmark*` methods of `module`'s Benchmark subclasses (see main); returns
    their full names, in order."""
    pattern = None if regex == "all" else re.compile(regex)
    ran = []
    for cls in [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Benchmark)]:
        if cls is Benchmark:
            continue
        for attr in sorted(n for n in dir(cls) if n.startswith("benchmark") and callable(getattr(cls, n))):
            full = f"{cls.__module__}.{cls.__name__}.{attr}"
            if pattern is None or pattern.search(full):
                getattr(cls(), attr)()
                ran.append(full)
    return ran


def disable_with_predicate(pred, skip_message):
    """A decorator that skips the test when `pred()` is true (tf.test.disable_with_predicate)."""
    def decorator(func):
        def wrapper(self, *args, **kwargs):
            if pred():
                self.skipTest(skip_message)
            return func(self, *args, **kwargs)
        wrapper.__name__ = func.__name__
        wrapper.__doc__ = func.__doc__
        return wrapper
    return decorator


def with_eager_op_as_function(cls=None, only_as_function=False):
    """Returns the test class unchanged: actorflow has no eager mode to run ops as functions in
    (tf.test.with_eager_op_as_function)."""
    if cls is None:
        return lambda c: c
    return cls


def assert_equal_graph_def(actual, expected, checkpoint_v2=False, hash_table_shared_name=False):
    """Asserts that two GraphDefs hold the same nodes, whatever their order (tf.test.assert_equal_graph_def).

    `checkpoint_v2` ignores the random `_temp_<uuid>/part` constants of Savers; `hash_table_shared_name`
    ignores the `shared_name` attribute of hash tables. Raises TypeError when either is not a GraphDef
    and AssertionError naming the first difference otherwise."""
    from actorflow import protos
    graph_def_cls = protos.graph_pb2.GraphDef
    for name, g in (("actual", actual), ("expected", expected)):
        if not isinstance(g, graph_def_cls):
            raise TypeError(f"Expected tf.GraphDef for {name}, got {type(g).__name__}")
    a, e = _node_map(actual, checkpoint_v2, hash_table_shared_name), _node_map(expected, checkpoint_v2,
                                                                                hash_table_shared_name)
    missing, extra = sorted(set(e) - set(a)), sorted(set(a) - set(e))
    if missing or extra:
        raise AssertionError(f"GraphDefs differ: nodes only in expected {missing}, only in actual {extra}")
    for name in sorted(a):
        if a[name] != e[name]:
            raise AssertionError(f"GraphDefs differ at node {name!r}:\nactual:\n{a[name]}\nexpected:\n{e[name]}")


def _node_map(graph_def, checkpoint_v2, hash_table_shared_name) -> dict:
    out = {}
    for node in graph_def.node:
        node = type(node).FromString(node.SerializeToString())
        if hash_table_shared_name and "HashTable" in node.op and "shared_name" in node.attr:
            del node.attr["shared_name"]
        if checkpoint_v2 and node.op == "Const" and "value" in node.attr:
            sv = node.attr["value"].tensor.string_val
            if sv and re.fullmatch(rb"_temp_[0-9a-f]{32}/part", sv[0]):
                del node.attr["value"]
        out[node.name] = str(node)
    return out


def create_local_cluster(num_workers, num_ps, protocol="grpc", worker_config=None, ps_config=None):
    """Starts `num_workers` worker and `num_ps` ps servers on loopback ports in this process and
    returns (workers, ps_servers) (tf.test.create_local_cluster). They share a random token."""
    import secrets

    from actorflow.cluster.local import free_ports
    from actorflow.cluster.server import Server
    if num_workers < 1 or num_ps < 0:
        raise ValueError(f"create_local_cluster needs num_workers >= 1 and num_ps >= 0, got {num_workers}, {num_ps}")
    ports = free_ports(num_workers + num_ps)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports[:num_workers]]}
    if num_ps:
        spec["ps"] = [f"127.0.0.1:{p}" for p in ports[num_workers:]]
    token = secrets.token_hex(16)
    workers = [Server(spec, "worker", i, config=worker_config, token=token) for i in range(num_workers)]
    ps = [Server(spec, "ps", i, config=ps_config, token=token) for i in range(num_ps)]
    return workers, ps


# -- the gradient checker ----------------------------------------------------------------------

_FLOATS = ("float16", "float32", "float64", "complex64", "complex128")


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if not isinstance(shape, int) else shape


def _feeds(extra, new):
    out = dict(extra or {})
    out.update(new)
    return out


def _theoretical_jacobian(sess, x, x_shape, x_data, dy, dy_shape, dx, extra):
    if x.dtype.is_complex:
        x_shape = tuple(x_shape) + (2,)
    dy_factor = 2 if dy.dtype.is_complex else 1
    x_size, x_val_size = _size(x_shape), _size(tuple(x_shape)[1:])
    dy_size = _size(dy_shape) * dy_factor
    jacobian = np.zeros((x_size, dy_size), dtype=x.dtype.real_dtype.as_numpy_dtype)
    dy_data = np.zeros(dy_shape, dtype=dy.dtype.as_numpy_dtype)
    dy_flat = dy_data.ravel().view(dy.dtype.real_dtype.as_numpy_dtype)
    for col in range(dy_size):
        dy_flat[col] = 1
        if isinstance(dx, IndexedSlices):
            idx, vals = sess.run([dx.indices, dx.values], feed_dict=_feeds(extra, {x: x_data, dy: dy_data}))
            for i, v in zip(idx, vals):
                jacobian[i * x_val_size:(i + 1) * x_val_size, col] += np.ravel(v)
        else:
            back = sess.run(dx, feed_dict=_feeds(extra, {x: x_data, dy: dy_data}))
            jacobian[:, col] = np.asarray(back).ravel().view(jacobian.dtype)
        dy_flat[col] = 0
    if not dy_size:
        back = sess.run(dx, feed_dict=_feeds(extra, {x: x_data, dy: dy_data}))
        if back.shape != x_data.shape:
            raise ValueError(f"Empty gradient has wrong shape: expected {x_data.shape}, got {back.shape}")
        if np.any(back):
            raise ValueError("Empty tensor with nonzero gradients")
    return jacobian


def _numeric_jacobian(sess, x, x_shape, x_data, y, y_shape, delta, extra):
    x_size = _size(x_shape) * (2 if x.dtype.is_complex else 1)
    y_size = _size(y_shape) * (2 if y.dtype.is_complex else 1)
    x_dtype, y_dtype = x.dtype.real_dtype.as_numpy_dtype, y.dtype.real_dtype.as_numpy_dtype
    x_data = np.asarray(x_data, dtype=x.dtype.as_numpy_dtype)
    scale = np.asarray(2 * delta, dtype=y_dtype)[()]
    jacobian = np.zeros((x_size, y_size), dtype=x_dtype)
    for row in range(x_size):
        x_pos, x_neg = x_data.copy(), x_data.copy()
        x_pos.ravel().view(x_dtype)[row] += delta
        y_pos = sess.run(y, feed_dict=_feeds(extra, {x: x_pos}))
        x_neg.ravel().view(x_dtype)[row] -= delta
        y_neg = sess.run(y, feed_dict=_feeds(extra, {x: x_neg}))
        jacobian[row, :] = np.asarray((y_pos - y_neg) / scale).ravel().view(y_dtype)
    return jacobian


def _dx_and_dy(x, y, y_shape):
    for what, t in (("x", x), ("y", y)):
        if t.dtype.base_dtype.name not in _FLOATS:
            raise TypeError(f"compute_gradient does not support type {t.dtype.name} for {what} ({t.name})")
    from actorflow.graph.gradients import gradients
    from actorflow.graph.ops.constant import placeholder
    with x.graph.as_default():
        dy = placeholder(y.dtype, list(y_shape), name="compute_gradient_dy")
    (dx,) = gradients(y, x, dy)
    if dx is None:
        raise ValueError(f"compute_gradient: {y.name} does not depend on {x.name} (no gradient)")
    return dx, dy


def _one_gradient(sess, x, x_shape, dx, y, y_shape, dy, x_init_value, delta, extra):
    if x_init_value is not None:
        if list(x_shape) != list(np.shape(x_init_value)):
            raise ValueError(f"compute_gradient: x_shape = {list(x_shape)}, but x_init_value has shape "
                             f"{list(np.shape(x_init_value))}")
        x_data = np.asarray(x_init_value)
    else:
        x_data = np.random.random_sample(x_shape).astype(x.dtype.as_numpy_dtype)
        if x.dtype.is_complex:
            x_data.imag = np.random.random_sample(x_shape)
    return (_theoretical_jacobian(sess, x, x_shape, x_data, dy, y_shape, dx, extra),
            _numeric_jacobian(sess, x, x_shape, x_data, y, y_shape, delta, extra))


def _session():
    sess = get_default_session()
    if sess is None:
        raise ValueError("compute_gradient needs a default session: call it inside `with tf.Session():` "
                         "or `with self.cached_session():`")
    return sess


def compute_gradient(x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None,
                     extra_feed_dict=None):
    """The theoretical (symbolic) and numeric (central differences of step `delta`) Jacobians of y with
    respect to x, each [x_size, y_size], in the default session (TF 1.x's tf.test.compute_gradient).

    `x` may be a list (with a list of shapes and of initial values): then one (theoretical, numeric)
    pair per x. A complex x or y doubles its dimension (real parts, then imaginary). Without
    `x_init_value`, x is fed uniform [0, 1) values from numpy's global generator, as in TF.
    """
    sess = _session()
    if isinstance(x, list):
        pairs = [_dx_and_dy(xi, y, y_shape) for xi in x]
        for init in init_targets or ():
            sess.run(init)
        inits = x_init_value if x_init_value is not None else [None] * len(x)
        return [_one_gradient(sess, xi, si, dxi, y, y_shape, dyi, vi, delta, extra_feed_dict)
                for xi, si, (dxi, dyi), vi in zip(x, x_shape, pairs, inits)]
    dx, dy = _dx_and_dy(x, y, y_shape)
    for init in init_targets or ():
        sess.run(init)
    return _one_gradient(sess, x, x_shape, dx, y, y_shape, dy, x_init_value, delta, extra_feed_dict)


def compute_gradient_error(x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None,
                           extra_feed_dict=None) -> float:
    """The largest absolute difference between the theoretical and numeric Jacobians of
    `compute_gradient` (over every x when x is a list); NaN when either has a NaN
    (tf.test.compute_gradient_error)."""
    grad = compute_gradient(x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict)
    pairs = grad if isinstance(grad, list) else [grad]
    error = 0.0
    for jt, jn in pairs:
        if jt.size or jn.size:
            diff = np.fabs(jt - jn)
            if np.isnan(diff).any():
                return float("nan")
            error = max(error, float(diff.max()))
    return error


# -- TestCase ----------------------------------------------------------------------------------

def _where(cond):
    return np.where(cond) if np.ndim(cond) else cond


class TestCase(unittest.TestCase):
    """unittest.TestCase with TF's helpers (tf.test.TestCase, graph mode).

    Each test starts on a fresh default graph with numpy's and Python's generators seeded and the
    graph seed set (TF's DEFAULT_GRAPH_SEED). `session()` opens an af Session on the default graph
    (or `graph`) and makes both the defaults; `cached_session()`/`test_session()` reuse one session
    per test, closed in tearDown. `use_gpu`/`force_gpu` are taken; `force_gpu` places the block's
    ops on /device:GPU:0 and skips no test (a GPU-less run fails as TF's does).
    """

    _set_default_seed = True

    def __init__(self, methodName="runTest"):
        super().__init__(methodName)
        self._cached_session = None
        self._cached_graph = None
        self._tempdir = None

    def setUp(self):
        super().setUp()
        self._clear_cached_session()
        random.seed(DEFAULT_GRAPH_SEED)
        np.random.seed(DEFAULT_GRAPH_SEED)
        _graph._default_stack().clear()
        _graph.reset_default_graph()
        if self._set_default_seed:
            from actorflow.graph.ops.random_ops import set_random_seed
            set_random_seed(DEFAULT_GRAPH_SEED)
        if self.id().endswith(".test_session"):
            self.skipTest("Not a test.")

    def tearDown(self):
        self._clear_cached_session()
        super().tearDown()

    def _clear_cached_session(self):
        if self._cached_session is not None:
            self._cached_session.close()
            self._cached_session = None
            self._cached_graph = None

    def get_temp_dir(self) -> str:
        """A directory unique to this test (the same one on every call within it)."""
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(dir=get_temp_dir(), prefix=re.sub(r"\W", "_", self.id())[-80:])
        return self._tempdir

    def create_tempdir(self) -> str:
        return tempfile.mkdtemp(dir=self.get_temp_dir())

    def create_tempfile(self, file_path=None, content=None, mode="w"):
        path = os.path.join(self.get_temp_dir(), file_path) if file_path else tempfile.mkstemp(
            dir=self.get_temp_dir())[1]
        if content is not None:
            with open(path, mode) as f:
                f.write(content)
        return path

    # -- sessions --
    @contextlib.contextmanager
    def _defaults(self, sess, use_gpu, force_gpu):
        from actorflow.graph.graph import device
        with sess.graph.as_default(), sess.as_default():
            if force_gpu:
                with device("/device:GPU:0"):
                    yield sess
            elif not use_gpu:
                with device("/device:CPU:0"):
                    yield sess
            else:
                yield sess

    @staticmethod
    def _config(config, force_gpu):
        """TF's test sessions: with no config given, ops placed on a GPU fall back to the CPU (soft
        placement) unless the test forces the GPU."""
        if config is None:
            from actorflow.actors.session import ConfigProto
            config = ConfigProto(allow_soft_placement=not force_gpu)
        return config

    @contextlib.contextmanager
    def session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """A new Session on `graph` (default: the default graph), the default session and graph inside
        the block, closed at its end (tf.test.TestCase.session). With no `config`, soft placement is
        on unless `force_gpu`, as in TF."""
        with Session(graph=graph, config=self._config(config, force_gpu)) as sess, \
                self._defaults(sess, use_gpu, force_gpu):
            yield sess

    def _get_cached_session(self, graph, config, force_gpu=False):
        g = graph if graph is not None else _graph.get_default_graph()
        if self._cached_session is None or self._cached_graph is not g:
            self._clear_cached_session()
            self._cached_session = Session(graph=g, config=self._config(config, force_gpu))
            self._cached_graph = g
        return self._cached_session

    @contextlib.contextmanager
    def cached_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """One Session per test (and graph), left open until tearDown (tf.test.TestCase.cached_session)."""
        sess = self._get_cached_session(graph, config, force_gpu)
        with self._defaults(sess, use_gpu, force_gpu):
            yield sess

    @contextlib.contextmanager
    def test_session(self, graph=None, config=None, use_gpu=True, force_gpu=False):
        """The deprecated name of cached_session (a given graph gets a new session, as `session`)."""
        if graph is None:
            with self.cached_session(None, config, use_gpu, force_gpu) as sess:
                yield sess
        else:
            with self.session(graph, config, use_gpu, force_gpu) as sess:
                yield sess

    def evaluate(self, tensors):
        """The values of a Tensor or a nested structure of them, in the default session or a cached one."""
        sess = get_default_session()
        if sess is None:
            with self.test_session() as sess:
                return sess.run(tensors)
        return sess.run(tensors)            # (a SparseTensor's value is a SparseTensorValue)

    def checkedThread(self, target, args=None, kwargs=None):  # noqa: N802 (TF's name)
        """A thread whose exception fails the test at join() (tf.test.TestCase.checkedThread)."""
        return _CheckedThread(self, target, args, kwargs)

    # -- array assertions --
    @staticmethod
    def _is_graph_tensor(a) -> bool:
        from actorflow.graph.sparse_tensor import SparseTensor
        return isinstance(a, (Tensor, SparseTensor, IndexedSlices)) or hasattr(a, "_as_graph_element")

    def _get_ndarray(self, a):
        if self._is_graph_tensor(a):
            a = self.evaluate(a)
        if not isinstance(a, np.ndarray):
            try:
                return np.array(a)
            except ValueError as e:
                if "inhomogeneous shape" in str(e):
                    return np.array(a, dtype=object)
                raise
        return a

    def evaluate_if_both_tensors(self, a, b):
        if self._is_graph_tensor(a) and self._is_graph_tensor(b):
            return self.evaluate((a, b))
        return a, b

    def _assert_array_like_all_close(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        a, b = self.evaluate_if_both_tensors(a, b)
        a, b = self._get_ndarray(a), self._get_ndarray(b)
        if a.shape != b.shape and (b.ndim <= 3 or b.size < 500):
            shape_msg = f"Shape mismatch: expected {a.shape}, got {b.shape} with contents {b}."
        else:
            shape_msg = f"Shape mismatch: expected {a.shape}, got {b.shape}."
        self.assertEqual(a.shape, b.shape, shape_msg)
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            msgs = [msg]
            cond = np.logical_or(np.abs(a - b) > atol + rtol * np.abs(b), np.isnan(a) != np.isnan(b))
            if a.ndim:
                x, y = a[_where(cond)], b[_where(cond)]
                msgs.append(f"not close where = {_where(cond)}")
            else:
                x, y = a, b
            msgs += [f"not close lhs = {x}", f"not close rhs = {y}", f"not close dif = {np.abs(x - y)}",
                     f"not close tol = {atol + rtol * np.abs(y)}", f"dtype = {a.dtype}, shape = {a.shape}"]
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg="\n".join(map(str, msgs)),
                                       equal_nan=True)

    def _assert_all_close_recursive(self, a, b, rtol, atol, path, msg):
        path_str = ("[" + "][".join(str(p) for p in path) + "]") if path else ""
        msg = msg or ""
        if hasattr(a, "_asdict"):
            a = a._asdict()
        if hasattr(b, "_asdict"):
            b = b._asdict()
        a_is_dict = isinstance(a, Mapping)
        if a_is_dict != isinstance(b, Mapping):
            raise ValueError(f"Can't compare dict to non-dict, a{path_str} vs b{path_str}. {msg}")
        if a_is_dict:
            self.assertCountEqual(a.keys(), b.keys(), msg=f"mismatched keys: a{path_str} has keys {a.keys()}, "
                                                          f"but b{path_str} has keys {b.keys()}. {msg}")
            for k in a:
                self._assert_all_close_recursive(a[k], b[k], rtol, atol, path + [k], msg)
        elif isinstance(a, (list, tuple)):
            try:
                a2, b2 = self.evaluate_if_both_tensors(a, b)
                self._assert_array_like_all_close(
                    self._get_ndarray(a2), self._get_ndarray(b2), rtol, atol,
                    f"Mismatched value: a{path_str} is different from b{path_str}. {msg}")
            except (ValueError, TypeError, NotImplementedError):
                if len(a) != len(b):
                    raise ValueError(f"Mismatched length: a{path_str} has {len(a)} items, but b{path_str} has "
                                     f"{len(b)} items. {msg}") from None
                for i, (ai, bi) in enumerate(zip(a, b)):
                    self._assert_all_close_recursive(ai, bi, rtol, atol, path + [str(i)], msg)
        else:
            try:
                self._assert_array_like_all_close(a, b, rtol, atol,
                                                  f"Mismatched value: a{path_str} is different from b{path_str}. {msg}")
            except TypeError as e:
                e.args = (f"{e.args[0] if e.args else ''} : Error: a{path_str} has {type(a)}, but b{path_str} "
                          f"has {type(b)}. {msg}",) + e.args[1:]
                raise

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802 (TF's names)
        """a and b (arrays, Tensors, or nested dicts/lists/tuples/namedtuples of them) agree within
        |a - b| <= atol + rtol * |b| everywhere, NaNs in the same places."""
        self._assert_all_close_recursive(a, b, rtol, atol, [], msg)

    def assertAllCloseAccordingToType(self, a, b, rtol=1e-6, atol=1e-6, float_rtol=1e-6, float_atol=1e-6,  # noqa: N802
                                      half_rtol=1e-3, half_atol=1e-3, bfloat16_rtol=1e-2, bfloat16_atol=1e-2,
                                      msg=None):
        """assertAllClose with the tolerances widened for float32/complex64 and float16 operands."""
        a, b = self.evaluate_if_both_tensors(a, b)
        a, b = self._get_ndarray(a), self._get_ndarray(b)
        if np.float32 in (a.dtype, b.dtype) or np.complex64 in (a.dtype, b.dtype):
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if np.float16 in (a.dtype, b.dtype):
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertNotAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        try:
            self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)
        except AssertionError:
            return
        raise AssertionError(f"The two values are close at all elements. {msg or ''}")

    def assertAllEqual(self, a, b, msg=None):  # noqa: N802
        """a and b have the same shape and values (NaN equals NaN for floats)."""
        msg = msg or ""
        a, b = self.evaluate_if_both_tensors(a, b)
        a, b = self._get_ndarray(a), self._get_ndarray(b)
        if b.ndim <= 3 or b.size < 500:
            self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}. "
                                               f"Contents: {b!r}. \n{msg}.")
        else:
            self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}. {msg}")
        same = a == b
        if a.dtype.kind == "f":
            same = np.logical_or(same, np.logical_and(np.isnan(a), np.isnan(b)))
        if not np.all(same):
            msgs = [msg]
            diff = np.logical_not(same)
            if a.ndim:
                x, y = a[_where(diff)], b[_where(diff)]
                msgs.append(f"not equal where = {_where(diff)}")
            else:
                x, y = a, b
            msgs += [f"not equal lhs = {x!r}", f"not equal rhs = {y!r}"]
            if a.dtype.kind != b.dtype.kind and {a.dtype.kind, b.dtype.kind} <= {"U", "S", "O"}:
                a = np.array([i.encode() if isinstance(i, str) else i for i in a.flat]).reshape(a.shape)
                b = np.array([i.encode() if isinstance(i, str) else i for i in b.flat]).reshape(b.shape)
            np.testing.assert_array_equal(a, b, err_msg="\n".join(msgs))

    def assertNotAllEqual(self, a, b, msg=None):  # noqa: N802
        try:
            self.assertAllEqual(a, b)
        except AssertionError:
            return
        raise AssertionError(f"The two values are equal at all elements. {msg or ''}")

    def assertAllGreater(self, a, comparison_target):  # noqa: N802
        a, comparison_target = self.evaluate_if_both_tensors(a, comparison_target)
        self.assertGreater(np.min(self._get_ndarray(a)), comparison_target)

    def assertAllLess(self, a, comparison_target):  # noqa: N802
        a, comparison_target = self.evaluate_if_both_tensors(a, comparison_target)
        self.assertLess(np.max(self._get_ndarray(a)), comparison_target)

    def assertAllGreaterEqual(self, a, comparison_target):  # noqa: N802
        a, comparison_target = self.evaluate_if_both_tensors(a, comparison_target)
        self.assertGreaterEqual(np.min(self._get_ndarray(a)), comparison_target)

    def assertAllLessEqual(self, a, comparison_target):  # noqa: N802
        a, comparison_target = self.evaluate_if_both_tensors(a, comparison_target)
        self.assertLessEqual(np.max(self._get_ndarray(a)), comparison_target)

    @staticmethod
    def _format_subscripts(subscripts, value, limit=10, indent=2):
        prefix = " " * indent
        if np.ndim(value) == 0:
            return [prefix + "[0] : " + str(value)]
        subs = np.transpose(subscripts)
        lines = [prefix + str(s) + " : " + str(value[tuple(s)]) for s in subs[:limit]]
        if len(subs) > limit:
            lines.append(prefix + "...")
        return lines

    def assertAllInRange(self, target, lower_bound, upper_bound, open_lower_bound=False,  # noqa: N802
                         open_upper_bound=False):
        """Every element lies in [lower, upper] (open ends as asked); NaN fails, as does a non-numeric dtype."""
        target = self._get_ndarray(target)
        if not (np.issubdtype(target.dtype, np.floating) or np.issubdtype(target.dtype, np.integer)):
            raise AssertionError(f"The value of {target} does not have an ordered numeric type, instead it has "
                                 f"type: {target.dtype}")
        nans = np.where(np.isnan(target)) if target.ndim else (np.isnan(target),)
        if np.ndim(target) and np.size(nans[0]) or not np.ndim(target) and np.isnan(target):
            n = len(nans[0]) if np.ndim(target) else 1
            raise AssertionError(f"{n} of the {np.size(target)} element(s) are NaN. Subscripts(s) and value(s) of "
                                 "the NaN element(s):\n" + "\n".join(self._format_subscripts(nans, target)))
        range_str = (("(" if open_lower_bound else "[") + str(lower_bound) + ", " + str(upper_bound)
                     + (")" if open_upper_bound else "]"))
        bad = np.less_equal(target, lower_bound) if open_lower_bound else np.less(target, lower_bound)
        bad = np.logical_or(bad, np.greater_equal(target, upper_bound) if open_upper_bound
                            else np.greater(target, upper_bound))
        if np.any(bad):
            subs = np.where(bad) if np.ndim(bad) else ()
            n = len(subs[0]) if np.ndim(bad) else 1
            raise AssertionError(f"{n} of the {np.size(target)} element(s) are outside the range {range_str}. "
                                 "Subscript(s) and value(s) of the offending elements:\n"
                                 + "\n".join(self._format_subscripts(subs, target)))

    def assertAllInSet(self, target, expected_set):  # noqa: N802
        target = self._get_ndarray(target)
        diff = np.setdiff1d(target.flatten(), list(expected_set))
        if np.size(diff):
            raise AssertionError(f"{np.size(diff)} unique element(s) are not in the set {expected_set}: {diff}")

    def assertDTypeEqual(self, target, expected_dtype):  # noqa: N802
        """The value's numpy dtype is `expected_dtype` (a numpy dtype, or an af DType)."""
        target = self._get_ndarray(target)
        want = expected_dtype.as_numpy_dtype if hasattr(expected_dtype, "as_numpy_dtype") else expected_dtype
        self.assertEqual(target.dtype, want)

    def assertNear(self, f1, f2, err, msg=None):  # noqa: N802
        """|f1 - f2| <= err."""
        f1, f2 = np.squeeze(f1), np.squeeze(f2)
        if f1 != f2:
            diff = math.fabs(f1 - f2)
            suffix = f" ({msg})" if msg is not None else ""
            self.assertTrue(diff <= err, f"{f1:f} != {f2:f} +/- {err:f} (difference: {diff:g}){suffix}")

    def assertArrayNear(self, farray1, farray2, err, msg=None):  # noqa: N802
        """Equal lengths, and assertNear for each pair of elements."""
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertNDArrayNear(self, ndarray1, ndarray2, err, msg=None):  # noqa: N802
        """The L2 norm of the difference is below err."""
        self.assertTrue(np.linalg.norm(np.asarray(ndarray1) - np.asarray(ndarray2)) < err, msg=msg)

    def assertShapeEqual(self, input_a, input_b, msg=None):  # noqa: N802
        """Two arrays or Tensors (their static shapes) have the same shape; TypeError for anything else."""
        for name, v in (("input_a", input_a), ("input_b", input_b)):
            if not isinstance(v, (np.ndarray, np.generic, Tensor)):
                raise TypeError(f"{name} must be a Numpy ndarray, Numpy scalar, or a Tensor. "
                                f"Instead received {type(v)}")
        sa = input_a.get_shape().as_list() if isinstance(input_a, Tensor) else input_a.shape
        sb = input_b.get_shape().as_list() if isinstance(input_b, Tensor) else input_b.shape
        self.assertAllEqual(sa, sb, msg=msg)

    def assertDeviceEqual(self, device1, device2, msg=None):  # noqa: N802
        from actorflow.graph.device_spec import DeviceSpecV1
        d1 = DeviceSpecV1.from_string(device1 or "").to_string() if isinstance(device1, str) else device1.to_string()
        d2 = DeviceSpecV1.from_string(device2 or "").to_string() if isinstance(device2, str) else device2.to_string()
        self.assertEqual(d1, d2, f"Devices {d1} and {d2} are not equal. {msg}")

    def assertStartsWith(self, actual, expected_start, msg=None):  # noqa: N802
        if not actual.startswith(expected_start):
            self.fail(f"Did not start with '{expected_start}'" + (f" : {msg}" if msg else ""))

    def assertProtoEquals(self, expected_message_maybe_ascii, message, msg=None):  # noqa: N802
        """`message` equals the expected proto, given as a message or its text format."""
        if isinstance(expected_message_maybe_ascii, str):
            from google.protobuf import text_format
            expected = type(message)()
            text_format.Merge(expected_message_maybe_ascii, expected)
        else:
            expected = expected_message_maybe_ascii
        self.assertEqual(str(expected), str(message), msg)

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type, expected_err_re_or_predicate):  # noqa: N802
        """The block raises `exception_type` and the predicate holds for it (a regex is searched for in
        its message; an OpError's op name is searched too)."""
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:
            def predicate(e):
                if isinstance(e, errors.OpError):
                    text = str(e.message)
                    if getattr(e, "op", None) is not None:
                        text += "\nCaused by: " + str(getattr(e.op, "name", e.op))
                else:
                    text = str(e)
                return re.search(expected_err_re_or_predicate, text)
        try:
            yield
        except Exception as e:  # noqa: BLE001 (any exception is judged below)
            if not isinstance(e, exception_type) or not predicate(e):
                raise AssertionError(f"Exception of type {type(e)}: {e}") from e
        else:
            self.fail(exception_type.__name__ + " not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):  # noqa: N802
        """The block raises an af.errors.OpError matching the regex or predicate."""
        return self.assertRaisesWithPredicateMatch(errors.OpError, expected_err_re_or_predicate)

    def assertRaisesIncompatibleShapesError(self, exception_type=errors.InvalidArgumentError):  # noqa: N802
        return self.assertRaisesWithPredicateMatch(
            exception_type, r"Incompatible shapes|Dimensions must be equal|required broadcastable shapes")


class _CheckedThread:
    def __init__(self, testcase, target, args=None, kwargs=None):
        import threading
        self._testcase = testcase
        self._target, self._args, self._kwargs = target, tuple(args or ()), dict(kwargs or {})
        self._thread = threading.Thread(target=self._run)
        self._exception = None

    def _run(self):
        try:
            self._target(*self._args, **self._kwargs)
        except Exception as e:  # noqa: BLE001 (re-raised in the test's thread at join)
            self._exception = e

    def start(self):
        self._thread.start()

    def join(self):
        self._thread.join()
        if self._exception is not None:
            self._testcase.fail(f"Error in checkedThread: {self._exception}")

    def is_alive(self):
        return self._thread.is_alive()


# -- benchmarks --------------------------------------------------------------------------------

def benchmark_config():
    """The session config for benchmarks (tf.test.benchmark_config): the default ConfigProto."""
    from actorflow.actors.session import ConfigProto
    return ConfigProto()


class Benchmark:
    """A benchmark class (tf.test.Benchmark): `run_op_benchmark` times session runs of an op;
    `report_benchmark` logs one entry and, when $TEST_REPORT_FILE_PREFIX is set, writes it as JSON to
    `<prefix><name>` (TF writes a BenchmarkEntries proto there)."""

    def _get_name(self, overwrite_name=None):
        import inspect
        if overwrite_name:
            return overwrite_name
        for frame in inspect.stack()[1:]:
            if frame.function.startswith("benchmark"):
                return f"{type(self).__name__}.{frame.function}"
        return type(self).__name__

    def report_benchmark(self, iters=None, cpu_time=None, wall_time=None, throughput=None, extras=None,
                         name=None, metrics=None):
        """Records one benchmark entry (see the class docstring); returns it as a dict."""
        entry = {"name": self._get_name(name), "iters": iters, "cpu_time": cpu_time, "wall_time": wall_time,
                 "throughput": throughput, "extras": dict(extras or {}), "metrics": list(metrics or [])}
        import logging
        logging.getLogger(__name__).info("benchmark %s", entry)
        prefix = os.environ.get("TEST_REPORT_FILE_PREFIX")
        if prefix:
            path = prefix + re.sub(r"[^\w.]", "__", entry["name"])
            with open(path, "w") as f:
                json.dump(entry, f, default=float)
        return entry

    def run_op_benchmark(self, sess, op_or_tensor, feed_dict=None, burn_iters=2, min_iters=10,
                         store_trace=False, store_memory_usage=True, name=None, extras=None, mbs=0):
        """Runs `op_or_tensor` `burn_iters` times untimed, then `min_iters` times timed; reports and
        returns {'iters', 'wall_time' (median seconds per run), 'extras', 'name'} (plus throughput in
        MB/s when `mbs` is given)."""
        if min_iters < 1:
            raise ValueError(f"run_op_benchmark: min_iters must be at least 1, got {min_iters}")
        for _ in range(burn_iters):
            sess.run(op_or_tensor, feed_dict=feed_dict)
        times = []
        for _ in range(min_iters):
            t0 = time.perf_counter()
            sess.run(op_or_tensor, feed_dict=feed_dict)
            times.append(time.perf_counter() - t0)
        wall = float(np.median(times))
        throughput = mbs / wall if mbs else None
        entry = self.report_benchmark(iters=min_iters, wall_time=wall, throughput=throughput, extras=extras,
                                      name=self._get_name(name))
        out = {"iters": min_iters, "wall_time": wall, "extras": entry["extras"], "name": entry["name"]}
        if throughput is not None:
            out["throughput"] = throughput
        return out

    def evaluate(self, tensors):
        """Values of `tensors` in the default session, or a new one on their graph."""
        sess = get_default_session()
        if sess is None:
            with Session() as s:
                return s.run(tensors)
        return sess.run(tensors)

    @classmethod
    def is_abstract(cls) -> bool:
        """Whether this class defines no benchmark method (TF's registry skips those)."""
        return not any(n.startswith("benchmark") for n in dir(cls))

