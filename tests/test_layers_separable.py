"""af.layers.SeparableConv1D / SeparableConv2D and their function forms: TF's variable names and
shapes, numerics against a direct numpy reference (depthwise then pointwise), 1-D as 2-D over a
height of 1, causal padding, and training through the gradients."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow import layers

RNG = np.random.default_rng(11)


def _names():
    return [v.op.name for v in af.global_variables()]


def _run(fetches):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches)


def _separable_ref(x, dk, pk, stride, padding):
    """NHWC depthwise (channel c*M+m from input channel c) then the 1x1 pointwise matmul."""
    kh, kw, c, m = dk.shape
    if padding == "same":
        oh, ow = -(-x.shape[1] // stride), -(-x.shape[2] // stride)
        ph = max((oh - 1) * stride + kh - x.shape[1], 0)
        pw = max((ow - 1) * stride + kw - x.shape[2], 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    oh, ow = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    dw = np.zeros((x.shape[0], oh, ow, c * m))
    for i in range(oh):
        for j in range(ow):
            win = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]      # [n, kh, kw, c]
            dw[:, i, j, :] = np.einsum("nhwc,hwcm->ncm", win, dk).reshape(x.shape[0], c * m)
    return dw @ pk.reshape(c * m, -1)


@pytest.mark.parametrize("padding,stride,mult", [("valid", 1, 1), ("same", 2, 2), ("same", 1, 3)])
def test_separable_conv2d_names_shapes_and_numerics(padding, stride, mult):
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 6, 5, 3))
        y = layers.separable_conv2d(af.constant(xv), 4, (3, 2), strides=stride, padding=padding,
                                    depth_multiplier=mult, bias_initializer=af.constant_initializer(0.5))
        assert _names() == ["separable_conv2d/depthwise_kernel", "separable_conv2d/pointwise_kernel",
                            "separable_conv2d/bias"]
        g = af.get_default_graph()
        yv, dk, pk, b = _run([y] + [g.get_tensor_by_name(n + ":0") for n in _names()])
        assert dk.shape == (3, 2, 3, mult) and pk.shape == (1, 1, 3 * mult, 4) and b.shape == (4,)
        assert tuple(y.shape.as_list()) == yv.shape
        np.testing.assert_allclose(yv, _separable_ref(xv, dk, pk, stride, padding) + b, rtol=1e-10, atol=1e-12)


def test_separable_conv1d_is_2d_over_height_one_and_causal_pads_the_start():
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 9, 3))
        layer = layers.SeparableConv1D(5, 3, dilation_rate=2, padding="causal", depth_multiplier=2)
        y = layer(af.constant(xv))
        same = layers.separable_conv1d(af.constant(xv), 5, 3, strides=2, padding="same", use_bias=False)
        assert _names()[:3] == ["separable_conv1d/depthwise_kernel", "separable_conv1d/pointwise_kernel",
                                "separable_conv1d/bias"]
        assert y.shape.as_list() == [2, 9, 5] and same.shape.as_list() == [2, 5, 5]
        g = af.get_default_graph()
        yv, dk, pk, b, sv, dk2, pk2 = _run([y, layer.depthwise_kernel, layer.pointwise_kernel, layer.bias, same,
                                            g.get_tensor_by_name("separable_conv1d_1/depthwise_kernel:0"),
                                            g.get_tensor_by_name("separable_conv1d_1/pointwise_kernel:0")])
        assert dk.shape == (3, 3, 2) and pk.shape == (1, 6, 5)
        # causal with dilation 2: output t sees inputs t-4, t-2, t (zeros before the start)
        padded = np.pad(xv, ((0, 0), (4, 0), (0, 0)))
        dil = np.zeros((5, 3, 2))
        dil[::2] = dk                                          # the dilated kernel: taps at 0, 2, 4
        want = _separable_ref(padded[:, None], dil[None], pk[None], 1, "valid")[:, 0] + b
        np.testing.assert_allclose(yv, want, rtol=1e-10, atol=1e-12)
        want_same = _separable_ref(xv[:, None], dk2[None], pk2[None], 2, "same")[:, 0]
        np.testing.assert_allclose(sv, want_same, rtol=1e-10, atol=1e-12)


def test_channels_first_and_training():
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)        # NCHW
        init_d = af.constant_initializer(RNG.standard_normal((3, 3, 3, 1)))
        init_p = af.constant_initializer(RNG.standard_normal((1, 1, 3, 2)))
        first = layers.SeparableConv2D(2, 3, data_format="channels_first", depthwise_initializer=init_d,
                                       pointwise_initializer=init_p, name="cf")(af.constant(xv))
        last = layers.SeparableConv2D(2, 3, depthwise_initializer=init_d, pointwise_initializer=init_p,
                                      name="cl")(af.constant(xv.transpose(0, 2, 3, 1)))
        loss = af.reduce_mean(af.square(first - 1.0))
        step = af.train.GradientDescentOptimizer(0.05).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            fv, lv = s.run([first, last])
            np.testing.assert_allclose(fv.transpose(0, 2, 3, 1), lv, rtol=1e-5, atol=1e-5)
            before = s.run(loss)
            for _ in range(10):
                s.run(step)
            assert s.run(loss) < before
