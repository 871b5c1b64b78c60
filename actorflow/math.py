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

# The rest of tf.math's names for what actorflow defines elsewhere (nn, array_ops, deprecated aliases),
# and the reductions and counts of graph/ops/math_more_ops.py.
from actorflow.graph.ops.array_ops.shapes import invert_permutation  # noqa: E402
from actorflow.graph.ops.deprecated import log_sigmoid, rint  # noqa: E402
from actorflow.graph.ops.math_more_ops import *  # noqa: E402,F401,F403
from actorflow.graph.ops.math_more_ops import __all__ as _more_all  # noqa: E402
from actorflow.graph.ops.math_ops import div_no_nan as divide_no_nan  # noqa: E402
from actorflow.graph.ops.nn_misc_ops import softsign, zero_fraction  # noqa: E402
from actorflow.graph.ops.nn_ops import in_top_k, l2_normalize, log_softmax, softmax, softplus  # noqa: E402

__all__ += list(_more_all) + ["invert_permutation", "log_sigmoid", "rint", "divide_no_nan", "softsign",
                              "zero_fraction", "in_top_k", "l2_normalize", "log_softmax", "softmax", "softplus"]

# Special functions (graph/ops/special_math_ops.py).
from actorflow.graph.ops.special_math_ops import betainc, igamma, igammac, lbeta, zeta  # noqa: E402

__all__ += ["betainc", "igamma", "igammac", "lbeta", "zeta"]

# Complex numbers (graph/ops/complex_ops.py).
from actorflow.graph.ops.complex_ops import angle, conj, imag, real  # noqa: E402

__all__ += ["angle", "conj", "imag", "real"]

# x * log(y) and friends, erfinv, ndtri, Bessel functions, polyval, nextafter (special_math_ops.py),
# cumulative_logsumexp (sort_ops.py); tf.math.special's Bessel functions.
import types as _types  # noqa: E402

from actorflow.graph.ops.sort_ops import cumulative_logsumexp  # noqa: E402
from actorflow.graph.ops.special_math_ops import (  # noqa: E402
    bessel_i0,
    bessel_i0e,
    bessel_i1,
    bessel_i1e,
    erfcinv,
    erfinv,
    multiply_no_nan,
    ndtri,
    nextafter,
    polyval,
    xdivy,
    xlog1py,
    xlogy,
)

special = _types.SimpleNamespace(bessel_i0=bessel_i0, bessel_i0e=bessel_i0e, bessel_i1=bessel_i1,
                                 bessel_i1e=bessel_i1e)
__all__ += ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "erfcinv", "erfinv", "multiply_no_nan", "ndtri",
            "nextafter", "polyval", "xdivy", "xlog1py", "xlogy", "cumulative_logsumexp", "special"]
