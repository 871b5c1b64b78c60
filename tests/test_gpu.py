"""GPU kernels and placement (issue 9). Every test here needs CuPy and a CUDA device and is skipped
without them; the device-assignment rules themselves are tested without a GPU in test_devices.py.

Each op case builds the same graph twice, once pinned to the CPU and once on the GPU, feeds the
same inputs and compares the results within float32 tolerance.
"""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.scheduler.devices import gpu_count

pytestmark = pytest.mark.skipif(gpu_count() == 0, reason="needs CuPy and a CUDA GPU")

RNG = np.random.default_rng(0)


def f32(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _run(build, inputs, device, fetch_grads=False):
    g = af.Graph()
    with g.as_default():
        phs = [af.placeholder(af.as_dtype(v.dtype), v.shape, name=f"in{i}") for i, v in enumerate(inputs)]
        with af.device(device):
            out = build(*phs)
            if fetch_grads:
                outs = [o for o in _flat_tensors(out) if o.dtype.is_floating]
                ys = af.add_n([af.reduce_sum(o * af.constant(np.linspace(0.5, 1.5, max(1, int(np.prod(
                    o.shape.as_list()))), dtype=o.dtype.np).reshape(o.shape.as_list()))) for o in outs])
                grads = af.gradients(ys, [p for p, v in zip(phs, inputs) if v.dtype.kind == "f"])
                out = (out, grads)
        with af.Session(graph=g) as sess:
            feed = dict(zip(phs, inputs))
            exe = sess._prepare(out, feed)[0]
            return sess.run(out, feed), exe.devices


def _flat_tensors(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat_tensors(v)]
    return [x]


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [np.asarray(x)]


def check(build, *inputs, grads=False, rtol=2e-4, atol=2e-5):
    cpu, _ = _run(build, inputs, "/cpu:0", grads)
    gpu, devices = _run(build, inputs, "/gpu:0", grads)
    assert devices is not None and any(d.startswith("GPU") for d in devices.values()), "nothing ran on the GPU"
    for a, b in zip(_flat(cpu), _flat(gpu)):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


UNARY = {
    "neg": af.negative, "exp": af.exp, "log": lambda x: af.log(af.abs(x) + 0.1), "log1p": lambda x: af.log1p(af.abs(x)),
    "expm1": af.expm1, "sin": af.sin, "cos": af.cos, "sqrt": lambda x: af.sqrt(af.abs(x) + 0.1),
    "square": af.square, "abs": af.abs, "sign": af.sign, "reciprocal": af.reciprocal, "floor": af.floor,
    "ceil": af.ceil, "tanh": af.tanh, "rsqrt": lambda x: af.rsqrt(af.abs(x) + 0.1), "round": af.round,
    "relu": af.nn.relu, "relu6": lambda x: af.nn.relu6(x * 4), "elu": af.nn.elu, "softplus": af.nn.softplus,
    "sigmoid": af.sigmoid, "isnan": af.is_nan, "isfinite": af.is_finite, "l2_loss": af.nn.l2_loss,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    differentiable = name not in ("isnan", "isfinite", "sign", "floor", "ceil", "round")
    check(UNARY[name], f32(64, 33), grads=differentiable)


BINARY = {
    "add": af.add, "sub": af.subtract, "mul": af.multiply, "div": af.divide, "pow": lambda x, y: af.pow(af.abs(x) + 0.5, y),
    "maximum": af.maximum, "minimum": af.minimum, "equal": af.equal, "less": af.less, "greater_equal": af.greater_equal,
    "floordiv": af.floordiv, "floormod": af.floormod, "squared_difference": af.squared_difference,
    "div_no_nan": lambda x, y: af.div_no_nan(x, af.nn.relu(y)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name):
    differentiable = name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "squared_difference")
    check(BINARY[name], f32(16, 8), f32(8), grads=differentiable, rtol=1e-3)


def test_cast_select_addn_logical():
    check(lambda x, y: (af.cast(x * 3, af.int32), af.where(x > y, x, y), af.add_n([x, y, x]),
                        af.logical_and(x > 0, y > 0), af.logical_not(x > 0)), f32(10, 4), f32(10, 4))


@pytest.mark.parametrize("axis,keep", [(None, False), (0, False), (1, True), ([0, 1], False), (-1, False)])
def test_reductions(axis, keep):
    x = f32(12, 7)
    check(lambda a: (af.reduce_sum(a, axis, keepdims=keep), af.reduce_mean(a, axis, keepdims=keep),
                     af.reduce_max(a, axis, keepdims=keep), af.reduce_min(a, axis, keepdims=keep),
                     af.reduce_prod(a * 0.5, axis, keepdims=keep), af.reduce_all(a > -1.5, axis, keepdims=keep),
                     af.reduce_any(a > 1.5, axis, keepdims=keep)), x, rtol=1e-3)


def test_argmax_argmin_and_reduction_gradients():
    check(lambda a: (af.argmax(a, 1), af.argmin(a, 0)), f32(9, 5))
    check(lambda a: (af.reduce_sum(a, 1), af.reduce_mean(a, 0), af.reduce_max(a, 1)), f32(9, 5), grads=True)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(ta, tb):
    a = f32(*((40, 30) if ta else (30, 40)))
    b = f32(*((20, 40) if tb else (40, 20)))
    check(lambda x, y: af.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b, grads=True, rtol=1e-3, atol=1e-4)


def test_matmul_float64_and_batch():
    a = RNG.standard_normal((17, 9))
    b = RNG.standard_normal((9, 5))
    check(lambda x, y: af.matmul(x, y), a, b, grads=True, rtol=1e-9, atol=1e-9)
    check(lambda x, y: af.matmul(x, y, adjoint_b=True), f32(3, 6, 4), f32(3, 5, 4), rtol=1e-3, atol=1e-4)


def test_softmax_family():
    x = f32(32, 10)
    labels = RNG.integers(0, 10, 32).astype(np.int64)
    dense = np.eye(10, dtype=np.float32)[labels]
    check(lambda a: (af.nn.softmax(a), af.nn.log_softmax(a)), x, grads=True, rtol=1e-3, atol=1e-5)
    check(lambda a, lab: af.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=a), x, labels, grads=True)
    check(lambda a, lab: af.nn.softmax_cross_entropy_with_logits(labels=lab, logits=a), x, dense, grads=True)
    # Many classes: one warp walks the row in strides of 32.
    check(lambda a, lab: af.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=a), f32(4, 1000),
          RNG.integers(0, 1000, 4).astype(np.int32), grads=True)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add(fmt):
    x = f32(4, 3, 5, 6) if fmt == "NHWC" else f32(4, 6, 3, 5)
    check(lambda a, b: af.nn.bias_add(a, b, data_format=fmt), x, f32(6), grads=True)


