"""PyFunc and PyFuncStateless: call the registered Python function (graph/ops/script_ops.py)."""
from __future__ import annotations

import traceback

import numpy as np

from actorflow import errors, script_registry
from actorflow.errors import InvalidArgumentError, NotFoundError
from actorflow.kernels.registry import register_kernel

# The error a Python exception raised by the function becomes, as TF's py_func maps them.
_ERRORS = ((StopIteration, errors.OutOfRangeError), (MemoryError, errors.ResourceExhaustedError),
           (NotImplementedError, errors.UnimplementedError), (ValueError, errors.InvalidArgumentError),
           (TypeError, errors.InvalidArgumentError))

_TF_NAMES = {"float32": "float", "float64": "double", "object": "string"}


def _tf_name(dt: np.dtype) -> str:
    return _TF_NAMES.get(dt.name, dt.name)


def _as_output(i: int, value, want: np.dtype, token: str, op_type: str):
    if want == np.dtype(object):                # a string output: bytes elements, str encoded as UTF-8
        arr = np.asarray(value, dtype=object)
        flat = arr.reshape(-1)
        for j, v in enumerate(flat):
            if isinstance(v, str):
                flat[j] = v.encode("utf-8")
            elif not isinstance(v, bytes):
                raise InvalidArgumentError(f"{op_type}: {i}-th value returned by {token} holds a "
                                           f"{type(v).__name__}, but expects string")
        return arr
    arr = np.asarray(value)
    if arr.dtype != want:
        raise InvalidArgumentError(f"{op_type}: {i}-th value returned by {token} is {_tf_name(arr.dtype)}, but "
                                   f"expects {_tf_name(want)}")
    return arr


def _py_func(op_type):
    def factory(attrs):
        token = attrs["token"]
        touts = tuple(np.dtype(t) for t in attrs["Tout"])

        def fn(*args):
            func = script_registry.lookup(token)
            if func is None:
                raise NotFoundError(f"{op_type}: the Python function {token} is not registered in this process "
                                    "(a graph with py_func runs only in the process that built it)")
            try:
                result = func(*args)
            except Exception as e:  # noqa: BLE001 - every exception becomes the op's error
                cls = next((c for t, c in _ERRORS if isinstance(e, t)), errors.UnknownError)
                tb = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
                raise cls(f"{type(e).__name__}: {e} (in {token})\n{tb}") from e
            if len(touts) == 1 and not isinstance(result, (list, tuple)):
                result = [result]
            elif not touts and result is None:
                result = []
            elif not isinstance(result, (list, tuple)):
                raise InvalidArgumentError(f"{op_type}: {token} returned a {type(result).__name__}, but expects "
                                           f"a list of {len(touts)} values")
            if len(result) != len(touts):
                raise InvalidArgumentError(f"{op_type}: {token} returned {len(result)} values, but expects "
                                           f"{len(touts)}")
            outs = tuple(_as_output(i, v, w, token, op_type) for i, (v, w) in enumerate(zip(result, touts)))
            return outs[0] if len(outs) == 1 else outs
        return fn
    return factory


for _op in ("PyFunc", "PyFuncStateless"):
    register_kernel(_op, "CPU", releases_gil=False)(_py_func(_op))
