"""CPU kernels of the sparse ops (graph/ops/sparse_ops.py, sparse_manip_ops.py, sparse_math_ops.py)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu import tensor_proto
from actorflow.kernels.lazy_numba import njit
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
        vals = np.asarray(a_values, dtype=b.dtype)
        if idx.size and b.dtype.kind == "f" and out.size:
            _sp_matmul_rows(out, np.ascontiguousarray(r), np.ascontiguousarray(c), vals, np.ascontiguousarray(bb))
        else:
            np.add.at(out, r, vals[:, None] * bb[c])
        return out
    return fn


@njit(cache=True, nogil=True)
def _sp_matmul_rows(out, r, c, vals, b):
    """out[r[k]] += vals[k] * b[c[k]] for each nonzero k in order, as TF's kernel sums (np.add.at's
    order, 10-20x faster)."""
    n = b.shape[1]
    for k in range(r.shape[0]):
        row = r[k]
        src = c[k]
        v = vals[k]
        for j in range(n):
            out[row, j] += v * b[src, j]


# ---------------------------------------------------------------------------------------------
# SparseTensor manipulation (graph/ops/sparse_ops.py). A SparseTensor arrives as its three arrays;
# "canonical order" is row-major (lexicographic) order of the indices. The kernels sort with
# stable sorts, so entries that tie keep their input order, as TF's std::stable_sort does.

def _sp(op: str, indices, values, shape, what="input"):
    """(indices int64 [n, rank], values [n], shape int64 [rank]) checked against each other."""
    idx = np.asarray(indices, dtype=np.int64)
    vals = np.asarray(values)
    shp = np.asarray(shape, dtype=np.int64).reshape(-1)
    if idx.ndim != 2:
        raise InvalidArgumentError(f"{op}: {what} indices must be a matrix, got shape {list(idx.shape)}")
    if vals.ndim != 1 or vals.shape[0] != idx.shape[0]:
        raise InvalidArgumentError(f"{op}: {what} has {idx.shape[0]} indices but values of shape {list(vals.shape)}")
    if idx.shape[1] != shp.shape[0] and idx.shape[0]:
        raise InvalidArgumentError(f"{op}: {what} indices have {idx.shape[1]} columns for a dense_shape of rank "
                                   f"{shp.shape[0]}")
    if idx.shape[0] == 0:
        idx = idx.reshape(0, shp.shape[0])
    return idx, vals, shp


def _order(idx):
    """The stable permutation that puts `idx`'s rows in lexicographic order."""
    if idx.shape[1] == 0 or idx.shape[0] < 2:
        return np.arange(idx.shape[0])
    return np.lexsort(idx.T[::-1])


