"""Queue-based input pipelines (tf.compat.v1.train's input functions): limit_epochs,
input_producer, string_input_producer, range_input_producer, slice_input_producer, batch,
shuffle_batch, batch_join, shuffle_batch_join, maybe_batch, maybe_shuffle_batch.

Built as TF 1.x builds them: a queue (FIFOQueue, PaddingFIFOQueue for dynamic_pad,
RandomShuffleQueue for the shuffling batches), its enqueue ops run by a QueueRunner registered in
the QUEUE_RUNNERS collection (start them with af.train.start_queue_runners), a "fraction full"
scalar summary, and a dequeue_many (dequeue_up_to with allow_smaller_final_batch). A producer with
`num_epochs` stops after that many passes: its epoch counter (a local variable, so
local_variables_initializer must run) raises OutOfRangeError, which closes the queue, and the
consumers then get OutOfRangeError once it is drained, as in TF.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from actorflow.graph.ops.misc_ops import count_up_to
from actorflow.graph.ops.random_more_ops import random_shuffle
from actorflow.graph.ops.summary_ops import scalar as _summary_scalar
from actorflow.graph.tensor_shape import TensorShape, as_shape
from actorflow.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["limit_epochs", "input_producer", "string_input_producer", "range_input_producer",
           "slice_input_producer", "batch", "shuffle_batch", "batch_join", "shuffle_batch_join", "maybe_batch",
           "maybe_shuffle_batch", "maybe_batch_join", "maybe_shuffle_batch_join"]


def limit_epochs(tensor, num_epochs=None, name=None):
    """`tensor`, produced `num_epochs` times, then OutOfRangeError (tf.compat.v1.train.limit_epochs);
    None: forever. The counter is a local variable."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    with name_scope(name or "limit_epochs"):
        from actorflow.graph.graph import GraphKeys
        from actorflow.graph.variables import Variable
        # A Variable, not get_variable: get_variable ignores name scopes, so two producers with
        # num_epochs in one graph would collide on "epochs" (TF uses VariableV1 here too).
        epochs = Variable(array_ops.zeros([], dtypes.int64), name="epochs", trainable=False,
                          collections=[GraphKeys.LOCAL_VARIABLES])
        counter = count_up_to(epochs, num_epochs)
        with control_dependencies([counter]):
            return identity(tensor, name="limit_epochs")


def _fraction_summary(queue, capacity, what):
    frac = math_ops.cast(queue.size(), dtypes.float32) * (1.0 / capacity)
    _summary_scalar(f"{what}fraction_of_{capacity}_full", frac)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True, seed=None, capacity=32,
                   shared_name=None, summary_name=None, name=None, cancel_op=None):
    """A queue of the rows of `input_tensor`, refilled by a QueueRunner, `num_epochs` passes (shuffled
    each pass with `shuffle`) (tf.compat.v1.train.input_producer)."""
    with name_scope(name or "input_producer"):
        t = convert_to_tensor(input_tensor, name="input_tensor")
        el = as_shape(element_shape) if element_shape is not None else TensorShape(
            None if t.shape.dims is None else t.shape.dims[1:])
        if not el.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or `element_shape` must be "
                             "specified")
        t = limit_epochs(t, num_epochs)
        if shuffle:
            t = random_shuffle(t, seed=seed)
        q = FIFOQueue(capacity, [t.dtype], shapes=[el], shared_name=shared_name)
        enq = q.enqueue_many([t])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fraction_summary(q, capacity, f"queue/{q.name}/{summary_name}_")
        return q


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None,
                          name=None, cancel_op=None):
    """A queue of file names (or other strings) for readers (tf.compat.v1.train.string_input_producer)."""
    with name_scope(name or "input_producer"):
        s = convert_to_tensor(string_tensor, dtype=dtypes.string, name="string_tensor")
        n = s.shape.num_elements()
        if n == 0:
            raise ValueError("string_input_producer requires a non-null input tensor")
        return input_producer(s, TensorShape([]), num_epochs, shuffle, seed, capacity, shared_name, "fraction_of",
                              name=None, cancel_op=cancel_op)


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None, name=None):
    """A queue of the integers 0 .. limit - 1 (tf.compat.v1.train.range_input_producer)."""
    with name_scope(name or "input_producer"):
        r = array_ops.range(limit)
        return input_producer(r, TensorShape([]), num_epochs, shuffle, seed, capacity, shared_name, "fraction_of")


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None,
                         name=None):
    """One row of every tensor of `tensor_list` at a time, the rows taken in (shuffled) order
    (tf.compat.v1.train.slice_input_producer)."""
    with name_scope(name or "input_producer"):
        ts = [convert_to_tensor(t) for t in tensor_list]
        if not ts:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        n = array_ops.shape(ts[0], out_type=dtypes.int32)[0]
        q = range_input_producer(n, num_epochs, shuffle, seed, capacity, shared_name)
        index = q.dequeue()
        return [array_ops.gather(t, index) for t in ts]


