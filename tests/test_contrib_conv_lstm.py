"""tf.contrib.rnn's ConvLSTMCell family: variable names and shapes as TF 1.15 creates them, and the
recurrence against a numpy transcription of its equations (SAME convolutions of [x, h])."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af


def _conv2d_same(x, k):
    """Stride-1 SAME 2-D convolution (cross-correlation), NHWC, kernel HWIO."""
    kh, kw = k.shape[:2]
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    xp = np.pad(x, ((0, 0), (ph, kh - 1 - ph), (pw, kw - 1 - pw), (0, 0)))
    out = np.zeros(x.shape[:3] + (k.shape[3],), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("bhwc,co->bhwo", xp[:, i:i + x.shape[1], j:j + x.shape[2]], k[i, j])
    return out


def _sig(z):
    return 1 / (1 + np.exp(-z))


@pytest.mark.parametrize("skip", [False])
def test_conv2d_lstm_cell_in_dynamic_rnn_follows_tf_15s_equations(skip):
    rng = np.random.RandomState(0)
    x = rng.randn(2, 3, 5, 4, 3).astype(np.float32)          # batch, time, h, w, channels
    with af.Graph().as_default():
        cell = af.contrib.rnn.Conv2DLSTMCell(input_shape=[5, 4, 3], output_channels=6, kernel_shape=[3, 3],
                                             skip_connection=skip)
        assert cell.output_size.as_list() == [5, 4, 9 if skip else 6]
        assert cell.state_size.c.as_list() == [5, 4, 6]
        out, state = af.nn.dynamic_rnn(cell, af.constant(x), dtype=af.float32)
        names = {v.op.name: v.shape.as_list() for v in af.global_variables()}
        assert names == {"rnn/conv_2d_lstm_cell/kernel": [3, 3, 9, 24], "rnn/conv_2d_lstm_cell/biases": [24]}
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            got, (c_last, h_last), kernel, bias = sess.run(
                [out, state, "rnn/conv_2d_lstm_cell/kernel:0", "rnn/conv_2d_lstm_cell/biases:0"])
    c = np.zeros((2, 5, 4, 6))
    h = np.zeros((2, 5, 4, 6))
    outs = []
    for t in range(3):
        z = _conv2d_same(np.concatenate([x[:, t], h], -1), kernel) + bias
        i, j, f, o = np.split(z, 4, axis=-1)
        c = _sig(f + 1.0) * c + _sig(i) * np.tanh(j)
        h = np.tanh(c) * _sig(o)
        outs.append(np.concatenate([h, x[:, t]], -1) if skip else h)
    np.testing.assert_allclose(got, np.stack(outs, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c_last, c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h_last, outs[-1], rtol=1e-4, atol=1e-5)


def test_conv1d_and_3d_cells_and_their_errors():
    with af.Graph().as_default():
        c1 = af.contrib.rnn.Conv1DLSTMCell(input_shape=[7, 2], output_channels=3, kernel_shape=[3], use_bias=False)
        out, _ = af.nn.dynamic_rnn(c1, af.zeros([4, 5, 7, 2]), dtype=af.float32)
        assert out.shape.as_list() == [4, 5, 7, 3]
        c3 = af.contrib.rnn.Conv3DLSTMCell(input_shape=[2, 3, 4, 1], output_channels=2, kernel_shape=[1, 3, 3])
        out3, _ = af.nn.dynamic_rnn(c3, af.zeros([1, 2, 2, 3, 4, 1]), dtype=af.float32, scope="r3")
        assert out3.shape.as_list() == [1, 2, 2, 3, 4, 2]
        assert "r3/conv_3d_lstm_cell/kernel" in {v.op.name for v in af.global_variables()}
        assert not any(v.op.name.endswith("conv_1d_lstm_cell/biases") for v in af.global_variables())
        with pytest.raises(ValueError, match="Invalid input_shape"):
            af.contrib.rnn.ConvLSTMCell(2, [5, 3], 4, [3, 3])


def test_a_skip_connection_concatenates_the_inputs_and_breaks_dynamic_rnn_as_in_tf():
    """TF 1.15 keeps the concatenated output as the state's h while state_size says output_channels
    (tensorflow/tensorflow#21400): one step works, a while loop over the cell fails on the shape."""
    x = np.random.RandomState(1).randn(2, 5, 4, 3).astype(np.float32)
    with af.Graph().as_default():
        cell = af.contrib.rnn.Conv2DLSTMCell(input_shape=[5, 4, 3], output_channels=6, kernel_shape=[3, 3],
                                             skip_connection=True)
        out, state = cell(af.constant(x), cell.zero_state(2, af.float32))
        assert out.shape.as_list() == [2, 5, 4, 9] and state.h.shape.as_list() == [2, 5, 4, 9]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            np.testing.assert_allclose(sess.run(out)[..., 6:], x, rtol=1e-6)
        with pytest.raises(ValueError, match="not an invariant for the loop"):
            af.nn.dynamic_rnn(cell, af.constant(x[:, None]), dtype=af.float32)