def _keys(*index_arrays):
    """Row keys of one or more index matrices of one rank, comparable across them (a mixed-radix
    number over the largest index of each column), in lexicographic order."""
    allidx = np.concatenate(index_arrays, axis=0)
    if allidx.shape[0] == 0:
        return [np.zeros(a.shape[0], np.int64) for a in index_arrays]
    lo = allidx.min(axis=0)
    radix = allidx.max(axis=0) - lo + 1
    total = 1
    for r in radix.tolist():
        total *= r
    if total < 1 << 62:
        keys = np.zeros(allidx.shape[0], np.int64)
        for c in range(allidx.shape[1]):
            keys = keys * radix[c] + (allidx[:, c] - lo[c])
    else:           # (hashed ids in a huge dense_shape) the rows' ranks among the distinct rows
        keys = np.unique(allidx, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    out, k = [], 0
    for a in index_arrays:
        out.append(keys[k:k + a.shape[0]])
        k += a.shape[0]
    return out


def _same_shape(op: str, a_shape, b_shape):
    if a_shape.shape != b_shape.shape or (a_shape != b_shape).any():
        raise InvalidArgumentError(f"{op}: operands' shapes do not match: got {a_shape.tolist()} and {b_shape.tolist()}")


def _bounds(op: str, idx, shape, what="input"):
    if idx.size and ((idx < 0).any() or (idx >= shape).any()):
        k = int(np.nonzero(((idx < 0) | (idx >= shape)).any(axis=1))[0][0])
        raise InvalidArgumentError(f"{op}: {what} indices[{k}] = {idx[k].tolist()} is out of bounds: need 0 <= index "
                                   f"< {shape.tolist()}")


@register_kernel("SparseReorder", "CPU")
def _sparse_reorder(attrs):
    def fn(indices, values, shape):
        idx, vals, shp = _sp("SparseReorder", indices, values, shape)
        _bounds("SparseReorder", idx, shp)
        p = _order(idx)
        return idx[p], vals[p]
    return fn


@register_kernel("SparseReshape", "CPU")
def _sparse_reshape(attrs):
    def fn(indices, input_shape, new_shape):
        idx = np.asarray(indices, dtype=np.int64)
        shp = np.asarray(input_shape, dtype=np.int64).reshape(-1)
        want = np.asarray(new_shape, dtype=np.int64).reshape(-1).copy()
        dense = int(np.prod(shp))
        unknown = np.flatnonzero(want == -1)
        if unknown.size > 1:
            raise InvalidArgumentError(f"SparseReshape: only one output dimension may be -1, not both {unknown[0]} "
                                       f"and {unknown[1]}")
        if (want < -1).any():
            raise InvalidArgumentError(f"SparseReshape: size {int(want[want < -1][0])} is not allowed in the new shape "
                                       f"{want.tolist()}")
        known = int(np.prod(want[want != -1]))
        if unknown.size:
            if known == 0 or dense % known:
                raise InvalidArgumentError(f"SparseReshape: input to reshape is a SparseTensor with {dense} dense "
                                           f"values, but the requested shape requires a multiple of {known}")
            want[unknown[0]] = dense // known
        elif known != dense:
            raise InvalidArgumentError(f"SparseReshape: input to reshape is a tensor with {dense} dense values, but the "
                                       f"requested shape has {known}")
        if idx.shape[0] == 0:
            return np.zeros((0, want.size), np.int64), want
        flat = np.ravel_multi_index(tuple(idx.T), tuple(int(d) for d in shp)) if shp.size else np.zeros(len(idx), int)
        out = np.stack(np.unravel_index(flat, tuple(int(d) for d in want)), axis=1) if want.size else \
            np.zeros((len(idx), 0), np.int64)
        return out.astype(np.int64), want
    return fn


def _union(a_idx, b_idx):
    """The union of two index sets in canonical order: (indices, position of each row in the
    union for a's rows and b's rows, how many of a's and b's rows land on each union row)."""
    ka, kb = _keys(a_idx, b_idx)
    keys, first, inv = np.unique(np.concatenate([ka, kb]), return_index=True, return_inverse=True)
    both = np.concatenate([a_idx, b_idx], axis=0)
    inv = inv.reshape(-1)
    return both[first], inv[:len(ka)], inv[len(ka):], len(keys)


@register_kernel("SparseAdd", "CPU")
def _sparse_add(attrs):
    def fn(a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh):
        a_idx, a_vals, a_shp = _sp("SparseAdd", a_indices, a_values, a_shape, "a")
        b_idx, b_vals, b_shp = _sp("SparseAdd", b_indices, b_values, b_shape, "b")
        _same_shape("SparseAdd", a_shp, b_shp)
        idx, ia, ib, n = _union(a_idx, b_idx)
        sums = np.zeros(n, dtype=a_vals.dtype)
        np.add.at(sums, ia, a_vals)
        np.add.at(sums, ib, b_vals.astype(a_vals.dtype))
        # TF keeps every entry of only one operand, and a sum of two only where |sum| >= thresh.
        count = np.bincount(ia, minlength=n) + np.bincount(ib, minlength=n)
        keep = (count < 2) | (np.abs(sums) >= np.asarray(thresh))
        return idx[keep].reshape(-1, a_shp.size), sums[keep], a_shp
    return fn


def _lookup(rows, table):
    """For each row of `rows`, its position in `table` (rows of one rank), or -1."""
    if rows.shape[0] == 0:
        return np.zeros(0, np.int64)
    if table.shape[0] == 0:
        return np.full(rows.shape[0], -1, np.int64)
    kr, kt = _keys(rows, table)
    order = np.argsort(kt, kind="stable")
    pos = np.searchsorted(kt[order], kr)
    pos = np.minimum(pos, len(kt) - 1)
    hit = kt[order][pos] == kr
    return np.where(hit, order[pos], -1)


@register_kernel("SparseAddGrad", "CPU")
def _sparse_add_grad(attrs):
    def fn(backprop_val_grad, a_indices, b_indices, sum_indices):
        g = np.asarray(backprop_val_grad)
        s = np.asarray(sum_indices, np.int64)
        out = []
        for x in (a_indices, b_indices):
            pos = _lookup(np.asarray(x, np.int64).reshape(-1, s.shape[1]), s)
            out.append(np.where(pos >= 0, g[np.maximum(pos, 0)] if g.size else 0, 0).astype(g.dtype))
        return tuple(out)
    return fn


@register_kernel("SparseTensorDenseAdd", "CPU")
def _sparse_dense_add(attrs):
    def fn(a_indices, a_values, a_shape, b):
        idx, vals, shp = _sp("SparseTensorDenseAdd", a_indices, a_values, a_shape, "a")
        b = np.asarray(b)
        if list(b.shape) != shp.tolist():
            raise InvalidArgumentError(f"SparseTensorDenseAdd: dimension mismatch: a has dense_shape {shp.tolist()} "
                                       f"but b has shape {list(b.shape)}")
        _bounds("SparseTensorDenseAdd", idx, shp, "a")
        out = b.copy()
        np.add.at(out, tuple(idx.T), vals.astype(b.dtype))
        return out
    return fn


def _binary_union(op, ufunc):
    def fn(a_indices, a_values, a_shape, b_indices, b_values, b_shape):
        a_idx, a_vals, a_shp = _sp(op, a_indices, a_values, a_shape, "a")
        b_idx, b_vals, b_shp = _sp(op, b_indices, b_values, b_shape, "b")
        _same_shape(op, a_shp, b_shp)
        idx, ia, ib, n = _union(a_idx, b_idx)
        av = np.zeros(n, a_vals.dtype)
        bv = np.zeros(n, a_vals.dtype)
        av[ia] = a_vals                # an index missing from one operand is its implicit zero there
        bv[ib] = b_vals
        return idx.reshape(-1, a_shp.size), ufunc(av, bv)
    return fn


register_kernel("SparseSparseMaximum", "CPU")(lambda attrs: _binary_union("SparseSparseMaximum", np.maximum))
register_kernel("SparseSparseMinimum", "CPU")(lambda attrs: _binary_union("SparseSparseMinimum", np.minimum))


def _groups(idx, cols):
    """Group ids of the rows of idx[:, cols] (ids in canonical order of the groups) and the
    groups' index rows."""
    sub = idx[:, cols]
    if sub.shape[1] == 0:
        return np.zeros(idx.shape[0], np.int64), np.zeros((1 if idx.shape[0] else 0, 0), np.int64)
    keys, = _keys(sub)
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    return inv.reshape(-1), sub[first]


@register_kernel("SparseSoftmax", "CPU")
def _sparse_softmax(attrs):
    def fn(sp_indices, sp_values, sp_shape):
        idx, vals, shp = _sp("SparseSoftmax", sp_indices, sp_values, sp_shape)
        if shp.size < 2:
            raise InvalidArgumentError(f"SparseSoftmax: sp_input must be at least a matrix, got dense_shape "
                                       f"{shp.tolist()}")
        if vals.size == 0:
            return vals.copy()
        g, rows = _groups(idx, list(range(shp.size - 1)))
        top = np.full(len(rows), -np.inf, vals.dtype)
        np.maximum.at(top, g, vals)
        e = np.exp(vals - top[g])
        tot = np.zeros(len(rows), vals.dtype)
        np.add.at(tot, g, e)
        return (e / tot[g]).astype(vals.dtype)
    return fn


def _axes(op: str, axes, rank):
    ax = np.asarray(axes, np.int64).reshape(-1)
    if ((ax < -rank) | (ax >= rank)).any():
        raise InvalidArgumentError(f"{op}: invalid reduction axis {int(ax[(ax < -rank) | (ax >= rank)][0])} for a "
                                   f"SparseTensor of rank {rank}")
    return sorted({int(a) % rank for a in ax})


def _sparse_reduce(op: str, ufunc, sparse_out: bool, keep: bool):
    def fn(input_indices, input_values, input_shape, reduction_axes):
        idx, vals, shp = _sp(op, input_indices, input_values, input_shape)
        rank = shp.size
        red = _axes(op, reduction_axes, rank)
        kept = [d for d in range(rank) if d not in red]
        g, rows = _groups(idx, kept)
        n = len(rows)
        init = 0 if ufunc is np.add else (np.finfo(vals.dtype).min if vals.dtype.kind == "f"
                                          else np.iinfo(vals.dtype).min)
        out = np.full(n, init, vals.dtype)
        ufunc.at(out, g, vals)
        out_shape = np.array([1 if d in red else shp[d] for d in range(rank)] if keep else shp[kept], np.int64)
        if keep:
            full = np.zeros((n, rank), np.int64)
            full[:, kept] = rows
            rows = full
        if sparse_out:
            return rows.reshape(n, out_shape.size), out, out_shape
        dense = np.zeros(tuple(int(d) for d in out_shape), vals.dtype)
        if rows.shape[1]:
            dense[tuple(rows.T)] = out          # a group with no values is 0, as in TF
        elif n:
            dense[...] = out[0]                 # every axis reduced: one group
        return dense
    return fn


for _name, _uf in (("SparseReduceSum", np.add), ("SparseReduceMax", np.maximum)):
    register_kernel(_name, "CPU")(lambda attrs, _n=_name, _u=_uf: _sparse_reduce(_n, _u, False,
                                                                               bool(attrs.get("keep_dims"))))
    register_kernel(_name + "Sparse", "CPU")(lambda attrs, _n=_name + "Sparse", _u=_uf: _sparse_reduce(
        _n, _u, True, bool(attrs.get("keep_dims"))))


@register_kernel("SparseSlice", "CPU")
def _sparse_slice(attrs):
    def fn(indices, values, shape, start, size):
        idx, vals, shp = _sp("SparseSlice", indices, values, shape)
        start = np.asarray(start, np.int64).reshape(-1)
        size = np.asarray(size, np.int64).reshape(-1)
        if start.size != shp.size or size.size != shp.size:
            raise InvalidArgumentError(f"SparseSlice: start ({start.size} values) and size ({size.size} values) must "
                                       f"have the input's rank {shp.size}")
        if (start < 0).any() or (size < 0).any():
            raise InvalidArgumentError(f"SparseSlice: start {start.tolist()} and size {size.tolist()} must not be "
                                       f"negative")
        end = np.minimum(start + size, shp)
        keep = ((idx >= start) & (idx < end)).all(axis=1)
        return idx[keep] - start, vals[keep], np.maximum(end - start, 0)
    return fn


@register_kernel("SparseSliceGrad", "CPU")
def _sparse_slice_grad(attrs):
    def fn(backprop_val_grad, input_indices, input_start, output_indices):
        g = np.asarray(backprop_val_grad)
        inp = np.asarray(input_indices, np.int64)
        out = np.asarray(output_indices, np.int64).reshape(-1, inp.shape[1]) + np.asarray(input_start, np.int64)
        pos = _lookup(inp, out)
        return np.where(pos >= 0, g[np.maximum(pos, 0)] if g.size else 0, 0).astype(g.dtype)
    return fn


@register_kernel("SparseConcat", "CPU")
def _sparse_concat(attrs):
    dim = int(attrs["concat_dim"])
    n = int(attrs["N"])

    def fn(*inputs):
        parts = [_sp("SparseConcat", inputs[i], inputs[n + i], inputs[2 * n + i], f"input {i}") for i in range(n)]
        shape0 = parts[0][2]
        rank = shape0.size
        if not -rank <= dim < rank:
            raise InvalidArgumentError(f"SparseConcat: concat_dim {dim} is out of range for rank {rank}")
        d = dim % rank
        offset, idxs = 0, []
        for i, (idx, _, shp) in enumerate(parts):
            if shp.size != rank:
                raise InvalidArgumentError(f"SparseConcat: ranks of all input tensors must match: input 0 has rank "
                                           f"{rank} but input {i} has rank {shp.size}")
            bad = [k for k in range(rank) if k != d and shp[k] != shape0[k]]
            if bad:
                raise InvalidArgumentError(f"SparseConcat: input shapes must match: input 0 has dense_shape "
                                           f"{shape0.tolist()} but input {i} has {shp.tolist()} (dimension {bad[0]})")
            moved = idx.copy()
            moved[:, d] += offset
            idxs.append(moved)
            offset += int(shp[d])
        idx = np.concatenate(idxs, axis=0)
        vals = np.concatenate([p[1] for p in parts])
        out_shape = shape0.copy()
        out_shape[d] = offset
        p = _order(idx)
        return idx[p], vals[p], out_shape
    return fn


@register_kernel("SparseSplit", "CPU")
def _sparse_split(attrs):
    num = int(attrs["num_split"])

    def fn(split_dim, indices, values, shape):
        idx, vals, shp = _sp("SparseSplit", indices, values, shape)
        rank = shp.size
        d = int(np.asarray(split_dim).reshape(()))
        if not -rank <= d < rank:
            raise InvalidArgumentError(f"SparseSplit: split_dim {d} is out of range for rank {rank}")
        d %= rank
        size = int(shp[d])
        if num > size:
            raise InvalidArgumentError(f"SparseSplit: num_split {num} is larger than dimension {d}'s size {size}")
        # TF: the first size % num_split pieces are one longer
        lens = [size // num + (1 if i < size % num else 0) for i in range(num)]
        starts = np.cumsum([0] + lens)
        piece = np.searchsorted(starts, idx[:, d], side="right") - 1
        out_i, out_v, out_s = [], [], []
        for i in range(num):
            m = piece == i
            sub = idx[m].copy()
            sub[:, d] -= starts[i]
            s = shp.copy()
            s[d] = lens[i]
            out_i.append(sub)
            out_v.append(vals[m])
            out_s.append(s)
        return tuple(out_i + out_v + out_s)
    return fn


@register_kernel("SparseFillEmptyRows", "CPU")
def _sparse_fill_empty_rows(attrs):
    def fn(indices, values, dense_shape, default_value):
        idx, vals, shp = _sp("SparseFillEmptyRows", indices, values, dense_shape)
        if shp.size < 1:
            raise InvalidArgumentError("SparseFillEmptyRows: dense_shape must have rank at least 1, got []")
        dv = np.asarray(default_value)
        if dv.ndim != 0:
            raise InvalidArgumentError(f"SparseFillEmptyRows: default_value must be a scalar, got shape "
                                       f"{list(dv.shape)}")
        rows = int(shp[0])
        _bounds("SparseFillEmptyRows", idx, shp)
        counts = np.bincount(idx[:, 0], minlength=rows) if idx.size else np.zeros(rows, np.int64)
        empty = counts == 0
        # Each row's entries in input order; an empty row gets [r, 0, ..., 0] with the default.
        fill = np.zeros((int(empty.sum()), shp.size), np.int64)
        fill[:, 0] = np.flatnonzero(empty)
        all_idx = np.concatenate([idx, fill], axis=0)
        all_vals = np.concatenate([vals, np.full(len(fill), dv, vals.dtype)])
        order = np.argsort(all_idx[:, 0], kind="stable")
        reverse = np.empty(len(all_idx), np.int64)
        reverse[order] = np.arange(len(all_idx))
        return all_idx[order], all_vals[order], empty, reverse[:len(idx)]
    return fn


@register_kernel("SparseFillEmptyRowsGrad", "CPU")
def _sparse_fill_empty_rows_grad(attrs):
    def fn(reverse_index_map, grad_values):
        rev = np.asarray(reverse_index_map, np.int64)
        g = np.asarray(grad_values)
        if rev.size and ((rev < 0) | (rev >= g.shape[0])).any():
            raise InvalidArgumentError(f"SparseFillEmptyRowsGrad: reverse_index_map holds an index outside "
                                       f"[0, {g.shape[0]})")
        d_values = g[rev]
        return d_values, np.asarray(g.sum() - d_values.sum(), g.dtype)
    return fn


# ---------------------------------------------------------------------------------------------
# SparseSegmentSum/Mean/SqrtN[WithNumSegments] and their gradients: data[indices] reduced over
# runs of sorted segment ids (embedding bags), one gather and one `np.add.reduceat`.

def _sparse_segments(op: str, data, indices, segment_ids, num_segments=None):
    data, idx, ids = np.asarray(data), np.asarray(indices), np.asarray(segment_ids)
    if idx.ndim != 1 or ids.ndim != 1 or idx.shape[0] != ids.shape[0]:
        raise InvalidArgumentError(f"{op}: indices (shape {list(idx.shape)}) and segment_ids (shape "
                                   f"{list(ids.shape)}) must be vectors of one length")
    if data.ndim < 1:
        raise InvalidArgumentError(f"{op}: data must be at least 1-D, got a scalar")
    bad = (idx < 0) | (idx >= data.shape[0])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(f"{op}: indices[{k}] = {int(idx[k])} is out of range [0, {data.shape[0]})")
    if ids.size:
        step = np.diff(ids)
        if ids[0] < 0 or (step < 0).any():
            k = 0 if ids[0] < 0 else int(np.flatnonzero(step < 0)[0]) + 1
            raise InvalidArgumentError(f"{op}: segment ids are not increasing: segment_ids[{k}] = {int(ids[k])}")
    n = int(ids[-1]) + 1 if ids.size else 0
    if num_segments is not None:
        num = int(np.asarray(num_segments).reshape(()))
        if n > num:
            raise InvalidArgumentError(f"{op}: segment id {n - 1} is out of range [0, {num}) of num_segments")
        n = num
    return data, idx, ids, n


def _counts(ids, n, dtype):
    return np.bincount(ids, minlength=n)[:n].astype(dtype)


def _scale(norm, counts):
    if norm == "mean":
        return 1.0 / np.maximum(counts, 1)
    if norm == "sqrtn":
        return 1.0 / np.sqrt(np.maximum(counts, 1))
    return None


# Below this many indices numpy's gather and reduceat are as fast, and a first call never pays
# numba's compilation; above it one fused loop reads each row once, with no gathered copy.
_NUMBA_MIN = 2048


@njit(cache=True, nogil=True)
def _add_rows(src, src_rows, dst_rows, scale, out):  # pragma: no cover - compiled
    """out[dst_rows[i], :] += src[src_rows[i], :] * scale[src_rows[i]] (an empty scale: 1), over
    rows already checked: a sparse segment sum, or its gradient."""
    m = src.shape[1]
    for i in range(src_rows.shape[0]):
        a = src_rows[i]
        b = dst_rows[i]
        if scale.shape[0] == 0:
            for k in range(m):
                out[b, k] += src[a, k]
        else:
            c = scale[a]
            for k in range(m):
                out[b, k] += src[a, k] * c


def _fused(x) -> bool:
    return x.dtype.kind == "f" and x.dtype.itemsize >= 4


def _sparse_segment_kernel(op: str, norm, with_num: bool):
    def fn(data, indices, segment_ids, *num_segments):
        data, idx, ids, n = _sparse_segments(op, data, indices, segment_ids, num_segments[0] if with_num else None)
        out = np.zeros((n,) + data.shape[1:], data.dtype)
        if ids.size >= _NUMBA_MIN and _fused(data) and data.shape[0]:
            flat = out.reshape(n, -1)
            _add_rows(np.ascontiguousarray(data).reshape(data.shape[0], -1), idx.astype(np.int64),
                      ids.astype(np.int64), np.zeros(0, data.dtype), flat)
        elif ids.size:
            starts = np.concatenate([[0], np.flatnonzero(np.diff(ids)) + 1])
            out[ids[starts]] = np.add.reduceat(data[idx], starts, axis=0)
        s = _scale(norm, _counts(ids, n, data.dtype))
        if s is not None:
            out *= s.reshape((n,) + (1,) * (data.ndim - 1)).astype(data.dtype)
        return out
    return fn


def _sparse_segment_grad_kernel(op: str, norm):
    def fn(grad, indices, segment_ids, output_dim0):
        g, idx, ids = np.asarray(grad), np.asarray(indices), np.asarray(segment_ids)
        dim0 = int(np.asarray(output_dim0).reshape(()))
        if idx.size and ((idx < 0) | (idx >= dim0)).any():
            k = int(np.flatnonzero((idx < 0) | (idx >= dim0))[0])
            raise InvalidArgumentError(f"{op}: indices[{k}] = {int(idx[k])} is out of range [0, {dim0})")
        if ids.size and ((ids < 0) | (ids >= g.shape[0])).any():
            k = int(np.flatnonzero((ids < 0) | (ids >= g.shape[0]))[0])
            raise InvalidArgumentError(f"{op}: segment_ids[{k}] = {int(ids[k])} is out of range [0, {g.shape[0]})")
        s = _scale(norm, _counts(ids, g.shape[0], g.dtype))
        out = np.zeros((dim0,) + g.shape[1:], g.dtype)
        if ids.size >= _NUMBA_MIN and _fused(g) and g.shape[0]:
            scale = np.zeros(0, g.dtype) if s is None else s.astype(g.dtype)
            _add_rows(np.ascontiguousarray(g).reshape(g.shape[0], -1), ids.astype(np.int64), idx.astype(np.int64),
                      scale, out.reshape(dim0, -1))
            return out
        rows = g[ids]
        if s is not None:
            rows = rows * s[ids].reshape((-1,) + (1,) * (g.ndim - 1)).astype(g.dtype)
        np.add.at(out, idx, rows)
        return out
    return fn


for _norm, _base in ((None, "SparseSegmentSum"), ("mean", "SparseSegmentMean"), ("sqrtn", "SparseSegmentSqrtN")):
    register_kernel(_base, "CPU")(lambda attrs, _b=_base, _n=_norm: _sparse_segment_kernel(_b, _n, False))
    register_kernel(_base + "WithNumSegments", "CPU")(
        lambda attrs, _b=_base + "WithNumSegments", _n=_norm: _sparse_segment_kernel(_b, _n, True))
    register_kernel(_base + "Grad", "CPU")(lambda attrs, _b=_base + "Grad", _n=_norm: _sparse_segment_grad_kernel(_b, _n))


@register_kernel("SparseMatMul", "CPU", cost=lambda a, b: a.size * (b.shape[0] if b.ndim == 2 else 1))
def _sparse_matmul(attrs):
    """tf.sparse_matmul: a dense product; the sparsity hints only choose TF's algorithm."""
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))

    def fn(a, b):
        a = np.asarray(a, np.float32)
        b = np.asarray(b, np.float32)
        a, b = (a.T if ta else a), (b.T if tb else b)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise InvalidArgumentError(f"SparseMatMul: matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: "
                                       f"{list(b.shape)} (after transposes)")
        return np.ascontiguousarray(a @ b, dtype=np.float32)
    return fn


