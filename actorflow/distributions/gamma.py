"""The Gamma distribution (tf.distributions.Gamma), with its KL divergence."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import convert_params, owner, where_defined, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_more_ops, special_math_ops
from actorflow.graph.ops.constant import identity

__all__ = ["Gamma"]


class Gamma(distribution.ScalarDistribution):
    """Gamma distributions with shape `concentration` and inverse scale `rate`: density
    x^(c-1) e^(-r x) r^c / Gamma(c) (tf.distributions.Gamma). Samples come from RandomGamma, whose
    implicit gradient makes them FULLY_REPARAMETERIZED. The mode is undefined for concentration <= 1.
    validate_args asserts concentration > 0 and rate > 0, and x > 0 where a density is asked for."""

    def __init__(self, concentration, rate, validate_args=False, allow_nan_stats=True, name="Gamma"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"concentration": concentration, "rate": rate}, owner(name))
            checks = [check_ops.assert_positive(p["concentration"],
                                                message=f"{owner(name)}: concentration must be positive"),
                      check_ops.assert_positive(p["rate"], message=f"{owner(name)}: rate must be positive")] \
                if validate_args else []
            self._concentration = with_dependencies(checks, identity(p["concentration"], name="concentration"))
            self._rate = with_dependencies(checks, identity(p["rate"], name="rate"))
        super().__init__(dtype=self._concentration.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._concentration, self._rate], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"concentration": s, "rate": s}

    @property
    def concentration(self):
        return self._concentration

    @property
    def rate(self):
        return self._rate

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(array_ops.shape(self.concentration), array_ops.shape(self.rate))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(self.concentration.shape, self.rate.shape)

    def _sample_n(self, n, seed=None):
        return random_more_ops.random_gamma(shape=[n], alpha=self.concentration, beta=self.rate, dtype=self.dtype,
                                            seed=seed)

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _cdf(self, x):
        x = self._maybe_assert_valid_sample(x)
        return special_math_ops.igamma(self.concentration, self.rate * x)

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return special_math_ops.xlogy(self.concentration - 1.0, x) - self.rate * x

    def _log_normalization(self):
        return math_ops.lgamma(self.concentration) - self.concentration * math_ops.log(self.rate)

    def _entropy(self):
        return (self.concentration - math_ops.log(self.rate) + math_ops.lgamma(self.concentration)
                + (1.0 - self.concentration) * math_ops.digamma(self.concentration))

    def _mean(self):
        return self.concentration / self.rate

    def _variance(self):
        return self.concentration / math_ops.square(self.rate)

    def _stddev(self):
        return math_ops.sqrt(self.concentration) / self.rate

    def _mode(self):
        mode = (self.concentration - 1.0) / self.rate
        if self.allow_nan_stats:
            return where_defined(self.concentration > 1.0, mode)
        return with_dependencies([check_ops.assert_less(
            array_ops.ones([], self.dtype), self.concentration,
            message=f"{owner(self.name)}: mode not defined when any concentration <= 1")], mode)

    def _maybe_assert_valid_sample(self, x):
        if x.dtype.base_dtype != self.dtype:
            raise TypeError(f"{owner(self.name)}: x has dtype {x.dtype.name}, expected {self.dtype.name}")
        if not self.validate_args:
            return x
        return with_dependencies([check_ops.assert_positive(x, message=f"{owner(self.name)}: x must be positive")], x)


@RegisterKL(Gamma, Gamma)
def _kl_gamma_gamma(g0, g1, name=None):
    """KL(Gamma(c0, r0) || Gamma(c1, r1)); also serves Exponential, a Gamma with concentration 1."""
    with name_scope(name or "kl_gamma_gamma"):
        return ((g0.concentration - g1.concentration) * math_ops.digamma(g0.concentration)
                + math_ops.lgamma(g1.concentration) - math_ops.lgamma(g0.concentration)
                + g1.concentration * math_ops.log(g0.rate) - g1.concentration * math_ops.log(g1.rate)
                + g0.concentration * (g1.rate / g0.rate - 1.0))


