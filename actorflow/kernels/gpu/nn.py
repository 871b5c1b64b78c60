"""GPU kernels for matrix products, softmax and cross-entropy, bias, convolution and pooling.

- MatMul calls cuBLAS's GEMM directly for float32/float64 (row-major operands passed as their
  column-major transposes, so no operand is ever copied), which costs a fraction of
  `cupy.matmul`'s Python overhead; other dtypes and shapes go through `cupy.matmul`.
- Softmax cross-entropy runs one warp per row (max, sum of exponentials and gradient in one
  kernel launch).
- Convolutions are im2col + GEMM; im2col and its adjoint (col2im, in gather form: no atomics)
  are CUDA kernels, one thread per element. NHWC is native; NCHW is transposed to and from it.
- Pooling kernels take one thread per output (per input for AvgPoolGrad); MaxPoolGrad routes the
  gradient to the first maximum of each window, like the CPU kernel.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.window import _ConvGeometry, _data_format, _PoolGeometry, _shape_from_nhwc
from actorflow.kernels.gpu._common import cp, floats_only, launch, raw_kernel
from actorflow.kernels.registry import register_kernel

_GEMM: dict = {}
_ONE = {np.dtype(np.float32): np.ones((), np.float32), np.dtype(np.float64): np.ones((), np.float64)}
_ZERO = {np.dtype(np.float32): np.zeros((), np.float32), np.dtype(np.float64): np.zeros((), np.float64)}


def _load_cublas():
    # Imported on first use: loading cuBLAS needs its shared libraries, which only a CUDA machine has.
    from cupy_backends.cuda.libs import cublas
    _GEMM.update({np.dtype(np.float32): cublas.sgemm, np.dtype(np.float64): cublas.dgemm, "setStream": cublas.setStream})


def gemm(a, b, ta=False, tb=False):
    """``op(a) @ op(b)`` for 2-D CuPy arrays, op a transpose where `ta`/`tb` is set."""
    dt = a.dtype
    if not _GEMM:
        _load_cublas()
    fn = _GEMM.get(dt)
    if fn is None or b.dtype != dt or not (a.flags.c_contiguous and b.flags.c_contiguous):
        return cp.matmul(a.T if ta else a, b.T if tb else b)
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2:
        raise ValueError(f"MatMul: inner dimensions differ: op(a) is {(m, k)} and op(b) is {(k2, n)} "
                         f"(transpose_a={ta}, transpose_b={tb})")
    out = cp.empty((m, n), dt)
    if m == 0 or n == 0:
        return out
    if k == 0:
        out.fill(0)
        return out
    handle = cp.cuda.device.get_cublas_handle()
    _GEMM["setStream"](handle, cp.cuda.get_current_stream().ptr)
    # Row-major C = op(a) op(b) is column-major C^T = op(b)^T op(a)^T: pass b first.
    fn(handle, 1 if tb else 0, 1 if ta else 0, n, m, k, _ONE[dt].ctypes.data, b.data.ptr, b.shape[1],
       a.data.ptr, a.shape[1], _ZERO[dt].ctypes.data, out.data.ptr, n)
    return out


@register_kernel("MatMul", "GPU", releases_gil=False)
def matmul(attrs):
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))

    def fn(a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"MatMul: inputs must be 2-D matrices, got shapes {a.shape} and {b.shape}")
        return gemm(a, b, ta, tb)
    return fn


@register_kernel("BatchMatMulV2", "GPU", releases_gil=False)
def batch_matmul_v2(attrs):
    adj_x, adj_y = bool(attrs.get("adj_x", False)), bool(attrs.get("adj_y", False))

    def fn(x, y):
        if x.ndim < 2 or y.ndim < 2:
            raise ValueError(f"BatchMatMulV2: inputs must have rank >= 2, got shapes {x.shape} and {y.shape}")
        x2 = cp.swapaxes(x, -1, -2).conj() if adj_x else x
        y2 = cp.swapaxes(y, -1, -2).conj() if adj_y else y
        if x2.shape[-1] != y2.shape[-2]:
            raise ValueError(f"BatchMatMulV2: inner dimensions differ: adj(x) is {x2.shape} and adj(y) is {y2.shape}")
        return cp.matmul(x2, y2)
    return fn


# -- softmax and cross-entropy -------------------------------------------------------------------
def _softmax(x):
    e = cp.exp(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def _log_softmax(x):
    s = x - x.max(axis=-1, keepdims=True)
    return s - cp.log(cp.exp(s).sum(axis=-1, keepdims=True))


def _check_rows(op, x):
    if x.ndim < 1:
        raise ValueError(f"{op}: logits must have rank >= 1, got a scalar")
    if x.shape[-1] == 0:
        return False
    return True


@register_kernel("Softmax", "GPU", releases_gil=False)
def softmax(attrs):
    def fn(x):
        return _softmax(x) if _check_rows("Softmax", x) else x.copy()
    return floats_only(fn)


@register_kernel("LogSoftmax", "GPU", releases_gil=False)
def log_softmax(attrs):
    def fn(x):
        return _log_softmax(x) if _check_rows("LogSoftmax", x) else x.copy()
    return floats_only(fn)


_XENT_PRELUDE = r"""
__device__ inline T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = w > v ? w : v; }
    return v;
}
__device__ inline T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
"""

_sparse_xent = raw_kernel("af_sparse_xent", _XENT_PRELUDE + r"""
extern "C" __global__ void af_sparse_xent(const T* x, const long long* labels, T* loss, T* back,
                                          int rows, int cols) {
    int row = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const T* r = x + (long long)row * cols;
    T* b = back + (long long)row * cols;
    T m = r[lane < cols ? lane : 0];
    for (int j = lane; j < cols; j += 32) m = r[j] > m ? r[j] : m;
    m = warp_max(m);
    T s = 0;
    for (int j = lane; j < cols; j += 32) s += exp(r[j] - m);
    s = warp_sum(s);
    long long lab = labels[row];
    bool ok = lab >= 0 && lab < cols;
    T nan_ = (T)__longlong_as_double(0x7ff8000000000000ULL);
    for (int j = lane; j < cols; j += 32)
        b[j] = ok ? exp(r[j] - m) / s - (j == lab ? (T)1 : (T)0) : nan_;
    if (lane == 0) loss[row] = ok ? log(s) - (r[lab] - m) : nan_;
}
""")

_dense_xent = raw_kernel("af_dense_xent", _XENT_PRELUDE + r"""
extern "C" __global__ void af_dense_xent(const T* x, const T* labels, T* loss, T* back, int rows, int cols) {
    int row = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const T* r = x + (long long)row * cols;
    const T* l = labels + (long long)row * cols;
    T* b = back + (long long)row * cols;
    T m = r[lane < cols ? lane : 0];
    for (int j = lane; j < cols; j += 32) m = r[j] > m ? r[j] : m;
    m = warp_max(m);
    T s = 0;
    for (int j = lane; j < cols; j += 32) s += exp(r[j] - m);
    s = warp_sum(s);
    T logs = log(s);
    T acc = 0;
    for (int j = lane; j < cols; j += 32) {
        acc += l[j] * (logs - (r[j] - m));
        b[j] = exp(r[j] - m) / s - l[j];
    }
    acc = warp_sum(acc);
    if (lane == 0) loss[row] = acc;
}
""")


def _check_features(op, x):
    if x.ndim != 2:
        raise ValueError(f"{op}: features must be 2-D [batch, classes], got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: features must be floating point, got {x.dtype}")
    return cp.ascontiguousarray(x)


def _xent(kernel, x, labels):
    """(loss, backprop) of a cross-entropy kernel run one warp per row."""
    rows, cols = x.shape
    loss = cp.empty(rows, x.dtype)
    back = cp.empty_like(x)
    if cols == 0:
        loss.fill(0)
    else:
        launch(kernel(x.dtype), rows * 32, (x, labels, loss, back, np.int32(rows), np.int32(cols)), block=256)
    return loss, back


@register_kernel("SparseSoftmaxCrossEntropyWithLogits", "GPU", releases_gil=False)
def sparse_softmax_cross_entropy_with_logits(attrs):
    """Labels outside [0, classes) give NaN loss and gradient rows, as TF's GPU kernel does
    (the CPU kernel raises)."""
    def fn(features, labels):
        x = _check_features("SparseSoftmaxCrossEntropyWithLogits", features)
        if labels.shape != x.shape[:1]:
            raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits: labels must have shape [{x.shape[0]}] "
                             f"to match features {x.shape}, got {labels.shape}")
        if labels.dtype.kind not in "iu":
            raise TypeError(f"SparseSoftmaxCrossEntropyWithLogits: labels must be integers, got {labels.dtype}")
        return _xent(_sparse_xent, x, labels.astype(np.int64, copy=False))
    return floats_only(fn)


@register_kernel("SoftmaxCrossEntropyWithLogits", "GPU", releases_gil=False)
def softmax_cross_entropy_with_logits(attrs):
    def fn(features, labels):
        x = _check_features("SoftmaxCrossEntropyWithLogits", features)
        try:
            lab = cp.ascontiguousarray(cp.broadcast_to(labels, x.shape).astype(x.dtype, copy=False))
        except ValueError:
            raise ValueError(f"SoftmaxCrossEntropyWithLogits: labels of shape {labels.shape} do not match "
                             f"features of shape {x.shape}") from None
        return _xent(_dense_xent, x, lab)
    return floats_only(fn)


# -- bias ----------------------------------------------------------------------------------------
@register_kernel("BiasAdd", "GPU", releases_gil=False)
def bias_add(attrs):
    fmt = _data_format(attrs, "BiasAdd")

    def fn(value, bias):
        if value.ndim < 2:
            raise ValueError(f"BiasAdd: value must have rank >= 2, got shape {value.shape}")
        axis = 1 if fmt == "NCHW" else value.ndim - 1
        if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
            raise ValueError(f"BiasAdd: bias must be 1-D of size {value.shape[axis]} (channel dim of value "
                             f"{value.shape}, {fmt}), got shape {bias.shape}")
        if axis != value.ndim - 1:
            bias = bias.reshape((-1,) + (1,) * (value.ndim - 2))
        return cp.add(value, bias)
    return fn


@register_kernel("BiasAddGrad", "GPU", releases_gil=False)
def bias_add_grad(attrs):
    fmt = _data_format(attrs, "BiasAddGrad")

    def fn(g):
        if g.ndim < 2:
            raise ValueError(f"BiasAddGrad: out_backprop must have rank >= 2, got shape {g.shape}")
        if fmt == "NCHW":
            return g.sum(axis=(0,) + tuple(range(2, g.ndim)), dtype=g.dtype)
        g2 = cp.ascontiguousarray(g).reshape(-1, g.shape[-1])
        if g2.dtype in _ONE:
            # A column sum is a GEMV with a ones vector: cuBLAS beats a strided reduction kernel.
            return gemm(_ones(g2.shape[0], g2.dtype), g2).reshape(g2.shape[1])
        return g2.sum(axis=0, dtype=g.dtype)
    return fn


_ONES: dict = {}


def _ones(n, dtype):
    """A cached [1, n] row of ones on the current device."""
    key = (n, dtype, cp.cuda.Device().id)
    v = _ONES.get(key)
    if v is None:
        if len(_ONES) > 64:
            _ONES.clear()
        v = _ONES[key] = cp.ones((1, n), dtype)
    return v


# -- convolution ---------------------------------------------------------------------------------
_GEOMETRY_ARGS = ("int H, int W, int C, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, "
                  "int OH, int OW")

_im2col = raw_kernel("af_im2col", r"""
extern "C" __global__ void af_im2col(const T* x, T* cols, long long total, """ + _GEOMETRY_ARGS + r""") {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int K = KH * KW * C;
    long long row = idx / K;
    int col = (int)(idx - row * K);
    int c = col % C, t = col / C, kj = t % KW, ki = t / KW;
    int j = (int)(row % OW);
    long long t2 = row / OW;
    int i = (int)(t2 % OH);
    long long n = t2 / OH;
    int h = i * SH - PH + ki * DH, w = j * SW - PW + kj * DW;
    cols[idx] = (h >= 0 && h < H && w >= 0 && w < W) ? x[((n * H + h) * W + w) * C + c] : (T)0;
}
""")

_col2im = raw_kernel("af_col2im", r"""
extern "C" __global__ void af_col2im(const T* cols, T* dx, long long total, """ + _GEOMETRY_ARGS + r""") {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int K = KH * KW * C;
    int c = (int)(idx % C);
    long long t = idx / C;
    int w = (int)(t % W);
    t /= W;
    int h = (int)(t % H);
    long long n = t / H;
    T acc = 0;
    for (int ki = 0; ki < KH; ++ki) {
        int hi = h + PH - ki * DH;
        if (hi < 0 || hi % SH) continue;
        int i = hi / SH;
        if (i >= OH) continue;
        for (int kj = 0; kj < KW; ++kj) {
            int wj = w + PW - kj * DW;
            if (wj < 0 || wj % SW) continue;
            int j = wj / SW;
            if (j >= OW) continue;
            acc += cols[((n * OH + i) * OW + j) * K + (ki * KW + kj) * C + c];
        }
    }
    dx[idx] = acc;
}
""")


def _nhwc(x, fmt):
    return cp.ascontiguousarray(x.transpose(0, 2, 3, 1) if fmt == "NCHW" else x)


def _from_nhwc(x, fmt):
    return cp.ascontiguousarray(x.transpose(0, 3, 1, 2)) if fmt == "NCHW" else x


def _geo_args(geo, in_shape, f_shape, ph, pw, oh, ow):
    _, h, w, c = in_shape
    kh, kw = f_shape[0], f_shape[1]
    return tuple(np.int32(v) for v in (h, w, c, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow))


def _im2col_of(geo, x, f_shape, ph, pw, oh, ow):
    n, _, _, c = x.shape
    k = f_shape[0] * f_shape[1] * c
    cols = cp.empty((n * oh * ow, k), x.dtype)
    launch(_im2col(x.dtype), cols.size, (x, cols, np.int64(cols.size)) + _geo_args(geo, x.shape, f_shape, ph, pw, oh, ow))
    return cols


def _check4(op, what, x, fmt):
    if x.ndim != 4:
        raise ValueError(f"{op}: {what} must be 4-D ({fmt}), got shape {x.shape}")


@register_kernel("Conv2D", "GPU", releases_gil=False)
def conv2d(attrs):
    geo = _ConvGeometry(attrs, "Conv2D")

    def fn(input, filter):
        _check4("Conv2D", "input", input, geo.fmt)
        if filter.ndim != 4:
            raise ValueError(f"Conv2D: filter must be 4-D [height, width, in_channels, out_channels], got {filter.shape}")
        x = _nhwc(input, geo.fmt)
        f = cp.ascontiguousarray(filter)
        n, h, w, c = x.shape
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve(x.shape, f.shape)
        f2 = f.reshape(kh * kw * c, co)
        if geo.is_pointwise(f.shape, ph, pw):
            return _from_nhwc(gemm(x.reshape(-1, c), f2).reshape(n, oh, ow, co), geo.fmt)
        cols = _im2col_of(geo, x, f.shape, ph, pw, oh, ow)
        return _from_nhwc(gemm(cols, f2).reshape(n, oh, ow, co), geo.fmt)
    return floats_only(fn)


@register_kernel("Conv2DBackpropInput", "GPU", releases_gil=False, host_inputs=(0,))
def conv2d_backprop_input(attrs):
    geo = _ConvGeometry(attrs, "Conv2DBackpropInput")

    def fn(input_sizes, filter, out_backprop):
        n, h, w, c = _shape_from_nhwc("Conv2DBackpropInput", input_sizes, geo.fmt)
        _check4("Conv2DBackpropInput", "out_backprop", out_backprop, geo.fmt)
        f = cp.ascontiguousarray(filter)
        dy = _nhwc(out_backprop, geo.fmt)
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve((n, h, w, c), f.shape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropInput: out_backprop has shape {dy.shape} (NHWC) but input_sizes "
                             f"{(n, h, w, c)} and filter {f.shape} give an output of {(n, oh, ow, co)}")
        f2 = f.reshape(kh * kw * c, co)
        dcols = gemm(dy.reshape(-1, co), f2, tb=True)
        if geo.is_pointwise(f.shape, ph, pw):
            return _from_nhwc(dcols.reshape(n, h, w, c), geo.fmt)
        dx = cp.empty((n, h, w, c), dcols.dtype)
        launch(_col2im(dx.dtype), dx.size,
               (dcols, dx, np.int64(dx.size)) + _geo_args(geo, dx.shape, f.shape, ph, pw, oh, ow))
        return _from_nhwc(dx, geo.fmt)
    return floats_only(fn)


@register_kernel("Conv2DBackpropFilter", "GPU", releases_gil=False, host_inputs=(1,))
def conv2d_backprop_filter(attrs):
    geo = _ConvGeometry(attrs, "Conv2DBackpropFilter")

    def fn(input, filter_sizes, out_backprop):
        _check4("Conv2DBackpropFilter", "input", input, geo.fmt)
        x = _nhwc(input, geo.fmt)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        if len(fshape) != 4:
            raise ValueError(f"Conv2DBackpropFilter: filter_sizes must have 4 entries, got {fshape}")
        dy = _nhwc(out_backprop, geo.fmt)
        n, h, w, c = x.shape
        kh, kw, _, co = fshape
        oh, ow, ph, pw = geo.resolve(x.shape, fshape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropFilter: out_backprop has shape {dy.shape} (NHWC) but input "
                             f"{x.shape} and filter_sizes {fshape} give an output of {(n, oh, ow, co)}")
        if geo.is_pointwise(fshape, ph, pw):
            cols = x.reshape(-1, c)
        else:
            cols = _im2col_of(geo, x, fshape, ph, pw, oh, ow)
        return gemm(cols, dy.reshape(-1, co), ta=True).reshape(fshape)
    return floats_only(fn)


# -- pooling -------------------------------------------------------------------------------------
_POOL_ARGS = "int H, int W, int C, int KH, int KW, int SH, int SW, int PH, int PW, int OH, int OW"
_POOL_INDEX = r"""
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int c = (int)(idx % C);
    long long t = idx / C;
    int j = (int)(t % OW);
    t /= OW;
    int i = (int)(t % OH);
    long long n = t / OH;
    int h0 = i * SH - PH, w0 = j * SW - PW;
    int h1 = min(h0 + KH, H), w1 = min(w0 + KW, W);
    h0 = max(h0, 0); w0 = max(w0, 0);
