"""tf.nn's convolution family (conv1d, convolution, atrous_conv2d, depthwise and separable
convolution, lrn, space_to_depth / depth_to_space, 1-D pooling, max_pool_with_argmax) against
TensorFlow 2.21's values and gradients (tests/fixtures/make_nn_conv.py): the same expressions, with
`tf` bound to actorflow; plus shape errors that name the op, and gradients of the new gradient ops
against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import nn_conv_ops
from tests import tf_reference

FIX = tf_reference.load("nn_conv.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def _fd_check(build, shapes, seed=0, eps=1e-6):
    """The gradient of sum(build(*xs) * W) against central finite differences, in float64."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s) for s in shapes]
    with af.Graph().as_default():
        xs = [af.placeholder(af.float64, s) for s in shapes]
        y = build(*xs)
        w = tf_reference.weights(y.shape.as_list())
        loss = af.reduce_sum(y * w)
        grads = af.gradients(loss, xs)
        with af.Session() as s:
            feed = dict(zip(xs, values))
            got = s.run(grads, feed)
            for i, v in enumerate(values):
                num = np.zeros_like(v)
                for idx in np.ndindex(v.shape):
                    for sign in (1, -1):
                        p = [a.copy() for a in values]
                        p[i][idx] += sign * eps
                        num[idx] += sign * s.run(loss, dict(zip(xs, p)))
                num /= 2 * eps
                np.testing.assert_allclose(got[i], num, rtol=1e-6, atol=1e-6)


