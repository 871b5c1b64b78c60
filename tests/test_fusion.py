"""Op fusion (actorflow/scheduler/fusion.py) and the fused kernels it runs: which chains fuse, that
fused steps compute what the unfused ones do, that errors still name the original op, and that an
update running on the pool stays atomic for readers (busy variables)."""
import threading

import numpy as np
import pytest

import actorflow as af
from actorflow.actors.pool import KernelPool
from actorflow.graph.ops.math_ops import relu_grad
from actorflow.kernels.registry import get_kernel
from actorflow.scheduler.fusion import find_fusions
from actorflow.scheduler.plan import make_plan
from tests.readers import run_beside_readers


@pytest.fixture(autouse=True)
def _split_small_products(monkeypatch):
    """These tests split products of a few rows: every product is worth splitting here."""
    from actorflow.kernels.cpu import matmul
    monkeypatch.setattr(matmul, "MIN_SPLIT_MACS", 0)


OFF = af.ConfigProto(graph_options=af.GraphOptions(rewrite_options=af.RewriterConfig(remapping=af.RewriterConfig.OFF)))


def _mlp(dtype=af.float32, sizes=(12, 16, 8, 3), seed=0, transpose=False):
    rng = np.random.default_rng(seed)
    x = af.placeholder(dtype, [None, sizes[0]], name="x")
    y = af.placeholder(af.int64, [None], name="y")
    h = x
    for i in range(len(sizes) - 1):
        act = af.nn.relu if i < len(sizes) - 2 else None
        init = af.constant_initializer(rng.standard_normal((sizes[i], sizes[i + 1])) * 0.5)
        h = af.layers.dense(h, sizes[i + 1], activation=act, kernel_initializer=init,
                            bias_initializer=af.constant_initializer(0.1), name=f"l{i}")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    return x, y, h, loss


