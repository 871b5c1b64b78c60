"""Neural-network ops (tf.nn, TF 1.x names): activations, softmax and cross-entropies, bias and
convolution, pooling, dropout, normalization and embedding lookup.

Op types defined here: Relu6, Elu, Softplus, Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits,
SparseSoftmaxCrossEntropyWithLogits, BiasAdd, BiasAddGrad, Conv2D, Conv2DBackpropInput,
Conv2DBackpropFilter, MaxPool, MaxPoolGrad, AvgPool, AvgPoolGrad. Relu and the element-wise
``*Grad`` ops of the activations live in math_ops beside the other element-wise ops. Everything
else here (dropout, moments, batch_normalization, embedding_lookup...) is composed of other ops,
as in TF, so it needs no kernels of its own and differentiates through its parts.

Image ops are NHWC by default and infer their output shapes with TF's arithmetic: with an
effective window ``k_eff = (k - 1) * dilation + 1``, VALID gives ``(n - k_eff) // stride + 1`` and
SAME gives ``ceil(n / stride)``.
"""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, colocate_with, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops, random_ops
from actorflow.graph.ops.constant import constant, stop_gradient
from actorflow.graph.ops.infer import constant_shape
from actorflow.graph.ops.math_ops import Relu
from actorflow.graph.tensor_shape import TensorShape

__all__ = [
    "relu", "relu6", "elu", "softplus", "leaky_relu",
    "softmax", "log_softmax", "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    "bias_add", "xw_plus_b", "conv2d", "conv2d_transpose", "conv2d_backprop_input", "max_pool2d", "max_pool", "avg_pool2d", "avg_pool",
    "dropout", "moments", "batch_normalization", "l2_loss", "l2_normalize", "embedding_lookup",
    "in_top_k",
]


# ---------------------------------------------------------------------------------------------
# Inference helpers
# ---------------------------------------------------------------------------------------------

def _check_float(t, what):
    if not t.dtype.is_floating:
        raise InferenceError(f"{what} must have a floating-point dtype, got {t.dtype.name}")


def _check_same_dtype(a, b, an, bn):
    if a.dtype is not b.dtype:
        raise InferenceError(f"{an} ({a.dtype.name}) and {bn} ({b.dtype.name}) must have the same dtype")


def _with_rank(shape: TensorShape, rank: int, what: str) -> TensorShape:
    if shape.dims is None:
        return TensorShape([None] * rank)
    if len(shape.dims) != rank:
        raise InferenceError(f"{what} must be rank {rank}, got shape {shape} of rank {len(shape.dims)}")
    return shape


def _with_rank_at_least(shape: TensorShape, rank: int, what: str) -> TensorShape:
    if shape.dims is not None and len(shape.dims) < rank:
        raise InferenceError(f"{what} must be at least rank {rank}, got shape {shape}")
    return shape


# (height, width, channels) axes of a 4-D image tensor in each data format.
_IMAGE_AXES = {"NHWC": (1, 2, 3), "NCHW": (2, 3, 1)}


def _image_axes(attrs) -> tuple:
    fmt = attrs.get("data_format", "NHWC")
    try:
        return _IMAGE_AXES[fmt]
    except KeyError:
        raise InferenceError(f"data_format must be 'NHWC' or 'NCHW', got {fmt!r}") from None


def _window(attrs, key, axes, default=None) -> tuple:
    """The (height, width) entries of a 4-element window attr (strides, ksize, dilations)."""
    v = attrs.get(key, default)
    if v is None:
        raise InferenceError(f"attr '{key}' is required")
    v = tuple(int(x) for x in v)
    if len(v) != 4:
        raise InferenceError(f"{key} must have 4 elements, got {list(v)}")
    h, w, c = axes
    if v[0] != 1 or v[c] != 1:
        raise InferenceError(f"{key} in the batch and depth dimensions must be 1, got {list(v)}")
    if v[h] < 1 or v[w] < 1:
        raise InferenceError(f"{key} must be positive, got {list(v)}")
    return v[h], v[w]


def _padding(attrs) -> str:
    p = attrs.get("padding")
    if p not in ("SAME", "VALID"):
        raise InferenceError(f"padding must be 'SAME' or 'VALID', got {p!r}")
    return p


def _out_size(n, k, stride, dilation, padding, dim):
    """TF's output size of one spatial dimension (GetWindowedOutputSize)."""
    if n is None:
        return None
    if padding == "SAME":
        return -(-n // stride)
    if k is None:
        return None
    eff = (k - 1) * dilation + 1
    if n < eff:
        raise InferenceError(f"Negative dimension size caused by subtracting {eff} from {n} "
                             f"in the {dim} dimension (VALID padding)")
    return (n - eff) // stride + 1


def _image_shape(axes, n, h, w, c) -> TensorShape:
    dims = [n, None, None, None]
    dims[axes[0]], dims[axes[1]], dims[axes[2]] = h, w, c
    return TensorShape(dims)


def _conv_output_shape(x: TensorShape, f: TensorShape, attrs, depthwise: bool = False) -> TensorShape:
    """The output shape of a 2-D convolution of `x` by `f` (HWIO); with `depthwise`, of a depthwise
    one (filter [height, width, in_channels, channel_multiplier]: in_channels * multiplier outputs)."""
    axes = _image_axes(attrs)
    sh, sw = _window(attrs, "strides", axes)
    dh, dw = _window(attrs, "dilations", axes, (1, 1, 1, 1))
    padding = _padding(attrs)
    x = _with_rank(x, 4, "input")
    f = _with_rank(f, 4, "filter")
    in_c, f_in = x[axes[2]], f[2]
    if in_c is not None and f_in is not None and in_c != f_in:
        layout = "[height, width, in_channels, channel_multiplier]" if depthwise else "HWIO"
        raise InferenceError(f"input depth {in_c} (input shape {x}) does not match the filter's in_channels "
                             f"{f_in} (filter shape {f}, {layout})")
    if depthwise and sh != sw:
        raise InferenceError(f"current implementation only supports equal length strides in the row and column "
                             f"dimensions, got {sh} and {sw}")
    oh = _out_size(x[axes[0]], f[0], sh, dh, padding, "height")
    ow = _out_size(x[axes[1]], f[1], sw, dw, padding, "width")
    if not depthwise:
        return _image_shape(axes, x[0], oh, ow, f[3])
    c = in_c if in_c is not None else f_in
    return _image_shape(axes, x[0], oh, ow, None if c is None or f[3] is None else c * f[3])


def _pool_output_shape(x: TensorShape, attrs) -> TensorShape:
    axes = _image_axes(attrs)
    kh, kw = _window(attrs, "ksize", axes)
    sh, sw = _window(attrs, "strides", axes)
    padding = _padding(attrs)
    x = _with_rank(x, 4, "input")
    oh = _out_size(x[axes[0]], kh, sh, 1, padding, "height")
    ow = _out_size(x[axes[1]], kw, sw, 1, padding, "width")
    return _image_shape(axes, x[0], oh, ow, x[axes[2]])


def _sizes_input(t: Tensor, what: str, rank: int = 4) -> TensorShape:
    """The static knowledge of an int32 [rank] sizes input (Conv2DBackprop*, AvgPoolGrad; rank 5 for
    their 3-D forms)."""
    if t.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"{what} must be an int32 vector, got {t.dtype.name}")
    if t.shape.dims is not None and t.shape.dims != (rank,):
        raise InferenceError(f"{what} must be a vector of {rank} sizes, got shape {t.shape}")
    s = constant_shape(t)
    return TensorShape([None] * rank) if s.dims is None else _with_rank(s, rank, what)


