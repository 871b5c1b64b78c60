"""CPU kernels for SpaceToBatchND and BatchToSpaceND (and their 4-D forms SpaceToBatch, BatchToSpace): a pad (or crop), a reshape, a transpose and a
copy each.

SpaceToBatchND views the padded input [N, P_1, ..., P_M, R...] as [N, P_1/b_1, b_1, ..., P_M/b_M,
b_M, R...] and moves the block offsets b_i to the front: [b_1, ..., b_M, N, P_1/b_1, ..., R...],
which flattens to the output batch; BatchToSpaceND undoes it and crops.
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _args(op, x, block_shape, pairs, what):
    x = np.asarray(x)
    block = [int(b) for b in np.asarray(block_shape).reshape(-1)]
    p = np.asarray(pairs)
    m = len(block)
    if p.shape != (m, 2):
        raise InvalidArgumentError(f"{op}: {what} must have shape [{m}, 2] (len(block_shape) = {m}), got {list(p.shape)}")
    if x.ndim < m + 1:
        raise InvalidArgumentError(f"{op}: input must have rank at least {m + 1}, got shape {list(x.shape)}")
    if any(b < 1 for b in block):
        raise InvalidArgumentError(f"{op}: block_shape must be positive, got {block}")
    if (p < 0).any():
        raise InvalidArgumentError(f"{op}: {what} must be non-negative, got {p.tolist()}")
    return x, block, [(int(a), int(b)) for a, b in p]


def _cost(x, *rest):
    return int(np.size(x))


@register_kernel("SpaceToBatchND", "CPU", cost=_cost)
def space_to_batch_nd(attrs):
    """tf.raw_ops.SpaceToBatchND."""
    def fn(input, block_shape, paddings):
        x, block, pads = _args("SpaceToBatchND", input, block_shape, paddings, "paddings")
        m = len(block)
        if any(pads):
            x = np.pad(x, [(0, 0)] + pads + [(0, 0)] * (x.ndim - m - 1))
        n, spatial, rest = x.shape[0], x.shape[1:m + 1], x.shape[m + 1:]
        for i, (d, b) in enumerate(zip(spatial, block)):
            if d % b:
                raise InvalidArgumentError(f"SpaceToBatchND: padded size {d} of spatial dimension {i} is not "
                                           f"divisible by block_shape[{i}] = {b} (input shape "
                                           f"{list(np.shape(input))}, paddings {pads[i]})")
        split = [n]
        for d, b in zip(spatial, block):
            split += [d // b, b]
        y = x.reshape(split + list(rest))
        perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(2 * m + 1, y.ndim))
        out_shape = [n * int(np.prod(block))] + [d // b for d, b in zip(spatial, block)] + list(rest)
        return np.ascontiguousarray(y.transpose(perm)).reshape(out_shape)
    return fn


@register_kernel("BatchToSpaceND", "CPU", cost=_cost)
def batch_to_space_nd(attrs):
    """tf.raw_ops.BatchToSpaceND."""
    def fn(input, block_shape, crops):
        x, block, crop = _args("BatchToSpaceND", input, block_shape, crops, "crops")
        m = len(block)
        nb = int(np.prod(block))
        if x.shape[0] % nb:
            raise InvalidArgumentError(f"BatchToSpaceND: input batch {x.shape[0]} is not divisible by the product "
                                       f"of block_shape {block} = {nb}")
        n, spatial, rest = x.shape[0] // nb, x.shape[1:m + 1], x.shape[m + 1:]
        y = x.reshape(block + [n] + list(spatial) + list(rest))
        # [b_1..b_M, N, S_1..S_M, R] -> [N, S_1, b_1, ..., S_M, b_M, R]
        perm = [m]
        for i in range(m):
            perm += [m + 1 + i, i]
        perm += list(range(2 * m + 1, y.ndim))
        full = [d * b for d, b in zip(spatial, block)]
        y = y.transpose(perm).reshape([n] + full + list(rest))
        index = [slice(None)]
        for i, ((a, b), d) in enumerate(zip(crop, full)):
            if a + b > d:
                raise InvalidArgumentError(f"BatchToSpaceND: crops {[a, b]} are larger than spatial dimension {i} "
                                           f"of size {d}")
            index.append(slice(a, d - b))
        return np.ascontiguousarray(y[tuple(index)])
    return fn


def _four_d(op, x):
    if np.ndim(x) != 4:
        raise InvalidArgumentError(f"{op}: input must be 4-D, got shape {list(np.shape(x))}")
    return x


@register_kernel("SpaceToBatch", "CPU", cost=_cost)
def space_to_batch(attrs):
    """tf.raw_ops.SpaceToBatch: SpaceToBatchND of a 4-D input with block [block_size, block_size]."""
    nd, b = space_to_batch_nd(attrs), int(attrs["block_size"])
    return lambda input, paddings: nd(_four_d("SpaceToBatch", input), np.array([b, b]), paddings)


@register_kernel("BatchToSpace", "CPU", cost=_cost)
def batch_to_space(attrs):
    """tf.raw_ops.BatchToSpace: BatchToSpaceND of a 4-D input with block [block_size, block_size]."""
    nd, b = batch_to_space_nd(attrs), int(attrs["block_size"])
    return lambda input, crops: nd(_four_d("BatchToSpace", input), np.array([b, b]), crops)