def _data(n=40, d=12, k=3, dtype=np.float32, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(dtype), rng.integers(0, k, n)


def _plan_fusions(fetches, feeds=(), targets=()):
    g = af.get_default_graph()
    return find_fusions(make_plan(g, list(feeds), list(fetches), list(targets)))


# -- which chains fuse -------------------------------------------------------------------------

def test_mlp_training_step_fuses_layers_and_kernel_updates():
    with af.Graph().as_default():
        x, y, logits, loss = _mlp()
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        fusions = _plan_fusions([loss], [x, y], [train])
        by_type = {}
        for root, f in fusions.items():
            by_type.setdefault(f.type, []).append((root.name, tuple(p.type for p in f.parts)))
        assert sorted(by_type["_FusedMatMul"]) == [("gradients/l0/Relu_grad/ReluGrad", ("MatMul", "ReluGrad")),
                                                   ("gradients/l1/Relu_grad/ReluGrad", ("MatMul", "ReluGrad")),
                                                   ("l0/Relu", ("MatMul", "BiasAdd", "Relu")),
                                                   ("l1/Relu", ("MatMul", "BiasAdd", "Relu")),
                                                   ("l2/BiasAdd", ("MatMul", "BiasAdd"))]
        # The input gradient of l1 and l2 (g @ W^T) masked by the ReLU below: features are the ReLU's output.
        masked = fusions[next(r for r in fusions if r.name == "gradients/l0/Relu_grad/ReluGrad")]
        assert masked.attrs == {"transpose_a": False, "transpose_b": True, "fused_ops": ("ReluGrad",)}
        assert masked.inputs[2].node == "l0/Relu"
        updates = sorted(by_type["_MatMulApplyGradientDescent"])
        assert [n for n, _ in updates] == [f"GradientDescent/update_l{i}/kernel/ApplyGradientDescent"
                                           for i in range(3)]
        assert all(parts == ("MatMul", "ApplyGradientDescent") for _, parts in updates)
        # The update of l1's kernel waits for the backward MatMul reading that kernel (fused with
        # the ReluGrad after it), so that it can write in place; l0's kernel has no such reader (no
        # input gradient for layer 0).
        extra = {r.name: [c.name for c in f.extra_control] for r, f in fusions.items()}
        assert extra["GradientDescent/update_l1/kernel/ApplyGradientDescent"] == ["gradients/l0/Relu_grad/ReluGrad"]
        assert extra["GradientDescent/update_l0/kernel/ApplyGradientDescent"] == []


def test_a_fetched_or_shared_inner_tensor_blocks_fusion():
    with af.Graph().as_default():
        x, y, logits, loss = _mlp()
        g = af.get_default_graph()
        mm0 = g.get_tensor_by_name("l0/MatMul:0")
        ba1 = g.get_tensor_by_name("l1/BiasAdd:0")
        fusions = _plan_fusions([logits, mm0, ba1], [x])
        roots = {r.name: tuple(p.name for p in f.parts) for r, f in fusions.items()}
        # l0's MatMul is fetched: no fusion there. l1's BiasAdd is fetched: MatMul+BiasAdd fuse
        # (BiasAdd is the root and keeps its output), the Relu stays alone.
        assert "l0/Relu" not in roots and "l0/BiasAdd" not in roots
        assert roots["l1/BiasAdd"] == ("l1/MatMul", "l1/BiasAdd")
        assert roots["l2/BiasAdd"] == ("l2/MatMul", "l2/BiasAdd")
        # A MatMul output with a second consumer stays unfused.
        extra = af.reduce_sum(g.get_tensor_by_name("l2/MatMul:0"))
        fusions = _plan_fusions([logits, extra], [x])
        assert "l2/BiasAdd" not in {r.name for r in fusions}


def test_integer_matmul_and_fed_inner_tensors_do_not_fuse():
    with af.Graph().as_default():
        a = af.placeholder(af.int32, [None, 4])
        w = af.constant(np.ones((4, 5), np.int32))
        out = af.nn.relu(af.nn.bias_add(af.matmul(a, w), af.constant(np.ones(5, np.int32))))
        assert _plan_fusions([out], [a]) == {}
    with af.Graph().as_default():
        x, y, logits, loss = _mlp()
        mm = af.get_default_graph().get_tensor_by_name("l0/MatMul:0")
        fusions = _plan_fusions([logits], [x, mm])
        assert "l0/Relu" not in {r.name for r in fusions}


def test_a_matmul_read_twice_or_a_relu_grad_of_a_fetched_product_does_not_fuse():
    with af.Graph().as_default():
        g = af.placeholder(af.float32, [None, 6])
        w = af.constant(np.ones((5, 6), np.float32))
        f = af.placeholder(af.float32, [None, 5])
        mm = af.matmul(g, w, transpose_b=True)
        rg = relu_grad(mm, f)
        fusions = _plan_fusions([rg], [g, f])
        assert [(r.name, tuple(p.type for p in x.parts)) for r, x in fusions.items()] == \
            [(rg.op.name, ("MatMul", "ReluGrad"))]
        assert _plan_fusions([rg, mm], [g, f]) == {}
        assert _plan_fusions([rg, af.reduce_sum(mm)], [g, f]) == {}


# -- fused steps compute what unfused ones do -------------------------------------------------

@pytest.mark.parametrize("dtype", [af.float32, af.float64])
def test_fused_training_matches_unfused(dtype):
    xs, ys = _data(dtype=dtype.np)
    runs = []
    for config in (None, OFF):
        with af.Graph().as_default():
            x, y, logits, loss = _mlp(dtype)
            train = af.train.GradientDescentOptimizer(0.2).minimize(loss)
            with af.Session(config=config) as sess:
                sess.run(af.global_variables_initializer())
                losses = [sess.run([train, loss], {x: xs, y: ys})[1] for _ in range(5)]
                runs.append((losses, sess.run(af.trainable_variables()), sess.run(logits, {x: xs})))
    (l1, v1, o1), (l2, v2, o2) = runs
    tol = 2e-5 if dtype == af.float32 else 1e-12
    np.testing.assert_allclose(l1, l2, rtol=tol)
    for a, b in zip(v1, v2):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    np.testing.assert_allclose(o1, o2, rtol=tol, atol=tol)
    assert l1[-1] < l1[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shape", [(300, 200, 150), (256, 10, 1024), (40, 30, 7)])
def test_matmul_relu_grad_kernel_matches_numpy(dtype, ta, tb, shape):
    m, k, n = shape
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    a_in, b_in = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    features = np.maximum(rng.standard_normal((m, n)), 0).astype(dtype)   # a ReLU's output: many zeros
    features[0, :3] = (np.nan, -0.0, 1.0)
    a[1, :] = np.nan                                                       # NaN gradients stay NaN (* 0 = NaN)
    a_in = a.T.copy() if ta else a
    want = np.multiply(a.astype(np.float64) @ b.astype(np.float64), features > 0)
    attrs = {"transpose_a": ta, "transpose_b": tb, "fused_ops": ("ReluGrad",)}
    kdef = get_kernel("_FusedMatMul")
    results = [kdef.factory(attrs)(a_in, b_in, features)]
    split = kdef.split(attrs)(2, a_in, b_in, features)
    if split is not None:                      # too small to split is fine
        out, thunks = split
        for t in thunks:
            t()
        results.append(out)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for got in results:
        assert got.dtype == dtype and got.shape == (m, n)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    # Unlike shapes take numpy's path, as the unfused ReluGrad does.
    row = features[:1]
    np.testing.assert_allclose(kdef.factory(attrs)(a_in, b_in, row), np.multiply(a @ b, row > 0), rtol=tol,
                               atol=tol * k)
    assert kdef.split(attrs)(2, a_in, b_in, row) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("shape, parts", [((300, 200, 150), 3), ((64, 200, 300), 2), ((256, 784, 1024), 2)])
def test_fused_bias_kernel_in_row_and_column_blocks(dtype, relu, shape, parts):
    """Each block's epilogue (bias, ReLU) covers exactly its rows or columns of the output."""
    m, k, n = shape
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    bias[:3] = (np.nan, -np.inf, 0.0)
    want = a.astype(np.float64) @ b + bias
    if relu:
        want = np.maximum(want, 0)
    attrs = {"transpose_a": False, "transpose_b": False,
             "fused_ops": ("BiasAdd", "Relu") if relu else ("BiasAdd",)}
    kdef = get_kernel("_FusedMatMul")
    out, thunks = kdef.split(attrs)(parts, a, b, bias)
    assert len(thunks) == parts
    for t in reversed(thunks):
        t()
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for got in (out, kdef.factory(attrs)(a, b, bias)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)
        if relu:
            assert not np.signbit(got[~np.isnan(got)]).any()


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_fused_kernels_honour_transposes_and_relu_semantics(ta, tb):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 150)).astype(np.float32)
    a_in, b_in = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    bias = rng.standard_normal(150).astype(np.float32)
    bias[:3] = (np.nan, -np.inf, 0.0)
    want = a.astype(np.float64) @ b + bias
    attrs = {"transpose_a": ta, "transpose_b": tb, "fused_ops": ("BiasAdd", "Relu")}
    kdef = get_kernel("_FusedMatMul")
    whole = kdef.factory(attrs)(a_in, b_in, bias)
    out, thunks = kdef.split(attrs)(3, a_in, b_in, bias)
    for t in thunks:
        t()
    for got in (whole, out):
        np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-4, atol=1e-3)   # NaN stays NaN
        assert not np.signbit(got[~np.isnan(got)]).any()

    var = rng.standard_normal((200, 150)).astype(np.float32)
    g_attrs = {"transpose_a": True, "transpose_b": tb}
    d = rng.standard_normal((300, 150)).astype(np.float32)
    d_in = d.T.copy() if tb else d
    want_var = var - np.float32(0.05) * (a.T.astype(np.float64) @ d)
    k = get_kernel("_MatMulApplyGradientDescent")
    v1 = var.copy()
    assert k.factory(g_attrs)(v1, np.float32(0.05), a[:, :200], d_in) is v1
    v2 = var.copy()
    out, thunks = k.split(g_attrs)(2, v2, 0.05, a[:, :200], d_in)
    for t in thunks:
        t()
    assert out is v2
    np.testing.assert_allclose(v1, want_var, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v2, want_var, rtol=1e-4, atol=1e-4)


