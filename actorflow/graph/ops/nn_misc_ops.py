"""The rest of TF 1.x's tf.nn: selu, softsign, swish/silu, crelu, relu_layer, the weighted and
Poisson losses, zero_fraction, the moment helpers (sufficient_statistics, normalize_moments,
weighted_moments), fused_batch_norm and batch_norm_with_global_normalization.

Op types defined here: Selu, SeluGrad, Softsign, SoftsignGrad (TF's raw ops; CPU kernels in
kernels/cpu/nn_misc.py). Everything else is composed of existing ops with TF's formulas, so its
values and gradients are TF's. fused_batch_norm in particular is composed rather than a
FusedBatchNormV3 op: y differentiates through the batch statistics exactly as TF's
FusedBatchNormGrad does, and its mean and variance outputs carry no gradient (TF's gradient reads
only the gradient of y).
"""
from __future__ import annotations

import numbers

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import constant, identity, stop_gradient

__all__ = [
    "selu", "softsign", "swish", "silu", "crelu", "relu_layer", "weighted_cross_entropy_with_logits",
    "log_poisson_loss", "zero_fraction", "sufficient_statistics", "normalize_moments", "weighted_moments",
    "fused_batch_norm", "batch_norm_with_global_normalization",
]

# SELU's constants, as in TF's kernel (Klambauer et al. 2017).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# ---------------------------------------------------------------------------------------------
# Op types
# ---------------------------------------------------------------------------------------------

