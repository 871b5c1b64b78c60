"""Window geometry shared by the CPU and GPU convolution and pooling kernels.

Layout is TensorFlow's: NHWC activations and HWIO filters; NCHW is accepted by transposing to NHWC
and back. `_ConvGeometry` and `_PoolGeometry` resolve an op's strides, dilations, window and padding
against concrete shapes, with TF's output-size and padding rules (GetWindowedOutputSize).
"""
from __future__ import annotations

import numpy as np

_FAST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _batch_blocks(n: int, parts: int):
    """[(lo, hi), ...] image ranges of a batch split over `parts` threads, or None when too small."""
    if n < 2 * parts:
        return None
    bounds = [n * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _data_format(attrs, op_name):
    fmt = attrs.get("data_format", "NHWC") or "NHWC"
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"{op_name}: unsupported data_format {fmt!r} (expected 'NHWC' or 'NCHW')")
    return fmt


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


def _half_via_float32(fn):
    """Runs a numba-backed kernel on float16 data in float32 (numba has no float16 arithmetic)
    and rounds the result back; other dtypes pass straight through."""
    def wrapped(*inputs):
        arrays = [np.asarray(a) for a in inputs]
        if not any(a.dtype == np.float16 for a in arrays):
            return fn(*arrays)
        out = fn(*(a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays))
        if isinstance(out, tuple):
            return tuple(o.astype(np.float16) for o in out)
        return out.astype(np.float16)
    return wrapped
