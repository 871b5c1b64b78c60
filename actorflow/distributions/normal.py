"""The Normal (Gaussian) distribution (tf.distributions.Normal), with its KL divergence."""
from __future__ import annotations

import math

from actorflow.distributions import distribution, special_math
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import convert_params, owner, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.ops.special_math_ops import ndtri

__all__ = ["Normal"]


class Normal(distribution.ScalarDistribution):
    """Normal distributions with mean `loc` and standard deviation `scale`, broadcast against each other
    (tf.distributions.Normal). Samples are `loc + scale * eps`, so gradients flow to both
    (FULLY_REPARAMETERIZED). validate_args asserts scale > 0."""

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Normal"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"loc": loc, "scale": scale}, owner(name))
            checks = [check_ops.assert_positive(p["scale"], message=f"{owner(name)}: scale must be positive")] \
                if validate_args else []
            self._loc = with_dependencies(checks, identity(p["loc"], name="loc"))
            self._scale = with_dependencies(checks, identity(p["scale"], name="scale"))
        super().__init__(dtype=self._scale.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._loc, self._scale], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"loc": s, "scale": s}

    @property
    def loc(self):
        """The means."""
        return self._loc

    @property
    def scale(self):
        """The standard deviations."""
        return self._scale

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(array_ops.shape(self.loc), array_ops.shape(self.scale))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(self.loc.shape, self.scale.shape)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], self.batch_shape_tensor()], 0)
        sampled = random_ops.random_normal(shape=shape, mean=0.0, stddev=1.0, dtype=self.loc.dtype, seed=seed)
        return sampled * self.scale + self.loc

    def _log_prob(self, x):
        return -0.5 * math_ops.square(self._z(x)) - (0.5 * math.log(2.0 * math.pi) + math_ops.log(self.scale))

    def _log_cdf(self, x):
        return special_math.log_ndtr(self._z(x))

    def _cdf(self, x):
        return special_math.ndtr(self._z(x))

    def _log_survival_function(self, x):
        return special_math.log_ndtr(-self._z(x))

    def _survival_function(self, x):
        return special_math.ndtr(-self._z(x))

    def _entropy(self):
        scale = self.scale * array_ops.ones_like(self.loc)
        return 0.5 * math.log(2.0 * math.pi * math.e) + math_ops.log(scale)

    def _mean(self):
        return self.loc * array_ops.ones_like(self.scale)

    def _quantile(self, p):
        return ndtri(p) * self.scale + self.loc

    def _stddev(self):
        return self.scale * array_ops.ones_like(self.loc)

    def _mode(self):
        return self._mean()

    def _z(self, x):
        with name_scope("standardize"):
            return (x - self.loc) / self.scale


@RegisterKL(Normal, Normal)
def _kl_normal_normal(n_a, n_b, name=None):
    """KL(N(m_a, s_a) || N(m_b, s_b)) = (m_a - m_b)^2 / (2 s_b^2) + (r - 1 - log r) / 2, r = s_a^2 / s_b^2."""
    with name_scope(name or "kl_normal_normal"):
        s_a_squared = math_ops.square(n_a.scale)
        s_b_squared = math_ops.square(n_b.scale)
        ratio = s_a_squared / s_b_squared
        return (math_ops.squared_difference(n_a.loc, n_b.loc) / (2.0 * s_b_squared)
                + 0.5 * (ratio - 1.0 - math_ops.log(ratio)))
