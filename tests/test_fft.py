"""Discrete Fourier transforms against TensorFlow 2.21 (tests/fixtures/fft.json, make_fft.py): values,
static shapes and gradients of tf.fft/ifft (1, 2, 3-D), tf.signal.rfft/irfft (1, 2-D) and tf.spectral."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("fft.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_rfft3d_round_trip_and_unknown_lengths():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    with af.Graph().as_default():
        p = af.placeholder(af.float64, [None, 3, 4, 5])
        n = af.placeholder(af.int32, [3])
        spec = af.signal.rfft3d(p)
        assert spec.shape.as_list() == [None, 3, 4, 3]
        back = af.signal.irfft3d(spec, n)
        with af.Session() as s:
            got_spec, got_back = s.run([spec, back], {p: x, n: [3, 4, 5]})
    np.testing.assert_allclose(got_spec, np.fft.rfftn(x, axes=(1, 2, 3)), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_back, x, rtol=1e-10, atol=1e-12)


def test_bad_inputs_are_refused_naming_the_op():
    with af.Graph().as_default():
        with pytest.raises(TypeError, match="FFT"):
            af.fft(af.constant([1.0, 2.0]))
        with pytest.raises(TypeError, match="RFFT"):
            af.signal.rfft(af.constant([1j, 2j]))
        with pytest.raises(ValueError, match="rank at least 2"):
            af.fft2d(af.constant(np.zeros(3, np.complex64)))
