"""CPU kernels for neural-network ops: matmul, softmax and cross-entropy, bias, convolution, pooling.

Layout is TensorFlow's: NHWC activations and HWIO filters. A convolution is an im2col pass (a numba
loop) followed by a GEMM (``blas.matmul``: MKL when installed, else numpy's BLAS), done over
cache-sized chunks of the batch; its input gradient is a GEMM followed by a col2im scatter-add. Pooling and the softmax family are single
fused numba loops. Every numba kernel is compiled lazily on first call, cached on disk, and releases
the GIL; none of them is parallel, because the runtime already runs independent ops on separate
threads. numba has no float16 arithmetic, so half-precision convolution and pooling run in float32.
"""
from __future__ import annotations

import functools
import threading

import numpy as np
from numba import njit, uintp

from actorflow.kernels.cpu.blas import matmul as gemm
from actorflow.kernels.registry import register_kernel

# A convolution runs im2col + GEMM over chunks of the batch whose column buffer holds at most this
# many elements (8 MiB of float32). Measured on LeNet-sized layers, cache-sized chunks beat one
# GEMM over the whole batch by 20-30%: the columns are still in cache when BLAS reads them.
_MAX_COL_ELEMENTS = 1 << 21

_FAST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# --------------------------------------------------------------------------------------------
# MatMul, BatchMatMulV2
# --------------------------------------------------------------------------------------------

def _matmul_cost(a, b):
    """m*k*n whatever the transposes: a has m*k elements and b's other dim is n."""
    a_shape, b_shape = np.shape(a), np.shape(b)
    if len(a_shape) != 2 or len(b_shape) != 2:
        return int(np.size(a)) + int(np.size(b))
    # k is shared; a.size = m*k, b.size = k*n, so m*k*n = a.size * b.size / k. Either dim of b can
    # be k depending on transpose_b: pick the one a also has (exact unless both match, then an estimate).
    k = b_shape[0] if b_shape[0] in a_shape else b_shape[1]
    return int(np.size(a)) * int(np.size(b)) // max(k, 1)


def gemm_blocks(m: int, n: int, k: int, parts: int):
    """How to split an [m, k] @ [k, n] product over `parts` threads: ("rows" | "cols", [(lo, hi),
    ...]), or None when it is too small. Every block packs the whole of the operand it does not
    split, so the split goes through the bigger operand: column blocks when the right operand is
    the bigger (a batch against a wide layer), row blocks otherwise. (On the MLP of the train_step
    benchmark this made the step 6-10% faster than row blocks everywhere.)"""
    rows_ok, cols_ok = m >= 64 * parts, n >= 64 * parts
    if cols_ok and (not rows_ok or k * n > m * k):
        axis, size = "cols", n
    elif rows_ok:
        axis, size = "rows", m
    else:
        return None
    bounds = [size * i // parts for i in range(parts + 1)]
    return axis, list(zip(bounds[:-1], bounds[1:]))


def gemm_block_operands(axis, lo, hi, a2, b2, out):
    """(a block, b block, out block) of block [lo, hi) along `axis` (see gemm_blocks)."""
    if axis == "rows":
        return a2[lo:hi], b2, out[lo:hi]
    return a2, b2[:, lo:hi], out[:, lo:hi]


def _matmul_split(attrs):
    """Row (or column) blocks of ``op(a) @ op(b)``, each written by its own BLAS call into one output."""
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))

    def split(parts, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != 2 or b.ndim != 2:
            return None
        a2 = a.T if ta else a
        b2 = b.T if tb else b
        if a2.shape[1] != b2.shape[0]:
            return None           # the kernel reports shape errors
        m, n = a2.shape[0], b2.shape[1]
        blocks = gemm_blocks(m, n, a2.shape[1], parts)
        if blocks is None:
            return None           # small products are not worth it
        out = np.empty((m, n), dtype=np.result_type(a2.dtype, b2.dtype))
        axis, bounds = blocks
        return out, [functools.partial(gemm, *gemm_block_operands(axis, lo, hi, a2, b2, out)) for lo, hi in bounds]
    return split


@register_kernel("MatMul", "CPU", cost=_matmul_cost, split=_matmul_split)
def matmul(attrs):
    """tf.raw_ops.MatMul: ``op(a) @ op(b)`` with op a transpose when transpose_a/transpose_b is set.

    Transposes are views, so BLAS reads the operands in place with a transposed flag.
    """
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))

    def fn(a, b):
        return gemm(*matmul_operands(a, b, ta, tb))
    return fn


