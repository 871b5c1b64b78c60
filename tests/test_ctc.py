"""CTC loss and decoders against TensorFlow 2.21's values and gradients (tests/fixtures/make_ctc.py),
the loss against a brute-force sum over alignments, and errors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("ctc.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def _brute_force(logits, label, blank):
    """-log of the summed probability of every alignment that collapses to `label`."""
    T, C = logits.shape
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(C), repeat=T):
        out = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if out == label:
            total += np.prod([p[t, c] for t, c in enumerate(path)])
    return -np.log(total)


def test_loss_is_the_sum_over_alignments():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 4))
    labels = [[1, 1], [0, 2, 1]]
    idx = [[b, i] for b, lab in enumerate(labels) for i in range(len(lab))]
    vals = [v for lab in labels for v in lab]
    with af.Graph().as_default():
        sp = af.SparseTensor(np.array(idx, np.int64), np.array(vals, np.int32), np.array([2, 3], np.int64))
        loss = af.nn.ctc_loss(sp, af.constant(x), af.constant([5, 4]))
        with af.Session() as s:
            got = s.run(loss)
    np.testing.assert_allclose(got, [_brute_force(x[:5, 0], labels[0], 3), _brute_force(x[:4, 1], labels[1], 3)],
                               rtol=1e-7)       # TF's (and our) log-sum-exp rounds through float32


def test_errors_name_the_problem():
    x = np.zeros((2, 1, 3))
    with af.Graph().as_default():
        sp = af.SparseTensor(np.array([[0, 0], [0, 1], [0, 2]], np.int64), np.array([0, 1, 0], np.int32),
                             np.array([1, 3], np.int64))
        too_long = af.nn.ctc_loss(sp, af.constant(x), af.constant([2]))
        bad = af.SparseTensor(np.array([[0, 0], [0, 1]], np.int64), np.array([2, 0], np.int32),
                              np.array([1, 2], np.int64))
        blank_label = af.nn.ctc_loss(bad, af.constant(x), af.constant([2]))
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="not enough time"):
                s.run(too_long)
            with pytest.raises(af.errors.InvalidArgumentError, match="null label"):
                s.run(blank_label)
    with pytest.raises(TypeError, match="SparseTensor"):
        af.nn.ctc_loss(np.zeros((1, 2), np.int32), x, [2])

