"""tf.contrib.layers.instance_norm, group_norm and batch_norm against TensorFlow 2.21 (tf_slim's copies
of the contrib code; tests/fixtures/make_contrib_norms.py, make_contrib_batch_norm.py): outputs, input
gradients, variable names and batch_norm's moving statistics."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import actorflow as af
from tests.fixtures import contrib_batch_norm_cases as bn_cases
from tests.fixtures.contrib_norm_cases import CASES, inputs_for

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "contrib_norms.json")))
BN_FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "contrib_batch_norm.json")))


@pytest.mark.parametrize("name", sorted(CASES))
def test_contrib_norms_match_tensorflow(name):
    case = CASES[name]
    with af.Graph().as_default():
        x_val = inputs_for(case)
        x = af.constant(x_val)
        kwargs = dict(case["kwargs"])
        if "param_initializers" in kwargs:
            kwargs["param_initializers"] = {k: af.constant_initializer(v)
                                            for k, v in kwargs["param_initializers"].items()}
        y = getattr(af.contrib.layers, case["fn"])(x, **kwargs)
        w = af.constant(np.linspace(-1, 1, x_val.size, dtype=np.float32).reshape(x_val.shape))
        (g,) = af.gradients(af.reduce_sum(y * w), [x])
        assert y.shape.as_list() == list(x_val.shape)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            yv, gv = sess.run([y, g])
        want = FIX[name]
        np.testing.assert_allclose(yv, want["y"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gv, want["dx"], rtol=1e-4, atol=1e-5)
        assert sorted(v.op.name for v in af.global_variables()) == want["variables"]


def _penalty_weights(lib, x_val):
    # Uneven weights on the gradient, as a network's layers below the batch norm put on it: the
    # second derivative's dropped term (see test_contrib_batch_norm_matches_tensorflow) shows only
    # when the penalty's adjoint does not sum to zero over the batch.
    return lib.constant(np.linspace(0.5, 2, x_val.size, dtype=np.float32).reshape(x_val.shape))


@pytest.mark.parametrize("name", sorted(bn_cases.CASES))
def test_contrib_batch_norm_matches_tensorflow(name):
    # Inputs of variance about 1e-5 with epsilon=1e-5: TF 2.21's fused kernel takes epsilon as given
    # (TF 1.x raised it to 1.001e-5, which moves these outputs by about 1e-4). The variables'
    # creation order (tf.global_variables(), and so Saver's and slim's listings) follows TF's path.
    # Second derivatives (a gradient penalty's): exact on the fused path, as TF differentiates
    # FusedBatchNormGrad; nn.moments' (its stop_gradient at the mean) on the legacy one.
    case = bn_cases.CASES[name]
    with af.Graph().as_default():
        x_val = bn_cases.inputs_for(case)
        x = af.constant(x_val)
        y = af.contrib.layers.batch_norm(x, **case["kwargs"])
        w = af.constant(np.linspace(-1, 1, x_val.size, dtype=np.float32).reshape(x_val.shape))
        (g,) = af.gradients(af.reduce_sum(y * w), [x])
        (gg,) = af.gradients(af.reduce_sum(af.square(g * _penalty_weights(af, x_val))), [x])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            yv, gv, ggv = sess.run([y, g, gg])
            moving = {v.op.name: sess.run(v) for v in af.global_variables() if "moving" in v.op.name}
        created = [v.op.name for v in af.global_variables()]
    want = BN_FIX[name]
    assert created == want["variables"]
    np.testing.assert_allclose(yv, want["y"], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(gv, want["dx"], rtol=1e-4, atol=1e-3 * np.abs(want["dx"]).max())
    np.testing.assert_allclose(ggv, want["ddx"], rtol=1e-3, atol=1e-3 * np.abs(want["ddx"]).max())
    assert sorted(moving) == sorted(want["moving"])
    for k, v in moving.items():
        np.testing.assert_allclose(v, want["moving"][k], rtol=1e-5, atol=1e-9)


def test_nn_fused_batch_norm_second_derivative_matches_tensorflow():
    x_val = bn_cases.inputs_for(bn_cases.CASES["conv_eps_1e-5"])
    with af.Graph().as_default():
        x = af.constant(x_val)
        y, _, _ = af.nn.fused_batch_norm(x, af.constant(np.linspace(0.5, 1.5, 6, dtype=np.float32)),
                                         af.zeros([6]), epsilon=1e-5)
        w = af.constant(np.linspace(-1, 1, x_val.size, dtype=np.float32).reshape(x_val.shape))
        (g,) = af.gradients(af.reduce_sum(y * w), [x])
        (gg,) = af.gradients(af.reduce_sum(af.square(g * _penalty_weights(af, x_val))), [x])
        with af.Session() as sess:
            yv, gv, ggv = sess.run([y, g, gg])
    want = BN_FIX["nn_fused_batch_norm"]
    np.testing.assert_allclose(yv, want["y"], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(gv, want["dx"], rtol=1e-4, atol=1e-3 * np.abs(want["dx"]).max())
    np.testing.assert_allclose(ggv, want["ddx"], rtol=1e-3, atol=1e-3 * np.abs(want["ddx"]).max())


def test_group_norm_takes_an_unknown_batch_and_checks_its_arguments():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 4, 4, 8])
        y = af.contrib.layers.group_norm(x, groups=4)
        assert y.shape.as_list() == [None, 4, 4, 8]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            out = sess.run(y, {x: np.random.RandomState(0).randn(3, 4, 4, 8)})
        grouped = out.reshape(3, 4, 4, 4, 2)
        np.testing.assert_allclose(grouped.mean(axis=(1, 2, 4)), 0, atol=1e-5)
        with pytest.raises(ValueError, match="not commensurate with 3 groups"):
            af.contrib.layers.group_norm(x, groups=3)
        with pytest.raises(ValueError, match="Invalid groups 16 for 8 channels"):
            af.contrib.layers.group_norm(x, groups=16)
        with pytest.raises(ValueError, match="mutually exclusive"):
            af.contrib.layers.group_norm(x, groups=2, reduction_axes=(-1, -2))
        with pytest.raises(ValueError, match="undefined channels dimension"):
            af.contrib.layers.instance_norm(af.placeholder(af.float32, [2, 3, None]))