def matmul_operands(a, b, ta: bool, tb: bool):
    """(op(a), op(b)) as views, checked the way MatMul checks them (ValueError otherwise)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"MatMul: inputs must be 2-D matrices, got shapes {a.shape} and {b.shape}")
    a2 = a.T if ta else a
    b2 = b.T if tb else b
    if a2.shape[1] != b2.shape[0]:
        raise ValueError(f"MatMul: inner dimensions differ: op(a) is {a2.shape} and op(b) is {b2.shape} "
                         f"(transpose_a={ta}, transpose_b={tb})")
    return a2, b2


# --------------------------------------------------------------------------------------------
# _FusedMatMul: MatMul + BiasAdd (+ Relu), made by the runtime's fusion pass (TF grappler's remapper
# makes the same op). Each row block's bias and ReLU run right after its GEMM, while the block is
# still in cache, on the thread that computed it: no separate passes over the activations.
# --------------------------------------------------------------------------------------------

class FusedPartError(Exception):
    """An error of one op of a fused group: `part` is its index in the group (the runtime names it)."""

    def __init__(self, part: int, error: BaseException):
        super().__init__(str(error))
        self.part = part
        self.error = error


@njit(cache=True, nogil=True)
def _bias_relu_rows(out, bias, relu, zero):
    rows, cols = out.shape
    for i in range(rows):
        for j in range(cols):
            v = out[i, j] + bias[j]
            if relu and v <= zero:        # NaN stays NaN, -0.0 becomes 0.0, as np.maximum(x, 0)
                v = zero
            out[i, j] = v


def _fused_epilogue(out, bias, relu):
    if out.dtype in _FAST_FLOATS and out.strides[1] == out.itemsize and bias.dtype == out.dtype:
        _bias_relu_rows(out, bias, relu, out.dtype.type(0))
    else:
        out += bias
        if relu:
            np.maximum(out, 0, out=out)


def fused_matmul_operands(attrs, a, b):
    """matmul_operands for the MatMul that is part 0 of a fused op."""
    try:
        return matmul_operands(a, b, bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False)))
    except ValueError as e:
        raise FusedPartError(0, e) from None


def _fused_bias_operands(attrs, a, b, bias):
    """(op(a), op(b), bias) checked as MatMul and BiasAdd would check them; errors name the part."""
    a2, b2 = fused_matmul_operands(attrs, a, b)
    bias = np.asarray(bias)
    n = b2.shape[1]
    if bias.ndim != 1 or bias.shape[0] != n:
        raise FusedPartError(1, ValueError(f"BiasAdd: bias must be 1-D of size {n} (channel dim of value "
                                           f"{(a2.shape[0], n)}, NHWC), got shape {bias.shape}"))
    dt = np.result_type(a2.dtype, b2.dtype)
    return a2, b2, bias.astype(dt, copy=False), dt


def _fused_matmul_cost(a, b, bias):
    return _matmul_cost(a, b)


def _fused_matmul_split(attrs):
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def block(a2, b2, out, bias):
        gemm(a2, b2, out)
        _fused_epilogue(out, bias, relu)

    def split(parts, a, b, bias):
        try:
            a2, b2, bias, dt = _fused_bias_operands(attrs, a, b, bias)
        except FusedPartError:
            return None               # the kernel reports it
        m, n = a2.shape[0], b2.shape[1]
        blocks = gemm_blocks(m, n, a2.shape[1], parts)
        if blocks is None:
            return None
        out = np.empty((m, n), dtype=dt)
        axis, bounds = blocks
        return out, [functools.partial(block, *gemm_block_operands(axis, lo, hi, a2, b2, out),
                                       bias if axis == "rows" else bias[lo:hi]) for lo, hi in bounds]
    return split


@register_kernel("_FusedMatMul", "CPU", cost=_fused_matmul_cost, split=_fused_matmul_split)
def fused_matmul(attrs):
    """``op(a) @ op(b) + bias``, then ReLU when ``fused_ops`` is ("BiasAdd", "Relu")."""
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def fn(a, b, bias):
        a2, b2, bias, _ = _fused_bias_operands(attrs, a, b, bias)
        out = gemm(a2, b2)
        _fused_epilogue(out, bias, relu)
        return out
    return fn


def _batch_matmul_cost(x, y):
    xs, ys = np.shape(x), np.shape(y)
    if len(xs) < 2 or len(ys) < 2:
        return int(np.size(x)) + int(np.size(y))
    try:
        batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    except ValueError:  # the kernel itself reports the mismatch
        return int(np.size(x)) + int(np.size(y))
    nb = int(np.prod(batch)) if batch else 1
    m, k = xs[-2], xs[-1]
    n = ys[-1] if ys[-2] == k else ys[-2]
    return nb * m * k * n


def _adjoint(x):
    x = np.swapaxes(x, -1, -2)
    return np.conj(x) if np.iscomplexobj(x) else x


@register_kernel("BatchMatMulV2", "CPU", cost=_batch_matmul_cost)
def batch_matmul_v2(attrs):
    """tf.raw_ops.BatchMatMulV2: batched ``adj(x) @ adj(y)`` with numpy-broadcast batch dims.

    adj_x/adj_y take the conjugate transpose of the last two axes (a plain transpose for reals).
    """
    adj_x, adj_y = bool(attrs.get("adj_x", False)), bool(attrs.get("adj_y", False))

    def fn(x, y):
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim < 2 or y.ndim < 2:
            raise ValueError(f"BatchMatMulV2: inputs must have rank >= 2, got shapes {x.shape} and {y.shape}")
        x2 = _adjoint(x) if adj_x else x
        y2 = _adjoint(y) if adj_y else y
        if x2.shape[-1] != y2.shape[-2]:
            raise ValueError(f"BatchMatMulV2: inner dimensions differ: adj(x) is {x2.shape} and adj(y) is {y2.shape}")
        try:
            return np.matmul(x2, y2)
        except ValueError as e:
            raise ValueError(f"BatchMatMulV2: batch dimensions of {x.shape} and {y.shape} do not broadcast") from e
    return fn


# --------------------------------------------------------------------------------------------
# Softmax family
# --------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _softmax_rows(x, out, log):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        # Sum the exponentials in float64: a long row of float32 terms loses digits otherwise.
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            out[r, c] = e
            s += e
        if log:
            lse = np.log(s)
            for c in range(cols):
                out[r, c] = (x[r, c] - m) - lse
        else:
            inv = 1.0 / s
            for c in range(cols):
                out[r, c] = out[r, c] * inv


@njit(cache=True, nogil=True)
def _xent_dense(x, labels, loss, back):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            back[r, c] = e
            s += e
        lse = np.log(s)
        inv = 1.0 / s
        acc = 0.0
        for c in range(cols):
            lab = labels[r, c]
            # -sum(labels * log_softmax): written as lab*(lse - shifted) so it stays finite for
            # zero labels even when log_softmax is -inf.
            if lab != 0:
                acc += lab * (lse - (x[r, c] - m))
            back[r, c] = back[r, c] * inv - lab
        loss[r] = acc


@njit(cache=True, nogil=True)
def _xent_sparse(x, labels, loss, back):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            back[r, c] = e
            s += e
        lse = np.log(s)
        inv = 1.0 / s
        for c in range(cols):
            back[r, c] = back[r, c] * inv
        lab = labels[r]
        loss[r] = lse - (x[r, lab] - m)
        back[r, lab] -= 1.0


def _as_rows(x):
    """(rows, last) contiguous view of x, the shape the fused softmax loops work on."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def _softmax_numpy(x, log):
    xf = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    shifted = xf - np.max(xf, axis=-1, keepdims=True)
    if log:
        out = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    else:
        e = np.exp(shifted)
        out = e / np.sum(e, axis=-1, keepdims=True)
    return out.astype(x.dtype, copy=False)


def _softmax_kernel(op_name, log):
    def fn(logits):
        x = np.asarray(logits)
        if x.ndim < 1:
            raise ValueError(f"{op_name}: logits must have rank >= 1, got a scalar")
        if x.dtype.kind != "f":
            raise TypeError(f"{op_name}: logits must be floating point, got {x.dtype}")
        if x.size == 0:
            return np.empty_like(x)
        if x.dtype not in _FAST_FLOATS:
            return _softmax_numpy(x, log)
        rows = _as_rows(x)
        out = np.empty_like(rows)
        _softmax_rows(rows, out, log)
        return out.reshape(x.shape)
    return fn