def _check_compatible(a: TensorShape, b: TensorShape, msg: str) -> None:
    if not a.is_compatible_with(b):
        raise InferenceError(msg)


# ---------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------

def _infer_activation(kind):
    def infer(inputs, attrs):
        (x,) = inputs
        if kind == "float":
            _check_float(x, "features")
        elif not x.dtype.is_numeric:
            raise InferenceError(f"features must have a numeric dtype, got {x.dtype.name}")
        return [(x.dtype, x.shape)]
    return infer


Relu6 = define_op("Relu6", _infer_activation("numeric"))
Elu = define_op("Elu", _infer_activation("float"))
Softplus = define_op("Softplus", _infer_activation("float"))


@Relu6.gradient
def _relu6_grad(op, grad):
    if not op.inputs[0].dtype.is_floating:
        return [None]
    return [math_ops.relu6_grad(grad, op.inputs[0])]


@Elu.gradient
def _elu_grad(op, grad):
    return [math_ops.elu_grad(grad, op.outputs[0])]


@Softplus.gradient
def _softplus_grad(op, grad):
    return [math_ops.softplus_grad(grad, op.inputs[0])]


def relu(features, name=None):
    """max(features, 0) (tf.nn.relu; op Relu)."""
    return Relu(convert_to_tensor(features), name=name)


def relu6(features, name=None):
    """min(max(features, 0), 6) (tf.nn.relu6; op Relu6)."""
    return Relu6(convert_to_tensor(features), name=name)


def elu(features, name=None):
    """exp(features) - 1 where features < 0, else features (tf.nn.elu; op Elu)."""
    return Elu(convert_to_tensor(features), name=name)


def softplus(features, name=None):
    """log(exp(features) + 1), computed without overflow (tf.nn.softplus; op Softplus)."""
    return Softplus(convert_to_tensor(features), name=name)


def leaky_relu(features, alpha=0.2, name=None):
    """features where positive, else alpha * features (tf.nn.leaky_relu).

    Composed as max(alpha * x, x) (valid for alpha <= 1), as TF did before its LeakyRelu kernel;
    integer features are cast to float32 as in TF.
    """
    with name_scope(name, "LeakyRelu", [features, alpha]) as scope:
        x = convert_to_tensor(features)
        if x.dtype.is_integer:
            x = math_ops.cast(x, dtypes.float32)
        if isinstance(alpha, numbers.Real) and alpha > 1:
            # max(a*x, x) would pick a*x for positive x: fall back to a select.
            return math_ops.where_v2(math_ops.greater(x, 0), x, math_ops.multiply(alpha, x), name=scope)
        return math_ops.maximum(math_ops.multiply(alpha, x, name="mul"), x, name=scope)


# ---------------------------------------------------------------------------------------------
# Softmax and cross-entropy
# ---------------------------------------------------------------------------------------------

def _infer_softmax(inputs, attrs):
    (x,) = inputs
    _check_float(x, "logits")
    _with_rank_at_least(x.shape, 1, "logits")
    return [(x.dtype, x.shape)]


Softmax = define_op("Softmax", _infer_softmax)
LogSoftmax = define_op("LogSoftmax", _infer_softmax)


@Softmax.gradient
def _softmax_grad(op, grad):
    # dx = (dy - sum(dy * y, -1)) * y: the Jacobian-vector product of softmax, without the Jacobian.
    y = op.outputs[0]
    inner = math_ops.reduce_sum(math_ops.multiply(grad, y), -1, keepdims=True)
    return [math_ops.multiply(math_ops.subtract(grad, inner), y)]


@LogSoftmax.gradient
def _log_softmax_grad(op, grad):
    # y = x - logsumexp(x), so dx = dy - sum(dy, -1) * softmax(x) = dy - sum(dy, -1) * exp(y).
    softmax_ = math_ops.exp(op.outputs[0])
    return [math_ops.subtract(grad, math_ops.multiply(math_ops.reduce_sum(grad, -1, keepdims=True), softmax_))]


def _infer_xent(inputs, attrs):
    features, labels = inputs
    _check_float(features, "features (logits)")
    _check_same_dtype(features, labels, "features (logits)", "labels")
    fs = _with_rank(features.shape, 2, "features (logits)")
    ls = _with_rank(labels.shape, 2, "labels")
    # Labels broadcast against features (TF >= 1.13): each dimension equal, or 1 in one of them.
    dims = []
    for f, lab in zip(fs.dims, ls.dims):
        if f is not None and lab is not None and f != lab and 1 not in (f, lab):
            raise InferenceError(f"logits and labels must be broadcastable, got logits {fs} and labels {ls}")
        dims.append(f if lab == 1 else lab if f in (1, None) else f)
    s = TensorShape(dims)
    return [(features.dtype, TensorShape([s[0]])), (features.dtype, s)]


def _infer_sparse_xent(inputs, attrs):
    features, labels = inputs
    _check_float(features, "features (logits)")
    if labels.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"labels must be int32 or int64 class indices, got {labels.dtype.name}")
    fs = _with_rank(features.shape, 2, "features (logits)")
    ls = _with_rank(labels.shape, 1, "labels")
    _check_compatible(TensorShape([fs[0]]), ls, f"logits and labels must have the same first dimension, "
                                                f"got logits shape {fs} and labels shape {ls}")
    batch = TensorShape([fs[0]]).merge_with(ls)
    return [(features.dtype, batch), (features.dtype, TensorShape([batch[0], fs[1]]))]


SoftmaxCrossEntropyWithLogits = define_op("SoftmaxCrossEntropyWithLogits", _infer_xent)
SparseSoftmaxCrossEntropyWithLogits = define_op("SparseSoftmaxCrossEntropyWithLogits", _infer_sparse_xent)


def _xent_features_grad(op, grad_loss, grad_backprop):
    """d(features) of both cross-entropy ops: the kernel's backprop output scaled per example, plus
    the second-order term when a gradient reached the backprop output (gradient of a gradient)."""
    backprop = op.outputs[1]
    out = None
    if grad_loss is not None:
        out = math_ops.multiply(array_ops.expand_dims(grad_loss, -1), backprop)
    if grad_backprop is not None:
        # backprop = softmax(features) - labels: its Jacobian wrt features is softmax's.
        sm = Softmax(op.inputs[0])
        inner = math_ops.reduce_sum(math_ops.multiply(grad_backprop, sm), -1, keepdims=True)
        term = math_ops.multiply(math_ops.subtract(grad_backprop, inner), sm)
        out = term if out is None else math_ops.add(out, term)
    return out


