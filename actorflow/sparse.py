"""The `af.sparse` namespace (tf.compat.v1.sparse) for what actorflow has: SparseTensor and the ops
of graph/ops/sparse_ops.py."""
from actorflow.graph.ops.sparse_ops import sparse_from_dense as from_dense
from actorflow.graph.ops.sparse_ops import sparse_placeholder as placeholder
from actorflow.graph.ops.sparse_ops import sparse_reduce_sum as reduce_sum
from actorflow.graph.ops.sparse_ops import sparse_tensor_dense_matmul as matmul
from actorflow.graph.ops.sparse_ops import sparse_tensor_dense_matmul as sparse_dense_matmul
from actorflow.graph.ops.sparse_ops import sparse_tensor_to_dense as to_dense
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = ["SparseTensor", "SparseTensorValue", "from_dense", "to_dense", "placeholder", "reduce_sum", "matmul",
           "sparse_dense_matmul"]