@register_kernel("Softmax", "CPU")
def softmax(attrs):
    """tf.raw_ops.Softmax over the last axis, as one numerically stable fused pass per row."""
    return _softmax_kernel("Softmax", False)


@register_kernel("LogSoftmax", "CPU")
def log_softmax(attrs):
    """tf.raw_ops.LogSoftmax over the last axis: ``x - max - log(sum(exp(x - max)))``."""
    return _softmax_kernel("LogSoftmax", True)


def _check_features(op_name, features):
    x = np.asarray(features)
    if x.ndim != 2:
        raise ValueError(f"{op_name}: features must be 2-D [batch, classes], got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op_name}: features must be floating point, got {x.dtype}")
    return x


@register_kernel("SoftmaxCrossEntropyWithLogits", "CPU")
def softmax_cross_entropy_with_logits(attrs):
    """tf.raw_ops.SoftmaxCrossEntropyWithLogits: per-row loss and its gradient ``softmax - labels``.

    Labels broadcast against features (as in TF >= 1.13); the result stays in the features' dtype.
    """
    def fn(features, labels):
        x = _check_features("SoftmaxCrossEntropyWithLogits", features)
        lab = np.asarray(labels)
        try:
            lab = np.broadcast_to(lab, x.shape)
        except ValueError:
            raise ValueError(f"SoftmaxCrossEntropyWithLogits: labels of shape {lab.shape} do not match "
                             f"features of shape {x.shape}") from None
        if x.shape[1] == 0:
            return np.zeros(x.shape[0], x.dtype), np.empty_like(x)
        if x.dtype not in _FAST_FLOATS:
            xf, lf = x.astype(np.float32), lab.astype(np.float32)
            shifted = xf - xf.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            loss = np.sum(lf * (np.log(s) - shifted), axis=1)
            return loss.astype(x.dtype), (e / s - lf).astype(x.dtype)
        x = np.ascontiguousarray(x)
        lab = np.ascontiguousarray(lab, dtype=x.dtype)
        loss = np.empty(x.shape[0], x.dtype)
        back = np.empty_like(x)
        _xent_dense(x, lab, loss, back)
        return loss, back
    return fn


@register_kernel("SparseSoftmaxCrossEntropyWithLogits", "CPU")
def sparse_softmax_cross_entropy_with_logits(attrs):
    """tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits: loss ``-log softmax(x)[label]`` and its gradient.

    A label outside [0, classes) raises ValueError naming it (TF raises InvalidArgumentError).
    """
    def fn(features, labels):
        x = _check_features("SparseSoftmaxCrossEntropyWithLogits", features)
        lab = np.asarray(labels)
        if lab.shape != x.shape[:1]:
            raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits: labels must have shape [{x.shape[0]}] "
                             f"to match features {x.shape}, got {lab.shape}")
        if lab.dtype.kind not in "iu":
            raise TypeError(f"SparseSoftmaxCrossEntropyWithLogits: labels must be integers, got {lab.dtype}")
        n_classes = x.shape[1]
        bad = np.flatnonzero((lab < 0) | (lab >= n_classes))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits: received a label value of {int(lab[i])} "
                             f"(labels[{i}]) which is outside the valid range of [0, {n_classes})")
        if x.dtype not in _FAST_FLOATS:
            xf = x.astype(np.float32)
            shifted = xf - xf.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            rows = np.arange(x.shape[0])
            loss = np.log(s[:, 0]) - shifted[rows, lab]
            back = e / s
            back[rows, lab] -= 1.0
            return loss.astype(x.dtype), back.astype(x.dtype)
        x = np.ascontiguousarray(x)
        loss = np.empty(x.shape[0], x.dtype)
        back = np.empty_like(x)
        _xent_sparse(x, lab.astype(np.int64, copy=False), loss, back)
        return loss, back
    return fn


# --------------------------------------------------------------------------------------------
# BiasAdd, BiasAddGrad
# --------------------------------------------------------------------------------------------

def _data_format(attrs, op_name):
    fmt = attrs.get("data_format", "NHWC") or "NHWC"
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"{op_name}: unsupported data_format {fmt!r} (expected 'NHWC' or 'NCHW')")
    return fmt


@register_kernel("BiasAdd", "CPU")
def bias_add(attrs):
    """tf.raw_ops.BiasAdd: adds a 1-D bias along the channel axis (last for NHWC, 1 for NCHW)."""
    fmt = _data_format(attrs, "BiasAdd")

    def fn(value, bias):
        value, bias = np.asarray(value), np.asarray(bias)
        if value.ndim < 2:
            raise ValueError(f"BiasAdd: value must have rank >= 2, got shape {value.shape}")
        axis = 1 if fmt == "NCHW" else value.ndim - 1
        if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
            raise ValueError(f"BiasAdd: bias must be 1-D of size {value.shape[axis]} (channel dim of value "
                             f"{value.shape}, {fmt}), got shape {bias.shape}")
        if axis != value.ndim - 1:
            bias = bias.reshape((-1,) + (1,) * (value.ndim - 2))
        return np.add(value, bias, dtype=value.dtype)
    return fn


@njit(cache=True, nogil=True)
def _column_sums(g, out):
    """out[j] += sum_i g[i, j], row after row (numpy's order for an axis-0 sum)."""
    rows, cols = g.shape
    for i in range(rows):
        for j in range(cols):
            out[j] += g[i, j]


def _bias_grad_rows(g):
    """(g as [rows, channels], True when the numba loop applies) for an NHWC out_backprop."""
    g2 = np.ascontiguousarray(g).reshape(-1, g.shape[-1])
    return g2, g2.dtype in _FAST_FLOATS