@SoftmaxCrossEntropyWithLogits.gradient
def _xent_grad(op, grad_loss, grad_backprop=None):
    features, labels = op.inputs
    d_features = _xent_features_grad(op, grad_loss, grad_backprop)
    # loss = -sum(labels * log_softmax(features)), and backprop = softmax - labels depends on
    # labels with Jacobian -I: labels get a gradient too, as in TF's v2 op.
    d_labels = None
    if grad_loss is not None:
        d_labels = math_ops.multiply(array_ops.expand_dims(grad_loss, -1), math_ops.negative(LogSoftmax(features)))
    if grad_backprop is not None:
        d_labels = math_ops.negative(grad_backprop) if d_labels is None \
            else math_ops.subtract(d_labels, grad_backprop)
    if d_labels is not None and labels.shape != features.shape:      # labels were broadcast
        d_labels = math_ops.reduce_to_shape(d_labels, labels)
    return [d_features, d_labels]


@SparseSoftmaxCrossEntropyWithLogits.gradient
def _sparse_xent_grad(op, grad_loss, grad_backprop=None):
    return [_xent_features_grad(op, grad_loss, grad_backprop), None]


def _rank_of(x: Tensor, what: str) -> int:
    r = x.shape.ndims
    if r is None:
        raise ValueError(f"{what} '{x.name}' must have a known rank to apply along a given axis")
    return r


def _move_axis_last(x: Tensor, axis: int, rank: int):
    """Swaps `axis` with the last axis (TF's _swap_axis); the permutation is its own inverse."""
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return array_ops.transpose(x, perm), perm


def _along_axis(op_def, logits, axis, name, default_name):
    with name_scope(name, default_name, [logits]) as scope:
        x = convert_to_tensor(logits)
        if not x.dtype.is_floating:
            raise TypeError(f"{default_name} expects floating-point logits, got {x.dtype.name} tensor '{x.name}'")
        if axis is None or axis == -1:
            return op_def(x, name=scope)
        rank = _rank_of(x, "logits")
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for logits '{x.name}' of rank {rank}")
        axis %= rank
        if axis == rank - 1:
            return op_def(x, name=scope)
        swapped, perm = _move_axis_last(x, axis, rank)
        return array_ops.Transpose(op_def(swapped), constant(perm, dtype=dtypes.int32), name=scope)


def _pick_axis(axis, dim):
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    return axis if axis is not None else dim


def softmax(logits, axis=None, name=None, dim=None):
    """exp(logits) / sum(exp(logits), axis) (tf.compat.v1.nn.softmax; op Softmax).

    `axis` defaults to the last; other axes are transposed to the end and back, as in TF (they
    need a static rank). `dim` is TF 1.x's deprecated alias of `axis`.
    """
    return _along_axis(Softmax, logits, _pick_axis(axis, dim), name, "Softmax")


def log_softmax(logits, axis=None, name=None, dim=None):
    """logits - log(sum(exp(logits), axis)) (tf.compat.v1.nn.log_softmax; op LogSoftmax)."""
    return _along_axis(LogSoftmax, logits, _pick_axis(axis, dim), name, "LogSoftmax")


def _flatten_outer_dims(x: Tensor) -> Tensor:
    """Reshapes `x` to [prod(shape[:-1]), shape[-1]] (TF's _flatten_outer_dims)."""
    dims = x.shape.dims
    if dims is not None and len(dims) == 2:
        return x
    if dims is not None and dims[-1] is not None:
        out = array_ops.reshape(x, [-1, dims[-1]])
    else:
        last = array_ops.gather(array_ops.shape(x), math_ops.subtract(array_ops.rank(x), 1))
        out = array_ops.reshape(x, [-1, last])
    if dims is not None:
        outer = 1
        for d in dims[:-1]:
            outer = None if outer is None or d is None else outer * d
        out.set_shape([outer, dims[-1]])
    return out


def _outer_shape(x: Tensor) -> Tensor:
    """shape(x)[:-1] as an int32 vector (static when known)."""
    dims = x.shape.dims
    if dims is not None and all(d is not None for d in dims[:-1]):
        return constant(list(dims[:-1]), dtype=dtypes.int32)
    n = math_ops.subtract(array_ops.rank(x), 1)
    return array_ops.slice(array_ops.shape(x), [0], array_ops.expand_dims(n, 0))


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis=-1, name=None, dim=None):
    """Cross-entropy between `labels` (a distribution per row) and softmax(logits) along `axis`
    (tf.nn.softmax_cross_entropy_with_logits_v2; op SoftmaxCrossEntropyWithLogits).

    Returns the per-example loss, of logits' shape without `axis`. As in TF's v2 function,
    gradients flow into `labels` too: wrap them in `stop_gradient` for TF 1.x's v1 behaviour.
    Logits of rank other than 2 are reshaped to 2-D and the loss back.
    """
    if labels is None or logits is None:
        raise ValueError("softmax_cross_entropy_with_logits needs both labels= and logits=")
    if dim is not None:
        if axis not in (-1, None):
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = convert_to_tensor(logits)
        if not logits.dtype.is_floating:
            raise TypeError(f"logits must be floating-point, got {logits.dtype.name} tensor '{logits.name}'")
        labels = convert_to_tensor(labels, dtype=logits.dtype) if not isinstance(labels, Tensor) else labels
        if labels.dtype is not logits.dtype:
            # TF's v2 helper casts labels of any other dtype (float64 or int32 one-hots) to logits'.
            if not (labels.dtype.is_floating or labels.dtype.is_integer or labels.dtype.is_bool):
                raise TypeError(f"labels ({labels.dtype.name}) cannot be cast to the dtype of logits "
                                f"({logits.dtype.name})")
            labels = math_ops.cast(labels, logits.dtype)
        fr, lr = logits.shape.ndims, labels.shape.ndims
        if fr is not None and lr is not None and fr != lr:
            # TF flattens both to [-1, classes] and lets the kernel broadcast them: labels [1, n, k]
            # against logits [n, k] (hunkim's lab-06-2 feeds `stop_gradient([y])`).
            if axis not in (-1, None, fr - 1) or not logits.shape[-1:].is_compatible_with(labels.shape[-1:]):
                raise ValueError(f"logits and labels must have the same shape, got logits {logits.shape} "
                                 f"and labels {labels.shape}")
            return _flat_xent(logits, labels, scope)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and labels must have the same shape, got logits {logits.shape} "
                             f"and labels {labels.shape}")
        rank = fr if fr is not None else lr
        if axis not in (-1, None):
            rank = _rank_of(logits, "logits")
            if not -rank <= axis < rank:
                raise ValueError(f"axis {axis} is out of range for logits of rank {rank}")
            if axis % rank != rank - 1:
                logits, _ = _move_axis_last(logits, axis % rank, rank)
                labels, _ = _move_axis_last(labels, axis % rank, rank)
        if rank == 0:
            raise ValueError(f"logits '{logits.name}' must have rank at least 1, got a scalar")
        if rank == 2:
            loss, _ = SoftmaxCrossEntropyWithLogits(logits, labels, name=scope)
            return loss
        return _flat_xent(logits, labels, scope)


