"""The `af.math` namespace: element-wise math, comparisons and reductions under TF 1.x's
`tf.compat.v1.math` names.

Everything here is defined in graph/ops/math_ops.py (and the monotonicity tests in check_ops.py);
this module only gathers the public names, which are also at the top level of `af`.
"""
from actorflow.graph.ops.check_ops import is_non_decreasing, is_strictly_increasing
from actorflow.graph.ops.math_ops import *  # noqa: F401,F403
from actorflow.graph.ops.math_ops import __all__ as _math_all

__all__ = list(_math_all) + ["is_non_decreasing", "is_strictly_increasing"]

# Ordering and segment ops (graph/ops/sort_ops.py, segment_ops.py, array_ops/gathering.py).
from actorflow.graph.ops.array_ops.gathering import unsorted_segment_sum  # noqa: E402
from actorflow.graph.ops.segment_ops import *  # noqa: E402,F401,F403
from actorflow.graph.ops.segment_ops import __all__ as _segment_all  # noqa: E402
from actorflow.graph.ops.sort_ops import cumprod, cumsum, top_k  # noqa: E402

__all__ += ["unsorted_segment_sum", "cumsum", "cumprod", "top_k"] + list(_segment_all)