def _bias_add_grad_split(attrs):
    """Row blocks of an NHWC BiasAddGrad: each thread sums its rows, the last adds the partials."""
    fmt = _data_format(attrs, "BiasAddGrad")

    def split(parts, out_backprop):
        g = np.asarray(out_backprop)
        if fmt != "NHWC" or g.ndim < 2:
            return None
        g2, fast = _bias_grad_rows(g)
        if not fast or g2.shape[0] < 256 * parts:
            return None
        bounds = [g2.shape[0] * i // parts for i in range(parts + 1)]
        sums = np.zeros((parts, g2.shape[1]), g2.dtype)
        thunks = [functools.partial(_column_sums, g2[lo:hi], sums[i])
                  for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
        return None, thunks, lambda: sums.sum(axis=0, dtype=g2.dtype)
    return split


def _bias_add_grad_cost(out_backprop):
    return int(np.size(out_backprop))


@register_kernel("BiasAddGrad", "CPU", cost=_bias_add_grad_cost, split=_bias_add_grad_split)
def bias_add_grad(attrs):
    """tf.raw_ops.BiasAddGrad: sums out_backprop over every axis but the channel axis."""
    fmt = _data_format(attrs, "BiasAddGrad")

    def fn(out_backprop):
        g = np.asarray(out_backprop)
        if g.ndim < 2:
            raise ValueError(f"BiasAddGrad: out_backprop must have rank >= 2, got shape {g.shape}")
        if fmt == "NCHW":
            axes = (0,) + tuple(range(2, g.ndim))
            return np.sum(g, axis=axes, dtype=g.dtype)
        g2, fast = _bias_grad_rows(g)
        if fast:
            out = np.zeros(g2.shape[1], g2.dtype)
            _column_sums(g2, out)
            return out
        # Collapsing to [rows, channels] makes numpy add whole rows at a time (vectorised).
        return np.sum(g2, axis=0, dtype=g.dtype)
    return fn


def _half_via_float32(fn):
    """Runs a numba-backed kernel on float16 data in float32 (numba has no float16 arithmetic)
    and rounds the result back; other dtypes pass straight through."""
    def wrapped(*inputs):
        arrays = [np.asarray(a) for a in inputs]
        if not any(a.dtype == np.float16 for a in arrays):
            return fn(*arrays)
        out = fn(*(a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays))
        return out.astype(np.float16)
    return wrapped


# --------------------------------------------------------------------------------------------
# Window geometry shared by convolution and pooling
# --------------------------------------------------------------------------------------------

def _padding(attrs, op_name):
    p = attrs.get("padding", "VALID")
    if isinstance(p, bytes):
        p = p.decode()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"{op_name}: unsupported padding {p!r} (expected 'SAME' or 'VALID')")
    return p


def _spatial(attrs, key, fmt, op_name, default=(1, 1, 1, 1)):
    """(h, w) entries of a 4-vector attribute (strides, dilations, ksize) in the given data format."""
    v = tuple(int(s) for s in (attrs.get(key) or default))
    if len(v) != 4:
        raise ValueError(f"{op_name}: {key} must have 4 entries, got {v}")
    n, h, w, c = (v[0], v[2], v[3], v[1]) if fmt == "NCHW" else v
    if n != 1 or c != 1:
        raise ValueError(f"{op_name}: {key} along the batch and channel dims must be 1, got {v}")
    if h < 1 or w < 1:
        raise ValueError(f"{op_name}: {key} must be positive, got {v}")
    return h, w


def _window_1d(size, k, stride, dilation, padding):
    """TensorFlow's GetWindowedOutputSize: (output size, padding before) along one axis."""
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        out = (size - eff + stride) // stride
        return max(out, 0), 0
    out = (size + stride - 1) // stride
    pad_needed = max((out - 1) * stride + eff - size, 0)
    # TF puts the odd pixel of padding after (bottom/right), not before.
    return out, pad_needed // 2


def _to_nhwc(x, fmt):
    return np.transpose(x, (0, 2, 3, 1)) if fmt == "NCHW" else x


def _from_nhwc(x, fmt):
    return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2))) if fmt == "NCHW" else x


def _shape_from_nhwc(op_name, shape, fmt):
    """An NHWC/NCHW 4-vector (input_sizes, orig_input_shape) as (n, h, w, c)."""
    s = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if len(s) != 4:
        raise ValueError(f"{op_name}: the input shape vector must have 4 entries, got {s}")
    return (s[0], s[2], s[3], s[1]) if fmt == "NCHW" else s


# --------------------------------------------------------------------------------------------
# Convolution
# --------------------------------------------------------------------------------------------

# im2col/col2im index flat 1-D views of the NHWC image and of the [rows, kh*kw*C] column matrix,
# with offsets cast to unsigned: numba then skips its negative-index wraparound check on every
# element, and each contiguous run becomes a vectorised copy (2x faster than signed indexing).

@njit(cache=True, nogil=True)
def _im2col(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, cols):
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                o = ((n * oh + i) * ow + j) * k
                w0 = j * sw - pw
                # With no column dilation and the window inside the row, one filter row's patch is
                # a single contiguous run of kw*C input values.
                inside = dw == 1 and w0 >= 0 and w0 + kw <= w_in
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    dst = uintp(o + a * row_len)
                    if h < 0 or h >= h_in:
                        for t in range(uintp(row_len)):
                            cols[dst + t] = 0
                    elif inside:
                        src = uintp(((n * h_in + h) * w_in + w0) * c_in)
                        for t in range(uintp(row_len)):
                            cols[dst + t] = x[src + t]
                    else:
                        for b in range(kw):
                            w = w0 + b * dw
                            d = dst + uintp(b * c_in)
                            if 0 <= w < w_in:
                                src = uintp(((n * h_in + h) * w_in + w) * c_in)
                                for c in range(uc):
                                    cols[d + c] = x[src + c]
                            else:
                                for c in range(uc):
                                    cols[d + c] = 0


@njit(cache=True, nogil=True)
def _col2im(cols, n_img, h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, dx):
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                o = ((n * oh + i) * ow + j) * k
                w0 = j * sw - pw
                inside = dw == 1 and w0 >= 0 and w0 + kw <= w_in
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    src = uintp(o + a * row_len)
                    if inside:
                        dst = uintp(((n * h_in + h) * w_in + w0) * c_in)
                        for t in range(uintp(row_len)):
                            dx[dst + t] += cols[src + t]
                    else:
                        for b in range(kw):
                            w = w0 + b * dw
                            if 0 <= w < w_in:
                                dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                                s = src + uintp(b * c_in)
                                for c in range(uc):
                                    dx[dst + c] += cols[s + c]


