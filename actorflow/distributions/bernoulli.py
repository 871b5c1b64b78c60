"""The Bernoulli distribution (tf.distributions.Bernoulli), with its KL divergence."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import embed_check_integer_casting_closed, get_logits_and_probs, owner
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops, random_ops
from actorflow.graph.ops.constant import identity

__all__ = ["Bernoulli"]


class Bernoulli(distribution.ScalarDistribution):
    """Bernoulli distributions over {0, 1}, given `logits` (log-odds) or `probs` of a 1, not both
    (tf.distributions.Bernoulli); samples have `dtype` (int32). NOT_REPARAMETERIZED. validate_args
    asserts 0 <= probs <= 1, and that values passed to log_prob are 0 or 1."""

    def __init__(self, logits=None, probs=None, dtype=dtypes.int32, validate_args=False, allow_nan_stats=True,
                 name="Bernoulli"):
        parameters = dict(locals())
        with name_scope(name) as name:
            self._logits, self._probs = get_logits_and_probs(logits=logits, probs=probs, validate_args=validate_args,
                                                             owner_name=owner(name))
        super().__init__(dtype=dtypes.as_dtype(dtype), reparameterization_type=distribution.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._logits, self._probs], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        return {"logits": convert_to_tensor(sample_shape, dtype=dtypes.int32)}

    @property
    def logits(self):
        return self._logits

    @property
    def probs(self):
        return self._probs

    def _batch_shape_tensor(self):
        return array_ops.shape(self._logits)

    def _batch_shape(self):
        return self._logits.shape

    def _sample_n(self, n, seed=None):
        new_shape = array_ops.concat([[n], self.batch_shape_tensor()], 0)
        uniform = random_ops.random_uniform(new_shape, seed=seed, dtype=self.probs.dtype)
        return math_ops.cast(math_ops.less(uniform, self.probs), self.dtype)

    def _log_prob(self, event):
        if self.validate_args:
            event = embed_check_integer_casting_closed(event, dtypes.bool_, owner(self.name))
        event = math_ops.cast(event, self.logits.dtype)
        logits = self.logits
        if not (event.shape.is_fully_defined() and logits.shape.is_fully_defined() and event.shape == logits.shape):
            logits, event = array_ops.ones_like(event) * logits, array_ops.ones_like(logits) * event
        return -nn_ops.sigmoid_cross_entropy_with_logits(labels=event, logits=logits)

    def _entropy(self):
        return -self.logits * (math_ops.sigmoid(self.logits) - 1) + nn_ops.softplus(-self.logits)

    def _mean(self):
        return identity(self.probs)

    def _variance(self):
        return self._mean() * (1.0 - self.probs)

    def _mode(self):
        return math_ops.cast(self.probs > 0.5, self.dtype)


@RegisterKL(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(a, b, name=None):
    """KL(Bernoulli(a) || Bernoulli(b)) in terms of logits, stable for large ones."""
    with name_scope(name or "kl_bernoulli_bernoulli"):
        delta_probs0 = nn_ops.softplus(-b.logits) - nn_ops.softplus(-a.logits)
        delta_probs1 = nn_ops.softplus(b.logits) - nn_ops.softplus(a.logits)
        return math_ops.sigmoid(a.logits) * delta_probs0 + math_ops.sigmoid(-a.logits) * delta_probs1