def _flat_tensors(tensors):
    """TF's _as_tensor_list and _validate: a dict's values in the order of its sorted keys, a list's
    or tuple's elements, or one tensor; each element becomes one tensor, so a list of tensors in it
    is packed (`batch([xy[0:-1], xy[-1:]])` batches a vector and a 1-vector, as in TF)."""
    if isinstance(tensors, dict):
        items = [tensors[k] for k in sorted(tensors, key=str)]
    elif isinstance(tensors, (list, tuple)):
        items = list(tensors)
    else:
        items = [tensors]
    if not items:
        raise ValueError("Expected at least one tensor in batch().")
    return [convert_to_tensor(t) for t in items]


def _shapes(flat, shapes, enqueue_many, dynamic_pad):
    if shapes is not None:
        return [as_shape(s) for s in shapes]
    out = []
    for t in flat:
        s = t.shape
        if enqueue_many:
            s = TensorShape(None if s.dims is None else s.dims[1:])
        if not s.is_fully_defined() and not dynamic_pad:
            raise ValueError(f"All shapes must be fully defined: tensor '{t.name}' has shape {s}")
        out.append(s)
    return out


def _pack_like(tensors, flat_out):
    """TF's _as_original_type: a dict for a dict, a list for a list or tuple, else the one tensor."""
    if isinstance(tensors, dict):
        return {k: flat_out[i] for i, k in enumerate(sorted(tensors, key=str))}
    if isinstance(tensors, (list, tuple)):
        return list(flat_out)
    return flat_out[0]


