"""When a step reads and updates a variable: reads under `control_dependencies` see the updates they
wait for (TF 1.x reads a reference variable's buffer when the consuming op runs; TF 2 reads a resource
variable afresh in the current context), and two updates of one variable that nothing orders apply
in the order their inputs were ready, on the actors and on the synchronous training path alike.
The expected values are TensorFlow 2.21's (`tf.compat.v1` with v2 behaviour off), worked out by hand
below and checked against it once."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
import actorflow.actors.sync_step as sync_step

pytestmark = pytest.mark.usefixtures("graph")


@pytest.fixture(params=[True, False], ids=["sync", "actors"])
def path(request, monkeypatch):
    monkeypatch.setattr(sync_step, "TRAINING_STEPS", request.param)
    return request.param


def test_a_read_under_control_dependencies_sees_the_update_it_waits_for(path):
    v = af.Variable(1.0, name="v")
    x = af.placeholder(af.float32, [], name="x")
    a = v.assign(x * 3.0)
    with af.control_dependencies([a]):
        doubled = v * 2.0
        same = af.identity(v)
        fresh = v.read_value()
    snapshot = v * 2.0             # no control dependency: may read before or after; not fetched
    assert snapshot.op.inputs[0] is v.value()      # outside any context: the variable's one snapshot
    with af.Session() as sess:
        sess.run(v.initializer)
        assert sess.run([doubled, same, fresh], {x: 2.0}) == [12.0, 6.0, 6.0]
        assert sess.run(doubled, {x: 3.0}) == 18.0


def test_the_values_read_after_an_optimizer_step_are_the_updated_ones(path):
    w = af.Variable([1.0, 2.0], name="w")
    train = af.train.GradientDescentOptimizer(0.5).minimize(af.reduce_sum(w * w))
    with af.control_dependencies([train]):
        after = af.identity(w)
        plus = w + 0.0
    with af.Session() as sess:
        sess.run(w.initializer)
        got = sess.run([after, plus])
    np.testing.assert_array_equal(got[0], [0.0, 0.0])       # w - 0.5 * 2w
    np.testing.assert_array_equal(got[1], [0.0, 0.0])


def test_an_ema_applied_after_the_optimizer_averages_the_updated_weights(path):
    """TF's documented idiom: `with tf.control_dependencies([opt_op]): training_op = ema.apply(...)`."""
    w = af.Variable([1.0, -2.0], name="w")
    x = af.placeholder(af.float32, [None, 2], name="x")
    loss = af.reduce_mean(af.square(af.reduce_sum(x * w, 1) - 1.0))
    opt = af.train.GradientDescentOptimizer(0.1).minimize(loss)
    ema = af.train.ExponentialMovingAverage(0.9)
    with af.control_dependencies([opt]):
        train = ema.apply([w])
    rng = np.random.RandomState(0)
    batches = [rng.randn(4, 2).astype(np.float32) for _ in range(3)]
    ww, avg = np.array([1.0, -2.0], np.float32), np.array([1.0, -2.0], np.float32)
    for xb in batches:             # the same in numpy: the average moves toward the updated weights
        r = xb @ ww - 1.0
        ww = ww - np.float32(0.1) * (2.0 * (r[:, None] * xb).mean(0)).astype(np.float32)
        avg = avg - (np.float32(1.0) - np.float32(0.9)) * (avg - ww)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        for xb in batches:
            sess.run(train, {x: xb})
        got_w, got_avg = sess.run([w, ema.average(w)])
    np.testing.assert_allclose(got_w, ww, rtol=1e-5)
    np.testing.assert_allclose(got_avg, avg, rtol=1e-5)


def test_a_weight_clip_fetched_with_the_train_op_keeps_the_update(path):
    """`sess.run([loss, train_op, clip_op])`, a WGAN's critic step: the clip's assign (ready at once)
    goes first and the optimizer's update applies on top of it. Run the other way the clip overwrote
    the update and the critic never trained (the synchronous path did so before)."""
    v = af.Variable([1.0, 2.0], name="v")
    x = af.placeholder(af.float32, [2], name="x")
    loss = af.reduce_sum(af.square(v * x))
    train = af.train.RMSPropOptimizer(0.1).minimize(loss, var_list=[v])
    clip = v.assign(af.clip_by_value(v, -0.5, 0.5))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        for _ in range(2):
            sess.run([loss, train, clip], {x: [1.0, 1.0]})
        got = sess.run(v)
    # step 1: clip to 0.5, then RMSProp (ms starts at 1, decay 0.9) with the gradient 2 v x^2 of the
    # v the step read, [1, 2]; step 2: the clip leaves 0.5 - d as it is, the gradient is 2 (0.5 - d)
    ms = np.ones(2, np.float32)
    val = np.array([1.0, 2.0], np.float32)
    for _ in range(2):
        g = 2.0 * val
        val = np.clip(val, -0.5, 0.5)
        ms = np.float32(0.9) * ms + np.float32(0.1) * g * g
        val = val - np.float32(0.1) * g / np.sqrt(ms)
    np.testing.assert_allclose(got, val, rtol=1e-6)


def test_one_adam_applying_two_gradient_lists_in_a_step_advances_its_powers_twice(path):
    """A coupled GAN's step: `tf.group(opt.apply_gradients(g1), opt.apply_gradients(g2))` with one
    AdamOptimizer. Each apply's finish multiplies beta1_power and beta2_power (a fresh read, a multiply,
    an assign); TF runs each such read-modify-write inline, so its powers advance twice a step (TF 2.21:
    0.9 -> 0.729 -> 0.59049). Breadth first, both reads came before both writes and they advanced
    once; the serialize_read_modify_writes pass orders the pairs."""
    a = af.Variable([1.0, 2.0], name="a")
    b = af.Variable([3.0], name="b")
    loss = af.reduce_sum(a * a) + af.reduce_sum(b * b * a[0])
    opt = af.train.AdamOptimizer(0.1)
    step = af.group(opt.apply_gradients(opt.compute_gradients(loss, [a])),
                    opt.apply_gradients(opt.compute_gradients(loss, [b])))
    b1, b2 = opt._get_beta_accumulators()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        powers = []
        for _ in range(2):
            sess.run(step)
            powers.append(sess.run([b1, b2]))
    np.testing.assert_allclose(powers, [[0.9 ** 3, 0.999 ** 3], [0.9 ** 5, 0.999 ** 5]], rtol=1e-6)


def test_read_modify_writes_that_the_graph_orders_keep_their_order(path):
    """The pass adds nothing where the pairs are ordered already (the second read waits for the first
    update) and the values are those of the program's own order."""
    v = af.Variable(2.0, name="v")
    with af.control_dependencies([af.no_op()]):
        first = v.assign(v * 3.0)
    with af.control_dependencies([first]):
        second = v.assign(v + 1.0)
    with af.Session() as sess:
        sess.run(v.initializer)
        sess.run(second)
        assert sess.run(v) == 7.0
