"""The continuous Uniform distribution (tf.distributions.Uniform)."""
from __future__ import annotations

import math

from actorflow.distributions import distribution
from actorflow.distributions.parameters import convert_params, owner, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_ops
from actorflow.graph.ops.constant import identity

__all__ = ["Uniform"]


class Uniform(distribution.ScalarDistribution):
    """Uniform distributions on [low, high) (tf.distributions.Uniform). Samples are low + (high - low) u,
    FULLY_REPARAMETERIZED. validate_args asserts low < high."""

    def __init__(self, low=0.0, high=1.0, validate_args=False, allow_nan_stats=True, name="Uniform"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"low": low, "high": high}, owner(name))
            checks = [check_ops.assert_less(p["low"], p["high"],
                                            message=f"{owner(name)}: uniform not defined when low >= high")] \
                if validate_args else []
            self._low = with_dependencies(checks, identity(p["low"], name="low"))
            self._high = with_dependencies(checks, identity(p["high"], name="high"))
        super().__init__(dtype=self._low.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._low, self._high], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"low": s, "high": s}

    @property
    def low(self):
        return self._low

    @property
    def high(self):
        return self._high

    def range(self, name="range"):
        """high - low."""
        with self._name_scope(name):
            return self.high - self.low

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(array_ops.shape(self.low), array_ops.shape(self.high))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(self.low.shape, self.high.shape)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], self.batch_shape_tensor()], 0)
        samples = random_ops.random_uniform(shape=shape, dtype=self.dtype, seed=seed)
        return self.low + self.range() * samples

    def _prob(self, x):
        bx = x * array_ops.ones(self.batch_shape_tensor(), dtype=x.dtype)
        inside = array_ops.ones_like(bx) / self.range()
        return math_ops.where_v2(math_ops.is_nan(bx), bx, math_ops.where_v2(
            math_ops.logical_or(bx < self.low, bx >= self.high), array_ops.zeros_like(bx), inside))

    def _cdf(self, x):
        shape = array_ops.broadcast_dynamic_shape(array_ops.shape(x), self.batch_shape_tensor())
        zeros = array_ops.zeros(shape, dtype=self.dtype)
        ones = array_ops.ones(shape, dtype=self.dtype)
        not_big = math_ops.where_v2(x < self.low, zeros, (x * ones - self.low) / self.range())
        return math_ops.where_v2(x >= self.high, ones, not_big)

    def _entropy(self):
        return math_ops.log(self.range())

    def _mean(self):
        return (self.low + self.high) / 2.0

    def _variance(self):
        return math_ops.square(self.range()) / 12.0

    def _stddev(self):
        return self.range() / math.sqrt(12.0)
