"""The Categorical distribution (tf.distributions.Categorical), with its KL divergence."""
from __future__ import annotations

from actorflow.distributions import distribution
from actorflow.distributions.kullback_leibler import RegisterKL
from actorflow.distributions.parameters import (
    embed_check_categorical_event_shape,
    embed_check_integer_casting_closed,
    get_logits_and_probs,
    owner,
)
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops, random_more_ops
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["Categorical"]


def _broadcast_event_and_params(event, params, base_dtype):
    """`event` (class indices) and `params` ([..., k]) broadcast to each other's batch shape."""
    if event.dtype.is_floating:
        event = math_ops.cast(event, dtype=dtypes.int32)
    elif not event.dtype.is_integer:
        raise TypeError(f"`value` should have integer `dtype` or `self.dtype` ({base_dtype.name}), "
                        f"got {event.dtype.name}")
    known = params.shape.ndims is not None and TensorShape(params.shape.dims[:-1]).is_fully_defined() \
        and event.shape.is_fully_defined()
    if not known or TensorShape(params.shape.dims[:-1]) != event.shape:
        params = params * array_ops.ones_like(event[..., array_ops.newaxis], dtype=params.dtype)
        event = event * array_ops.ones(array_ops.shape(params)[:-1], dtype=event.dtype)
        if params.shape.ndims is not None:
            event.set_shape(TensorShape(params.shape.dims[:-1]))
    return event, params


class Categorical(distribution.ScalarDistribution):
    """Categorical distributions over {0, ..., k-1}, given `logits` or `probs` of shape [..., k], not both
    (tf.distributions.Categorical); the batch shape is the parameters' shape less the last axis, samples
    have `dtype` (int32). NOT_REPARAMETERIZED. validate_args checks k >= 2, probs summing to 1, and
    that values passed to log_prob/cdf are non-negative integers."""

    def __init__(self, logits=None, probs=None, dtype=dtypes.int32, validate_args=False, allow_nan_stats=True,
                 name="Categorical"):
        parameters = dict(locals())
        with name_scope(name) as name:
            self._logits, self._probs = get_logits_and_probs(logits=logits, probs=probs, validate_args=validate_args,
                                                             multidimensional=True, owner_name=owner(name))
            if validate_args:
                self._logits = embed_check_categorical_event_shape(self._logits, owner(name))
            static = self._logits.shape
            if static.ndims == 0:
                raise ValueError(f"{owner(name)}: logits/probs must have rank at least 1, got a scalar")
            if static.ndims is not None:
                self._batch_rank = convert_to_tensor(static.ndims - 1, dtype=dtypes.int32, name="batch_rank")
            else:
                with name_scope("batch_rank"):
                    self._batch_rank = array_ops.rank(self._logits) - 1
            logits_shape = array_ops.shape(self._logits, name="logits_shape")
            if static.ndims is not None and static.dims[-1] is not None:
                self._event_size = convert_to_tensor(int(static.dims[-1]), dtype=dtypes.int32, name="event_size")
            else:
                with name_scope("event_size"):
                    self._event_size = logits_shape[-1]
            if static.ndims is not None and TensorShape(static.dims[:-1]).is_fully_defined():
                self._batch_shape_val = convert_to_tensor([int(d) for d in static.dims[:-1]], dtype=dtypes.int32,
                                                          name="batch_shape")
            else:
                with name_scope("batch_shape"):
                    self._batch_shape_val = logits_shape[:-1]
        super().__init__(dtype=dtypes.as_dtype(dtype), reparameterization_type=distribution.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, parameters=parameters,
                         graph_parents=[self._logits, self._probs], name=name)

    @property
    def event_size(self):
        """The number of classes k, a scalar int32 tensor."""
        return self._event_size

    @property
    def logits(self):
        return self._logits

    @property
    def probs(self):
        return self._probs

    def _batch_shape_tensor(self):
        return self._batch_shape_val

    def _batch_shape(self):
        s = self.logits.shape
        return TensorShape(None) if s.ndims is None else TensorShape(s.dims[:-1])

    def _sample_n(self, n, seed=None):
        logits_2d = self.logits if self.logits.shape.ndims == 2 else \
            array_ops.reshape(self.logits, array_ops.stack([-1, self.event_size]))
        sample_dtype = dtypes.int64 if self.dtype.size > 4 else dtypes.int32
        draws = random_more_ops.multinomial(logits_2d, n, seed=seed, output_dtype=sample_dtype)
        draws = array_ops.reshape(array_ops.transpose(draws), array_ops.concat([[n], self.batch_shape_tensor()], 0))
        return math_ops.cast(draws, self.dtype)

    def _cdf(self, k):
        if self.validate_args:
            k = embed_check_integer_casting_closed(k, dtypes.int32, owner(self.name))
        k, probs = _broadcast_event_and_params(k, self.probs, base_dtype=self.dtype.base_dtype)
        flat_probs = array_ops.reshape(probs, array_ops.stack([-1, self._event_size]))
        flat_k = array_ops.reshape(k, [-1])
        to_sum = math_ops.where_v2(array_ops.sequence_mask(flat_k, self._event_size), flat_probs,
                                   array_ops.zeros_like(flat_probs))
        return array_ops.reshape(math_ops.reduce_sum(to_sum, axis=-1), array_ops.shape(k))

    def _log_prob(self, k):
        if self.validate_args:
            k = embed_check_integer_casting_closed(k, dtypes.int32, owner(self.name))
        k, logits = _broadcast_event_and_params(k, self.logits, base_dtype=self.dtype.base_dtype)
        return -nn_ops.sparse_softmax_cross_entropy_with_logits(labels=k, logits=logits)

    def _entropy(self):
        return -math_ops.reduce_sum(nn_ops.log_softmax(self.logits) * self.probs, axis=-1)

    def _mode(self):
        ret = math_ops.cast(math_ops.argmax(self.logits, axis=-1), self.dtype)
        ret.set_shape(self.batch_shape)
        return ret


@RegisterKL(Categorical, Categorical)
def _kl_categorical_categorical(a, b, name=None):
    """KL(a || b) = sum_k p_a(k) (log p_a(k) - log p_b(k)), from the logits."""
    with name_scope(name or "kl_categorical_categorical"):
        delta_log_probs = nn_ops.log_softmax(a.logits) - nn_ops.log_softmax(b.logits)
        return math_ops.reduce_sum(nn_ops.softmax(a.logits) * delta_log_probs, axis=-1)