def _infer_unary_float(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_floating:
        raise InferenceError(f"features must have a floating-point dtype, got {x.dtype.name}")
    return [(x.dtype, x.shape)]


def _infer_grad_pair(names):
    def infer(inputs, attrs):
        a, b = inputs
        if a.dtype is not b.dtype:
            raise InferenceError(f"{names[0]} ({a.dtype.name}) and {names[1]} ({b.dtype.name}) must have the same "
                                 f"dtype")
        if not a.dtype.is_floating:
            raise InferenceError(f"{names[0]} must have a floating-point dtype, got {a.dtype.name}")
        if not a.shape.is_compatible_with(b.shape):
            raise InferenceError(f"{names[0]} and {names[1]} must have the same shape, got {a.shape} and {b.shape}")
        return [(a.dtype, a.shape.merge_with(b.shape))]
    return infer


Selu = define_op("Selu", _infer_unary_float)
SeluGrad = define_op("SeluGrad", _infer_grad_pair(("gradients", "outputs")))
Softsign = define_op("Softsign", _infer_unary_float)
SoftsignGrad = define_op("SoftsignGrad", _infer_grad_pair(("gradients", "features")))


@Selu.gradient
def _selu_grad(op, grad):
    return [SeluGrad(grad, op.outputs[0])]


@SeluGrad.gradient
def _selu_grad_grad(op, grad):
    # As TF's _SeluGradGrad: d/d(gradients) is SeluGrad again; d/d(outputs) is grad * gradients
    # where outputs < 0 (the outputs + scale * alpha factor), else 0.
    gradients, outputs = op.inputs
    zeros = array_ops.zeros_like(gradients)
    neg = math_ops.less(outputs, constant(0, dtype=outputs.dtype))
    return [SeluGrad(grad, outputs), math_ops.where_v2(neg, math_ops.multiply(grad, gradients), zeros)]


@Softsign.gradient
def _softsign_grad(op, grad):
    return [SoftsignGrad(grad, op.inputs[0])]


# ---------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------

def selu(features, name=None):
    """scale * (x if x > 0 else alpha * (exp(x) - 1)) (tf.nn.selu; op Selu, gradient SeluGrad)."""
    return Selu(convert_to_tensor(features), name=name)


def softsign(features, name=None):
    """features / (abs(features) + 1) (tf.nn.softsign; op Softsign, gradient SoftsignGrad)."""
    return Softsign(convert_to_tensor(features), name=name)


def swish(features, beta=1.0, name=None):
    """features * sigmoid(beta * features) (tf.nn.swish / tf.nn.silu), composed of Mul and Sigmoid;
    TF's custom gradient is the same derivative. TF's swish has no `name` argument; here it is
    optional."""
    with name_scope(name, "swish", [features]) as scope:
        x = convert_to_tensor(features)
        if isinstance(beta, numbers.Real) and beta == 1.0:
            z = x
        else:
            # TF converts a Python beta to a float32 tensor first, then casts it to x's dtype.
            b = beta if isinstance(beta, Tensor) else convert_to_tensor(beta, dtype=dtypes.float32)
            z = math_ops.multiply(math_ops.cast(b, x.dtype), x)
        return math_ops.multiply(x, math_ops.sigmoid(z), name=scope)


def silu(features, beta=1.0, name=None):
    """features * sigmoid(beta * features) (tf.nn.silu); the same function as swish."""
    return swish(features, beta=beta, name=name)


def crelu(features, name=None, axis=-1):
    """relu(concat([features, -features], axis)) (tf.nn.crelu): twice as many channels on `axis`."""
    with name_scope(name, "CRelu", [features]) as scope:
        x = convert_to_tensor(features)
        c = array_ops.concat([x, math_ops.negative(x)], axis, name="concat")
        return nn_ops.relu(c, name=scope)


def relu_layer(x, weights, biases, name=None):
    """relu(x @ weights + biases) (tf.nn.relu_layer): MatMul, BiasAdd, Relu."""
    with name_scope(name, "relu_layer", [x, weights, biases]) as scope:
        x = convert_to_tensor(x)
        weights = convert_to_tensor(weights, dtype=x.dtype) if not isinstance(weights, Tensor) else weights
        biases = convert_to_tensor(biases, dtype=x.dtype) if not isinstance(biases, Tensor) else biases
        return nn_ops.relu(nn_ops.bias_add(math_ops.matmul(x, weights), biases), name=scope)


# ---------------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------------

def _like(v, x: Tensor, what: str) -> Tensor:
    t = convert_to_tensor(v, dtype=x.dtype) if not isinstance(v, Tensor) else v
    if t.dtype is not x.dtype:
        raise TypeError(f"{what} ({t.dtype.name}) must have the dtype of the logits ({x.dtype.name})")
    return t


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None, name=None, targets=None):
    """Sigmoid cross-entropy with positive examples weighted by `pos_weight`
    (tf.compat.v1.nn.weighted_cross_entropy_with_logits; `targets` is the old name of `labels`).

    TF's stable form: (1 - z) * x + (1 + (q - 1) * z) * (log1p(exp(-|x|)) + relu(-x)).
    """
    if labels is not None and targets is not None:
        raise ValueError("Cannot specify both 'labels' and 'targets'")
    labels = targets if labels is None else labels
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs labels (or targets), logits and pos_weight")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        x = convert_to_tensor(logits)
        z = _like(labels, x, "labels")
        if not x.shape.is_compatible_with(z.shape):
            raise ValueError(f"logits and labels must have the same shape ({x.shape} vs {z.shape})")
        q = _like(pos_weight, x, "pos_weight")
        one = constant(1, dtype=x.dtype)
        log_weight = math_ops.add(one, math_ops.multiply(math_ops.subtract(q, one), z))
        soft = math_ops.add(math_ops.log1p(math_ops.exp(math_ops.negative(math_ops.abs(x)))),
                            nn_ops.relu(math_ops.negative(x)))
        return math_ops.add(math_ops.multiply(math_ops.subtract(one, z), x), math_ops.multiply(log_weight, soft),
                            name=scope)


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """exp(log_input) - log_input * targets (tf.nn.log_poisson_loss); with `compute_full_loss`, plus
    Stirling's approximation of log(targets!) where targets > 1 (TF's formula)."""
    with name_scope(name, "log_poisson_loss", [log_input, targets]) as scope:
        log_input = convert_to_tensor(log_input, name="log_input")
        targets = _like(targets, log_input, "targets")
        if not log_input.shape.is_compatible_with(targets.shape):
            raise ValueError(f"log_input and targets must have the same shape ({log_input.shape} vs {targets.shape})")
        result = math_ops.subtract(math_ops.exp(log_input), math_ops.multiply(log_input, targets))
        if not compute_full_loss:
            return identity(result, name=scope)
        dt = targets.dtype
        point_five = constant(0.5, dtype=dt)
        two_pi = constant(2 * 3.1415926535897932384626433832795, dtype=dt)
        stirling = math_ops.add(
            math_ops.subtract(math_ops.multiply(targets, math_ops.log(targets)), targets),
            math_ops.multiply(point_five, math_ops.log(math_ops.multiply(two_pi, targets))))
        zeros = array_ops.zeros_like(targets)
        ones = array_ops.ones_like(targets)
        cond = math_ops.logical_and(math_ops.greater_equal(targets, zeros), math_ops.less_equal(targets, ones))
        return math_ops.add(result, math_ops.where_v2(cond, zeros, stirling), name=scope)


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def zero_fraction(value, name=None):
    """The fraction of zeros in `value`, a float32 scalar (tf.math.zero_fraction / tf.nn.zero_fraction).

    Counted in int64 (TF counts in int32 below 2**31 elements, the same number) and divided in
    float32, as in TF; no gradient.
    """
    with name_scope(name, "zero_fraction", [value]):
        value = convert_to_tensor(value, name="value")
        size = array_ops.size(value, out_type=dtypes.int64)
        zero = array_ops.zeros([], dtype=value.dtype)
        num_zero = math_ops.reduce_sum(math_ops.cast(math_ops.equal(value, zero), dtypes.int64))
        with name_scope("counts_to_fraction"):
            frac = math_ops.divide(math_ops.cast(num_zero, dtypes.float32), math_ops.cast(size, dtypes.float32))
        return identity(frac, name="fraction")


