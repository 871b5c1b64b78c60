"""The Beta distribution (tf.distributions.Beta), with its KL divergence."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import convert_params, gen_new_seed, owner, where_defined, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_more_ops, special_math_ops
from actorflow.graph.ops.constant import identity

__all__ = ["Beta"]


class Beta(distribution.ScalarDistribution):
    """Beta distributions on (0, 1) with density x^(c1-1) (1-x)^(c0-1) / B(c1, c0)
    (tf.distributions.Beta). Samples are G1 / (G1 + G0) for gamma draws, FULLY_REPARAMETERIZED through
    the gamma sampler's implicit gradient. The mode is undefined unless both concentrations exceed 1.
    validate_args asserts positive concentrations, and 0 < x < 1 where a density is asked for."""

    def __init__(self, concentration1=None, concentration0=None, validate_args=False, allow_nan_stats=True,
                 name="Beta"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"concentration1": concentration1, "concentration0": concentration0}, owner(name))
            self._concentration1 = self._maybe_assert_valid_concentration(
                identity(p["concentration1"], name="concentration1"), validate_args, owner(name))
            self._concentration0 = self._maybe_assert_valid_concentration(
                identity(p["concentration0"], name="concentration0"), validate_args, owner(name))
            self._total_concentration = self._concentration1 + self._concentration0
        super().__init__(dtype=self._total_concentration.dtype, validate_args=validate_args,
                         allow_nan_stats=allow_nan_stats, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         parameters=parameters,
                         graph_parents=[self._concentration1, self._concentration0, self._total_concentration],
                         name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"concentration1": s, "concentration0": s}

    @property
    def concentration1(self):
        """The concentration of 1 outcomes (often called alpha)."""
        return self._concentration1

    @property
    def concentration0(self):
        """The concentration of 0 outcomes (often called beta)."""
        return self._concentration0

    @property
    def total_concentration(self):
        return self._total_concentration

    def _batch_shape_tensor(self):
        return array_ops.shape(self.total_concentration)

    def _batch_shape(self):
        return self.total_concentration.shape

    def _sample_n(self, n, seed=None):
        ones = array_ops.ones_like(self.total_concentration, dtype=self.dtype)
        gamma1 = random_more_ops.random_gamma(shape=[n], alpha=ones * self.concentration1, dtype=self.dtype,
                                              seed=seed)
        gamma2 = random_more_ops.random_gamma(shape=[n], alpha=ones * self.concentration0, dtype=self.dtype,
                                              seed=gen_new_seed(seed, "beta"))
        return gamma1 / (gamma1 + gamma2)

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _prob(self, x):
        return math_ops.exp(self._log_prob(x))

    def _log_cdf(self, x):
        return math_ops.log(self._cdf(x))

    def _cdf(self, x):
        ones = array_ops.ones_like(x) * array_ops.ones_like(self.total_concentration)
        return special_math_ops.betainc(self.concentration1 * ones, self.concentration0 * ones, x * ones)

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return special_math_ops.xlogy(self.concentration1 - 1.0, x) + (self.concentration0 - 1.0) * math_ops.log1p(-x)

    def _log_normalization(self):
        return (math_ops.lgamma(self.concentration1) + math_ops.lgamma(self.concentration0)
                - math_ops.lgamma(self.total_concentration))

    def _entropy(self):
        return (self._log_normalization()
                - (self.concentration1 - 1.0) * math_ops.digamma(self.concentration1)
                - (self.concentration0 - 1.0) * math_ops.digamma(self.concentration0)
                + (self.total_concentration - 2.0) * math_ops.digamma(self.total_concentration))

    def _mean(self):
        return self._concentration1 / self._total_concentration

    def _variance(self):
        return self._mean() * (1.0 - self._mean()) / (1.0 + self.total_concentration)

    def _mode(self):
        mode = (self.concentration1 - 1.0) / (self.total_concentration - 2.0)
        if self.allow_nan_stats:
            return where_defined(math_ops.logical_and(self.concentration1 > 1.0, self.concentration0 > 1.0), mode)
        one = array_ops.ones([], dtype=self.dtype)
        return with_dependencies([
            check_ops.assert_less(one, self.concentration1,
                                  message=f"{owner(self.name)}: Mode undefined for concentration1 <= 1"),
            check_ops.assert_less(one, self.concentration0,
                                  message=f"{owner(self.name)}: Mode undefined for concentration0 <= 1")], mode)

    @staticmethod
    def _maybe_assert_valid_concentration(concentration, validate_args, owner_name):
        if not validate_args:
            return concentration
        return with_dependencies([check_ops.assert_positive(
            concentration, message=f"{owner_name}: Concentration parameter must be positive")], concentration)

    def _maybe_assert_valid_sample(self, x):
        if not self.validate_args:
            return x
        return with_dependencies([
            check_ops.assert_positive(x, message=f"{owner(self.name)}: sample must be positive"),
            check_ops.assert_less(x, array_ops.ones([], self.dtype),
                                  message=f"{owner(self.name)}: sample must be less than `1`")], x)


@RegisterKL(Beta, Beta)
def _kl_beta_beta(d1, d2, name=None):
    """KL(Beta(a1, b1) || Beta(a2, b2)) from the log normalizers and digammas."""
    with name_scope(name or "kl_beta_beta"):
        return ((d2._log_normalization() - d1._log_normalization())
                - math_ops.digamma(d1.concentration1) * (d2.concentration1 - d1.concentration1)
                - math_ops.digamma(d1.concentration0) * (d2.concentration0 - d1.concentration0)
                + math_ops.digamma(d1.total_concentration) * (d2.total_concentration - d1.total_concentration))
