"""af.keras models: Sequential and functional Model compiled and trained through actorflow
Sessions, checked against the same steps written with af.train and against numpy."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow import keras
from actorflow.keras import backend as K

L = keras.layers


@pytest.fixture(autouse=True)
def _fresh():
    K.clear_session()
    af.set_random_seed(0)          # deterministic initial weights and shuffles: no flaky convergence checks
    np.random.seed(0)
    yield
    K.clear_session()


def _blobs(n=200, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 4).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    return x, y


def test_sequential_fit_lowers_the_loss_on_a_separable_problem():
    x, y = _blobs()
    model = keras.Sequential([L.Dense(16, activation="relu", input_shape=(4,)), L.Dense(2, activation="softmax")])
    assert [layer.name for layer in model.layers] == ["dense", "dense_1"] and model.built
    model.compile(keras.optimizers.Adam(lr=0.05), "sparse_categorical_crossentropy", metrics=["accuracy"])
    assert model.metrics_names == ["loss", "acc"]
    hist = model.fit(x, y, batch_size=32, epochs=8, verbose=0, validation_split=0.25)
    assert isinstance(hist, keras.callbacks.History) and hist.epoch == list(range(8))
    assert set(hist.history) == {"loss", "acc", "val_loss", "val_acc"}
    assert hist.history["loss"][-1] < 0.5 * hist.history["loss"][0]
    assert hist.history["acc"][-1] > 0.9
    loss, acc = model.evaluate(x, y, verbose=0)
    assert acc > 0.9
    probs = model.predict(x, batch_size=64)
    assert probs.shape == (200, 2)
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    assert (model.predict_classes(x) == probs.argmax(1)).all()
    # evaluate's loss is the mean cross-entropy of predict's outputs
    np.testing.assert_allclose(loss, -np.log(probs[np.arange(200), y]).mean(), rtol=1e-4)
    np.testing.assert_allclose(model.predict_on_batch(x[:5]), probs[:5], rtol=1e-5)
    lines = []
    model.summary(print_fn=lines.append)
    assert any("dense_1 (Dense)" in s and "(None, 2)" in s and "34" in s for s in lines)
    assert "Total params: 114" in lines


def _hand_model(x_ph):
    h = L.Dense(6, activation="tanh")(x_ph)
    return L.Dense(3)(h)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_fit_equals_the_same_steps_written_with_af_train(opt):
    rng = np.random.RandomState(1)
    x = rng.randn(48, 5).astype(np.float32)
    y = rng.randint(0, 3, size=48)
    model = keras.Sequential([L.Dense(6, activation="tanh", input_shape=(5,)), L.Dense(3)])
    keras_opt = keras.optimizers.SGD(lr=0.1) if opt == "sgd" else keras.optimizers.Adam(lr=0.01)
    model.compile(keras_opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    init = model.get_weights()
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    trained = model.get_weights()

    g = af.Graph()
    with g.as_default():
        xp, yp = af.placeholder(af.float32, [None, 5]), af.placeholder(af.int64, [None])
        logits = _hand_model(xp)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=yp, logits=logits))
        tf_opt = af.train.GradientDescentOptimizer(0.1) if opt == "sgd" else af.train.AdamOptimizer(0.01,
                                                                                                  epsilon=1e-7)
        step = tf_opt.minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for v, value in zip(af.trainable_variables(), init):
                v.load(value, sess)
            for _ in range(2):
                for start in range(0, 48, 16):
                    sess.run(step, {xp: x[start:start + 16], yp: y[start:start + 16]})
            hand = sess.run(af.trainable_variables())
    for a, b in zip(trained, hand):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)


with open(os.path.join(os.path.dirname(__file__), "fixtures", "keras.json")) as _f:
    OPTIMIZER_CASES = json.load(_f)["optimizers"]


@pytest.mark.parametrize("case", OPTIMIZER_CASES, ids=[f"{c['name']}-{i}" for i, c in enumerate(OPTIMIZER_CASES)])
def test_keras_optimizers_match_tf_keras(case):
    """Three steps on sum(c * w**2) against tf_keras's legacy optimizers (TF 1.15's
    OptimizerV2; tests/fixtures/make_keras.py), with the arguments given as `learning_rate`."""
    c, w0 = np.array(case["c"], np.float32), np.array(case["w0"], np.float32)
    w = K.variable(w0)
    loss = K.sum(K.square(w) * K.constant(c))
    opt = getattr(keras.optimizers, case["name"])(**case["kwargs"])
    step = af.group(*opt.get_updates(loss, [w]))
    sess = K.get_session()
    for i, ref in enumerate(case["steps"]):
        sess.run(step)
        np.testing.assert_allclose(K.get_value(w), ref, rtol=1e-5, atol=1e-6, err_msg=f"step {i + 1}")
    assert K.get_value(opt.iterations) == 3


def test_optimizer_defaults_and_lr_alias():
    assert keras.optimizers.Adagrad().get_config()["lr"] == 0.001
    assert keras.optimizers.Adadelta().get_config()["lr"] == 0.001
    assert keras.optimizers.SGD(0.3).get_config()["lr"] == 0.3
    opt = keras.optimizers.Adam(lr=0.2)
    assert K.get_value(opt.learning_rate) == pytest.approx(0.2) and opt.lr is opt.learning_rate
    with pytest.raises(TypeError, match="multiple values"):
        keras.optimizers.SGD(0.1, lr=0.2)


def test_decay_and_set_value_on_lr():
    w = K.variable([1.0])
    opt = keras.optimizers.SGD(lr=0.5, decay=1.0)
    step = af.group(*opt.get_updates(K.sum(w), [w]))
    sess = K.get_session()
    sess.run(step)                                   # lr 0.5 / (1 + 0)
    sess.run(step)                                   # lr 0.5 / (1 + 1)
    np.testing.assert_allclose(K.get_value(w), [1 - 0.5 - 0.25])
    K.set_value(opt.lr, 0.0)
    sess.run(step)
    np.testing.assert_allclose(K.get_value(w), [0.25])
    with pytest.raises(TypeError, match="unexpected"):
        keras.optimizers.Adam(betas=1)
    with pytest.raises(ValueError, match="Unknown optimizer"):
        keras.optimizers.get("lbfgs")


def test_functional_model_multi_io_loss_dict_and_replay():
    rng = np.random.RandomState(2)
    a_in, b_in = keras.Input(shape=(3,), name="a"), keras.Input(shape=(2,), name="b")
    merged = L.concatenate([L.Dense(4, activation="relu")(a_in), b_in])
    reg = L.Dense(1, name="reg")(merged)
    cls = L.Dense(3, activation="softmax", name="cls")(merged)
    model = keras.Model(inputs=[a_in, b_in], outputs=[reg, cls])
    assert [layer.name for layer in model.layers][:2] == ["a", "b"] and model.output_names == ["reg", "cls"]
    model.compile("rmsprop", loss={"reg": "mse", "cls": "categorical_crossentropy"},
                  loss_weights={"reg": 0.5, "cls": 1.0}, metrics=["mae"])
    # a metric given by a short name is reported under its function's name, as TF 1.x Keras does
    assert model.metrics_names == ["loss", "reg_loss", "cls_loss", "reg_mean_absolute_error",
                                   "cls_mean_absolute_error"]
    av, bv = rng.randn(20, 3).astype(np.float32), rng.randn(20, 2).astype(np.float32)
    yr = rng.randn(20, 1).astype(np.float32)
    yc = keras.utils.to_categorical(rng.randint(0, 3, 20), 3)
    out = model.evaluate({"a": av, "b": bv}, {"reg": yr, "cls": yc}, verbose=0)
    pr, pc = model.predict([av, bv])
    mse = ((pr - yr) ** 2).mean()
    cce = -(yc * np.log(np.clip(pc, 1e-7, 1))).sum(1).mean()
    np.testing.assert_allclose(out[:3], [0.5 * mse + cce, mse, cce], rtol=1e-4)
    hist = model.fit([av, bv], [yr, yc], epochs=2, batch_size=8, verbose=0)
    assert "cls_loss" in hist.history
    # calling the model on new tensors shares its weights
    a2, b2 = af.placeholder(af.float32, [None, 3]), af.placeholder(af.float32, [None, 2])
    r2, c2 = model([a2, b2])
    got = K.get_session().run([r2, c2], {a2: av, b2: bv})
    pr, pc = model.predict([av, bv])
    np.testing.assert_allclose(got[0], pr, rtol=1e-5)
    np.testing.assert_allclose(got[1], pc, rtol=1e-5)
    n_vars = len(af.trainable_variables())
    assert n_vars == len(model.trainable_weights) == 6


def test_nested_model_in_sequential_and_deferred_build():
    x, y = _blobs(seed=3)
    inner_in = keras.Input(shape=(4,))
    inner = keras.Model(inner_in, L.Dense(8, activation="relu")(inner_in), name="features")
    model = keras.Sequential()
    model.add(inner)
    model.add(L.Dense(1, activation="sigmoid"))
    assert not model.built
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy", metrics=["accuracy"])
    hist = model.fit(x, y, epochs=6, verbose=0)
    assert model.built and len(model.weights) == 4
    assert hist.history["acc"][-1] > 0.85


def test_subclassed_model():
    class TwoLayer(keras.Model):
        def __init__(self):
            super().__init__()
            self.d1 = L.Dense(8, activation="relu")
            self.d2 = L.Dense(1)

        def call(self, inputs, training=None):
            return self.d2(self.d1(inputs))

    x, y = _blobs(seed=4)
    model = TwoLayer()
    assert model.name == "two_layer"
    model.compile("adam", "mse")
    first = model.evaluate(x, y.astype(np.float32), verbose=0)
    model.fit(x, y.astype(np.float32), epochs=5, verbose=0)
    assert model.evaluate(x, y.astype(np.float32), verbose=0) < first
    assert len(model.trainable_weights) == 4


def test_batch_norm_updates_run_with_fit_and_regularization_enters_the_loss():
    rng = np.random.RandomState(5)
    x = (rng.randn(64, 3) * 3 + 2).astype(np.float32)
    y = rng.randn(64, 1).astype(np.float32)
    bn = L.BatchNormalization(input_shape=(3,))
    dense = L.Dense(1, kernel_regularizer=keras.regularizers.l2(0.5))
    model = keras.Sequential([bn, dense])
    model.compile(keras.optimizers.SGD(lr=0.0), "mse")
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    moving_mean = K.get_value(bn.moving_mean)
    np.testing.assert_allclose(moving_mean, 0.01 * x.mean(0), rtol=1e-4)
    W, b = dense.get_weights()
    gamma, beta, mm, mv = bn.get_weights()
    pred = (x - mm) / np.sqrt(mv + 1e-3) * gamma + beta
    expect = ((pred @ W + b - y) ** 2).mean() + 0.5 * (W ** 2).sum()
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), expect, rtol=1e-4)


def test_constraints_apply_after_each_step():
    x, y = _blobs(seed=6)
    dense = L.Dense(3, kernel_constraint=keras.constraints.max_norm(0.1), input_shape=(4,))
    model = keras.Sequential([dense, L.Dense(1)])
    model.compile(keras.optimizers.SGD(lr=0.05), "mse")
    model.fit(x, y.astype(np.float32), epochs=2, verbose=0)
    assert np.isfinite(dense.get_weights()[0]).all()
    assert np.linalg.norm(dense.get_weights()[0], axis=0).max() <= 0.1 + 1e-5


def test_compile_with_an_af_train_optimizer_and_loss_functions():
    x, y = _blobs(seed=7)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    model.compile(af.train.GradientDescentOptimizer(0.1), loss=keras.losses.mean_absolute_error,
                  metrics=["mse"])
    first = model.evaluate(x, y.astype(np.float32), verbose=0)
    model.fit(x, y.astype(np.float32), epochs=3, verbose=0)
    assert model.evaluate(x, y.astype(np.float32), verbose=0)[0] < first[0]
    assert K.get_value(model.optimizer.iterations) == 3 * 7


def test_train_and_test_on_batch():
    x, y = _blobs(seed=8)
    model = keras.Sequential([L.Dense(2, activation="softmax", input_shape=(4,))])
    model.compile(keras.optimizers.SGD(lr=0.5), "sparse_categorical_crossentropy")
    before = model.test_on_batch(x, y)
    assert model.train_on_batch(x, y) == pytest.approx(before, rel=1e-5)
    assert model.test_on_batch(x, y) < before


def test_save_and_load_weights(tmp_path):
    x, _ = _blobs(seed=9)
    model = keras.Sequential([L.Dense(3, input_shape=(4,)), L.Dense(2)])
    model.compile("sgd", "mse")
    path = str(tmp_path / "weights")
    model.save_weights(path)
    saved = model.get_weights()
    pred = model.predict(x)
    model.set_weights([np.zeros_like(w) for w in saved])
    model.load_weights(path)
    np.testing.assert_allclose(model.predict(x), pred)
    # h5py is not a dependency: an .h5 path names it
    try:
        import h5py  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="h5py"):
            model.save_weights(str(tmp_path / "w.h5"))
        with pytest.raises(ImportError, match="h5"):
            model.load_weights(str(tmp_path / "w.h5"))


def test_callbacks(tmp_path):
    x, y = _blobs(seed=10)
    model = keras.Sequential([L.Dense(2, activation="softmax", input_shape=(4,))])
    model.compile(keras.optimizers.SGD(lr=0.1), "sparse_categorical_crossentropy", metrics=["acc"])
    seen = {"epochs": [], "batches": 0, "begin": 0}
    lam = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen["epochs"].append((e, dict(logs))),
                                         on_batch_end=lambda b, logs: seen.__setitem__("batches", seen["batches"] + 1),
                                         on_train_begin=lambda logs: seen.__setitem__("begin", 1))
    sched = keras.callbacks.LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1))
    ckpt = keras.callbacks.ModelCheckpoint(str(tmp_path / "w-{epoch:02d}"), save_weights_only=True)
    hist = model.fit(x, y, batch_size=50, epochs=3, initial_epoch=1, verbose=0, callbacks=[lam, sched, ckpt])
    assert [e for e, _ in seen["epochs"]] == [1, 2] and seen["batches"] == 8 and seen["begin"] == 1
    assert hist.history["lr"] == pytest.approx([0.05, 0.1 / 3])
    assert K.get_value(model.optimizer.lr) == pytest.approx(0.1 / 3)
    assert os.path.exists(str(tmp_path / "w-02.index")) and os.path.exists(str(tmp_path / "w-03.index"))

    # EarlyStopping: a monitored value that never improves stops after `patience` epochs
    model.compile(keras.optimizers.SGD(lr=0.0), "sparse_categorical_crossentropy")
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=2, min_delta=1e-4)
    hist = model.fit(x, y, epochs=20, verbose=0, callbacks=[stop])
    assert len(hist.epoch) == 3 and stop.stopped_epoch == 2


def test_tensorboard_writes_an_event_file(tmp_path):
    pytest.importorskip("tensorboard")
    x, y = _blobs(seed=11)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    model.fit(x, y.astype(np.float32), epochs=2, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(log_dir=str(tmp_path), write_graph=False)])
    events = [f for f in os.listdir(tmp_path) if "tfevents" in f]
    assert events and os.path.getsize(tmp_path / events[0]) > 0


def test_clear_errors():
    x, y = _blobs(seed=12)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    with pytest.raises(RuntimeError, match="compile"):
        model.fit(x, y)
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match=r"expected dense_input to have shape \(4,\)"):
        model.fit(np.zeros((3, 5)), np.zeros(3))
    with pytest.raises(ValueError, match="same number of samples"):
        model.fit(x, y[:10])
    with pytest.raises(ValueError, match="Unknown loss"):
        model.compile("sgd", "nope")


def test_to_categorical_and_normalize():
    np.testing.assert_array_equal(keras.utils.to_categorical([[1], [0], [2]]), np.eye(3)[[1, 0, 2]])
    assert keras.utils.to_categorical([1, 0], 4).shape == (2, 4)
    np.testing.assert_allclose(keras.utils.normalize(np.array([[3.0, 4.0]])), [[0.6, 0.8]])


def test_model_io_properties_calling_an_unbuilt_model_and_freezing():
    x = af.placeholder(af.float32, [None, 4])
    model = keras.Sequential([L.Dense(3), L.Dense(2)])
    y = model(x)                                   # built on x itself: no second copy of the layers
    assert model.input is not None and model.output is y and model.output_shape == (None, 2)
    assert len(model.layers[0]._inbound_nodes) == 1
    model.trainable = False
    model.compile("sgd", "mse")
    xv = np.ones((2, 4), np.float32)
    before = model.get_weights()
    model.fit(xv, np.zeros((2, 2), np.float32), verbose=0)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_nested_models_weight_regularization_reaches_the_outer_loss():
    inner_in = keras.Input(shape=(3,))
    dense = L.Dense(2, kernel_regularizer=keras.regularizers.l2(1.0))
    inner = keras.Model(inner_in, dense(inner_in))
    outer = keras.Sequential([inner, L.Dense(1, activity_regularizer=keras.regularizers.l1(0.5))])
    outer.compile("sgd", "mse")
    x = np.ones((4, 3), np.float32)
    outer.predict(x)
    assert len(outer.losses) == 2
    W = dense.get_weights()[0]
    pred = outer.predict(x)
    # the activity penalty is divided by the batch size, as TF 1.x Keras does
    expect = (pred ** 2).mean() + (W ** 2).sum() + 0.5 * np.abs(pred).sum() / 4
    np.testing.assert_allclose(outer.evaluate(x, np.zeros((4, 1), np.float32), verbose=0), expect, rtol=1e-4)


def test_models_over_plain_graph_ops_and_placeholders():
    """TF 1.x programs mix graph ops into Keras models: a model whose output is a plain op on a
    layer's output, and one whose input is a plain placeholder, both train through fit."""
    x, y = _blobs(seed=13)
    inp = keras.Input(shape=(4,))
    dense = L.Dense(2)
    out = af.nn.softmax(dense(inp) * 2.0)
    model = keras.Model(inp, out)
    assert model.output_names == ["output_1"] and dense in model.layers
    model.compile(keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy", metrics=["acc"])
    hist = model.fit(x, y, epochs=5, verbose=0)
    assert hist.history["acc"][-1] > 0.85
    with pytest.raises(NotImplementedError, match="Lambda"):
        model(af.placeholder(af.float32, [None, 4]))

    ph = af.placeholder(af.float32, [None, 4], name="features")
    model2 = keras.Model(ph, L.Dense(1, activation="sigmoid")(ph))
    assert model2.input_names == ["features"]
    model2.compile("adam", "binary_crossentropy")
    first = model2.evaluate(x, y, verbose=0)
    model2.fit(x, y, epochs=3, verbose=0)
    assert model2.evaluate(x, y, verbose=0) < first


def test_fit_evaluate_predict_generators():
    x, y = _blobs(seed=14)

    class Batches(keras.utils.Sequence):
        def __init__(self):
            self.epochs_ended = 0

        def __len__(self):
            return 5

        def __getitem__(self, i):
            return x[40 * i:40 * (i + 1)], y[40 * i:40 * (i + 1)]

        def on_epoch_end(self):
            self.epochs_ended += 1

    def endless():
        while True:
            for i in range(5):
                yield x[40 * i:40 * (i + 1)], y[40 * i:40 * (i + 1)]

    model = keras.Sequential([L.Dense(2, activation="softmax", input_shape=(4,))])
    model.compile(keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy", metrics=["accuracy"])
    seq = Batches()
    hist = model.fit_generator(seq, epochs=3, verbose=0, validation_data=(x, y))
    assert seq.epochs_ended == 3 and set(hist.history) == {"loss", "acc", "val_loss", "val_acc"}
    hist = model.fit_generator(endless(), steps_per_epoch=5, epochs=2, verbose=0, validation_data=Batches())
    assert hist.history["val_acc"][-1] > 0.85
    np.testing.assert_allclose(model.evaluate_generator(Batches()), model.evaluate(x, y, batch_size=40, verbose=0),
                               rtol=1e-5)
    np.testing.assert_allclose(model.predict_generator(endless(), steps=5), model.predict(x), rtol=1e-5)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.fit_generator(endless(), verbose=0)


def test_fit_takes_a_generator_as_tf_1_14_does():
    x, y = _blobs(seed=15)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    gen = ((x[i:i + 50], y[i:i + 50].astype(np.float32)) for _ in range(10) for i in range(0, 200, 50))
    hist = model.fit(gen, steps_per_epoch=4, epochs=2, verbose=0)
    assert len(hist.history["loss"]) == 2 and K.get_value(model.optimizer.iterations) == 8


def test_to_json_and_model_from_json_rebuild_the_architecture():
    rng = np.random.RandomState(16)
    seq = keras.Sequential([L.Conv1D(4, 3, padding="causal", input_shape=(6, 2)), L.BatchNormalization(),
                            L.Bidirectional(L.LSTM(3, return_sequences=True)), L.TimeDistributed(L.Dense(2)),
                            L.GlobalMaxPooling1D(), L.Dropout(0.3), L.Dense(1, kernel_regularizer="l2")])
    x = rng.randn(5, 6, 2).astype(np.float32)
    clone = keras.models.model_from_json(seq.to_json())
    assert [type(layer).__name__ for layer in clone.layers] == [type(layer).__name__ for layer in seq.layers]
    clone.set_weights(seq.get_weights())
    np.testing.assert_allclose(clone.predict(x), seq.predict(x), rtol=1e-5, atol=1e-6)
    assert len(clone.losses) == 1

    a, b = keras.Input(shape=(3,), name="a"), keras.Input(shape=(3,), name="b")
    shared = L.Dense(4, activation="tanh")
    inner = keras.Sequential([L.Dense(2, input_shape=(8,))])
    out = inner(L.concatenate([shared(a), shared(b)]))
    model = keras.Model([a, b], [out, L.Activation("sigmoid")(out)])
    cfg = model.get_config()
    assert [n for n in cfg["input_layers"]] == [["a", 0, 0], ["b", 0, 0]]
    rebuilt = keras.models.model_from_config({"class_name": "Model", "config": cfg})
    rebuilt.set_weights(model.get_weights())
    av, bv = rng.randn(4, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    for p, q in zip(rebuilt.predict([av, bv]), model.predict([av, bv])):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    assert len(rebuilt.trainable_weights) == 4

    def negate(t):
        return -t

    lam = keras.Sequential([L.Lambda(negate, input_shape=(2,))])
    with pytest.raises(ValueError, match="custom_objects"):
        keras.models.model_from_json(lam.to_json())
    keras.models.model_from_json(lam.to_json(), custom_objects={"negate": negate})


def test_save_and_load_model(tmp_path):
    x, y = _blobs(seed=17)
    model = keras.Sequential([L.Dense(8, activation="relu", input_shape=(4,)), L.Dense(2, activation="softmax")])
    model.compile(keras.optimizers.Adam(lr=0.02), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=2, verbose=0)
    path = str(tmp_path / "saved")
    model.save(path)
    before = model.predict(x)
    K.clear_session()
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(x), before, rtol=1e-5, atol=1e-6)
    assert loaded.metrics_names == ["loss", "acc"]
    assert K.get_value(loaded.optimizer.lr) == pytest.approx(0.02)
    loaded.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(FileNotFoundError, match="model.json"):
        keras.models.load_model(str(tmp_path / "nothing"))


def test_model_checkpoint_saves_the_model_unless_weights_only(tmp_path):
    x, y = _blobs(seed=18)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    ckpt = keras.callbacks.ModelCheckpoint(str(tmp_path / "m-{epoch}"), monitor="loss", save_best_only=True)
    model.fit(x, y.astype(np.float32), epochs=2, verbose=0, callbacks=[ckpt])
    assert (tmp_path / "m-1" / "model.json").exists() and (tmp_path / "m-2" / "model.json").exists()
    loaded = keras.models.load_model(str(tmp_path / "m-2"))
    np.testing.assert_allclose(loaded.predict(x), model.predict(x), rtol=1e-5)
