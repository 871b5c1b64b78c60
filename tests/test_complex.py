"""Complex numbers against TensorFlow 2.21 (tests/fixtures/complex.json, make_complex.py): values,
dtypes and gradients (TF's conjugate convention); feeds, fetches and dtype names of complex tensors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("complex.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_complex_dtypes_have_tensorflows_enums_and_names():
    assert af.complex64.as_datatype_enum == 8 and af.complex128.as_datatype_enum == 18
    assert af.as_dtype(8) is af.complex64 and af.as_dtype(np.complex128) is af.complex128
    assert af.as_dtype(complex) is af.complex128
    assert af.complex64.is_complex and not af.complex64.is_floating


def test_feeding_and_fetching_complex_values():
    with af.Graph().as_default():
        p = af.placeholder(af.complex64, [None, 2])
        y = p * af.conj(p)
        value = np.array([[1 + 2j, -3j], [0.5, 2 - 1j]], np.complex64)
        with af.Session() as s:
            got = s.run(y, {p: value})
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.abs(value) ** 2, rtol=1e-6)


def test_gradient_descent_on_a_complex_variable_finds_the_root():
    """TF's gradient of a real loss w.r.t. z points up the slope, so z - lr * grad descends."""
    with af.Graph().as_default():
        z = af.Variable(np.array([2 + 2j]), dtype=af.complex128)
        target = af.constant(np.array([0.5 - 1j]))
        loss = af.reduce_sum(af.square(af.abs(z - target)))
        (g,) = af.gradients(loss, [z])
        step = af.assign_sub(z, 0.25 * g)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for _ in range(40):
                s.run(step)
            np.testing.assert_allclose(s.run(z), [0.5 - 1j], atol=1e-8)


def test_real_parts_of_the_wrong_type_are_refused_naming_the_op():
    with af.Graph().as_default():
        with pytest.raises(TypeError, match="Complex"):
            af.complex(af.constant([1, 2]), af.constant([3, 4]))
        with pytest.raises(TypeError, match="complex"):
            af.abs(af.complex(af.constant([1.0]), af.constant([2.0]))) + af.constant([1j], dtype=af.complex64)


def test_complex_tensors_cross_tasks_of_a_cluster():
    """Send/Recv carry complex64 and complex128 tensors through the wire codec, both ways."""
    from actorflow.cluster.local import free_ports
    spec = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    servers = [af.train.Server(spec, "worker", i, token="complex-token") for i in range(2)]
    try:
        g = af.Graph()
        with g.as_default():
            with af.device("/job:worker/task:0"):
                p = af.placeholder(af.complex128, [None], name="p")
                q = af.cast(p * 1j, af.complex64)
            with af.device("/job:worker/task:1"):
                r = af.conj(q) + af.constant(np.complex64(1 - 1j))
                back = af.cast(r, af.complex128)
            with af.device("/job:worker/task:0"):
                total = af.reduce_sum(back * p)
            value = np.array([1 + 2j, -0.5j, 3.0])
            with af.Session(servers[1].target, graph=g) as sess:
                got_r, got_total = sess.run([r, total], {p: value}, timeout=30)
        want_r = np.conj((value * 1j).astype(np.complex64)) + np.complex64(1 - 1j)
        assert got_r.dtype == np.complex64
        np.testing.assert_allclose(got_r, want_r, rtol=1e-6)
        np.testing.assert_allclose(got_total, np.sum(want_r.astype(np.complex128) * value), rtol=1e-6)
    finally:
        for s in servers:
            s.stop()
