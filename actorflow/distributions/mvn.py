"""Multivariate normal distributions of tf.contrib.distributions (TF 1.15):
MultivariateNormalDiag, MultivariateNormalDiagWithSoftplusScale, MultivariateNormalTriL and
MultivariateNormalFullCovariance, with their KL divergence.

Each is N(loc, scale @ scale^T) for a lower-triangular `scale` [..., k, k] (diagonal for the Diag
forms; the Cholesky factor of `covariance_matrix` for FullCovariance). The event shape is [k]; the
batch shape broadcasts loc's leading dimensions against scale's. Samples are loc + scale @ eps,
so gradients flow to loc and scale (FULLY_REPARAMETERIZED). log_prob solves scale @ z = x - loc;
the log-determinant is sum(log|diag(scale)|).
"""
from __future__ import annotations

import math

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import owner, with_dependencies
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, linalg_ops, math_ops, nn_ops, random_ops
from actorflow.graph.ops.array_ops.matrix import matrix_band_part, matrix_diag, matrix_diag_part
from actorflow.graph.ops.constant import identity
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["MultivariateNormalLinearOperator", "MultivariateNormalDiag", "MultivariateNormalDiagWithSoftplusScale",
           "MultivariateNormalTriL", "MultivariateNormalFullCovariance"]