def test_fused_layers_run_inside_a_while_loop_and_a_cond():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 6)).astype(np.float32) * 0.3
    b = rng.standard_normal(6).astype(np.float32)
    xs = rng.standard_normal((130, 6)).astype(np.float32)
    def build():
        x = af.placeholder(af.float32, [None, 6])
        p = af.placeholder(af.bool, [])
        W, B = af.constant(w), af.constant(b)

        def layer(h):
            return af.nn.relu(af.nn.bias_add(af.matmul(h, W), B))
        _, looped = af.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, layer(h)), [af.constant(0), x])
        branch = af.cond(p, lambda: layer(x), lambda: x * 2.0)
        return x, p, looped, branch

    results = []
    for config in (None, OFF):
        with af.Graph().as_default():
            x, p, looped, branch = build()
            with af.Session(config=config) as sess:
                results.append([sess.run([looped, branch], {x: xs, p: v}) for v in (True, False)])
    want = xs
    for _ in range(3):
        want = np.maximum(want @ w + b, 0)
    for (l_t, br_t), (l_f, br_f) in results:
        np.testing.assert_allclose(l_t, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(l_f, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(br_t, np.maximum(xs @ w + b, 0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(br_f, xs * 2, rtol=1e-6)


def test_a_read_that_waits_on_the_update_does_not_deadlock():
    """A reader that depends on the update gets no extra edge (it would make a cycle)."""
    with af.Graph().as_default():
        x, y, logits, loss = _mlp()
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        kernel = [v for v in af.trainable_variables() if v.op.name == "l1/kernel"][0]
        with af.control_dependencies([train]):
            after = kernel.read_value()
        xs, ys = _data()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            before = sess.run(kernel)
            got, = sess.run([after], {x: xs, y: ys}, options=af.RunOptions(timeout_in_ms=20000))
            now = sess.run(kernel)
        np.testing.assert_array_equal(got, now)
        assert not np.allclose(got, before)


# -- errors name the original op --------------------------------------------------------------

def test_errors_in_a_fused_op_name_the_original_op():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, None], name="x")
        w = af.constant(np.ones((4, 3), np.float32))
        out = af.nn.relu(af.nn.bias_add(af.matmul(x, w, name="mm"), af.constant(np.ones(3, np.float32)), name="ba"),
                         name="act")
        with af.Session() as sess:
            with pytest.raises(af.errors.InvalidArgumentError) as e:
                sess.run(out, {x: np.ones((2, 5), np.float32)})
            assert e.value.node_def == "mm"
            assert "[[node mm (MatMul, fused as _FusedMatMul of mm, ba, act)" in e.value.message
            assert "inner dimensions" in e.value.message
            # The session still works after the failed step.
            np.testing.assert_allclose(sess.run(out, {x: np.ones((2, 4), np.float32)}), np.full((2, 3), 5.0))


# -- updates on the pool stay atomic ----------------------------------------------------------

def test_reads_never_see_a_half_applied_fused_update():
    """A big fused update runs on the pool; reads from other threads must wait for it, not see a
    variable with some rows updated and others not."""
    n = 768
    with af.Graph().as_default():
        v = af.Variable(np.zeros((n, n), np.float32), name="v")
        a = af.constant(np.ones((256, n), np.float32))
        grad = af.matmul(a, af.constant(np.ones((256, n), np.float32)), transpose_a=True)
        step = af.train.GradientDescentOptimizer(1.0 / 256).apply_gradients([(grad, v)])
        assert any(f.type == "_MatMulApplyGradientDescent" for f in _plan_fusions([], [], [step]).values())
        with af.Session() as sess:
            sess.run(v.initializer)
            torn, reads, final = run_beside_readers(sess, v, step, 40)
        assert not torn, torn[:3]
        assert reads > 0
        np.testing.assert_array_equal(final, np.full((n, n), -40.0, np.float32))


# -- the kernel pool --------------------------------------------------------------------------

def test_kernel_pool_runs_urgent_tasks_before_deferred_ones():
    pool = KernelPool(1)
    gate, order, done = threading.Event(), [], threading.Event()
    pool.submit(gate.wait)                        # holds the only thread
    for i in range(3):
        pool.submit(lambda i=i: order.append(("deferred", i)), deferred=True)
    for i in range(2):
        pool.submit(lambda i=i: order.append(("urgent", i)))
    pool.submit(done.set, deferred=True)
    gate.set()
    assert done.wait(5)
    assert order == [("urgent", 0), ("urgent", 1), ("deferred", 0), ("deferred", 1), ("deferred", 2)]
    pool.shutdown(wait=True)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)


def test_kernel_pool_survives_a_failing_task():
    pool = KernelPool(2)
    done = threading.Event()
    pool.submit(lambda: 1 / 0)
    pool.submit(done.set)
    assert done.wait(5)
    pool.shutdown(wait=True)


def test_fused_updates_write_the_variables_in_place():
    """After the backward MatMul reading a kernel ends, nothing holds that kernel any more: the
    fused update writes it in place, step after step, instead of copying 4 MiB first."""
    with af.Graph().as_default():
        x, y, logits, loss = _mlp(sizes=(64, 512, 512, 10))
        train = af.train.GradientDescentOptimizer(0.01).minimize(loss)
        rng = np.random.default_rng(0)
        feed = {x: rng.standard_normal((256, 64)).astype(np.float32), y: rng.integers(0, 10, 256)}
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train, feed)
            res = sess._backend.container.get("l1/kernel")
            where = res.value.ctypes.data
            for _ in range(10):
                sess.run(train, feed)
                assert res.value.ctypes.data == where


