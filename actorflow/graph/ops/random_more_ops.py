"""Sampling ops with TF 1.x's seeds (graph/ops/random_ops.py get_seed): Multinomial
(tf.multinomial, tf.random.categorical), RandomShuffle (tf.random_shuffle, tf.random.shuffle),
RandomGamma (tf.random.gamma, with its implicit reparameterization gradient RandomGammaGrad) and RandomPoissonV2 (tf.random.poisson); and the stateless samplers
(tf.random.stateless_uniform / _normal / _truncated_normal / _categorical), whose values are a
function of their `seed` tensor alone: the same seed gives the same values in every run and
process (actorflow's own Philox stream, not TF's bits)."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._infer import _no_gradient, _static_int
from actorflow.graph.ops.math_ops import _binary
from actorflow.graph.ops.random_ops import _output_shape, _seed_attrs, _shape_tensor
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["multinomial", "categorical", "random_shuffle", "random_gamma", "random_poisson", "stateless_uniform",
           "stateless_normal", "stateless_truncated_normal", "stateless_categorical", "stateless_gamma",
           "stateless_poisson", "stateless_binomial", "stateless_parameterized_truncated_normal",
           "stateless_uniform_full_int", "split", "fold_in"]


def _infer_multinomial(inputs, attrs):
    logits, num_samples = inputs
    if not logits.dtype.is_floating:
        raise InferenceError(f"logits must be floating point, got {logits.dtype.name}")
    if logits.shape.ndims not in (None, 2):
        raise InferenceError(f"logits must be a matrix [batch_size, num_classes], got shape {logits.shape}")
    if num_samples.dtype is not dtypes.int32 or num_samples.shape.ndims not in (None, 0):
        raise InferenceError(f"num_samples must be an int32 scalar, got {num_samples.dtype.name} {num_samples.shape}")
    batch = logits.shape.dims[0] if logits.shape.dims is not None else None
    return [(dtypes.as_dtype(attrs.get("output_dtype", dtypes.int64)), TensorShape([batch, _static_int(num_samples)]))]


Multinomial = define_op("Multinomial", _infer_multinomial, stateful=True)
Multinomial.gradient(_no_gradient)
RandomShuffle = define_op("RandomShuffle", lambda inputs, attrs: [(inputs[0].dtype, inputs[0].shape)], stateful=True)
RandomShuffle.gradient(_no_gradient)


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """`num_samples` class indices drawn for each row of `logits` (unnormalized log-probabilities)
    (tf.compat.v1.multinomial)."""
    with name_scope(name or "multinomial"):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        out = dtypes.as_dtype(output_dtype) if output_dtype is not None else dtypes.int64
        if out not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"output_dtype must be int32 or int64, got {out.name}")
        return Multinomial(logits, n, output_dtype=out, **_seed_attrs(seed))


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """tf.random.categorical: `multinomial` with the output dtype named `dtype`."""
    return multinomial(logits, num_samples, seed=seed, name=name or "categorical", output_dtype=dtype)


def random_shuffle(value, seed=None, name=None):
    """`value` with its first dimension randomly permuted (tf.random_shuffle)."""
    with name_scope(name or "random_shuffle"):
        return RandomShuffle(convert_to_tensor(value, name="value"), **_seed_attrs(seed))


def _infer_param_sample(inputs, attrs):
    shape, param = inputs
    out = _output_shape(shape)
    dt = dtypes.as_dtype(attrs.get("dtype", param.dtype))
    dims = None if out.dims is None or param.shape.dims is None else list(out.dims) + list(param.shape.dims)
    return [(dt, TensorShape(dims))]


RandomGamma = define_op("RandomGamma", _infer_param_sample, stateful=True)
RandomPoissonV2 = define_op("RandomPoissonV2", _infer_param_sample, stateful=True)
RandomPoissonV2.gradient(_no_gradient)


# d sample / d alpha of a standard gamma sample, by implicit differentiation of its CDF:
# -(dP(alpha, x)/d alpha) / p(x; alpha) (TF's RandomGammaGrad; tf.distributions' Gamma, Beta, Dirichlet and
# StudentT are reparameterized through it).
RandomGammaGrad = define_op("RandomGammaGrad", _binary("float"))
RandomGammaGrad.gradient(_no_gradient)


@RandomGamma.gradient
def _random_gamma_grad(op, grad):
    """The implicit reparameterization gradient (TF's _RandomGammaGrad): alpha's gradient is the sum over
    the sample dimensions of grad * d sample / d alpha; the shape has none."""
    from actorflow.graph.ops import array_ops, math_ops
    shape, alpha = op.inputs
    sample = op.outputs[0]
    n = array_ops.shape(shape)[0]
    alpha_b = array_ops.reshape(alpha, array_ops.concat([array_ops.ones([n], dtypes.int32), array_ops.shape(alpha)], 0))
    partial = RandomGammaGrad(alpha_b, sample)
    return [None, math_ops.reduce_sum(grad * partial, axis=array_ops.range(n))]


def random_gamma_grad(alpha, sample, name=None):
    """d sample / d alpha for standard Gamma(alpha) samples `sample` (TF's `random_gamma_grad` op)."""
    with name_scope(name or "RandomGammaGrad"):
        a = convert_to_tensor(alpha, name="alpha")
        return RandomGammaGrad(a, convert_to_tensor(sample, dtype=a.dtype, name="sample"))


def random_gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """Gamma(alpha, beta) samples of shape `shape + alpha.shape` (tf.random.gamma); beta is the
    rate (inverse scale), 1 by default."""
    from actorflow.graph.ops import array_ops, math_ops
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name or "random_gamma"):
        a = convert_to_tensor(alpha, dtype=dtype, name="alpha")
        b = convert_to_tensor(1 if beta is None else beta, dtype=dtype, name="beta")
        # As TF: alpha broadcast against beta, then max(tiny, sample / beta) (which grappler and our
        # constant folding turn into a multiplication by 1 / beta for a constant beta).
        if a.shape.is_fully_defined() and b.shape.is_fully_defined():
            to = list(np.broadcast_shapes(tuple(a.shape.as_list()), tuple(b.shape.as_list())))
        else:
            to = array_ops.broadcast_dynamic_shape(array_ops.shape(a), array_ops.shape(b))
        a = array_ops.broadcast_to(a, to)
        sample = RandomGamma(_shape_tensor(shape), a, **_seed_attrs(seed))
        return math_ops.maximum(np.finfo(dtype.np).tiny, sample / b)


def random_poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """Poisson(lam) samples of shape `shape + lam.shape` (tf.random.poisson, TF 1.x's argument order)."""
    with name_scope(name or "random_poisson"):
        rate = convert_to_tensor(lam, name="lam")
        if not rate.dtype.is_floating and rate.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"lam must be a float or integer tensor, got {rate.dtype.name}")
        return RandomPoissonV2(_shape_tensor(shape), rate, dtype=dtypes.as_dtype(dtype), **_seed_attrs(seed))


