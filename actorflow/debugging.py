"""The `af.debugging` namespace: runtime checks under TF 1.x's `tf.compat.v1.debugging` names.

Everything here is defined elsewhere (graph/ops/check_ops.py, numerics.py, math_ops.py); this
module only gathers the public names.
"""
from actorflow.graph.ops.check_ops import (
    Assert,
    assert_equal,
    assert_greater,
    assert_greater_equal,
    assert_integer,
    assert_less,
    assert_less_equal,
    assert_near,
    assert_negative,
    assert_non_negative,
    assert_non_positive,
    assert_none_equal,
    assert_positive,
    assert_proper_iterable,
    assert_rank,
    assert_rank_at_least,
    assert_rank_in,
    assert_same_float_dtype,
    assert_scalar,
    assert_shapes,
    assert_type,
    is_non_decreasing,
    is_numeric_tensor,
    is_strictly_increasing,
)
from actorflow.graph.ops.math_ops import is_finite, is_inf, is_nan
from actorflow.graph.ops.numerics import check_numerics, disable_check_numerics, enable_check_numerics

# (set_log_device_placement and get_log_device_placement are the sessions': the package root puts them here)
from actorflow.graph.ops.numerics import verify_tensor_all_finite as assert_all_finite

__all__ = [
    "enable_check_numerics", "disable_check_numerics",
    "Assert", "assert_all_finite", "assert_equal", "assert_greater", "assert_greater_equal", "assert_integer",
    "assert_less", "assert_less_equal", "assert_near", "assert_negative", "assert_non_negative",
    "assert_non_positive", "assert_none_equal", "assert_positive", "assert_proper_iterable", "assert_rank",
    "assert_rank_at_least", "assert_rank_in", "assert_same_float_dtype", "assert_scalar", "assert_shapes",
    "assert_type", "check_numerics", "is_finite", "is_inf", "is_nan", "is_non_decreasing", "is_numeric_tensor",
    "is_strictly_increasing", "verify_tensor_all_finite",
]

verify_tensor_all_finite = assert_all_finite
