"""af.keras.backend (`K`): tf.keras.backend of TF 1.13-1.15, in graph mode.

Keras's global state lives here: the session that runs every model (`get_session`), the learning
phase (a per-graph bool `placeholder_with_default(False)` named "keras_learning_phase", or a
Python 0/1 fixed by `set_learning_phase`), the float type and the image data format. As in TF 1.x,
`get_session` uses the default session when one is active on the default graph, else a session of
its own, and initializes the graph's global variables that are not yet initialized, so a model
runs without `global_variables_initializer`. The math wrappers build ordinary graph ops.
"""
from __future__ import annotations

import weakref

import numpy as np

from actorflow.actors.session import Session, get_default_session
from actorflow.graph import dtypes
from actorflow.graph.gradients import gradients as _gradients
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph, reset_default_graph
from actorflow.graph.ops import array_ops, clip_ops, math_ops, nn_ops, random_ops
from actorflow.graph.ops.constant import constant as _constant
from actorflow.graph.ops.constant import (
    group,
    placeholder_with_default,
    stop_gradient,  # noqa: F401
)
from actorflow.graph.ops.constant import placeholder as _placeholder
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variables import Variable, assign, global_variables, init_scope, is_variable_initialized

__all__ = ["get_session", "set_session", "clear_session", "learning_phase", "set_learning_phase", "placeholder",
           "is_sparse", "to_dense",
           "variable", "constant", "function", "eval", "get_value", "set_value", "batch_get_value",
           "batch_set_value", "int_shape", "shape", "ndim", "dtype", "floatx", "set_floatx", "epsilon",
           "set_epsilon", "image_data_format", "set_image_data_format", "get_uid", "reset_uids", "is_tensor",
           "zeros", "ones", "zeros_like", "ones_like", "eye", "cast", "sum", "mean", "max", "min", "prod", "std",
           "var", "any", "all", "argmax", "argmin", "square", "sqrt", "abs", "exp", "log", "pow", "sign", "round",
           "clip", "maximum", "minimum", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
           "dot", "batch_dot", "transpose", "concatenate", "reshape", "permute_dimensions", "expand_dims",
           "squeeze", "flatten", "batch_flatten", "stack", "tile", "repeat", "gather", "one_hot", "relu", "elu",
           "softmax", "softplus", "softsign", "sigmoid", "hard_sigmoid", "tanh", "dropout", "l2_normalize",
           "categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy", "gradients",
           "stop_gradient", "update", "update_add", "update_sub", "random_normal", "random_uniform",
           "count_params", "switch", "in_train_phase", "in_test_phase", "bias_add", "manual_variable_initialization",
           "logsumexp", "cumsum", "identity", "get_graph", "conv1d", "conv2d", "conv2d_transpose", "pool2d",
           "temporal_padding", "spatial_2d_padding", "normalize_batch_in_training", "batch_normalization",
           "moving_average_update", "map_fn", "foldl", "foldr", "arange", "print_tensor", "cast_to_floatx",
           "truncated_normal", "random_binomial", "get_variable_shape", "resize_images"]

_FLOATX = ["float32"]
_EPSILON = [1e-7]
_IMAGE_DATA_FORMAT = ["channels_last"]
_SESSION: list = [None]
_MANUAL_INIT = [False]
# graph -> its learning-phase placeholder; graph -> a Python 0/1 set by set_learning_phase.
_PHASE_TENSOR: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PHASE_VALUE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# graph -> {prefix: count} for get_uid (Keras's default layer names).
_UIDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# session -> names of the variables known to be initialized in it.
_INITIALIZED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# graph -> {variable name: (placeholder, assign op)} for set_value.
_ASSIGNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# -- configuration ---------------------------------------------------------------------------

def floatx() -> str:
    """The default float type's name, "float32" unless set (tf.keras.backend.floatx)."""
    return _FLOATX[0]


def set_floatx(value) -> None:
    """Sets the default float type: "float16", "float32" or "float64"."""
    if value not in ("float16", "float32", "float64"):
        raise ValueError(f"Unknown floatx type: {value!r}; expected 'float16', 'float32' or 'float64'")
    _FLOATX[0] = str(value)