def _infer_stateless(inputs, attrs):
    shape, seed = inputs[0], inputs[1]
    if seed.dtype not in (dtypes.int32, dtypes.int64) or seed.shape.ndims not in (None, 1) or (
            seed.shape.dims is not None and seed.shape.dims[0] not in (None, 2)):
        raise InferenceError(f"seed must be an int32/int64 vector of 2 elements, got {seed.dtype.name} {seed.shape}")
    return [(dtypes.as_dtype(attrs["dtype"]), _output_shape(shape))]


StatelessRandomUniform = define_op("StatelessRandomUniform", _infer_stateless)
StatelessRandomNormal = define_op("StatelessRandomNormal", _infer_stateless)
StatelessTruncatedNormal = define_op("StatelessTruncatedNormal", _infer_stateless)
for _d in (StatelessRandomUniform, StatelessRandomNormal, StatelessTruncatedNormal):
    _d.gradient(_no_gradient)


def _stateless(op_def, shape, seed, dtype, name):
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating-point type, got {dtype.name}")
    with name_scope(name):
        s = convert_to_tensor(seed, name="seed")
        if s.dtype not in (dtypes.int32, dtypes.int64):
            s = convert_to_tensor(seed, dtype=dtypes.int64, name="seed")
        return op_def(_shape_tensor(shape), s, dtype=dtype)


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=dtypes.float32, name=None):
    """Uniform samples in [minval, maxval), a function of `seed` ([2] ints) (tf.random.stateless_uniform)."""
    u = _stateless(StatelessRandomUniform, shape, seed, dtype, name or "stateless_random_uniform")
    maxval = 1 if maxval is None else maxval
    if minval == 0 and maxval == 1:
        return u
    lo = convert_to_tensor(minval, dtype=u.dtype)
    return u * (convert_to_tensor(maxval, dtype=u.dtype) - lo) + lo


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
    """N(mean, stddev**2) samples, a function of `seed` (tf.random.stateless_normal)."""
    z = _stateless(StatelessRandomNormal, shape, seed, dtype, name or "stateless_random_normal")
    return z * convert_to_tensor(stddev, dtype=z.dtype) + convert_to_tensor(mean, dtype=z.dtype)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
    """Truncated-normal samples (within two stddevs), a function of `seed`
    (tf.random.stateless_truncated_normal)."""
    z = _stateless(StatelessTruncatedNormal, shape, seed, dtype, name or "stateless_truncated_normal")
    return z * convert_to_tensor(stddev, dtype=z.dtype) + convert_to_tensor(mean, dtype=z.dtype)


