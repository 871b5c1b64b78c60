"""tf.nn functions and tf.layers classes added for TF-1.x programs, against TensorFlow 2.21
(tests/fixtures/make_nn_misc.py): the same expressions with `tf` bound to actorflow, values and
gradients of sum(output * W); and the same small model built from layer classes (nn_misc_model.py),
whose variable names, layer names, outputs and one SGD step must match TF's."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference
from tests.gradcheck import check_gradients

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
sys.path.insert(0, _HERE)
from nn_misc_model import build_model  # noqa: E402

with open(os.path.join(_HERE, "nn_misc.json")) as _f:
    FIX = json.load(_f)


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_nn_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_selu_softsign_second_derivatives_and_float16():
    x = np.array([[-2.0, -0.5, 0.3], [1.5, -1e-3, 4.0]])
    # d/dx of d(selu)/dx (SeluGrad's gradient) and of softsign's, against finite differences.
    check_gradients(lambda a: af.gradients(af.reduce_sum(af.nn.selu(a) * a), a)[0], [x])
    check_gradients(lambda a: af.nn.softsign(a) * a, [x])
    with af.Graph().as_default():
        h = af.constant(x.astype(np.float16))
        with af.Session() as s:
            got = s.run([af.nn.selu(h), af.nn.softsign(h)])
        assert got[0].dtype == np.float16 and got[1].dtype == np.float16
        alpha, scale = 1.6732632423543772, 1.0507009873554805
        np.testing.assert_allclose(got[0], scale * np.where(x < 0, alpha * np.expm1(x), x), rtol=2e-3)
        np.testing.assert_allclose(got[1], x / (1 + np.abs(x)), rtol=2e-3)


def test_sufficient_statistics_count_of_unknown_shapes():
    with af.Graph().as_default():
        x = af.placeholder(af.float64, None)
        y = af.placeholder(af.float64, [None, 3])
        cx, mx, vx, _ = af.nn.sufficient_statistics(x, [0, -1])
        cy = af.nn.sufficient_statistics(y, [0, 1])[0]
        xv = np.arange(6.0).reshape(2, 3)
        with af.Session() as s:
            got = s.run([cx, mx, vx, cy], {x: xv, y: np.ones((4, 3))})
    assert got[0] == 6.0 and got[3] == 12.0
    np.testing.assert_allclose(got[1:3], [xv.sum(), (xv ** 2).sum()])


def test_fused_batch_norm_inference_outputs_and_errors():
    # TF's grappler folds the inference statistics away, so the fixture has y only: here the
    # returned mean and variance are the inputs, as TF documents.
    with af.Graph().as_default():
        x = af.constant(np.ones((2, 2, 2, 3), np.float32))
        mean, var = af.constant([0.1, 0.2, 0.3]), af.constant([1.0, 2.0, 3.0])
        _, m, v = af.nn.fused_batch_norm(x, af.ones([3]), af.zeros([3]), mean, var, is_training=False)
        with af.Session() as s:
            np.testing.assert_allclose(s.run([m, v]), [[0.1, 0.2, 0.3], [1.0, 2.0, 3.0]], rtol=1e-6)
        with pytest.raises(ValueError, match="needs mean and variance"):
            af.nn.fused_batch_norm(x, af.ones([3]), af.zeros([3]), is_training=False)
        with pytest.raises(ValueError, match="4-dimensional"):
            af.nn.fused_batch_norm(af.ones([2, 3]), af.ones([3]), af.zeros([3]))
        with pytest.raises(ValueError, match="data_format"):
            af.nn.fused_batch_norm(x, af.ones([3]), af.zeros([3]), data_format="NWC")


# ---------------------------------------------------------------------------------------------
# tf.layers classes
# ---------------------------------------------------------------------------------------------

LAYERS = FIX["layers"]


def test_layer_model_matches_tensorflow():
    with af.Graph().as_default():
        outputs, loss, step, layers = build_model(af)
        gvars = af.global_variables()
        assert [[v.op.name, v.shape.as_list()] for v in gvars] == LAYERS["variables"]
        assert [v.op.name for v in af.trainable_variables()] == LAYERS["trainable"]
        for key, want in LAYERS["layers"].items():
            lay = layers[key]
            assert lay.name == want["name"], key
            assert [w.op.name for w in lay.weights] == want["weights"], key
            assert [w.op.name for w in lay.trainable_weights] == want["trainable_weights"], key
            assert [w.op.name for w in lay.variables] == want["weights"], key
        assert layers["dense"].kernel.op.name == "dense/kernel" and layers["dense"].bias.op.name == "dense/bias"
        assert layers["bn"].moving_variance.op.name == "batch_normalization/moving_variance"
        assert len(layers["bn"].updates) == 2
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = s.run(outputs)
            for k, v in got.items():
                np.testing.assert_allclose(v, np.array(LAYERS["outputs"][k]), rtol=1e-5, atol=1e-5, err_msg=k)
            np.testing.assert_allclose(s.run(loss), LAYERS["loss"], rtol=1e-5)
            s.run(step)
            after = s.run({v.op.name: v for v in gvars})
            for k, v in after.items():
                np.testing.assert_allclose(v, np.array(LAYERS["after_step"][k]), rtol=1e-5, atol=1e-5, err_msg=k)


def test_layer_called_twice_shares_variables_and_names_like_tf():
    with af.Graph().as_default():
        x1 = af.constant(np.ones((2, 3), np.float32))
        x2 = af.constant(np.full((4, 3), 2.0, np.float32))
        layer = af.layers.Dense(4, kernel_initializer=af.constant_initializer(0.5))
        assert not layer.built and layer.weights == []
        y1 = layer(x1)
        y2 = layer(x2)
        assert layer.built
        assert [v.op.name for v in af.global_variables()] == ["dense/kernel", "dense/bias"]
        assert layer.trainable_weights == [layer.kernel, layer.bias]
        assert y1.op.name.startswith("dense/") and y2.op.name.startswith("dense/") and y1.op.name != y2.op.name
        other = af.layers.Dense(2)
        other(y2)
        assert [v.op.name for v in other.variables] == ["dense_1/kernel", "dense_1/bias"]
        # The functional form shares with reuse=True and the scope's name.
        y3 = af.layers.dense(x1, 4, name="dense", reuse=True)
        assert len(af.global_variables()) == 4
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            a, b, c = s.run([y1, y2, y3])
        np.testing.assert_allclose(a, np.full((2, 4), 1.5))
        np.testing.assert_allclose(b, np.full((4, 4), 3.0))
        np.testing.assert_allclose(c, a)


def test_layer_subclass_build_and_call():
    class Scale(af.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", [int(input_shape[-1])], initializer=af.ones_initializer())
            self.c = self.add_weight("count", [], initializer=af.zeros_initializer(), trainable=False)
            super().build(input_shape)

        def call(self, inputs):
            return inputs * self.w

    with af.Graph().as_default():
        with af.variable_scope("outer"):
            lay = Scale(name="scaler")
            y = lay(af.constant([[1.0, 2.0]]))
            lay(af.constant([[3.0, 4.0]]))
        assert lay.name == "scaler" and lay.scope_name == "outer/scaler"
        assert [v.op.name for v in lay.weights] == ["outer/scaler/w", "outer/scaler/count"]
        assert lay.non_trainable_weights == [lay.c]
        assert y.op.name.startswith("outer/scaler/")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            np.testing.assert_allclose(s.run(y), [[1.0, 2.0]])


def test_layer_errors_name_the_layer():
    with af.Graph().as_default():
        d = af.layers.Dense(3)
        d(af.zeros([2, 4]))
        with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 4"):
            d(af.zeros([2, 5]))
        with pytest.raises(ValueError, match="expected ndim=3"):
            af.layers.Conv1D(2, 3)(af.zeros([2, 4]))
        with pytest.raises(ValueError, match="rate must be in"):
            af.layers.Dropout(1.5)
        with pytest.raises(TypeError, match="unexpected keyword"):
            af.layers.MaxPooling1D(2, 2, bogus=1)


def test_conv1d_channels_first_causal_and_pooling1d_agree():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 3))
    k = rng.standard_normal((3, 3, 4))
    with af.Graph().as_default():
        xl = af.constant(x)
        xf = af.transpose(xl, [0, 2, 1])
        init = af.constant_initializer(k)
        last = af.layers.Conv1D(4, 3, strides=2, padding="same", kernel_initializer=init)(xl)
        first = af.layers.Conv1D(4, 3, strides=2, padding="same", data_format="channels_first",
                                 kernel_initializer=init)(xf)
        causal = af.layers.conv1d(xl, 4, 3, padding="causal", dilation_rate=2, kernel_initializer=init)
        manual = af.layers.conv1d(af.pad(xl, [[0, 0], [4, 0], [0, 0]]), 4, 3, dilation_rate=2,
                                  kernel_initializer=init)
        mp_l = af.layers.max_pooling1d(xl, 3, 2, padding="same")
        mp_f = af.layers.MaxPooling1D(3, 2, padding="same", data_format="channels_first")(xf)
        ap_l = af.layers.average_pooling1d(xl, 2, 1)
        ap_f = af.layers.AveragePooling1D(2, 1, data_format="channels_first")(xf)
        assert last.shape.as_list() == [2, 4, 4] and first.shape.as_list() == [2, 4, 4]
        assert causal.shape.as_list() == [2, 7, 4]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            a, b, c, d, e, f, g, h = s.run([last, first, causal, manual, mp_l, mp_f, ap_l, ap_f])
    np.testing.assert_allclose(b, a.transpose(0, 2, 1), rtol=1e-12)
    np.testing.assert_allclose(c, d, rtol=1e-12)
    np.testing.assert_allclose(f, e.transpose(0, 2, 1))
    np.testing.assert_allclose(h, g.transpose(0, 2, 1), rtol=1e-12)
    # A direct evaluation of the first output step: windows start at -1 with SAME, stride 2.
    want0 = sum(x[:, t] @ k[i] for i, t in enumerate([-1, 0, 1]) if t >= 0)
    np.testing.assert_allclose(a[:, 0], want0, rtol=1e-12)