# ---------------------------------------------------------------------------------------------
# SerializeSparse / SerializeManySparse / DeserializeSparse / DeserializeManySparse: each
# SparseTensor as three TensorProtos (indices, values, dense_shape), byte for byte TF's.

def _strings_of(parts):
    out = np.empty(len(parts), object)
    out[:] = parts
    return out


@register_kernel("SerializeSparse", "CPU")
def _serialize_sparse(attrs):
    def fn(sparse_indices, sparse_values, sparse_shape):
        idx, vals, shp = _sp("SerializeSparse", sparse_indices, sparse_values, sparse_shape)
        return _strings_of([tensor_proto.encode(idx), tensor_proto.encode(vals), tensor_proto.encode(shp)])
    return fn


@register_kernel("SerializeManySparse", "CPU")
def _serialize_many_sparse(attrs):
    def fn(sparse_indices, sparse_values, sparse_shape):
        idx, vals, shp = _sp("SerializeManySparse", sparse_indices, sparse_values, sparse_shape)
        if shp.size < 1:
            raise InvalidArgumentError("SerializeManySparse: the SparseTensor must have rank at least 1 (its first "
                                       "dimension is the minibatch)")
        _bounds("SerializeManySparse", idx, shp)
        out = np.empty((int(shp[0]), 3), object)
        for r in range(int(shp[0])):
            m = idx[:, 0] == r
            out[r] = [tensor_proto.encode(idx[m][:, 1:]), tensor_proto.encode(vals[m]), tensor_proto.encode(shp[1:])]
        return out
    return fn


