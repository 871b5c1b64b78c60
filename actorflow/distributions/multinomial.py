"""The Multinomial and Dirichlet-multinomial distributions (tf.distributions.Multinomial,
tf.distributions.DirichletMultinomial): counts of `total_count` draws over k classes."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.dirichlet import ConcentrationShapes
from actorflow.distributions.parameters import (
    convert_params,
    embed_check_categorical_event_shape,
    embed_check_nonnegative_integer_form,
    gen_new_seed,
    get_logits_and_probs,
    log_combinations,
    owner,
    with_dependencies,
)
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, nn_ops, random_more_ops, special_math_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["Multinomial", "DirichletMultinomial"]


def _draw_counts(logits, n_draws, n, k, seed, dtype):
    """n samples of class counts for each row of `logits` [b, k] with `n_draws` [b] draws each: shape
    [n, b, k]. Each of the n * b rows draws max(n_draws) categorical classes and counts the first
    n_draws of them (TF maps a multinomial over the rows one by one instead)."""
    rows = array_ops.shape(logits)[0]
    tiled = array_ops.tile(logits, array_ops.stack([n, 1]))
    counts_per_row = array_ops.tile(n_draws, array_ops.stack([n]))
    most = math_ops.reduce_max(array_ops.concat([counts_per_row, [0]], 0))
    draws = random_more_ops.multinomial(tiled, most, seed=seed)
    keep = math_ops.cast(array_ops.sequence_mask(counts_per_row, most), dtype)
    x = math_ops.reduce_sum(array_ops.one_hot(draws, depth=k, dtype=dtype) * keep[..., array_ops.newaxis], axis=-2)
    return array_ops.reshape(x, array_ops.stack([n, rows, k]))


def _maybe_assert_valid_counts(counts, total_count, validate_args, owner_name):
    if not validate_args:
        return counts
    counts = embed_check_nonnegative_integer_form(counts, owner_name, "counts")
    return with_dependencies([check_ops.assert_equal(
        total_count, math_ops.reduce_sum(counts, -1),
        message=f"{owner_name}: counts must sum to `self.total_count`")], counts)


class Multinomial(distribution.Distribution):
    """Multinomial distributions: the class counts of `total_count` draws with class `logits` or `probs`
    [..., k] (tf.distributions.Multinomial). Event shape [k]; samples are float counts of the
    parameters' dtype. NOT_REPARAMETERIZED. validate_args asserts that total_count and the counts passed
    to log_prob are non-negative integers and that the counts sum to total_count."""

    def __init__(self, total_count, logits=None, probs=None, validate_args=False, allow_nan_stats=True,
                 name="Multinomial"):
        parameters = dict(locals())
        with name_scope(name) as name:
            self._logits, self._probs = get_logits_and_probs(logits=logits, probs=probs, multidimensional=True,
                                                             validate_args=validate_args, owner_name=owner(name))
            self._total_count = convert_to_tensor(total_count, name="total_count", dtype=self._probs.dtype)
            if validate_args:
                self._total_count = embed_check_nonnegative_integer_form(self._total_count, owner(name),
                                                                         "total_count")
            self._mean_val = self._total_count[..., array_ops.newaxis] * self._probs
        super().__init__(dtype=self._probs.dtype, reparameterization_type=distribution.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._total_count, self._logits, self._probs], name=name)

    @property
    def total_count(self):
        return self._total_count

    @property
    def logits(self):
        return self._logits

    @property
    def probs(self):
        return self._probs

    def _batch_shape_tensor(self):
        return array_ops.shape(self._mean_val)[:-1]

    def _batch_shape(self):
        s = self._mean_val.shape
        return TensorShape(None if s.ndims is None else s.dims[:-1])

    def _event_shape_tensor(self):
        return array_ops.shape(self._mean_val)[-1:]

    def _event_shape(self):
        s = self._mean_val.shape
        return TensorShape(None if s.ndims is None else s.dims[-1:])

    def _sample_n(self, n, seed=None):
        k = self.event_shape_tensor()[0]
        n_draws = math_ops.cast(self.total_count, dtypes.int32) * array_ops.ones_like(self.logits[..., 0],
                                                                                        dtype=dtypes.int32)
        logits = array_ops.ones_like(n_draws[..., array_ops.newaxis], dtype=self.logits.dtype) * self.logits
        flat_logits = array_ops.reshape(logits, array_ops.stack([-1, k]))
        x = _draw_counts(flat_logits, array_ops.reshape(n_draws, [-1]), n, k, seed, self.dtype)
        return array_ops.reshape(x, array_ops.concat([[n], self.batch_shape_tensor(), [k]], 0))

    def _log_prob(self, counts):
        counts = _maybe_assert_valid_counts(counts, self.total_count, self.validate_args, owner(self.name))
        return (math_ops.reduce_sum(counts * nn_ops.log_softmax(self.logits), -1)
                + log_combinations(self.total_count, counts))

    def _mean(self):
        return identity(self._mean_val)

    def _covariance(self):
        p = self.probs * array_ops.ones_like(self.total_count)[..., array_ops.newaxis]
        return array_ops.matrix_set_diag(
            -math_ops.matmul(self._mean_val[..., array_ops.newaxis], p[..., array_ops.newaxis, :]), self._variance())

    def _variance(self):
        p = self.probs * array_ops.ones_like(self.total_count)[..., array_ops.newaxis]
        return self._mean_val - self._mean_val * p


class DirichletMultinomial(ConcentrationShapes, distribution.Distribution):
    """Dirichlet-multinomial distributions: class counts of `total_count` draws whose class probabilities
    are themselves Dirichlet(`concentration`) (tf.distributions.DirichletMultinomial). Event shape [k].
    NOT_REPARAMETERIZED. validate_args asserts positive concentrations, k >= 2, and non-negative
    integer counts summing to total_count."""

    def __init__(self, total_count, concentration, validate_args=False, allow_nan_stats=True,
                 name="DirichletMultinomial"):
        parameters = dict(locals())
        with name_scope(name) as name:
            c = convert_params({"concentration": concentration}, owner(name))["concentration"]
            self._total_count = convert_to_tensor(total_count, name="total_count", dtype=c.dtype)
            if validate_args:
                self._total_count = embed_check_nonnegative_integer_form(self._total_count, owner(name),
                                                                         "total_count")
                c = embed_check_categorical_event_shape(c, owner(name))
                c = with_dependencies([check_ops.assert_positive(
                    c, message=f"{owner(name)}: Concentration parameter must be positive")], c)
            self._concentration = identity(c, name="concentration")
            self._total_concentration = math_ops.reduce_sum(self._concentration, -1)
        super().__init__(dtype=self._concentration.dtype, validate_args=validate_args,
                         allow_nan_stats=allow_nan_stats, reparameterization_type=distribution.NOT_REPARAMETERIZED,
                         parameters=parameters, graph_parents=[self._total_count, self._concentration], name=name)

    @property
    def total_count(self):
        return self._total_count

    def _sample_n(self, n, seed=None):
        k = self.event_shape_tensor()[0]
        gammas = random_more_ops.random_gamma(shape=[n], alpha=self.concentration, dtype=self.dtype, seed=seed)
        logits = array_ops.reshape(math_ops.log(gammas), array_ops.stack([-1, k]))
        n_draws = math_ops.cast(self.total_count, dtypes.int32) * array_ops.ones_like(
            self.total_concentration, dtype=dtypes.int32)
        # the gamma draws already carry the sample dimension: one sample of each of their n * b rows
        rows_draws = array_ops.tile(array_ops.reshape(n_draws, [-1]), array_ops.stack([n]))
        x = _draw_counts(logits, rows_draws, 1, k, gen_new_seed(seed, salt="dirichlet_multinomial"), self.dtype)
        return array_ops.reshape(x, array_ops.concat([[n], self.batch_shape_tensor(), [k]], 0))

    def _log_prob(self, counts):
        counts = _maybe_assert_valid_counts(counts, self.total_count, self.validate_args, owner(self.name))
        ordered_prob = special_math_ops.lbeta(self.concentration + counts) - special_math_ops.lbeta(self.concentration)
        return ordered_prob + log_combinations(self.total_count, counts)

    def _prob(self, counts):
        return math_ops.exp(self._log_prob(counts))

    def _mean(self):
        return self.total_count[..., array_ops.newaxis] * (
            self.concentration / self.total_concentration[..., array_ops.newaxis])

    def _covariance(self):
        x = self._variance_scale_term() * self._mean()
        return array_ops.matrix_set_diag(
            -math_ops.matmul(x[..., array_ops.newaxis], x[..., array_ops.newaxis, :]), self._variance())

    def _variance(self):
        scale = self._variance_scale_term()
        x = scale * self._mean()
        return x * (self.total_count[..., array_ops.newaxis] * scale - x)

    def _variance_scale_term(self):
        c0 = self.total_concentration[..., array_ops.newaxis]
        return math_ops.sqrt((1.0 + c0 / self.total_count[..., array_ops.newaxis]) / (1.0 + c0))
