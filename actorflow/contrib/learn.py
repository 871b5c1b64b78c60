"""af.contrib.learn: the text preprocessing of tf.contrib.learn (TF 1.x) that TF-1.x text
classifiers use, `preprocessing.VocabularyProcessor` with its `CategoricalVocabulary` and
tokenizer, and `ModeKeys` (the learn Estimator's modes, which tensorflow/nmt names its graphs by).

A VocabularyProcessor maps documents to fixed-length int64 id vectors: `fit` tokenizes every
document (TF's tokenizer regex: runs of capitals, capitalised words before another capital, and
runs of word characters, apostrophes and hyphens), gives each new token the next id (0 is the unknown
token) and, with `min_frequency`, keeps only tokens seen more often than that, renumbered by
descending frequency then alphabetically; `transform` writes each document's first
`max_document_length` token ids, zero-padded. `save` pickles the processor as TF does; `restore`
reads files saved by actorflow or by TensorFlow (TF's class paths map to these classes), and
refuses any other class a pickle names, so a restored file cannot run code.
"""
from __future__ import annotations

import collections
import io
import pickle
import re
import types

import numpy as np

from actorflow import gfile

__all__ = ["preprocessing", "ModeKeys"]

class ModeKeys:
    """tf.contrib.learn.ModeKeys: the values are tf.estimator.ModeKeys' ('infer' for INFER)."""
    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"


TOKENIZER_RE = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z][a-z]+(?=[A-Z])|[\'\w\-]+", re.UNICODE)


def tokenizer(iterator):
    """Yields each document of `iterator` as its list of tokens (TOKENIZER_RE's matches)."""
    for value in iterator:
        yield TOKENIZER_RE.findall(value)


class CategoricalVocabulary:
    """Categories to consecutive ids, 0 being `unknown_token`; frozen, unseen categories map to 0."""

    def __init__(self, unknown_token="<UNK>", support_reverse=True):
        self._unknown_token = unknown_token
        self._mapping = {unknown_token: 0}
        self._support_reverse = support_reverse
        if support_reverse:
            self._reverse_mapping = [unknown_token]
        self._freq = collections.defaultdict(int)
        self._freeze = False

    def __len__(self):
        return len(self._mapping)

    def freeze(self, freeze=True):
        self._freeze = freeze

    def get(self, category):
        """The id of `category`, added with the next id unless the vocabulary is frozen (then 0)."""
        found = self._mapping.get(category)
        if found is not None:
            return found
        if self._freeze:
            return 0
        found = self._mapping[category] = len(self._mapping)
        if self._support_reverse:
            self._reverse_mapping.append(category)
        return found

    def add(self, category, count=1):
        """Counts `count` more sightings of `category` (adding it first if new)."""
        if self.get(category) > 0:
            self._freq[category] += count

    def trim(self, min_frequency, max_frequency=-1):
        """Keeps the categories seen more than `min_frequency` times (and fewer than `max_frequency`,
        when positive), renumbered by descending count, ties alphabetical."""
        ranked = sorted(self._freq.items(), key=lambda kv: (isinstance(kv[0], str), kv[0]))
        ranked.sort(key=lambda kv: kv[1], reverse=True)
        self._mapping = {self._unknown_token: 0}
        if self._support_reverse:
            self._reverse_mapping = [self._unknown_token]
        kept = []
        for category, count in ranked:
            if max_frequency > 0 and count >= max_frequency:
                continue
            if count <= min_frequency:
                break
            self._mapping[category] = len(self._mapping)
            if self._support_reverse:
                self._reverse_mapping.append(category)
            kept.append((category, count))
        self._freq = dict(kept)

    def reverse(self, class_id):
        """The category of id `class_id`."""
        if not self._support_reverse:
            raise ValueError("This vocabulary wasn't initialized with support_reverse to support reverse() function.")
        return self._reverse_mapping[class_id]


class VocabularyProcessor:
    """Documents to fixed-length id vectors (tf.contrib.learn.preprocessing.VocabularyProcessor)."""

    def __init__(self, max_document_length, min_frequency=0, vocabulary=None, tokenizer_fn=None):
        self.max_document_length = int(max_document_length)
        self.min_frequency = min_frequency
        self.vocabulary_ = vocabulary if vocabulary else CategoricalVocabulary()
        self._tokenizer = tokenizer_fn if tokenizer_fn else tokenizer

    def fit(self, raw_documents, unused_y=None):
        """Builds the vocabulary from `raw_documents` (an iterable of strings) and freezes it."""
        for tokens in self._tokenizer(raw_documents):
            for token in tokens:
                self.vocabulary_.add(token)
        if self.min_frequency > 0:
            self.vocabulary_.trim(self.min_frequency)
        self.vocabulary_.freeze()
        return self

    def fit_transform(self, raw_documents, unused_y=None):
        raw_documents = list(raw_documents)
        self.fit(raw_documents)
        return self.transform(raw_documents)

    def transform(self, raw_documents):
        """Yields each document as an int64 vector of `max_document_length` token ids, zero-padded."""
        for tokens in self._tokenizer(raw_documents):
            ids = np.zeros(self.max_document_length, np.int64)
            for i, token in enumerate(tokens[:self.max_document_length]):
                ids[i] = self.vocabulary_.get(token)
            yield ids

    def reverse(self, documents):
        """Yields each id vector of `documents` as its tokens joined by spaces."""
        for item in documents:
            yield " ".join(self.vocabulary_.reverse(class_id) for class_id in item)

    def save(self, filename):
        with gfile.GFile(filename, "wb") as f:
            f.write(pickle.dumps(self))

    @classmethod
    def restore(cls, filename):
        """The processor saved in `filename` (by actorflow or TensorFlow 1.x)."""
        with gfile.GFile(filename, "rb") as f:
            data = f.read()
        try:
            out = _VocabUnpickler(io.BytesIO(data)).load()
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(f"VocabularyProcessor.restore: {filename}: {e}") from None
        if not isinstance(out, VocabularyProcessor):
            raise TypeError(f"VocabularyProcessor.restore: {filename} holds a {type(out).__name__}, not a "
                            "VocabularyProcessor")
        return out


_TF_TEXT = "tensorflow.contrib.learn.python.learn.preprocessing"
_ALLOWED = {
    (__name__, "VocabularyProcessor"): VocabularyProcessor,
    (__name__, "CategoricalVocabulary"): CategoricalVocabulary,
    (__name__, "tokenizer"): tokenizer,
    (f"{_TF_TEXT}.text", "VocabularyProcessor"): VocabularyProcessor,
    (f"{_TF_TEXT}.text", "tokenizer"): tokenizer,
    (f"{_TF_TEXT}.categorical_vocabulary", "CategoricalVocabulary"): CategoricalVocabulary,
    ("collections", "defaultdict"): collections.defaultdict,
    ("builtins", "int"): int,
    ("__builtin__", "int"): int,
    ("__builtin__", "long"): int,          # what protocol 2 (and Python 2) call int
}


class _VocabUnpickler(pickle.Unpickler):
    """Unpickles only a VocabularyProcessor's own classes (TF's module paths included)."""

    def find_class(self, module, name):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a vocabulary file holds only a "
                                         "VocabularyProcessor")
        return found


preprocessing = types.SimpleNamespace(VocabularyProcessor=VocabularyProcessor,
                                      CategoricalVocabulary=CategoricalVocabulary, tokenizer=tokenizer)