def _deserialize(op: str, serialized, dtype):
    """The SparseTensor of a [..., 3] array of serialized SparseTensors: a single one for shape
    [3], else one per element, stacked along new leading dimensions (dense_shape the largest)."""
    s = np.asarray(serialized, dtype=object)
    if s.ndim < 1 or s.shape[-1] != 3:
        raise InvalidArgumentError(f"{op}: serialized_sparse must have 3 as its last dimension, got shape "
                                   f"{list(s.shape)}")
    lead = s.shape[:-1]
    flat = s.reshape(-1, 3)
    parts = []
    for k, (bi, bv, bs) in enumerate(flat):
        try:
            idx, vals, shp = tensor_proto.decode(bi), tensor_proto.decode(bv), tensor_proto.decode(bs)
        except ValueError as e:
            raise InvalidArgumentError(f"{op}: serialized SparseTensor {k} could not be parsed: {e}") from None
        if vals.dtype != dtype:
            raise InvalidArgumentError(f"{op}: requested SparseTensor of type {dtype.name} but the serialized "
                                       f"SparseTensor {k} holds {vals.dtype.name}")
        if idx.dtype != np.int64 or shp.dtype != np.int64 or idx.ndim != 2 or vals.ndim != 1 or shp.ndim != 1 \
                or idx.shape != (vals.shape[0], shp.shape[0]):
            raise InvalidArgumentError(f"{op}: serialized SparseTensor {k} is malformed: indices {list(idx.shape)} "
                                       f"{idx.dtype.name}, values {list(vals.shape)}, dense_shape {list(shp.shape)} "
                                       f"{shp.dtype.name}")
        parts.append((idx, vals, shp))
    if not lead:
        return parts[0]
    ranks = {p[2].size for p in parts}
    if len(ranks) > 1:
        raise InvalidArgumentError(f"{op}: the serialized SparseTensors have different ranks {sorted(ranks)}")
    rank = ranks.pop() if ranks else 0
    pre = np.array(list(np.ndindex(*lead)), np.int64).reshape(-1, len(lead))
    idx = np.concatenate([np.concatenate([np.repeat(pre[k:k + 1], len(p[0]), 0), p[0]], axis=1)
                          for k, p in enumerate(parts)], axis=0) if parts else np.zeros((0, len(lead) + rank), np.int64)
    vals = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype)
    inner = np.max(np.stack([p[2] for p in parts]), axis=0) if parts else np.zeros(rank, np.int64)
    return idx.reshape(-1, len(lead) + rank), vals.astype(dtype), np.concatenate([np.array(lead, np.int64), inner])


