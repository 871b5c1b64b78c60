"""TF 1.x's dimensions as a program sees them: indexing or iterating a TensorShape gives Dimension
objects, Dimension(None) for an unknown one (tensorflow/nmt's `x.shape[1].value or tf.shape(x)[1]`);
and the smaller TF-1.x names tensorflow/nmt uses (nest.is_sequence, contrib.learn.ModeKeys, test
sessions that fall back to the CPU)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.tensor_shape import UNKNOWN_DIMENSION


def test_an_unknown_dimension_has_tf1s_value_and_semantics():
    x = af.placeholder(af.float32, [None, 3])
    d0, d1 = x.shape[0], x.get_shape()[1]
    assert d0 is UNKNOWN_DIMENSION and d0.value is None and not d0
    assert repr(d0) == "Dimension(None)" and str(d0) == "?"
    assert d1.value == 3 and d1 == 3 and isinstance(d1, af.Dimension)
    assert (d0 == 3) is None and (d0 != 3) is None and (3 == d0) is None and (d0 < 2) is None
    assert (d0 * 2) is d0 and (2 + d0) is d0 and (d1 * d0) is d0
    assert d0.is_compatible_with(7) and d0.merge_with(4) == 4
    with pytest.raises(TypeError, match="unknown dimension"):
        int(d0)
    assert af.dimension_value(d0) is None and af.dimension_value(d1) == 3
    assert [d.value for d in x.shape] == [None, 3]
    assert af.TensorShape(None)[2] is UNKNOWN_DIMENSION
    assert pickle.loads(pickle.dumps(d0)) is UNKNOWN_DIMENSION
    # Dimensions go back into shapes as TF 1.x programs pass them.
    y = af.placeholder(af.float32, [x.shape[0], x.shape[1]])
    assert y.shape.as_list() == [None, 3] and af.TensorShape(list(x.shape)) == af.TensorShape([None, 3])
    n = x.shape[0].value or af.shape(x)[0]
    with af.Session() as sess:
        assert sess.run(n, {x: np.zeros((5, 3))}) == 5


def test_actorflows_own_code_still_reads_none():
    from actorflow.graph import tensor_shape
    probe = {"__name__": "actorflow.probe", "s": af.TensorShape([None, 2])}
    exec("got = s[0]; it = list(s)", probe)
    assert probe["got"] is None and probe["it"] == [None, 2]
    assert tensor_shape.TensorShape([None])[0] is UNKNOWN_DIMENSION     # this module is a program


def test_nmts_smaller_names():
    assert af.contrib.framework.nest.is_sequence((1, 2)) and not af.nest.is_sequence(3)
    assert (af.contrib.learn.ModeKeys.TRAIN, af.contrib.learn.ModeKeys.EVAL,
            af.contrib.learn.ModeKeys.INFER) == ("train", "eval", "infer")


class _GpuPlacedTest(af.test.TestCase):
    def runTest(self):
        with self.test_session() as sess:
            with af.device("/gpu:0"):
                v = af.constant(2.0) * 3.0
            assert sess.run(v) == 6.0
        with self.session(config=af.ConfigProto()) as sess:
            with af.device("/gpu:0"):
                w = af.constant(1.0) + 1.0
            with pytest.raises(af.errors.InvalidArgumentError, match="allow_soft_placement"):
                sess.run(w)


def test_test_sessions_place_gpu_ops_on_the_cpu_unless_a_config_is_given():
    result = _GpuPlacedTest().run()
    assert result.wasSuccessful(), result.failures + result.errors