class _Scratch(threading.local):
    """A per-thread reusable buffer for im2col columns and their gradients.

    Column buffers are large (tens of MB) and short-lived; allocating one per call makes the OS map
    and fault in fresh pages every time, which costs as much as filling them. Kernels on one thread
    never overlap, and no kernel returns a view of this buffer, so one buffer per thread is enough.
    """

    limit_bytes = 64 << 20

    def __init__(self):
        self.buf = np.empty(0, np.uint8)

    def get(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes > self.limit_bytes:
            return np.empty(shape, dtype)
        if self.buf.nbytes < nbytes:
            self.buf = np.empty(nbytes, np.uint8)
        return self.buf[:nbytes].view(dtype).reshape(shape)


_scratch = _Scratch()


class _ConvGeometry:
    """Strides, dilations and padding of one Conv2D-family op, resolved against concrete shapes."""

    __slots__ = ("op", "fmt", "sh", "sw", "dh", "dw", "padding")

    def __init__(self, attrs, op_name):
        self.op = op_name
        self.fmt = _data_format(attrs, op_name)
        self.sh, self.sw = _spatial(attrs, "strides", self.fmt, op_name)
        self.dh, self.dw = _spatial(attrs, "dilations", self.fmt, op_name)
        self.padding = _padding(attrs, op_name)

    def resolve(self, in_shape, f_shape):
        """(oh, ow, ph, pw) for an NHWC input shape and an HWIO filter shape."""
        n, h, w, c = in_shape
        kh, kw, ci, co = f_shape
        if ci != c:
            raise ValueError(f"{self.op}: input depth {c} does not match filter in_channels {ci} "
                             f"(input {tuple(in_shape)} NHWC, filter {tuple(f_shape)} HWIO)")
        oh, ph = _window_1d(h, kh, self.sh, self.dh, self.padding)
        ow, pw = _window_1d(w, kw, self.sw, self.dw, self.padding)
        if oh <= 0 or ow <= 0:
            raise ValueError(f"{self.op}: filter {kh}x{kw} (dilations {self.dh},{self.dw}) does not fit "
                             f"input {h}x{w} with VALID padding")
        return oh, ow, ph, pw

    def is_pointwise(self, f_shape, ph, pw):
        return f_shape[0] == 1 and f_shape[1] == 1 and self.sh == 1 and self.sw == 1 and ph == 0 and pw == 0

    def batch_chunk(self, n, rows_per_image, k):
        """Images per im2col chunk, so one column buffer stays under _MAX_COL_ELEMENTS."""
        per_image = max(rows_per_image * k, 1)
        return max(1, min(n, _MAX_COL_ELEMENTS // per_image))

    def im2col(self, x, kh, kw, oh, ow, ph, pw):
        cols = _scratch.get((x.shape[0] * oh * ow, kh * kw * x.shape[3]), x.dtype)
        _im2col(x.reshape(-1), *x.shape, kh, kw, self.sh, self.sw, self.dh, self.dw, ph, pw, oh, ow,
                cols.reshape(-1))
        return cols


def _conv_input(op_name, what, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op_name}: {what} must be 4-D ({fmt}), got shape {x.shape}")
    return np.ascontiguousarray(_to_nhwc(x, fmt))


def _check_filter(op_name, f):
    f = np.asarray(f)
    if f.ndim != 4:
        raise ValueError(f"{op_name}: filter must be 4-D [height, width, in_channels, out_channels], got {f.shape}")
    return f


def _conv_cost(x, f):
    # Output size is unknown without the attrs; stride 1 with SAME padding is the common case.
    fs = np.shape(f)
    return int(np.size(x)) * (int(fs[0] * fs[1] * fs[3]) if len(fs) == 4 else 1)


def _conv_forward(geo, x, f, out, oh, ow, ph, pw):
    """Conv2D of NHWC `x` into `out` [N, OH, OW, O], batch chunk by batch chunk."""
    n, _, _, c = x.shape
    kh, kw, _, co = f.shape
    f2 = f.reshape(kh * kw * c, co)
    step = geo.batch_chunk(n, oh * ow, kh * kw * c)
    for s in range(0, n, step):
        cols = geo.im2col(x[s:s + step], kh, kw, oh, ow, ph, pw)
        gemm(cols, f2, out[s:s + step].reshape(-1, co))


def _batch_blocks(n: int, parts: int):
    """[(lo, hi), ...] image ranges of a batch split over `parts` threads, or None when too small."""
    if n < 2 * parts:
        return None
    bounds = [n * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _conv_split_ok(geo, *arrays) -> bool:
    """Batch splitting handles NHWC float32/float64 arrays of one dtype (the common case)."""
    dt = arrays[0].dtype
    return geo.fmt == "NHWC" and dt in _FAST_FLOATS and all(a.ndim == 4 and a.dtype == dt for a in arrays)


def _conv_split_plan(geo, parts, batched, in_shape, fshape, *arrays):
    """(batch blocks, oh, ow, ph, pw) for splitting a convolution-family call over `parts`
    threads, or None when it should run whole (the kernel then reports any error)."""
    blocks = _batch_blocks(batched.shape[0], parts) if batched.ndim == 4 else None
    if blocks is None or len(in_shape) != 4 or len(fshape) != 4 or not _conv_split_ok(geo, *arrays):
        return None
    try:
        oh, ow, ph, pw = geo.resolve(in_shape, fshape)
    except ValueError:
        return None
    if geo.is_pointwise(fshape, ph, pw):
        return None
    return blocks, oh, ow, ph, pw


def _conv2d_split(attrs):
    """Batch blocks of a Conv2D: each thread runs im2col + GEMM on its images, into one output."""
    geo = _ConvGeometry(attrs, "Conv2D")

    def split(parts, input, filter):
        x, f = np.asarray(input), np.asarray(filter)
        plan = _conv_split_plan(geo, parts, x, x.shape, f.shape, x, f)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        x = np.ascontiguousarray(x)
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), x.dtype)
        return out, [functools.partial(_conv_forward, geo, x[lo:hi], f, out[lo:hi], oh, ow, ph, pw)
                     for lo, hi in blocks]
    return split


@register_kernel("Conv2D", "CPU", cost=_conv_cost, split=_conv2d_split)
def conv2d(attrs):
    """tf.raw_ops.Conv2D: NHWC input, HWIO filter, SAME/VALID padding, strides and dilations.

    im2col into a [N*OH*OW, KH*KW*C] buffer, then a GEMM with the filter viewed as [KH*KW*C, O]
    (per batch chunk, see _MAX_COL_ELEMENTS; a 1x1 stride-1 convolution skips im2col). NCHW is
    accepted by transposing to NHWC and back. On the pool, big convolutions split by batch.
    """
    geo = _ConvGeometry(attrs, "Conv2D")

    def fn(input, filter):
        x = _conv_input("Conv2D", "input", input, geo.fmt)
        f = _check_filter("Conv2D", filter)
        n, h, w, c = x.shape
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve(x.shape, f.shape)
        if geo.is_pointwise(f.shape, ph, pw):
            out = np.matmul(x.reshape(-1, c), f.reshape(c, co)).reshape(n, oh, ow, co)
            return _from_nhwc(out, geo.fmt)
        out = np.empty((n, oh, ow, co), np.result_type(x.dtype, f.dtype))
        _conv_forward(geo, x, f, out, oh, ow, ph, pw)
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


# _FusedConv2D: Conv2D + BiasAdd (+ Relu), made by the fusion pass as grappler's remapper does:
# the bias and ReLU run on each batch chunk's output right after its GEMM.

def _fused_conv_parts(attrs, geo, input, filter, bias):
    """(x NHWC, f, bias, oh, ow, ph, pw), checked the way Conv2D and BiasAdd check them."""
    try:
        x = _conv_input("Conv2D", "input", input, geo.fmt)
        f = _check_filter("Conv2D", filter)
        oh, ow, ph, pw = geo.resolve(x.shape, f.shape)
    except ValueError as e:
        raise FusedPartError(0, e) from None
    bias = np.asarray(bias)
    co = f.shape[3]
    if bias.ndim != 1 or bias.shape[0] != co:
        raise FusedPartError(1, ValueError(f"BiasAdd: bias must be 1-D of size {co} (channel dim of value "
                                           f"{(x.shape[0], oh, ow, co)}, NHWC), got shape {bias.shape}"))
    return x, f, bias, oh, ow, ph, pw


def _fused_conv_block(geo, x, f, bias, out, oh, ow, ph, pw, relu):
    if geo.is_pointwise(f.shape, ph, pw):
        gemm(x.reshape(-1, x.shape[3]), f.reshape(f.shape[2], f.shape[3]), out.reshape(-1, f.shape[3]))
    else:
        _conv_forward(geo, x, f, out, oh, ow, ph, pw)
    _fused_epilogue(out.reshape(-1, out.shape[3]), bias, relu)


def _fused_conv_split(attrs):
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def split(parts, input, filter, bias):
        x, f = np.asarray(input), np.asarray(filter)
        blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
        if blocks is None or not _conv_split_ok(geo, x, f):
            return None
        try:
            x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, x, f, bias)
        except FusedPartError:
            return None
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), x.dtype)
        bias = bias.astype(x.dtype, copy=False)
        return out, [functools.partial(_fused_conv_block, geo, x[lo:hi], f, bias, out[lo:hi], oh, ow, ph, pw, relu)
                     for lo, hi in blocks]
    return split


