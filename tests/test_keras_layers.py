"""af.keras layers called on graph tensors (tf.keras of TF 1.x, graph mode), checked against
numpy computations with the layers' own weights read back."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow import keras
from actorflow.keras import backend as K

L = keras.layers


@pytest.fixture(autouse=True)
def _fresh_graph():
    af.reset_default_graph()
    af.set_random_seed(0)
    yield
    af.reset_default_graph()


def _sess():
    sess = af.Session()
    sess.run(af.global_variables_initializer())
    return sess


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _hard_sigmoid(x):
    return np.clip(0.2 * x + 0.5, 0, 1)


def test_dense_on_a_placeholder_trains_with_a_tf_loss_and_optimizer():
    rng = np.random.RandomState(0)
    xv = rng.randn(64, 5).astype(np.float32)
    yv = (xv @ rng.randn(5, 1)).astype(np.float32)
    x = af.placeholder(af.float32, [None, 5])
    y = af.placeholder(af.float32, [None, 1])
    h = L.Dense(16, activation="relu")(x)
    out_layer = L.Dense(1)
    out = out_layer(h)
    loss = af.losses.mean_squared_error(y, out)
    train = af.train.AdamOptimizer(0.01).minimize(loss)
    names = [v.name for v in af.trainable_variables()]
    assert names == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    assert {v.name for v in af.global_variables()} >= set(names)
    with _sess() as sess:
        first = sess.run(loss, {x: xv, y: yv})
        for _ in range(150):
            sess.run(train, {x: xv, y: yv})
        assert sess.run(loss, {x: xv, y: yv}) < 0.2 * first
        with sess.as_default():
            W, b = out_layer.get_weights()
            hv = sess.run(h, {x: xv})
            np.testing.assert_allclose(sess.run(out, {x: xv}), hv @ W + b, rtol=1e-5, atol=1e-5)
            out_layer.set_weights([np.full_like(W, 0.5), np.ones_like(b)])
            np.testing.assert_allclose(sess.run(out, {x: xv}), 0.5 * hv.sum(1, keepdims=True) + 1, rtol=1e-5)
            with pytest.raises(ValueError, match="expecting 2 weights"):
                out_layer.set_weights([W])
            with pytest.raises(ValueError, match="dense_1/kernel"):
                out_layer.set_weights([np.ones((3, 3)), b])
    assert out_layer.output_shape == (None, 1)
    assert out_layer.name == "dense_1" and out_layer.trainable_weights == out_layer.weights


def test_layer_attributes_config_and_names():
    x = af.placeholder(af.float32, [None, 4])
    d = L.Dense(3, activation="tanh", kernel_initializer="he_normal", name="proj")
    d(x)
    cfg = d.get_config()
    assert cfg["name"] == "proj" and cfg["units"] == 3 and cfg["activation"] == "tanh"
    assert cfg["kernel_initializer"]["class_name"] == "VarianceScaling"
    d2 = L.Dense.from_config(cfg)
    assert d2.units == 3 and d2.activation is keras.activations.tanh
    assert d.count_params() == 15 and d.input_shape == (None, 4)
    assert [L.Activation("relu").name, L.Activation("relu").name] == ["activation", "activation_1"]
    with pytest.raises(ValueError, match="Unknown activation"):
        L.Dense(2, activation="nope")


def test_conv_pooling_and_global_pooling_against_numpy():
    rng = np.random.RandomState(1)
    xv = rng.randn(2, 6, 6, 3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 6, 6, 3])
    conv = L.Conv2D(4, (3, 3), activation="relu")
    c = conv(x)
    mp = L.MaxPooling2D()(c)
    ap = L.AveragePooling2D()(c)
    gap = L.GlobalAveragePooling2D()(c)
    gmp = L.GlobalMaxPooling2D()(c)
    with _sess() as sess, sess.as_default():
        W, b = conv.get_weights()
        got = sess.run([c, mp, ap, gap, gmp], {x: xv})
    ref = np.zeros((2, 4, 4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            ref[:, i, j, :] = np.einsum("nhwc,hwcf->nf", xv[:, i:i + 3, j:j + 3, :], W) + b
    ref = np.maximum(ref, 0)
    np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-5)
    blocks = ref.reshape(2, 2, 2, 2, 2, 4)
    np.testing.assert_allclose(got[1], blocks.max(axis=(2, 4)), rtol=1e-5)
    np.testing.assert_allclose(got[2], blocks.mean(axis=(2, 4)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], ref.mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[4], ref.max(axis=(1, 2)), rtol=1e-5)


def test_conv1d_pooling1d_and_transpose_shapes():
    rng = np.random.RandomState(2)
    xv = rng.randn(2, 7, 3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 7, 3])
    conv = L.Conv1D(2, 3, padding="same")
    c = conv(x)
    m = L.MaxPooling1D(2)(x)
    a = L.AveragePooling1D(2)(x)
    g1 = L.GlobalAveragePooling1D()(x)
    g2 = L.GlobalMaxPooling1D()(x)
    img = af.placeholder(af.float32, [None, 4, 4, 3])
    t = L.Conv2DTranspose(5, 3, strides=2, padding="same")(img)
    assert t.shape.as_list() == [None, 8, 8, 5]
    with _sess() as sess, sess.as_default():
        W, b = conv.get_weights()
        got = sess.run([c, m, a, g1, g2], {x: xv})
    padded = np.pad(xv, [(0, 0), (1, 1), (0, 0)])
    ref = np.stack([np.einsum("nkc,kcf->nf", padded[:, i:i + 3], W) for i in range(7)], 1) + b
    np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], xv[:, :6].reshape(2, 3, 2, 3).max(2))
    np.testing.assert_allclose(got[2], xv[:, :6].reshape(2, 3, 2, 3).mean(2), rtol=1e-6)
    np.testing.assert_allclose(got[3], xv.mean(1), rtol=1e-5)
    np.testing.assert_allclose(got[4], xv.max(1))


def test_dropout_follows_the_learning_phase_and_the_training_argument():
    x = af.placeholder(af.float32, [None, 1000])
    d = L.Dropout(0.5)(x)
    d_fixed = L.Dropout(0.5)(x, training=True)
    xv = np.ones((2, 1000), np.float32)
    with _sess() as sess:
        np.testing.assert_array_equal(sess.run(d, {x: xv}), xv)
        for out in (sess.run(d, {x: xv, K.learning_phase(): True}), sess.run(d_fixed, {x: xv})):
            assert set(np.unique(out)) <= {0.0, 2.0}
            assert 0.35 < (out == 0).mean() < 0.65


def test_set_learning_phase_fixes_dropout_statically():
    K.set_learning_phase(1)
    x = af.placeholder(af.float32, [None, 500])
    d = L.Dropout(0.5)(x)
    with _sess() as sess:
        assert (sess.run(d, {x: np.ones((1, 500), np.float32)}) == 0).any()


def test_batch_normalization_updates_and_inference():
    rng = np.random.RandomState(3)
    xv = (rng.randn(16, 3) * 2 + 5).astype(np.float32)
    x = af.placeholder(af.float32, [None, 3])
    bn = L.BatchNormalization(momentum=0.9)
    y = bn(x)
    assert len(bn.updates) == 2
    assert set(bn.updates) <= set(af.get_collection(af.GraphKeys.UPDATE_OPS))
    assert [w.name for w in bn.trainable_weights] == ["batch_normalization/gamma:0", "batch_normalization/beta:0"]
    assert len(bn.non_trainable_weights) == 2
    with _sess() as sess, sess.as_default():
        train_out = sess.run([y] + bn.updates, {x: xv, K.learning_phase(): True})[0]
        mean, var = xv.mean(0), xv.var(0)
        np.testing.assert_allclose(train_out, (xv - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4)
        gamma, beta, mm, mv = bn.get_weights()
        np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-5)
        infer = sess.run(y, {x: xv})
        np.testing.assert_allclose(infer, (xv - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-4)


def test_shape_and_merge_layers_against_numpy():
    rng = np.random.RandomState(4)
    av, bv = rng.randn(3, 4).astype(np.float32), rng.randn(3, 4).astype(np.float32)
    a, b = af.placeholder(af.float32, [None, 4]), af.placeholder(af.float32, [None, 4])
    img = af.placeholder(af.float32, [None, 2, 2, 1])
    iv = rng.randn(2, 2, 2, 1).astype(np.float32)
    outs = {
        "concat": (L.concatenate([a, b]), np.concatenate([av, bv], 1)),
        "Concat0": (L.Concatenate(axis=0)([a, b]), np.concatenate([av, bv], 0)),
        "add": (L.add([a, b, a]), 2 * av + bv),
        "mul": (L.Multiply()([a, b]), av * bv),
        "sub": (L.Subtract()([a, b]), av - bv),
        "avg": (L.Average()([a, b]), (av + bv) / 2),
        "max": (L.Maximum()([a, b]), np.maximum(av, bv)),
        "reshape": (L.Reshape((2, 2))(a), av.reshape(3, 2, 2)),
        "reshape-1": (L.Reshape((-1, 1))(a), av.reshape(3, 4, 1)),
        "permute": (L.Permute((2, 1))(L.Reshape((2, 2))(a)), av.reshape(3, 2, 2).transpose(0, 2, 1)),
        "repeat": (L.RepeatVector(3)(a), np.repeat(av[:, None], 3, 1)),
        "lambda": (L.Lambda(lambda t, k: t * k, arguments={"k": 3.0})(a), 3 * av),
        "act": (L.Activation("sigmoid")(a), _sigmoid(av)),
        "leaky": (L.LeakyReLU()(a), np.where(av > 0, av, 0.3 * av)),
        "relu6": (L.ReLU(max_value=6.0)(a * 10), np.clip(av * 10, 0, 6)),
        "softmax": (L.Softmax()(a), np.exp(av) / np.exp(av).sum(1, keepdims=True)),
        "pad": (L.ZeroPadding2D(1)(img), np.pad(iv, [(0, 0), (1, 1), (1, 1), (0, 0)])),
        "up": (L.UpSampling2D((2, 3))(img), iv.repeat(2, 1).repeat(3, 2)),
    }
    with _sess() as sess:
        got = sess.run({k: v[0] for k, v in outs.items()}, {a: av, b: bv, img: iv})
    for k, (_, ref) in outs.items():
        np.testing.assert_allclose(got[k], ref, rtol=1e-5, atol=1e-6, err_msg=k)
    with pytest.raises(ValueError, match="list of inputs"):
        L.Add()(a)


def test_embedding_gathers_rows():
    ids = af.placeholder(af.int32, [None, 3])
    emb = L.Embedding(10, 4)
    out = emb(ids)
    assert out.shape.as_list() == [None, 3, 4] and emb.weights[0].name == "embedding/embeddings:0"
    iv = np.array([[1, 2, 9], [0, 0, 5]])
    with _sess() as sess, sess.as_default():
        (E,) = emb.get_weights()
        assert np.abs(E).max() <= 0.05
        np.testing.assert_allclose(sess.run(out, {ids: iv}), E[iv])
    assert getattr(out, "_keras_mask", None) is None        # masks: tests/test_keras_masking.py


def _np_rnn(kind, xv, weights, units, go_backwards=False):
    if go_backwards:
        xv = xv[:, ::-1]
    W, U, b = weights
    n = xv.shape[0]
    h = np.zeros((n, units), np.float32)
    c = np.zeros((n, units), np.float32)
    outs = []
    for t in range(xv.shape[1]):
        x = xv[:, t]
        if kind == "SimpleRNN":
            h = np.tanh(x @ W + h @ U + b)
        elif kind == "LSTM":
            z = x @ W + h @ U + b
            i, f, cc, o = np.split(z, 4, axis=1)
            c = _hard_sigmoid(f) * c + _hard_sigmoid(i) * np.tanh(cc)
            h = _hard_sigmoid(o) * np.tanh(c)
        else:
            xz, xr, xh = np.split(x @ W + b, 3, axis=1)
            Uz, Ur, Uh = np.split(U, 3, axis=1)
            z = _hard_sigmoid(xz + h @ Uz)
            r = _hard_sigmoid(xr + h @ Ur)
            hh = np.tanh(xh + (r * h) @ Uh)
            h = z * h + (1 - z) * hh
        outs.append(h)
    return np.stack(outs, 1), h, c


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_recurrent_layers_against_numpy(kind):
    rng = np.random.RandomState(5)
    xv = rng.randn(3, 4, 2).astype(np.float32)
    x = af.placeholder(af.float32, [None, 4, 2])
    layer = getattr(L, kind)(5, return_sequences=True, return_state=True)
    outs = layer(x)
    assert len(outs) == (3 if kind == "LSTM" else 2)
    assert [w.name.split("/")[-1] for w in layer.weights] == ["kernel:0", "recurrent_kernel:0", "bias:0"]
    last = getattr(L, kind)(5, go_backwards=True)
    last_out = last(x)
    with _sess() as sess, sess.as_default():
        if kind == "LSTM":
            np.testing.assert_allclose(layer.get_weights()[2][5:10], 1.0)   # unit_forget_bias
        got = sess.run(outs + [last_out], {x: xv})
        seq, h, c = _np_rnn(kind, xv, layer.get_weights(), 5)
        _, h_back, _ = _np_rnn(kind, xv, last.get_weights(), 5, go_backwards=True)
    np.testing.assert_allclose(got[0], seq, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], h, rtol=1e-4, atol=1e-5)
    if kind == "LSTM":
        np.testing.assert_allclose(got[2], c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[-1], h_back, rtol=1e-4, atol=1e-5)


def test_lstm_trains_through_the_loop():
    rng = np.random.RandomState(6)
    xv = rng.randn(32, 5, 2).astype(np.float32)
    yv = xv.sum(axis=(1, 2))[:, None].astype(np.float32)
    x, y = af.placeholder(af.float32, [None, 5, 2]), af.placeholder(af.float32, [None, 1])
    out = L.Dense(1)(L.LSTM(8)(x))
    loss = af.reduce_mean(af.square(out - y))
    train = af.train.AdamOptimizer(0.05).minimize(loss)
    with _sess() as sess:
        first = sess.run(loss, {x: xv, y: yv})
        for _ in range(40):
            sess.run(train, {x: xv, y: yv})
        assert sess.run(loss, {x: xv, y: yv}) < 0.5 * first


def test_bidirectional_and_time_distributed():
    rng = np.random.RandomState(7)
    xv = rng.randn(2, 4, 3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 4, 3])
    bi = L.Bidirectional(L.SimpleRNN(2, return_sequences=True))
    out = bi(x)
    assert out.shape.as_list() == [None, 4, 4] and len(bi.weights) == 6
    bsum = L.Bidirectional(L.GRU(2), merge_mode="sum")(x)
    td_dense = L.Dense(5)
    td = L.TimeDistributed(td_dense)(x)
    assert td.shape.as_list() == [None, 4, 5]
    with _sess() as sess, sess.as_default():
        got, got_td, _ = sess.run([out, td, bsum], {x: xv})
        fw, _, _ = _np_rnn("SimpleRNN", xv, bi.forward_layer.get_weights(), 2)
        bw, _, _ = _np_rnn("SimpleRNN", xv, bi.backward_layer.get_weights(), 2, go_backwards=True)
        W, b = td_dense.get_weights()
    np.testing.assert_allclose(got, np.concatenate([fw, bw[:, ::-1]], -1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_td, xv @ W + b, rtol=1e-5, atol=1e-5)


def test_regularizers_and_constraints():
    x = af.placeholder(af.float32, [None, 3])
    d = L.Dense(2, kernel_regularizer=keras.regularizers.l2(0.1), bias_regularizer="l1",
                kernel_constraint=keras.constraints.max_norm(1.0))
    d(x)
    assert len(d.losses) == 2
    assert set(d.losses) <= set(af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES))
    assert d.kernel.constraint is not None
    with _sess() as sess, sess.as_default():
        W, b = d.get_weights()
        kl, bl = sess.run(d.losses)
        np.testing.assert_allclose(kl, 0.1 * (W ** 2).sum(), rtol=1e-5)
        big = np.full((3, 2), 3.0, np.float32)
        projected = sess.run(d.kernel_constraint(af.constant(big)))
        np.testing.assert_allclose(np.linalg.norm(projected, axis=0), 1.0, rtol=1e-5)
        nn = sess.run(keras.constraints.non_neg()(af.constant([-1.0, 2.0])))
        np.testing.assert_allclose(nn, [0.0, 2.0])
        un = sess.run(keras.constraints.unit_norm(axis=1)(af.constant([[3.0, 4.0]])))
        np.testing.assert_allclose(un, [[0.6, 0.8]], rtol=1e-5)


def test_a_custom_layer_with_keras_add_weight_and_training_argument():
    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=(int(input_shape[-1]),), initializer="ones",
                                     regularizer="l2", constraint="non_neg")
            self.c = self.add_weight(name="c", shape=(), initializer=keras.initializers.Constant(2.0),
                                     trainable=False)
            super().build(input_shape)

        def call(self, inputs, training=None):
            return K.in_train_phase(inputs * self.w * self.c, inputs * self.w, training=training)

    x = af.placeholder(af.float32, [None, 3])
    layer = Scale()
    y = layer(x)
    assert layer.name == "scale" and [w.name for w in layer.weights] == ["scale/w:0", "scale/c:0"]
    assert len(layer.trainable_weights) == 1 and len(layer.losses) == 1
    assert layer.w.constraint is not None
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with _sess() as sess:
        np.testing.assert_allclose(sess.run(y, {x: xv}), xv)
        np.testing.assert_allclose(sess.run(y, {x: xv, K.learning_phase(): 1}), 2 * xv)


def test_pad_sequences():
    pad = keras.preprocessing.sequence.pad_sequences
    np.testing.assert_array_equal(pad([[1, 2], [3]]), [[1, 2], [0, 3]])
    np.testing.assert_array_equal(pad([[1, 2, 3], [4]], maxlen=2, padding="post", truncating="post"),
                                  [[1, 2], [4, 0]])
    np.testing.assert_array_equal(pad([[1, 2, 3]], maxlen=2), [[2, 3]])


def test_compute_output_shape():
    assert L.Dense(5).compute_output_shape((None, 3)) == (None, 5)
    assert L.Conv2D(4, 3, strides=2).compute_output_shape((None, 9, 9, 2)) == (None, 4, 4, 4)
    assert L.Concatenate().compute_output_shape([(None, 2), (None, 3)]) == (None, 5)
    x = af.placeholder(af.float32, [None, 7])
    d = L.Dense(2)
    d(x)
    assert d.compute_output_shape((None, 7)) == (None, 2)
    assert len(af.trainable_variables()) == 2           # the scratch graph's copies stay out of this one


def test_more_convolutions_against_numpy():
    rng = np.random.RandomState(8)
    xv = rng.randn(2, 5, 5, 3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 5, 5, 3])
    dw = L.DepthwiseConv2D(3, depth_multiplier=2)
    sep = L.SeparableConv2D(4, 3, padding="same")
    c3 = L.Conv3D(2, 2)
    vol = af.placeholder(af.float32, [None, 3, 3, 3, 1])
    outs = [dw(x), sep(x), c3(vol)]
    assert outs[1].shape.as_list() == [None, 5, 5, 4] and outs[2].shape.as_list() == [None, 2, 2, 2, 2]
    assert [w.name.split("/")[-1] for w in sep.weights] == ["depthwise_kernel:0", "pointwise_kernel:0", "bias:0"]
    vv = rng.randn(1, 3, 3, 3, 1).astype(np.float32)
    with _sess() as sess, sess.as_default():
        got, _, got3 = sess.run(outs, {x: xv, vol: vv})
        Kd, bd = dw.get_weights()
        W3, b3 = c3.get_weights()
    ref = np.zeros((2, 3, 3, 6), np.float32)
    for i in range(3):
        for j in range(3):
            patch = xv[:, i:i + 3, j:j + 3, :]                       # [n, 3, 3, c]
            ref[:, i, j, :] = np.einsum("nhwc,hwcm->ncm", patch, Kd).reshape(2, 6)
    np.testing.assert_allclose(got, ref + bd, rtol=1e-4, atol=1e-5)
    ref3 = np.zeros((1, 2, 2, 2, 2), np.float32)
    for a in range(2):
        for b in range(2):
            for c in range(2):
                ref3[:, a, b, c] = np.einsum("ndhwc,dhwcf->nf", vv[:, a:a + 2, b:b + 2, c:c + 2], W3) + b3
    np.testing.assert_allclose(got3, ref3, rtol=1e-4, atol=1e-5)


def test_cropping_noise_dot_prelu_thresholded_relu():
    rng = np.random.RandomState(9)
    img = af.placeholder(af.float32, [None, 5, 6, 2])
    iv = rng.randn(2, 5, 6, 2).astype(np.float32)
    seq = af.placeholder(af.float32, [None, 6, 3])
    sv = rng.randn(2, 6, 3).astype(np.float32)
    a, b = af.placeholder(af.float32, [None, 4]), af.placeholder(af.float32, [None, 4])
    av, bv = rng.randn(3, 4).astype(np.float32), rng.randn(3, 4).astype(np.float32)
    prelu = L.PReLU(alpha_initializer=keras.initializers.Constant(0.25), shared_axes=[1])
    outs = {
        "crop2": (L.Cropping2D(((1, 2), (0, 1)))(img), iv[:, 1:3, 0:5]),
        "crop1": (L.Cropping1D((2, 1))(seq), sv[:, 2:5]),
        "dot": (L.dot([a, b], axes=1), (av * bv).sum(1, keepdims=True)),
        "cos": (L.Dot(axes=-1, normalize=True)([a, b]),
                ((av / np.linalg.norm(av, axis=1, keepdims=True)) *
                 (bv / np.linalg.norm(bv, axis=1, keepdims=True))).sum(1, keepdims=True)),
        "prelu": (prelu(seq), np.where(sv > 0, sv, 0.25 * sv)),
        "trelu": (L.ThresholdedReLU(0.5)(a), np.where(av > 0.5, av, 0)),
        "noise_off": (L.GaussianNoise(1.0)(a), av),
        "gdrop_off": (L.GaussianDropout(0.3)(a), av),
    }
    assert prelu.weights[0].shape.as_list() == [1, 3]
    with _sess() as sess:
        got = sess.run({k: v[0] for k, v in outs.items()}, {img: iv, seq: sv, a: av, b: bv})
        for k, (_, ref) in outs.items():
            np.testing.assert_allclose(got[k], ref, rtol=1e-5, atol=1e-6, err_msg=k)
        noisy = sess.run(L.GaussianNoise(1.0)(a), {a: av, K.learning_phase(): True})
        assert 0.5 < np.std(noisy - av) < 1.6
        sd = L.SpatialDropout1D(0.5)(seq)
        out = sess.run(sd, {seq: np.ones((4, 6, 50), np.float32)[:, :, :3] + 0, K.learning_phase(): True})
        assert ((out == 0).all(axis=1) | (out != 0).all(axis=1)).all()     # whole channels dropped
    reg = L.ActivityRegularization(l1=0.5)
    reg(a)
    assert len(reg.losses) == 1


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_recurrent_dropout_only_in_the_training_phase(kind):
    rng = np.random.RandomState(10)
    xv = rng.randn(8, 5, 3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 5, 3])
    plain = getattr(L, kind)(4)
    dropped = getattr(L, kind)(4, dropout=0.5, recurrent_dropout=0.5)
    outs = [plain(x), dropped(x)]
    with _sess() as sess, sess.as_default():
        dropped.set_weights(plain.get_weights())
        a, b = sess.run(outs, {x: xv})
        np.testing.assert_allclose(a, b, rtol=1e-6)
        a, b = sess.run(outs, {x: xv, K.learning_phase(): True})
        assert np.abs(a - b).max() > 1e-3
        _, ref_h, _ = _np_rnn(kind, xv, plain.get_weights(), 4)
        np.testing.assert_allclose(a, ref_h, rtol=1e-4, atol=1e-5)
        # the gradient flows through the masked loop
        loss = af.reduce_sum(af.square(outs[1]))
        grads = af.gradients(loss, dropped.trainable_weights)
        assert all(np.isfinite(g).all() for g in sess.run(grads, {x: xv, K.learning_phase(): True}))


def test_input_spec_checks_a_custom_layers_inputs():
    class Pairwise(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.input_spec = L.InputSpec(ndim=3, axes={-1: 4})

        def call(self, inputs):
            return inputs * 2.0

    layer = Pairwise(name="pairwise")
    layer(af.placeholder(af.float32, [None, 2, 4]))
    with pytest.raises(ValueError, match=r"Input 0 of layer pairwise is incompatible with the layer: expected "
                                         r"ndim=3, found ndim=2. Full shape received: \(None, 4\)"):
        layer(af.placeholder(af.float32, [None, 4]))
    with pytest.raises(ValueError, match=r"expected axis -1 of input shape to have value 4"):
        layer(af.placeholder(af.float32, [None, 2, 5]))
    with pytest.raises(ValueError, match=r"expects 1 input\(s\), but it received 2 input tensors"):
        layer([af.placeholder(af.float32, [None, 2, 4])] * 2)
    assert "ndim=3" in repr(L.InputSpec(ndim=3))
    with pytest.raises(ValueError, match="expected min_ndim=2, found ndim=1"):
        class Min(L.Layer):
            def __init__(self):
                super().__init__()
                self.input_spec = L.InputSpec(min_ndim=2, dtype="float32")

            def call(self, inputs):
                return inputs
        Min()(af.placeholder(af.float32, [3]))


def test_alpha_dropout_keeps_selu_statistics_and_is_identity_at_inference():
    x = af.placeholder(af.float32, [None, 2000])
    layer = L.AlphaDropout(0.2, seed=3)
    train, infer = layer(x, training=True), layer(x, training=False)
    xs = np.random.RandomState(0).randn(50, 2000).astype(np.float32)
    with _sess() as sess:
        t, i = sess.run([train, infer], {x: xs})
    np.testing.assert_array_equal(i, xs)
    assert abs(t.mean()) < 0.02 and abs(t.std() - 1.0) < 0.02        # SELU's fixed point kept
    alpha_p, rate = -1.6732632423543772 * 1.0507009873554805, 0.2
    a = ((1 - rate) * (1 + rate * alpha_p ** 2)) ** -0.5
    dropped = a * alpha_p * (1 - rate)                                  # what every dropped unit becomes
    assert abs((np.abs(t - dropped) < 1e-5).mean() - rate) < 0.01


def test_layers_serialize_round_trip():
    layer = L.LayerNormalization(axis=[1, 2], epsilon=1e-5)
    spec = L.serialize(layer)
    assert spec["class_name"] == "LayerNormalization" and spec["config"]["axis"] == [1, 2]
    again = L.deserialize(spec)
    assert isinstance(again, L.LayerNormalization) and again.epsilon == 1e-5


def test_spatial_dropout3d_drops_whole_feature_maps_and_aliases():
    x = af.placeholder(af.float32, [None, 2, 3, 3, 40])
    y = L.SpatialDropout3D(0.5)(x, training=True)
    with _sess() as sess:
        out = sess.run(y, {x: np.ones((4, 2, 3, 3, 40), np.float32)})
    per_map = out.reshape(4, 18, 40)
    assert (per_map == per_map[:, :1]).all()                   # one decision per example and channel
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.2 < (out == 0).mean() < 0.8
    assert L.Convolution3D is L.Conv3D and L.Convolution3DTranspose is L.Conv3DTranspose
    assert L.MaxPool3D is L.MaxPooling3D and L.GlobalAvgPool3D is L.GlobalAveragePooling3D
    with pytest.raises(ValueError, match="should have 3 elements"):
        L.ZeroPadding3D((1, 2))


def test_conv2d_transpose_output_padding_checks_and_config():
    with pytest.raises(ValueError, match="must be greater than output padding"):
        L.Conv2DTranspose(2, 3, strides=2, output_padding=2)
    layer = L.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1)
    out = layer(af.placeholder(af.float32, [None, 4, 5, 3]))
    assert out.shape.as_list() == [None, 8, 10, 2]         # (4 - 1) * 2 + 3 - 2 * 1 + 1
    assert layer.get_config()["output_padding"] == (1, 1)
    with pytest.raises(ValueError, match="should be one of"):
        L.UpSampling2D(interpolation="bicubic")


def test_conv_lstm2d_trains_and_round_trips_its_config():
    model = keras.Sequential([L.ConvLSTM2D(3, 3, padding="same", return_sequences=True, input_shape=(4, 5, 5, 1)),
                              L.ConvLSTM2D(2, 3), L.Flatten(), L.Dense(1)])
    assert model.output_shape == (None, 1)
    model.compile("sgd", "mse")
    x = np.random.RandomState(0).rand(6, 4, 5, 5, 1).astype(np.float32)
    y = np.ones((6, 1), np.float32)
    before = model.get_weights()
    losses = [model.train_on_batch(x, y) for _ in range(3)]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert not np.allclose(before[0], model.get_weights()[0])
    cfg = model.layers[0].get_config()
    again = L.ConvLSTM2D.from_config(cfg)
    assert again.cell.kernel_size == (3, 3) and again.return_sequences and again.cell.padding == "same"
    with pytest.raises(ValueError, match="expected ndim=5"):
        L.ConvLSTM2D(2, 3)(af.placeholder(af.float32, [None, 3, 4]))