def epsilon() -> float:
    """The fuzz factor of Keras's numeric expressions, 1e-7 unless set."""
    return _EPSILON[0]


def set_epsilon(value) -> None:
    """Sets the fuzz factor `epsilon()` returns."""
    _EPSILON[0] = float(value)


def image_data_format() -> str:
    """"channels_last" unless set (tf.keras.backend.image_data_format)."""
    return _IMAGE_DATA_FORMAT[0]


def set_image_data_format(data_format) -> None:
    """Sets the default data format of the image layers: "channels_last" or "channels_first"."""
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"Unknown data_format: {data_format!r}")
    _IMAGE_DATA_FORMAT[0] = str(data_format)


def get_uid(prefix="") -> int:
    """1, 2, ... per prefix and graph: Keras's default names ("dense", "dense_1", ...)."""
    uids = _UIDS.setdefault(get_default_graph(), {})
    uids[prefix] = uids.get(prefix, 0) + 1
    return uids[prefix]


def reset_uids() -> None:
    """Restarts the default names' counters of the default graph."""
    _UIDS.pop(get_default_graph(), None)


def get_graph():
    """The default graph (tf.keras.backend.get_graph)."""
    return get_default_graph()


# -- sessions --------------------------------------------------------------------------------

def get_session():
    """The session Keras runs in (tf.keras.backend.get_session): the default session if one is
    active on the default graph, else Keras's own (made for the default graph on first use). The
    graph's global variables not yet initialized in it are initialized first, as in TF 1.x
    (unless `manual_variable_initialization(True)`)."""
    g = get_default_graph()
    sess = get_default_session()
    if sess is None or sess.graph is not g:
        sess = _SESSION[0]
        if sess is None or sess.graph is not g or getattr(sess, "_closed", False):
            sess = Session(graph=g)
            _SESSION[0] = sess
    if not _MANUAL_INIT[0]:
        _initialize_variables(sess)
    return sess


def set_session(session) -> None:
    """Makes `session` the one Keras uses (tf.keras.backend.set_session)."""
    _SESSION[0] = session


def manual_variable_initialization(value) -> None:
    """With True, `get_session` no longer initializes variables (the program runs the initializer)."""
    _MANUAL_INIT[0] = bool(value)


def clear_session() -> None:
    """Forgets Keras's session and resets the default graph (tf.keras.backend.clear_session)."""
    sess = _SESSION[0]
    _SESSION[0] = None
    if sess is not None:
        sess.close()
    reset_default_graph()


def _initialize_variables(sess) -> None:
    known = _INITIALIZED.setdefault(sess, set())
    candidates = [v for v in global_variables() if v.name not in known]
    if not candidates:
        return
    g = sess.graph
    with g.as_default():
        flags = sess.run([is_variable_initialized(v) for v in candidates])
        todo = [v for v, ok in zip(candidates, flags) if not ok]
        if todo:
            sess.run([v.initializer for v in todo])
    known.update(v.name for v in candidates)


# -- the learning phase ----------------------------------------------------------------------

def learning_phase():
    """The learning phase of the default graph: the Python 0/1 `set_learning_phase` gave, else a
    scalar bool placeholder (default False) that `fit` feeds True (tf.keras.backend.learning_phase)."""
    g = get_default_graph()
    if g in _PHASE_VALUE:
        return _PHASE_VALUE[g]
    t = _PHASE_TENSOR.get(g)
    if t is None:
        # Outside any cond or loop context: a layer first called in a loop body shares it with the rest.
        with init_scope(), g.name_scope(None):
            t = placeholder_with_default(False, shape=(), name="keras_learning_phase")
        _PHASE_TENSOR[g] = t
    return t


def set_learning_phase(value) -> None:
    """Fixes the learning phase of the default graph to 0 (test) or 1 (train)."""
    if value not in (0, 1):
        raise ValueError(f"Expected learning phase to be 0 or 1, got {value!r}")
    _PHASE_VALUE[get_default_graph()] = int(value)


# -- tensors and variables -------------------------------------------------------------------

def _dtype(dtype):
    return dtypes.as_dtype(dtype or floatx())


