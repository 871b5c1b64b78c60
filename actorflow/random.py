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
    fold_in,
    multinomial,
    split,
    stateless_binomial,
    stateless_categorical,
    stateless_gamma,
    stateless_normal,
    stateless_parameterized_truncated_normal,
    stateless_poisson,
    stateless_truncated_normal,
    stateless_uniform,
)
from actorflow.graph.ops.random_more_ops import random_gamma as gamma
from actorflow.graph.ops.random_more_ops import random_poisson as poisson
from actorflow.graph.ops.random_more_ops import random_shuffle as shuffle
from actorflow.graph.ops.random_ops import get_seed, set_random_seed, truncated_normal
from actorflow.graph.ops.random_ops import random_normal as normal
from actorflow.graph.ops.random_ops import random_uniform as uniform
from actorflow.random_generator import (
    Algorithm,
    Generator,
    create_rng_state,
    get_global_generator,
    set_global_generator,
)

__all__ = ["normal", "uniform", "truncated_normal", "set_random_seed", "get_seed", "categorical", "multinomial",
           "shuffle", "gamma", "poisson", "stateless_uniform", "stateless_normal", "stateless_truncated_normal",
           "stateless_categorical", "log_uniform_candidate_sampler",
           "uniform_candidate_sampler", "fixed_unigram_candidate_sampler", "learned_unigram_candidate_sampler",
           "all_candidate_sampler", "fold_in", "split", "stateless_binomial", "stateless_gamma", "stateless_poisson",
           "stateless_parameterized_truncated_normal", "stateless_multinomial", "Algorithm", "Generator", "create_rng_state",
           "get_global_generator", "set_global_generator"]


def stateless_multinomial(logits, num_samples, seed, output_dtype=None, name=None):
    """stateless_categorical under its deprecated name and argument (tf.random.stateless_multinomial)."""
    from actorflow.graph import dtypes
    return stateless_categorical(logits, num_samples, seed, dtype=output_dtype or dtypes.int64, name=name)