@pytest.mark.parametrize("padding,strides,dilations,k", [("SAME", 1, 1, 5), ("VALID", 1, 1, 3), ("SAME", 2, 1, 3),
                                                         ("VALID", 2, 1, 4), ("SAME", 1, 2, 3), ("VALID", 1, 1, 1)])
def test_conv2d_and_gradients(padding, strides, dilations, k):
    x = f32(3, 11, 10, 4)
    f = f32(k, k, 4, 6)
    check(lambda a, w: af.nn.conv2d(a, w, strides=strides, padding=padding, dilations=dilations), x, f, grads=True,
          rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("padding,k,s", [("VALID", 2, 2), ("SAME", 3, 2), ("SAME", 3, 1), ("VALID", 3, 2)])
def test_pooling_and_gradients(padding, k, s):
    x = f32(2, 9, 8, 3)
    check(lambda a: (af.nn.max_pool2d(a, k, s, padding), af.nn.avg_pool2d(a, k, s, padding)), x, grads=True)


def test_array_ops():
    x = f32(4, 6, 5)
    check(lambda a: (af.reshape(a, [6, -1]), af.transpose(a, [2, 0, 1]), af.expand_dims(a, 1),
                     af.squeeze(af.expand_dims(a, 0)), af.concat([a, a * 2], 1), af.split(a, 3, axis=1),
                     af.stack([a, a], 2), af.unstack(a, axis=1), af.slice(a, [1, 2, 0], [2, -1, 3]),
                     a[1:, ::2, 3], af.tile(a, [1, 2, 1]), af.pad(a, [[1, 0], [0, 2], [1, 1]]),
                     af.broadcast_to(a[:, :1, :], [4, 6, 5]), af.zeros_like(a), af.ones_like(a),
                     af.fill([2, 3], 1.5), af.identity(a), af.stop_gradient(a)), x, grads=True)


def test_gather_scatter_segment_onehot():
    params = f32(10, 4)
    idx = np.array([3, 0, 9, 3, 5], np.int64)
    check(lambda p, i: (af.gather(p, i), af.gather(p, i[:3], axis=0), af.gather(af.transpose(p), i[:2], axis=1),
                        af.unsorted_segment_sum(p[:5], i, 12)), params, idx, grads=True)
    check(lambda i: af.one_hot(i, 10, on_value=2.0, off_value=-1.0), np.array([[1, 4], [9, 0]], np.int64))
    check(lambda d, p: af.dynamic_partition(d, p, 3), f32(6, 2), np.array([0, 2, 1, 0, 2, 2], np.int32))


def test_random_ops_statistics_and_seeds():
    g = af.Graph()
    with g.as_default(), af.device("/gpu:0"):
        af.set_random_seed(7)
        n = af.random_normal([200000])
        u = af.random_uniform([200000])
        t = af.truncated_normal([200000])
        i = af.random_uniform([1000], 0, 10, dtype=af.int64)
    with af.Session(graph=g) as s:
        a, b, c, d = s.run([n, u, t, i])
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1) < 0.02
    assert 0 <= b.min() and b.max() < 1 and abs(b.mean() - 0.5) < 0.01
    assert np.abs(c).max() <= 2.0 and abs(c.std() - 0.88) < 0.02
    assert d.min() >= 0 and d.max() < 10 and d.dtype == np.int64
    with af.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(n), a)      # a seeded op repeats its stream in a new session