@register_kernel("DeserializeSparse", "CPU")
def _deserialize_sparse(attrs):
    dtype = np.dtype(attrs["dtype"])
    return lambda serialized_sparse: _deserialize("DeserializeSparse", serialized_sparse, dtype)


@register_kernel("DeserializeManySparse", "CPU")
def _deserialize_many_sparse(attrs):
    dtype = np.dtype(attrs["dtype"])

    def fn(serialized_sparse):
        s = np.asarray(serialized_sparse, dtype=object)
        if s.ndim != 2 or s.shape[1] != 3:
            raise InvalidArgumentError(f"DeserializeManySparse: serialized_sparse must be a matrix [N, 3], got shape "
                                       f"{list(s.shape)}")
        return _deserialize("DeserializeManySparse", s, dtype)
    return fn


# ---------------------------------------------------------------------------------------------
# SparseCross / SparseCrossV2 (tf.sparse.cross, cross_hashed): per batch row, every combination of
# one feature of each input (sparse inputs first, then dense ones; the last input varies fastest),
# joined into a string or hashed with FarmHash's Fingerprint64 and TF's FingerprintCat64.

_M64 = (1 << 64) - 1
_KMUL = 0xC6A4A7935BD1E995


def _shift_mix(v):
    return v ^ (v >> 47)


