"""TF 1.x's smaller array and graph utilities: ensure_shape (EnsureShape), reverse_sequence
(ReverseSequence), setdiff1d (ListDiff), unravel_index (UnravelIndex), qr (Qr), tuple, is_tensor,
get_static_value, make_template, report_uninitialized_variables, assert_variables_initialized,
moving_average_variables, no_regularizer."""
from __future__ import annotations

import functools

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, control_dependencies, convert_to_tensor, get_collection, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.array_ops._infer import _no_gradient
from actorflow.graph.ops.constant import constant, group, identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["ensure_shape", "reverse_sequence", "setdiff1d", "unravel_index", "qr", "tuple", "is_tensor",
           "get_static_value", "make_template", "report_uninitialized_variables", "assert_variables_initialized",
           "moving_average_variables", "no_regularizer", "count_up_to", "guarantee_const", "timestamp",
           "is_symbolic_tensor", "batch_scatter_update"]


def _infer_ensure_shape(inputs, attrs):
    x = inputs[0]
    want = as_shape(attrs["shape"])
    if not x.shape.is_compatible_with(want):
        raise InferenceError(f"Shape of tensor {x.name} {x.shape} is not compatible with expected shape {want}.")
    return [(x.dtype, x.shape.merge_with(want))]


EnsureShape = define_op("EnsureShape", _infer_ensure_shape)
EnsureShape.gradient(lambda op, grad: [grad])


def _infer_reverse_sequence(inputs, attrs):
    x, lengths = inputs
    if lengths.dtype not in (dtypes.int32, dtypes.int64) or lengths.shape.ndims not in (None, 1):
        raise InferenceError(f"seq_lengths must be an int32/int64 vector, got {lengths.dtype.name} {lengths.shape}")
    r = x.shape.ndims
    if r is not None:
        for a in ("seq_dim", "batch_dim"):
            if not 0 <= attrs[a] < r:
                raise InferenceError(f"{a} {attrs[a]} is out of range for an input of rank {r}")
        if attrs["seq_dim"] == attrs["batch_dim"]:
            raise InferenceError("seq_dim and batch_dim must differ")
    return [(x.dtype, x.shape)]


ReverseSequence = define_op("ReverseSequence", _infer_reverse_sequence)


@ReverseSequence.gradient
def _reverse_sequence_grad(op, grad):
    return [ReverseSequence(grad, op.inputs[1], seq_dim=op.attrs["seq_dim"], batch_dim=op.attrs["batch_dim"]), None]


def _infer_list_diff(inputs, attrs):
    x, y = inputs
    if x.dtype is not y.dtype:
        raise InferenceError(f"x and y must have one dtype, got {x.dtype.name} and {y.dtype.name}")
    return [(x.dtype, TensorShape([None])), (dtypes.as_dtype(attrs.get("out_idx", dtypes.int32)), TensorShape([None]))]


ListDiff = define_op("ListDiff", _infer_list_diff)
ListDiff.gradient(_no_gradient)


def _infer_unravel(inputs, attrs):
    idx, dims = inputs
    n = dims.shape.dims[0] if dims.shape.ndims == 1 else None
    lead = [n] if idx.shape.ndims == 1 else []
    if idx.shape.ndims == 1:
        return [(idx.dtype, TensorShape([n, idx.shape.dims[0]]))]
    return [(idx.dtype, TensorShape(lead or [n]))]


UnravelIndex = define_op("UnravelIndex", _infer_unravel)
UnravelIndex.gradient(_no_gradient)


def _infer_qr(inputs, attrs):
    x = inputs[0]
    d = None if x.shape.dims is None else list(x.shape.dims)
    if d is None:
        return [(x.dtype, TensorShape(None))] * 2
    if len(d) < 2:
        raise InferenceError(f"qr needs a matrix or a batch of them, got shape {x.shape}")
    m, n = d[-2], d[-1]
    k = None if m is None or n is None else min(m, n)
    if attrs.get("full_matrices"):
        return [(x.dtype, TensorShape(d[:-2] + [m, m])), (x.dtype, TensorShape(d[:-2] + [m, n]))]
    return [(x.dtype, TensorShape(d[:-2] + [m, k])), (x.dtype, TensorShape(d[:-2] + [k, n]))]


Qr = define_op("Qr", _infer_qr)


def ensure_shape(x, shape, name=None):
    """`x`, checked when the step runs to have `shape` (unknown dimensions match any), with its static
    shape refined (tf.ensure_shape)."""
    with name_scope(name or "EnsureShape"):
        return EnsureShape(convert_to_tensor(x, name="x"), shape=as_shape(shape))


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None, seq_dim=None,  # noqa: A002
                     batch_dim=None):
    """Reverses the first seq_lengths[b] elements along `seq_axis` of each slice b along `batch_axis`
    (tf.reverse_sequence)."""
    seq = seq_axis if seq_axis is not None else seq_dim
    batch = batch_axis if batch_axis is not None else (batch_dim if batch_dim is not None else 0)
    if seq is None:
        raise ValueError("reverse_sequence needs seq_axis (seq_dim)")
    with name_scope(name or "ReverseSequence"):
        x = convert_to_tensor(input, name="input")
        r = x.shape.ndims
        if r is not None:
            seq, batch = seq % r, batch % r
        return ReverseSequence(x, convert_to_tensor(seq_lengths, name="seq_lengths"), seq_dim=int(seq),
                               batch_dim=int(batch))