def _flat_xent(logits, labels, name):
    """The loss of logits and labels flattened to [-1, classes], reshaped to logits' outer shape."""
    loss, _ = SoftmaxCrossEntropyWithLogits(_flatten_outer_dims(logits), _flatten_outer_dims(labels))
    out = array_ops.Reshape(loss, _outer_shape(logits), name=name)
    if logits.shape.dims is not None:
        out.set_shape(logits.shape.dims[:-1])
    return out


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Cross-entropy between integer class `labels` and softmax(logits) over the last axis
    (tf.nn.sparse_softmax_cross_entropy_with_logits; op SparseSoftmaxCrossEntropyWithLogits).

    `labels` has logits' shape without the last axis. Out-of-range labels are a run-time error
    of the kernel, as in TF on CPU.
    """
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs both labels= and logits=")
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]) as scope:
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        if not logits.dtype.is_floating:
            raise TypeError(f"logits must be floating-point, got {logits.dtype.name} tensor '{logits.name}'")
        if labels.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"labels must be int32 or int64 class indices, got {labels.dtype.name} tensor "
                            f"'{labels.name}'")
        lr, xr = labels.shape.ndims, logits.shape.ndims
        if xr == 0:
            raise ValueError(f"Logits cannot be scalars - received shape {logits.shape}.")
        if lr is not None and xr is not None:
            if lr != xr - 1:
                raise ValueError(f"Rank mismatch: Rank of labels (received {lr}) should equal rank of logits "
                                 f"minus 1 (received {xr}).")
            if not labels.shape.is_compatible_with(logits.shape[:-1]):
                raise ValueError(f"Shape mismatch: The shape of labels (received {labels.shape}) should equal "
                                 f"the shape of logits except for the last dimension (received {logits.shape}).")
        if xr == 2:
            loss, _ = SparseSoftmaxCrossEntropyWithLogits(logits, labels, name=scope)
            return loss
        flat_labels = array_ops.reshape(labels, [-1])
        loss, _ = SparseSoftmaxCrossEntropyWithLogits(_flatten_outer_dims(logits), flat_labels)
        out = array_ops.Reshape(loss, array_ops.shape(labels), name=scope)
        out.set_shape(labels.shape)
        return out


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Element-wise logistic loss of `logits` against `labels` in [0, 1]
    (tf.nn.sigmoid_cross_entropy_with_logits).

    Computed as max(x, 0) - x * z + log(1 + exp(-|x|)), which neither overflows nor loses
    precision for large |x|.
    """
    if _sentinel is not None:
        raise ValueError("sigmoid_cross_entropy_with_logits takes only keyword arguments labels= and logits=")
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits needs both labels= and logits=")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        x = convert_to_tensor(logits)
        z = convert_to_tensor(labels, dtype=x.dtype) if not isinstance(labels, Tensor) else labels
        if z.dtype is not x.dtype:
            raise TypeError(f"labels ({z.dtype.name}) must have the dtype of logits ({x.dtype.name})")
        if not x.shape.is_compatible_with(z.shape):
            raise ValueError(f"logits and labels must have the same shape ({x.shape} vs {z.shape})")
        zeros = array_ops.zeros_like(x)
        cond = math_ops.greater_equal(x, zeros)
        # Selects (rather than relu/abs) keep the gradient exact at x == 0, as in TF.
        relu_logits = math_ops.where_v2(cond, x, zeros)
        neg_abs_logits = math_ops.where_v2(cond, math_ops.negative(x), x)
        return math_ops.add(math_ops.subtract(relu_logits, math_ops.multiply(x, z)),
                            math_ops.log1p(math_ops.exp(neg_abs_logits)), name=scope)


# ---------------------------------------------------------------------------------------------
# Bias
# ---------------------------------------------------------------------------------------------

def _channel_axis(attrs, rank):
    fmt = attrs.get("data_format", "NHWC")
    if fmt == "NHWC":
        return rank - 1 if rank is not None else -1
    if fmt == "NCHW":
        return 1
    raise InferenceError(f"data_format must be 'NHWC' or 'NCHW', got {fmt!r}")


def _infer_bias_add(inputs, attrs):
    value, bias = inputs
    _check_same_dtype(value, bias, "value", "bias")
    if not value.dtype.is_numeric:
        raise InferenceError(f"value must be numeric, got {value.dtype.name}")
    vs = _with_rank_at_least(value.shape, 2, "value")
    bs = _with_rank(bias.shape, 1, "bias")
    if vs.dims is None:
        return [(value.dtype, vs)]
    c = _channel_axis(attrs, len(vs.dims))
    if vs[c] is not None and bs[0] is not None and vs[c] != bs[0]:
        raise InferenceError(f"Dimensions must be equal: bias has {bs[0]} elements but value has {vs[c]} "
                             f"channels (axis {c} of shape {vs}, data_format {attrs.get('data_format', 'NHWC')})")
    dims = list(vs.dims)
    dims[c] = dims[c] if dims[c] is not None else bs[0]
    return [(value.dtype, TensorShape(dims))]


def _infer_bias_add_grad(inputs, attrs):
    (g,) = inputs
    gs = _with_rank_at_least(g.shape, 2, "out_backprop")
    if gs.dims is None:
        return [(g.dtype, TensorShape([None]))]
    return [(g.dtype, TensorShape([gs[_channel_axis(attrs, len(gs.dims))]]))]


BiasAdd = define_op("BiasAdd", _infer_bias_add)
BiasAddGrad = define_op("BiasAddGrad", _infer_bias_add_grad)


@BiasAdd.gradient
def _bias_add_grad(op, grad):
    if not op.inputs[0].dtype.is_floating:
        return [None, None]
    return [grad, BiasAddGrad(grad, data_format=op.attrs.get("data_format", "NHWC"))]


def _data_format(data_format, what):
    if data_format is None or data_format in ("NHWC", "N...C"):
        return "NHWC"
    if data_format in ("NCHW", "NC..."):
        return "NCHW"
    raise ValueError(f"{what}: data_format must be 'NHWC' or 'NCHW', got {data_format!r}")


def bias_add(value, bias, data_format=None, name=None):
    """Adds the 1-D `bias` along the channel axis of `value` (tf.nn.bias_add; op BiasAdd).

    The channel axis is the last (NHWC, the default) or axis 1 (NCHW).
    """
    with name_scope(name, "BiasAdd", [value, bias]) as scope:
        value = convert_to_tensor(value)
        bias = convert_to_tensor(bias, dtype=value.dtype) if not isinstance(bias, Tensor) else bias
        return BiasAdd(value, bias, data_format=_data_format(data_format, "bias_add"), name=scope)


def xw_plus_b(x, weights, biases, name=None):
    """matmul(x, weights) + biases (tf.compat.v1.nn.xw_plus_b)."""
    with name_scope(name, "xw_plus_b", [x, weights, biases]) as scope:
        x = convert_to_tensor(x)
        mm = math_ops.matmul(x, weights)
        return bias_add(mm, biases, name=scope)


# ---------------------------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------------------------

