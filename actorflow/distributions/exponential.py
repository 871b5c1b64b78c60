"""The Exponential distribution (tf.distributions.Exponential): a Gamma with concentration 1."""
from __future__ import annotations

import numpy as np

from actorflow.distributions.gamma import Gamma
from actorflow.distributions.parameters import convert_params, owner
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, random_ops

__all__ = ["Exponential"]


class Exponential(Gamma):
    """Exponential distributions with rate `rate`: density rate e^(-rate x) (tf.distributions.Exponential).
    Samples are -log(u) / rate (FULLY_REPARAMETERIZED). Being a Gamma, KL(Exponential || Gamma) and its
    reverse use the Gamma-Gamma KL."""

    def __init__(self, rate, validate_args=False, allow_nan_stats=True, name="Exponential"):
        parameters = dict(locals())
        with name_scope(name) as name:
            r = convert_params({"rate": rate}, owner(name))["rate"]
        super().__init__(concentration=array_ops.ones([], dtype=r.dtype), rate=r, validate_args=validate_args,
                         allow_nan_stats=allow_nan_stats, name=name)
        self._parameters = parameters
        self._graph_parents += [self._rate]

    @staticmethod
    def _param_shapes(sample_shape):
        return {"rate": convert_to_tensor(sample_shape, dtype=dtypes.int32)}

    def _log_survival_function(self, value):
        return self._log_prob(value) - math_ops.log(self._rate)

    def _sample_n(self, n, seed=None):
        shape = array_ops.concat([[n], array_ops.shape(self._rate)], 0)
        # (0, 1): the smallest positive float keeps log finite
        u = random_ops.random_uniform(shape, minval=np.finfo(self.dtype.as_numpy_dtype).tiny, maxval=1.0, seed=seed,
                                      dtype=self.dtype)
        return -math_ops.log(u) / self._rate
