"""Array ops: reshaping, slicing, joining, gathering, filling and shape queries (TF 1.x names).

Each op type of docs/ops.md is defined once, with its output inference and its gradient (TF's
formulas), and its public wrapper beside it, one module per family:
- `reshaping`: Reshape, Transpose, ExpandDims, Squeeze;
- `joining`: ConcatV2, Split, SplitV (concat, split);
- `slicing`: Slice, StridedSlice, StridedSliceGrad, and Python's indexing syntax on tensors;
- `tiling`: Tile, Pad, PadV2, MirrorPad (pad's REFLECT and SYMMETRIC modes), Roll;
- `packing`: Pack, Unpack (stack, unstack);
- `gathering`: GatherV2, UnsortedSegmentSum, DynamicPartition, DynamicStitch, and the densifying of
  sparse (IndexedSlices) gradients;
- `filling`: OneHot, Fill, ZerosLike, OnesLike, Range (one_hot, fill, zeros, ones, *_like, range);
- `shapes`: Shape, Size, Rank, BroadcastTo, BroadcastGradientArgs, InvertPermutation;
- `masking`: Where (the coordinates of true elements) and boolean_mask;
- `contraction`: tensordot, Einsum (einsum);
- `generators`: LinSpace (linspace), sequence_mask, meshgrid;
- `space_batch`: SpaceToBatchND, BatchToSpaceND (space_to_batch*, batch_to_space*);
- `patches`: ExtractImagePatches, ExtractVolumePatches;
- `matrix`: MatrixBandPart, MatrixDiag, MatrixDiagPart, MatrixSetDiag, Diag, DiagPart, and eye;
- `_infer` and `_args`: the inference helpers and the wrappers' argument conversion they share.
A module refers to another family's wrappers through its module (`shapes.shape(x)`), so the
families may use each other in gradients without import cycles.

Index-like inputs (shapes, begin/end, axes, indices) accept int32 and int64. Inference reads the
build-time values of constant inputs (`infer.constant_value`), so ``reshape(x, [-1, 784])`` on a
``(?, 28, 28, 1)`` input is ``(?, 784)`` and ``x[:, 0]`` on ``(?, 3)`` is ``(?,)``.

Wrappers name their op like TF does: `reshape(x, s, name="r")` creates the op "r", and the
constants it converts its arguments into live under "r/" (e.g. "r/shape").
"""
from __future__ import annotations

from actorflow.graph.ops.array_ops.contraction import Einsum, einsum, tensordot  # noqa: F401
from actorflow.graph.ops.array_ops.filling import (  # noqa: F401
    Fill,
    OneHot,
    OnesLike,
    Range,
    ZerosLike,
    fill,
    one_hot,
    ones,
    ones_like,
    range,
    zeros,
    zeros_like,
)
from actorflow.graph.ops.array_ops.gathering import (  # noqa: F401
    DynamicPartition,
    DynamicStitch,
    GatherV2,
    UnsortedSegmentSum,
    batch_gather,
    dynamic_partition,
    dynamic_stitch,
    gather,
    indexed_slices_to_dense,
    unsorted_segment_sum,
)
from actorflow.graph.ops.array_ops.generators import LinSpace, lin_space, linspace, meshgrid, sequence_mask  # noqa: F401
from actorflow.graph.ops.array_ops.joining import ConcatV2, Split, SplitV, concat, split  # noqa: F401
from actorflow.graph.ops.array_ops.masking import Where, boolean_mask, where_indices  # noqa: F401
from actorflow.graph.ops.array_ops.matrix import (  # noqa: F401
    Diag,
    DiagPart,
    MatrixBandPart,
    MatrixDiag,
    MatrixDiagPart,
    MatrixSetDiag,
    diag,
    diag_part,
    eye,
    matrix_band_part,
    matrix_diag,
    matrix_diag_part,
    matrix_set_diag,
    trace,
)
from actorflow.graph.ops.array_ops.packing import Pack, Unpack, parallel_stack, stack, unstack  # noqa: F401
from actorflow.graph.ops.array_ops.patches import (  # noqa: F401
    ExtractImagePatches,
    ExtractVolumePatches,
    extract_image_patches,
    extract_patches,
    extract_volume_patches,
)
from actorflow.graph.ops.array_ops.reshaping import (  # noqa: F401
    ExpandDims,
    Reshape,
    Squeeze,
    Transpose,
    expand_dims,
    reshape,
    squeeze,
    transpose,
)
from actorflow.graph.ops.array_ops.shapes import (  # noqa: F401
    BroadcastArgs,
    BroadcastGradientArgs,
    BroadcastTo,
    InvertPermutation,
    Rank,
    Shape,
    Size,
    broadcast_dynamic_shape,
    broadcast_static_shape,
    broadcast_to,
    invert_permutation,
    rank,
    rank_of,
    shape,
    size,
)
from actorflow.graph.ops.array_ops.slicing import (  # noqa: F401
    Slice,
    StridedSlice,
    StridedSliceGrad,
    _slice_helper,
    newaxis,
    slice,
    strided_slice,
)
from actorflow.graph.ops.array_ops.space_batch import (  # noqa: F401
    BatchToSpace,
    BatchToSpaceND,
    SpaceToBatch,
    SpaceToBatchND,
    batch_to_space,
    batch_to_space_nd,
    required_space_to_batch_paddings,
    space_to_batch,
    space_to_batch_nd,
)
from actorflow.graph.ops.array_ops.tiling import MirrorPad, Pad, PadV2, Roll, Tile, pad, roll, tile  # noqa: F401

__all__ = [
    "reshape", "transpose", "expand_dims", "squeeze", "concat", "split", "slice", "strided_slice", "tile", "pad", "stack", "unstack", "gather", "one_hot", "fill", "zeros", "ones", "zeros_like", "ones_like", "range", "shape", "size", "rank", "broadcast_to", "unsorted_segment_sum", "dynamic_partition", "dynamic_stitch", "invert_permutation", "newaxis", "boolean_mask",
    "matrix_band_part", "matrix_diag", "matrix_diag_part", "matrix_set_diag", "diag", "diag_part", "eye",
    "linspace", "lin_space", "sequence_mask", "meshgrid", "tensordot", "einsum", "roll", "trace",
    "space_to_batch", "space_to_batch_nd", "batch_to_space", "batch_to_space_nd", "required_space_to_batch_paddings",
    "extract_image_patches", "extract_volume_patches", "batch_gather", "parallel_stack", "broadcast_dynamic_shape",
    "broadcast_static_shape",
]