def _fused_conv_cost(input, filter, bias):
    return _conv_cost(input, filter)


@register_kernel("_FusedConv2D", "CPU", cost=_fused_conv_cost, split=_fused_conv_split)
def fused_conv2d(attrs):
    """Conv2D (NHWC) + bias, then ReLU when ``fused_ops`` is ("BiasAdd", "Relu")."""
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def fn(input, filter, bias):
        x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, input, filter, bias)
        dt = np.result_type(x.dtype, f.dtype)
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), dt)
        _fused_conv_block(geo, x, f, bias.astype(dt, copy=False), out, oh, ow, ph, pw, relu)
        return out
    return _half_via_float32(fn)


def _conv_bp_input_cost(input_sizes, f, dy):
    fs = np.shape(f)
    return int(np.size(dy)) * (int(fs[0] * fs[1] * fs[2]) if len(fs) == 4 else 1)


def _conv_backprop_input(geo, dy, f, dx, oh, ow, ph, pw):
    """Conv2DBackpropInput of NHWC `dy` added into the zeroed NHWC `dx`, batch chunk by chunk."""
    n, _, _, c = dx.shape
    kh, kw, _, co = f.shape
    f2t = f.reshape(kh * kw * c, co).T
    step = geo.batch_chunk(n, oh * ow, kh * kw * c)
    for s in range(0, n, step):
        dys = dy[s:s + step].reshape(-1, co)
        dcols = gemm(dys, f2t, _scratch.get((dys.shape[0], f2t.shape[1]), dx.dtype))
        dxs = dx[s:s + step]
        _col2im(dcols.reshape(-1), *dxs.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow,
                dxs.reshape(-1))


def _conv_bp_input_split(attrs):
    """Batch blocks of a Conv2DBackpropInput: images do not share input gradients."""
    geo = _ConvGeometry(attrs, "Conv2DBackpropInput")

    def split(parts, input_sizes, filter, out_backprop):
        f, dy = np.asarray(filter), np.asarray(out_backprop)
        sizes = tuple(int(d) for d in np.asarray(input_sizes).reshape(-1))
        plan = _conv_split_plan(geo, parts, dy, sizes, f.shape, f, dy)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        if dy.shape != (sizes[0], oh, ow, f.shape[3]):
            return None
        dy = np.ascontiguousarray(dy)
        dx = np.zeros(sizes, dy.dtype)
        return dx, [functools.partial(_conv_backprop_input, geo, dy[lo:hi], f, dx[lo:hi], oh, ow, ph, pw)
                    for lo, hi in blocks]
    return split


