"""Queues as graph state: FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue (tf.queue.*).

A queue op (FIFOQueueV2, ...) creates a queue resource in the task that owns its device; enqueue and
dequeue ops take it as a reference input, so they run in that task, serialized by the queue's
resource actor. Blocking operations wait without blocking anything else, and are abandoned cleanly
when their step is cancelled or times out. With `shared_name`, every worker that names the queue
(on a parameter server) uses the same one.
"""
from __future__ import annotations

import hashlib

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "PriorityQueue"]


def _infer_queue(inputs, attrs):
    return [(dtypes.resource, TensorShape([]))]


FIFOQueueV2 = define_op("FIFOQueueV2", _infer_queue, stateful=True, resource="queue", actor="handle")
RandomShuffleQueueV2 = define_op("RandomShuffleQueueV2", _infer_queue, stateful=True, resource="queue", actor="handle")
PaddingFIFOQueueV2 = define_op("PaddingFIFOQueueV2", _infer_queue, stateful=True, resource="queue", actor="handle")
PriorityQueueV2 = define_op("PriorityQueueV2", _infer_queue, stateful=True, resource="queue", actor="handle")


def _check_handle(t):
    if t.op.op_def.resource != "queue":
        raise InferenceError(f"input '{t.name}' must be a queue handle, got the output of a {t.op.type} op")


def _component_specs(handle):
    a = handle.op.attrs
    types = a["component_types"]
    shapes = a.get("shapes") or ()
    if not shapes:
        shapes = tuple(TensorShape(None) for _ in types)
    if handle.op.type == "PriorityQueueV2":        # the int64 scalar priority comes first
        return (dtypes.int64,) + tuple(types), [TensorShape([])] + [as_shape(s) for s in shapes]
    return types, [as_shape(s) for s in shapes]


def _infer_enqueue(many):
    def infer(inputs, attrs):
        handle, comps = inputs[0], inputs[1:]
        _check_handle(handle)
        types, shapes = _component_specs(handle)
        if len(comps) != len(types):
            raise InferenceError(f"queue '{handle.op.name}' has {len(types)} components, got {len(comps)} values")
        for i, (c, dt, sh) in enumerate(zip(comps, types, shapes)):
            if c.dtype is not dt:
                raise InferenceError(f"component {i} of queue '{handle.op.name}' has dtype {dt.name}, got {c.dtype.name}")
            got = c.shape
            if many:
                if got.ndims == 0:
                    raise InferenceError(f"enqueue_many needs a batch dimension on component {i}, got a scalar")
                got = got[1:] if got.dims is not None else got
            if not sh.is_compatible_with(got):
                raise InferenceError(f"component {i} of queue '{handle.op.name}' has shape {sh}, got {got}")
        return []
    return infer


def _infer_dequeue(kind):
    def infer(inputs, attrs):
        handle = inputs[0]
        _check_handle(handle)
        types, shapes = _component_specs(handle)
        if kind == "one":
            return [(dt, sh) for dt, sh in zip(types, shapes)]
        n = None
        if len(inputs) > 1:
            from actorflow.graph.ops.infer import constant_value
            v = constant_value(inputs[1])
            n = int(v) if v is not None and kind == "many" else None
        return [(dt, TensorShape([n]).concatenate(sh)) for dt, sh in zip(types, shapes)]
    return infer


QueueEnqueueV2 = define_op("QueueEnqueueV2", _infer_enqueue(False), ref_inputs=(0,), actor="resource", stateful=True)
QueueEnqueueManyV2 = define_op("QueueEnqueueManyV2", _infer_enqueue(True), ref_inputs=(0,), actor="resource", stateful=True)
QueueDequeueV2 = define_op("QueueDequeueV2", _infer_dequeue("one"), ref_inputs=(0,), actor="resource", stateful=True)
QueueDequeueManyV2 = define_op("QueueDequeueManyV2", _infer_dequeue("many"), ref_inputs=(0,), actor="resource", stateful=True)
QueueDequeueUpToV2 = define_op("QueueDequeueUpToV2", _infer_dequeue("upto"), ref_inputs=(0,), actor="resource", stateful=True)
QueueCloseV2 = define_op("QueueCloseV2", lambda i, a: (_check_handle(i[0]), [])[1], ref_inputs=(0,), actor="resource", stateful=True)
QueueSizeV2 = define_op("QueueSizeV2", lambda i, a: (_check_handle(i[0]), [(dtypes.int32, TensorShape([]))])[1],
                        ref_inputs=(0,), actor="resource", stateful=True)
