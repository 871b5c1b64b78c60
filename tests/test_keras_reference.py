"""af.keras layers against tf_keras 2.21's outputs for the same weights (tests/fixtures/keras.json,
written by tests/fixtures/make_keras.py), with TF 1.x's recurrent defaults spelled out there."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow import keras
from actorflow.keras import backend as K

L = keras.layers
with open(os.path.join(os.path.dirname(__file__), "fixtures", "keras.json")) as _f:
    CASES = {k: v for k, v in json.load(_f).items() if k != "optimizers"}   # those: test_keras_models.py


@pytest.fixture(autouse=True)
def _fresh():
    K.clear_session()
    yield
    K.clear_session()


def _arr(v):
    return np.array(v, dtype=np.float32)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["class"] not in ("Bidirectional",
                                                                                   "BatchNormalization")])
def test_layer_matches_tf_keras(name):
    case = CASES[name]
    x = _arr(case["x"])
    layer = getattr(L, case["class"])(**case["kwargs"])
    ph = af.placeholder(af.float32, [None] + list(x.shape[1:]))
    out = layer(ph)
    outs = out if isinstance(out, list) else [out]
    if case["weights"]:
        layer.set_weights([_arr(w) for w in case["weights"]])
    got = K.get_session().run(outs, {ph: x})
    assert len(got) == len(case["outputs"])
    for g, ref in zip(got, case["outputs"]):
        np.testing.assert_allclose(g, _arr(ref), rtol=1e-4, atol=1e-5, err_msg=name)


def test_bidirectional_lstm_matches_tf_keras():
    case = CASES["bidirectional_lstm"]
    x = _arr(case["x"])
    ph = af.placeholder(af.float32, [None, 4, 3])
    bi = L.Bidirectional(L.LSTM(2, return_sequences=True))
    out = bi(ph)
    bi.set_weights([_arr(w) for w in case["weights"]])
    np.testing.assert_allclose(K.get_session().run(out, {ph: x}), _arr(case["outputs"][0]), rtol=1e-4, atol=1e-5)


def test_batch_norm_training_step_matches_tf_keras():
    case = CASES["batch_norm_training"]
    x = _arr(case["x"])
    ph = af.placeholder(af.float32, [None, 3, 3, 2])
    bn = L.BatchNormalization(momentum=0.9)
    y = bn(ph, training=True)
    sess = K.get_session()
    got = sess.run([y] + bn.updates, {ph: x})[0]
    ref_y, gamma, beta, mean, var = [_arr(v) for v in case["outputs"]]
    np.testing.assert_allclose(got, ref_y, rtol=1e-4, atol=1e-4)
    g, b, m, v = bn.get_weights()
    np.testing.assert_allclose(m, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v, var, rtol=1e-5, atol=1e-6)