def _train(opt_fn, device, steps=4, sparse=False):
    g = af.Graph()
    with g.as_default(), af.device(device):
        x = af.constant(np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4))
        w = af.Variable(np.full((4, 3), 0.3, np.float32), name="w")
        emb = af.Variable(np.arange(20, dtype=np.float32).reshape(10, 2) / 10, name="emb")
        rows = af.gather(emb, af.constant([1, 7, 4], dtype=af.int64))
        loss = af.reduce_sum(af.square(af.matmul(x, w) - 1.0)) + (af.reduce_sum(af.square(rows)) if sparse else 0.0)
        train = opt_fn().minimize(loss)
        with af.Session(graph=g) as s:
            s.run(af.global_variables_initializer())
            for _ in range(steps):
                s.run(train)
            return s.run([w, emb, loss])


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adagrad", "rmsprop", "centered", "adam"])
@pytest.mark.parametrize("sparse", [False, True])
def test_optimizers_match_cpu(name, sparse):
    opts = {"sgd": lambda: af.train.GradientDescentOptimizer(0.05),
            "momentum": lambda: af.train.MomentumOptimizer(0.05, 0.9),
            "nesterov": lambda: af.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
            "adagrad": lambda: af.train.AdagradOptimizer(0.1),
            "rmsprop": lambda: af.train.RMSPropOptimizer(0.01, momentum=0.5),
            "centered": lambda: af.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True),
            "adam": lambda: af.train.AdamOptimizer(0.05)}
    cpu = _train(opts[name], "/cpu:0", sparse=sparse)
    gpu = _train(opts[name], "/gpu:0", sparse=sparse)
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_variable_updates_on_gpu():
    def build():
        v = af.Variable(np.arange(12, dtype=np.float32).reshape(6, 2), name="v")
        i = af.constant([0, 2, 2], dtype=af.int64)
        u = af.constant(np.full((3, 2), 2.0, np.float32))
        return v, [af.assign_add(v, af.ones_like(v)), af.scatter_add(v, i, u), af.scatter_sub(v, i[:1], u[:1]),
                   af.scatter_mul(v, i, u), af.scatter_max(v, i, u * 10), af.scatter_min(v, i[1:], u[1:]),
                   af.scatter_update(v, i[:2], u[:2] * 3), af.assign_sub(v, af.ones_like(v))]
    res = {}
    for dev in ("/cpu:0", "/gpu:0"):
        g = af.Graph()
        with g.as_default(), af.device(dev):
            v, ops = build()
            with af.Session(graph=g) as s:
                s.run(v.initializer)
                res[dev] = []
                for op in ops:
                    s.run(op)
                    res[dev].append(s.run(v))
    for a, b in zip(res["/cpu:0"], res["/gpu:0"]):
        np.testing.assert_allclose(b, a)


