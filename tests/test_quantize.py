"""tf.quantize / quantize_v2 / dequantize and the quantized dtypes, against TensorFlow 2.21's values
(tests/fixtures/quantize.json, written by tests/fixtures/make_quantize.py; float results compared
by their bits)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("quantize.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_equal_tensorflows(expr):
    tf_reference.check(FIX, expr)


def test_quantized_dtypes():
    assert af.qint8.is_quantized and not af.qint8.is_integer and af.qint8 in af.dtypes.QUANTIZED_DTYPES
    assert af.as_dtype("quint8") is af.quint8 and af.as_dtype(13) is af.qint32
    assert af.as_dtype(np.int8) is af.int8                       # numpy types never convert to quantized ones
    with pytest.raises(TypeError, match="quantized type"):
        _ = af.qint8.min


def test_quantize_round_trip_and_errors():
    x = af.constant([-1.0, 0.0, 0.5, 2.0])
    q = af.quantize(x, -1.0, 2.0, af.quint8)
    assert q.output.dtype is af.quint8 and q.output_min.shape.as_list() == []
    y = af.dequantize(q.output, q.output_min, q.output_max)
    with af.Session() as s:
        back = s.run(y)
    np.testing.assert_allclose(back, [-1.0, 0.0, 0.5, 2.0], atol=3.0 / 255)
    with pytest.raises(TypeError, match="quantized type"):
        af.quantize(x, -1.0, 2.0, af.int8)
    with pytest.raises(ValueError, match="HALF_TO_EVEN' only supported for mode 'SCALED'"):
        af.quantize(x, -1.0, 2.0, af.qint8, round_mode="HALF_TO_EVEN")
    with pytest.raises(ValueError, match="Mode string must be"):
        af.quantize(x, -1.0, 2.0, af.qint8, mode="FAST")
    with pytest.raises(TypeError, match="quantized type"):
        af.dequantize(af.constant([1], af.int8), 0.0, 1.0)
    with pytest.raises(ValueError, match="ranges for the 4 slices"):
        af.quantize(x, [0.0, 0.0], [1.0, 1.0], af.qint8, axis=0)
    bad = af.quantize(x, 2.0, -1.0, af.qint8)
    with af.Session() as s, pytest.raises(af.errors.InvalidArgumentError, match="input_max_range must be larger"):
        s.run(bad.output)
    with pytest.raises(LookupError):
        af.gradients(af.dequantize(af.quantize(x, -1.0, 2.0, af.qint8).output, -1.0, 2.0), x)


def test_quantized_values_are_fed_and_fetched_as_integer_arrays():
    p = af.placeholder(af.quint8, [3])
    y = af.dequantize(p, 0.0, 255.0)
    with af.Session() as s:
        got, raw = s.run([y, p], {p: [0, 128, 255]})
    np.testing.assert_allclose(got, [0.0, 128.0, 255.0])
    assert raw.dtype == np.uint8


def test_quantization_namespace():
    assert af.quantization.quantize is af.quantize and af.quantization.dequantize is af.dequantize
    assert af.quantization.fake_quant_with_min_max_args is af.fake_quant_with_min_max_args