def test_updates_reading_each_others_variables_do_not_deadlock():
    """loss = sum(V1 @ V2): V1's fused update reads V2 and V2's reads V1. Each would like the other's
    readers to go first; only one of the two edges may be added (the other update copies)."""
    rng = np.random.default_rng(5)
    v1_0 = rng.standard_normal((300, 200)).astype(np.float32)
    v2_0 = rng.standard_normal((200, 250)).astype(np.float32)
    results = []
    for config in (None, OFF):
        with af.Graph().as_default():
            v1, v2 = af.Variable(v1_0, name="v1"), af.Variable(v2_0, name="v2")
            loss = af.reduce_sum(af.matmul(v1, v2))
            train = af.train.GradientDescentOptimizer(1e-3).minimize(loss)
            fusions = _plan_fusions([], [], [train])
            if config is None:
                assert sum(f.type == "_MatMulApplyGradientDescent" for f in fusions.values()) == 2
                assert sum(len(f.extra_control) for f in fusions.values()) == 1
            with af.Session(config=config) as sess:
                sess.run(af.global_variables_initializer())
                for _ in range(3):
                    sess.run(train, options=af.RunOptions(timeout_in_ms=20000))
                results.append(sess.run([v1, v2]))
    # Reference: both gradients from the values before the step (a snapshot).
    a, b = v1_0.astype(np.float64), v2_0.astype(np.float64)
    for _ in range(3):
        ga, gb = np.ones((300, 250)) @ b.T, a.T @ np.ones((300, 250))
        a, b = a - 1e-3 * ga, b - 1e-3 * gb
    for got in results:
        np.testing.assert_allclose(got[0], a, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(got[1], b, rtol=1e-4, atol=1e-3)


def test_a_step_after_the_pool_shut_down_fails_instead_of_hanging():
    import concurrent.futures

    from actorflow.actors.dispatcher import Runtime
    from actorflow.actors.executable import Executable
    from actorflow.actors.resource import ResourceContainer
    from actorflow.scheduler.lower import LowerOptions, lower
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [512, 512])
        y = af.matmul(x, x)
    rt = Runtime()
    try:
        exe = Executable(rt, lower(make_plan(g, [x], [y], []), None, LowerOptions.from_config(None)), ResourceContainer())
        rt.pool.shutdown(wait=True)
        done = concurrent.futures.Future()
        rt.loop.call_soon_threadsafe(exe.start, [np.ones((512, 512), np.float32)],
                                     lambda res, err: done.set_result(err))
        err = done.result(timeout=10)
        assert isinstance(err, af.errors.CancelledError) and "shut down" in str(err)
    finally:
        rt.close()