def _fingerprint_cat64(fp1: int, fp2: int) -> int:
    r = fp1 ^ _KMUL
    r ^= (_shift_mix((fp2 * _KMUL) & _M64) * _KMUL) & _M64
    r = (r * _KMUL) & _M64
    r = (_shift_mix(r) * _KMUL) & _M64
    return _shift_mix(r)


def _cross_columns(op: str, n: int, inputs):
    """(batch size, [per column: [per row: list of features]]) of n sparse inputs (indices...,
    values..., shapes...) followed by dense matrices."""
    cols, batch = [], None
    for k in range(n):
        idx, vals, shp = _sp(op, inputs[k], inputs[n + k], inputs[2 * n + k], f"sparse input {k}")
        if shp.size != 2:
            raise InvalidArgumentError(f"{op}: sparse input {k} must be a matrix, got dense_shape {shp.tolist()}")
        rows = int(shp[0])
        if batch is not None and rows != batch:
            raise InvalidArgumentError(f"{op}: inputs must have one batch size: {batch} and {rows} (sparse input {k})")
        batch = rows
        per = [[] for _ in range(rows)]
        for r, v in zip(idx[:, 0].tolist(), vals.tolist()):
            per[r].append(v)
        cols.append(per)
    for j, d in enumerate(inputs[3 * n:]):
        d = np.asarray(d)
        if d.ndim != 2:
            raise InvalidArgumentError(f"{op}: dense input {j} must be a matrix, got shape {list(d.shape)}")
        if batch is not None and d.shape[0] != batch:
            raise InvalidArgumentError(f"{op}: inputs must have one batch size: {batch} and {d.shape[0]} "
                                       f"(dense input {j})")
        batch = d.shape[0]
        cols.append([list(row) for row in d.tolist()])
    return batch or 0, cols