def is_tensor(x) -> bool:
    """Whether `x` is a graph tensor or variable."""
    return isinstance(x, (Tensor, Variable))


def is_sparse(tensor):
    """Whether `tensor` is a SparseTensor (tf.keras.backend.is_sparse)."""
    from actorflow.graph.sparse_tensor import SparseTensor
    return isinstance(tensor, SparseTensor)


def to_dense(tensor):
    """A SparseTensor as a dense tensor; any other tensor as it is (tf.keras.backend.to_dense)."""
    if is_sparse(tensor):
        from actorflow.graph.ops.sparse_ops import sparse_tensor_to_dense
        return sparse_tensor_to_dense(tensor)
    return tensor


def placeholder(shape=None, ndim=None, dtype=None, sparse=False, name=None):
    """A placeholder of `shape` (None for unknown dimensions) or of rank `ndim`."""
    if sparse:
        raise NotImplementedError("keras.backend.placeholder: sparse placeholders are not supported")
    if shape is None and ndim is not None:
        shape = (None,) * int(ndim)
    return _placeholder(_dtype(dtype), shape=shape, name=name)


def variable(value, dtype=None, name=None, constraint=None):
    """A variable holding `value` (tf.keras.backend.variable); `get_session` initializes it."""
    value = np.asarray(value, dtype=_dtype(dtype).as_numpy_dtype)
    v = Variable(value, dtype=_dtype(dtype), name=name, constraint=constraint)
    return v


def constant(value, dtype=None, shape=None, name=None):
    """A constant tensor (tf.keras.backend.constant)."""
    return _constant(value, dtype=_dtype(dtype), shape=shape, name=name or "Const")


def int_shape(x):
    """The static shape as a tuple of ints and Nones, or None when the rank is unknown."""
    s = x.shape if isinstance(x, (Tensor, Variable)) else TensorShape(np.shape(x))
    s = TensorShape(s)
    return None if s.ndims is None else tuple(s.as_list())


def ndim(x):
    """The rank of `x`, or None."""
    s = int_shape(x)
    return None if s is None else len(s)


def shape(x):
    """The dynamic shape of `x`, an int32 tensor."""
    return array_ops.shape(x)


def dtype(x) -> str:
    """The dtype's name ("float32")."""
    return x.dtype.base_dtype.name


def count_params(x) -> int:
    """The number of elements of a variable or tensor of static shape."""
    return int(np.prod(int_shape(x), dtype=np.int64))


def eval(x):  # noqa: A001
    """The value of a tensor or variable, run in `get_session()`."""
    return get_session().run(_tensor(x))


def _tensor(x):
    return x.value() if isinstance(x, Variable) else x


def get_value(x):
    """The value of a variable (tf.keras.backend.get_value)."""
    if isinstance(x, np.ndarray):
        return x
    return get_session().run(_tensor(x))


def batch_get_value(xs) -> list:
    """The values of several variables, in one run."""
    xs = list(xs)
    return get_session().run([_tensor(x) for x in xs]) if xs else []


def _assign_op(x):
    g = x.graph
    table = _ASSIGNS.setdefault(g, {})
    entry = table.get(x.name)
    if entry is None:
        with g.as_default(), init_scope(), g.name_scope(None):
            ph = _placeholder(x.dtype.base_dtype, shape=x.shape, name=x.op.name.replace("/", "_") + "_assign_value")
            op = assign(x, ph, read_value=False)
        entry = table[x.name] = (ph, op)
    return entry


def set_value(x, value) -> None:
    """Sets a variable's value from a numpy array (tf.keras.backend.set_value)."""
    batch_set_value([(x, value)])


def batch_set_value(tuples) -> None:
    """Sets several variables' values in one run; a shape that does not match is an error naming it."""
    tuples = list(tuples)
    if not tuples:
        return
    feeds, ops = {}, []
    for x, value in tuples:
        value = np.asarray(value, dtype=x.dtype.base_dtype.as_numpy_dtype)
        if x.shape.is_fully_defined() and tuple(value.shape) != tuple(x.shape.as_list()):
            raise ValueError(f"set_value: variable '{x.name}' has shape {tuple(x.shape.as_list())}, "
                             f"got a value of shape {value.shape}")
        ph, op = _assign_op(x)
        feeds[ph] = value
        ops.append(op)
    get_session().run(ops, feed_dict=feeds)