def setdiff1d(x, y, index_dtype=dtypes.int32, name=None):
    """The values of `x` not in `y`, in x's order, and their positions in x (tf.setdiff1d)."""
    with name_scope(name or "ListDiff"):
        x = convert_to_tensor(x, name="x")
        out, idx = ListDiff(x, convert_to_tensor(y, dtype=x.dtype, name="y"), out_idx=dtypes.as_dtype(index_dtype))
        return out, idx


def unravel_index(indices, dims, name=None):
    """The coordinates of flat `indices` in an array of shape `dims` (tf.unravel_index): [len(dims)]
    for a scalar index, [len(dims), n] for a vector."""
    with name_scope(name or "UnravelIndex"):
        i = convert_to_tensor(indices, name="indices")
        return UnravelIndex(i, convert_to_tensor(dims, dtype=i.dtype, name="dims"))


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """The QR factorization of each innermost matrix (tf.linalg.qr): (q, r). Its gradient (TF's)
    is in linalg_ops.py."""
    with name_scope(name or "Qr"):
        return Qr(convert_to_tensor(input, name="input"), full_matrices=bool(full_matrices))


def tuple(tensors, name=None, control_inputs=None):  # noqa: A001 - TF's name
    """The tensors, each available only once all of them (and `control_inputs`) are computed
    (tf.tuple)."""
    with name_scope(name or "tuple"):
        ts = [t for t in tensors if t is not None]
        gate = group(*ts, *(control_inputs or ()))
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
                continue
            with control_dependencies([gate]):
                if isinstance(t, IndexedSlices):
                    out.append(IndexedSlices(identity(t.values), t.indices, t.dense_shape))
                else:
                    out.append(identity(t))
        return out


def is_tensor(x) -> bool:
    """Whether `x` is a graph tensor (Tensor, Variable, SparseTensor, IndexedSlices) (tf.is_tensor)."""
    from actorflow.graph.sparse_tensor import SparseTensor
    from actorflow.graph.variables import Variable
    return isinstance(x, (Tensor, Variable, SparseTensor, IndexedSlices))


def get_static_value(tensor, partial=False):
    """The value of `tensor` when the graph alone determines it, else None (tf.get_static_value)."""
    if not isinstance(tensor, Tensor):
        return tensor
    return constant_value(tensor)


class Template:
    """A function whose variables are created on its first call and reused by later ones
    (tf.compat.v1.make_template)."""

    def __init__(self, name, func, create_scope_now=False, unique_name=None, custom_getter=None):
        from actorflow.graph.variable_scope import variable_scope
        self._name = name
        self._func = func
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._scope = None
        self._created = False
        if create_scope_now:
            with variable_scope(unique_name, default_name=name, custom_getter=custom_getter) as vs:
                self._scope = vs

    def __call__(self, *args, **kwargs):
        from actorflow.graph.variable_scope import variable_scope
        if self._scope is None:
            with variable_scope(self._unique_name, default_name=self._name, custom_getter=self._custom_getter) as vs:
                self._scope = vs
                result = self._func(*args, **kwargs)
            self._created = True
            return result
        with variable_scope(self._scope, reuse=True if self._created else None,
                            custom_getter=self._custom_getter):
            result = self._func(*args, **kwargs)
        self._created = True
        return result

    @property
    def name(self) -> str:
        return self._name

    @property
    def variable_scope(self):
        return self._scope

    @property
    def variable_scope_name(self) -> str:
        return self._scope.name if self._scope is not None else None

    @property
    def variables(self) -> list:
        from actorflow.graph.variables import global_variables
        if self._scope is None:
            return []
        prefix = self._scope.name + "/"
        return [v for v in global_variables() if v.op.name.startswith(prefix)]

    @property
    def trainable_variables(self) -> list:
        from actorflow.graph.variables import trainable_variables
        if self._scope is None:
            return []
        prefix = self._scope.name + "/"
        return [v for v in trainable_variables() if v.op.name.startswith(prefix)]


def make_template(name_, func_, create_scope_now_=False, unique_name_=None, custom_getter_=None, **kwargs):
    """`func_` wrapped so that every call shares the variables the first call creates, under a
    variable scope named after `name_` (made unique) (tf.compat.v1.make_template)."""
    if not callable(func_):
        raise ValueError(f"func_ must be callable, got {func_!r}")
    return Template(name_, functools.partial(func_, **kwargs) if kwargs else func_, create_scope_now_, unique_name_,
                    custom_getter_)


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """A string vector of the names of the uninitialized variables of `var_list` (default: the
    global and local variables) (tf.compat.v1.report_uninitialized_variables)."""
    from actorflow.graph.variables import global_variables, is_variable_initialized, local_variables
    if var_list is None:
        var_list = global_variables() + local_variables()
    with name_scope(name):
        if not var_list:
            return constant([], dtype=dtypes.string)
        inited = array_ops.stack([is_variable_initialized(v) for v in var_list])
        names = constant([v.op.name for v in var_list], dtype=dtypes.string)
        return array_ops.boolean_mask(names, math_ops.logical_not(inited))