def _convnet(dtype=af.float32, data_format="channels_last"):
    rng = np.random.default_rng(6)
    shape = [None, 10, 10, 2] if data_format == "channels_last" else [None, 2, 10, 10]
    x = af.placeholder(dtype, shape, name="x")
    y = af.placeholder(af.int64, [None], name="y")
    h = af.layers.conv2d(x, 6, 3, padding="same", activation=af.nn.relu, data_format=data_format,
                         kernel_initializer=af.constant_initializer(rng.standard_normal((3, 3, 2, 6)) * 0.3),
                         bias_initializer=af.constant_initializer(0.05), name="c0")
    h = af.layers.conv2d(h, 4, 3, padding="valid", data_format=data_format,
                         kernel_initializer=af.constant_initializer(rng.standard_normal((3, 3, 6, 4)) * 0.3),
                         bias_initializer=af.constant_initializer(-0.05), name="c1")
    logits = af.layers.dense(af.layers.flatten(h), 3, name="d")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return x, y, loss


def test_conv_bias_relu_fuses_and_trains_like_unfused():
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((16, 10, 10, 2)).astype(np.float32)
    ys = rng.integers(0, 3, 16)
    runs = []
    for config in (None, OFF):
        with af.Graph().as_default():
            x, y, loss = _convnet()
            train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
            if config is None:
                fused = {r.name: (f.type, tuple(p.type for p in f.parts))
                         for r, f in _plan_fusions([loss], [x, y], [train]).items()}
                assert fused["c0/Relu"] == ("_FusedConv2D", ("Conv2D", "BiasAdd", "Relu"))
                assert fused["c1/BiasAdd"] == ("_FusedConv2D", ("Conv2D", "BiasAdd"))
            with af.Session(config=config) as sess:
                sess.run(af.global_variables_initializer())
                init = sess.run(af.trainable_variables())
                if runs:      # the dense kernel is random: start both runs from the same values
                    for v, val in zip(af.trainable_variables(), runs[0][0]):
                        v.load(val, sess)
                losses = [sess.run([train, loss], {x: xs, y: ys})[1] for _ in range(4)]
                runs.append((init, losses, sess.run(af.trainable_variables())))
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-5)
    for a, b in zip(runs[0][2], runs[1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_nchw_convolutions_are_not_fused_and_conv_errors_name_the_conv():
    with af.Graph().as_default():
        x, y, loss = _convnet(data_format="channels_first")
        assert not any(f.type == "_FusedConv2D" for f in _plan_fusions([loss], [x, y]).values())
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 8, 8, None])
        f = af.constant(np.ones((3, 3, 2, 4), np.float32))
        out = af.nn.relu(af.nn.bias_add(af.nn.conv2d(x, f, 1, "SAME", name="conv"),
                                        af.constant(np.ones(4, np.float32))))
        assert _plan_fusions([out], [x])
        with af.Session() as sess:
            with pytest.raises(af.errors.InvalidArgumentError) as e:
                sess.run(out, {x: np.ones((2, 8, 8, 3), np.float32)})
            assert e.value.node_def == "conv" and "_FusedConv2D" in e.value.message
            assert "input depth 3 does not match filter in_channels 2" in e.value.message
            np.testing.assert_allclose(sess.run(out, {x: np.ones((2, 8, 8, 2), np.float32)})[0, 4, 4], np.full(4, 19.0))


# -- MaxPoolGrad -> ReluGrad [-> BiasAddGrad] ----------------------------------------------------

def _pool_convnet(dtype=af.float32, pool=(2, 2), padding="valid", size=9):
    """conv -> bias -> relu -> max-pool -> dense: the layer whose backward pass fuses (and, when
    the pool's windows tile the conv's output, its forward pass too)."""
    rng = np.random.default_rng(8)
    x = af.placeholder(dtype, [None, size, size, 2], name="x")
    y = af.placeholder(af.int64, [None], name="y")
    h = af.layers.conv2d(x, 5, 3, padding="same", activation=af.nn.relu,
                         kernel_initializer=af.constant_initializer(rng.standard_normal((3, 3, 2, 5)) * 0.4),
                         bias_initializer=af.constant_initializer(0.02), name="c0")
    h = af.layers.max_pooling2d(h, pool[0], pool[1], padding=padding, name="p0")
    logits = af.layers.dense(af.layers.flatten(h), 3, name="d",
                             kernel_initializer=af.constant_initializer(rng.standard_normal((h.shape[1] * h.shape[2] * 5, 3)) * 0.3))
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return x, y, loss


