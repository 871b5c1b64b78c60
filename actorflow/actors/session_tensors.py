"""The session's tensor store: the values `get_session_handle` keeps between runs, by handle
(TF's SessionState), until `delete_session_tensor` or the session's close.

One store per session container (the `_SessionTensorStore` resource every handle op of a graph
shares); its operations run one at a time on the runtime's loop, like a table's. Messages follow
TF's session_ops.cc.
"""
from __future__ import annotations

import numpy as np

from actorflow import errors
from actorflow.actors.resource import register_resource

__all__ = ["SessionTensorStore"]

_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class SessionTensorStore:
    """handle (bytes) -> value; handles are `<op name>;<id>;<device>`, as TF spells them."""

    def __init__(self, name: str, attrs: dict):
        self.name = name
        self.tensors: dict[bytes, object] = {}
        self.next_id = 0

    def run(self, op_type: str, attrs: dict, args, done, step) -> None:
        if op_type == "GetSessionHandle":
            done(self._put(attrs["_op_name"], args[0]), None)
        elif op_type == "GetSessionTensor":
            done(self._get(args[0], attrs), None)
        elif op_type == "DeleteSessionTensor":
            self._delete(args[0])
            done(None, None)
        else:
            raise errors.UnimplementedError(None, None, f"the session tensor store cannot run {op_type}")

    def _put(self, op_name: str, value) -> np.ndarray:
        handle = f"{op_name};{self.next_id};{_DEVICE}".encode()
        self.next_id += 1
        self.tensors[handle] = value
        out = np.empty((), dtype=object)
        out[()] = handle
        return out

    @staticmethod
    def _handle(h) -> bytes:
        h = h.item() if isinstance(h, np.ndarray) else h
        return h.encode() if isinstance(h, str) else bytes(h)

    def _get(self, h, attrs):
        handle = self._handle(h)
        try:
            value = self.tensors[handle]
        except KeyError:
            raise errors.InvalidArgumentError(None, None, f"The tensor with handle '{handle.decode(errors='replace')}' "
                                                          "is not in the session store.") from None
        want = np.dtype(attrs["dtype"])
        have = np.asarray(value).dtype
        if have != want:
            raise errors.InternalError(None, None, f"Output 0 of type {have} does not match declared output type "
                                                   f"{want} for node {attrs['_op_name']} (handle "
                                                   f"'{handle.decode(errors='replace')}')")
        return value

    def _delete(self, h) -> None:
        handle = self._handle(h)
        if self.tensors.pop(handle, None) is None:
            raise errors.InvalidArgumentError(None, None, "Failed to delete a tensor with handle "
                                                          f"'{handle.decode(errors='replace')}' in the session store.")


register_resource("_SessionTensorStore", SessionTensorStore)