def conv_inferences(output_shape, rank: int = 4):
    """The shape inference of a convolution, of its input gradient and of its filter gradient, from
    `output_shape(input_shape, filter_shape, attrs)` (Conv2D's, DepthwiseConv2dNative's; Conv3D's with
    rank 5)."""
    def forward(inputs, attrs):
        x, f = inputs
        _check_float(x, "input")
        _check_same_dtype(x, f, "input", "filter")
        return [(x.dtype, output_shape(x.shape, f.shape, attrs))]

    def backprop_input(inputs, attrs):
        sizes, f, dy = inputs
        _check_float(f, "filter")
        _check_same_dtype(f, dy, "filter", "out_backprop")
        in_shape = _sizes_input(sizes, "input_sizes", rank)
        want = output_shape(in_shape, f.shape, attrs)
        _check_compatible(want, dy.shape, f"out_backprop shape {dy.shape} does not match the forward output shape "
                                          f"{want} of an input of shape {in_shape}")
        return [(f.dtype, in_shape)]

    def backprop_filter(inputs, attrs):
        x, sizes, dy = inputs
        _check_float(x, "input")
        _check_same_dtype(x, dy, "input", "out_backprop")
        f_shape = _sizes_input(sizes, "filter_sizes", rank)
        want = output_shape(x.shape, f_shape, attrs)
        _check_compatible(want, dy.shape, f"out_backprop shape {dy.shape} does not match the forward output shape "
                                          f"{want} of input {x.shape} and filter {f_shape}")
        return [(x.dtype, f_shape)]
    return forward, backprop_input, backprop_filter


_infer_conv2d, _infer_conv2d_backprop_input, _infer_conv2d_backprop_filter = conv_inferences(_conv_output_shape)


Conv2D = define_op("Conv2D", _infer_conv2d)
Conv2DBackpropInput = define_op("Conv2DBackpropInput", _infer_conv2d_backprop_input)
Conv2DBackpropFilter = define_op("Conv2DBackpropFilter", _infer_conv2d_backprop_filter)


def _conv_attrs(op) -> dict:
    return {k: op.attrs[k] for k in ("strides", "padding", "data_format", "dilations") if k in op.attrs}


def conv_gradients(forward, backprop_input, backprop_filter) -> None:
    """Registers TF's gradients of a convolution (Conv2D, DepthwiseConv2dNative) and of its two
    gradient ops: each is linear in its operands, so each one's gradient is made of the other two."""
    @forward.gradient
    def _forward_grad(op, grad):
        x, f = op.inputs
        attrs = _conv_attrs(op)
        return [backprop_input(array_ops.shape(x), f, grad, **attrs),
                backprop_filter(x, array_ops.shape(f), grad, **attrs)]

    @backprop_input.gradient
    def _backprop_input_grad(op, grad):
        _, f, dy = op.inputs
        attrs = _conv_attrs(op)
        return [None, backprop_filter(grad, array_ops.shape(f), dy, **attrs), forward(grad, f, **attrs)]

    @backprop_filter.gradient
    def _backprop_filter_grad(op, grad):
        x, _, dy = op.inputs
        attrs = _conv_attrs(op)
        return [backprop_input(array_ops.shape(x), grad, dy, **attrs), None, forward(x, grad, **attrs)]


conv_gradients(Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter)


def _window_arg(v, name, data_format, fn) -> tuple:
    """An int, [h, w] or 4-element strides/ksize/dilations argument as a 4-tuple (TF's
    _get_sequence)."""
    if v is None:
        return (1, 1, 1, 1)
    if isinstance(v, (numbers.Integral, np.integer)):
        v = [int(v)] * 2
    v = [int(x) for x in v]
    if len(v) == 1:
        v = v * 2
    if len(v) == 2:
        return (1, v[0], v[1], 1) if data_format == "NHWC" else (1, 1, v[0], v[1])
    if len(v) == 4:
        return tuple(v)
    raise ValueError(f"{fn}: {name} should be of length 1, 2 or 4, got {len(v)}: {v}")


def _padding_arg(padding, fn) -> str:
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        return padding.upper()
    raise ValueError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r} (explicit paddings are "
                     f"not supported)")


def conv2d(input, filters=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002  (TF's name)
           data_format="NHWC", dilations=None, name=None, filter=None):  # noqa: A002
    """2-D convolution (cross-correlation) of NHWC `input` with an HWIO filter
    (tf.compat.v1.nn.conv2d; op Conv2D).

    `strides` and `dilations` are an int, [h, w] or the full 4-element list; `padding` is 'SAME'
    or 'VALID'. The filter is `filters` (v2 name, positional) or `filter` (v1 keyword).
    `use_cudnn_on_gpu` is accepted and ignored.
    """
    if (filters is None) == (filter is None):
        raise ValueError("conv2d needs exactly one of filters and filter")
    f = filters if filters is not None else filter
    if strides is None:
        raise ValueError("conv2d needs strides")
    data_format = _data_format(data_format, "conv2d")
    with name_scope(name, "Conv2D", [input, f]) as scope:
        x = convert_to_tensor(input)
        f = convert_to_tensor(f, dtype=x.dtype) if not isinstance(f, Tensor) else f
        return Conv2D(x, f, strides=_window_arg(strides, "strides", data_format, "conv2d"),
                      padding=_padding_arg(padding, "conv2d"), data_format=data_format,
                      dilations=_window_arg(dilations, "dilations", data_format, "conv2d"), name=scope)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None, padding=None,  # noqa: A002
                          use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1), name=None,
                          filters=None):
    """The gradient of conv2d with respect to its input, of shape `input_sizes`
    (tf.compat.v1.nn.conv2d_backprop_input; op Conv2DBackpropInput)."""
    f = filters if filters is not None else filter
    data_format = _data_format(data_format, "conv2d_backprop_input")
    with name_scope(name, "conv2d_backprop_input", [input_sizes, f, out_backprop]) as scope:
        dy = convert_to_tensor(out_backprop)
        f = convert_to_tensor(f, dtype=dy.dtype)
        sizes = convert_to_tensor(input_sizes, dtype=dtypes.int32)
        return Conv2DBackpropInput(sizes, f, dy, strides=_window_arg(strides, "strides", data_format, "conv2d"),
                                   padding=_padding_arg(padding, "conv2d_backprop_input"), data_format=data_format,
                                   dilations=_window_arg(dilations, "dilations", data_format, "conv2d"), name=scope)


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None, padding="SAME",  # noqa: A002
                     data_format="NHWC", name=None, input=None, filters=None, dilations=None):  # noqa: A002
    """The transpose of conv2d ("deconvolution"): `value` [batch, h, w, in_channels] and a filter
    [h, w, out_channels, in_channels] give an output of `output_shape` (tf.compat.v1.nn.conv2d_transpose;
    op Conv2DBackpropInput, the gradient of conv2d with respect to its input, as in TF)."""
    value = value if value is not None else input
    f = filter if filter is not None else filters
    if value is None or f is None or output_shape is None or strides is None:
        raise ValueError("conv2d_transpose needs value, filter, output_shape and strides")
    data_format = _data_format(data_format, "conv2d_transpose")
    with name_scope(name, "conv2d_transpose", [value, f, output_shape]) as scope:
        value = convert_to_tensor(value)
        f = convert_to_tensor(f, dtype=value.dtype)
        axis = 3 if data_format == "NHWC" else 1
        if f.shape.ndims == 4 and value.shape.ndims == 4 and None not in (f.shape[3], value.shape[axis]) \
                and f.shape[3] != value.shape[axis]:
            raise ValueError(f"input channels does not match filter's input channels, {value.shape[axis]} != "
                             f"{f.shape[3]}")
        sizes = output_shape if isinstance(output_shape, Tensor) else \
            array_ops.stack([convert_to_tensor(d, dtype=dtypes.int32) for d in output_shape])
        sizes = math_ops.cast(sizes, dtypes.int32) if sizes.dtype != dtypes.int32 else sizes
        if sizes.shape.dims is not None and sizes.shape.dims != (4,):
            raise ValueError(f"output_shape must have shape (4,), got {sizes.shape}")
        return Conv2DBackpropInput(sizes, f, value, strides=_window_arg(strides, "strides", data_format,
                                                                         "conv2d_transpose"),
                                   padding=_padding_arg(padding, "conv2d_transpose"), data_format=data_format,
                                   dilations=_window_arg(dilations, "dilations", data_format, "conv2d_transpose"),
                                   name=scope)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------

