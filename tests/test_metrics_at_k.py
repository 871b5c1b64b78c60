"""af.metrics' top-k and sensitivity/specificity metrics against TF 2.21's tf.compat.v1.metrics
over three update batches (fixtures/metrics_at_k.json, made by make_metrics_at_k.py)."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "metrics_at_k.json").read_text())


@pytest.mark.parametrize("case", FIX["cases"], ids=[f"{c['metric']}-{i}" for i, c in enumerate(FIX["cases"])])
def test_metric_at_k_matches_tf(case):
    kwargs = dict(case["kwargs"])
    top = kwargs.pop("top", False)
    b0 = case["batches"][0]
    g = af.Graph()
    with g.as_default():
        lp = af.placeholder(af.int64, np.shape(b0["labels"]))
        if top:
            pp = af.placeholder(af.int32, np.shape(b0["predictions_idx"]))
        else:
            pp = af.placeholder(af.float32, np.shape(b0["predictions"]))
        wp = af.placeholder(af.float32, np.shape(b0["weights"])) if b0["weights"] is not None else None
        value, update = getattr(af.metrics, case["metric"])(lp, pp, weights=wp, **kwargs)
        assert af.local_variables() and not af.global_variables()
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            for b, want in zip(case["batches"], case["updates"]):
                feed = {lp: b["labels"], pp: b["predictions_idx"] if top else b["predictions"]}
                if wp is not None:
                    feed[wp] = b["weights"]
                np.testing.assert_allclose(sess.run(update, feed), want, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(sess.run(value), case["value"], rtol=1e-6, atol=1e-7)


def test_precision_at_k_collections_and_errors():
    g = af.Graph()
    with g.as_default():
        labels = af.constant([[1, 2], [0, 3]], dtype=af.int64)
        preds = af.constant([[0.1, 0.9, 0.5, 0.0], [0.8, 0.4, 0.0, 0.3]])
        value, update = af.metrics.precision_at_k(labels, preds, k=2, metrics_collections=["m"],
                                                  updates_collections=["u"])
        assert af.get_collection("m") == [value] and af.get_collection("u") == [update]
        assert value.dtype is af.float64
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            assert np.isnan(sess.run(value))          # TF divides 0 / 0 before any batch
            assert sess.run(update) == pytest.approx(0.75)
        with pytest.raises(ValueError, match="labels must be"):
            af.metrics.precision_at_top_k(af.constant(np.zeros([2, 2, 2], np.int64)), af.constant([[0], [1]]))
        with pytest.raises(ValueError, match="target rate"):
            af.metrics.sensitivity_at_specificity(af.constant([1]), af.constant([0.5]), specificity=1.5)
