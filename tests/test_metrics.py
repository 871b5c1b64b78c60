"""af.metrics against TF 2.21's tf.compat.v1.metrics (fixtures/metrics.json, made by make_metrics.py)."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "metrics.json").read_text())
IDS = [f"{c['metric']}-{i}" for i, c in enumerate(FIX["cases"])]


@pytest.mark.parametrize("case", FIX["cases"], ids=IDS)
def test_metric_updates_and_value_match_tf(case):
    weighted = case["batches"][0]["weights"] is not None
    g = af.Graph()
    with g.as_default():
        pp = af.placeholder(case["prediction_dtype"], [None])
        lp = af.placeholder(case["label_dtype"], [None]) if case["label_dtype"] else None
        wp = af.placeholder(af.float32, [None]) if weighted else None
        fn = getattr(af.metrics, case["metric"])
        if case["metric"] == "mean":
            value, update = fn(pp, weights=wp)
        else:
            value, update = fn(lp, pp, weights=wp, **case["kwargs"])
        assert len(af.local_variables()) == case["n_local"]
        assert len(af.get_collection(af.GraphKeys.METRIC_VARIABLES)) == case["n_metric"]
        assert not af.trainable_variables() and not af.global_variables()
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            assert float(np.sum(sess.run(value))) == 0.0
            for b, want in zip(case["batches"], case["updates"]):
                feed = {pp: b["predictions"]}
                if lp is not None:
                    feed[lp] = b["labels"]
                if wp is not None:
                    feed[wp] = b["weights"]
                np.testing.assert_allclose(sess.run(update, feed), want, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(sess.run(value), case["value"], rtol=1e-5, atol=1e-6)
            # Reinitializing the local variables starts the metric afresh.
            sess.run(af.initializers.local_variables())
            assert float(np.sum(sess.run(value))) == 0.0


def test_collections_names_and_shapes():
    g = af.Graph()
    with g.as_default():
        labels = af.placeholder(af.int32, [None, 1])
        preds = af.placeholder(af.int32, [None])
        acc, up = af.metrics.accuracy(labels, preds, metrics_collections=["m"], updates_collections=["u"],
                                      name="my_acc")
        assert af.get_collection("m") == [acc] and af.get_collection("u") == [up]
        assert sorted(v.name for v in af.local_variables()) == ["my_acc/count:0", "my_acc/total:0"]
        assert acc.shape == af.TensorShape([]) and up.shape == af.TensorShape([])
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            assert sess.run(up, {labels: [[1], [2]], preds: [1, 0]}) == pytest.approx(0.5)
        with pytest.raises(ValueError, match="incompatible"):
            af.metrics.accuracy(af.constant([1, 2, 3]), af.constant([1, 2]))
        with pytest.raises(ValueError, match="summation_method"):
            af.metrics.auc([0, 1], [0.5, 0.5], summation_method="careful_interpolation")
        with pytest.raises(ValueError, match="None"):
            af.metrics.mean(None)


def test_streaming_accuracy_of_a_trained_model():
    # The way tutorials use it: update per batch, read once at the end.
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(40, 2)).astype(np.float32)
    ys = (xs[:, 0] + xs[:, 1] > 0).astype(np.int64)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2])
        y = af.placeholder(af.int64, [None])
        pred = af.argmax(af.layers.dense(x, 2, kernel_initializer=af.constant_initializer([[1, -1], [1, -1]]),
                                         use_bias=False), 1)
        acc, update = af.metrics.accuracy(y, pred)
        with af.Session() as sess:
            sess.run([af.global_variables_initializer(), af.local_variables_initializer()])
            for i in range(0, 40, 10):
                sess.run(update, {x: xs[i:i + 10], y: ys[i:i + 10]})
            got = sess.run(acc)
    want = np.mean((xs[:, 0] + xs[:, 1] <= 0).astype(np.int64) == ys)
    assert got == pytest.approx(want)


@pytest.mark.parametrize("case", FIX["extra"], ids=[f"{c['metric']}-{i}" for i, c in enumerate(FIX["extra"])])
def test_more_metrics_match_tf(case):
    g = af.Graph()
    with g.as_default():
        phs = {k: af.placeholder(af.float32, np.shape(v)) for k, v in case["batches"][0].items()}
        weighted = case["weights"][0] is not None
        wp = af.placeholder(af.float32, np.shape(case["weights"][0])) if weighted else None
        value, update = getattr(af.metrics, case["metric"])(**phs, weights=wp, **case["kwargs"])
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            for b, w, want in zip(case["batches"], case["weights"], case["updates"]):
                feed = {phs[k]: v for k, v in b.items()}
                if weighted:
                    feed[wp] = w
                np.testing.assert_allclose(sess.run(update, feed), want, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(sess.run(value), case["value"], rtol=1e-5, atol=1e-6)