@pytest.mark.parametrize("dtype,pool,padding,size", [
    (af.float32, (2, 2), "valid", 9), (af.float64, (2, 2), "valid", 9), (af.float32, (3, 2), "same", 9),
    (af.float64, (2, 2), "same", 9), (af.float32, (2, 2), "valid", 8), (af.float64, (2, 2), "same", 8)])
def test_max_pool_grad_relu_and_bias_grad_fuse_and_train_like_unfused(dtype, pool, padding, size):
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((12, size, size, 2)).astype(dtype.as_numpy_dtype)
    ys = rng.integers(0, 3, 12)
    runs = []
    for config in (None, OFF):
        with af.Graph().as_default():
            x, y, loss = _pool_convnet(dtype, pool, padding, size)
            train = af.train.GradientDescentOptimizer(0.2).minimize(loss)
            if config is None:
                fused = {r.name: (f.type, tuple(p.type for p in f.parts), f.attrs.get("fused_ops"))
                         for r, f in _plan_fusions([loss], [x, y], [train]).items()}
                assert fused["gradients/c0/Relu_grad/ReluGrad"] == (
                    "_FusedMaxPoolGrad", ("MaxPoolGrad", "ReluGrad", "BiasAddGrad"), ("ReluGrad", "BiasAddGrad"))
                # the forward pool joins the convolution only where its windows tile the output
                tiles = pool[0] == pool[1] and size % pool[0] == 0
                assert fused["c0/Relu"] == (
                    "_FusedConv2D", ("Conv2D", "BiasAdd", "Relu") + ("MaxPool",) * tiles,
                    ("BiasAdd", "Relu") + ("MaxPool",) * tiles)
            with af.Session(config=config) as sess:
                sess.run(af.global_variables_initializer())
                losses = [sess.run([train, loss], {x: xs, y: ys})[1] for _ in range(4)]
                runs.append((losses, sess.run(af.trainable_variables())))
    tol = 1e-5 if dtype == af.float32 else 1e-12
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=tol)
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(a, b, rtol=10 * tol, atol=tol)