def test_depthwise_gradient_ops_differentiate_like_finite_differences():
    # The gradients of the gradient ops (second order: a gradient penalty on a depthwise layer).
    attrs = {"strides": (1, 2, 2, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
    _fd_check(lambda dy, f: nn_conv_ops.DepthwiseConv2dNativeBackpropInput(
        af.constant([1, 5, 4, 2]), f, dy, **attrs), [(1, 3, 2, 4), (2, 2, 2, 2)])
    _fd_check(lambda x, dy: nn_conv_ops.DepthwiseConv2dNativeBackpropFilter(
        x, af.constant([2, 2, 2, 2]), dy, **attrs), [(1, 5, 4, 2), (1, 3, 2, 4)])


def test_dilated_depthwise_and_lrn_in_float64_against_finite_differences():
    _fd_check(lambda x, f: af.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID", rate=[2, 1]),
              [(1, 5, 4, 2), (2, 2, 2, 1)])
    _fd_check(lambda x: af.nn.lrn(x, 1, 0.7, 0.4, 0.8), [(1, 2, 2, 4)])


def test_nchw_space_to_depth_round_trips():
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    with af.Graph().as_default():
        y = af.space_to_depth(x, 2, data_format="NCHW")
        z = af.depth_to_space(y, 2, data_format="NCHW")
        with af.Session() as s:
            yv, zv = s.run([y, z])
    assert yv.shape == (2, 12, 2, 3)
    np.testing.assert_array_equal(zv, x)
    # Output channel (dy * 2 + dx) * C + c of pixel (i, j) is input channel c at (2i + dy, 2j + dx).
    np.testing.assert_array_equal(yv[1, :, 1, 2], [x[1, c, 2 + dy, 4 + dx] for dy in range(2) for dx in range(2)
                                                  for c in range(3)])


def test_bad_shapes_are_errors_naming_the_op():
    with af.Graph().as_default():
        img = af.placeholder(af.float32, [2, 7, 6, 3], name="img")
        with pytest.raises(ValueError, match="input depth 3.*in_channels 4.*DepthwiseConv2dNative"):
            af.nn.depthwise_conv2d(img, af.zeros([3, 3, 4, 2]), [1, 1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="height 7 is not divisible by block_size 2.*SpaceToDepth"):
            af.space_to_depth(img, 2)
        with pytest.raises(ValueError, match="depth 3 is not divisible.*DepthToSpace"):
            af.depth_to_space(img, 2)
        with pytest.raises(ValueError, match="must be rank 4.*type LRN"):
            af.nn.lrn(af.zeros([2, 3]))
        with pytest.raises(ValueError, match="conv1d.*must be rank 3"):
            af.nn.conv1d(img, af.zeros([3, 3, 4]), 1, "SAME")
        with pytest.raises(ValueError, match="strides > 1 not supported in conjunction with dilation_rate > 1"):
            af.nn.convolution(img, af.zeros([3, 3, 3, 4]), "SAME", strides=[2, 2], dilation_rate=[2, 2])
        with pytest.raises(ValueError, match="all strides must be 1"):
            af.nn.depthwise_conv2d(img, af.zeros([3, 3, 3, 1]), [1, 2, 2, 1], "SAME", rate=[2, 2])
        with pytest.raises(ValueError, match="separable_conv2d.*pointwise_filter"):
            af.nn.separable_conv2d(img, af.zeros([3, 3, 3, 1]), af.zeros([3, 3, 3, 4]), [1, 1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="subtracting 8 from 7.*MaxPoolWithArgmax"):
            af.nn.max_pool_with_argmax(img, [1, 8, 2, 1], [1, 1, 1, 1], "VALID")
        with pytest.raises(ValueError, match="max_pool_with_argmax.*NHWC"):
            af.nn.max_pool_with_argmax(img, [1, 2, 2, 1], [1, 1, 1, 1], "VALID", data_format="NCHW")
        # Shapes known only at run time: the kernels name the op.
        x = af.placeholder(af.float32, None, name="x")
        s2d = af.space_to_depth(x, 2)
        dw = af.nn.depthwise_conv2d_native(x, af.zeros([3, 3, 2, 1]), [1, 1, 1, 1], "VALID")
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="SpaceToDepth.*divisible by block_size 2"):
                s.run(s2d, {x: np.zeros((1, 3, 4, 1))})
            with pytest.raises(af.errors.InvalidArgumentError, match="DepthwiseConv2dNative.*input depth 5"):
                s.run(dw, {x: np.zeros((1, 4, 4, 5))})


@pytest.mark.parametrize("strides,padding,dilations", [((1, 1, 1, 1), "SAME", (1, 1, 1, 1)),
                                                       ((1, 2, 2, 1), "VALID", (1, 1, 1, 1)),
                                                       ((1, 1, 1, 1), "SAME", (1, 2, 1, 1))])
def test_depthwise_kernels_split_by_batch_like_the_whole_call(strides, padding, dilations):
    from actorflow.kernels.registry import get_kernel
    attrs = {"strides": strides, "padding": padding, "data_format": "NHWC", "dilations": dilations}
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 7, 6, 3))
    f = rng.standard_normal((3, 2, 3, 2))
    y = get_kernel("DepthwiseConv2dNative").factory(attrs)(x, f)
    dy = rng.standard_normal(y.shape)
    calls = {"DepthwiseConv2dNative": (x, f),
             "DepthwiseConv2dNativeBackpropInput": (np.array(x.shape, np.int32), f, dy),
             "DepthwiseConv2dNativeBackpropFilter": (x, np.array(f.shape, np.int32), dy)}
    for op, args in calls.items():
        k = get_kernel(op)
        whole = k.factory(attrs)(*args)
        plan = k.split(attrs)(2, *args)
        assert plan is not None, op
        out, thunks, *finish = plan
        for t in thunks:
            t()
        got = finish[0]() if finish else out
        np.testing.assert_allclose(got, whole, rtol=1e-12, atol=1e-12, err_msg=op)


def test_max_pool_with_argmax_returns_tf_namedtuple_and_argmax_gradient_is_none():
    with af.Graph().as_default():
        x = af.constant(np.arange(16.0).reshape(1, 4, 4, 1))
        r = af.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        assert r.output is r[0] and r.argmax is r[1]
        (g,) = af.gradients(af.reduce_sum(r.output), [x])
        with af.Session() as s:
            out, arg, gv = s.run([r.output, r.argmax, g])
    np.testing.assert_array_equal(out[0, :, :, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(arg[0, :, :, 0], [[5, 7], [13, 15]])
    assert gv.sum() == 4 and gv[0, 1, 1, 0] == 1


@pytest.mark.parametrize("with_batch", [False, True])
def test_max_pool_grad_with_argmax_differentiates_like_finite_differences(with_batch):
    # MaxPoolGradWithArgmax is linear in its grad input: its gradient reads the argmax positions.
    x = np.random.default_rng(3).standard_normal((2, 5, 4, 3))
    attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "SAME", "include_batch_in_index": with_batch}

    def build(g):
        argmax = nn_conv_ops.max_pool_with_argmax(af.constant(x), **attrs).argmax
        return nn_conv_ops.MaxPoolGradWithArgmax(af.constant(x), g, argmax, **attrs)
    _fd_check(build, [(2, 3, 2, 3)])


def test_a_network_of_the_new_ops_trains_through_the_session():
    # Placeholders and variables: the kernels run on the actors (nothing constant-folds).
    rng = np.random.default_rng(0)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 12, 12, 3])
        lab = af.placeholder(af.int64, [None])
        dw = af.Variable(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3)
        pw = af.Variable(rng.standard_normal((1, 1, 12, 8)).astype(np.float32) * 0.3)
        c1 = af.Variable(rng.standard_normal((3, 32, 10)).astype(np.float32) * 0.1)
        h = af.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "SAME", rate=[2, 2])
        h = af.nn.lrn(af.nn.relu(h), 2, 1.0, 1e-3, 0.75)
        h, _ = af.nn.max_pool_with_argmax(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = af.space_to_depth(h, 2)                                                    # [N, 3, 3, 32]
        h = af.nn.conv1d(af.reshape(h, [-1, 9, 32]), c1, 1, "VALID", dilations=2)      # [N, 5, 10]
        logits = af.reduce_mean(af.nn.max_pool1d(h, 2, 1, "VALID"), 1)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
        step = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        feed = {x: rng.standard_normal((16, 12, 12, 3)).astype(np.float32), lab: rng.integers(0, 10, 16)}
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            losses = [s.run([loss, step], feed)[0] for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0], losses
