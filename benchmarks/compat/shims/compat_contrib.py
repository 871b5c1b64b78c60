"""`from tensorflow.contrib import rnn` for the corpus: TF 2.21 has no contrib, so the port imports
`rnn` from here, which resolves names in the library under test (AF_COMPAT_LIB=actorflow or
tensorflow) the way contrib.rnn re-exported them: cells from nn.rnn_cell, static_rnn and friends
from nn; contrib.rnn's own names from actorflow.contrib.rnn, and for TensorFlow 2.21's side the ones
the corpus calls (OutputProjectionWrapper) written here from TF 1.15's code.

`HParams` is tf.contrib.training.HParams for TensorFlow 2.21's side (its constructor, attribute access,
`override_from_dict`, `values`, `add_hparam`, `set_hparam`), which the port imports from here.

`contrib_learn()` is tf.contrib.learn for TensorFlow 2.21's side, as the corpus calls it
(`learn.preprocessing.VocabularyProcessor`, written here from TF 1.x's behaviour).

`add_layer_norm(tf)` gives TensorFlow 2.21's compat.v1 module the tf.contrib.layers.layer_norm that
TF-1.x programs such as BERT's modeling.py call (TF 1.15's: beta and gamma variables under the
"LayerNorm" scope, moments over the last axis, epsilon 1e-12), for the drivers; under actorflow it
leaves af.contrib alone."""
import importlib
import os
import pickle
import re
import types

import numpy as np

_lib = os.environ.get("AF_COMPAT_LIB", "actorflow")
_tf = importlib.import_module("actorflow" if _lib == "actorflow" else "tensorflow.compat.v1")


def _lookup(name):
    spaces = [_tf.nn.rnn_cell, _tf.nn]
    if _lib == "actorflow":         # the contrib.rnn names of actorflow's own (OutputProjectionWrapper...)
        spaces.append(importlib.import_module("actorflow.contrib.rnn"))
    for space in spaces:
        if hasattr(space, name):
            return getattr(space, name)
    if _lib != "actorflow" and name in _TF1_CONTRIB:
        return _TF1_CONTRIB[name]()
    raise AttributeError(f"contrib.rnn.{name} has no counterpart in {_lib}")


def _output_projection_wrapper():
    """TF 1.15's contrib.rnn.OutputProjectionWrapper (core_rnn_cell.py) for TensorFlow 2.21's side: the
    cell's output times `kernel` plus `bias` (TF 1.x's _Linear: made on the first call, after the
    cell's variables, glorot-uniform kernel, zero bias), then `activation`."""
    tf = _tf

    class OutputProjectionWrapper(tf.nn.rnn_cell.RNNCell):
        def __init__(self, cell, output_size, activation=None, reuse=None):
            super().__init__(_reuse=reuse)
            if output_size < 1:
                raise ValueError(f"Parameter output_size must be > 0: {output_size}.")
            self._cell, self._output_size, self._activation = cell, output_size, activation
            self._weights = None

        @property
        def state_size(self):
            return self._cell.state_size

        @property
        def output_size(self):
            return self._output_size

        def zero_state(self, batch_size, dtype):
            with tf.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
                return self._cell.zero_state(batch_size, dtype)

        def call(self, inputs, state):
            output, res_state = self._cell(inputs, state)
            if self._weights is None:
                self._weights = tf.get_variable("kernel", [output.shape[-1], self._output_size], dtype=output.dtype)
                self._biases = tf.get_variable("bias", [self._output_size], dtype=output.dtype,
                                               initializer=tf.constant_initializer(0.0, dtype=output.dtype))
            projected = tf.nn.bias_add(tf.matmul(output, self._weights), self._biases)
            if self._activation:
                projected = self._activation(projected)
            return projected, res_state

    return OutputProjectionWrapper


_TF1_CONTRIB = {"OutputProjectionWrapper": _output_projection_wrapper}


class _Rnn(types.ModuleType):
    def __getattr__(self, name):
        return _lookup(name)