class MultivariateNormalLinearOperator(distribution.Distribution):
    """N(loc, S S^T) for a lower-triangular (or diagonal) scale S; the base of the forms below."""

    def __init__(self, loc, scale_diag=None, scale_tril=None, validate_args=False, allow_nan_stats=True,
                 name="MultivariateNormalLinearOperator", parameters=None):
        parameters = parameters if parameters is not None else dict(locals())
        if (scale_diag is None) == (scale_tril is None):
            raise ValueError(f"{name}: give exactly one of scale_diag and scale_tril")
        with name_scope(name) as name:
            who = owner(name)
            scale = convert_to_tensor(scale_diag if scale_diag is not None else scale_tril,
                                      name="scale_diag" if scale_diag is not None else "scale_tril")
            if not scale.dtype.is_floating:
                raise TypeError(f"{who}: scale must be floating point, got {scale.dtype.name}")
            need = 1 if scale_diag is not None else 2
            if scale.shape.ndims is not None and scale.shape.ndims < need:
                raise ValueError(f"{who}: scale must have rank at least {need}, got shape {scale.shape}")
            k = scale.shape[-1]
            if k is None:
                raise ValueError(f"{who}: the event size (scale's last dimension) must be known, got {scale.shape}")
            loc = (array_ops.zeros([int(k)], dtype=scale.dtype) if loc is None
                   else convert_to_tensor(loc, dtype=scale.dtype, name="loc"))
            if loc.shape.ndims == 0 or (loc.shape.ndims and loc.shape[-1] is not None and loc.shape[-1] != k):
                raise ValueError(f"{who}: loc's last dimension must be the event size {k}, got shape {loc.shape}")
            diag = scale if scale_diag is not None else matrix_diag_part(scale)
            checks = [check_ops.assert_none_equal(diag, array_ops.zeros([], dtype=diag.dtype),
                                                  message=f"{who}: the scale must be non-singular")] \
                if validate_args else []
            self._loc = with_dependencies(checks, identity(loc, name="loc"))
            self._is_diag = scale_diag is not None
            self._scale = with_dependencies(checks, identity(scale, name="scale"))
            self._k = int(k)
        super().__init__(dtype=self._scale.dtype, reparameterization_type=distribution.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._loc, self._scale], name=name)

    @property
    def loc(self):
        return self._loc

    @property
    def scale_diag(self):
        """The scale's diagonal [..., k]."""
        return self._scale if self._is_diag else matrix_diag_part(self._scale)

    @property
    def scale(self):
        """The scale as a dense lower-triangular matrix [..., k, k]."""
        return matrix_diag(self._scale) if self._is_diag else self._scale

    def _scale_batch(self, static):
        s = self._scale
        if static:
            return s.shape[:-1] if self._is_diag else s.shape[:-2]
        shape = array_ops.shape(s)
        return shape[:-1] if self._is_diag else shape[:-2]

    def _batch_shape_tensor(self):
        return array_ops.broadcast_dynamic_shape(array_ops.shape(self.loc)[:-1], self._scale_batch(False))

    def _batch_shape(self):
        return array_ops.broadcast_static_shape(self.loc.shape[:-1], self._scale_batch(True))

    def _event_shape_tensor(self):
        return convert_to_tensor([self._k], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([self._k])

    def _apply_scale(self, eps):
        """S @ eps over the last axis, broadcasting batch dimensions."""
        if self._is_diag:
            return self._scale * eps
        return math_ops.reduce_sum(self._scale * array_ops.expand_dims(eps, -2), -1)

    def _solve(self, d):
        """z with S @ z = d over the last axis."""
        if self._is_diag:
            return d / self._scale
        eye = array_ops.eye(self._k, dtype=self.dtype)
        inv = linalg_ops.matrix_triangular_solve(self._scale * array_ops.ones_like(self._scale), eye
                                         + array_ops.zeros_like(self._scale), lower=True)
        return math_ops.reduce_sum(inv * array_ops.expand_dims(d, -2), -1)

    def _log_abs_det(self):
        return math_ops.reduce_sum(math_ops.log(math_ops.abs(self.scale_diag)), -1)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], self.batch_shape_tensor(), [self._k]], 0)
        eps = random_ops.random_normal(shape=shape, dtype=self.dtype, seed=seed)
        return self._apply_scale(eps) + self.loc

    def _log_prob(self, x):
        z = self._solve(x - self.loc)
        return (-0.5 * math_ops.reduce_sum(math_ops.square(z), -1) - 0.5 * self._k * math.log(2.0 * math.pi)
                - self._log_abs_det())

    def _entropy(self):
        ent = 0.5 * self._k * (1.0 + math.log(2.0 * math.pi)) + self._log_abs_det()
        return ent * array_ops.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _mean(self):
        return self.loc * array_ops.ones(array_ops.concat([self.batch_shape_tensor(), [self._k]], 0),
                                         dtype=self.dtype)

    _mode = _mean

    def _covariance(self):
        if self._is_diag:
            cov = matrix_diag(math_ops.square(self._scale))
        else:
            cov = math_ops.matmul(self._scale, self._scale, transpose_b=True)
        return cov * array_ops.ones(array_ops.concat([self.batch_shape_tensor(), [self._k, self._k]], 0),
                                    dtype=self.dtype)

    def _variance(self):
        if self._is_diag:
            v = math_ops.square(self._scale)
        else:
            v = math_ops.reduce_sum(math_ops.square(self._scale), -1)
        return v * array_ops.ones(array_ops.concat([self.batch_shape_tensor(), [self._k]], 0), dtype=self.dtype)

    def _stddev(self):
        return math_ops.sqrt(self._variance())


class MultivariateNormalDiag(MultivariateNormalLinearOperator):
    """N(loc, diag(scale_diag)^2) (tf.contrib.distributions.MultivariateNormalDiag);
    `scale_identity_multiplier` adds that multiple of the identity to the scale."""

    def __init__(self, loc=None, scale_diag=None, scale_identity_multiplier=None, validate_args=False,
                 allow_nan_stats=True, name="MultivariateNormalDiag"):
        parameters = dict(locals())
        with name_scope(name, values=[loc, scale_diag, scale_identity_multiplier]):
            if scale_diag is None and scale_identity_multiplier is None and loc is None:
                raise ValueError(f"{name}: give loc, scale_diag or scale_identity_multiplier")
            diag = None if scale_diag is None else convert_to_tensor(scale_diag, name="scale_diag")
            if scale_identity_multiplier is not None:
                mult = convert_to_tensor(scale_identity_multiplier, name="scale_identity_multiplier")
                if diag is None:
                    ref = convert_to_tensor(loc, name="loc")
                    diag = array_ops.ones_like(ref) * array_ops.expand_dims(math_ops.cast(mult, ref.dtype), -1)
                else:
                    diag = diag + array_ops.expand_dims(math_ops.cast(mult, diag.dtype), -1)
            if diag is None:
                diag = array_ops.ones_like(convert_to_tensor(loc, name="loc"))
        super().__init__(loc, scale_diag=diag, validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         name=name, parameters=parameters)


