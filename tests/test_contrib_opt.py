"""tf.contrib.opt: decoupled weight decay (AdamW, MomentumW, the extension of any optimizer) and
ScipyOptimizerInterface, against hand computations and scipy's known optima."""
import numpy as np
import pytest

import actorflow as af

opt = af.contrib.opt


@pytest.fixture(autouse=True)
def _fresh_graph():
    with af.Graph().as_default():
        yield


def _adam(w, g, m, v, t, lr=0.01):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return w - lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-8), m, v


def test_adamw_decays_then_steps_and_respects_decay_var_list():
    w0, b0 = np.array([1.0, -2.0, 3.0]), np.array([0.5])
    w = af.Variable(w0, name="w")
    b = af.Variable(b0, name="b")
    loss = af.reduce_sum(af.square(w)) + af.reduce_sum(b * 3.0)
    step = opt.AdamWOptimizer(weight_decay=0.1, learning_rate=0.01).minimize(loss, decay_var_list=[w])
    ref_w, ref_b = w0.copy(), b0.copy()
    mw = vw = np.zeros(3)
    mb = vb = np.zeros(1)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        for t in range(1, 4):
            gw, gb = 2 * ref_w, np.full(1, 3.0)       # gradients at the pre-decay values
            ref_w = ref_w - 0.1 * ref_w
            ref_w, mw, vw = _adam(ref_w, gw, mw, vw, t)
            ref_b, mb, vb = _adam(ref_b, gb, mb, vb, t)  # b is not in decay_var_list
            s.run(step)
            np.testing.assert_allclose(s.run(w), ref_w, rtol=1e-12)
            np.testing.assert_allclose(s.run(b), ref_b, rtol=1e-12)


def test_momentumw_and_extended_gradient_descent():
    w0 = np.array([2.0, -1.0])
    w = af.Variable(w0, name="w")
    loss = af.reduce_sum(af.square(w))
    sgdw = opt.extend_with_decoupled_weight_decay(af.train.GradientDescentOptimizer)
    step = sgdw(0.05, 0.1).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(step)
        np.testing.assert_allclose(s.run(w), w0 * 0.95 - 0.1 * 2 * w0, rtol=1e-12)
    g = af.Graph()
    with g.as_default():
        w = af.Variable(w0, name="w")
        step = opt.MomentumWOptimizer(0.05, 0.1, 0.9).minimize(af.reduce_sum(af.square(w)))
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(step)
            s.run(step)
            w1 = w0 * 0.95 - 0.1 * (2 * w0)
            acc1 = 2 * w0
            acc2 = 0.9 * acc1 + 2 * w1
            np.testing.assert_allclose(s.run(w), w1 * 0.95 - 0.1 * acc2, rtol=1e-12)


def test_adamw_sparse_decays_only_gathered_rows():
    e0 = np.arange(8.0).reshape(4, 2)
    e = af.Variable(e0, name="e")
    loss = af.reduce_sum(af.gather(e, [1, 3]))
    step = opt.AdamWOptimizer(0.5, learning_rate=0.0).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(step)
        got = s.run(e)
    np.testing.assert_allclose(got[[1, 3]], e0[[1, 3]] * 0.5)
    np.testing.assert_array_equal(got[[0, 2]], e0[[0, 2]])


def test_scipy_interface_lbfgs_with_bounds_and_slsqp_with_constraints():
    x = af.Variable(np.array([3.0, -4.0]), name="x")
    loss = af.reduce_sum(af.square(x - af.constant([1.0, 2.0], af.float64)))
    seen = []
    o = opt.ScipyOptimizerInterface(loss, var_to_bounds={x: ([-10.0, -10.0], [0.5, 10.0])},
                                    options={"maxiter": 100})
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        o.minimize(s, fetches=[loss], loss_callback=lambda value: seen.append(value))
        np.testing.assert_allclose(s.run(x), [0.5, 2.0], atol=1e-6)
    assert seen and seen[-1] == pytest.approx(0.25, abs=1e-8)
    g = af.Graph()
    with g.as_default():
        v = af.Variable(np.array([1.0, 1.0]), name="v")
        loss = af.reduce_sum(af.square(v))
        o = opt.ScipyOptimizerInterface(loss, equalities=[af.reduce_sum(v) - 1.0], inequalities=[v[0] - 0.8],
                                        method="SLSQP")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            o.minimize(s)
            np.testing.assert_allclose(s.run(v), [0.8, 0.2], atol=1e-6)


def test_nadam_dense_and_sparse_steps_follow_the_nesterov_adam_equations():
    g_dense = np.array([0.5, -1.0, 2.0], np.float32)
    with af.Graph().as_default():
        v = af.Variable([1.0, 2.0, 3.0])
        emb = af.Variable(np.ones((4, 2), np.float32))
        loss = af.reduce_sum(v * g_dense) + af.reduce_sum(af.gather(emb, [2, 0]) * 3.0)
        opt = af.contrib.opt.NadamOptimizer(0.1)
        step = opt.minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(2):
                sess.run(step)
            got_v, got_emb = sess.run([v, emb])
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.1

    def run(x, g, rows=None):
        m = np.zeros_like(x)
        s = np.zeros_like(x)
        for t in (1, 2):
            lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            gg = np.zeros_like(x)
            if rows is None:
                gg = g
            else:
                gg[rows] = g
            m = b1 * m + (1 - b1) * gg
            s = b2 * s + (1 - b2) * gg * gg
            step = lr_t * (b1 * m + (1 - b1) * gg) / (np.sqrt(s) + eps)
            if rows is None:
                x = x - step
            else:
                x[rows] -= step[rows]
        return x
    np.testing.assert_allclose(got_v, run(np.array([1.0, 2.0, 3.0]), g_dense), rtol=1e-5)
    np.testing.assert_allclose(got_emb, run(np.ones((4, 2)), np.full((2, 2), 3.0), rows=[2, 0]), rtol=1e-5)