rnn = _Rnn("rnn")


def add_layer_norm(tf):
    if hasattr(tf, "contrib"):
        return

    def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
        with tf.variable_scope(scope, "LayerNorm"):
            shape = inputs.shape[-1:]
            beta = tf.get_variable("beta", shape, initializer=tf.zeros_initializer())
            gamma = tf.get_variable("gamma", shape, initializer=tf.ones_initializer())
            mean, var = tf.nn.moments(inputs, [inputs.shape.ndims - 1], keep_dims=True)
            return tf.nn.batch_normalization(inputs, mean, var, offset=beta, scale=gamma, variance_epsilon=1e-12)
    tf.contrib = types.SimpleNamespace(layers=types.SimpleNamespace(layer_norm=layer_norm))


class HParams:
    """tf.contrib.training.HParams's common part: hyperparameters as attributes."""

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        self.__dict__.update(kwargs)

    def add_hparam(self, name, value):
        if name in self.__dict__:
            raise ValueError(f"Hyperparameter name is reserved: {name}")
        setattr(self, name, value)

    def set_hparam(self, name, value):
        setattr(self, name, value)

    def override_from_dict(self, values_dict):
        self.__dict__.update(values_dict)
        return self

    def values(self):
        return dict(self.__dict__)


def tf_slim_on_tf_2_21():
    """tf_slim (the bench extra) for TensorFlow 2.21's side: its layers test `isinstance(x, ops.Tensor)`
    against tensorflow.python.framework.ops, which TF 2.21 no longer exports; the name is given back
    (tf.Tensor, the class it was). Returns the tf_slim module."""
    from tensorflow.python.framework import ops

    if not hasattr(ops, "Tensor"):
        import tensorflow as tf_root
        ops.Tensor = tf_root.Tensor
    import tf_slim
    return tf_slim



class _VocabularyProcessor:
    """TF 1.x's tf.contrib.learn.preprocessing.VocabularyProcessor for TensorFlow 2.21's side, as the
    corpus uses it: each document split by TF 1.x's tokenizer regex; ids in order of first appearance
    from 1, 0 for an unknown word and for padding; each document cut or zero-padded to
    max_document_length; `save` pickles it and `restore` reads it back."""

    _TOKENS = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z][a-z]+(?=[A-Z])|[\'\w\-]+", re.UNICODE)

    def __init__(self, max_document_length, min_frequency=0, vocabulary=None, tokenizer_fn=None):
        if min_frequency or vocabulary is not None or tokenizer_fn is not None:
            raise NotImplementedError("the corpus stand-in takes max_document_length only")
        self.max_document_length = int(max_document_length)
        self.vocabulary_ = {"<UNK>": 0}

    def fit_transform(self, raw_documents, unused_y=None):
        raw_documents = list(raw_documents)
        for document in raw_documents:
            for token in self._TOKENS.findall(document):
                self.vocabulary_.setdefault(token, len(self.vocabulary_))
        return self.transform(raw_documents)

    def transform(self, raw_documents):
        for document in raw_documents:
            ids = np.zeros(self.max_document_length, np.int64)
            for k, token in enumerate(self._TOKENS.findall(document)[:self.max_document_length]):
                ids[k] = self.vocabulary_.get(token, 0)
            yield ids

    def save(self, filename):
        with open(filename, "wb") as f:
            pickle.dump(self, f)

    @classmethod
    def restore(cls, filename):
        with open(filename, "rb") as f:
            return pickle.load(f)


def contrib_learn():
    """tf.contrib.learn for the corpus: actorflow's under actorflow, and for TensorFlow 2.21's side,
    which has none, a namespace holding the stand-in above as preprocessing.VocabularyProcessor."""
    if _lib == "actorflow":
        return importlib.import_module("actorflow.contrib.learn")
    return types.SimpleNamespace(preprocessing=types.SimpleNamespace(VocabularyProcessor=_VocabularyProcessor))
