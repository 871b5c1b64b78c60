"""SpaceToBatchND, BatchToSpaceND and their 4-D square-block forms SpaceToBatch, BatchToSpace: definitions, gradients and wrappers (tf.space_to_batch_nd,
tf.batch_to_space_nd, the 4-D tf.compat.v1.space_to_batch / batch_to_space, and
tf.required_space_to_batch_paddings).

SpaceToBatchND zero-pads the M spatial dimensions after the batch (``paddings[i] = [before,
after]``), cuts each into blocks of ``block_shape[i]`` and moves the offsets within a block into the
batch: output batch ``(o_1 * ... * o_M) * N + n`` for block offsets o (row-major over the block),
spatial size ``padded_i / block_shape[i]``. BatchToSpaceND is its inverse, cropping ``crops[i]``
afterwards. Each is the other's gradient.
"""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import packing, slicing
from actorflow.graph.ops.array_ops._args import _dense, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import _check_index_dtype, _check_rank, _static_ints
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["space_to_batch_nd", "batch_to_space_nd", "space_to_batch", "batch_to_space",
           "required_space_to_batch_paddings"]


def _block_and_pairs(x, block_shape, pairs, what):
    """Checks the arguments shared by both ops; returns (M, block, pairs) with the static values
    (lists, or None when only the run time knows them). `block_shape` is a tensor, or the list
    [b, b] of the 4-D ops' block_size attribute."""
    _check_index_dtype(pairs, what)
    _check_rank(pairs, 2, what)
    if isinstance(block_shape, list):
        m = len(block_shape)
    else:
        _check_index_dtype(block_shape, "block_shape")
        _check_rank(block_shape, 1, "block_shape")
        m = block_shape.shape.dims[0] if block_shape.shape.ndims == 1 else None
    if pairs.shape.ndims == 2:
        rows, cols = pairs.shape.dims
        if cols not in (None, 2) or (m is not None and rows not in (None, m)):
            raise InferenceError(f"{what} must have shape [M, 2] with M = len(block_shape) = {m}, got {pairs.shape}")
        m = m if m is not None else rows
    if m is not None and x.shape.ndims is not None and x.shape.ndims < m + 1:
        raise InferenceError(f"input must have rank at least len(block_shape) + 1 = {m + 1}, got shape {x.shape}")
    block = block_shape if isinstance(block_shape, list) else _static_ints(block_shape)
    if block is not None and any(b < 1 for b in block):
        raise InferenceError(f"block_shape must be positive, got {block}")
    p = _static_ints(pairs)
    p = None if p is None else [p[i:i + 2] for i in range(0, len(p), 2)]
    if p is not None and any(a < 0 or b < 0 for a, b in p):
        raise InferenceError(f"{what} must be non-negative, got {p}")
    return m, block, p