def update(x, new_x):
    """An op assigning `new_x` to variable `x`."""
    return assign(x, new_x)


def update_add(x, increment):
    """An op adding `increment` to variable `x`."""
    return x.assign_add(increment)


def update_sub(x, decrement):
    """An op subtracting `decrement` from variable `x`."""
    return x.assign_sub(decrement)


class Function:
    """A callable that runs `outputs` (and the `updates`) with its inputs fed, in `get_session()`
    (the object tf.keras.backend.function returns)."""

    def __init__(self, inputs, outputs, updates=None, name=None, **session_kwargs):
        self.inputs = list(inputs)
        self._single = not isinstance(outputs, (list, tuple))
        self.outputs = [outputs] if self._single else list(outputs)
        ups = []
        for u in updates or []:
            if isinstance(u, (list, tuple)) and len(u) == 2:
                ups.append(assign(u[0], u[1]))
            else:
                ups.append(u)
        self.updates_op = group(*ups) if ups else None
        self.name = name
        self.fetches = session_kwargs.pop("fetches", [])
        if session_kwargs:
            raise ValueError(f"keras.backend.function: unknown session arguments {sorted(session_kwargs)}")

    def __call__(self, inputs):
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(inputs) != len(self.inputs):
            raise ValueError(f"keras function '{self.name}' takes {len(self.inputs)} inputs, got {len(inputs)}")
        feeds = {}
        for t, v in zip(self.inputs, inputs):
            if isinstance(t, int) or t is None:
                continue
            feeds[t] = v
        fetches = [_tensor(o) for o in self.outputs] + list(self.fetches)
        if self.updates_op is not None:
            fetches.append(self.updates_op)
        out = get_session().run(fetches, feed_dict=feeds)[:len(self.outputs)]
        return out[0] if self._single else out


def function(inputs, outputs, updates=None, name=None, **kwargs):
    """A Function: `f([values]) -> [outputs]` (tf.keras.backend.function)."""
    return Function(inputs, outputs, updates=updates, name=name, **kwargs)


def gradients(loss, variables):
    """The gradients of `loss` for `variables`."""
    return _gradients(loss, variables, colocate_gradients_with_ops=True)


# -- creation and math -----------------------------------------------------------------------

def zeros(shape, dtype=None, name=None):
    """A variable of zeros (Keras's zeros is a variable)."""
    return variable(np.zeros(shape), dtype=dtype, name=name)


def ones(shape, dtype=None, name=None):
    """A variable of ones."""
    return variable(np.ones(shape), dtype=dtype, name=name)


def eye(size, dtype=None, name=None):
    """An identity-matrix variable."""
    return variable(np.eye(size), dtype=dtype, name=name)


def zeros_like(x, dtype=None, name=None):
    return array_ops.zeros_like(x, dtype=dtype, name=name)


def ones_like(x, dtype=None, name=None):
    return array_ops.ones_like(x, dtype=dtype, name=name)


