"""The `af.sparse` namespace (tf.compat.v1.sparse): SparseTensor and the ops of
graph/ops/sparse_ops.py, sparse_math_ops.py and sparse_manip_ops.py under their tf.sparse names."""
from actorflow.graph.ops.conditional_accumulator_ops import SparseConditionalAccumulator
from actorflow.graph.ops.sparse_manip_ops import sparse_concat as concat
from actorflow.graph.ops.sparse_manip_ops import sparse_cross as cross
from actorflow.graph.ops.sparse_manip_ops import sparse_cross_hashed as cross_hashed
from actorflow.graph.ops.sparse_manip_ops import sparse_expand_dims as expand_dims
from actorflow.graph.ops.sparse_manip_ops import sparse_eye as eye
from actorflow.graph.ops.sparse_manip_ops import sparse_fill_empty_rows as fill_empty_rows
from actorflow.graph.ops.sparse_manip_ops import sparse_mask as mask
from actorflow.graph.ops.sparse_manip_ops import sparse_merge as merge
from actorflow.graph.ops.sparse_manip_ops import sparse_reorder as reorder
from actorflow.graph.ops.sparse_manip_ops import sparse_reset_shape as reset_shape
from actorflow.graph.ops.sparse_manip_ops import sparse_reshape as reshape
from actorflow.graph.ops.sparse_manip_ops import sparse_retain as retain
from actorflow.graph.ops.sparse_manip_ops import sparse_slice as slice  # noqa: A004  (TF's name)
from actorflow.graph.ops.sparse_manip_ops import sparse_split as split
from actorflow.graph.ops.sparse_manip_ops import sparse_to_indicator as to_indicator
from actorflow.graph.ops.sparse_manip_ops import sparse_transpose as transpose
from actorflow.graph.ops.sparse_math_ops import sparse_add as add
from actorflow.graph.ops.sparse_math_ops import sparse_bincount as bincount
from actorflow.graph.ops.sparse_math_ops import sparse_maximum as maximum
from actorflow.graph.ops.sparse_math_ops import sparse_minimum as minimum
from actorflow.graph.ops.sparse_math_ops import sparse_reduce_max as reduce_max
from actorflow.graph.ops.sparse_math_ops import sparse_reduce_max_sparse as reduce_max_sparse
from actorflow.graph.ops.sparse_math_ops import sparse_reduce_sum as reduce_sum
from actorflow.graph.ops.sparse_math_ops import sparse_reduce_sum_sparse as reduce_sum_sparse
from actorflow.graph.ops.sparse_math_ops import sparse_segment_mean as segment_mean
from actorflow.graph.ops.sparse_math_ops import sparse_segment_sqrt_n as segment_sqrt_n
from actorflow.graph.ops.sparse_math_ops import sparse_segment_sum as segment_sum
from actorflow.graph.ops.sparse_math_ops import sparse_softmax as softmax
from actorflow.graph.ops.sparse_ops import sparse_from_dense as from_dense
from actorflow.graph.ops.sparse_ops import sparse_placeholder as placeholder
from actorflow.graph.ops.sparse_ops import sparse_tensor_dense_matmul as matmul
from actorflow.graph.ops.sparse_ops import sparse_tensor_dense_matmul as sparse_dense_matmul
from actorflow.graph.ops.sparse_ops import sparse_tensor_to_dense as to_dense
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = ["SparseTensor", "SparseTensorValue", "SparseConditionalAccumulator", "from_dense", "to_dense", "placeholder",
           "reduce_sum", "matmul", "sparse_dense_matmul", "add", "concat", "expand_dims", "eye", "fill_empty_rows",
           "mask", "maximum", "merge", "minimum", "reduce_max", "reduce_max_sparse", "reduce_sum_sparse", "reorder",
           "reset_shape", "reshape", "retain", "segment_mean", "segment_sqrt_n", "segment_sum", "slice", "softmax",
           "split", "to_indicator", "transpose", "cross", "cross_hashed", "bincount"]
