"""The `af.random` namespace: random tensors and candidate samplers under TF 1.x's `tf.random` names.

Everything here is defined in graph/ops/random_ops.py and candidate_sampling_ops.py; this module only
gathers the names `tf.compat.v1.random` gives them (`normal` for `random_normal`...).
"""
from actorflow.graph.ops.candidate_sampling_ops import (
    all_candidate_sampler,
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from actorflow.graph.ops.random_more_ops import (
    categorical,
    multinomial,
    stateless_categorical,
    stateless_normal,
    stateless_truncated_normal,
    stateless_uniform,
)
from actorflow.graph.ops.random_more_ops import random_gamma as gamma
from actorflow.graph.ops.random_more_ops import random_poisson as poisson
from actorflow.graph.ops.random_more_ops import random_shuffle as shuffle
from actorflow.graph.ops.random_ops import get_seed, set_random_seed, truncated_normal
from actorflow.graph.ops.random_ops import random_normal as normal
from actorflow.graph.ops.random_ops import random_uniform as uniform

__all__ = ["normal", "uniform", "truncated_normal", "set_random_seed", "get_seed", "categorical", "multinomial",
           "shuffle", "gamma", "poisson", "stateless_uniform", "stateless_normal", "stateless_truncated_normal",
           "stateless_categorical", "log_uniform_candidate_sampler",
           "uniform_candidate_sampler", "fixed_unigram_candidate_sampler", "learned_unigram_candidate_sampler",
           "all_candidate_sampler"]