def _keep(keep_dims, keepdims, fn):
    if keep_dims is not None and keepdims is not None:
        raise ValueError(f"{fn}: cannot specify both 'keep_dims' and 'keepdims'")
    return bool(keepdims if keepdims is not None else keep_dims)


def _int_axes(axes, rank, fn):
    axes = [axes] if isinstance(axes, numbers.Integral) else [int(a) for a in axes]
    if rank is not None:
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"{fn}: axis {a} is out of range for a tensor of rank {rank}")
    return axes


def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """(count, sum(x - shift), sum((x - shift)**2), shift) over `axes`
    (tf.compat.v1.nn.sufficient_statistics); without a shift, sum(x) and sum(x**2). The count is a
    constant of x's dtype when the reduced dimensions are static, else computed from shape(x)."""
    keep = _keep(keep_dims, keepdims, "sufficient_statistics")
    with name_scope(name, "sufficient_statistics", [x, shift]):
        x = convert_to_tensor(x, name="x")
        rank = x.shape.ndims
        axes = _int_axes(axes, rank, "sufficient_statistics")
        if rank is not None and all(x.shape[d] is not None for d in axes):
            n = 1
            for d in axes:
                n *= x.shape[d]
            counts = constant(n, dtype=x.dtype)
        else:
            r = array_ops.rank(x)
            positive = [math_ops.add(a, r) if a < 0 else a for a in axes] if rank is None else [a % rank for a in axes]
            positive = array_ops.stack([convert_to_tensor(a, dtype=dtypes.int32) for a in positive])
            dims = array_ops.gather(math_ops.cast(array_ops.shape(x), x.dtype), positive)
            counts = math_ops.reduce_prod(dims, name="count")
        if shift is not None:
            shift = _like(shift, x, "shift")
            m_ss = math_ops.subtract(x, shift)
            v_ss = math_ops.squared_difference(x, shift)
        else:
            m_ss = x
            v_ss = math_ops.square(x)
        m_ss = math_ops.reduce_sum(m_ss, axes, keepdims=keep, name="mean_ss")
        v_ss = math_ops.reduce_sum(v_ss, axes, keepdims=keep, name="var_ss")
    return counts, m_ss, v_ss, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """(mean, variance) from sufficient statistics (tf.nn.normalize_moments):
    mean = mean_ss / counts + shift, variance = variance_ss / counts - (mean_ss / counts)**2."""
    with name_scope(name, "normalize", [counts, mean_ss, variance_ss, shift]):
        divisor = math_ops.reciprocal(convert_to_tensor(counts), name="divisor")
        if shift is not None:
            shifted_mean = math_ops.multiply(mean_ss, divisor, name="shifted_mean")
            mean = math_ops.add(shifted_mean, shift, name="mean")
        else:
            shifted_mean = math_ops.multiply(mean_ss, divisor, name="mean")
            mean = shifted_mean
        variance = math_ops.subtract(math_ops.multiply(variance_ss, divisor), math_ops.square(shifted_mean),
                                     name="variance")
    return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """Frequency-weighted mean and variance over `axes` (tf.compat.v1.nn.weighted_moments), TF's
    two-pass formula; zero total weight gives 0 (div_no_nan). float16 is computed in float32."""
    keep = _keep(keep_dims, keepdims, "weighted_moments")
    with name_scope(name, "weighted_moments", [x, frequency_weights, axes]):
        x = convert_to_tensor(x, name="x")
        w = convert_to_tensor(frequency_weights, name="frequency_weights")
        needs_cast = x.dtype is dtypes.float16
        if needs_cast:
            x = math_ops.cast(x, dtypes.float32)
        if w.dtype is not x.dtype:
            w = math_ops.cast(w, x.dtype)
        axes = _int_axes(axes, x.shape.ndims, "weighted_moments")
        wsum = math_ops.reduce_sum(math_ops.multiply(w, x), axes, keepdims=True, name="weighted_input_sum")
        bw = math_ops.add(w, array_ops.zeros_like(x))
        sum_w = math_ops.reduce_sum(bw, axes, keepdims=True, name="sum_of_weights")
        mean = math_ops.div_no_nan(wsum, sum_w)
        distsq = math_ops.reduce_sum(math_ops.multiply(w, math_ops.squared_difference(x, mean)), axes,
                                     keepdims=True, name="weighted_distsq")
        variance = math_ops.div_no_nan(distsq, sum_w)
        if not keep:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        if needs_cast:
            mean = math_ops.cast(mean, dtypes.float16)
            variance = math_ops.cast(variance, dtypes.float16)
        return mean, variance


