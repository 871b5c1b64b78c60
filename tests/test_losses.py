"""af.losses against TF 2.21's tf.compat.v1.losses (fixtures/losses.json, made by make_losses.py)."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "losses.json").read_text())
ARRAYS = {k: np.asarray(v["value"], dtype=v["dtype"]) for k, v in FIX["arrays"].items()}
FNS = sorted({c["fn"] for c in FIX["cases"]})


@pytest.mark.parametrize("fn", FNS)
def test_loss_values_and_gradients_match_tf(fn):
    cases = [c for c in FIX["cases"] if c["fn"] == fn]
    g = af.Graph()
    fetches = []
    with g.as_default():
        for c in cases:
            ins = {k: af.constant(ARRAYS[v]) for k, v in c["inputs"].items()}
            kw = dict(c["kwargs"])
            if c["reduction"] is not None:
                kw["reduction"] = c["reduction"]
            loss = getattr(af.losses, fn)(**ins, weights=af.constant(c["weights"], af.float32), **kw)
            grad = af.gradients(af.reduce_sum(loss), ins[c["grad_wrt"]])[0]
            fetches.append((loss, grad))
        assert len(af.losses.get_losses()) == sum(c["collected"] for c in cases)
    with af.Session(graph=g) as sess:
        got = sess.run(fetches)
    for c, (val, grad) in zip(cases, got):
        what = f"{fn} {c['kwargs']} weights={c['weights']} reduction={c['reduction']}"
        np.testing.assert_allclose(val, np.asarray(c["value"], np.float32), rtol=2e-5, atol=2e-6, err_msg=what)
        np.testing.assert_allclose(grad, np.asarray(c["grad"], np.float32), rtol=2e-5, atol=2e-6, err_msg=what)


def test_static_shapes_of_losses():
    x = af.placeholder(af.float32, [None, 3])
    y = af.placeholder(af.float32, [None, 3])
    assert af.losses.mean_squared_error(y, x).shape == af.TensorShape([])
    assert af.losses.mean_squared_error(y, x, reduction=af.losses.Reduction.NONE).shape.as_list() == [None, 3]
    assert af.losses.cosine_distance(y, x, axis=1, reduction="none").shape.as_list() == [None, 1]
    lab = af.placeholder(af.int64, [None])
    assert af.losses.sparse_softmax_cross_entropy(lab, x, reduction="none").shape.as_list() == [None]


def test_total_and_regularization_losses_match_tf():
    t = FIX["totals"]
    reg, reg_l = ARRAYS[FIX["inputs"]["reg"]], ARRAYS[FIX["inputs"]["reg_l"]]
    g = af.Graph()
    with g.as_default():
        x = af.constant(reg)
        k = af.get_variable("k", initializer=af.constant(reg_l[:3]), regularizer=lambda w: 0.1 * af.reduce_sum(w * w))
        mse = af.losses.mean_squared_error(reg_l, af.matmul(x, k))
        af.losses.absolute_difference(reg_l, x, loss_collection=None)
        total = af.losses.get_total_loss()
        regl = af.losses.get_regularization_loss()
        assert len(af.losses.get_losses()) == t["n_losses"]
        assert len(af.losses.get_regularization_losses()) == t["n_reg"]
        assert af.get_collection(af.GraphKeys.LOSSES) == [mse]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            tot, rv, m = sess.run([total, regl, mse])
    np.testing.assert_allclose([tot, rv, m], [t["total"], t["regularization"], t["mse"]], rtol=1e-5)


def test_layer_kernel_regularizer_feeds_get_total_loss():
    g = af.Graph()
    with g.as_default():
        x = af.constant(np.ones((2, 4), np.float32))
        out = af.layers.dense(x, 3, kernel_initializer=af.ones_initializer(),
                              kernel_regularizer=lambda w: af.reduce_sum(w))
        af.losses.add_loss(af.reduce_mean(out))
        assert len(af.losses.get_regularization_losses()) == 1
        total = af.losses.get_total_loss()
        no_reg = af.losses.get_total_loss(add_regularization_losses=False, name="plain")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            tv, pv = sess.run([total, no_reg])
    assert pv == pytest.approx(4.0)
    assert tv == pytest.approx(4.0 + 12.0)


def test_collections_scope_and_errors():
    g = af.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="No losses"):
            af.losses.get_total_loss()
        with af.Session() as sess:
            assert sess.run(af.losses.get_regularization_loss()) == 0.0
        a = af.losses.absolute_difference([1.0, 2.0], [1.5, 2.0], scope="first")
        af.losses.mean_squared_error([1.0], [3.0], scope="second", loss_collection="mine")
        assert a.name.startswith("first/")
        assert af.losses.get_losses(scope="first") == [a]
        assert af.losses.get_losses(scope="second") == []
        assert len(af.losses.get_losses(loss_collection="mine")) == 1
        with pytest.raises(ValueError, match="Invalid Reduction"):
            af.losses.mean_squared_error([1.0], [1.0], reduction="bogus")
        with pytest.raises(ValueError, match="weights can not be broadcast"):
            af.losses.mean_squared_error(np.zeros((4, 1), np.float32), np.zeros((4, 1), np.float32),
                                         weights=np.ones(4, np.float32))
        with pytest.raises(ValueError, match="incompatible"):
            af.losses.mean_squared_error(np.zeros((4, 2), np.float32), np.zeros((4, 3), np.float32))
        with pytest.raises(ValueError, match="axis"):
            af.losses.cosine_distance([1.0], [1.0])
        with pytest.raises(ValueError, match="None"):
            af.losses.log_loss(None, [0.5])


def test_softmax_cross_entropy_trains_a_classifier():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 4)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int64)
    g = af.Graph()
    with g.as_default():
        # Seeded: the dense layer's initial weights decide how far below the first loss 30 steps get
        # (over 300 seeds the ratio reached 0.43 of the 0.5 allowed; unseeded it was a draw each run).
        af.set_random_seed(1)
        x = af.placeholder(af.float32, [None, 4])
        y = af.placeholder(af.int64, [None])
        logits = af.layers.dense(x, 2)
        loss = af.losses.sparse_softmax_cross_entropy(y, logits)
        train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            first = sess.run(loss, {x: xs, y: ys})
            for _ in range(30):
                sess.run(train, {x: xs, y: ys})
            last = sess.run(loss, {x: xs, y: ys})
    assert last < 0.5 * first