def _infer_stateless_multinomial(inputs, attrs):
    logits, num_samples, seed = inputs
    return _infer_multinomial([logits, num_samples], attrs)


StatelessMultinomial = define_op("StatelessMultinomial", _infer_stateless_multinomial)
StatelessMultinomial.gradient(_no_gradient)


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None):
    """Class indices drawn from each row of `logits`, a function of `seed`
    (tf.random.stateless_categorical)."""
    with name_scope(name or "stateless_categorical"):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        s = convert_to_tensor(seed, name="seed")
        return StatelessMultinomial(logits, n, s, output_dtype=dtypes.as_dtype(dtype))


# -- more stateless samplers: parameters broadcast against the full output `shape` -------------------
# As the samplers above, their values are a function of `seed` alone (actorflow's Philox stream, not
# TF's bits: the distributions match TF's, the numbers do not). No gradients (TF's stateless_gamma
# has one with respect to alpha; here it is not differentiable).

def _infer_stateless_params(inputs, attrs):
    _infer_stateless(inputs[:2], {"dtype": attrs.get("dtype", inputs[2].dtype)})
    dtype = dtypes.as_dtype(attrs["dtype"]) if "dtype" in attrs else inputs[2].dtype
    return [(dtype, _output_shape(inputs[0]))]


StatelessRandomGammaV2 = define_op("StatelessRandomGammaV2", _infer_stateless_params)
StatelessRandomPoisson = define_op("StatelessRandomPoisson", _infer_stateless_params)
StatelessRandomBinomial = define_op("StatelessRandomBinomial", _infer_stateless_params)
StatelessParameterizedTruncatedNormal = define_op("StatelessParameterizedTruncatedNormal", _infer_stateless_params)
StatelessRandomUniformFullInt = define_op("StatelessRandomUniformFullInt", _infer_stateless)
for _d in (StatelessRandomGammaV2, StatelessRandomPoisson, StatelessRandomBinomial,
           StatelessParameterizedTruncatedNormal, StatelessRandomUniformFullInt):
    _d.gradient(_no_gradient)


def _seed(seed):
    s = convert_to_tensor(seed, name="seed")
    if s.dtype not in (dtypes.int32, dtypes.int64):
        s = convert_to_tensor(seed, dtype=dtypes.int64, name="seed")
    return s