def _cross(op: str, n: int, inputs, combine, out_dtype):
    import itertools
    batch, cols = _cross_columns(op, n, inputs)
    idx, vals, width = [], [], 0
    for b in range(batch):
        feats = [c[b] for c in cols]
        k = 0
        for combo in itertools.product(*feats) if feats else ():
            idx.append((b, k))
            vals.append(combine(combo))
            k += 1
        width = max(width, k)
    out = np.empty(len(vals), out_dtype)
    out[:] = vals
    return np.array(idx, np.int64).reshape(-1, 2), out, np.array([batch, width], np.int64)


def _as_text(v) -> bytes:
    return v if isinstance(v, bytes) else (v.encode() if isinstance(v, str) else str(int(v)).encode())


def _feature_hash(v) -> int:
    from actorflow.kernels.cpu.farmhash import fingerprint64
    if isinstance(v, (bytes, str)):
        return fingerprint64(_as_text(v))
    return int(v) & _M64                 # TF hashes an int64 feature as its own value


@register_kernel("SparseCrossV2", "CPU")
def _sparse_cross_v2(attrs):
    n = int(attrs["N"])

    def fn(*inputs):
        sep = _as_text(np.asarray(inputs[-1]).reshape(()).item())
        return _cross("SparseCrossV2", n, inputs[:-1], lambda combo: sep.join(_as_text(v) for v in combo), object)
    return fn


@register_kernel("SparseCross", "CPU")
def _sparse_cross(attrs):
    n = int(attrs["N"])
    hashed = bool(attrs["hashed_output"])
    buckets = int(attrs.get("num_buckets", 0))
    key = int(attrs.get("hash_key", 0)) & _M64

    def hashed_value(combo):
        h = key
        for v in combo:
            h = _fingerprint_cat64(h, _feature_hash(v))
        return h % buckets if buckets > 0 else h % ((1 << 63) - 1)

    def fn(*inputs):
        if hashed:
            return _cross("SparseCross", n, inputs, hashed_value, np.int64)
        return _cross("SparseCross", n, inputs, lambda combo: b"_X_".join(_as_text(v) for v in combo), object)
    return fn


# ---------------------------------------------------------------------------------------------
# DenseCountSparseOutput / SparseCountSparseOutput (tf.sparse.bincount): counts (or summed weights)
# of each value, per batch row for rank-2 input, as a SparseTensor in canonical order.