@register_kernel("Conv2DBackpropInput", "CPU", cost=_conv_bp_input_cost, split=_conv_bp_input_split)
def conv2d_backprop_input(attrs):
    """tf.raw_ops.Conv2DBackpropInput: gradient of Conv2D with respect to its input.

    A GEMM ``dy [N*OH*OW, O] @ filter.T [O, KH*KW*C]`` gives per-patch gradients, which col2im
    scatter-adds back onto the input grid.
    """
    geo = _ConvGeometry(attrs, "Conv2DBackpropInput")

    def fn(input_sizes, filter, out_backprop):
        n, h, w, c = _shape_from_nhwc("Conv2DBackpropInput", input_sizes, geo.fmt)
        f = _check_filter("Conv2DBackpropInput", filter)
        dy = _conv_input("Conv2DBackpropInput", "out_backprop", out_backprop, geo.fmt)
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve((n, h, w, c), f.shape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropInput: out_backprop has shape {dy.shape} (NHWC) but input_sizes "
                             f"{(n, h, w, c)} and filter {f.shape} give an output of {(n, oh, ow, co)}")
        dtype = np.result_type(f.dtype, dy.dtype)
        if geo.is_pointwise(f.shape, ph, pw):
            f2t = f.reshape(c, co).T
            return _from_nhwc(np.matmul(dy.reshape(-1, co), f2t).reshape(n, h, w, c), geo.fmt)
        dx = np.zeros((n, h, w, c), dtype)
        _conv_backprop_input(geo, dy, f, dx, oh, ow, ph, pw)
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


def _conv_bp_filter_cost(x, filter_sizes, dy):
    fs = np.asarray(filter_sizes).reshape(-1)
    return int(np.size(dy)) * (int(fs[0] * fs[1] * fs[2]) if fs.size == 4 else 1)


def _conv_backprop_filter_t(geo, x, dy, fshape, oh, ow, ph, pw):
    """The filter gradient of NHWC `x` and `dy`, transposed: [O, KH*KW*C]."""
    n, _, _, c = x.shape
    kh, kw, _, co = fshape
    step = geo.batch_chunk(n, oh * ow, kh * kw * c)
    # Computed as (dy.T @ cols).T: OpenBLAS is markedly faster with the long dimension as the
    # shared one on the right-hand side than with a transposed tall left operand.
    df_t = None
    for s in range(0, n, step):
        cols = geo.im2col(x[s:s + step], kh, kw, oh, ow, ph, pw)
        part = gemm(dy[s:s + step].reshape(-1, co).T, cols)
        df_t = part if df_t is None else np.add(df_t, part, out=df_t)
    return df_t


def _conv_bp_filter_split(attrs):
    """Batch blocks of a Conv2DBackpropFilter: each thread sums its images' filter gradients, and
    the thread that finishes last adds the partial sums."""
    geo = _ConvGeometry(attrs, "Conv2DBackpropFilter")

    def split(parts, input, filter_sizes, out_backprop):
        x, dy = np.asarray(input), np.asarray(out_backprop)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        plan = _conv_split_plan(geo, parts, x, x.shape, fshape, x, dy)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        if dy.shape != (x.shape[0], oh, ow, fshape[3]):
            return None
        x, dy = np.ascontiguousarray(x), np.ascontiguousarray(dy)
        partial_sums = [None] * len(blocks)

        def block(i, lo, hi):
            partial_sums[i] = _conv_backprop_filter_t(geo, x[lo:hi], dy[lo:hi], fshape, oh, ow, ph, pw)

        def finish():
            total = partial_sums[0]
            for p in partial_sums[1:]:
                total += p
            return np.ascontiguousarray(total.T).reshape(fshape)
        return None, [functools.partial(block, i, lo, hi) for i, (lo, hi) in enumerate(blocks)], finish
    return split


@register_kernel("Conv2DBackpropFilter", "CPU", cost=_conv_bp_filter_cost, split=_conv_bp_filter_split)
def conv2d_backprop_filter(attrs):
    """tf.raw_ops.Conv2DBackpropFilter: gradient of Conv2D with respect to its filter.

    Re-runs im2col on the input and computes ``cols.T @ dy`` by GEMM, reshaped to HWIO.
    """
    geo = _ConvGeometry(attrs, "Conv2DBackpropFilter")

    def fn(input, filter_sizes, out_backprop):
        x = _conv_input("Conv2DBackpropFilter", "input", input, geo.fmt)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        if len(fshape) != 4:
            raise ValueError(f"Conv2DBackpropFilter: filter_sizes must have 4 entries, got {fshape}")
        dy = _conv_input("Conv2DBackpropFilter", "out_backprop", out_backprop, geo.fmt)
        n, h, w, c = x.shape
        kh, kw, _, co = fshape
        oh, ow, ph, pw = geo.resolve(x.shape, fshape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropFilter: out_backprop has shape {dy.shape} (NHWC) but input "
                             f"{x.shape} and filter_sizes {fshape} give an output of {(n, oh, ow, co)}")
        dtype = np.result_type(x.dtype, dy.dtype)
        if geo.is_pointwise(fshape, ph, pw):
            df_t = np.matmul(dy.reshape(-1, co).T, x.reshape(-1, c))
            return np.ascontiguousarray(df_t.T).reshape(fshape).astype(dtype, copy=False)
        df_t = _conv_backprop_filter_t(geo, x, dy, fshape, oh, ow, ph, pw)
        return np.ascontiguousarray(df_t.T).reshape(fshape).astype(dtype, copy=False)
    return _half_via_float32(fn)


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------

# Pooling kernels work on flat views of NHWC arrays, one output pixel at a time with the channel
# loop innermost (contiguous), and unsigned offsets for the same reason as im2col.

@njit(cache=True, nogil=True)
def _max_pool(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, out):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                # Padding is never a candidate (TF pads max-pool with -inf), so seed the window
                # with its first real pixel rather than a sentinel.
                first = uintp(((n * h_in + hs) * w_in + ws) * c_in)
                for c in range(uc):
                    out[o + c] = x[first + c]
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            v = x[src + c]
                            if v > out[o + c]:
                                out[o + c] = v


@njit(cache=True, nogil=True)
def _max_pool_grad(x, grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx):
    uc = uintp(c_in)
    best = np.empty(c_in, x.dtype)
    arg = np.empty(c_in, np.uintp)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                first = uintp(((n * h_in + hs) * w_in + ws) * c_in)
                for c in range(uc):
                    best[c] = x[first + c]
                    arg[c] = first
                # Strict '>' keeps the first maximum in row-major window order, as TF does.
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            v = x[src + c]
                            if v > best[c]:
                                best[c] = v
                                arg[c] = src
                o = uintp(((n * oh + i) * ow + j) * c_in)
                for c in range(uc):
                    dx[arg[c] + c] += grad[o + c]


@njit(cache=True, nogil=True)
def _avg_pool(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, out):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                for c in range(uc):
                    out[o + c] = 0
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            out[o + c] += x[src + c]
                # TF averages over the real pixels only: padding is excluded from the count.
                inv = 1.0 / ((he - hs) * (we - ws))
                for c in range(uc):
                    out[o + c] = out[o + c] * inv


