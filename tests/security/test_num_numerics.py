"""Issue 15, finding 8: NaN and infinity passed through training silently.

Before: actorflow had no check_numerics. An SGD step on a batch that drives the loss to NaN (a
sqrt of a negative prediction here) ran to completion and wrote NaN into every weight, with no
error anywhere; every later step then trained on NaN. TF's answer is `tf.debugging.check_numerics`
and `tf.add_check_numerics_ops()`, which fail the step with InvalidArgumentError naming the op.
"""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.errors import InvalidArgumentError

# The kernels computing the NaNs these tests are about warn as numpy does.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

GOOD = np.array([[1.0, 2.0], [2.0, 1.0], [0.5, 0.5]], np.float32)
BAD = np.array([[1.0, 2.0], [-30.0, -30.0], [0.5, 0.5]], np.float32)   # a negative prediction: sqrt -> NaN


def _model():
    x = af.placeholder(af.float32, [None, 2], name="x")
    w = af.Variable([[0.5], [0.25]], name="w")
    pred = af.matmul(x, w, name="pred")
    loss = af.reduce_mean(af.sqrt(pred, name="root"), name="loss")
    return x, w, loss


def test_without_checks_a_nan_step_silently_poisons_the_weights():
    """The old behaviour, still what happens when no check is asked for: the step succeeds."""
    with af.Graph().as_default():
        x, w, loss = _model()
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train, {x: GOOD})
            sess.run(train, {x: BAD})
            assert np.isnan(sess.run(w)).all()


def test_add_check_numerics_ops_stops_the_step_and_keeps_the_weights():
    with af.Graph().as_default():
        x, w, loss = _model()
        check = af.add_check_numerics_ops()
        with af.control_dependencies([check]):
            train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train, {x: GOOD})
            before = sess.run(w)
            with pytest.raises(InvalidArgumentError) as ei:
                sess.run(train, {x: BAD})
            msg = str(ei.value)
            # The first bad tensor in graph order is the sqrt's output, named with its index.
            assert msg.startswith("root:0 : Tensor had NaN values; the first, nan, is at index [1, 0]"), msg
            assert ei.value.node_def.startswith("CheckNumerics") and f"[[node {ei.value.node_def} " in msg
            np.testing.assert_array_equal(sess.run(w), before)
            # The session and the variables are sound: the next good step trains as usual.
            sess.run(train, {x: GOOD})
            after = sess.run(w)
            assert np.isfinite(after).all() and not np.array_equal(after, before)


def test_check_numerics_on_the_loss_names_the_op_and_the_message():
    with af.Graph().as_default():
        x, w, loss = _model()
        checked = af.debugging.check_numerics(loss, "loss went bad")
        # As in TF, the update must depend on the check: the gradient does not read the checked
        # value (only the check's own gradient, of the incoming 1.0, is on the backward path).
        with af.control_dependencies([checked]):
            train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            before = sess.run(w)
            with pytest.raises(InvalidArgumentError, match="^loss went bad : Tensor had NaN values") as ei:
                sess.run(train, {x: BAD})
            assert ei.value.node_def == "CheckNumerics"
            # The update waited for the check: nothing was written.
            np.testing.assert_array_equal(sess.run(w), before)


def test_checks_fail_steps_on_a_cluster_worker():
    """The errors travel from a worker process to the client with their class, op and message."""
    with af.cluster.LocalCluster(ps=0, workers=1) as lc:
        with af.Graph().as_default():
            with af.device("/job:worker/task:0"):
                x = af.placeholder(af.float32, [4], name="x")
                y = af.verify_tensor_all_finite(x * 2.0, "doubled input")
                positive = af.assert_positive(x, message="x must be positive", summarize=2)
            with af.Session(lc.target) as sess:
                np.testing.assert_array_equal(sess.run(y, {x: [1, 2, 3, 4]}), [2, 4, 6, 8])
                with pytest.raises(InvalidArgumentError, match="^doubled input : Tensor had Inf values; "
                                                               "the first, inf, is at index \\[2\\]") as ei:
                    sess.run(y, {x: [1, 2, np.inf, 4]})
                assert ei.value.node_def == "VerifyFinite/CheckNumerics"
                sess.run(positive, {x: [1, 2, 3, 4]})
                with pytest.raises(InvalidArgumentError) as ei:
                    sess.run(positive, {x: [1, -2, 3, 4]})
                assert str(ei.value).startswith("assertion failed: [x must be positive.  ] [Condition x > 0 did not "
                                                "hold element-wise:] [x (x:0) = ] [1 -2...]")
                assert ei.value.node_def == "assert_positive/assert_less/Assert/Assert"
