"""The Distribution base class of `af.distributions` (TF 1.x's tf.distributions.Distribution) and the
reparameterization types.

A distribution holds its parameters as graph tensors; every method builds ops on the default graph
under `<name>/<method>/`, so samples, log densities and statistics are ordinary tensors whose
gradients flow to the parameters. A subclass implements the underscored methods (`_log_prob`,
`_sample_n`, `_batch_shape`...); the public ones add the name scope, convert the argument, and fall
back between related methods as TF does (log_prob from prob and back, cdf from log_cdf, stddev from
variance, survival functions from the cdf).

Shapes follow TF: a sample has shape `sample_shape + batch_shape + event_shape`; the batch shape is
the broadcast of the parameters' shapes; scalar distributions have event shape [].
"""
from __future__ import annotations

import contextlib

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.misc_ops import get_static_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["ReparameterizationType", "FULLY_REPARAMETERIZED", "NOT_REPARAMETERIZED", "Distribution", "ScalarDistribution"]


class ReparameterizationType:
    """Whether a distribution's samples are a differentiable function of its parameters
    (tf.distributions.ReparameterizationType). There are two instances, compared by identity:
    FULLY_REPARAMETERIZED (gradients flow through `sample()` to the parameters) and
    NOT_REPARAMETERIZED (a sample's gradient is None or meaningless)."""

    def __init__(self, rep_type: str):
        self._rep_type = rep_type

    def __repr__(self):
        return f"<Reparameterization Type: {self._rep_type}>"

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


FULLY_REPARAMETERIZED = ReparameterizationType("FULLY_REPARAMETERIZED")
NOT_REPARAMETERIZED = ReparameterizationType("NOT_REPARAMETERIZED")


def _with_rank_at_least(shape: TensorShape, rank: int, what: str) -> TensorShape:
    if shape.ndims is not None and shape.ndims < rank:
        raise ValueError(f"{what} must have rank at least {rank}, got shape {shape}")
    return shape