def stateless_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32, name=None):
    """Gamma(alpha, beta) samples of shape `shape` (alpha and beta broadcast to it), a function of
    `seed` (tf.random.stateless_gamma); beta is the inverse scale (rate)."""
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"stateless_gamma: dtype must be a floating-point type, got {dtype.name}")
    with name_scope(name or "stateless_random_gamma"):
        a = convert_to_tensor(alpha, dtype=dtype, name="alpha")
        sample = StatelessRandomGammaV2(_shape_tensor(shape), _seed(seed), a)
        return sample if beta is None else sample / convert_to_tensor(beta, dtype=dtype, name="beta")


def stateless_poisson(shape, seed, lam, dtype=dtypes.int32, name=None):
    """Poisson(lam) samples of shape `shape` (lam broadcast to it), a function of `seed`
    (tf.random.stateless_poisson)."""
    with name_scope(name or "stateless_random_poisson"):
        rate = convert_to_tensor(lam, name="lam")
        if not rate.dtype.is_floating:
            rate = convert_to_tensor(lam, dtype=dtypes.float32, name="lam")
        return StatelessRandomPoisson(_shape_tensor(shape), _seed(seed), rate, dtype=dtypes.as_dtype(dtype))


def stateless_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32, name=None):
    """Binomial(counts, probs) samples of shape `shape` (counts and probs broadcast to it), a function
    of `seed` (tf.random.stateless_binomial)."""
    with name_scope(name or "stateless_random_binomial"):
        p = convert_to_tensor(probs, name="probs")
        if not p.dtype.is_floating:
            p = convert_to_tensor(probs, dtype=dtypes.float32, name="probs")
        n = convert_to_tensor(counts, dtype=p.dtype, name="counts")
        return StatelessRandomBinomial(_shape_tensor(shape), _seed(seed), n, p, dtype=dtypes.as_dtype(output_dtype))


def stateless_parameterized_truncated_normal(shape, seed, means=0.0, stddevs=1.0, minvals=-2.0, maxvals=2.0,
                                             name=None):
    """Normal(means, stddevs) samples truncated to [minvals, maxvals], each parameter broadcast to
    `shape`, a function of `seed` (tf.random.stateless_parameterized_truncated_normal)."""
    with name_scope(name or "stateless_parameterized_truncated_normal"):
        m = convert_to_tensor(means, name="means")
        if not m.dtype.is_floating:
            m = convert_to_tensor(means, dtype=dtypes.float32, name="means")
        args = [convert_to_tensor(x, dtype=m.dtype) for x in (stddevs, minvals, maxvals)]
        return StatelessParameterizedTruncatedNormal(_shape_tensor(shape), _seed(seed), m, *args)


def stateless_uniform_full_int(shape, seed, dtype=dtypes.int64, name=None):
    """Integers uniform over `dtype`'s whole range, a function of `seed` (tf.random.stateless_uniform
    with minval=maxval=None and an integer dtype)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in (dtypes.int32, dtypes.int64):
        raise ValueError(f"full-range stateless ints need int32 or int64, got {dtype.name}")
    with name_scope(name or "stateless_random_uniform"):
        return StatelessRandomUniformFullInt(_shape_tensor(shape), _seed(seed), dtype=dtype)


def split(seed, num=2, alg="auto_select", name=None):
    """`num` new seeds, an int tensor [num, 2], derived from `seed` (tf.random.split)."""
    with name_scope(name or "split"):
        s = _seed(seed)
        return stateless_uniform_full_int([num, 2], s, dtype=s.dtype)


def fold_in(seed, data, alg="auto_select", name=None):
    """A new seed [2] from `seed` and the integer `data`: [an int drawn from seed, data]
    (tf.random.fold_in)."""
    from actorflow.graph.ops import array_ops
    with name_scope(name or "fold_in"):
        s = _seed(seed)
        d = convert_to_tensor(data, dtype=s.dtype, name="data")
        first = stateless_uniform_full_int([], s, dtype=s.dtype)
        return array_ops.stack([first, d])
