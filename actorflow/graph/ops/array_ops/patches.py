"""ExtractImagePatches and ExtractVolumePatches: definitions, gradients and wrappers
(tf.compat.v1.extract_image_patches, tf.image.extract_patches, tf.extract_volume_patches).

An image [N, H, W, C] gives [N, out_rows, out_cols, kh * kw * C]: output pixel (i, j) holds the
kh x kw window at (i * stride, j * stride), its pixels `rate` apart, flattened (row, column,
channel), channel fastest. A volume [N, P, H, W, C] is the same with a third window dimension and no
rates. Output sizes follow the convolution's: VALID ceil((in - (k - 1) * rate) / stride), SAME
ceil(in / stride), SAME's padding zeros split with the extra one after.

The gradient is TF's: extract the patches of an image of pixel numbers 1..H*W (0 where padding),
then sum the incoming gradient into the pixels those numbers name (an unsorted segment sum; number 0
is the padding and is dropped).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, gathering, joining, reshaping, shapes, slicing
from actorflow.graph.ops.array_ops._args import _dense, _op_scope
from actorflow.graph.ops.constant import constant
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["extract_image_patches", "extract_patches", "extract_volume_patches"]


def _out_size(size, k, stride, rate, padding):
    if size is None:
        return None
    if padding == "SAME":
        return -(-size // stride)
    eff = (k - 1) * rate + 1
    return max(0, -(-(size - eff + 1) // stride))


def _window(attrs, key, n):
    v = attrs.get(key)
    if v is None and key == "rates":
        return [1] * n
    v = list(v) if v is not None else None
    if v is None or len(v) != n + 2 or v[0] != 1 or v[-1] != 1:
        raise InferenceError(f"{key} must be a list of {n + 2} ints with 1 for the batch and depth dimensions, "
                             f"got {v!r}")
    if any(int(x) < 1 for x in v):
        raise InferenceError(f"{key} must be positive, got {v}")
    return [int(x) for x in v[1:-1]]


def _infer_patches(n):
    def infer(inputs, attrs):
        (x,) = inputs
        if x.dtype.is_bool or x.dtype in (dtypes.string, dtypes.variant):
            raise InferenceError(f"images must be a real number type, got {x.dtype.name}")
        k = _window(attrs, "ksizes", n)
        s = _window(attrs, "strides", n)
        r = _window(attrs, "rates", n)
        padding = attrs.get("padding")
        if padding not in ("SAME", "VALID"):
            raise InferenceError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
        if x.shape.ndims is None:
            return [(x.dtype, TensorShape([None] * (n + 2)))]
        if x.shape.ndims != n + 2:
            raise InferenceError(f"input must be {n + 2}-D, got shape {x.shape}")
        dims = x.shape.dims
        out = [dims[0]] + [_out_size(dims[i + 1], k[i], s[i], r[i], padding) for i in range(n)]
        depth = dims[-1]
        prod = 1
        for v in k:
            prod *= v
        return [(x.dtype, TensorShape(out + [None if depth is None else depth * prod]))]
    return infer


ExtractImagePatches = define_op("ExtractImagePatches", _infer_patches(2))
ExtractVolumePatches = define_op("ExtractVolumePatches", _infer_patches(3))


def _patches_grad(op, grad):
    x = op.inputs[0]
    n = x.shape.ndims - 2 if x.shape.ndims is not None else (2 if op.type == "ExtractImagePatches" else 3)
    grad = _dense(grad)
    shape = shapes.shape(x, out_type=dtypes.int64)
    spatial = _slice1(shape, 1, n + 1)
    pixels = math_ops.Prod(spatial, _const([0]), keep_dims=False)
    numbers = filling.range(_const(1, dtypes.int64), math_ops.add(pixels, _const(1, dtypes.int64)))
    image = reshaping.reshape(numbers, _cat([_const([1], dtypes.int64), spatial,
                                                               _const([1], dtypes.int64)]))
    attrs = {k: op.attrs[k] for k in ("ksizes", "strides", "rates", "padding") if k in op.attrs}
    idx = reshaping.reshape(op.op_def(image, **attrs), _const([-1], dtypes.int64))
    # grad: [N, out..., K * C] -> [out... * K, N, C], summed into pixel number idx.
    batch = _slice1(shape, 0, 1)
    depth = _slice1(shape, n + 1, n + 2)
    g = reshaping.reshape(grad, _cat([batch, _const([-1], dtypes.int64), depth]))
    g = reshaping.transpose(g, _const([1, 0, 2]))
    summed = gathering.unsorted_segment_sum(g, idx, math_ops.add(pixels, _const(1, dtypes.int64)))
    dx = reshaping.reshape(_slice_rows(summed), _cat([spatial, batch, depth]))
    dx = reshaping.transpose(dx, _const([n] + list(range(n)) + [n + 1]))
    dx.set_shape(x.shape)
    return [dx]


def _const(v, dtype=dtypes.int32):
    return constant(v, dtype=dtype)


def _cat(parts):
    return joining.concat(parts, 0)


def _slice1(t, a, b):
    return slicing.strided_slice(t, [a], [b])


def _slice_rows(t):
    """Rows 1.. of `t` (drops the padding's number 0)."""
    return slicing.strided_slice(t, [1], [0], end_mask=1)


ExtractImagePatches.gradient(_patches_grad)
ExtractVolumePatches.gradient(_patches_grad)


def _four(v, name, fn, n=2):
    if v is None:
        raise ValueError(f"{fn}: {name} is required")
    v = [int(x) for x in v]
    if len(v) != n + 2:
        raise ValueError(f"{fn}: {name} must be a list of {n + 2} ints, got {v}")
    return v


def _padding(padding, fn):
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        return padding.upper()
    raise ValueError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r}")


def extract_image_patches(images, ksizes=None, strides=None, rates=None, padding=None, name=None, sizes=None):
    """The kh x kw patches of NHWC `images`, each flattened into the depth of one output pixel
    (tf.compat.v1.extract_image_patches; op ExtractImagePatches). `ksizes` (or its v2 name `sizes`),
    `strides` and `rates` are [1, r, c, 1] lists; `padding` 'SAME' or 'VALID'."""
    if ksizes is not None and sizes is not None and list(ksizes) != list(sizes):
        raise ValueError("extract_image_patches: ksizes and sizes are aliases; give one")
    k = _four(ksizes if ksizes is not None else sizes, "ksizes", "extract_image_patches")
    with _op_scope(name, "ExtractImagePatches") as sc:
        return sc.op(ExtractImagePatches, convert_to_tensor(images, name="images"), ksizes=k,
                     strides=_four(strides, "strides", "extract_image_patches"),
                     rates=_four(rates, "rates", "extract_image_patches"),
                     padding=_padding(padding, "extract_image_patches"))


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """tf.image.extract_patches: extract_image_patches with TF 2's argument names."""
    return extract_image_patches(images, sizes, strides, rates, padding, name=name)


def extract_volume_patches(input, ksizes, strides, padding, name=None):  # noqa: A002
    """The kp x kh x kw patches of NDHWC `input`, each flattened into the depth of one output voxel
    (tf.extract_volume_patches; op ExtractVolumePatches). `ksizes` and `strides` are
    [1, p, r, c, 1] lists."""
    with _op_scope(name, "ExtractVolumePatches") as sc:
        return sc.op(ExtractVolumePatches, convert_to_tensor(input, name="input"),
                     ksizes=_four(ksizes, "ksizes", "extract_volume_patches", 3),
                     strides=_four(strides, "strides", "extract_volume_patches", 3),
                     padding=_padding(padding, "extract_volume_patches"))