QueueIsClosedV2 = define_op("QueueIsClosedV2", lambda i, a: (_check_handle(i[0]), [(dtypes.bool_, TensorShape([]))])[1],
                            ref_inputs=(0,), actor="resource", stateful=True)


class QueueBase:
    """A queue in the graph (tf.queue.QueueBase)."""

    def __init__(self, dtypes_, shapes, names, queue_ref):
        self._dtypes = list(dtypes_)
        self._shapes = list(shapes)
        self._names = list(names) if names is not None else None
        self._queue_ref = queue_ref

    @property
    def queue_ref(self):
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._queue_ref.op.name

    @property
    def dtypes(self):
        return list(self._dtypes)

    @property
    def shapes(self):
        return list(self._shapes)

    @property
    def names(self):
        return self._names

    def _values(self, vals):
        if self._names is not None:
            if not isinstance(vals, dict):
                raise ValueError(f"queue '{self.name}' has named components {self._names}: enqueue a dict")
            missing = set(self._names) - set(vals)
            if missing or set(vals) - set(self._names):
                raise ValueError(f"queue '{self.name}': components must be exactly {self._names}, got {sorted(vals)}")
            vals = [vals[n] for n in self._names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"queue '{self.name}' has {len(self._dtypes)} components, got {len(vals)} values")
        out = []
        for i, (v, dt) in enumerate(zip(vals, self._dtypes)):
            try:
                out.append(convert_to_tensor(v, dtype=dt))
            except (TypeError, ValueError) as e:
                raise type(e)(f"component {i} of queue '{self.name}' has dtype {dt.name}: {e}") from None
        return out

    def _pack(self, outs):
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        """Enqueues one element; blocks while the queue is full (tf.queue.QueueBase.enqueue)."""
        return QueueEnqueueV2(self._queue_ref, *self._values(vals), name=name or "enqueue")

    def enqueue_many(self, vals, name=None):
        """Enqueues the slices of `vals` along dimension 0 (tf.queue.QueueBase.enqueue_many)."""
        return QueueEnqueueManyV2(self._queue_ref, *self._values(vals), name=name or "enqueue_many")

    def dequeue(self, name=None):
        """Dequeues one element; blocks while empty; OutOfRangeError once closed and empty."""
        return self._pack(QueueDequeueV2(self._queue_ref, component_types=tuple(self._dtypes), name=name or "dequeue"))

    def dequeue_many(self, n, name=None):
        """Dequeues exactly `n` elements, stacked (tf.queue.QueueBase.dequeue_many)."""
        n = convert_to_tensor(n, dtype=dtypes.int32)
        return self._pack(QueueDequeueManyV2(self._queue_ref, n, component_types=tuple(self._dtypes),
                                             name=name or "dequeue_many"))

    def dequeue_up_to(self, n, name=None):
        """Dequeues `n` elements, or fewer (at least one) once the queue is closed."""
        n = convert_to_tensor(n, dtype=dtypes.int32)
        return self._pack(QueueDequeueUpToV2(self._queue_ref, n, component_types=tuple(self._dtypes),
                                             name=name or "dequeue_up_to"))

    def close(self, cancel_pending_enqueues=False, name=None):
        """Closes the queue; with `cancel_pending_enqueues`, blocked enqueues fail (CancelledError)."""
        return QueueCloseV2(self._queue_ref, cancel_pending_enqueues=bool(cancel_pending_enqueues),
                            name=name or "close")

    def size(self, name=None):
        return QueueSizeV2(self._queue_ref, name=name or "size")

    def is_closed(self, name=None):
        return QueueIsClosedV2(self._queue_ref, name=name or "is_closed")