def _batch(tensor_lists, batch_size, num_threads, capacity, enqueue_many, shapes, dynamic_pad,
           allow_smaller_final_batch, shared_name, name, default, shuffle=False, min_after_dequeue=0, seed=None,
           keep_input=None):
    with name_scope(name or default):
        flats = [_flat_tensors(ts) for ts in tensor_lists]
        first = flats[0]
        types = [t.dtype for t in first]
        for fl in flats[1:]:
            if [t.dtype for t in fl] != types:
                raise ValueError("All tensor lists must have the same dtypes")
        shp = _shapes(first, shapes, enqueue_many, dynamic_pad)
        if shuffle:
            q = RandomShuffleQueue(capacity, min_after_dequeue, types, shapes=shp, seed=seed, shared_name=shared_name)
        elif dynamic_pad:
            q = PaddingFIFOQueue(capacity, types, shapes=shp, shared_name=shared_name)
        else:
            q = FIFOQueue(capacity, types, shapes=shp, shared_name=shared_name)
        enqueues = []
        for fl in flats:
            if keep_input is not None:
                from actorflow.graph.control_flow import cond
                from actorflow.graph.ops.constant import no_op
                enq = cond(convert_to_tensor(keep_input, dtype=dtypes.bool_),
                           lambda fl=fl: (q.enqueue_many(fl) if enqueue_many else q.enqueue(fl)), lambda: no_op())
            else:
                enq = q.enqueue_many(fl) if enqueue_many else q.enqueue(fl)
            enqueues.append(enq)
        runs = enqueues * num_threads if len(flats) == 1 else enqueues
        add_queue_runner(QueueRunner(q, runs))
        if shuffle:
            full = math_ops.maximum(0, q.size() - min_after_dequeue)
            frac = math_ops.cast(full, dtypes.float32) * (1.0 / (capacity - min_after_dequeue))
            _summary_scalar(f"fraction_over_{min_after_dequeue}_of_{capacity - min_after_dequeue}_full", frac)
        else:
            _fraction_summary(q, capacity, "")
        out = q.dequeue_up_to(batch_size) if allow_smaller_final_batch else q.dequeue_many(batch_size)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        return _pack_like(tensor_lists[0], out)


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None, dynamic_pad=False,
          allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of `tensors` (a tensor, list or dict) through a queue filled by `num_threads`
    enqueuing threads (tf.compat.v1.train.batch)."""
    return _batch([tensors], batch_size, num_threads, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch")


def maybe_batch(tensors, keep_input, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
                dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """`batch`, enqueuing an element only when the scalar `keep_input` is true."""
    if enqueue_many:
        raise NotImplementedError("maybe_batch with enqueue_many=True (a vector keep_input) is not supported")
    return _batch([tensors], batch_size, num_threads, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch", keep_input=keep_input)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None, enqueue_many=False,
                  shapes=None, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Shuffled batches of `tensors` through a RandomShuffleQueue holding at least
    `min_after_dequeue` elements after each dequeue (tf.compat.v1.train.shuffle_batch)."""
    return _batch([tensors], batch_size, num_threads, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name, "shuffle_batch", shuffle=True, min_after_dequeue=min_after_dequeue, seed=seed)


def maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, keep_input, num_threads=1, seed=None,
                        enqueue_many=False, shapes=None, allow_smaller_final_batch=False, shared_name=None, name=None):
    if enqueue_many:
        raise NotImplementedError("maybe_shuffle_batch with enqueue_many=True is not supported")
    return _batch([tensors], batch_size, num_threads, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name, "shuffle_batch", shuffle=True, min_after_dequeue=min_after_dequeue, seed=seed,
                  keep_input=keep_input)


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None, dynamic_pad=False,
               allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches from several lists of tensors (one enqueuing thread each) (tf.compat.v1.train.batch_join)."""
    return _batch(list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch_join")


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None, enqueue_many=False,
                       shapes=None, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Shuffled batches from several lists of tensors (tf.compat.v1.train.shuffle_batch_join)."""
    return _batch(list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name, "shuffle_batch_join", shuffle=True, min_after_dequeue=min_after_dequeue,
                  seed=seed)



def maybe_batch_join(tensors_list, keep_input, batch_size, capacity=32, enqueue_many=False, shapes=None,
                     dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """`batch_join`, each list enqueuing an element only when the scalar `keep_input` is true
    (tf.compat.v1.train.maybe_batch_join). A vector `keep_input` (with enqueue_many) is not supported."""
    if enqueue_many:
        raise NotImplementedError("maybe_batch_join with enqueue_many=True (a vector keep_input) is not supported")
    return _batch(list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes, dynamic_pad,
                  allow_smaller_final_batch, shared_name, name, "batch_join", keep_input=keep_input)


def maybe_shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, keep_input, seed=None,
                             enqueue_many=False, shapes=None, allow_smaller_final_batch=False, shared_name=None,
                             name=None):
    """`shuffle_batch_join`, enqueuing only when the scalar `keep_input` is true
    (tf.compat.v1.train.maybe_shuffle_batch_join). A vector `keep_input` is not supported."""
    if enqueue_many:
        raise NotImplementedError("maybe_shuffle_batch_join with enqueue_many=True is not supported")
    return _batch(list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name, "shuffle_batch_join", shuffle=True, min_after_dequeue=min_after_dequeue,
                  seed=seed, keep_input=keep_input)