def test_pool_grad_fusion_needs_the_pools_input_as_features_and_an_unseen_bias_grad():
    from actorflow.graph.ops.math_ops import ReluGrad
    from actorflow.graph.ops.nn_ops import MaxPoolGrad
    rng = np.random.default_rng(3)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 8, 8, 3], name="x")
        g = af.placeholder(af.float32, [None, 4, 4, 3], name="g")
        b = af.constant(np.array([0.1, -0.2, 0.0], np.float32))
        t = af.nn.bias_add(x, b)
        z = af.nn.relu(t)
        p = af.nn.max_pool2d(z, 2, 2, "VALID")
        dt, db = af.gradients(af.reduce_sum(p * g), [t, b])
        fused = _plan_fusions([dt, af.reduce_sum(db)], [x, g])
        assert [(f.type, f.attrs["fused_ops"]) for f in fused.values()] == [("_FusedMaxPoolGrad", ("ReluGrad", "BiasAddGrad"))]
        # a fetched bias gradient stays its own node; the pool and relu gradients still fuse
        fused = _plan_fusions([dt, db], [x, g])
        assert [(f.type, f.attrs["fused_ops"]) for f in fused.values()] == [("_FusedMaxPoolGrad", ("ReluGrad",))]
        # ReluGrad's features must be the pooled tensor
        dpool = MaxPoolGrad(z, p, g, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        assert not _plan_fusions([ReluGrad(dpool, af.nn.relu(x * 2.0))], [x, g])
        feed = {x: rng.standard_normal((5, 8, 8, 3)).astype(np.float32),
                g: rng.standard_normal((5, 4, 4, 3)).astype(np.float32)}
        outs = {}
        for config in (None, OFF):
            with af.Session(config=config) as sess:
                outs[config is None] = sess.run([dt, db, af.reduce_sum(db)], feed)
        np.testing.assert_array_equal(outs[True][0], outs[False][0])
        np.testing.assert_allclose(outs[True][1], outs[False][1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(outs[True][2], outs[False][2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ksize,strides,padding", [
    ((4, 28, 28, 32), 2, 2, "VALID"),           # LeNet's first pool: windows tile the input
    ((4, 14, 14, 64), 2, 2, "SAME"),
    ((3, 7, 9, 5), 2, 2, "SAME"),               # odd sizes: SAME pads the last window
    ((3, 7, 9, 5), 2, 2, "VALID"),              # odd sizes: VALID leaves a row and column unread
    ((2, 9, 8, 3), 3, 2, "SAME"),               # overlapping windows
    ((2, 6, 6, 4), (2, 3), (1, 2), "VALID")])
def test_fused_max_pool_grad_kernel_matches_the_three_kernels(dtype, shape, ksize, strides, padding):
    kh, kw = (ksize, ksize) if isinstance(ksize, int) else ksize
    sh, sw = (strides, strides) if isinstance(strides, int) else strides
    attrs = {"ksize": (1, kh, kw, 1), "strides": (1, sh, sw, 1), "padding": padding, "data_format": "NHWC"}
    rng = np.random.default_rng(11)
    # a ReLU output: many zeros, and ties inside windows
    z = np.maximum(np.round(rng.standard_normal(shape) * 2) / 2, 0).astype(dtype)
    pool = get_kernel("MaxPool").factory(attrs)(z)
    g = rng.standard_normal(pool.shape).astype(dtype)
    g.reshape(-1)[::7] = np.nan if dtype == np.float32 else -np.inf      # ReluGrad's g * 0 where z <= 0
    dz_ref = get_kernel("ReluGrad").factory({})(get_kernel("MaxPoolGrad").factory(attrs)(z, pool, g), z)
    db_ref = get_kernel("BiasAddGrad").factory({"data_format": "NHWC"})(dz_ref)
    for fused_ops in (("ReluGrad",), ("ReluGrad", "BiasAddGrad")):
        kdef = get_kernel("_FusedMaxPoolGrad")
        fa = dict(attrs, fused_ops=fused_ops)
        whole = kdef.factory(fa)(z, pool, g)
        out, thunks, finish = kdef.split(fa)(2 if shape[0] >= 4 else 1, z, pool, g)
        for t in thunks:
            t()
        for got in (whole, finish()):
            if fused_ops == ("ReluGrad",):
                got = (got,)
            np.testing.assert_array_equal(got[0], dz_ref)
            assert got[0].dtype == dtype
            if len(got) == 2:
                np.testing.assert_allclose(got[1], db_ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
                assert got[1].dtype == dtype


def test_fused_max_pool_grad_errors_name_the_pool_gradient():
    fn = get_kernel("_FusedMaxPoolGrad").factory({"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID",
                                                  "data_format": "NHWC", "fused_ops": ("ReluGrad",)})
    from actorflow.kernels.cpu.matmul import FusedPartError
    with pytest.raises(FusedPartError) as e:
        fn(np.zeros((2, 4, 4, 3), np.float32), np.zeros((2, 2, 2, 3), np.float32), np.zeros((2, 3, 2, 3), np.float32))
    assert e.value.part == 0 and "MaxPoolGrad: grad has shape" in str(e.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xshape,fshape,stride,padding,pool", [
    ((4, 28, 28, 1), (5, 5, 1, 32), 1, "SAME", (2, 2)),      # LeNet's layers
    ((4, 14, 14, 32), (5, 5, 32, 64), 1, "SAME", (2, 2)),
    ((3, 9, 9, 2), (3, 3, 2, 5), 1, "SAME", (3, 3)),
    ((2, 8, 12, 3), (3, 2, 3, 4), 1, "VALID", (3, 1)),       # 6x11 output: 3x1 windows tile it
    ((5, 12, 12, 3), (3, 3, 3, 6), 2, "SAME", (2, 3))])      # a strided convolution
def test_fused_conv_max_pool_kernel_matches_conv_then_pool(dtype, xshape, fshape, stride, padding, pool):
    rng = np.random.default_rng(12)
    conv = {"strides": (1, stride, stride, 1), "padding": padding, "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
    pattrs = {"ksize": (1, *pool, 1), "strides": (1, *pool, 1), "padding": "VALID", "data_format": "NHWC"}
    x = rng.standard_normal(xshape).astype(dtype)
    f = rng.standard_normal(fshape).astype(dtype)
    b = rng.standard_normal(fshape[3]).astype(dtype)
    z = get_kernel("_FusedConv2D").factory(dict(conv, fused_ops=("BiasAdd", "Relu")))(x, f, b)
    pooled = get_kernel("MaxPool").factory(pattrs)(z)
    kdef = get_kernel("_FusedConv2D")
    attrs = dict(conv, fused_ops=("BiasAdd", "Relu", "MaxPool"), pool_ksize=(1, *pool, 1))
    got = [kdef.factory(attrs)(x, f, b)]
    parts = kdef.split(attrs)(2, x, f, b)
    if parts is not None:
        _, thunks, finish = parts
        for t in thunks:
            t()
        got.append(finish())
    # blocks aligned to the pool's bands may cut the GEMM differently (and the BLAS may pick another
    # kernel for another shape, as MKL does on AMD): equal up to the rounding of a K-term sum of
    # unit-scale products, a few K * eps absolute; the pooled output is exactly the max-pool of the
    # convolution output returned with it
    k = fshape[0] * fshape[1] * fshape[2]
    tol = dict(rtol=1e-5, atol=4 * k * np.finfo(np.float32).eps) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for zz, pp in got:
        np.testing.assert_allclose(zz, z, **tol)
        np.testing.assert_array_equal(pp, get_kernel("MaxPool").factory(pattrs)(zz))
        np.testing.assert_allclose(pp, pooled, **tol)
        assert zz.dtype == pp.dtype == dtype


def test_fused_conv_max_pool_kernel_names_the_pool_when_windows_do_not_tile():
    from actorflow.kernels.cpu.matmul import FusedPartError
    conv = {"strides": (1, 1, 1, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
    fn = get_kernel("_FusedConv2D").factory(dict(conv, fused_ops=("BiasAdd", "Relu", "MaxPool"), pool_ksize=(1, 2, 2, 1)))
    with pytest.raises(FusedPartError) as e:
        fn(np.ones((2, 7, 8, 1), np.float32), np.ones((3, 3, 1, 2), np.float32), np.zeros(2, np.float32))
    assert e.value.part == 3 and "MaxPool" in str(e.value) and "7x8" in str(e.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 28, 28, 32), (3, 6, 10, 5), (2, 2, 4, 1)])
def test_exact_2x2_max_pool_matches_the_general_loop(dtype, shape):
    from actorflow.kernels.cpu.pooling import _max_pool
    rng = np.random.default_rng(13)
    x = (np.round(rng.standard_normal(shape) * 2) / 2).astype(dtype)      # ties
    x.reshape(-1)[::11] = np.nan
    n, h, w, c = shape
    want = np.empty((n, h // 2, w // 2, c), dtype)
    _max_pool(x.reshape(-1), n, h, w, c, 2, 2, 2, 2, 0, 0, h // 2, w // 2, want.reshape(-1))
    attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"}
    np.testing.assert_array_equal(get_kernel("MaxPool").factory(attrs)(x), want)
    out, thunks = get_kernel("MaxPool").split(attrs)(2, x) if n >= 4 else (None, ())
    for t in thunks:
        t()
    if out is not None:
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(600, 33), (64, 1024), (8, 5, 7, 6), (3, 4)])
def test_fused_relu_grad_kernel_matches_relu_grad_then_bias_add_grad(dtype, shape):
    rng = np.random.default_rng(14)
    g = rng.standard_normal(shape).astype(dtype)
    f = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    g.reshape(-1)[::9] = np.nan
    dz = get_kernel("ReluGrad").factory({})(g, f)
    db = get_kernel("BiasAddGrad").factory({"data_format": "NHWC"})(dz)
    kdef = get_kernel("_FusedReluGrad")
    got = [kdef.factory({"fused_ops": ("BiasAddGrad",)})(g, f)]
    parts = kdef.split({"fused_ops": ("BiasAddGrad",)})(2, g, f)
    if parts is not None:
        _, thunks, finish = parts
        for t in thunks:
            t()
        got.append(finish())
    assert len(got) == (2 if shape[0] >= 512 else 1)
    for dz2, db2 in got:
        np.testing.assert_array_equal(dz2, dz)
        np.testing.assert_allclose(db2, db, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
        assert dz2.dtype == db2.dtype == dtype and dz2.shape == shape


def _scaled_mlp():
    """x -> dense+relu -> * 0.5 -> dense: the gradient into the ReLU comes from a Mul, not a MatMul."""
    rng = np.random.default_rng(0)
    x = af.placeholder(af.float32, [None, 12], name="x")
    y = af.placeholder(af.int64, [None], name="y")
    h = af.layers.dense(x, 16, activation=af.nn.relu, name="l0",
                        kernel_initializer=af.constant_initializer(rng.standard_normal((12, 16)) * 0.5),
                        bias_initializer=af.constant_initializer(0.1))
    logits = af.layers.dense(h * 0.5, 3, name="l1",
                             kernel_initializer=af.constant_initializer(rng.standard_normal((16, 3)) * 0.5))
    return x, y, af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def test_relu_grad_and_bias_grad_fuse_in_a_dense_layer_and_train_like_unfused():
    xs, ys = _data(n=300)
    for build in (_mlp, _scaled_mlp):
        runs = []
        for config in (None, OFF):
            with af.Graph().as_default():
                x, y, *_, loss = build()
                train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
                if config is None:
                    fused = {r.name: (f.type, tuple(p.type for p in f.parts))
                             for r, f in _plan_fusions([loss], [x, y], [train]).items()}
                    if build is _mlp:     # the mask goes into the GEMM that made the gradient
                        assert fused["gradients/l1/Relu_grad/ReluGrad"] == ("_FusedMatMul", ("MatMul", "ReluGrad"))
                    else:                 # no GEMM to take it: ReluGrad and BiasAddGrad share one pass
                        assert fused["gradients/l0/Relu_grad/ReluGrad"] == ("_FusedReluGrad",
                                                                            ("ReluGrad", "BiasAddGrad"))
                with af.Session(config=config) as sess:
                    sess.run(af.global_variables_initializer())
                    losses = [sess.run([train, loss], {x: xs, y: ys})[1] for _ in range(4)]
                    runs.append((losses, sess.run(af.trainable_variables())))
        np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5)
        for a, b in zip(runs[0][1], runs[1][1]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
