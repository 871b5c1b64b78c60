"""af.contrib: the parts of tf.contrib (TF 1.15) that TF-1.x programs use most, so that they port
by their import: `tf.contrib.layers` (slim's layers, initializers, regularizers, optimize_loss),
`tf.contrib.rnn`, `tf.contrib.seq2seq` (sequence_loss, dynamic_decode with the basic decoder, its
training, greedy and custom helpers, Bahdanau and Luong attention, beam search), `tf.contrib.legacy_seq2seq` and
`tf.contrib.framework` (arg_scope, model variables, the global step),
`tf.contrib.crf` (linear-chain CRF: log-likelihood, Viterbi decoding), `tf.contrib.factorization.KMeans`, `tf.contrib.predictor`, `tf.contrib.lookup` (vocabulary tables), `tf.contrib.image` (transform, rotate, translate), `tf.contrib.losses` (old argument order, metric learning), `tf.contrib.distributions` (with the multivariate normals),
`tf.contrib.opt` (LazyAdam, Nadam, AdamW/MomentumW, ScipyOptimizerInterface),
`tf.contrib.learn.preprocessing.VocabularyProcessor`, `tf.contrib.tensorboard.plugins.projector`,
`tf.contrib.training` (bucket_by_sequence_length, HParams, create_train_op, train, evaluate_once and
evaluate_repeatedly with their hooks), `tf.contrib.metrics`' streaming metrics,
`tf.contrib.slim`'s layer and scope names with slim.utils and slim.learning (create_train_op, train), slim.evaluation and slim's queue-based data pipeline
(dataset, tfexample_decoder, dataset_data_provider, parallel_reader, prefetch_queue), `tf.contrib.tpu` (TPUEstimator and CrossShardOptimizer run on
the CPU, as TF runs them with `use_tpu=False`), `tf.contrib.data`, `tf.contrib.cluster_resolver` and `tf.contrib.summary` (the op-based summary writers).

Everything here is built from actorflow's own layers, cells and ops; it defines no op.
"""
from __future__ import annotations

import types

from actorflow.contrib import (
    cluster_resolver,
    crf,
    data,
    distributions,
    factorization,
    framework,
    image,
    layers,
    learn,
    legacy_seq2seq,
    lookup,
    losses,
    metrics,
    opt,
    predictor,
    rnn,
    seq2seq,
    slim,
    summary,
    tensorboard,
    tpu,
    training,
)

__all__ = ["cluster_resolver", "data", "tpu", "summary", "crf", "lookup", "predictor", "image", "losses", "distributions", "factorization", "opt", "learn", "tensorboard", "framework", "layers", "rnn", "seq2seq", "legacy_seq2seq", "training", "slim", "metrics"]


def _util():
    from actorflow.graph.ops.infer import constant_value
    from actorflow.graph.tensor_util import make_ndarray, make_tensor_proto
    return types.SimpleNamespace(make_tensor_proto=make_tensor_proto, make_ndarray=make_ndarray,
                                 constant_value=constant_value)


def _stateless():
    from actorflow import random
    return types.SimpleNamespace(stateless_random_uniform=random.stateless_uniform,
                                 stateless_random_normal=random.stateless_normal,
                                 stateless_truncated_normal=random.stateless_truncated_normal,
                                 stateless_multinomial=random.stateless_multinomial)


def _compiler():
    from actorflow import xla
    return types.SimpleNamespace(jit=types.SimpleNamespace(experimental_jit_scope=xla.experimental.jit_scope))


def _signal():
    from actorflow import signal
    return signal


# tf.contrib's smaller namespaces, by what TF 1.x later named them: util (tensor protos), stateless
# (the stateless samplers), compiler.jit (the XLA scope) and signal.
_LAZY = {"util": _util, "stateless": _stateless, "compiler": _compiler, "signal": _signal}


def __getattr__(name):
    # tf.contrib.keras (TF 1.x's first home of Keras) is af.keras, imported on first use as af.keras is.
    if name == "keras":
        from actorflow import keras
        return keras
    if name in _LAZY:
        value = globals()[name] = _LAZY[name]()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
