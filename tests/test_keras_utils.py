"""Keras 2's utils modules (np_utils, vis_utils) and plot_model, Keras's 1-D input columns, and a
layer output that is its input (copied, so it has its own history)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from actorflow import keras
from actorflow.keras import backend as K

L = keras.layers


@pytest.fixture(autouse=True)
def _fresh():
    K.clear_session()
    yield
    K.clear_session()


def _model():
    model = keras.Sequential([L.LSTM(2, input_shape=(7, 5)), L.Dense(1), L.Activation("linear")])
    return model


def test_np_utils_and_vis_utils_import_as_in_keras_2():
    from actorflow.keras.utils import np_utils
    from actorflow.keras.utils.vis_utils import plot_model
    np.testing.assert_array_equal(np_utils.to_categorical([0, 2], 3), [[1, 0, 0], [0, 0, 1]])
    assert plot_model is keras.utils.plot_model
    # a negative label counts from the last class, as Keras indexes; past the classes is an error
    np.testing.assert_array_equal(keras.utils.to_categorical([-1, 0], 3), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match="out of range"):
        keras.utils.to_categorical([3], 3)


def test_model_to_dot_draws_the_layer_calls():
    text = keras.utils.model_to_dot(_model(), show_shapes=True).to_string()
    assert "lstm_input: InputLayer" in text and "lstm: LSTM" in text and "activation: Activation" in text
    assert "(None, 7, 5)" in text and "(None, 1)" in text
    assert text.count("->") == 3                    # input -> lstm -> dense -> activation, no self-loop
    assert "L0 -> L1" in text and "L2 -> L3" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot (.ci/run installs it)")
def test_plot_model_writes_an_image(tmp_path):
    out = tmp_path / "model.png"
    keras.utils.plot_model(_model(), to_file=str(out), show_shapes=True)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "model.svg"
    keras.utils.plot_model(_model(), to_file=str(svg))
    assert b"<svg" in svg.read_bytes()


def test_identity_layer_output_is_a_copy_with_its_own_history():
    inp = keras.Input((3,))
    out = L.Activation("linear")(inp)
    assert out is not inp
    model = keras.Model(inp, out)
    assert [type(layer).__name__ for layer in model.layers] == ["InputLayer", "Activation"]


def test_one_dimensional_inputs_become_columns():
    model = keras.Sequential([L.Dense(1, input_dim=1)])
    model.compile("sgd", "mse")
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    model.fit(x, 2 * x, epochs=2, verbose=0)
    assert model.predict(x).shape == (4, 1)