def _infer_space_to_batch(inputs, attrs):
    x, block_shape, paddings = inputs
    m, block, pads = _block_and_pairs(x, block_shape, paddings, "paddings")
    if x.shape.ndims is None or m is None:
        return [(x.dtype, TensorShape(None))]
    dims = list(x.shape.dims)
    batch = dims[0]
    if block is None:
        return [(x.dtype, TensorShape([None] * (m + 1) + dims[m + 1:]))]
    out = [None if batch is None else batch * _product(block)]
    for i in range(m):
        d = dims[i + 1]
        if d is None or pads is None:
            out.append(None)
            continue
        padded = d + pads[i][0] + pads[i][1]
        if padded % block[i]:
            raise InferenceError(f"padded size {padded} of spatial dimension {i} (input shape {x.shape}, paddings "
                                 f"{pads[i]}) is not divisible by block_shape[{i}] = {block[i]}")
        out.append(padded // block[i])
    return [(x.dtype, TensorShape(out + dims[m + 1:]))]


def _infer_batch_to_space(inputs, attrs):
    x, block_shape, crops = inputs
    m, block, crop = _block_and_pairs(x, block_shape, crops, "crops")
    if x.shape.ndims is None or m is None:
        return [(x.dtype, TensorShape(None))]
    dims = list(x.shape.dims)
    if block is None:
        return [(x.dtype, TensorShape([None] * (m + 1) + dims[m + 1:]))]
    n = _product(block)
    batch = dims[0]
    if batch is not None and batch % n:
        raise InferenceError(f"input batch {batch} is not divisible by the product of block_shape {block} = {n}")
    out = [None if batch is None else batch // n]
    for i in range(m):
        d = dims[i + 1]
        if d is None or crop is None:
            out.append(None)
            continue
        size = d * block[i] - crop[i][0] - crop[i][1]
        if size < 0:
            raise InferenceError(f"crops {crop[i]} are larger than spatial dimension {i} of size {d * block[i]}")
        out.append(size)
    return [(x.dtype, TensorShape(out + dims[m + 1:]))]


def _product(values):
    n = 1
    for v in values:
        n *= v
    return n


SpaceToBatchND = define_op("SpaceToBatchND", _infer_space_to_batch)
BatchToSpaceND = define_op("BatchToSpaceND", _infer_batch_to_space)


def _square(infer):
    """SpaceToBatch / BatchToSpace: the ND op of a 4-D input with a block_size x block_size block."""
    def infer_square(inputs, attrs):
        x, pairs = inputs
        b = attrs.get("block_size")
        if not isinstance(b, int) or isinstance(b, bool) or b < 2:
            raise InferenceError(f"block_size must be an int of at least 2, got {b!r}")
        if x.shape.ndims not in (None, 4):
            raise InferenceError(f"input must be 4-D, got shape {x.shape}")
        return infer([x, [b, b], pairs], attrs)
    return infer_square


SpaceToBatch = define_op("SpaceToBatch", _square(_infer_space_to_batch))
BatchToSpace = define_op("BatchToSpace", _square(_infer_batch_to_space))


@SpaceToBatchND.gradient
def _space_to_batch_grad(op, grad):
    return [BatchToSpaceND(_dense(grad), op.inputs[1], op.inputs[2]), None, None]


@BatchToSpaceND.gradient
def _batch_to_space_grad(op, grad):
    return [SpaceToBatchND(_dense(grad), op.inputs[1], op.inputs[2]), None, None]


@SpaceToBatch.gradient
def _space_to_batch_square_grad(op, grad):
    return [BatchToSpace(_dense(grad), op.inputs[1], block_size=op.attrs["block_size"]), None]


@BatchToSpace.gradient
def _batch_to_space_square_grad(op, grad):
    return [SpaceToBatch(_dense(grad), op.inputs[1], block_size=op.attrs["block_size"]), None]


def _index_pair(block_shape, pairs, names):
    block = _to_index_tensor(block_shape, names[0])
    return block, _to_index_tensor(pairs, names[1], block.dtype)


def space_to_batch_nd(input, block_shape, paddings, name=None):  # noqa: A002
    """Zero-pads the spatial dimensions 1..M of `input` by `paddings` ([M, 2]) and moves the blocks
    of `block_shape` ([M]) into the batch (tf.space_to_batch_nd; op SpaceToBatchND)."""
    with _op_scope(name, "SpaceToBatchND") as sc:
        x = convert_to_tensor(input, name="input")
        block, pads = _index_pair(block_shape, paddings, ("block_shape", "paddings"))
        return sc.op(SpaceToBatchND, x, block, pads)


def batch_to_space_nd(input, block_shape, crops, name=None):  # noqa: A002
    """The inverse of space_to_batch_nd: moves batch blocks back into the spatial dimensions and
    crops them by `crops` ([M, 2]) (tf.batch_to_space_nd; op BatchToSpaceND)."""
    with _op_scope(name, "BatchToSpaceND") as sc:
        x = convert_to_tensor(input, name="input")
        block, crop = _index_pair(block_shape, crops, ("block_shape", "crops"))
        return sc.op(BatchToSpaceND, x, block, crop)


def _square_block(block_size, block_shape, fn):
    if block_shape is not None and block_size is not None and block_shape != block_size:
        raise ValueError(f"{fn}: block_size and block_shape are aliases; got both, {block_size!r} and {block_shape!r}")
    b = block_size if block_size is not None else block_shape
    if b is None or isinstance(b, bool) or int(b) != b or b < 2:
        raise ValueError(f"{fn}: block_size must be an int of at least 2, got {b!r}")
    return int(b)


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None):  # noqa: A002
    """space_to_batch_nd of a 4-D NHWC `input` with a block_size x block_size block
    (tf.compat.v1.space_to_batch, tf.compat.v1.nn.space_to_batch; op SpaceToBatch)."""
    b = _square_block(block_size, block_shape, "space_to_batch")
    with _op_scope(name, "SpaceToBatch") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.ndims not in (None, 4):
            raise ValueError(f"space_to_batch: input must be 4-D, got shape {x.shape}")
        return sc.op(SpaceToBatch, x, _to_index_tensor(paddings, "paddings"), block_size=b)


def batch_to_space(input, crops, block_size, name=None, block_shape=None):  # noqa: A002
    """batch_to_space_nd of a 4-D `input` with a block_size x block_size block
    (tf.compat.v1.batch_to_space; op BatchToSpace)."""
    b = _square_block(block_size, block_shape, "batch_to_space")
    with _op_scope(name, "BatchToSpace") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.ndims not in (None, 4):
            raise ValueError(f"batch_to_space: input must be 4-D, got shape {x.shape}")
        return sc.op(BatchToSpace, x, _to_index_tensor(crops, "crops"), block_size=b)


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """The paddings and crops that make the spatial `input_shape` ([M]) plus `base_paddings` ([M, 2],
    zeros by default) divisible by `block_shape`: returns (paddings, crops), int32 [M, 2] tensors,
    where paddings = base_paddings with the end padding grown to a multiple of the block and crops =
    [[0, the growth]] (tf.required_space_to_batch_paddings)."""
    with _op_scope(name, "required_space_to_batch_paddings"):
        shape = _to_index_tensor(input_shape, "input_shape")
        block = _to_index_tensor(block_shape, "block_shape", shape.dtype)
        _check_rank(block, 1, "block_shape")
        m = block.shape.dims[0]
        if m is None:
            raise ValueError("required_space_to_batch_paddings: block_shape must have a static length, got "
                             f"shape {block.shape}")
        if base_paddings is None:
            base = _to_index_tensor([[0, 0]] * m, "base_paddings", shape.dtype)
        else:
            base = _to_index_tensor(base_paddings, "base_paddings", shape.dtype)
        start = slicing.strided_slice(base, [0, 0], [m, 1], shrink_axis_mask=2)
        end = slicing.strided_slice(base, [0, 1], [m, 2], shrink_axis_mask=2)
        full = math_ops.add(math_ops.add(shape, start), end)
        extra = math_ops.floormod(math_ops.subtract(block, math_ops.floormod(full, block)), block)
        zeros = math_ops.multiply(extra, 0)
        paddings = packing.stack([start, math_ops.add(end, extra)], axis=1, name="paddings")
        crops = packing.stack([zeros, extra], axis=1, name="crops")
        return paddings, crops