# ---------------------------------------------------------------------------------------------
# Batch normalization
# ---------------------------------------------------------------------------------------------

_FUSED_FORMATS = {"NHWC": -1, "NCHW": 1, "NDHWC": -1, "NCDHW": 1}


def fused_batch_moments(x, axes):
    """The batch mean and biased variance of `x` over `axes` (a list of ints; reduced axes removed)
    as TF's FusedBatchNorm kernel takes them when training, differentiable to every order as that
    kernel is: TF differentiates FusedBatchNormGrad through the exact batch-norm gradient
    (_BatchNormGrad), so a second derivative (a gradient penalty through a batch norm, WGAN-GP and
    DRAGAN) sees the mean's dependence on x inside the variance. nn.moments stops the gradient at
    that mean, which leaves first derivatives alone but drops a term from second ones; here the
    variance is mean((x - mean)**2) with the mean differentiated."""
    with name_scope(None, "moments", [x]):
        mean = math_ops.reduce_mean(x, axes, keepdims=True, name="mean")
        variance = math_ops.reduce_mean(math_ops.squared_difference(x, mean), axes, keepdims=True,
                                        name="variance")
        return array_ops.squeeze(mean, axes), array_ops.squeeze(variance, axes)


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001, data_format="NHWC",
                     is_training=True, name=None, exponential_avg_factor=1.0):
    """Batch normalization of a 4-D (5-D for NDHWC/NCDHW) input over all axes but the channel's
    (tf.compat.v1.nn.fused_batch_norm). Returns (y, batch_mean, batch_variance).

    Training: y uses the batch mean and the biased batch variance; the returned variance is the
    unbiased one (n / (n - 1)), as TF's FusedBatchNorm returns it, and with an
    `exponential_avg_factor` f != 1 both statistics are mixed with `mean`/`variance`:
    (1 - f) * old + f * batch. Inference: y uses `mean` and `variance`, which are returned as
    given. epsilon is used as given, as TF 2's compat.v1 does (TF 1.x raised it to at least
    1.001e-5, cuDNN's floor). float16 inputs are
    computed in float32 (scale, offset and the statistics are float32). Composed of element-wise
    ops and reductions; only y carries gradients (to x, scale and offset; in inference also not to
    mean and variance), as TF's FusedBatchNormGrad, and second derivatives are TF's too
    (fused_batch_moments).
    """
    if data_format not in _FUSED_FORMATS:
        raise ValueError(f"fused_batch_norm: data_format must be one of {sorted(_FUSED_FORMATS)}, got {data_format!r}")
    with name_scope(name, "FusedBatchNormV3", [x, scale, offset]) as scope:
        x = convert_to_tensor(x, name="input")
        if not x.dtype.is_floating:
            raise TypeError(f"fused_batch_norm expects a floating-point input, got {x.dtype.name} tensor '{x.name}'")
        rank = 5 if data_format.startswith("NCD") or data_format.startswith("NDH") else 4
        if x.shape.ndims is not None and x.shape.ndims != rank:
            raise ValueError(f"fused_batch_norm: input must be {rank}-dimensional for data_format {data_format}, got "
                             f"shape {x.shape} ('{x.name}')")
        pdt = dtypes.float32 if x.dtype is dtypes.float16 else x.dtype

        def param(v, what):
            t = convert_to_tensor(v, dtype=pdt, name=what) if not isinstance(v, Tensor) else v
            if t.dtype is not pdt:
                raise TypeError(f"fused_batch_norm: {what} must be {pdt.name}, got {t.dtype.name} tensor '{t.name}'")
            if t.shape.ndims not in (None, 1):
                raise ValueError(f"fused_batch_norm: {what} must be a vector, got shape {t.shape} ('{t.name}')")
            return t
        scale, offset = param(scale, "scale"), param(offset, "offset")
        c_axis = _FUSED_FORMATS[data_format] % rank
        bshape = [1] * rank
        bshape[c_axis] = -1

        def bcast(v):
            return v if c_axis == rank - 1 else array_ops.reshape(v, bshape)
        xc = math_ops.cast(x, pdt) if pdt is not x.dtype else x
        eps = float(epsilon)
        if is_training:
            axes = [i for i in range(rank) if i != c_axis]
            bmean, bvar = fused_batch_moments(xc, axes)
            y = nn_ops.batch_normalization(xc, bcast(bmean), bcast(bvar), bcast(offset), bcast(scale), eps)
            # n, the elements per channel, as x's size over the channels' count (exact in floats).
            nf = math_ops.divide(math_ops.cast(array_ops.size(xc, out_type=dtypes.int64), pdt),
                                 math_ops.cast(array_ops.size(bmean, out_type=dtypes.int64), pdt))
            one = constant(1, dtype=pdt)
            # n == 1 has no unbiased estimate: the factor is then 1.
            factor = math_ops.where_v2(math_ops.greater(nf, one),
                                       math_ops.divide(nf, math_ops.maximum(math_ops.subtract(nf, one), one)), one)
            out_mean = stop_gradient(bmean)
            out_var = stop_gradient(math_ops.multiply(bvar, factor))
            f = float(exponential_avg_factor)
            if f != 1.0:
                if mean is None or variance is None:
                    raise ValueError("fused_batch_norm: exponential_avg_factor != 1 needs the running mean and variance")
                old_m, old_v = param(mean, "mean"), param(variance, "variance")
                ff = constant(f, dtype=pdt)
                keep = constant(1.0 - f, dtype=pdt)
                out_mean = stop_gradient(math_ops.add(math_ops.multiply(keep, old_m), math_ops.multiply(ff, out_mean)))
                out_var = stop_gradient(math_ops.add(math_ops.multiply(keep, old_v), math_ops.multiply(ff, out_var)))
        else:
            if mean is None or variance is None:
                raise ValueError("fused_batch_norm: inference (is_training=False) needs mean and variance")
            out_mean = stop_gradient(param(mean, "mean"))
            out_var = stop_gradient(param(variance, "variance"))
            y = nn_ops.batch_normalization(xc, bcast(out_mean), bcast(out_var), bcast(offset), bcast(scale), eps)
        if pdt is not x.dtype:
            y = math_ops.cast(y, x.dtype)
        y = identity(y, name=scope)
        return y, out_mean, out_var


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None, variance_epsilon=None,
                                         scale_after_normalization=None, name=None, input=None,  # noqa: A002
                                         mean=None, variance=None):
    """(t - m) / sqrt(v + epsilon) * gamma + beta (tf.compat.v1.nn.batch_norm_with_global_normalization);
    `gamma` applies only with `scale_after_normalization`. `input`, `mean`, `variance` are the new
    names of `t`, `m`, `v`. Composed with batch_normalization, as TF does."""
    def pick(new, old, nn, on):
        if new is not None and old is not None:
            raise ValueError(f"Cannot specify both '{nn}' and '{on}'")
        return new if new is not None else old
    t, m, v = pick(input, t, "input", "t"), pick(mean, m, "mean", "m"), pick(variance, v, "variance", "v")
    if variance_epsilon is None or scale_after_normalization is None:
        raise ValueError("batch_norm_with_global_normalization needs variance_epsilon and scale_after_normalization")
    return nn_ops.batch_normalization(t, m, v, beta, gamma if scale_after_normalization else None,
                                      variance_epsilon, name)