class Distribution:
    """A batch of probability distributions (tf.distributions.Distribution).

    Args (of every subclass, besides its parameters): `validate_args` adds run-time assertions on the
    parameters and on the values passed to log_prob/cdf (an InvalidArgumentError naming the
    distribution); `allow_nan_stats` returns NaN for undefined statistics (a StudentT's variance for
    df <= 1) where False raises instead; `name` is the name scope of every op built.
    """

    def __init__(self, dtype, reparameterization_type, validate_args, allow_nan_stats, parameters=None,
                 graph_parents=None, name=None):
        graph_parents = [] if graph_parents is None else graph_parents
        for i, t in enumerate(graph_parents):
            if t is None or not isinstance(t, Tensor):
                raise ValueError(f"Graph parent item {i} is not a Tensor; {t}.")
        if not name or name[-1] != "/":
            with name_scope(name or type(self).__name__) as name:
                pass
        self._dtype = dtype
        self._reparameterization_type = reparameterization_type
        self._allow_nan_stats = allow_nan_stats
        self._validate_args = validate_args
        self._parameters = parameters or {}
        self._graph_parents = graph_parents
        self._name = name

    @property
    def _parameters(self):
        return self._parameter_dict

    @_parameters.setter
    def _parameters(self, value):
        value = dict(value)
        value.pop("self", None)
        value.pop("__class__", None)
        self._parameter_dict = value

    @classmethod
    def param_shapes(cls, sample_shape, name="DistributionParamShapes"):
        """The shapes of the parameters that give samples of shape `sample_shape`, as int32 tensors."""
        with name_scope(name):
            return cls._param_shapes(sample_shape)

    @classmethod
    def param_static_shapes(cls, sample_shape):
        """param_shapes as TensorShapes; `sample_shape` must be known."""
        if isinstance(sample_shape, TensorShape):
            if not sample_shape.is_fully_defined():
                raise ValueError("TensorShape sample_shape must be fully defined")
            sample_shape = sample_shape.as_list()
        out = {}
        for k, shape in cls.param_shapes(sample_shape).items():
            value = get_static_value(shape)
            if value is None:
                raise ValueError("sample_shape must be a fully-defined TensorShape or list/tuple")
            out[k] = TensorShape([int(d) for d in np.reshape(value, [-1])])
        return out

    @staticmethod
    def _param_shapes(sample_shape):
        raise NotImplementedError("_param_shapes not implemented")

    @property
    def name(self) -> str:
        """The distribution's name scope, ending in "/"."""
        return self._name

    @property
    def dtype(self):
        """The dtype of the samples."""
        return self._dtype

    @property
    def parameters(self) -> dict:
        """The constructor's arguments, by name."""
        return {k: v for k, v in self._parameters.items() if not k.startswith("__") and k != "self"}

    @property
    def reparameterization_type(self):
        return self._reparameterization_type

    @property
    def allow_nan_stats(self) -> bool:
        return self._allow_nan_stats

    @property
    def validate_args(self) -> bool:
        return self._validate_args

    def copy(self, **override_parameters_kwargs):
        """A new distribution of the same type with these parameters replaced (the name is kept as given
        to the constructor, so the copy opens a fresh scope of that name)."""
        return type(self)(**dict(self.parameters, **override_parameters_kwargs))

    # --- shapes

    def _batch_shape_tensor(self):
        raise NotImplementedError(f"batch_shape_tensor is not implemented: {type(self).__name__}")

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        """The batch shape as a 1-D int32 tensor (a constant where it is known statically)."""
        with self._name_scope(name):
            if self.batch_shape.is_fully_defined():
                return convert_to_tensor(self.batch_shape.as_list(), dtype=dtypes.int32, name="batch_shape")
            return self._batch_shape_tensor()

    def _batch_shape(self):
        return TensorShape(None)

    @property
    def batch_shape(self) -> TensorShape:
        """The static batch shape: the broadcast of the parameters' shapes, less their event dimensions."""
        return TensorShape(self._batch_shape())

    def _event_shape_tensor(self):
        raise NotImplementedError(f"event_shape_tensor is not implemented: {type(self).__name__}")

    def event_shape_tensor(self, name="event_shape_tensor"):
        """The event shape as a 1-D int32 tensor."""
        with self._name_scope(name):
            if self.event_shape.is_fully_defined():
                return convert_to_tensor(self.event_shape.as_list(), dtype=dtypes.int32, name="event_shape")
            return self._event_shape_tensor()

    def _event_shape(self):
        return TensorShape(None)

    @property
    def event_shape(self) -> TensorShape:
        """The static shape of one draw of one member of the batch."""
        return TensorShape(self._event_shape())

    def is_scalar_event(self, name="is_scalar_event"):
        """A bool tensor: whether the event shape is []."""
        with self._name_scope(name):
            return convert_to_tensor(self._is_scalar_helper(self.event_shape, self.event_shape_tensor),
                                     name="is_scalar_event")

    def is_scalar_batch(self, name="is_scalar_batch"):
        """A bool tensor: whether the batch shape is []."""
        with self._name_scope(name):
            return convert_to_tensor(self._is_scalar_helper(self.batch_shape, self.batch_shape_tensor),
                                     name="is_scalar_batch")

    def _is_scalar_helper(self, static_shape, dynamic_shape_fn):
        if static_shape.ndims is not None:
            return static_shape.ndims == 0
        shape = dynamic_shape_fn()
        if shape.shape.ndims is not None and shape.shape.dims[0] is not None:
            return shape.shape.as_list() == [0]
        return math_ops.equal(array_ops.shape(shape)[0], 0)

    # --- sampling

    def _sample_n(self, n, seed=None):
        raise NotImplementedError(f"sample_n is not implemented: {type(self).__name__}")

    def sample(self, sample_shape=(), seed=None, name="sample"):
        """Samples of shape `sample_shape + batch_shape + event_shape` (tf.distributions'
        `sample`). `seed` is an op-level seed combined with the graph's as every random op's is; a
        distribution that draws from two random ops derives the second's seed from it as TF does.
        Gradients flow to the parameters where `reparameterization_type` is FULLY_REPARAMETERIZED."""
        with self._name_scope(name, values=[sample_shape]):
            sample_shape = convert_to_tensor(sample_shape, dtype=dtypes.int32, name="sample_shape")
            sample_shape, n = self._expand_sample_shape_to_vector(sample_shape, "sample_shape")
            samples = self._sample_n(n, seed)
            batch_event_shape = array_ops.shape(samples)[1:]
            final_shape = array_ops.concat([sample_shape, batch_event_shape], 0)
            samples = array_ops.reshape(samples, final_shape)
            return self._set_sample_static_shape(samples, sample_shape)

    def _expand_sample_shape_to_vector(self, x, name):
        """`x` as a vector (a scalar becomes [x]) and the product of its elements."""
        static = get_static_value(x)
        prod = math_ops.reduce_prod(x) if static is None else np.prod(static, dtype=np.int32)
        ndims = x.shape.ndims
        if ndims is None:
            x = array_ops.reshape(x, [-1])
        elif ndims == 0:
            if static is not None:
                x = convert_to_tensor(np.array([static], dtype=np.int32), name=name)
            else:
                x = array_ops.reshape(x, [1])
        elif ndims != 1:
            raise ValueError(f"sample_shape is neither scalar nor vector: shape {x.shape}")
        return x, prod

    def _set_sample_static_shape(self, x, sample_shape):
        """Sets what is known of a sample's static shape: sample_shape + batch_shape + event_shape."""
        static = get_static_value(sample_shape)
        sample_shape = TensorShape(None if static is None else [int(d) for d in static])
        ndims = x.shape.ndims
        sample_ndims = sample_shape.ndims
        batch_ndims = self.batch_shape.ndims
        event_ndims = self.event_shape.ndims
        if ndims is None and None not in (sample_ndims, batch_ndims, event_ndims):
            ndims = sample_ndims + batch_ndims + event_ndims
            x.set_shape([None] * ndims)
        if ndims is not None and sample_ndims is not None:
            x.set_shape(x.shape.merge_with(sample_shape.concatenate([None] * (ndims - sample_ndims))))
        if ndims is not None and event_ndims is not None:
            x.set_shape(x.shape.merge_with(TensorShape([None] * (ndims - event_ndims)).concatenate(self.event_shape)))
        if batch_ndims is not None and ndims is not None:
            if sample_ndims is None and event_ndims is not None:
                sample_ndims = ndims - batch_ndims - event_ndims
            elif event_ndims is None and sample_ndims is not None:
                event_ndims = ndims - batch_ndims - sample_ndims
            if sample_ndims is not None and event_ndims is not None:
                want = TensorShape([None] * sample_ndims).concatenate(self.batch_shape).concatenate([None] * event_ndims)
                x.set_shape(x.shape.merge_with(want))
        return x

    # --- densities and distribution functions (each falls back on its twin, as TF's do)

    def _value(self, value):
        return convert_to_tensor(value, name="value", preferred_dtype=self.dtype)

    def _fallback(self, name, value, first, second, transform):
        with self._name_scope(name, values=[value]):
            value = self._value(value)
            try:
                return getattr(self, first)(value)
            except NotImplementedError as original:
                try:
                    return transform(getattr(self, second)(value))
                except NotImplementedError:
                    raise original from None

    def _log_prob(self, value):
        raise NotImplementedError(f"log_prob is not implemented: {type(self).__name__}")

    def log_prob(self, value, name="log_prob"):
        """The log of the probability density (or mass) at `value`, per batch member."""
        return self._fallback(name, value, "_log_prob", "_prob", math_ops.log)

    def _prob(self, value):
        raise NotImplementedError(f"prob is not implemented: {type(self).__name__}")

    def prob(self, value, name="prob"):
        """The probability density (or mass) at `value`."""
        return self._fallback(name, value, "_prob", "_log_prob", math_ops.exp)

    def _log_cdf(self, value):
        raise NotImplementedError(f"log_cdf is not implemented: {type(self).__name__}")

    def log_cdf(self, value, name="log_cdf"):
        """log P[X <= value]."""
        return self._fallback(name, value, "_log_cdf", "_cdf", math_ops.log)

    def _cdf(self, value):
        raise NotImplementedError(f"cdf is not implemented: {type(self).__name__}")

    def cdf(self, value, name="cdf"):
        """P[X <= value]."""
        return self._fallback(name, value, "_cdf", "_log_cdf", math_ops.exp)

    def _log_survival_function(self, value):
        raise NotImplementedError(f"log_survival_function is not implemented: {type(self).__name__}")

    def log_survival_function(self, value, name="log_survival_function"):
        """log P[X > value]."""
        return self._fallback(name, value, "_log_survival_function", "cdf", lambda c: math_ops.log1p(-c))

    def _survival_function(self, value):
        raise NotImplementedError(f"survival_function is not implemented: {type(self).__name__}")

    def survival_function(self, value, name="survival_function"):
        """P[X > value] = 1 - cdf(value)."""
        return self._fallback(name, value, "_survival_function", "cdf", lambda c: 1.0 - c)

    def _quantile(self, value):
        raise NotImplementedError(f"quantile is not implemented: {type(self).__name__}")

    def quantile(self, value, name="quantile"):
        """The inverse of the cdf: x with P[X <= x] = value."""
        with self._name_scope(name, values=[value]):
            return self._quantile(self._value(value))

    # --- statistics

    def _entropy(self):
        raise NotImplementedError(f"entropy is not implemented: {type(self).__name__}")

    def entropy(self, name="entropy"):
        """The Shannon entropy in nats, per batch member."""
        with self._name_scope(name):
            return self._entropy()

    def _mean(self):
        raise NotImplementedError(f"mean is not implemented: {type(self).__name__}")

    def mean(self, name="mean"):
        with self._name_scope(name):
            return self._mean()

    def _variance(self):
        raise NotImplementedError(f"variance is not implemented: {type(self).__name__}")

    def variance(self, name="variance"):
        """E[(X - E[X])^2], element-wise over the event (the covariance's diagonal)."""
        with self._name_scope(name):
            try:
                return self._variance()
            except NotImplementedError as original:
                try:
                    return math_ops.square(self._stddev())
                except NotImplementedError:
                    raise original from None

    def _stddev(self):
        raise NotImplementedError(f"stddev is not implemented: {type(self).__name__}")

    def stddev(self, name="stddev"):
        with self._name_scope(name):
            try:
                return self._stddev()
            except NotImplementedError as original:
                try:
                    return math_ops.sqrt(self._variance())
                except NotImplementedError:
                    raise original from None

    def _covariance(self):
        raise NotImplementedError(f"covariance is not implemented: {type(self).__name__}")

    def covariance(self, name="covariance"):
        """The covariance matrix of each batch member's event (for vector events: shape
        batch_shape + [k, k])."""
        with self._name_scope(name):
            return self._covariance()

    def _mode(self):
        raise NotImplementedError(f"mode is not implemented: {type(self).__name__}")

    def mode(self, name="mode"):
        with self._name_scope(name):
            return self._mode()

    def cross_entropy(self, other, name="cross_entropy"):
        """H[self, other] = entropy(self) + KL(self || other), from the registered KL."""
        from actorflow.distributions import kullback_leibler
        with self._name_scope(name):
            return kullback_leibler.cross_entropy(self, other, allow_nan_stats=self.allow_nan_stats)

    def kl_divergence(self, other, name="kl_divergence"):
        """KL(self || other) by the function registered for the two types (RegisterKL)."""
        from actorflow.distributions import kullback_leibler
        with self._name_scope(name):
            return kullback_leibler.kl_divergence(self, other, allow_nan_stats=self.allow_nan_stats)

    def __str__(self):
        batch = f", batch_shape={self.batch_shape}" if self.batch_shape.ndims is not None else ""
        event = f", event_shape={self.event_shape}" if self.event_shape.ndims is not None else ""
        return f'af.distributions.{type(self).__name__}("{self.name}"{batch}{event}, dtype={self.dtype.name})'

    def __repr__(self):
        return (f"<af.distributions.{type(self).__name__} '{self.name}' batch_shape={self.batch_shape} "
                f"event_shape={self.event_shape} dtype={self.dtype.name}>")

    @contextlib.contextmanager
    def _name_scope(self, name=None, values=None):
        with name_scope(self.name):
            with name_scope(name) as scope:
                yield scope


class ScalarDistribution(Distribution):
    """A distribution over scalars: event shape [] (Normal, Bernoulli, Gamma...)."""

    def _event_shape_tensor(self):
        return convert_to_tensor([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])
