"""CPU kernels for the 3-D convolution and pooling family (graph/ops/nn_conv3d_ops.py): Conv3D,
Conv3DBackpropInputV2, Conv3DBackpropFilterV2, MaxPool3D, MaxPool3DGrad, AvgPool3D, AvgPool3DGrad.

Each is a loop over the kd*kh*kw window offsets of whole-array numpy operations on the padded NDHWC
input: a strided slice [N, od, oh, ow, C] per offset, contracted with the offset's [in, out] filter
matrix (one BLAS matmul), compared (max pooling) or summed (average pooling). NCDHW runs through an
NDHWC transpose.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel

_AXES = {"NDHWC": (1, 2, 3), "NCDHW": (2, 3, 4)}


class _Geometry:
    """The 3-D window attrs of one op (strides, dilations or ksize, padding, data_format) and TF's
    output size and padding of each spatial dimension."""

    def __init__(self, attrs, op_name, window_key=None):
        self.op = op_name
        self.fmt = attrs.get("data_format", "NDHWC")
        if self.fmt not in _AXES:
            raise ValueError(f"{op_name}: data_format must be 'NDHWC' or 'NCDHW', got {self.fmt!r}")
        axes = _AXES[self.fmt]
        self.strides = tuple(int(attrs["strides"][a]) for a in axes)
        self.dilations = tuple(int(attrs.get("dilations", (1,) * 5)[a]) for a in axes)
        self.ksize = tuple(int(attrs[window_key][a]) for a in axes) if window_key else None
        self.padding = attrs["padding"]

    def resolve(self, spatial, window):
        """(out sizes, pads before, pads after) of the three spatial dims of sizes `spatial`."""
        outs, before, after = [], [], []
        for n, k, s, d in zip(spatial, window, self.strides, self.dilations):
            eff = (k - 1) * d + 1
            if self.padding == "SAME":
                o = -(-n // s)
                total = max((o - 1) * s + eff - n, 0)
                outs.append(o)
                before.append(total // 2)
                after.append(total - total // 2)
            else:
                if n < eff:
                    raise ValueError(f"{self.op}: the window ({eff}) is larger than the input ({n}) with VALID padding")
                outs.append((n - eff) // s + 1)
                before.append(0)
                # the padded array must hold every window start + eff; crop below handles the rest
                after.append(0)
        return outs, before, after

    def to_ndhwc(self, x):
        return np.ascontiguousarray(np.transpose(x, (0, 2, 3, 4, 1))) if self.fmt == "NCDHW" else x

    def from_ndhwc(self, x):
        return np.ascontiguousarray(np.transpose(x, (0, 4, 1, 2, 3))) if self.fmt == "NCDHW" else x

    def shape_to_ndhwc(self, shape):
        shape = [int(v) for v in np.asarray(shape).reshape(-1)]
        if len(shape) != 5:
            raise ValueError(f"{self.op}: a shape of 5 sizes is needed, got {shape}")
        return (shape[0], shape[2], shape[3], shape[4], shape[1]) if self.fmt == "NCDHW" else tuple(shape)

    def offsets(self, window, outs):
        """For each window offset: (index into the window, the strided slices of the padded input)."""
        for i in range(window[0]):
            for j in range(window[1]):
                for k in range(window[2]):
                    sl = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                               for o, d, n, s in zip((i, j, k), self.dilations, outs, self.strides))
                    yield (i, j, k), (slice(None),) + sl


def _input5(op_name, what, x, fmt):
    x = np.asarray(x)
    if x.ndim != 5:
        raise ValueError(f"{op_name}: {what} must be 5-D ({fmt}), got shape {x.shape}")
    return x


def _filter5(op_name, f, in_c):
    f = np.asarray(f)
    if f.ndim != 5:
        raise ValueError(f"{op_name}: filter must be 5-D [depth, height, width, in, out], got shape {f.shape}")
    if f.shape[3] != in_c:
        raise ValueError(f"{op_name}: input depth {in_c} does not match the filter's in_channels {f.shape[3]} "
                         f"(filter shape {f.shape})")
    return f


def _padded(x, before, after, fill=0):
    if not any(before) and not any(after):
        return x
    return np.pad(x, [(0, 0)] + list(zip(before, after)) + [(0, 0)], constant_values=fill)


def _crop(xp, before, spatial):
    return xp[(slice(None),) + tuple(slice(b, b + n) for b, n in zip(before, spatial))]


def _check_out(op_name, what, g, want):
    if tuple(g.shape) != tuple(want):
        raise ValueError(f"{op_name}: {what} has shape {g.shape} (NDHWC) but the forward output has shape "
                         f"{tuple(want)}")


def _conv_forward(geo, x, f):
    outs, before, after = geo.resolve(x.shape[1:4], f.shape[:3])
    xp = _padded(x, before, after)
    out = np.zeros((x.shape[0], *outs, f.shape[4]), np.result_type(x, f))
    if out.size and x.shape[4]:
        for (i, j, k), sl in geo.offsets(f.shape[:3], outs):
            out += xp[sl] @ f[i, j, k]
    return out


@register_kernel("Conv3D", "CPU")
def conv3d(attrs):
    """tf.raw_ops.Conv3D: NDHWC (or NCDHW) input, DHWIO filter."""
    geo = _Geometry(attrs, "Conv3D")

    def fn(input, filter):  # noqa: A002 (TF's names)
        x = geo.to_ndhwc(_input5("Conv3D", "input", input, geo.fmt))
        f = _filter5("Conv3D", filter, x.shape[4])
        return geo.from_ndhwc(_conv_forward(geo, x, f))
    return fn


@register_kernel("Conv3DBackpropInputV2", "CPU")
def conv3d_backprop_input(attrs):
    """tf.raw_ops.Conv3DBackpropInputV2: the gradient of Conv3D with respect to its input."""
    geo = _Geometry(attrs, "Conv3DBackpropInputV2")

    def fn(input_sizes, filter, out_backprop):  # noqa: A002
        shape = geo.shape_to_ndhwc(input_sizes)
        f = _filter5("Conv3DBackpropInputV2", filter, shape[4])
        dy = geo.to_ndhwc(_input5("Conv3DBackpropInputV2", "out_backprop", out_backprop, geo.fmt))
        outs, before, after = geo.resolve(shape[1:4], f.shape[:3])
        _check_out("Conv3DBackpropInputV2", "out_backprop", dy, (shape[0], *outs, f.shape[4]))
        padded = [n + b + a for n, b, a in zip(shape[1:4], before, after)]
        dxp = np.zeros((shape[0], *padded, shape[4]), np.result_type(f, dy))
        if dy.size:
            for (i, j, k), sl in geo.offsets(f.shape[:3], outs):
                dxp[sl] += dy @ f[i, j, k].T
        return geo.from_ndhwc(np.ascontiguousarray(_crop(dxp, before, shape[1:4])))
    return fn


@register_kernel("Conv3DBackpropFilterV2", "CPU")
def conv3d_backprop_filter(attrs):
    """tf.raw_ops.Conv3DBackpropFilterV2: the gradient of Conv3D with respect to its filter."""
    geo = _Geometry(attrs, "Conv3DBackpropFilterV2")

    def fn(input, filter_sizes, out_backprop):  # noqa: A002
        x = geo.to_ndhwc(_input5("Conv3DBackpropFilterV2", "input", input, geo.fmt))
        fshape = tuple(int(v) for v in np.asarray(filter_sizes).reshape(-1))
        if len(fshape) != 5 or fshape[3] != x.shape[4]:
            raise ValueError(f"Conv3DBackpropFilterV2: filter_sizes {list(fshape)} must be 5 sizes whose in_channels "
                             f"match the input depth {x.shape[4]}")
        dy = geo.to_ndhwc(_input5("Conv3DBackpropFilterV2", "out_backprop", out_backprop, geo.fmt))
        outs, before, after = geo.resolve(x.shape[1:4], fshape[:3])
        _check_out("Conv3DBackpropFilterV2", "out_backprop", dy, (x.shape[0], *outs, fshape[4]))
        xp = _padded(x, before, after)
        df = np.zeros(fshape, np.result_type(x, dy))
        if dy.size:
            flat_dy = dy.reshape(-1, fshape[4])
            for (i, j, k), sl in geo.offsets(fshape[:3], outs):
                df[i, j, k] = xp[sl].reshape(-1, fshape[3]).T @ flat_dy
        return df
    return fn


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool(geo, x):
    outs, before, after = geo.resolve(x.shape[1:4], geo.ksize)
    xp = _padded(x, before, after, _lowest(x.dtype))
    out = np.full((x.shape[0], *outs, x.shape[4]), _lowest(x.dtype), x.dtype)
    for _, sl in geo.offsets(geo.ksize, outs):
        np.maximum(out, xp[sl], out=out)
    return out, xp, outs, before


@register_kernel("MaxPool3D", "CPU")
def max_pool3d(attrs):
    """tf.raw_ops.MaxPool3D (SAME windows ignore the padding)."""
    geo = _Geometry(attrs, "MaxPool3D", "ksize")

    def fn(input):  # noqa: A002
        x = geo.to_ndhwc(_input5("MaxPool3D", "input", input, geo.fmt))
        return geo.from_ndhwc(_max_pool(geo, x)[0])
    return fn


@register_kernel("MaxPool3DGrad", "CPU")
def max_pool3d_grad(attrs):
    """tf.raw_ops.MaxPool3DGrad: each window's gradient goes to every input equal to the window's
    maximum (TF's CPU kernel masks by equality, so ties all receive it)."""
    geo = _Geometry(attrs, "MaxPool3DGrad", "ksize")

    def fn(orig_input, orig_output, grad):
        x = geo.to_ndhwc(_input5("MaxPool3DGrad", "orig_input", orig_input, geo.fmt))
        y = geo.to_ndhwc(_input5("MaxPool3DGrad", "orig_output", orig_output, geo.fmt))
        g = geo.to_ndhwc(_input5("MaxPool3DGrad", "grad", grad, geo.fmt))
        outs, before, after = geo.resolve(x.shape[1:4], geo.ksize)
        want = (x.shape[0], *outs, x.shape[4])
        _check_out("MaxPool3DGrad", "orig_output", y, want)
        _check_out("MaxPool3DGrad", "grad", g, want)
        xp = _padded(x, before, after, _lowest(x.dtype))
        dxp = np.zeros(xp.shape, g.dtype)
        for _, sl in geo.offsets(geo.ksize, outs):
            dxp[sl] += np.where(xp[sl] == y, g, 0)
        return geo.from_ndhwc(np.ascontiguousarray(_crop(dxp, before, x.shape[1:4])))
    return fn


def _window_counts(geo, spatial, outs, before, after):
    """How many real (unpadded) elements each output window covers, [1, od, oh, ow, 1]."""
    ones = _padded(np.ones((1, *spatial, 1)), before, after)
    counts = np.zeros((1, *outs, 1))
    for _, sl in geo.offsets(geo.ksize, outs):
        counts += ones[sl]
    return counts


@register_kernel("AvgPool3D", "CPU")
def avg_pool3d(attrs):
    """tf.raw_ops.AvgPool3D: window means over real elements (SAME padding is not counted)."""
    geo = _Geometry(attrs, "AvgPool3D", "ksize")

    def fn(input):  # noqa: A002
        x = geo.to_ndhwc(_input5("AvgPool3D", "input", input, geo.fmt))
        if x.dtype.kind != "f":
            raise TypeError(f"AvgPool3D: input must be floating point, got {x.dtype}")
        outs, before, after = geo.resolve(x.shape[1:4], geo.ksize)
        xp = _padded(x, before, after)
        out = np.zeros((x.shape[0], *outs, x.shape[4]), x.dtype)
        for _, sl in geo.offsets(geo.ksize, outs):
            out += xp[sl]
        out /= _window_counts(geo, x.shape[1:4], outs, before, after).astype(x.dtype)
        return geo.from_ndhwc(out)
    return fn


@register_kernel("AvgPool3DGrad", "CPU")
def avg_pool3d_grad(attrs):
    """tf.raw_ops.AvgPool3DGrad: spreads each output gradient evenly over its window's real elements."""
    geo = _Geometry(attrs, "AvgPool3DGrad", "ksize")

    def fn(orig_input_shape, grad):
        shape = geo.shape_to_ndhwc(orig_input_shape)
        g = geo.to_ndhwc(_input5("AvgPool3DGrad", "grad", grad, geo.fmt))
        outs, before, after = geo.resolve(shape[1:4], geo.ksize)
        _check_out("AvgPool3DGrad", "grad", g, (shape[0], *outs, shape[4]))
        share = g / _window_counts(geo, shape[1:4], outs, before, after).astype(g.dtype)
        padded = [n + b + a for n, b, a in zip(shape[1:4], before, after)]
        dxp = np.zeros((shape[0], *padded, shape[4]), g.dtype)
        for _, sl in geo.offsets(geo.ksize, outs):
            dxp[sl] += share
        return geo.from_ndhwc(np.ascontiguousarray(_crop(dxp, before, shape[1:4])))
    return fn


@register_kernel("MaxPool3DGradGrad", "CPU")
def max_pool3d_grad_grad(attrs):
    """tf.raw_ops.MaxPool3DGradGrad: the gradient of MaxPool3DGrad with respect to its grad input:
    each window takes the (input-shaped) `grad` at its first input element (row-major) equal to the
    window's max, as TF's kernel (unlike MaxPool3DGrad, which feeds every tie)."""
    geo = _Geometry(attrs, "MaxPool3DGradGrad", "ksize")

    def fn(orig_input, orig_output, grad):
        x = geo.to_ndhwc(_input5("MaxPool3DGradGrad", "orig_input", orig_input, geo.fmt))
        y = geo.to_ndhwc(_input5("MaxPool3DGradGrad", "orig_output", orig_output, geo.fmt))
        g = geo.to_ndhwc(_input5("MaxPool3DGradGrad", "grad", grad, geo.fmt))
        if g.shape != x.shape:
            raise ValueError(f"MaxPool3DGradGrad: grad has shape {g.shape} but orig_input has shape {x.shape}")
        outs, before, after = geo.resolve(x.shape[1:4], geo.ksize)
        _check_out("MaxPool3DGradGrad", "orig_output", y, (x.shape[0], *outs, x.shape[4]))
        xp = _padded(x, before, after, _lowest(x.dtype))
        gp = _padded(g, before, after)
        out = np.zeros(y.shape, g.dtype)
        found = np.zeros(y.shape, bool)
        for _, sl in geo.offsets(geo.ksize, outs):        # row-major window order: the first maximum wins
            take = (xp[sl] == y) & ~found
            out = np.where(take, gp[sl], out)
            found |= take
        return geo.from_ndhwc(out)
    return fn
