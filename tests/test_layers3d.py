"""af.layers' 3-D layers (tf.compat.v1.layers.Conv3D, Conv3DTranspose, MaxPooling3D,
AveragePooling3D and their function forms): variable names and shapes as TF's layers, numerics
against a direct numpy reference, channels_first, and a training step through the gradients."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow import layers

RNG = np.random.default_rng(7)


def _var_names():
    return [v.op.name for v in af.global_variables()]


def _run(fetches):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches)


def _pads(n, k, s, padding):
    if padding == "valid":
        return (n - k) // s + 1, 0
    o = -(-n // s)
    return o, max((o - 1) * s + k - n, 0) // 2


def _conv3d_ref(x, k, strides, padding):
    """Direct loops over output positions: sum of window * kernel."""
    dims = [_pads(x.shape[1 + i], k.shape[i], strides[i], padding) for i in range(3)]
    outs = [d[0] for d in dims]
    before = [d[1] for d in dims]
    padded = np.zeros((x.shape[0], *[x.shape[1 + i] + 2 * k.shape[i] for i in range(3)], x.shape[4]))
    padded[:, before[0]:before[0] + x.shape[1], before[1]:before[1] + x.shape[2],
           before[2]:before[2] + x.shape[3]] = x
    out = np.zeros((x.shape[0], *outs, k.shape[4]))
    for idx in np.ndindex(*outs):
        lo = [idx[i] * strides[i] for i in range(3)]
        win = padded[:, lo[0]:lo[0] + k.shape[0], lo[1]:lo[1] + k.shape[1], lo[2]:lo[2] + k.shape[2]]
        out[(slice(None), *idx)] = np.tensordot(win, k, axes=([1, 2, 3, 4], [0, 1, 2, 3]))
    return out


@pytest.mark.parametrize("padding,strides", [("valid", (1, 1, 1)), ("same", (1, 1, 1)), ("same", (2, 1, 2)),
                                             ("valid", (2, 2, 1))])
def test_conv3d_names_and_numerics(padding, strides):
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 5, 6, 4, 3))
        y = layers.conv3d(af.constant(xv), 4, (3, 2, 2), strides=strides, padding=padding,
                          bias_initializer=af.constant_initializer(0.25))
        assert _var_names() == ["conv3d/kernel", "conv3d/bias"]
        g = af.get_default_graph()
        yv, k, b = _run([y, g.get_tensor_by_name("conv3d/kernel:0"), g.get_tensor_by_name("conv3d/bias:0")])
        assert k.shape == (3, 2, 2, 3, 4) and b.shape == (4,)
        assert tuple(y.shape.as_list()) == yv.shape
        np.testing.assert_allclose(yv, _conv3d_ref(xv, k, strides, padding) + b, rtol=1e-10, atol=1e-12)


def test_conv3d_channels_first_matches_channels_last():
    with af.Graph().as_default():
        xv = RNG.standard_normal((1, 4, 5, 4, 2))
        init = af.constant_initializer(RNG.standard_normal((2, 2, 3, 2, 3)))
        last = layers.Conv3D(3, (2, 2, 3), padding="same", kernel_initializer=init, name="a")(af.constant(xv))
        first = layers.Conv3D(3, (2, 2, 3), padding="same", kernel_initializer=init, data_format="channels_first",
                              name="b")(af.constant(xv.transpose(0, 4, 1, 2, 3)))
        lv, fv = _run([last, first])
        np.testing.assert_allclose(fv.transpose(0, 2, 3, 4, 1), lv, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("padding,strides,kernel", [("same", 2, 3), ("valid", 2, 3), ("valid", 3, 2),
                                                    ("valid", 1, (2, 3, 1))])
def test_conv3d_transpose_shapes_names_and_adjointness(padding, strides, kernel):
    """The layer is the adjoint of the matching conv3d: <T(x), y> == <x, conv(y)> for the same kernel."""
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 3, 4, 2, 3))
        layer = layers.Conv3DTranspose(5, kernel, strides=strides, padding=padding, use_bias=False)
        t = layer(af.constant(xv))
        assert _var_names() == ["conv3d_transpose/kernel"]
        ks = layer.kernel_size
        st = layer.strides
        want = [xv.shape[1 + i] * st[i] + (0 if padding == "same" else max(ks[i] - st[i], 0)) for i in range(3)]
        assert t.shape.as_list() == [2, *want, 5]
        tv, k = _run([t, layer.kernel])
        assert k.shape == (*ks, 5, 3)
        yv = RNG.standard_normal(tv.shape)
        conv = _conv3d_ref(yv, k, st, padding)                  # [2, ..., 3]: the forward convolution
        np.testing.assert_allclose(np.sum(tv * yv), np.sum(xv * conv), rtol=1e-10)


def test_pooling3d_layers_and_function_forms():
    with af.Graph().as_default():
        xv = RNG.standard_normal((2, 4, 6, 4, 3)).astype(np.float32)
        x = af.constant(xv)
        mp = layers.max_pooling3d(x, 2, 2)
        ap = layers.AveragePooling3D((2, 3, 2), (2, 3, 2))(x)
        mf = layers.MaxPooling3D(2, 2, data_format="channels_first")(af.constant(xv.transpose(0, 4, 1, 2, 3)))
        sp = layers.average_pooling3d(x, 3, 1, padding="same")
        assert mp.op.name.startswith("max_pooling3d/") and ap.shape.as_list() == [2, 2, 2, 2, 3]
        mpv, apv, mfv, spv = _run([mp, ap, mf, sp])
        np.testing.assert_allclose(mpv, xv.reshape(2, 2, 2, 3, 2, 2, 2, 3).max(axis=(2, 4, 6)))
        np.testing.assert_allclose(apv, xv.reshape(2, 2, 2, 2, 3, 2, 2, 3).mean(axis=(2, 4, 6)), rtol=1e-6)
        np.testing.assert_allclose(mfv.transpose(0, 2, 3, 4, 1), mpv)
        assert spv.shape == xv.shape
        corner = xv[:, :2, :2, :2].mean(axis=(1, 2, 3))           # SAME: only real elements are averaged
        np.testing.assert_allclose(spv[:, 0, 0, 0], corner, rtol=1e-6)


def test_a_3d_network_trains():
    with af.Graph().as_default():
        xv = RNG.standard_normal((4, 6, 6, 6, 1)).astype(np.float32)
        x = af.constant(xv)
        h = layers.conv3d(x, 4, 3, padding="same", activation=af.nn.relu)
        h = layers.max_pooling3d(h, 2, 2)
        h = layers.conv3d_transpose(h, 2, 2, strides=2)
        loss = af.reduce_mean(af.square(h - 0.5))
        step = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        assert _var_names() == ["conv3d/kernel", "conv3d/bias", "conv3d_transpose/kernel", "conv3d_transpose/bias"]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            first = s.run(loss)
            for _ in range(20):
                s.run(step)
            assert s.run(loss) < first


def test_layer_argument_errors():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="3 ints"):
            layers.Conv3D(2, (2, 2))
        with pytest.raises(ValueError, match="ndim=5"):
            layers.conv3d(af.placeholder(af.float32, [None, 4, 4, 3]), 2, 2)


def test_conv2d_transpose_valid_output_size_with_kernel_below_stride_is_keras():
    """TF's layers (Keras's deconv_output_length): size * stride + max(kernel - stride, 0); a 2x2
    kernel at stride 3 turns 3 into 9 (TF 2.21 gives (1, 9, 9, 1)), not (3 - 1) * 3 + 2 = 8."""
    with af.Graph().as_default():
        y = layers.conv2d_transpose(af.constant(np.ones((1, 3, 3, 1))), 1, 2, strides=3)
        assert y.shape.as_list() == [1, 9, 9, 1]
        yv, k, b = _run([y, af.global_variables()[0], af.global_variables()[1]])
        assert yv.shape == (1, 9, 9, 1)
        np.testing.assert_allclose(yv[0, 6:8, 6:8, 0], k[:, :, 0, 0] + b[0])      # the last input's taps
        np.testing.assert_allclose(yv[0, 8, :, 0], b[0])                          # the extra row: bias only
