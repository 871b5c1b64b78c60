"""Tensors kept in the session between runs (tf.get_session_handle, tf.get_session_tensor,
tf.delete_session_tensor; TF's session_ops.py).

`sess.run(get_session_handle(t))` stores t's value in the session and returns a `TensorHandle`;
`get_session_tensor(handle, dtype)` gives (placeholder, tensor): feed the handle's string to the
placeholder and the tensor is the stored value, with no copy through Python. A TensorHandle fed
to any tensor stands for its value. The values live in the session's container
(actors/session_tensors.py) until deleted or the session closes. Local sessions only: a cluster
session's store would be its master's, which it does not keep.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.constant import placeholder
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["TensorHandle", "delete_session_tensor", "get_session_handle", "get_session_tensor"]

_STORE = "_session_tensor_store"


class TensorHandle:
    """A tensor kept in a session (tf.compat.v1 TensorHandle): `handle` is its string, `eval()` its
    value, `delete()` frees it. Feeding it for a tensor feeds the value."""

    def __init__(self, handle, dtype, session):
        self._handle = handle.decode() if isinstance(handle, bytes) else str(handle)
        self._dtype = dtypes.as_dtype(dtype)
        self._session = session

    @property
    def handle(self) -> str:
        return self._handle

    @property
    def dtype(self):
        return self._dtype

    def get_raw_handle(self) -> str:
        return self._handle

    def __str__(self):
        return self._handle

    def _ops(self, kind):
        cache = self._session.__dict__.setdefault("_session_tensor_ops", {})
        key = (kind, self._dtype, self._session.graph)
        if key not in cache:
            with self._session.graph.as_default():
                cache[key] = (get_session_tensor(self._handle, self._dtype) if kind == "get"
                              else delete_session_tensor(self._handle))
        return cache[key]

    def eval(self):
        """The stored value (a run of the session)."""
        holder, tensor = self._ops("get")
        return self._session.run(tensor, {holder: self._handle})

    def _feed_value(self):
        return self.eval()

    def delete(self):
        """Frees the stored value; using the handle afterwards is an InvalidArgumentError."""
        holder, op = self._ops("delete")
        self._session.run(op, {holder: self._handle})


def _store_ref():
    return _SessionTensorStore(shared_name=_STORE, name="session_tensor_store")


def _infer_store(inputs, attrs):
    return [(dtypes.resource, TensorShape([]))]


def _need_store(t, op):
    if t.op.type != "_SessionTensorStore":
        raise InferenceError(f"{op}: input 0 must be the session tensor store, got a {t.op.type} op's output")


def _infer_get_handle(inputs, attrs):
    _need_store(inputs[0], "GetSessionHandle")
    return [(dtypes.string, TensorShape([]))]


def _need_handle(t, op):
    if not t.dtype.is_string or t.shape.ndims not in (None, 0):
        raise InferenceError(f"{op}: the handle must be a scalar string, got {t.dtype.name} {t.shape} ('{t.name}')")


def _infer_get_tensor(inputs, attrs):
    _need_store(inputs[0], "GetSessionTensor")
    _need_handle(inputs[1], "GetSessionTensor")
    return [(dtypes.as_dtype(attrs["dtype"]), TensorShape(None))]


def _infer_delete(inputs, attrs):
    _need_store(inputs[0], "DeleteSessionTensor")
    _need_handle(inputs[1], "DeleteSessionTensor")
    return []


def _fetch_handle(value, tensor, session):
    return TensorHandle(value, tensor.op.inputs[1].dtype, session)


_SessionTensorStore = define_op("_SessionTensorStore", _infer_store, stateful=True, resource="session_tensors",
                                actor="handle", placement="host", internal=True)
GetSessionHandle = define_op("GetSessionHandle", _infer_get_handle, ref_inputs=(0,), actor="resource",
                             placement="host", fetch_as=_fetch_handle)
GetSessionTensor = define_op("GetSessionTensor", _infer_get_tensor, ref_inputs=(0,), actor="resource",
                             placement="host")
DeleteSessionTensor = define_op("DeleteSessionTensor", _infer_delete, ref_inputs=(0,), actor="resource",
                                placement="host")
for _d in (GetSessionHandle, GetSessionTensor, DeleteSessionTensor):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _name(sc) -> str:
    return sc.name.rstrip("/")


def get_session_handle(data, name=None):
    """A scalar string tensor: running it keeps `data`'s value in the session and returns a
    TensorHandle (tf.get_session_handle)."""
    with _op_scope(name, "GetSessionHandle") as sc:
        data = convert_to_tensor(data)
        return sc.op(GetSessionHandle, _store_ref(), data, _op_name=_name(sc))


def get_session_tensor(handle, dtype, name=None):
    """(placeholder, tensor): feed a handle's string (or the TensorHandle) to the placeholder and
    `tensor` is the stored value of `dtype` (tf.get_session_tensor). `handle` only names the value
    here (TF uses it to place the op)."""
    with _op_scope(name, "GetSessionTensor") as sc:
        holder = placeholder(dtypes.string, [], name="handle")
        out = sc.op(GetSessionTensor, _store_ref(), holder, dtype=dtypes.as_dtype(dtype), _op_name=_name(sc))
    return holder, out


def delete_session_tensor(handle, name=None):
    """(placeholder, op): running the op with a handle's string fed frees that stored value
    (tf.delete_session_tensor)."""
    with _op_scope(name, "DeleteSessionTensor") as sc:
        holder = placeholder(dtypes.string, [], name="handle")
        op = sc.op(DeleteSessionTensor, _store_ref(), holder, _op_name=_name(sc))
    return holder, op


