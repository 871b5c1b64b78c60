"""Python functions as ops: `py_func` and `numpy_function` (tf.compat.v1.py_func, tf.numpy_function).

The op (PyFunc, or PyFuncStateless for `stateful=False`) holds a token of the function registered in
actorflow/script_registry.py, as TF's ops do; its kernel (kernels/cpu/script.py) calls the function
with the inputs as numpy arrays and checks what it returns against `Tout`: the count, and each
value's dtype, as TF does ("0-th value returned by pyfunc_0 is double, but expects float"). The
outputs' shapes are unknown (`set_shape` them when known). The ops have no gradient, and run on the
CPU of the process that built the graph: elsewhere the token is unknown, and the step fails naming
the op and the token. A stateful PyFunc is never folded, merged or pruned by the optimizer.
"""
from __future__ import annotations

import weakref

import numpy as np

from actorflow import script_registry
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, get_default_graph
from actorflow.graph.op_def import define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["EagerArray", "py_func", "py_function", "numpy_function"]


def _infer_py_func(inputs, attrs):
    return [(dt, TensorShape(None)) for dt in attrs["Tout"]]


PyFunc = define_op("PyFunc", _infer_py_func, stateful=True, placement="host")
PyFuncStateless = define_op("PyFuncStateless", _infer_py_func, placement="host")
for _d in (PyFunc, PyFuncStateless):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _register_in(graph, func) -> str:
    token = script_registry.register(func)
    tokens = graph.__dict__.get("_py_func_tokens")
    if tokens is None:
        tokens = graph.__dict__["_py_func_tokens"] = []
        # (the functions live as long as the graph that calls them)
        weakref.finalize(graph, script_registry.unregister, tokens)
    tokens.append(token)
    return token


def py_func(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's argument name
    """Wraps the Python function `func` as an op (tf.compat.v1.py_func).

    `func` gets the values of the tensors `inp` as numpy arrays and returns a value (or a list of
    values) of the dtypes `Tout` (a dtype, or a list of them). Returns a Tensor when `Tout` is a
    single dtype, else a list of Tensors (the Operation when `Tout` is empty). `stateful=False` lets the optimizer treat two calls with
    the same inputs as one value (TF's PyFuncStateless).
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, got {type(func).__name__}")
    single = not isinstance(Tout, (list, tuple))
    touts = tuple(dtypes.as_dtype(t) for t in ([Tout] if single else Tout))
    graph = get_default_graph()
    with _op_scope(name, "PyFunc") as sc:
        xs = [convert_to_tensor(x) for x in (inp if isinstance(inp, (list, tuple)) else [inp])]
        token = _register_in(graph, func)
        out = sc.op(PyFunc if stateful else PyFuncStateless, *xs, token=token, Tout=touts)
    if not touts:
        return out                     # the Operation, to run as a target (as TF's wrapper returns it)
    outs = list(out) if isinstance(out, tuple) else [out]
    return outs[0] if single else outs


def numpy_function(func, inp, Tout, stateful=True, name=None):  # noqa: N803
    """Wraps the Python function `func`, called on numpy arrays, as an op (tf.numpy_function)."""
    return py_func(func, inp, Tout, stateful=stateful, name=name)


class EagerArray(np.ndarray):
    """What `py_function` hands its function for each input: a numpy array that also answers
    `.numpy()` (and `.shape`, `.dtype` as numpy's), the part of TF's EagerTensor a py_function body
    uses most."""

    def numpy(self):
        """The value as a plain numpy array (a numpy scalar, or bytes, for a scalar), as EagerTensor.numpy."""
        plain = self.view(np.ndarray)
        return plain[()] if plain.ndim == 0 else plain


def _plain(v):
    return v.view(np.ndarray) if isinstance(v, EagerArray) else v


def py_function(func=None, inp=None, Tout=None, name=None):  # noqa: N803 - TF's argument name
    """Wraps `func` as an op that calls it on the inputs' values (tf.py_function).

    Differs from TF: there is no eager mode, so `func` receives each input as an `EagerArray` (a
    numpy array with TF's `.numpy()`), not an EagerTensor, and cannot run af ops eagerly on it; it
    returns numpy-convertible values. No gradient flows through it (TF records one on a tape).
    `Tout=None` (or []) means `func` returns nothing and the op is returned, to run as a target.
    """
    if not callable(func):
        raise TypeError(f"py_function: func must be callable, got {type(func).__name__}")

    single = Tout is not None and not isinstance(Tout, (list, tuple))
    touts = [] if Tout is None else [dtypes.as_dtype(t) for t in ([Tout] if single else Tout)]

    def convert(o, dt):
        # Python values take the declared dtype, as TF converts them; arrays must already have it.
        o = _plain(o)
        if isinstance(o, (np.ndarray, np.generic)) or dt.is_string:
            return o
        return np.asarray(o, dtype=dt.np)

    def call(*args):
        out = func(*[np.asarray(a).view(EagerArray) for a in args])
        if single:
            return convert(out, touts[0])
        if isinstance(out, (list, tuple)) and len(out) == len(touts):
            return [convert(o, dt) for o, dt in zip(out, touts)]
        return out

    call.__name__ = getattr(func, "__name__", "py_function")
    return py_func(call, [] if inp is None else inp, [] if Tout is None else Tout, stateful=True, name=name)