def _infer_pool(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_numeric:
        raise InferenceError(f"input must be numeric, got {x.dtype.name}")
    return [(x.dtype, _pool_output_shape(x.shape, attrs))]


def _infer_avg_pool(inputs, attrs):
    _check_float(inputs[0], "value")
    return _infer_pool(inputs, attrs)


def _infer_max_pool_grad(inputs, attrs):
    orig_in, orig_out, grad = inputs
    _check_same_dtype(orig_in, grad, "orig_input", "grad")
    _check_same_dtype(orig_out, grad, "orig_output", "grad")
    want = _pool_output_shape(orig_in.shape, attrs)
    for t, what in ((orig_out, "orig_output"), (grad, "grad")):
        _check_compatible(want, t.shape, f"{what} shape {t.shape} does not match the pooled shape {want} "
                                         f"of orig_input {orig_in.shape}")
    return [(orig_in.dtype, _with_rank(orig_in.shape, 4, "orig_input"))]


def _infer_avg_pool_grad(inputs, attrs):
    sizes, grad = inputs
    _check_float(grad, "grad")
    in_shape = _sizes_input(sizes, "orig_input_shape")
    want = _pool_output_shape(in_shape, attrs)
    _check_compatible(want, grad.shape, f"grad shape {grad.shape} does not match the pooled shape {want} "
                                        f"of an input of shape {in_shape}")
    return [(grad.dtype, in_shape)]


MaxPool = define_op("MaxPool", _infer_pool)
MaxPoolGrad = define_op("MaxPoolGrad", _infer_max_pool_grad)
AvgPool = define_op("AvgPool", _infer_avg_pool)
AvgPoolGrad = define_op("AvgPoolGrad", _infer_avg_pool_grad)


def _pool_attrs(op) -> dict:
    return {k: op.attrs[k] for k in ("ksize", "strides", "padding", "data_format") if k in op.attrs}


@MaxPool.gradient
def _max_pool_grad(op, grad):
    if not op.inputs[0].dtype.is_floating:
        return [None]
    return [MaxPoolGrad(op.inputs[0], op.outputs[0], grad, **_pool_attrs(op))]


@AvgPool.gradient
def _avg_pool_grad(op, grad):
    return [AvgPoolGrad(array_ops.shape(op.inputs[0]), grad, **_pool_attrs(op))]


def _pool(op_def, fn, input, ksize, strides, padding, data_format, name, default_name):  # noqa: A002
    data_format = _data_format(data_format, fn)
    with name_scope(name, default_name, [input]) as scope:
        x = convert_to_tensor(input)
        return op_def(x, ksize=_window_arg(ksize, "ksize", data_format, fn),
                      strides=_window_arg(strides, "strides", data_format, fn),
                      padding=_padding_arg(padding, fn), data_format=data_format, name=scope)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """Maximum over `ksize` windows of an NHWC image (tf.nn.max_pool2d; op MaxPool).

    `ksize` and `strides` are an int, [h, w] or 4 elements; `padding` is 'SAME' or 'VALID'
    (SAME windows ignore the padding).
    """
    return _pool(MaxPool, "max_pool2d", input, ksize, strides, padding, data_format, name, "MaxPool2d")


def max_pool(value=None, ksize=None, strides=None, padding=None, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """tf.compat.v1.nn.max_pool: `max_pool2d` with TF 1.x's argument names (`value` or `input`)."""
    if (value is None) == (input is None):
        raise ValueError("max_pool needs exactly one of value and input")
    return _pool(MaxPool, "max_pool", value if value is not None else input, ksize, strides, padding,
                 data_format, name, "MaxPool")


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """Mean over `ksize` windows of an NHWC image (tf.nn.avg_pool2d; op AvgPool).

    With SAME padding, border windows average only the elements inside the image, as in TF.
    """
    return _pool(AvgPool, "avg_pool2d", input, ksize, strides, padding, data_format, name, "AvgPool2D")


def avg_pool(value=None, ksize=None, strides=None, padding=None, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """tf.compat.v1.nn.avg_pool: `avg_pool2d` with TF 1.x's argument names (`value` or `input`)."""
    if (value is None) == (input is None):
        raise ValueError("avg_pool needs exactly one of value and input")
    return _pool(AvgPool, "avg_pool", value if value is not None else input, ksize, strides, padding,
                 data_format, name, "AvgPool")


# ---------------------------------------------------------------------------------------------
# Composite functions: dropout, normalization, losses, embeddings
# ---------------------------------------------------------------------------------------------

def _noise_shape(x: Tensor, noise_shape):
    if noise_shape is None:
        return array_ops.shape(x)
    if isinstance(noise_shape, Tensor):
        return noise_shape
    dims = list(noise_shape)
    if x.shape.dims is not None and len(dims) == len(x.shape.dims):
        dims = [x.shape.dims[i] if d is None else d for i, d in enumerate(dims)]
    if any(d is None for d in dims):
        raise ValueError(f"dropout: cannot infer the unknown dimensions of noise_shape {noise_shape} from "
                         f"x of shape {x.shape}")
    return dims


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element of `x` with probability `keep_prob`, scaled by 1 / keep_prob, and zeroes
    the rest (tf.compat.v1.nn.dropout).

    Give exactly one of `keep_prob` (TF 1.x) and `rate` (= 1 - keep_prob, TF 2). Either may be a
    tensor (a placeholder is the usual TF 1.x way to switch dropout off at test time). `noise_shape`
    broadcasts one keep/drop decision over dimensions of size 1. With `seed` (or a graph seed,
    see `set_random_seed`) the mask is reproducible.
    """
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout needs exactly one of keep_prob and rate")
    with name_scope(name, "dropout", [x]) as scope:
        x = convert_to_tensor(x)
        if not x.dtype.is_floating:
            raise ValueError(f"dropout: x must be a floating-point tensor, got {x.dtype.name} tensor '{x.name}'")
        # TF 2.21's dropout_v2, which TF 1.x's dropout calls with rate = 1. - keep_prob: a number rate
        # scales by 1 / (1 - rate) (a double, rounded once), a tensor rate divides by 1 - rate; the
        # mask keeps uniform >= rate, and dropped elements are zeros (a select, so -0.0 and NaN
        # inputs drop to 0 as in TF).
        if keep_prob is not None:
            if isinstance(keep_prob, numbers.Real):
                if not 0 < keep_prob <= 1:
                    raise ValueError(f"keep_prob must be a scalar tensor or a float in the range (0, 1], "
                                     f"got {keep_prob}")
                rate = 1.0 - keep_prob
            else:
                keep_t = convert_to_tensor(keep_prob, name="keep_prob")
                rate = math_ops.subtract(constant(1.0, dtype=keep_t.dtype), keep_t)
        if isinstance(rate, numbers.Real):
            if not 0 <= rate < 1:
                raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), got {rate}")
            if rate == 0:
                return x
            out = math_ops.multiply(x, constant(1 / (1 - rate), dtype=x.dtype))
            rate_t = rate
        else:
            rate_t = convert_to_tensor(rate, name="rate")
            if rate_t.shape.ndims not in (None, 0):
                raise ValueError(f"keep_prob/rate must be a scalar, got shape {rate_t.shape}")
            if rate_t.dtype is not x.dtype:
                rate_t = math_ops.cast(rate_t, x.dtype, name="rate")
            out = math_ops.realdiv(x, math_ops.subtract(constant(1, dtype=x.dtype), rate_t))
        uniform = random_ops.random_uniform(_noise_shape(x, noise_shape), seed=seed, dtype=x.dtype)
        keep_mask = math_ops.greater_equal(uniform, rate_t)
        out = math_ops.where_v2(keep_mask, out, constant(0, dtype=x.dtype), name=scope)
        out.set_shape(x.shape)
        return out


def _axes_list(axes, rank, fn):
    if isinstance(axes, Tensor):
        return axes
    axes = [axes] if isinstance(axes, (numbers.Integral, np.integer)) else [int(a) for a in axes]
    if rank is not None:
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"{fn}: axis {a} is out of range for a tensor of rank {rank}")
    return axes


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """Mean and variance of `x` over `axes` (tf.compat.v1.nn.moments).

    The variance is mean((x - stop_gradient(mean))**2), as in TF (the gradient through the mean
    is zero anyway). float16 inputs are computed in float32. `shift` is accepted and unused,
    as in TF. Returns (mean, variance), with reduced axes kept as size 1 when `keepdims`.
    """
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name, "moments", [x, axes]):
        x = convert_to_tensor(x)
        y = math_ops.cast(x, dtypes.float32) if x.dtype is dtypes.float16 else x
        axes = _axes_list(axes, y.shape.ndims, "moments")
        mean = math_ops.reduce_mean(y, axes, keepdims=True, name="mean")
        variance = math_ops.reduce_mean(math_ops.squared_difference(y, stop_gradient(mean)), axes,
                                        keepdims=True, name="variance")
        if not keep:
            if isinstance(axes, Tensor):
                raise TypeError("moments: axes must be a list of ints unless keepdims=True (the reduced axes "
                                "are squeezed away, which needs them at graph-build time)")
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        if x.dtype is dtypes.float16:
            return math_ops.cast(mean, dtypes.float16), math_ops.cast(variance, dtypes.float16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) * scale / sqrt(variance + epsilon) + offset (tf.nn.batch_normalization).

    `offset` and `scale` may be None. All arguments broadcast against `x`; the arithmetic is
    arranged as x * inv + (offset - mean * inv), as in TF, so it fuses into two element-wise ops.
    """
    with name_scope(name, "batchnorm", [x, mean, variance, scale, offset]) as scope:
        x = convert_to_tensor(x)

        def t(v):
            return convert_to_tensor(v, dtype=x.dtype) if not isinstance(v, Tensor) else v
        mean, variance = t(mean), t(variance)
        inv = math_ops.rsqrt(math_ops.add(variance, variance_epsilon))
        if scale is not None:
            inv = math_ops.multiply(inv, t(scale))
        shift = math_ops.negative(math_ops.multiply(mean, inv)) if offset is None \
            else math_ops.subtract(t(offset), math_ops.multiply(mean, inv))
        return math_ops.add(math_ops.multiply(x, math_ops.cast(inv, x.dtype)), math_ops.cast(shift, x.dtype),
                            name=scope)


def _infer_l2_loss(inputs, attrs):
    (t,) = inputs
    if not t.dtype.is_floating:
        raise InferenceError(f"l2_loss expects a floating-point tensor, got {t.dtype.name}")
    return [(t.dtype, TensorShape([]))]


# One op, as TF's: the profiler counts its FLOPs as TF does (3n - 1), and a GraphDef names it L2Loss.
L2Loss = define_op("L2Loss", _infer_l2_loss)


@L2Loss.gradient
def _l2_loss_grad(op, grad):
    return [math_ops.multiply(op.inputs[0], grad)]


def l2_loss(t, name=None):
    """sum(t ** 2) / 2 (tf.nn.l2_loss; op L2Loss)."""
    t = convert_to_tensor(t)
    if not t.dtype.is_floating:
        raise TypeError(f"l2_loss expects a floating-point tensor, got {t.dtype.name} tensor '{t.name}'")
    return L2Loss(t, name=name or "L2Loss")


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x ** 2, axis), epsilon)) (tf.compat.v1.math.l2_normalize).

    `axis` None normalizes over all elements; `dim` is TF 1.x's deprecated alias.
    """
    axis = _pick_axis(axis, dim)
    with name_scope(name, "l2_normalize", [x]) as scope:
        x = convert_to_tensor(x)
        square_sum = math_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv_norm = math_ops.rsqrt(math_ops.maximum(square_sum, constant(epsilon, dtype=square_sum.dtype)))
        return math_ops.multiply(x, inv_norm, name=scope)


def in_top_k(predictions, targets, k, name=None):
    """Whether `targets[i]` is among the top `k` of `predictions[i]` (tf.compat.v1.nn.in_top_k).

    As in TF's InTopK kernel: ties straddling the k-th place all count as in the top k (the target
    is in when fewer than k classes score strictly higher), and a row with a non-finite prediction
    or an out-of-range target gives False. Composed of comparisons and reductions (no TopK op).
    """
    with name_scope(name, "in_top_k", [predictions, targets]) as scope:
        p = convert_to_tensor(predictions)
        if not p.dtype.is_floating:
            raise TypeError(f"in_top_k: predictions must be floating-point, got {p.dtype.name}")
        t = convert_to_tensor(targets)
        if t.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"in_top_k: targets must be int32 or int64, got {t.dtype.name}")
        if p.shape.ndims not in (None, 2) or t.shape.ndims not in (None, 1):
            raise ValueError(f"in_top_k needs predictions of rank 2 and targets of rank 1, got shapes "
                             f"{p.shape} and {t.shape}")
        num_classes = math_ops.cast(array_ops.gather(array_ops.shape(p), 1), t.dtype)
        classes = array_ops.range(constant(0, dtype=t.dtype), num_classes, constant(1, dtype=t.dtype))
        is_target = math_ops.equal(array_ops.expand_dims(classes, 0), array_ops.expand_dims(t, 1))
        zeros = array_ops.zeros_like(p)
        target_pred = math_ops.reduce_sum(math_ops.where_v2(is_target, p, zeros), 1, keepdims=True)
        higher = math_ops.reduce_sum(math_ops.cast(math_ops.greater(p, target_pred), dtypes.int32), 1)
        k_t = convert_to_tensor(k, dtype=dtypes.int32) if not isinstance(k, Tensor) \
            else math_ops.cast(k, dtypes.int32)
        in_range = math_ops.logical_and(math_ops.greater_equal(t, constant(0, dtype=t.dtype)),
                                        math_ops.less(t, num_classes))
        finite = math_ops.reduce_all(math_ops.is_finite(p), 1)
        return math_ops.logical_and(math_ops.logical_and(in_range, finite), math_ops.less(higher, k_t), name=scope)


def _clip_rows(x: Tensor, ids: Tensor, max_norm):
    """Scales each embedding of `x` (axes after those of `ids`) to an L2 norm of at most max_norm
    (TF's embedding_ops._clip, a clip_by_norm per embedding)."""
    if max_norm is None:
        return x
    ids_rank, x_rank = ids.shape.ndims, x.shape.ndims
    if ids_rank is None or x_rank is None:
        raise ValueError("embedding_lookup with max_norm needs ids and params of known rank")
    axes = list(range(ids_rank, x_rank))
    l2sum = math_ops.reduce_sum(math_ops.square(x), axes, keepdims=True)
    clip = constant(max_norm, dtype=x.dtype)
    positive = math_ops.greater(l2sum, constant(0, dtype=x.dtype))
    # sqrt of a zero sum would have an infinite gradient; the selected branch never uses it.
    l2norm = math_ops.where_v2(positive, math_ops.sqrt(math_ops.where_v2(positive, l2sum, array_ops.ones_like(l2sum))),
                               l2sum)
    return math_ops.truediv(math_ops.multiply(x, clip), math_ops.maximum(l2norm, clip))


def _as_param_list(params) -> list:
    """Shards as Tensors or Variables (kept as such: colocation follows the variable)."""
    if hasattr(params, "_get_variable_list"):     # a PartitionedVariable
        params = list(params._get_variable_list())
    elif not isinstance(params, (list, tuple)):
        params = [params]
    if not params:
        raise ValueError("embedding_lookup needs a non-empty list of params")
    return [p if isinstance(p, Tensor) or hasattr(p, "_as_graph_element") else convert_to_tensor(p, name="params")
            for p in params]


def _shape_of(p):
    return p.get_shape() if hasattr(p, "get_shape") else convert_to_tensor(p).shape


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None):
    """Rows `ids` of `params`, a tensor, a Variable or a list of shards of one (tf.nn.embedding_lookup).

    A single tensor is a gather on axis 0. A list of P shards is a table split by rows:
    "mod" puts id i in shard i % P at row i // P; "div" gives each shard a contiguous range,
    the first (N % P) shards one row more than the others (N = total rows). The ids are split
    with DynamicPartition, each shard is gathered on its own device (colocated with it, so only
    the rows travel), and DynamicStitch puts the rows back in the order of `ids`. Out-of-range
    ids are a run-time error of the gather. `validate_indices` is accepted and ignored, as in TF.
    """
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy!r} (expected 'mod' or 'div')")
    plist = _as_param_list(params)
    with name_scope(name, "embedding_lookup", plist + [ids]) as scope:
        n_shards = len(plist)
        ids = convert_to_tensor(ids)
        if ids.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"embedding_lookup: ids must be int32 or int64, got {ids.dtype.name} tensor '{ids.name}'")
        if n_shards == 1:
            with colocate_with(plist[0]):
                out = array_ops.GatherV2(plist[0], ids, constant(0, dtype=dtypes.int32), batch_dims=0,
                                         name=scope if max_norm is None else None)
            return out if max_norm is None else _clip_rows(out, ids, max_norm)
        flat_ids = array_ops.reshape(ids, [-1])
        original_indices = array_ops.range(constant(0, dtype=dtypes.int32), array_ops.size(flat_ids),
                                           constant(1, dtype=dtypes.int32))
        P = constant(n_shards, dtype=ids.dtype)
        if partition_strategy == "mod":
            assignments = math_ops.floormod(flat_ids, P)
            new_ids = math_ops.floordiv(flat_ids, P)
        else:
            sizes = [_shape_of(p)[0] for p in plist]
            if all(s is not None for s in sizes):
                total = constant(sum(sizes), dtype=ids.dtype)
            else:
                parts = []
                for p, s in zip(plist, sizes):
                    if s is not None:
                        parts.append(constant(s, dtype=ids.dtype))
                    else:
                        with colocate_with(p):
                            parts.append(math_ops.cast(array_ops.gather(array_ops.shape(p), 0), ids.dtype))
                total = math_ops.add_n(parts)
            per_shard = math_ops.floordiv(total, P)
            extras = math_ops.floormod(total, P)
            one = constant(1, dtype=ids.dtype)
            # The first `extras` shards hold per_shard + 1 ids, the others per_shard: an id's shard
            # is whichever of the two formulas is larger.
            assignments = math_ops.maximum(math_ops.floordiv(flat_ids, math_ops.add(per_shard, one)),
                                           math_ops.floordiv(math_ops.subtract(flat_ids, extras), per_shard))
            new_ids = math_ops.where_v2(math_ops.less(assignments, extras),
                                        math_ops.floormod(flat_ids, math_ops.add(per_shard, one)),
                                        math_ops.floormod(math_ops.subtract(flat_ids, extras), per_shard))
        assignments = math_ops.cast(assignments, dtypes.int32)
        gather_ids = array_ops.dynamic_partition(new_ids, assignments, n_shards)
        positions = array_ops.dynamic_partition(original_indices, assignments, n_shards)
        rows = []
        for p, pids in zip(plist, gather_ids):
            with colocate_with(p):
                rows.append(array_ops.gather(p, pids))
        stitched = array_ops.dynamic_stitch(list(positions), rows)
        element = _shape_of(plist[0])[1:]
        for p in plist[1:]:
            element = element.merge_with(_shape_of(p)[1:])
        if element.is_fully_defined():
            element_t = constant(element.as_list(), dtype=dtypes.int32)
        else:
            with colocate_with(plist[0]):
                element_t = array_ops.slice(array_ops.shape(plist[0]), [1], [-1])
        ret = array_ops.Reshape(stitched, array_ops.concat([array_ops.shape(ids), element_t], 0),
                                name=scope if max_norm is None else None)
        ret.set_shape(ids.shape.concatenate(element))
        return ret if max_norm is None else _clip_rows(ret, ids, max_norm)
