"""af.py_func / af.numpy_function: Python functions as ops (TF 1.x's PyFunc semantics)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import actorflow as af
from actorflow import script_registry


def test_outputs_single_list_and_strings():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3], name="x")
        y = af.py_func(lambda a: (a * 2).astype(np.float32), [x], af.float32)
        assert isinstance(y, af.Tensor) and y.dtype == af.float32 and y.shape.ndims is None
        s, n = af.py_func(lambda a, b: [a + b, np.int64(a.size)], [x, y], [af.float32, af.int64])
        one = af.py_func(lambda a: [a], [x], [af.float32])
        assert isinstance(one, list) and len(one) == 1
        names = af.numpy_function(lambda a: np.array([f"v{int(v)}" for v in a], dtype=object), [x], af.string)
        with af.Session() as sess:
            got = sess.run([y, s, n, one[0], names], {x: [1, 2, 3]})
    np.testing.assert_array_equal(got[0], [2, 4, 6])
    np.testing.assert_array_equal(got[1], [3, 6, 9])
    assert got[2] == 3 and got[2].dtype == np.int64
    assert list(got[4]) == [b"v1", b"v2", b"v3"]


def test_errors_name_the_op_and_map_python_exceptions():
    def raises(exc):
        def f(a):
            raise exc
        return f
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2], name="x")
        cases = [
            (af.py_func(lambda a: a.astype(np.float64), [x], af.float32, name="wrong_dtype"),
             af.errors.InvalidArgumentError, "0-th value returned by pyfunc_\\d+ is double, but expects float"),
            (af.py_func(lambda a: [a, a], [x], [af.float32], name="wrong_count")[0],
             af.errors.InvalidArgumentError, "returned 2 values, but expects 1"),
            (af.py_func(raises(RuntimeError("kaboom")), [x], af.float32, name="boom"),
             af.errors.UnknownError, "RuntimeError: kaboom"),
            (af.py_func(raises(ValueError("bad value")), [x], af.float32, name="bad"),
             af.errors.InvalidArgumentError, "ValueError: bad value"),
            (af.py_func(raises(StopIteration()), [x], af.float32, name="done"),
             af.errors.OutOfRangeError, "StopIteration"),
        ]
        with af.Session() as sess:
            for t, cls, msg in cases:
                with pytest.raises(cls, match=msg) as e:
                    sess.run(t, {x: [1, 2]})
                assert f"node {t.op.name} (PyFunc)" in str(e.value)
            # the session keeps working after a failing function
            ok = af.py_func(lambda a: a + 1, [x], af.float32)
            np.testing.assert_array_equal(sess.run(ok, {x: [1, 2]}), [2, 3])


def test_stateful_calls_all_run_and_none_is_folded():
    calls = []

    def record(a):
        calls.append(a.copy())
        return np.float32(len(calls))
    with af.Graph().as_default():
        c = af.constant([1.0, 2.0])
        a = af.py_func(record, [c], af.float32)
        b = af.py_func(record, [c], af.float32)
        side = af.py_func(lambda v: calls.append(v) or None, [c], [])
        assert isinstance(side, af.Operation)
        with af.Session() as sess:
            va, vb = sess.run([a, b])
            assert sorted([float(va), float(vb)]) == [1.0, 2.0]       # two ops, both run
            assert float(sess.run(a)) == 3.0                          # and again every step
            sess.run(side)
    assert len(calls) == 4


def test_no_gradient_and_shape_can_be_set():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3])
        y = af.py_func(np.square, [x], af.float32)
        y.set_shape([3])
        assert af.gradients(af.reduce_sum(y), x) == [None]
        z = af.reduce_sum(y * x)
        g = af.gradients(z, x)[0]                       # flows through the product only
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(g, {x: [1, 2, 3]}), [1, 4, 9])


def test_functions_are_released_with_their_graph_and_unknown_tokens_fail_clearly():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [1], name="x")
        y = af.py_func(lambda a: a, [x], af.float32, name="echo")
    token = y.op.attrs["token"]
    assert script_registry.lookup(token) is not None
    data = g.as_graph_def().SerializeToString()
    del g, x, y
    gc.collect()
    assert script_registry.lookup(token) is None
    with af.Graph().as_default() as g2:                   # the graph without the process that built it
        af.import_graph_def(data, name="")
        with af.Session(graph=g2) as sess:
            with pytest.raises(af.errors.NotFoundError, match=f"{token} is not registered in this process"):
                sess.run("echo:0", {"x:0": [1.0]})
