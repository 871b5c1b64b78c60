"""af.contrib.tpu: what TF 1.15's tf.contrib.tpu gives a program that runs its TPU code on CPUs
(`use_tpu=False`): TPUEstimator and its spec and configs (af.estimator.tpu), and CrossShardOptimizer.

actorflow has no TPU. CrossShardOptimizer runs as one shard: TF scales a MEAN-reduced loss by
1/num_shards and sums the gradients across the replicas, which for one replica changes nothing;
so it applies the wrapped optimizer's update unchanged (TF itself warns and assumes one shard outside
a TPU shard context, then has no CPU kernel for its cross-replica sum).
"""
from __future__ import annotations

import logging

from actorflow.estimator.tpu import (
    ExamplesPerSecondHook,
    InputPipelineConfig,
    RunConfig,
    TPUConfig,
    TPUEstimator,
    TPUEstimatorSpec,
)
from actorflow.losses import Reduction
from actorflow.train.optimizer import Optimizer, WrappedOptimizer

__all__ = ["TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig", "InputPipelineConfig",
           "CrossShardOptimizer", "ExamplesPerSecondHook"]

log = logging.getLogger(__name__)


class CrossShardOptimizer(WrappedOptimizer):
    """An optimizer that averages (MEAN) or sums (SUM) the gradients of TPU shards before `opt`
    applies them (tf.contrib.tpu.CrossShardOptimizer); here always one shard (module docstring)."""

    def __init__(self, opt, reduction=Reduction.MEAN, name="CrossShardOptimizer", group_assignment=None):
        if reduction not in (Reduction.SUM, Reduction.MEAN):
            raise ValueError(f"Unsupported reduction: {reduction}.")
        if not isinstance(opt, Optimizer):
            raise TypeError(f"CrossShardOptimizer only works with tf.train.Optimizer and not Keras Optimizer: "
                            f"given {opt!r}")
        if group_assignment is not None and any(len(g) != 1 for g in group_assignment):
            raise ValueError(f"CrossShardOptimizer: group_assignment {group_assignment} needs "
                             f"{sum(len(g) for g in group_assignment)} shards; actorflow runs one (no TPU)")
        super().__init__(False, name)
        self._opt = opt
        self._reduction = reduction
        self._group_assignment = group_assignment

    def compute_gradients(self, loss, var_list=None, **kwargs):
        log.warning("CrossShardOptimizer should be used within a tpu_shard_context, but got unset "
                    "number_of_shards. Assuming 1.")
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._opt.apply_gradients(list(grads_and_vars), global_step=global_step, name=name)