class MultivariateNormalDiagWithSoftplusScale(MultivariateNormalDiag):
    """MultivariateNormalDiag with scale_diag = softplus(scale_diag)."""

    def __init__(self, loc, scale_diag, validate_args=False, allow_nan_stats=True,
                 name="MultivariateNormalDiagWithSoftplusScale"):
        parameters = dict(locals())
        with name_scope(name, values=[scale_diag]):
            diag = nn_ops.softplus(convert_to_tensor(scale_diag, name="scale_diag"))
        super().__init__(loc=loc, scale_diag=diag, validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         name=name)
        self._parameters = parameters


class MultivariateNormalTriL(MultivariateNormalLinearOperator):
    """N(loc, scale_tril @ scale_tril^T) (tf.contrib.distributions.MultivariateNormalTriL): only
    the lower triangle of `scale_tril` is read."""

    def __init__(self, loc=None, scale_tril=None, validate_args=False, allow_nan_stats=True,
                 name="MultivariateNormalTriL"):
        parameters = dict(locals())
        if scale_tril is None:
            raise ValueError(f"{name}: scale_tril is required")
        with name_scope(name, values=[scale_tril]):
            tril = matrix_band_part(convert_to_tensor(scale_tril, name="scale_tril"), -1, 0)
        super().__init__(loc, scale_tril=tril, validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         name=name, parameters=parameters)


class MultivariateNormalFullCovariance(MultivariateNormalTriL):
    """N(loc, covariance_matrix) (tf.contrib.distributions.MultivariateNormalFullCovariance),
    through the covariance's Cholesky factor."""

    def __init__(self, loc=None, covariance_matrix=None, validate_args=False, allow_nan_stats=True,
                 name="MultivariateNormalFullCovariance"):
        parameters = dict(locals())
        if covariance_matrix is None:
            raise ValueError(f"{name}: covariance_matrix is required")
        with name_scope(name, values=[covariance_matrix]):
            cov = convert_to_tensor(covariance_matrix, name="covariance_matrix")
            if validate_args:
                cov = with_dependencies([check_ops.assert_near(
                    cov, linalg_ops.adjoint(cov), message=f"{name}: covariance_matrix must be symmetric")], cov)
            tril = linalg_ops.cholesky(cov)
        super().__init__(loc=loc, scale_tril=tril, validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         name=name)
        self._parameters = parameters


@RegisterKL(MultivariateNormalLinearOperator, MultivariateNormalLinearOperator)
def _kl_mvn_mvn(a, b, name=None):
    """KL(N(m_a, S_a S_a^T) || N(m_b, S_b S_b^T)) =
    (||S_b^-1 S_a||_F^2 + ||S_b^-1 (m_b - m_a)||^2 - k) / 2 + log|det S_b| - log|det S_a|."""
    with name_scope(name or "kl_mvn_mvn"):
        if a._is_diag and b._is_diag:
            trace = math_ops.reduce_sum(math_ops.square(a._scale / b._scale), -1)
        else:
            sa = a.scale
            cols = [b._solve(sa[..., :, j]) for j in range(a._k)]
            trace = math_ops.add_n([math_ops.reduce_sum(math_ops.square(c), -1) for c in cols])
        quad = math_ops.reduce_sum(math_ops.square(b._solve(b.loc - a.loc)), -1)
        return 0.5 * (trace + quad - a._k) + b._log_abs_det() - a._log_abs_det()
