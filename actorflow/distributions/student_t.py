"""Student's t distribution (tf.distributions.StudentT)."""
from __future__ import annotations

import numpy as np

from actorflow.distributions import distribution
from actorflow.distributions.parameters import convert_params, gen_new_seed, owner, where_defined, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, random_more_ops, random_ops, special_math_ops
from actorflow.graph.ops.constant import identity

__all__ = ["StudentT"]


class StudentT(distribution.ScalarDistribution):
    """Student's t distributions with `df` degrees of freedom, location `loc` and scale `scale`
    (tf.distributions.StudentT). Samples are loc + scale * N / sqrt(G / df), G ~ Gamma(df/2, 1/2):
    FULLY_REPARAMETERIZED (df through the gamma sampler's implicit gradient). The mean is undefined for
    df <= 1 and the variance for df <= 1 (infinite for 1 < df <= 2): NaN with allow_nan_stats, an
    InvalidArgumentError without. validate_args asserts df > 0."""

    def __init__(self, df, loc, scale, validate_args=False, allow_nan_stats=True, name="StudentT"):
        parameters = dict(locals())
        with name_scope(name) as name:
            p = convert_params({"df": df, "loc": loc, "scale": scale}, owner(name))
            checks = [check_ops.assert_positive(p["df"], message=f"{owner(name)}: df must be positive")] \
                if validate_args else []
            self._df = with_dependencies(checks, identity(p["df"], name="df"))
            self._loc = with_dependencies(checks, identity(p["loc"], name="loc"))
            self._scale = with_dependencies(checks, identity(p["scale"], name="scale"))
        super().__init__(dtype=self._scale.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._df, self._loc, self._scale], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        s = convert_to_tensor(sample_shape, dtype=dtypes.int32)
        return {"df": s, "loc": s, "scale": s}

    @property
    def df(self):
        return self._df

    @property
    def loc(self):
        return self._loc

    @property
    def scale(self):
        return self._scale

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(
            array_ops.shape(self.df),
            array_ops.broadcast_dynamic_shape(array_ops.shape(self.loc), array_ops.shape(self.scale)))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(
            array_ops.broadcast_static_shape(self.df.shape, self.loc.shape), self.scale.shape)

    def _ones(self):
        return array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], self.batch_shape_tensor()], 0)
        normal_sample = random_ops.random_normal(shape, dtype=self.dtype, seed=seed)
        df = self.df * self._ones()
        gamma_sample = random_more_ops.random_gamma([n], 0.5 * df, beta=0.5, dtype=self.dtype,
                                                    seed=gen_new_seed(seed, salt="student_t"))
        samples = normal_sample * math_ops.rsqrt(gamma_sample / df)
        return samples * self.scale + self.loc

    def _log_prob(self, x):
        y = (x - self.loc) / self.scale
        unnormalized = -0.5 * (self.df + 1.0) * math_ops.log1p(y ** 2.0 / self.df)
        return unnormalized - self._log_normalization()

    def _log_normalization(self):
        return (math_ops.log(math_ops.abs(self.scale)) + 0.5 * math_ops.log(self.df) + 0.5 * np.log(np.pi)
                + math_ops.lgamma(0.5 * self.df) - math_ops.lgamma(0.5 * (self.df + 1.0)))

    def _cdf(self, x):
        y = (x - self.loc) / math_ops.abs(self.scale)
        x_t = self.df / (y ** 2.0 + self.df)
        neg_cdf = 0.5 * special_math_ops.betainc(0.5 * self.df, 0.5 * array_ops.ones_like(x_t), x_t)
        return math_ops.where_v2(math_ops.less(y, 0.0), neg_cdf, 1.0 - neg_cdf)

    def _entropy(self):
        v = self._ones()[..., array_ops.newaxis]
        u = v * self.df[..., array_ops.newaxis]
        beta_arg = array_ops.concat([u, v], -1) / 2.0
        return (math_ops.log(math_ops.abs(self.scale)) + 0.5 * math_ops.log(self.df)
                + special_math_ops.lbeta(beta_arg)
                + 0.5 * (self.df + 1.0) * (math_ops.digamma(0.5 * (self.df + 1.0)) - math_ops.digamma(0.5 * self.df)))

    def _mean(self):
        mean = self.loc * self._ones()
        if self.allow_nan_stats:
            return where_defined(math_ops.greater(self.df, self._ones()), mean)
        return with_dependencies([check_ops.assert_less(
            array_ops.ones([], dtype=self.dtype), self.df,
            message=f"{owner(self.name)}: mean not defined for components of df <= 1")], mean)

    def _variance(self):
        denom = math_ops.where_v2(math_ops.greater(self.df, 2.0), self.df - 2.0, array_ops.ones_like(self.df))
        var = self._ones() * math_ops.square(self.scale) * self.df / denom
        inf = np.array(np.inf, dtype=self.dtype.as_numpy_dtype)
        defined = math_ops.where_v2(self.df * self._ones() > 2.0, var, inf)
        if self.allow_nan_stats:
            return where_defined(math_ops.greater(self.df, self._ones()), defined)
        return with_dependencies([check_ops.assert_less(
            array_ops.ones([], dtype=self.dtype), self.df,
            message=f"{owner(self.name)}: variance not defined for components of df <= 1")], defined)

    def _mode(self):
        return identity(self.loc)