def _norm(dtypes_, shapes, names):
    if not isinstance(dtypes_, (list, tuple)):
        dtypes_ = [dtypes_]
    dts = [dtypes.as_dtype(d) for d in dtypes_]
    if shapes is None:
        shp = []
    else:
        if isinstance(shapes, TensorShape):
            shapes = [shapes]
        elif isinstance(shapes, (list, tuple)) and all(d is None or isinstance(d, int) for d in shapes):
            # As TF: a flat list of dimensions (`[]`, `()`, `[2, None]`) is the shape of one component.
            shapes = [shapes]
        shp = [as_shape(s) for s in shapes]
        if len(shp) != len(dts):
            raise ValueError(f"queue has {len(dts)} dtypes but {len(shp)} shapes")
    if names is not None:
        names = [names] if isinstance(names, str) else list(names)
        if len(names) != len(dts):
            raise ValueError(f"queue has {len(dts)} dtypes but {len(names)} names")
    return dts, shp, names


class FIFOQueue(QueueBase):
    """A first-in first-out queue (tf.queue.FIFOQueue)."""

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None, name="fifo_queue"):
        dts, shp, names = _norm(dtypes, shapes, names)
        ref = FIFOQueueV2(component_types=tuple(dts), shapes=tuple(shp), capacity=int(capacity), container="",
                          shared_name=shared_name or "", name=name)
        super().__init__(dts, shp or [TensorShape(None)] * len(dts), names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues elements in random order, keeping at least `min_after_dequeue`
    elements until it is closed (tf.queue.RandomShuffleQueue). Seeded as TF's: with a graph seed,
    no `seed` and a `shared_name`, seed2 is a hash of the graph seed and the name."""

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None, shared_name=None,
                 name="random_shuffle_queue"):
        from actorflow.graph.ops.random_ops import get_seed
        dts, shp, names = _norm(dtypes, shapes, names)
        if min_after_dequeue >= capacity:
            raise ValueError(f"min_after_dequeue ({min_after_dequeue}) must be smaller than capacity ({capacity})")
        s1, s2 = get_seed(seed)
        if s1 is not None and seed is None and shared_name is not None:
            # TF's rule: a graph seed, no op seed and a shared name give a seed2 that depends only on
            # the graph seed and the name (not on how many random ops came before).
            s2 = int(hashlib.md5((str(s1) + shared_name).encode("utf-8")).hexdigest()[:8], 16) & 0x7FFFFFFF
        ref = RandomShuffleQueueV2(component_types=tuple(dts), shapes=tuple(shp), capacity=int(capacity),
                                   min_after_dequeue=int(min_after_dequeue), seed=int(s1 or 0), seed2=int(s2 or 0),
                                   container="", shared_name=shared_name or "", name=name)
        super().__init__(dts, shp or [TensorShape(None)] * len(dts), names, ref)


class PaddingFIFOQueue(QueueBase):
    """A FIFO queue whose `dequeue_many` pads each component to the batch's largest shape with zeros
    (tf.queue.PaddingFIFOQueue); component shapes may have unknown dimensions."""

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None, name="padding_fifo_queue"):
        dts, shp, names = _norm(dtypes, shapes, names)
        if not shp:
            raise ValueError("PaddingFIFOQueue needs shapes (unknown dimensions allowed)")
        ref = PaddingFIFOQueueV2(component_types=tuple(dts), shapes=tuple(shp), capacity=int(capacity), container="",
                                 shared_name=shared_name or "", name=name)
        super().__init__(dts, shp, names, ref)



class PriorityQueue(QueueBase):
    """A queue that dequeues its elements lowest priority first (tf.queue.PriorityQueue): every
    element starts with an int64 scalar priority before the `types` components, and dequeues give
    it back first; equal priorities leave in the order they came."""

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None, name="priority_queue"):
        dts, shp, names = _norm(types, shapes, names)
        ref = PriorityQueueV2(component_types=tuple(dts), shapes=tuple(shp), capacity=int(capacity), container="",
                              shared_name=shared_name or "", name=name)
        pdts = [dtypes.int64] + list(dts)
        pshp = [TensorShape([])] + list(shp) if shp else [TensorShape([])] + [TensorShape(None)] * len(dts)
        super().__init__(pdts, pshp, names, ref)