def _count(op: str, rows, vals, weights, batch, attrs):
    minlength, maxlength = int(attrs.get("minlength", -1)), int(attrs.get("maxlength", -1))
    binary = bool(attrs.get("binary_output"))
    if vals.size and (vals < 0).any():
        raise InvalidArgumentError(f"{op}: input values must all be non-negative, got {int(vals[vals < 0][0])}")
    w = np.asarray(weights)
    if w.size and w.shape[0] != vals.shape[0]:
        raise InvalidArgumentError(f"{op}: weights ({w.shape[0]} values) must match the input's {vals.shape[0]} values")
    out_dtype = w.dtype
    keep = vals < maxlength if maxlength > 0 else np.ones(vals.shape, bool)
    top = int(vals.max()) + 1 if vals.size else 1
    size = maxlength if maxlength > 0 else max(top, minlength)
    rows, vals = rows[keep], vals[keep].astype(np.int64)
    keys = rows * size + vals
    uniq, inv = np.unique(keys, return_inverse=True)
    inv = inv.reshape(-1)
    if binary or not w.size:
        counts = np.ones(len(uniq), out_dtype) if binary else np.bincount(inv, minlength=len(uniq)).astype(out_dtype)
    else:
        counts = np.zeros(len(uniq), out_dtype)
        np.add.at(counts, inv, w[keep])
    cols = np.stack([uniq // size, uniq % size], axis=1) if batch is not None else (uniq % size).reshape(-1, 1)
    shape = np.array([batch, size] if batch is not None else [size], np.int64)
    return cols.astype(np.int64).reshape(-1, shape.size), counts, shape


@register_kernel("DenseCountSparseOutput", "CPU")
def _dense_count(attrs):
    def fn(values, weights):
        v = np.asarray(values)
        if v.ndim not in (1, 2):
            raise InvalidArgumentError(f"DenseCountSparseOutput: input must be a vector or a matrix, got shape "
                                       f"{list(v.shape)}")
        w = np.asarray(weights)
        if w.size and w.shape != v.shape:
            raise InvalidArgumentError(f"DenseCountSparseOutput: weights of shape {list(w.shape)} must match the "
                                       f"values' {list(v.shape)}")
        batch = v.shape[0] if v.ndim == 2 else None
        rows = np.repeat(np.arange(v.shape[0]), v.shape[1]) if v.ndim == 2 else np.zeros(v.size, np.int64)
        return _count("DenseCountSparseOutput", rows, v.reshape(-1), w.reshape(-1) if w.size else w, batch, attrs)
    return fn


@register_kernel("SparseCountSparseOutput", "CPU")
def _sparse_count(attrs):
    def fn(indices, values, dense_shape, weights):
        idx, vals, shp = _sp("SparseCountSparseOutput", indices, values, dense_shape)
        if shp.size not in (1, 2):
            raise InvalidArgumentError(f"SparseCountSparseOutput: input must be a vector or a matrix, got dense_shape "
                                       f"{shp.tolist()}")
        batch = int(shp[0]) if shp.size == 2 else None
        rows = idx[:, 0] if shp.size == 2 else np.zeros(len(vals), np.int64)
        return _count("SparseCountSparseOutput", rows, vals, weights, batch, attrs)
    return fn


# ---------------------------------------------------------------------------------------------
# SparseDenseCwiseMul / SparseDenseCwiseDiv / SparseDenseCwiseAdd: a SparseTensor's values with the
# dense operand broadcast to its dense_shape, read at its indices (SparseTensor * dense).

def _cwise(op: str, ufunc):
    def fn(sp_indices, sp_values, sp_shape, dense):
        idx, vals, shp = _sp(op, sp_indices, sp_values, sp_shape)
        y = np.asarray(dense)
        if y.ndim > shp.size or any(d != 1 and d != s for d, s in zip(y.shape[::-1], shp[::-1].tolist())):
            raise InvalidArgumentError(f"{op}: the dense operand of shape {list(y.shape)} does not broadcast to the "
                                       f"SparseTensor's dense_shape {shp.tolist()} (only the dense side broadcasts)")
        _bounds(op, idx, shp)
        off = shp.size - y.ndim
        at = tuple(idx[:, off + k] if y.shape[k] != 1 else np.zeros(len(idx), np.int64) for k in range(y.ndim))
        return ufunc(vals, y[at] if y.ndim else np.full(len(idx), y, y.dtype)).astype(vals.dtype)
    return fn


def _true_or_int_div(x, y):
    if x.dtype.kind not in "iu":
        return np.divide(x, y)
    if (y == 0).any():
        raise InvalidArgumentError("SparseDenseCwiseDiv: integer division by zero")
    q = np.floor_divide(x, y)
    return np.where((q < 0) & (q * y != x), q + 1, q)      # C++'s division truncates toward 0


register_kernel("SparseDenseCwiseMul", "CPU")(lambda attrs: _cwise("SparseDenseCwiseMul", np.multiply))
register_kernel("SparseDenseCwiseDiv", "CPU")(lambda attrs: _cwise("SparseDenseCwiseDiv", _true_or_int_div))
register_kernel("SparseDenseCwiseAdd", "CPU")(lambda attrs: _cwise("SparseDenseCwiseAdd", np.add))