@njit(cache=True, nogil=True)
def _avg_pool_grad(grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                inv = 1.0 / ((he - hs) * (we - ws))
                for h in range(hs, he):
                    for w in range(ws, we):
                        dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            dx[dst + c] += grad[o + c] * inv


class _PoolGeometry:
    """ksize, strides and padding of one pooling op, resolved against a concrete input shape."""

    __slots__ = ("op", "fmt", "kh", "kw", "sh", "sw", "padding")

    def __init__(self, attrs, op_name):
        self.op = op_name
        self.fmt = _data_format(attrs, op_name)
        self.kh, self.kw = _spatial(attrs, "ksize", self.fmt, op_name, default=None)
        self.sh, self.sw = _spatial(attrs, "strides", self.fmt, op_name)
        self.padding = _padding(attrs, op_name)

    def resolve(self, in_shape):
        """(oh, ow, ph, pw) for an NHWC input shape."""
        _, h, w, _ = in_shape
        oh, ph = _window_1d(h, self.kh, self.sh, 1, self.padding)
        ow, pw = _window_1d(w, self.kw, self.sw, 1, self.padding)
        if oh <= 0 or ow <= 0:
            raise ValueError(f"{self.op}: window {self.kh}x{self.kw} does not fit input {h}x{w} with VALID padding")
        return oh, ow, ph, pw

    def args(self, in_shape, ph, pw, oh, ow):
        """The geometry arguments of the pooling kernels: input dims, window, padding, output dims."""
        return (*in_shape, self.kh, self.kw, self.sh, self.sw, ph, pw, oh, ow)


def _pool_input(op_name, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op_name}: input must be 4-D ({fmt}), got shape {x.shape}")
    return np.ascontiguousarray(_to_nhwc(x, fmt))


def _check_grad_shape(op_name, g, want):
    if g.shape != tuple(want):
        raise ValueError(f"{op_name}: grad has shape {g.shape} (NHWC) but the pooled output has shape {tuple(want)}")


def _pool_split(op_name, with_grad):
    """Batch blocks of MaxPool (with_grad False) or MaxPoolGrad: images pool independently."""
    def make(attrs):
        geo = _PoolGeometry(attrs, op_name)

        def split(parts, *inputs):
            x = np.asarray(inputs[0])
            g = np.asarray(inputs[-1]) if with_grad else x
            blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
            if (blocks is None or geo.fmt != "NHWC" or x.dtype not in _FAST_FLOATS or g.dtype != x.dtype
                    or g.ndim != 4):
                return None
            try:
                oh, ow, ph, pw = geo.resolve(x.shape)
            except ValueError:
                return None
            pooled = (x.shape[0], oh, ow, x.shape[3])
            if with_grad and g.shape != pooled:
                return None
            x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
            out = np.zeros(x.shape, x.dtype) if with_grad else np.empty(pooled, x.dtype)

            def block(lo, hi):
                xb = x[lo:hi]
                if with_grad:
                    _max_pool_grad(xb.reshape(-1), g[lo:hi].reshape(-1), *geo.args(xb.shape, ph, pw, oh, ow),
                                   out[lo:hi].reshape(-1))
                else:
                    _max_pool(xb.reshape(-1), *geo.args(xb.shape, ph, pw, oh, ow), out[lo:hi].reshape(-1))
            return out, [functools.partial(block, lo, hi) for lo, hi in blocks]
        return split
    return make


@register_kernel("MaxPool", "CPU", split=_pool_split("MaxPool", False))
def max_pool(attrs):
    """tf.raw_ops.MaxPool (NHWC; NCHW via transposes). SAME padding never wins the max."""
    geo = _PoolGeometry(attrs, "MaxPool")

    def fn(input):
        x = _pool_input("MaxPool", input, geo.fmt)
        oh, ow, ph, pw = geo.resolve(x.shape)
        out = np.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        if out.size:
            _max_pool(x.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), out.reshape(-1))
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("MaxPoolGrad", "CPU", split=_pool_split("MaxPoolGrad", True))
def max_pool_grad(attrs):
    """tf.raw_ops.MaxPoolGrad: routes each output gradient to the first maximum of its window.

    The maximum is recomputed from orig_input (orig_output is accepted for signature parity), and
    ties go to the first pixel in row-major window order, as in TF's CPU kernel.
    """
    geo = _PoolGeometry(attrs, "MaxPoolGrad")

    def fn(orig_input, orig_output, grad):
        x = _pool_input("MaxPoolGrad", orig_input, geo.fmt)
        g = _pool_input("MaxPoolGrad", grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(x.shape)
        _check_grad_shape("MaxPoolGrad", g, (x.shape[0], oh, ow, x.shape[3]))
        dx = np.zeros(x.shape, g.dtype)
        if g.size:
            _max_pool_grad(x.reshape(-1), g.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), dx.reshape(-1))
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("AvgPool", "CPU")
def avg_pool(attrs):
    """tf.raw_ops.AvgPool: window means over real pixels (SAME padding is not counted)."""
    geo = _PoolGeometry(attrs, "AvgPool")

    def fn(value):
        x = _pool_input("AvgPool", value, geo.fmt)
        if x.dtype.kind != "f":
            raise TypeError(f"AvgPool: value must be floating point, got {x.dtype}")
        oh, ow, ph, pw = geo.resolve(x.shape)
        out = np.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        if out.size:
            _avg_pool(x.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), out.reshape(-1))
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("AvgPoolGrad", "CPU")
def avg_pool_grad(attrs):
    """tf.raw_ops.AvgPoolGrad: spreads each output gradient evenly over its window's real pixels."""
    geo = _PoolGeometry(attrs, "AvgPoolGrad")

    def fn(orig_input_shape, grad):
        shape = _shape_from_nhwc("AvgPoolGrad", orig_input_shape, geo.fmt)
        g = _pool_input("AvgPoolGrad", grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(shape)
        _check_grad_shape("AvgPoolGrad", g, (shape[0], oh, ow, shape[3]))
        dx = np.zeros(shape, g.dtype)
        if g.size:
            _avg_pool_grad(g.reshape(-1), *geo.args(shape, ph, pw, oh, ow), dx.reshape(-1))
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)
