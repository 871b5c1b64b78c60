"""SparseToDense and SparseTensorDenseMatMul (graph/ops/sparse_ops.py)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


@register_kernel("SparseToDense", "CPU")
def _sparse_to_dense(attrs):
    validate = bool(attrs.get("validate_indices", True))

    def fn(indices, output_shape, values, default_value):
        shape = tuple(int(d) for d in np.asarray(output_shape).reshape(-1))
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim < 2:
            idx = idx.reshape(-1, 1) if len(shape) == 1 or idx.ndim == 0 else idx.reshape(1, -1)
        n = idx.shape[0]
        vals = np.asarray(values)
        if vals.size != 1 and vals.shape != (n,):
            raise InvalidArgumentError(f"SparseToDense: sparse_values has incorrect shape {list(vals.shape)}, should "
                                       f"be [] or [{n}]")
        if idx.shape[1] != len(shape):
            raise InvalidArgumentError(f"SparseToDense: sparse_indices has {idx.shape[1]} columns for an output of rank "
                                       f"{len(shape)}")
        out = np.full(shape, np.asarray(default_value, dtype=vals.dtype), dtype=vals.dtype)
        if n:
            if (idx < 0).any() or (idx >= np.array(shape)).any():
                bad = int(np.nonzero(((idx < 0) | (idx >= np.array(shape))).any(axis=1))[0][0])
                raise InvalidArgumentError(f"SparseToDense: indices[{bad}] = {idx[bad].tolist()} is out of bounds: "
                                           f"need 0 <= index < {list(shape)}")
            if validate and n > 1:
                flat = np.ravel_multi_index(idx.T, shape)
                d = np.diff(flat)
                if (d <= 0).any():
                    k = int(np.nonzero(d <= 0)[0][0]) + 1
                    what = "repeated" if d[k - 1] == 0 else "out of order"
                    raise InvalidArgumentError(f"SparseToDense: indices[{k}] = {idx[k].tolist()} is {what}")
            out[tuple(idx.T)] = vals
        return out
    return fn


@register_kernel("SparseTensorDenseMatMul", "CPU")
def _sp_matmul(attrs):
    adj_a, adj_b = bool(attrs.get("adjoint_a", False)), bool(attrs.get("adjoint_b", False))

    def fn(a_indices, a_values, a_shape, b):
        idx = np.asarray(a_indices, dtype=np.int64)
        shape = [int(d) for d in np.asarray(a_shape).reshape(-1)]
        if len(shape) != 2:
            raise InvalidArgumentError(f"SparseTensorDenseMatMul: sp_a must be a matrix, got dense_shape {shape}")
        b = np.asarray(b)
        bb = b.T if adj_b else b
        rows, inner = (shape[1], shape[0]) if adj_a else (shape[0], shape[1])
        if bb.shape[0] != inner:
            raise InvalidArgumentError(f"SparseTensorDenseMatMul: Cannot multiply A and B because inner dimension "
                                       f"does not match: {inner} vs. {bb.shape[0]}")
        r, c = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
        if idx.size and ((r < 0).any() or (r >= rows).any() or (c < 0).any() or (c >= inner).any()):
            raise InvalidArgumentError(f"SparseTensorDenseMatMul: an index of sp_a is out of bounds of {shape}")
        out = np.zeros((rows, bb.shape[1]), dtype=b.dtype)
        np.add.at(out, r, np.asarray(a_values, dtype=b.dtype)[:, None] * bb[c])
        return out
    return fn
