"""The `af.linalg` namespace: TF 1.x's `tf.compat.v1.linalg` names for what actorflow has.

Everything here is defined in graph/ops (math_ops, array_ops/matrix.py, array_ops/contraction.py,
linalg_ops.py, math_more_ops.py); this module only gathers the names.
"""
from actorflow.graph.ops.array_ops import einsum, eye, tensordot, trace
from actorflow.graph.ops.array_ops import matrix_band_part as band_part
from actorflow.graph.ops.array_ops import matrix_diag as diag
from actorflow.graph.ops.array_ops import matrix_diag_part as diag_part
from actorflow.graph.ops.array_ops import matrix_set_diag as set_diag
from actorflow.graph.ops.deprecated import matrix_transpose
from actorflow.graph.ops.linalg_ops import adjoint, cholesky, cholesky_solve, logdet, svd
from actorflow.graph.ops.linalg_ops import log_matrix_determinant as slogdet
from actorflow.graph.ops.linalg_ops import matrix_determinant as det
from actorflow.graph.ops.linalg_ops import matrix_inverse as inv
from actorflow.graph.ops.linalg_ops import matrix_solve as solve
from actorflow.graph.ops.linalg_ops import matrix_solve_ls as lstsq
from actorflow.graph.ops.linalg_ops import matrix_triangular_solve as triangular_solve
from actorflow.graph.ops.linalg_ops import self_adjoint_eig as eigh
from actorflow.graph.ops.linalg_ops import self_adjoint_eigvals as eigvalsh
from actorflow.graph.ops.math_more_ops import norm
from actorflow.graph.ops.math_ops import matmul
from actorflow.graph.ops.misc_ops import qr

transpose = matrix_transpose

__all__ = ["band_part", "diag", "diag_part", "set_diag", "eye", "einsum", "tensordot", "trace", "matmul", "transpose",
           "matrix_transpose", "qr", "inv", "det", "slogdet", "logdet", "cholesky", "cholesky_solve", "solve",
           "triangular_solve", "eigh", "eigvalsh", "svd", "lstsq", "norm", "adjoint"]

from actorflow.graph.ops.special_math_ops import cross  # noqa: E402

__all__ += ["cross"]

from actorflow.graph.ops import linalg_more_ops as _more  # noqa: E402
from actorflow.graph.ops.array_ops import diag as tensor_diag  # noqa: E402
from actorflow.graph.ops.array_ops import diag_part as tensor_diag_part  # noqa: E402
from actorflow.graph.ops.clip_ops import global_norm  # noqa: E402
from actorflow.graph.ops.nn_ops import l2_normalize  # noqa: E402

matrix_rank, matvec, normalize, pinv = _more.matrix_rank, _more.matvec, _more.normalize, _more.pinv
tridiagonal_matmul, tridiagonal_solve = _more.tridiagonal_matmul, _more.tridiagonal_solve
expm, sqrtm, lu, lu_solve = _more.expm, _more.sqrtm, _more.lu, _more.lu_solve
lu_reconstruct, lu_matrix_inverse = _more.lu_reconstruct, _more.lu_matrix_inverse
eigh_tridiagonal = _more.eigh_tridiagonal

__all__ += ["tensor_diag", "tensor_diag_part", "global_norm", "l2_normalize", "normalize", "matvec", "matrix_rank",
            "pinv", "tridiagonal_matmul", "tridiagonal_solve", "expm", "sqrtm", "lu", "lu_solve", "lu_reconstruct",
            "lu_matrix_inverse", "eigh_tridiagonal"]

import types as _types  # noqa: E402

from actorflow.graph.ops import linear_operator as _lo  # noqa: E402

for _name in _lo.__all__:
    globals()[_name] = getattr(_lo, _name)
__all__ += [n for n in _lo.__all__ if n != "conjugate_gradient"]
del globals()["conjugate_gradient"]

experimental = _types.SimpleNamespace(conjugate_gradient=_lo.conjugate_gradient)
"""tf.linalg.experimental: conjugate_gradient."""
__all__ += ["experimental"]
