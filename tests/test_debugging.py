"""af.debugging: the assert_* family, Assert, check_numerics and friends against TF 1.x.

tests/fixtures/debugging_tf.json holds what TensorFlow's graphs said for the same expressions
(made by tests/fixtures/make_debugging.py): whether the check failed when the graph was built or
when it ran, with which error class and message.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

import actorflow as af
from actorflow.errors import InvalidArgumentError

# The kernels computing the NaNs these tests are about warn as numpy does.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "debugging_tf.json")
with open(_FIXTURE) as _f:
    TF = json.load(_f)


def _tf_words(message: str) -> str:
    """TF's message in actorflow's words for the few things that are named differently."""
    message = re.sub(r"<dtype: '(\w+)'>", r"af.\1", message)
    return message.replace("tf.float32", "af.float32").replace("tf.int32", "af.int32")


def _run_case(src):
    g = af.Graph()
    with g.as_default():
        try:
            built = eval(src, {"tf": af, "np": np})  # noqa: S307 - the fixture's fixed expressions
        except Exception as e:  # noqa: BLE001
            return {"phase": "build", "error": type(e).__name__, "message": str(e)}, None
        with af.Session() as sess:
            try:
                out = sess.run(built)
            except Exception as e:  # noqa: BLE001
                return {"phase": "run", "error": type(e).__name__, "message": str(e)}, e
    return {"phase": "ok", "value": None if out is None else np.asarray(out).tolist()}, None


# assert_near prints its tolerances' values where TF prints the tensors' reprs.
_DIFFERENT_WORDS = {"near"}


@pytest.mark.parametrize("case", sorted(TF))
def test_matches_tensorflow(case):
    want = TF[case]
    got, err = _run_case(want["src"])
    assert got["phase"] == want["phase"], (got, want)
    if want["phase"] == "ok":
        assert got["value"] == want["value"]
        return
    assert got["error"] == want["error"], got
    message = got["message"]
    if want["phase"] == "run":
        # The runtime names the failing op after the kernel's message.
        kernel_msg, _, node = message.partition("\n\t [[node ")
        assert node, message
        assert err.node_def and node.startswith(err.node_def + " ("), (node, err.node_def)
        message = kernel_msg
        if case.startswith(("check_numerics", "verify")):
            # TF's words, then the first bad element, which TF does not say.
            assert message.startswith(want["message"] + "; the first, "), message
            return
    if case in _DIFFERENT_WORDS:
        assert message.startswith("assertion failed: [] [x and y not equal to tolerance rtol = 0.01, atol = 0.01]")
        assert message.endswith("[x (x:0) = ] [1 2] [y (y:0) = ] [1 2.1]")
        return
    assert message == _tf_words(want["message"])


# -- check_numerics ----------------------------------------------------------------------------

def _first_bad(values, dtype=np.float32):
    with af.Graph().as_default():
        x = af.placeholder(af.as_dtype(dtype), None, name="x")
        y = af.debugging.check_numerics(x * 2, "after doubling")
        with af.Session() as sess:
            with pytest.raises(InvalidArgumentError) as ei:
                sess.run(y, {x: np.asarray(values, dtype)})
    return ei.value


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_check_numerics_names_op_kind_and_first_index(dtype):
    v = np.ones((3, 4), dtype)
    v[1, 2] = np.inf
    v[2, 0] = np.nan
    e = _first_bad(v, dtype)
    assert e.node_def == "CheckNumerics"
    assert str(e).startswith("after doubling : Tensor had Inf and NaN values; the first, inf, is at index [1, 2] "
                             "of shape [3, 4] (element 6 of 12)")
    assert "[[node CheckNumerics (CheckNumerics)" in str(e)


def test_check_numerics_scalar_and_negative_inf():
    e = _first_bad(np.float32(-np.inf))
    assert "Tensor had Inf values; the first, -inf, is at index [] of shape []" in str(e)


def test_check_numerics_large_tensor_reports_first_of_many():
    v = np.zeros(1_000_003, np.float64)
    v[777_777] = np.nan
    v[900_000] = np.inf
    v[999_999] = np.nan
    e = _first_bad(v, np.float64)
    assert "Tensor had Inf and NaN values; the first, nan, is at index [777777]" in str(e)


def test_check_numerics_passes_values_through_and_is_typed():
    with af.Graph().as_default():
        x = af.constant([[1.0, -2.0]], dtype=af.float64)
        y = af.check_numerics(x, "ok")
        assert y.dtype is af.float64 and y.shape.as_list() == [1, 2]
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(y), [[1.0, -2.0]])
        with pytest.raises(TypeError, match="floating-point"):
            af.check_numerics(af.constant([1, 2]), "ints")
        with pytest.raises(TypeError, match="message must be a string"):
            af.check_numerics(x, None)


def test_check_numerics_gradient_passes_through_and_checks_the_gradient():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3], name="x")
        y = af.check_numerics(x, "fwd")
        (g,) = af.gradients(af.reduce_sum(af.square(y)), [x])
        (g_bad,) = af.gradients(af.reduce_sum(af.sqrt(y)), [x])
        with af.Session() as sess:
            np.testing.assert_allclose(sess.run(g, {x: [1.0, 2.0, 3.0]}), [2.0, 4.0, 6.0])
            # d sqrt(y)/dy at 0 is inf: the check on the gradient stops it.
            with pytest.raises(InvalidArgumentError, match="Not a number \\(NaN\\) or infinity \\(Inf\\) values "
                                                           "detected in gradient. fwd : Tensor had Inf values"):
                sess.run(g_bad, {x: [0.0, 1.0, 4.0]})


def test_verify_tensor_all_finite_aliases_and_returns_the_tensor():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2], name="x")
        a = af.verify_tensor_all_finite(x, "first")
        b = af.debugging.verify_tensor_all_finite(x=x, message="second")
        c = af.debugging.assert_all_finite(x, "third")
        assert a.name.startswith("VerifyFinite") and a.shape.as_list() == [2]
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(a, {x: [1.0, 2.0]}), [1.0, 2.0])
            for t, msg in ((a, "first"), (b, "second"), (c, "third")):
                with pytest.raises(InvalidArgumentError, match=f"^{msg} : Tensor had NaN values") as ei:
                    sess.run(t, {x: [1.0, np.nan]})
                assert ei.value.node_def.endswith("/CheckNumerics")
        with pytest.raises(ValueError, match="both"):
            af.verify_tensor_all_finite(x, "m", x=x)


def test_add_check_numerics_ops_checks_every_float_tensor_in_order():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2], name="x")
        h = af.log(x, name="h")           # log(-1) = NaN, the first bad tensor
        af.multiply(h, 2.0, name="out")
        n = af.size(x)                    # integers are not checked
        check = af.add_check_numerics_ops()
        checks = [op for op in af.get_default_graph().get_operations() if op.type == "CheckNumerics"]
        checked = {op.inputs[0].name for op in checks}
        assert {"x:0", "h:0", "out:0"} <= checked and n.name not in checked
        # Chained in graph order: each check waits for the one before it.
        for earlier, later in zip(checks, checks[1:]):
            assert earlier in later.control_inputs
        with af.Session() as sess:
            sess.run(check, {x: [1.0, 2.0]})
            with pytest.raises(InvalidArgumentError, match="^h:0 : Tensor had NaN values; the first, nan, "
                                                           "is at index \\[1\\]"):
                sess.run(check, {x: [1.0, -1.0]})


def test_add_check_numerics_ops_refuses_control_flow():
    with af.Graph().as_default():
        p = af.placeholder(af.bool, [])
        af.cond(p, lambda: af.constant(1.0), lambda: af.constant(2.0))
        with pytest.raises(ValueError, match="not compatible with control flow"):
            af.add_check_numerics_ops()


# -- Assert and the assert_* family ------------------------------------------------------------

def test_assert_must_be_a_dependency_to_run():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None], name="x")
        check = af.assert_positive(x, message="x must be positive")
        with af.control_dependencies([check]):
            y = af.identity(x * 2)
        unchecked = x * 3
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
            np.testing.assert_array_equal(sess.run(unchecked, {x: [-1.0]}), [-3.0])
            with pytest.raises(InvalidArgumentError, match="x must be positive") as ei:
                sess.run(y, {x: [1.0, -2.0]})
            assert ei.value.node_def == "assert_positive/assert_less/Assert/Assert"


def test_assert_returns_an_op_and_checks_its_condition():
    with af.Graph().as_default():
        op = af.Assert(af.constant(True), ["never", af.constant([1.0])])
        assert isinstance(op, af.Operation) and op.type == "Assert" and not op.outputs
        with pytest.raises(TypeError, match="bool"):
            af.Assert(af.constant(1), ["x"])
        with pytest.raises(ValueError, match="scalar"):
            af.Assert(af.constant([True, False]), ["x"])
        with pytest.raises(TypeError, match="list"):
            af.Assert(af.constant(True), "a string is not a list")
        c = af.placeholder(af.bool, None)
        dyn = af.Assert(c, ["data"])
        with af.Session() as sess:
            sess.run(op)
            with pytest.raises(InvalidArgumentError, match=re.escape("In[0] should be a scalar: [2]")):
                sess.run(dyn, {c: [True, True]})


def test_static_checks_that_hold_build_cheap_ops():
    with af.Graph().as_default():
        x = af.constant([[1.0, 2.0]])
        assert af.assert_rank(x, 2).type == "NoOp"
        assert af.assert_rank_at_least(x, 1).type == "NoOp"
        assert af.assert_rank_in(x, [1, 2]).type == "NoOp"
        assert af.assert_type(x, af.float32).type == "NoOp"
        assert af.assert_integer(af.constant([1])).type == "NoOp"
        assert af.assert_scalar(af.constant(3.0)).shape.ndims == 0
        assert af.assert_equal(x, x).type == "NoOp"
        assert af.debugging.assert_shapes({x: (1, "D")}).type == "NoOp"
        with pytest.raises(TypeError, match="int32"):
            af.assert_rank(x, af.constant(2, dtype=af.int64))
        with pytest.raises(ValueError, match="Rank must be a scalar"):
            af.assert_rank(x, [2])
        with af.Session() as sess:
            sess.run(af.assert_less(x, 3.0))     # both constant and true: still an op that runs


def test_assert_shapes_dynamic_symbols_agree_at_run_time():
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [None, 3], name="a")
        b = af.placeholder(af.float32, [None], name="b")
        s = af.placeholder(af.float32, None, name="s")
        check = af.debugging.assert_shapes([(a, ("N", 3)), (b, ("N",)), (s, ())])
        with af.Session() as sess:
            sess.run(check, {a: np.zeros((2, 3)), b: np.zeros(2), s: 1.0})
            with pytest.raises(InvalidArgumentError, match=re.escape(
                    "[Specified by tensor a:0 dimension 0] [Tensor b:0 dimension] [0] [must have size] [2]")):
                sess.run(check, {a: np.zeros((2, 3)), b: np.zeros(4), s: 1.0})
            with pytest.raises(InvalidArgumentError, match=re.escape("[Tensor s:0 must have rank in] [0] [1]")):
                sess.run(check, {a: np.zeros((2, 3)), b: np.zeros(2), s: np.zeros((2, 2))})
        with pytest.raises(ValueError, match="only allowed as the first entry"):
            af.debugging.assert_shapes([(a, ("N", ...))])


def test_namespaces_follow_tf1():
    for n in ("assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
              "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
              "assert_non_positive", "assert_near", "assert_rank", "assert_rank_at_least", "assert_rank_in",
              "assert_type", "assert_integer", "assert_scalar", "Assert", "check_numerics",
              "verify_tensor_all_finite", "is_finite", "is_inf", "is_nan"):
        assert getattr(af, n) is getattr(af.debugging, n), n
    assert af.debugging.assert_shapes and not hasattr(af, "assert_shapes")   # debugging only, as in TF 1.x
    assert af.add_check_numerics_ops and not hasattr(af.debugging, "add_check_numerics_ops")
    assert af.math.is_nan is af.is_nan and af.math.is_inf is af.is_inf and af.math.is_finite is af.is_finite


def test_is_inf_nan_finite_and_monotonic():
    with af.Graph().as_default():
        v = af.constant([1.0, np.inf, -np.inf, np.nan])
        r = [af.math.is_inf(v), af.math.is_nan(v), af.math.is_finite(v),
             af.math.is_non_decreasing([1, 1, 2]), af.math.is_strictly_increasing([1, 1, 2]),
             af.math.is_strictly_increasing(af.constant([], dtype=af.float32))]
        with af.Session() as sess:
            inf, nan, fin, nd, si, empty = sess.run(r)
        np.testing.assert_array_equal(inf, [False, True, True, False])
        np.testing.assert_array_equal(nan, [False, False, False, True])
        np.testing.assert_array_equal(fin, [True, False, False, False])
        assert nd and not si and empty
