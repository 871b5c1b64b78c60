"""tf.math special functions against TensorFlow 2.21 (tests/fixtures/special_more.json,
make_special_more.py): values, static shapes and gradients."""
from __future__ import annotations

import pytest

from tests import tf_reference

FIX = tf_reference.load("special_more.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


