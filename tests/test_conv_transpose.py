"""conv2d_transpose (nn and layers) against a direct numpy reference, its gradients against finite
differences, and the shapes TF gives."""
import numpy as np
import pytest

import actorflow as af
from tests.gradcheck import check_gradients


def _reference(dy, f, out_shape, stride, padding):
    """Scatters each input pixel through the filter: out[i*s + a - pad] += f[a, b] @ dy[i, j]."""
    n, h, w, _ = dy.shape
    kh, kw = f.shape[:2]
    out_h, out_w = out_shape[1:3]
    pad_t = pad_l = 0
    if padding == "SAME":
        pad_t = max((-(-out_h // stride) - 1) * stride + kh - out_h, 0) // 2
        pad_l = max((-(-out_w // stride) - 1) * stride + kw - out_w, 0) // 2
    out = np.zeros(out_shape, dtype=np.float64)
    for i in range(h):
        for j in range(w):
            for a in range(kh):
                for b in range(kw):
                    y, x = i * stride + a - pad_t, j * stride + b - pad_l
                    if 0 <= y < out_h and 0 <= x < out_w:
                        out[:, y, x, :] += dy[:, i, j, :] @ f[a, b].T
    return out


@pytest.mark.parametrize("stride, padding, out_hw", [(2, "SAME", 8), (2, "VALID", 9), (1, "SAME", 4), (3, "VALID", 12)])
def test_conv2d_transpose_matches_reference(stride, padding, out_hw):
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((2, 4, 4, 3))
    f = rng.standard_normal((3, 3, 5, 3))
    out_shape = [2, out_hw, out_hw, 5]
    with af.Graph().as_default(), af.Session() as sess:
        y = af.nn.conv2d_transpose(af.constant(dy), af.constant(f), out_shape, strides=[1, stride, stride, 1],
                                   padding=padding)
        assert y.shape.as_list() == out_shape
        np.testing.assert_allclose(sess.run(y), _reference(dy, f, out_shape, stride, padding), rtol=1e-10)


def test_conv2d_transpose_gradients():
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((1, 3, 3, 2))
    f = rng.standard_normal((2, 2, 3, 2))
    check_gradients(lambda a, b: af.nn.conv2d_transpose(a, b, [1, 6, 6, 3], strides=2, padding="SAME"), [dy, f])


def test_conv2d_transpose_rejects_mismatched_channels():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="input channels"):
            af.nn.conv2d_transpose(af.zeros([1, 4, 4, 3]), af.zeros([3, 3, 5, 2]), [1, 8, 8, 5], strides=2)


def test_layers_conv2d_transpose_shapes_and_training():
    """As in a DCGAN generator: a dynamic batch, 'valid' and 'same' padding, and training through it."""
    with af.Graph().as_default(), af.Session() as sess:
        af.set_random_seed(3)
        x = af.placeholder(af.float32, [None, 6, 6, 8])
        h = af.layers.conv2d_transpose(x, 4, 4, strides=2)
        assert h.shape.as_list() == [None, 14, 14, 4]
        y = af.layers.conv2d_transpose(h, 1, 2, strides=2, padding="same", name="out")
        assert y.shape.as_list() == [None, 28, 28, 1]
        names = sorted(v.op.name for v in af.trainable_variables())
        assert names == ["conv2d_transpose/bias", "conv2d_transpose/kernel", "out/bias", "out/kernel"]
        assert af.trainable_variables()[0].shape.as_list() == [4, 4, 4, 8]
        target = np.random.default_rng(0).random((5, 28, 28, 1)).astype(np.float32)
        loss = af.reduce_mean(af.square(y - target))
        train = af.train.AdamOptimizer(1e-2).minimize(loss)
        sess.run(af.global_variables_initializer())
        feed = {x: np.random.default_rng(1).standard_normal((5, 6, 6, 8)).astype(np.float32)}
        first = sess.run(loss, feed)
        for _ in range(30):
            sess.run(train, feed)
        assert sess.run(loss, feed) < 0.5 * first
        assert sess.run(y, feed).shape == (5, 28, 28, 1)
