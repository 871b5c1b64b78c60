"""The Dirichlet distribution (tf.distributions.Dirichlet), with its KL divergence."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import convert_params, owner, where_defined, with_dependencies
from actorflow.graph.graph import name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_more_ops, special_math_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["Dirichlet"]


class ConcentrationShapes:
    """The concentration, its total, and the shapes of a distribution over the simplex's last axis
    (Dirichlet, DirichletMultinomial): batch shape that of the total, event shape [k]."""

    @property
    def concentration(self):
        return self._concentration

    @property
    def total_concentration(self):
        """The sum of the concentrations over the event axis."""
        return self._total_concentration

    def _batch_shape_tensor(self):
        return array_ops.shape(self.total_concentration)

    def _batch_shape(self):
        return self.total_concentration.shape

    def _event_shape_tensor(self):
        return array_ops.shape(self.concentration)[-1:]

    def _event_shape(self):
        s = self.concentration.shape
        return TensorShape(None if s.ndims is None else s.dims[-1:])


class Dirichlet(ConcentrationShapes, distribution.Distribution):
    """Dirichlet distributions over the (k-1)-simplex with `concentration` [..., k]
    (tf.distributions.Dirichlet): event shape [k], batch shape the rest. Samples normalize k gamma
    draws, FULLY_REPARAMETERIZED through the gamma sampler's implicit gradient. The mode is undefined
    unless every concentration exceeds 1. validate_args asserts positive concentrations and k >= 2, and
    that values passed to log_prob are positive and sum to 1."""

    def __init__(self, concentration, validate_args=False, allow_nan_stats=True, name="Dirichlet"):
        parameters = dict(locals())
        with name_scope(name) as name:
            c = convert_params({"concentration": concentration}, owner(name))["concentration"]
            if c.shape.ndims == 0:
                raise ValueError(f"{owner(name)}: concentration must have rank at least 1, got a scalar")
            self._concentration = self._maybe_assert_valid_concentration(
                identity(c, name="concentration"), validate_args, owner(name))
            self._total_concentration = math_ops.reduce_sum(self._concentration, -1)
        super().__init__(dtype=self._concentration.dtype, validate_args=validate_args,
                         allow_nan_stats=allow_nan_stats, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         parameters=parameters, graph_parents=[self._concentration, self._total_concentration],
                         name=name)

    def _sample_n(self, n, seed=None):
        gamma_sample = random_more_ops.random_gamma(shape=[n], alpha=self.concentration, dtype=self.dtype, seed=seed)
        return gamma_sample / math_ops.reduce_sum(gamma_sample, -1, keepdims=True)

    def _log_prob(self, x):
        return self._log_unnormalized_prob(x) - self._log_normalization()

    def _prob(self, x):
        return math_ops.exp(self._log_prob(x))

    def _log_unnormalized_prob(self, x):
        x = self._maybe_assert_valid_sample(x)
        return math_ops.reduce_sum(special_math_ops.xlogy(self.concentration - 1.0, x), -1)

    def _log_normalization(self):
        return special_math_ops.lbeta(self.concentration)

    def _entropy(self):
        k = math_ops.cast(self.event_shape_tensor()[0], self.dtype)
        return (self._log_normalization()
                + (self.total_concentration - k) * math_ops.digamma(self.total_concentration)
                - math_ops.reduce_sum((self.concentration - 1.0) * math_ops.digamma(self.concentration), axis=-1))

    def _mean(self):
        return self.concentration / self.total_concentration[..., array_ops.newaxis]

    def _covariance(self):
        x = self._variance_scale_term() * self._mean()
        return array_ops.matrix_set_diag(
            -math_ops.matmul(x[..., array_ops.newaxis], x[..., array_ops.newaxis, :]), self._variance())

    def _variance(self):
        scale = self._variance_scale_term()
        x = scale * self._mean()
        return x * (scale - x)

    def _variance_scale_term(self):
        return math_ops.rsqrt(1.0 + self.total_concentration[..., array_ops.newaxis])

    def _mode(self):
        k = math_ops.cast(self.event_shape_tensor()[0], self.dtype)
        mode = (self.concentration - 1.0) / (self.total_concentration[..., array_ops.newaxis] - k)
        if self.allow_nan_stats:
            defined = math_ops.reduce_all(self.concentration > 1.0, axis=-1, keepdims=True)
            return where_defined(defined, mode)
        return with_dependencies([check_ops.assert_less(
            array_ops.ones([], self.dtype), self.concentration,
            message=f"{owner(self.name)}: Mode undefined when any concentration <= 1")], mode)

    @staticmethod
    def _maybe_assert_valid_concentration(concentration, validate_args, owner_name):
        if not validate_args:
            return concentration
        return with_dependencies([
            check_ops.assert_positive(concentration,
                                      message=f"{owner_name}: Concentration parameter must be positive"),
            check_ops.assert_rank_at_least(concentration, 1,
                                           message=f"{owner_name}: Concentration parameter must have >=1 dimensions"),
            check_ops.assert_less(1, array_ops.shape(concentration)[-1],
                                  message=f"{owner_name}: Concentration parameter must have event_size >= 2")],
            concentration)

    def _maybe_assert_valid_sample(self, x):
        if not self.validate_args:
            return x
        return with_dependencies([
            check_ops.assert_positive(x, message=f"{owner(self.name)}: samples must be positive"),
            check_ops.assert_near(array_ops.ones([], dtype=self.dtype), math_ops.reduce_sum(x, -1),
                                  message=f"{owner(self.name)}: sample last-dimension must sum to `1`")], x)


@RegisterKL(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(d1, d2, name=None):
    """KL(Dir(a) || Dir(b)) = sum (a - b)(digamma(a) - digamma(sum a)) - lbeta(a) + lbeta(b)."""
    with name_scope(name or "kl_dirichlet_dirichlet"):
        digamma_sum_d1 = math_ops.digamma(math_ops.reduce_sum(d1.concentration, axis=-1, keepdims=True))
        digamma_diff = math_ops.digamma(d1.concentration) - digamma_sum_d1
        concentration_diff = d1.concentration - d2.concentration
        return (math_ops.reduce_sum(concentration_diff * digamma_diff, axis=-1)
                - special_math_ops.lbeta(d1.concentration) + special_math_ops.lbeta(d2.concentration))