"""

_max_pool = raw_kernel("af_max_pool", r"""
extern "C" __global__ void af_max_pool(const T* x, T* out, long long total, """ + _POOL_ARGS + r""") {""" + _POOL_INDEX + r"""
    T m = x[((n * H + h0) * W + w0) * C + c];
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) { T v = x[((n * H + h) * W + w) * C + c]; m = v > m ? v : m; }
    out[idx] = m;
}
""")

_max_pool_grad = raw_kernel("af_max_pool_grad", r"""
extern "C" __global__ void af_max_pool_grad(const T* x, const T* g, T* dx, long long total, """ + _POOL_ARGS + r""") {""" + _POOL_INDEX + r"""
    long long best = ((n * H + h0) * W + w0) * C + c;
    T m = x[best];
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) {
            long long k = ((n * H + h) * W + w) * C + c;
            if (x[k] > m) { m = x[k]; best = k; }
        }
    atomicAdd(dx + best, g[idx]);
}
""")

_avg_pool = raw_kernel("af_avg_pool", r"""
extern "C" __global__ void af_avg_pool(const T* x, T* out, long long total, """ + _POOL_ARGS + r""") {""" + _POOL_INDEX + r"""
    T s = 0;
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w) s += x[((n * H + h) * W + w) * C + c];
    out[idx] = s / (T)((h1 - h0) * (w1 - w0));
}
""")

_avg_pool_grad = raw_kernel("af_avg_pool_grad", r"""
extern "C" __global__ void af_avg_pool_grad(const T* g, T* dx, long long total, """ + _POOL_ARGS + r""") {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= total) return;
    int c = (int)(idx % C);
    long long t = idx / C;
    int w = (int)(t % W);
    t /= W;
    int h = (int)(t % H);
    long long n = t / H;
    T acc = 0;
    for (int i = 0; i < OH; ++i) {
        int a0 = i * SH - PH;
        if (h < a0 || h >= a0 + KH) continue;
        int ch = min(a0 + KH, H) - max(a0, 0);
        for (int j = 0; j < OW; ++j) {
            int b0 = j * SW - PW;
            if (w < b0 || w >= b0 + KW) continue;
            int cw = min(b0 + KW, W) - max(b0, 0);
            acc += g[((n * OH + i) * OW + j) * C + c] / (T)(ch * cw);
        }
    }
    dx[idx] = acc;
}
""")


def _pool_args(geo, shape, ph, pw, oh, ow):
    _, h, w, c = shape
    return tuple(np.int32(v) for v in (h, w, c, geo.kh, geo.kw, geo.sh, geo.sw, ph, pw, oh, ow))


def _pool_out(op, geo, x):
    _check4(op, "input", x, geo.fmt)
    x = _nhwc(x, geo.fmt)
    oh, ow, ph, pw = geo.resolve(x.shape)
    return x, oh, ow, ph, pw


@register_kernel("MaxPool", "GPU", releases_gil=False)
def max_pool(attrs):
    geo = _PoolGeometry(attrs, "MaxPool")

    def fn(input):
        x, oh, ow, ph, pw = _pool_out("MaxPool", geo, input)
        out = cp.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        launch(_max_pool(x.dtype), out.size, (x, out, np.int64(out.size)) + _pool_args(geo, x.shape, ph, pw, oh, ow))
        return _from_nhwc(out, geo.fmt)
    return floats_only(fn)


@register_kernel("MaxPoolGrad", "GPU", releases_gil=False)
def max_pool_grad(attrs):
    geo = _PoolGeometry(attrs, "MaxPoolGrad")

    def fn(orig_input, orig_output, grad):
        x, oh, ow, ph, pw = _pool_out("MaxPoolGrad", geo, orig_input)
        g = _nhwc(grad, geo.fmt)
        if g.shape != (x.shape[0], oh, ow, x.shape[3]):
            raise ValueError(f"MaxPoolGrad: grad has shape {g.shape} (NHWC) but the pooled output has shape "
                             f"{(x.shape[0], oh, ow, x.shape[3])}")
        dx = cp.zeros(x.shape, g.dtype)
        launch(_max_pool_grad(x.dtype), g.size, (x, g, dx, np.int64(g.size)) + _pool_args(geo, x.shape, ph, pw, oh, ow))
        return _from_nhwc(dx, geo.fmt)
    return floats_only(fn)


@register_kernel("AvgPool", "GPU", releases_gil=False)
def avg_pool(attrs):
    geo = _PoolGeometry(attrs, "AvgPool")

    def fn(value):
        if value.dtype.kind != "f":
            raise TypeError(f"AvgPool: value must be floating point, got {value.dtype}")
        x, oh, ow, ph, pw = _pool_out("AvgPool", geo, value)
        out = cp.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        launch(_avg_pool(x.dtype), out.size, (x, out, np.int64(out.size)) + _pool_args(geo, x.shape, ph, pw, oh, ow))
        return _from_nhwc(out, geo.fmt)
    return floats_only(fn)


@register_kernel("AvgPoolGrad", "GPU", releases_gil=False, host_inputs=(0,))
def avg_pool_grad(attrs):
    geo = _PoolGeometry(attrs, "AvgPoolGrad")

    def fn(orig_input_shape, grad):
        shape = _shape_from_nhwc("AvgPoolGrad", orig_input_shape, geo.fmt)
        g = _nhwc(grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(shape)
        if g.shape != (shape[0], oh, ow, shape[3]):
            raise ValueError(f"AvgPoolGrad: grad has shape {g.shape} (NHWC) but the pooled output has shape "
                             f"{(shape[0], oh, ow, shape[3])}")
        dx = cp.empty(shape, g.dtype)
        launch(_avg_pool_grad(g.dtype), dx.size, (g, dx, np.int64(dx.size)) + _pool_args(geo, shape, ph, pw, oh, ow))
        return _from_nhwc(dx, geo.fmt)
    return floats_only(fn)