def test_default_placement_copies_and_output_device():
    import cupy as cp
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 8])
        w = af.Variable(np.ones((8, 4), np.float32))
        y = af.matmul(x, w)
        n = af.shape(y)[0] * 2                     # integer bookkeeping stays on the host
        with af.Session(graph=g) as s:
            s.run(af.global_variables_initializer())
            feed = {x: np.ones((3, 8), np.float32)}
            exe = s._prepare([y, n], feed)[0]
            assert exe.devices[y.op] == "GPU:0" and exe.devices[w.op] == "GPU:0"
            assert exe.devices[n.op] == "CPU"
            out, count = s.run([y, n], feed)
            assert isinstance(out, np.ndarray) and count == 6
            np.testing.assert_allclose(out, 8.0)
            on_gpu = s.run(y, feed, options=af.RunOptions(output_device="gpu"))
            assert isinstance(on_gpu, cp.ndarray)
            # A CuPy feed stays on the GPU.
            np.testing.assert_allclose(s.run(y, {x: cp.ones((2, 8), cp.float32)}), 8.0)


def test_soft_placement_for_ops_without_gpu_kernels(tmp_path):
    g = af.Graph()
    with g.as_default():
        with af.device("/gpu:0"):
            v = af.Variable(np.arange(6, dtype=np.float32), name="v")
            q = af.FIFOQueue(4, af.float32, shapes=[[6]])
            enq = q.enqueue(v * 2)
            deq = q.dequeue()
        with af.Session(graph=g) as s:
            s.run(v.initializer)
            with pytest.raises(af.errors.InvalidArgumentError, match="no supported kernel for GPU"):
                s.run(enq)
        with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
            s.run(v.initializer)
            s.run(enq)
            np.testing.assert_allclose(s.run(deq), np.arange(6) * 2)
            saver = af.train.Saver([v])
            path = saver.save(s, str(tmp_path / "ckpt"))
            s.run(v.assign(af.zeros([6])))
            saver.restore(s, path)
            np.testing.assert_allclose(s.run(v), np.arange(6))


def test_while_loop_and_cond_on_gpu():
    def build(x):
        i0 = af.constant(0)

        def body(i, acc):
            return i + 1, af.cond(i < 3, lambda: af.tanh(af.matmul(acc, x)), lambda: acc * 0.5)
        _, out = af.while_loop(lambda i, acc: i < 6, body, [i0, x])
        return out
    check(build, f32(5, 5) * 0.3, grads=True, rtol=1e-3, atol=1e-5)


def test_mlp_and_convnet_training_match_cpu():
    def mlp(device):
        g = af.Graph()
        with g.as_default():
            rng = np.random.default_rng(1)
            xs = rng.standard_normal((64, 20)).astype(np.float32)
            ys = rng.integers(0, 5, 64).astype(np.int64)
            with af.device(device):
                x = af.placeholder(af.float32, [None, 20])
                y = af.placeholder(af.int64, [None])
                h = af.layers.dense(x, 32, activation=af.nn.relu, kernel_initializer=af.constant_initializer(
                    rng.standard_normal((20, 32)).astype(np.float32) * 0.2))
                img = af.reshape(h, [-1, 4, 8, 1])
                c = af.layers.conv2d(img, 3, 3, padding="same", activation=af.nn.relu,
                                     kernel_initializer=af.constant_initializer(0.1))
                p = af.layers.max_pooling2d(c, 2, 2)
                logits = af.layers.dense(af.layers.flatten(p), 5, kernel_initializer=af.constant_initializer(
                    rng.standard_normal((24, 5)).astype(np.float32) * 0.2))
                loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
                train = af.train.AdamOptimizer(0.01).minimize(loss)
            with af.Session(graph=g) as s:
                s.run(af.global_variables_initializer())
                return [s.run([train, loss], {x: xs, y: ys})[1] for _ in range(30)]
    cpu, gpu = mlp("/cpu:0"), mlp("/gpu:0")
    # Summation order differs between the devices; Adam amplifies it a little over 30 steps.
    np.testing.assert_allclose(gpu, cpu, rtol=1e-2, atol=1e-3)
    assert gpu[-1] < gpu[0] * 0.7
