"""Sources and plumbing: Const, Placeholder, PlaceholderWithDefault, Identity, NoOp, group."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.infer import unary
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["constant", "placeholder", "placeholder_with_default", "identity", "no_op", "group",
           "stop_gradient", "Const", "Placeholder", "Identity", "NoOp"]


def _infer_const(inputs, attrs):
    v = attrs["value"]
    return [(attrs["dtype"], TensorShape(v.shape))]


Const = define_op("Const", _infer_const, actor="const", placement="pass_through")
Placeholder = define_op("Placeholder", lambda i, a: [(a["dtype"], a["shape"])], actor="placeholder", placement="host")


def _infer_pwd(inputs, attrs):
    shape = as_shape(attrs["shape"])
    if not shape.is_compatible_with(inputs[0].shape):
        raise InferenceError(f"default value shape {inputs[0].shape} is not compatible with shape {shape}")
    return [(inputs[0].dtype, shape)]


PlaceholderWithDefault = define_op("PlaceholderWithDefault", _infer_pwd)
Identity = define_op("Identity", unary, placement="pass_through")
NoOp = define_op("NoOp", lambda i, a: [], actor="noop", placement="host")
StopGradient = define_op("StopGradient", unary, placement="pass_through")
Snapshot = define_op("Snapshot", unary, placement="pass_through")      # an Identity that TF's optimizer keeps


@Snapshot.gradient
@Identity.gradient
def _identity_grad(op, grad):
    return [grad]


@PlaceholderWithDefault.gradient
def _pwd_grad(op, grad):
    return [grad]


@StopGradient.gradient
def _stop_grad(op, grad):
    return [None]


def _is_stringlike(value) -> bool:
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "SU" or (value.dtype == object and value.size > 0
                                            and isinstance(value.reshape(-1)[0], (str, bytes)))
    return isinstance(value, (str, bytes))


def _np_value(value, dtype):
    if (dtype is not None and dtypes.as_dtype(dtype).is_string) or (dtype is None and _is_stringlike(value)):
        try:
            return dtypes.string_array(value), dtypes.string
        except TypeError as e:
            raise TypeError(f"Cannot convert {value!r} to a string tensor: {e}") from None
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
        arr = np.asarray(value)
        if arr.dtype.kind == "f" and dtype.is_integer and arr.size and not np.all(np.mod(arr, 1) == 0):
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type float instead.")
        if arr.dtype.kind in "OUS":
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type {type(value).__name__} instead.")
        return np.asarray(value, dtype=dtype.np), dtype
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and not isinstance(value, np.ndarray) and not isinstance(value, np.generic):
        arr = arr.astype(np.float32)            # Python floats default to float32, as in TF
    elif arr.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
        if arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31):
            arr = arr.astype(np.int32)          # Python ints default to int32, as in TF
    if arr.dtype.kind in "OUS":
        raise TypeError(f"Cannot convert {value!r} to a tensor: unsupported element type {arr.dtype}")
    return arr, dtypes.from_numpy(arr.dtype)


def constant(value, dtype=None, shape=None, name="Const"):
    """A constant tensor (tf.constant); a scalar `value` with `shape` is broadcast (TF 1.x style)."""
    arr, dt = _np_value(value, dtype)
    if shape is not None:
        shape = as_shape(shape).as_list()
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise TypeError(f"Expected a constant of {int(np.prod(shape))} elements for shape {shape}, got {arr.size}")
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return Const(value=arr, dtype=dt, name=name)


def placeholder(dtype, shape=None, name=None):
    """A tensor that must be fed at run time (tf.compat.v1.placeholder)."""
    return Placeholder(dtype=dtypes.as_dtype(dtype), shape=as_shape(shape), name=name)


def placeholder_with_default(input, shape, name=None):
    """Passes `input` through unless fed (tf.compat.v1.placeholder_with_default)."""
    x = convert_to_tensor(input)
    return PlaceholderWithDefault(x, dtype=x.dtype, shape=as_shape(shape), name=name)


def identity(input, name=None):
    """Returns a tensor with the same value (tf.identity)."""
    return Identity(convert_to_tensor(input), name=name)


def stop_gradient(input, name=None):
    """Identity that blocks gradients (tf.stop_gradient)."""
    return StopGradient(convert_to_tensor(input), name=name)


def no_op(name=None):
    """An op that does nothing; useful as a control-dependency target (tf.no_op)."""
    return get_default_graph().create_op("NoOp", [], {}, name=name)


def group(*inputs, name=None):
    """An op that runs after all `inputs` (tf.group)."""
    ops = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            ops.extend(x)
        elif x is not None:
            ops.append(x)
    g = get_default_graph()
    with g.control_dependencies(ops):
        return g.create_op("NoOp", [], {}, name=name or "group_deps")


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)
