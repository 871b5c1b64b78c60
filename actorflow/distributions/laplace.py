"""The Laplace distribution (tf.distributions.Laplace)."""
from __future__ import annotations

import math

import numpy as np

from actorflow.distributions import distribution, special_math
from actorflow.distributions.parameters import convert_params, owner, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_ops
from actorflow.graph.ops.constant import identity

__all__ = ["Laplace"]


class Laplace(distribution.ScalarDistribution):
    """Laplace distributions with location `loc` and scale `scale` > 0: density exp(-|x - loc| / scale) /
    (2 scale) (tf.distributions.Laplace). Samples are loc - scale sign(u) log(1 - |u|) for u uniform on
    (-1, 1), so FULLY_REPARAMETERIZED. validate_args asserts scale > 0."""

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Laplace"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"loc": loc, "scale": scale}, owner(name))
            checks = [check_ops.assert_positive(p["scale"], message=f"{owner(name)}: scale must be positive")] \
                if validate_args else []
            self._loc = with_dependencies(checks, identity(p["loc"], name="loc"))
            self._scale = with_dependencies(checks, identity(p["scale"], name="scale"))
        super().__init__(dtype=self._loc.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._loc, self._scale], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"loc": s, "scale": s}

    @property
    def loc(self):
        return self._loc

    @property
    def scale(self):
        return self._scale

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(array_ops.shape(self.loc), array_ops.shape(self.scale))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(self.loc.shape, self.scale.shape)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], self.batch_shape_tensor()], 0)
        np_dtype = self.dtype.as_numpy_dtype
        # (-1, 1) open at -1, so that log1p(-|u|) stays finite
        u = random_ops.random_uniform(shape=shape, minval=np.nextafter(np_dtype(-1.0), np_dtype(0.0)), maxval=1.0,
                                      dtype=self.dtype, seed=seed)
        return self.loc - self.scale * math_ops.sign(u) * math_ops.log1p(-math_ops.abs(u))

    def _log_prob(self, x):
        return -math_ops.abs(self._z(x)) - (math.log(2.0) + math_ops.log(self.scale))

    def _prob(self, x):
        return math_ops.exp(self._log_prob(x))

    def _log_cdf(self, x):
        return special_math.log_cdf_laplace(self._z(x))

    def _log_survival_function(self, x):
        return special_math.log_cdf_laplace(-self._z(x))

    def _cdf(self, x):
        z = self._z(x)
        return 0.5 + 0.5 * math_ops.sign(z) * (1.0 - math_ops.exp(-math_ops.abs(z)))

    def _entropy(self):
        return math.log(2.0) + 1.0 + math_ops.log(self.scale + array_ops.zeros_like(self.loc))

    def _mean(self):
        return self.loc + array_ops.zeros_like(self.scale)

    def _stddev(self):
        return math.sqrt(2.0) * self.scale + array_ops.zeros_like(self.loc)

    def _mode(self):
        return self._mean()

    def _z(self, x):
        return (x - self.loc) / self.scale
