"""tf.signal framing, windows, overlap-add and the STFT against TensorFlow 2.21
(tests/fixtures/signal.json, make_signal.py): values, static shapes and gradients."""
from __future__ import annotations

import pytest

from tests import tf_reference

FIX = tf_reference.load("signal.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)




def test_frame_needs_static_lengths_and_names_the_signal():
    import actorflow as af
    with af.Graph().as_default():
        p = af.placeholder(af.float32, [None], name="wave")
        with pytest.raises(ValueError, match="wave"):
            af.signal.frame(p, 4, 2)