def assert_variables_initialized(var_list=None):
    """An op that fails with FailedPreconditionError naming the first uninitialized variable of
    `var_list` (default: the global variables) (tf.compat.v1.assert_variables_initialized)."""
    from actorflow.graph.variables import global_variables
    var_list = global_variables() if var_list is None else var_list
    if not var_list:
        return None
    with name_scope("assert_variables_initialized"):
        return group(*[identity(v.value() if hasattr(v, "value") else v) for v in var_list])


def moving_average_variables(scope=None):
    """The variables ExponentialMovingAverage.apply averaged (tf.compat.v1.moving_average_variables)."""
    return get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def no_regularizer(_):
    """A regularizer that adds nothing (tf.compat.v1.no_regularizer)."""
    return None


def _infer_count_up_to(inputs, attrs):
    ref = inputs[0]
    if ref.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"count_up_to needs an int32 or int64 variable, got {ref.dtype.name}")
    if ref.shape.ndims not in (None, 0):
        raise InferenceError(f"count_up_to needs a scalar variable, got shape {ref.shape}")
    return [(ref.dtype, TensorShape([]))]


# Increments a scalar variable in place unless it has reached `limit` (then OutOfRangeError, "Reached
# limit of N"); its output is the variable's new value (count_up_to returns the old one, as TF's
# CountUpTo does, by subtracting one: an update's output is the variable's buffer in this runtime).
CountUpToIncrement = define_op("CountUpToIncrement", _infer_count_up_to, ref_inputs=(0,), stateful=True)
CountUpToIncrement.gradient(lambda op, grad: [None])


def count_up_to(ref, limit, name=None):
    """Increments the scalar integer variable `ref` until it reaches `limit`, returning its value
    before the increment; at the limit it raises OutOfRangeError (tf.compat.v1.count_up_to)."""
    with name_scope(name or "CountUpTo"):
        from actorflow.graph.variables import _ref_of
        new = CountUpToIncrement(_ref_of(ref), limit=int(limit))
        return new - convert_to_tensor(1, dtype=new.dtype)


# -- GuaranteeConst, Timestamp, is_symbolic_tensor, batch_scatter_update -----------------------------

GuaranteeConst = define_op("GuaranteeConst", lambda inputs, attrs: [(inputs[0].dtype, inputs[0].shape)],
                           placement="pass_through")
# (no gradient: differentiating through it is a LookupError, as in TF)


def guarantee_const(input, name=None):  # noqa: A002 (TF's name)
    """`input`, promised constant over the session's lifetime (tf.guarantee_const): TF lets its
    runtime hoist the value; here it is an identity. It has no gradient, as in TF."""
    with name_scope(name, "GuaranteeConst", [input]) as scope:
        return GuaranteeConst(convert_to_tensor(input), name=scope.rstrip("/") + "/")


Timestamp = define_op("Timestamp", lambda inputs, attrs: [(dtypes.float64, TensorShape([]))], stateful=True)
Timestamp.gradient(_no_gradient)


def timestamp(name=None):
    """The time of running, in seconds since the Unix epoch, float64 (tf.timestamp); stateful, so
    never folded into a constant."""
    return Timestamp(name=name)


def is_symbolic_tensor(tensor) -> bool:
    """Whether `tensor` is a graph Tensor (tf.is_symbolic_tensor): not a Variable, SparseTensor or
    Python value, as in TF."""
    return isinstance(tensor, Tensor)


def batch_scatter_update(ref, indices, updates, use_locking=True, name=None):
    """ref[i..., indices[i..., j], ...] = updates[i..., j, ...] for every batch position i... of the
    leading dimensions (tf.compat.v1.batch_scatter_update): scatter_nd_update with the batch
    coordinates prepended to `indices`, as TF builds it. Returns the updated variable's value."""
    from actorflow.graph.variables import scatter_nd_update
    with name_scope(name, "BatchScatterUpdate", [ref, indices, updates]):
        indices = convert_to_tensor(indices, name="indices")
        rank = indices.shape.ndims
        if rank is None:
            raise ValueError("batch_scatter_update does not allow indices with unknown rank")
        if not indices.dtype.is_integer:
            raise TypeError(f"batch_scatter_update: indices must be int32 or int64, got {indices.dtype.name}")
        nd = array_ops.expand_dims(indices, -1)
        shape = array_ops.shape(indices)
        parts = []
        for d in range(rank - 1):
            bshape = [1] * (rank + 1)
            bshape[d] = -1
            rng = math_ops.cast(array_ops.reshape(array_ops.range(0, shape[d], 1), bshape), indices.dtype)
            parts.append(rng * array_ops.ones_like(nd))
        parts.append(nd)
        final = array_ops.concat(parts, axis=-1)
        return scatter_nd_update(ref, final, updates, use_locking=use_locking)