def cast(x, dtype):
    return math_ops.cast(x, dtype)


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return math_ops.reduce_sum(x, _axis(axis), keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    x = convert_to_tensor(_tensor(x))
    if x.dtype.is_bool:
        x = math_ops.cast(x, floatx())
    return math_ops.reduce_mean(x, _axis(axis), keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return math_ops.reduce_max(x, _axis(axis), keepdims=keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    return math_ops.reduce_min(x, _axis(axis), keepdims=keepdims)


def prod(x, axis=None, keepdims=False):
    return math_ops.reduce_prod(x, _axis(axis), keepdims=keepdims)


def var(x, axis=None, keepdims=False):
    m = math_ops.reduce_mean(x, _axis(axis), keepdims=True)
    return math_ops.reduce_mean(math_ops.square(math_ops.subtract(x, m)), _axis(axis), keepdims=keepdims)


def std(x, axis=None, keepdims=False):
    return math_ops.sqrt(var(x, axis, keepdims))


def any(x, axis=None, keepdims=False):  # noqa: A001
    return math_ops.reduce_any(math_ops.cast(x, dtypes.bool_), _axis(axis), keepdims=keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    return math_ops.reduce_all(math_ops.cast(x, dtypes.bool_), _axis(axis), keepdims=keepdims)


def logsumexp(x, axis=None, keepdims=False):
    return math_ops.reduce_logsumexp(x, _axis(axis), keepdims=keepdims)


def cumsum(x, axis=0):
    from actorflow.graph.ops.sort_ops import cumsum as _cumsum
    return _cumsum(x, axis=axis)


def argmax(x, axis=-1):
    return math_ops.argmax(x, axis)


def argmin(x, axis=-1):
    return math_ops.argmin(x, axis)


def square(x):
    return math_ops.square(x)


def sqrt(x):
    """sqrt(max(x, 0)), as Keras's."""
    x = convert_to_tensor(_tensor(x))
    return math_ops.sqrt(clip_ops.clip_by_value(x, _constant(0.0, dtype=x.dtype), _constant(np.inf, dtype=x.dtype)))


def abs(x):  # noqa: A001
    return math_ops.abs(x)


def exp(x):
    return math_ops.exp(x)


def log(x):
    return math_ops.log(x)


def pow(x, a):  # noqa: A001
    return math_ops.pow(x, a)


def sign(x):
    return math_ops.sign(x)


def round(x):  # noqa: A001
    return math_ops.round(x)


def clip(x, min_value, max_value):
    if max_value is not None and min_value is not None and max_value < min_value:
        max_value = min_value
    x = convert_to_tensor(_tensor(x))
    return clip_ops.clip_by_value(x, _constant(min_value, dtype=x.dtype), _constant(max_value, dtype=x.dtype))


def maximum(x, y):
    return math_ops.maximum(x, y)


def minimum(x, y):
    return math_ops.minimum(x, y)


def equal(x, y):
    return math_ops.equal(x, y)


def not_equal(x, y):
    return math_ops.not_equal(x, y)


def greater(x, y):
    return math_ops.greater(x, y)


def greater_equal(x, y):
    return math_ops.greater_equal(x, y)


def less(x, y):
    return math_ops.less(x, y)


def less_equal(x, y):
    return math_ops.less_equal(x, y)


def dot(x, y):
    """Matrix product; for ranks above 2, x's last axis with y's second-to-last (Keras's dot)."""
    x, y = convert_to_tensor(_tensor(x)), convert_to_tensor(_tensor(y))
    if x.shape.ndims == 2 and y.shape.ndims == 2:
        return math_ops.matmul(x, y)
    from actorflow.graph.ops.array_ops import tensordot
    return tensordot(x, y, [[x.shape.ndims - 1], [y.shape.ndims - 2 if y.shape.ndims > 1 else 0]])


def batch_dot(x, y, axes=None):
    """Batched dot products of [b, n, m] by [b, m, k] (axes=None or (2, 1))."""
    x, y = convert_to_tensor(_tensor(x)), convert_to_tensor(_tensor(y))
    if axes not in (None, (2, 1), [2, 1]) or x.shape.ndims != 3 or y.shape.ndims != 3:
        raise NotImplementedError("keras.backend.batch_dot: only rank-3 inputs with axes (2, 1) are supported")
    return math_ops.matmul(x, y)


def transpose(x):
    return array_ops.transpose(x)


def permute_dimensions(x, pattern):
    return array_ops.transpose(x, list(pattern))


def concatenate(tensors, axis=-1):
    return array_ops.concat(list(tensors), axis)


def reshape(x, shape):
    return array_ops.reshape(x, shape)


def expand_dims(x, axis=-1):
    return array_ops.expand_dims(x, axis)


def squeeze(x, axis):
    return array_ops.squeeze(x, [axis])


def flatten(x):
    return array_ops.reshape(x, [-1])


def batch_flatten(x):
    return array_ops.reshape(x, [-1, int(np.prod(int_shape(x)[1:]))])


def stack(x, axis=0):
    return array_ops.stack(list(x), axis=axis)


def tile(x, n):
    return array_ops.tile(x, [n] if isinstance(n, int) else list(n))


def repeat(x, n):
    """[batch, dim] -> [batch, n, dim]."""
    return array_ops.tile(array_ops.expand_dims(x, 1), [1, n, 1])


def gather(reference, indices):
    return array_ops.gather(reference, indices)


def one_hot(indices, num_classes):
    return array_ops.one_hot(indices, num_classes)


def identity(x, name=None):
    from actorflow.graph.ops.constant import identity as _identity
    return _identity(x, name=name)


def bias_add(x, bias, data_format=None):
    fmt = "NCHW" if (data_format or image_data_format()) == "channels_first" and x.shape.ndims == 4 else "NHWC"
    return nn_ops.bias_add(x, bias, data_format=fmt)


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    """max(x, 0), with a slope `alpha` below `threshold` and a cap `max_value` (Keras's relu)."""
    x = convert_to_tensor(_tensor(x))
    if alpha == 0 and threshold == 0 and max_value is None:
        return nn_ops.relu(x)
    if alpha == 0 and threshold == 0 and max_value == 6:
        return nn_ops.relu6(x)
    neg = None
    if alpha != 0:
        neg = nn_ops.relu(math_ops.negative(x) + threshold if threshold else math_ops.negative(x))
    if threshold != 0:
        y = math_ops.multiply(x, math_ops.cast(math_ops.greater(x, _constant(threshold, dtype=x.dtype)), x.dtype))
    else:
        y = nn_ops.relu(x)
    if max_value is not None:
        y = clip_ops.clip_by_value(y, _constant(0.0, dtype=x.dtype), _constant(max_value, dtype=x.dtype))
    if neg is not None:
        y = math_ops.subtract(y, math_ops.multiply(_constant(alpha, dtype=x.dtype), neg))
    return y


def elu(x, alpha=1.0):
    y = nn_ops.elu(x)
    return y if alpha == 1 else math_ops.where(math_ops.greater(x, 0.0), y, math_ops.multiply(y, alpha))


def softmax(x, axis=-1):
    return nn_ops.softmax(x, axis=axis)


def softplus(x):
    return nn_ops.softplus(x)


def softsign(x):
    return math_ops.divide(x, math_ops.add(math_ops.abs(x), 1.0))


def sigmoid(x):
    return math_ops.sigmoid(x)


def hard_sigmoid(x):
    """clip(0.2 x + 0.5, 0, 1)."""
    x = convert_to_tensor(_tensor(x))
    y = math_ops.add(math_ops.multiply(x, _constant(0.2, dtype=x.dtype)), _constant(0.5, dtype=x.dtype))
    return clip_ops.clip_by_value(y, _constant(0.0, dtype=x.dtype), _constant(1.0, dtype=x.dtype))


def tanh(x):
    return math_ops.tanh(x)


def dropout(x, level, noise_shape=None, seed=None):
    return nn_ops.dropout(x, rate=level, noise_shape=noise_shape, seed=seed)


def l2_normalize(x, axis=None):
    return nn_ops.l2_normalize(x, axis=axis)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return random_ops.random_normal(shape, mean=mean, stddev=stddev, dtype=_dtype(dtype), seed=seed)


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    return random_ops.random_uniform(shape, minval=minval, maxval=maxval, dtype=_dtype(dtype), seed=seed)


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """-sum(target * log(output)) over `axis`; `output` is rescaled to sum to 1 and clipped to
    [eps, 1 - eps] unless `from_logits` (Keras's categorical_crossentropy)."""
    target, output = convert_to_tensor(_tensor(target)), convert_to_tensor(_tensor(output))
    if from_logits:
        return nn_ops.softmax_cross_entropy_with_logits_v2(labels=target, logits=output, axis=axis)
    output = math_ops.divide(output, math_ops.reduce_sum(output, axis, keepdims=True))
    eps = _constant(epsilon(), dtype=output.dtype)
    output = clip_ops.clip_by_value(output, eps, _constant(1.0, dtype=output.dtype) - eps)
    return math_ops.negative(math_ops.reduce_sum(math_ops.multiply(target, math_ops.log(output)), axis))


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """categorical_crossentropy with integer targets (Keras's; the last axis is the classes')."""
    target, output = convert_to_tensor(_tensor(target)), convert_to_tensor(_tensor(output))
    if axis not in (-1, output.shape.ndims - 1):
        raise NotImplementedError("sparse_categorical_crossentropy: only the last axis is supported")
    if not from_logits:
        eps = _constant(epsilon(), dtype=output.dtype)
        output = math_ops.log(clip_ops.clip_by_value(output, eps, _constant(1.0, dtype=output.dtype) - eps))
    n = output.shape[-1]
    labels = math_ops.cast(array_ops.reshape(target, [-1]), dtypes.int64)
    logits = array_ops.reshape(output, [-1, n])
    res = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    if output.shape.ndims == 2:
        return res
    return array_ops.reshape(res, array_ops.shape(output)[:-1])


def binary_crossentropy(target, output, from_logits=False):
    """Element-wise sigmoid cross-entropy; `output` is clipped to [eps, 1 - eps] and turned back
    into logits unless `from_logits` (Keras's binary_crossentropy)."""
    target, output = convert_to_tensor(_tensor(target)), convert_to_tensor(_tensor(output))
    if not from_logits:
        eps = _constant(epsilon(), dtype=output.dtype)
        output = clip_ops.clip_by_value(output, eps, _constant(1.0, dtype=output.dtype) - eps)
        output = math_ops.log(math_ops.divide(output, math_ops.subtract(_constant(1.0, dtype=output.dtype), output)))
    return nn_ops.sigmoid_cross_entropy_with_logits(labels=math_ops.cast(target, output.dtype), logits=output)


def switch(condition, then_expression, else_expression):
    """Selects between two tensors by a scalar bool (both are computed)."""
    t = then_expression() if callable(then_expression) else then_expression
    e = else_expression() if callable(else_expression) else else_expression
    if isinstance(condition, (bool, int, np.bool_)):
        return t if condition else e
    return math_ops.where(convert_to_tensor(condition), t, e)


def in_train_phase(x, alt, training=None):
    """`x` in the training phase, else `alt`."""
    if training is None:
        training = learning_phase()
    if isinstance(training, (bool, int, np.bool_)):
        chosen = x if training else alt
        return chosen() if callable(chosen) else chosen
    return switch(training, x, alt)


def in_test_phase(x, alt, training=None):
    """`x` in the test phase, else `alt`."""
    return in_train_phase(alt, x, training=training)



# -- convolutions, pooling, padding, normalization, functional ------------------------------

def _nhwc(data_format, rank=2):
    fmt = data_format or image_data_format()
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"Unknown data_format: {data_format!r}")
    return {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW")}[rank][fmt == "channels_first"]


def conv1d(x, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """1-D convolution of [batch, steps, channels] by kernel [k, in, out]; padding "causal" pads the start."""
    x = convert_to_tensor(_tensor(x))
    if padding == "causal":
        k = int_shape(kernel)[0]
        x = array_ops.pad(x, [[0, 0], [dilation_rate * (k - 1), 0], [0, 0]])
        padding = "valid"
    k4 = array_ops.expand_dims(_tensor(kernel), 0)
    out = nn_ops.conv2d(array_ops.expand_dims(x, 1), k4, [1, 1, strides, 1], padding.upper(),
                        dilations=[1, 1, dilation_rate, 1])
    return array_ops.squeeze(out, [1])


def conv2d(x, kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)):
    """2-D convolution by kernel [kh, kw, in, out] (tf.keras.backend.conv2d)."""
    fmt = _nhwc(data_format)
    st = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
    dl = [1, *dilation_rate, 1] if fmt == "NHWC" else [1, 1, *dilation_rate]
    return nn_ops.conv2d(_tensor(x), _tensor(kernel), st, padding.upper(), data_format=fmt, dilations=dl)


def conv2d_transpose(x, kernel, output_shape, strides=(1, 1), padding="valid", data_format=None):
    """Transposed 2-D convolution by kernel [kh, kw, out, in] to `output_shape`."""
    fmt = _nhwc(data_format)
    st = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
    return nn_ops.conv2d_transpose(_tensor(x), _tensor(kernel), output_shape, st, padding=padding.upper(),
                                   data_format=fmt)


def pool2d(x, pool_size, strides=(1, 1), padding="valid", data_format=None, pool_mode="max"):
    """Max or average 2-D pooling (tf.keras.backend.pool2d)."""
    fmt = _nhwc(data_format)
    ks = [1, *pool_size, 1] if fmt == "NHWC" else [1, 1, *pool_size]
    st = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
    if pool_mode not in ("max", "avg"):
        raise ValueError(f"Invalid pool_mode: {pool_mode!r}")
    pool = nn_ops.max_pool if pool_mode == "max" else nn_ops.avg_pool
    return pool(_tensor(x), ks, st, padding.upper(), data_format=fmt)


def temporal_padding(x, padding=(1, 1)):
    """Zeros before and after the steps of [batch, steps, features]."""
    return array_ops.pad(x, [[0, 0], list(padding), [0, 0]])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None):
    """Zero rows and columns around an image batch."""
    pads = [[0, 0], list(padding[0]), list(padding[1]), [0, 0]]
    if _nhwc(data_format) == "NCHW":
        pads = [[0, 0], [0, 0], list(padding[0]), list(padding[1])]
    return array_ops.pad(x, pads)


def normalize_batch_in_training(x, gamma, beta, reduction_axes, epsilon=1e-3):
    """(normalized, mean, variance) of `x` over `reduction_axes`, scaled by gamma and shifted by beta."""
    mean, variance = nn_ops.moments(x, list(reduction_axes))
    return nn_ops.batch_normalization(x, mean, variance, beta, gamma, epsilon), mean, variance


def batch_normalization(x, mean, var, beta, gamma, axis=-1, epsilon=1e-3):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta."""
    return nn_ops.batch_normalization(x, mean, var, beta, gamma, epsilon)


def moving_average_update(x, value, momentum):
    """An op setting variable x to x * momentum + value * (1 - momentum)."""
    return assign(x, math_ops.add(math_ops.multiply(_tensor(x), momentum),
                                  math_ops.multiply(value, 1.0 - momentum)))


def map_fn(fn, elems, name=None, dtype=None):
    """fn over the first axis of elems (tf.keras.backend.map_fn)."""
    from actorflow.graph.ops.functional_ops import map_fn as _map_fn
    return _map_fn(fn, elems, name=name, dtype=dtype)


def foldl(fn, elems, initializer=None, name=None):
    from actorflow.graph.ops.functional_ops import foldl as _foldl
    return _foldl(fn, elems, initializer=initializer, name=name)


def foldr(fn, elems, initializer=None, name=None):
    from actorflow.graph.ops.functional_ops import foldr as _foldr
    return _foldr(fn, elems, initializer=initializer, name=name)


def arange(start, stop=None, step=1, dtype="int32"):
    """A 1-D tensor of start, start + step, ... below stop."""
    from actorflow.graph.ops.array_ops import range as _range
    return math_ops.cast(_range(start, stop, step), dtype)


def print_tensor(x, message=""):
    """`x`, printing `message` and its value when it is computed."""
    from actorflow.graph.ops.string_ops import Print
    return Print(x, [x], message)


def cast_to_floatx(x):
    """A numpy array of floatx()."""
    return np.asarray(x, dtype=floatx())


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return random_ops.truncated_normal(shape, mean=mean, stddev=stddev, dtype=_dtype(dtype), seed=seed)


def random_binomial(shape, p=0.0, dtype=None, seed=None):
    """1 with probability p, else 0."""
    u = random_ops.random_uniform(shape, dtype=_dtype(dtype), seed=seed)
    return math_ops.cast(math_ops.less(u, p), _dtype(dtype))


def get_variable_shape(x):
    return int_shape(x)


def resize_images(x, height_factor, width_factor, data_format=None, interpolation="nearest"):
    """Nearest-neighbour upsampling by integer factors (needs static height and width)."""
    from actorflow.keras.layers import UpSampling2D
    return UpSampling2D((height_factor, width_factor), data_format=data_format, interpolation=interpolation).call(x)
