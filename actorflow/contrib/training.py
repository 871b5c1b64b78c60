"""af.contrib.training: tf.contrib.training.bucket_by_sequence_length (TF 1.15), a queue-based
input pipeline that batches examples of similar lengths together.

Built as TF builds it: one queue per bucket (a PaddingFIFOQueue with `dynamic_pad`), one enqueue
op that evaluates the example once and puts it in the queue of its bucket, and a top queue that
QueueRunner threads fill with whole batches from the bucket queues, one thread per bucket; the
output is a dequeue from the top queue. Start the runners with af.train.start_queue_runners. When
the input runs out, the bucket queues close; with `allow_smaller_final_batch` their remainders
come out as smaller batches, then the top queue closes (OutOfRangeError).
"""
from __future__ import annotations

import numbers

from actorflow.graph import dtypes, nest
from actorflow.graph.control_flow import cond
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.constant import constant, group, no_op
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue
from actorflow.graph.tensor_shape import TensorShape, as_shape
from actorflow.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["bucket_by_sequence_length"]


def _per_bucket(value, n, what):
    if isinstance(value, numbers.Integral):
        return [int(value)] * n
    value = [int(v) for v in value]
    if len(value) != n:
        raise ValueError(f"If {what} is a list it must have num_buckets ({n}) elements, got {len(value)}")
    return value


def bucket_by_sequence_length(input_length, tensors, batch_size, bucket_boundaries, num_threads=1, capacity=32,
                              bucket_capacities=None, shapes=None, dynamic_pad=False,
                              allow_smaller_final_batch=False, keep_input=True, shared_name=None, name=None):
    """Batches `tensors` (a list or dict of one example's tensors) with examples whose
    `input_length` falls in the same bucket: [-inf, b0), [b0, b1), ..., [bn, inf)
    (tf.contrib.training.bucket_by_sequence_length).

    `batch_size` and `bucket_capacities` are an int or one per bucket. With `dynamic_pad`, a batch
    is padded (with zeros) to its longest example. Returns ``(lengths, batched tensors)``, the
    batched tensors structured as `tensors`. Only examples with `keep_input` true are kept.
    """
    boundaries = list(bucket_boundaries)
    if not boundaries:
        raise ValueError("bucket_boundaries must not be empty")
    if not all(isinstance(b, numbers.Integral) for b in boundaries):
        raise TypeError(f"bucket_boundaries must be a list of ints, got {boundaries}")
    if any(a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError(f"Buckets must contain sequential increasing lengths, got {boundaries}")
    n = len(boundaries) + 1
    batch_sizes = _per_bucket(batch_size, n, "batch_size")
    capacities = _per_bucket(bucket_capacities if bucket_capacities is not None else capacity, n,
                             "bucket_capacities")
    with name_scope(name or "bucket_by_sequence_length"):
        input_length = convert_to_tensor(input_length, name="input_length")
        if input_length.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"input_length must be int32 or int64, got {input_length.dtype.name} "
                            f"('{input_length.name}')")
        if input_length.shape.ndims not in (None, 0):
            raise ValueError(f"input_length must be a scalar, got shape {input_length.shape}")
        flat = [convert_to_tensor(t) for t in nest.flatten(tensors)]
        if not flat:
            raise ValueError("Expected at least one tensor in bucket_by_sequence_length().")
        # The bucket of a length is the number of boundaries at or below it.
        bounds = constant(boundaries, dtype=input_length.dtype, name="bucket_boundaries")
        which = math_ops.reduce_sum(math_ops.cast(math_ops.less_equal(bounds, input_length), dtypes.int32),
                                    name="which_bucket")

        values = [input_length] + flat
        types = [t.dtype for t in values]
        if shapes is not None:
            elem_shapes = [TensorShape([])] + [as_shape(s) for s in shapes]
        else:
            elem_shapes = [t.shape for t in values]
        if not dynamic_pad:
            for t, s in zip(values, elem_shapes):
                if not s.is_fully_defined():
                    raise ValueError(f"All shapes must be fully defined without dynamic_pad: tensor '{t.name}' has "
                                     f"shape {s}")
        queue_cls = PaddingFIFOQueue if dynamic_pad else FIFOQueue
        queues = [queue_cls(capacities[i], types, shapes=elem_shapes, shared_name=(
            f"{shared_name}_bucket_{i}" if shared_name else None), name=f"bucket_queue_{i}") for i in range(n)]
        keep = convert_to_tensor(keep_input, dtype=dtypes.bool_)
        routes = [cond(math_ops.logical_and(keep, math_ops.equal(which, i)),
                       lambda q=q: q.enqueue(values), lambda: no_op()) for i, q in enumerate(queues)]
        enqueue = group(*routes, name="bucket_enqueue")
        add_queue_runner(QueueRunner(queues[0], [enqueue] * num_threads,
                                     close_op=group(*[q.close() for q in queues]),
                                     cancel_op=group(*[q.close(cancel_pending_enqueues=True) for q in queues])))

        top = FIFOQueue(capacity, types, shared_name=f"{shared_name}_top" if shared_name else None, name="top_queue")
        fills = []
        for q, bs in zip(queues, batch_sizes):
            batch = q.dequeue_up_to(bs) if allow_smaller_final_batch else q.dequeue_many(bs)
            fills.append(top.enqueue(list(batch) if isinstance(batch, (list, tuple)) else [batch]))
        add_queue_runner(QueueRunner(top, fills))
        out = top.dequeue()
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        same = len(set(batch_sizes)) == 1 and not allow_smaller_final_batch
        lead = batch_sizes[0] if same else None
        for t, s in zip(out, elem_shapes):
            dims = None if s.dims is None else [lead] + s.as_list()
            t.set_shape(TensorShape(dims))
        return out[0], nest.pack_sequence_as(tensors, out[1:])
