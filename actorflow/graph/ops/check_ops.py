"""Assertions on tensors: the Assert op and TF 1.x's `tf.debugging.assert_*` family.

Every assertion follows `tensorflow/python/ops/check_ops.py` of TF 1.x: where the answer is known
when the graph is built (both operands constant, a statically known rank, shape or dtype) it is
given then, by raising the error TF raises (InvalidArgumentError for a failed comparison of
constants, ValueError for a rank or shape, TypeError for a dtype); otherwise the function returns
an Assert op that fails its step with InvalidArgumentError, "assertion failed: [...] [...]" in TF's
format, naming the op. Like in TF 1.x graphs, the op must be run: fetch it, or make other ops
depend on it with `af.control_dependencies`.

The one difference from TF: actorflow has no string tensors, so the literal strings of an Assert's
`data` list are carried by the op's ``data_strings`` attribute instead of string Const inputs, and
Assert reads all its inputs on the host directly (TF wraps non-int32 data in a cond to spare the
copy when the condition holds; here the data stays where it is until the kernel runs).
"""
from __future__ import annotations

import numpy as np

from actorflow import errors
from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import group, no_op
from actorflow.graph.ops.infer import constant_value

__all__ = [
    "Assert", "assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
    "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative", "assert_non_positive",
    "assert_near", "assert_rank", "assert_rank_at_least", "assert_rank_in", "assert_type", "assert_integer",
    "assert_scalar", "assert_shapes", "assert_same_float_dtype", "assert_proper_iterable", "is_numeric_tensor",
    "is_non_decreasing", "is_strictly_increasing",
]


# ---------------------------------------------------------------------------------------------
# The Assert op
# ---------------------------------------------------------------------------------------------

class _DTypeError(InferenceError, TypeError):
    """A dtype mistake: a ValueError like every inference error, and a TypeError like in TF."""


def _infer_assert(inputs, attrs):
    cond = inputs[0]
    if not cond.dtype.is_bool:
        raise _DTypeError(f"Assert's condition must be a bool tensor, got {cond.dtype.name}")
    nd = cond.shape.ndims
    if nd is not None and not (nd == 0 or (nd == 1 and cond.shape.dims[0] in (1, None))):
        raise InferenceError(f"Assert's condition must be a scalar, got shape {cond.shape}")
    template = attrs.get("data_strings")
    if template is not None and sum(e is None for e in template) != len(inputs) - 1:
        raise InferenceError(f"Assert's data_strings has {sum(e is None for e in template)} tensor slots "
                             f"for {len(inputs) - 1} data inputs")
    return []


# Fails its step with InvalidArgumentError when `condition` is false. Stateful: an assertion must
# never be merged with another or dropped as having no consumer.
AssertOp = define_op("Assert", _infer_assert, stateful=True)


def Assert(condition, data, summarize=None, name=None):  # noqa: N802 - TF's name
    """An op that fails the step with InvalidArgumentError listing `data` when `condition` is false
    (tf.compat.v1.Assert).

    `condition` is a scalar bool tensor; `data` a list of tensors (or values convertible to
    tensors) and Python strings, printed as "assertion failed: [d0] [d1] ..." with the first
    `summarize` elements of each tensor (3 when None, all when negative). Returns the Operation;
    in a graph it runs only when fetched or depended on. Differs from TF in that strings are kept
    as an attribute (actorflow has no string tensors).
    """
    if isinstance(data, (Tensor, str, bytes, np.ndarray)) or not hasattr(data, "__iter__"):
        raise TypeError(f"Assert's data must be a list of tensors and strings, got {type(data).__name__}")
    with name_scope(name, "Assert", [condition] + [d for d in data if isinstance(d, Tensor)]):
        condition = convert_to_tensor(condition, name="Condition")
        template, tensors = [], []
        for d in data:
            if isinstance(d, bytes):
                d = d.decode("utf-8", "backslashreplace")
            if isinstance(d, str):
                template.append(d)
            else:
                tensors.append(convert_to_tensor(d))
                template.append(None)
        return AssertOp(condition, *tensors, name="Assert", data_strings=tuple(template),
                        summarize=3 if summarize is None else int(summarize))


@AssertOp.gradient
def _assert_grad(op, *grads):
    return [None] * len(op.inputs)


# ---------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------

def _message_prefix(message) -> str:
    return f"{message}.  " if message else ""


def _static_string(x) -> str:
    if not isinstance(x, Tensor):
        return str(x)
    v = constant_value(x)
    return str(v) if v is not None else str(x)


def _assert_static(condition, data) -> None:
    """Raises what TF raises for a condition decided at graph-construction time."""
    if not condition:
        raise errors.InvalidArgumentError(None, None, "\n".join(_static_string(x) for x in data))


def _binary_assert(sym, opname, op_func, static_func, x, y, data, summarize, message, name):
    with name_scope(name, opname, [x, y]):
        # A Python operand takes the dtype of the tensor one (TF would refuse float x against 0).
        if isinstance(y, Tensor) and not isinstance(x, Tensor):
            y = convert_to_tensor(y, name="y")
            x = convert_to_tensor(x, name="x", dtype=y.dtype)
        else:
            x = convert_to_tensor(x, name="x")
            y = convert_to_tensor(y, name="y", dtype=None if isinstance(y, Tensor) else x.dtype)
        if data is None:
            data = [f"Condition x {sym} y did not hold element-wise:", f"x ({x.name}) = ", x,
                    f"y ({y.name}) = ", y]
        if message is not None:
            data = [message] + list(data)
        condition = math_ops.reduce_all(op_func(x, y))
        xs, ys = constant_value(x), constant_value(y)
        if xs is not None and ys is not None:
            _assert_static(bool(np.all(static_func(xs, ys))), data)
        return Assert(condition, data, summarize=summarize)


def assert_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x == y element-wise, broadcasting (tf.compat.v1.assert_equal).

    Both constant: decided now (InvalidArgumentError listing `data` if unequal, as TF). `x is y`
    gives a no-op. Otherwise an Assert op: "Condition x == y did not hold element-wise:" followed
    by the names and first `summarize` values of x and y, after `message` when given.
    """
    with name_scope(name, "assert_equal", [x, y]):
        if x is y:
            return no_op()
    return _binary_assert("==", "assert_equal", math_ops.equal, np.equal, x, y, data, summarize, message, name)


def assert_none_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x != y for every element (tf.compat.v1.assert_none_equal); static
    when both are constant."""
    return _binary_assert("!=", "assert_none_equal", math_ops.not_equal, np.not_equal, x, y, data, summarize,
                          message, name)


def assert_less(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x < y element-wise (tf.compat.v1.assert_less); static when both
    are constant."""
    return _binary_assert("<", "assert_less", math_ops.less, np.less, x, y, data, summarize, message, name)


def assert_less_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x <= y element-wise (tf.compat.v1.assert_less_equal); static when
    both are constant."""
    return _binary_assert("<=", "assert_less_equal", math_ops.less_equal, np.less_equal, x, y, data, summarize,
                          message, name)


def assert_greater(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x > y element-wise (tf.compat.v1.assert_greater); static when both
    are constant."""
    return _binary_assert(">", "assert_greater", math_ops.greater, np.greater, x, y, data, summarize, message,
                          name)


def assert_greater_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op that fails unless x >= y element-wise (tf.compat.v1.assert_greater_equal); static
    when both are constant."""
    return _binary_assert(">=", "assert_greater_equal", math_ops.greater_equal, np.greater_equal, x, y, data,
                          summarize, message, name)


def _unary_assert(opname, sym, compare, x, data, summarize, message, name):
    message = _message_prefix(message)
    with name_scope(name, opname, [x]):
        x = convert_to_tensor(x, name="x")
        if data is None:
            data = [message, f"Condition x {sym} 0 did not hold element-wise:", f"x ({x.name}) = ", x]
        zero = convert_to_tensor(0, dtype=x.dtype)
        return compare(x, zero, data)


def assert_positive(x, data=None, summarize=None, message=None, name=None):
    """An op that fails unless every element of x is > 0 (tf.compat.v1.assert_positive). A NaN
    fails it, as in TF."""
    return _unary_assert("assert_positive", ">", lambda x, z, d: assert_less(z, x, data=d, summarize=summarize),
                         x, data, summarize, message, name)


def assert_negative(x, data=None, summarize=None, message=None, name=None):
    """An op that fails unless every element of x is < 0 (tf.compat.v1.assert_negative)."""
    return _unary_assert("assert_negative", "<", lambda x, z, d: assert_less(x, z, data=d, summarize=summarize),
                         x, data, summarize, message, name)


def assert_non_negative(x, data=None, summarize=None, message=None, name=None):
    """An op that fails unless every element of x is >= 0 (tf.compat.v1.assert_non_negative)."""
    return _unary_assert("assert_non_negative", ">=",
                         lambda x, z, d: assert_less_equal(z, x, data=d, summarize=summarize),
                         x, data, summarize, message, name)


def assert_non_positive(x, data=None, summarize=None, message=None, name=None):
    """An op that fails unless every element of x is <= 0 (tf.compat.v1.assert_non_positive).
    (TF 1.x runs two of its message strings together; here they are separate entries.)"""
    return _unary_assert("assert_non_positive", "<=",
                         lambda x, z, d: assert_less_equal(x, z, data=d, summarize=summarize),
                         x, data, summarize, message, name)


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """An op that fails unless |x - y| < atol + rtol * |y| element-wise (tf.compat.v1.assert_near).

    `rtol` and `atol` default to 10 * eps of x's dtype. Always checked at run time, as in TF. The
    message shows the tolerances' values where TF prints their tensors' reprs.
    """
    message = _message_prefix(message)
    with name_scope(name, "assert_near", [x, y]):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype)
        if not x.dtype.is_floating:
            raise TypeError(f"assert_near needs floating-point tensors, got {x.dtype.name} for {x.name}")
        eps = float(np.finfo(x.dtype.np).eps)
        rtol_v = 10 * eps if rtol is None else rtol
        atol_v = 10 * eps if atol is None else atol
        rtol_t = convert_to_tensor(rtol_v, name="rtol", dtype=x.dtype)
        atol_t = convert_to_tensor(atol_v, name="atol", dtype=x.dtype)
        if data is None:
            data = [message,
                    f"x and y not equal to tolerance rtol = {_static_string(rtol_t)}, "
                    f"atol = {_static_string(atol_t)}",
                    f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
        tol = math_ops.add(atol_t, math_ops.multiply(rtol_t, math_ops.abs(y)))
        diff = math_ops.abs(math_ops.subtract(x, y))
        condition = math_ops.reduce_all(math_ops.less(diff, tol))
        return Assert(condition, data, summarize=summarize)


# ---------------------------------------------------------------------------------------------
# Ranks, dtypes and shapes
# ---------------------------------------------------------------------------------------------

class _StaticRankFailed(ValueError):
    def __init__(self, actual, given):
        super().__init__("Static rank condition failed")
        self.actual, self.given = actual, given


def _assert_ranks_condition(x, ranks, static_condition, dynamic_condition, data, summarize):
    for r in ranks:
        assert_type(r, dtypes.int32)
    ranks_static = tuple(constant_value(r) for r in ranks)
    if not any(r is None for r in ranks_static):
        for r in ranks_static:
            if np.ndim(r) != 0:
                raise ValueError("Rank must be a scalar.")
        x_rank = x.shape.ndims
        if x_rank is not None:
            if not static_condition(x_rank, ranks_static):
                raise _StaticRankFailed(x_rank, ranks_static)
            return no_op(name="static_checks_determined_all_ok")
    condition = dynamic_condition(array_ops.rank(x), ranks)
    checks = [assert_rank(r, 0, data=["Rank must be a scalar. Received rank: ", r])
              for r, rs in zip(ranks, ranks_static) if rs is None]
    if checks:
        with control_dependencies(checks):
            from actorflow.graph.ops.constant import identity
            condition = identity(condition)
    return Assert(condition, data, summarize=summarize)


def _rank_tensor(rank):
    return convert_to_tensor(rank, name="rank", dtype=None if isinstance(rank, Tensor) else dtypes.int32)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Checks that x has rank `rank` (tf.compat.v1.assert_rank).

    With x's rank and `rank` known statically, raises ValueError now ("Tensor x:0 must have rank
    2.  Received rank 1, shape (2,)") or returns a no-op; otherwise returns an Assert op.
    """
    with name_scope(name, "assert_rank", [x]):
        x = convert_to_tensor(x, name="x")
        rank = _rank_tensor(rank)
        message = _message_prefix(message)
        if data is None:
            data = [message, f"Tensor {x.name} must have rank", rank, "Received shape: ", array_ops.shape(x)]
        try:
            return _assert_ranks_condition(x, (rank,), lambda a, g: a == g[0],
                                           lambda r, g: math_ops.equal(r, g[0]), data, summarize)
        except _StaticRankFailed as e:
            raise ValueError(f"{message}Tensor {x.name} must have rank {int(e.given[0])}.  Received rank "
                             f"{e.actual}, shape {x.shape}") from None


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """Checks that x has rank `rank` or more (tf.compat.v1.assert_rank_at_least): static ValueError
    or no-op when both ranks are known, else an Assert op."""
    with name_scope(name, "assert_rank_at_least", [x]):
        x = convert_to_tensor(x, name="x")
        rank = _rank_tensor(rank)
        message = _message_prefix(message)
        if data is None:
            data = [message, f"Tensor {x.name} must have rank at least", rank, "Received shape: ",
                    array_ops.shape(x)]
        try:
            return _assert_ranks_condition(x, (rank,), lambda a, g: a >= g[0],
                                           lambda r, g: math_ops.greater_equal(r, g[0]), data, summarize)
        except _StaticRankFailed as e:
            raise ValueError(f"{message}Tensor {x.name} must have rank at least {int(e.given[0])}.  Received "
                             f"rank {e.actual}, shape {x.shape}") from None


def _dynamic_rank_in(actual, given):
    if not given:
        return convert_to_tensor(False)
    result = math_ops.equal(given[0], actual)
    for g in given[1:]:
        result = math_ops.logical_or(result, math_ops.equal(g, actual))
    return result


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """Checks that x's rank is one of `ranks` (tf.compat.v1.assert_rank_in): static ValueError or
    no-op when every rank is known, else an Assert op."""
    with name_scope(name, "assert_rank_in", [x]):
        x = convert_to_tensor(x, name="x")
        ranks = tuple(_rank_tensor(r) for r in ranks)
        message = _message_prefix(message)
        if data is None:
            data = [message, f"Tensor {x.name} must have rank in"] + list(ranks) + ["Received shape: ",
                                                                                     array_ops.shape(x)]
        try:
            return _assert_ranks_condition(x, ranks, lambda a, g: a in [int(r) for r in g], _dynamic_rank_in,
                                           data, summarize)
        except _StaticRankFailed as e:
            raise ValueError(f"{message}Tensor {x.name} must have rank in {tuple(int(r) for r in e.given)}.  "
                             f"Received rank {e.actual}, shape {x.shape}") from None


def assert_integer(x, message=None, name=None):
    """Statically checks that x has an integer dtype (tf.compat.v1.assert_integer): TypeError if
    not, else a no-op."""
    with name_scope(name, "assert_integer", [x]):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            raise TypeError(f'{_message_prefix(message)}Expected "x" to be integer type.  Found: {x.name} of '
                            f"dtype {x.dtype}")
        return no_op(name="statically_determined_was_integer")


def assert_type(tensor, tf_type, message=None, name=None):
    """Statically checks that `tensor` has dtype `tf_type` (tf.compat.v1.assert_type): TypeError
    if not, else a no-op."""
    tf_type = dtypes.as_dtype(tf_type)
    with name_scope(name, "assert_type", [tensor]):
        tensor = convert_to_tensor(tensor, name="tensor")
        if tensor.dtype is not tf_type:
            raise TypeError(f"{_message_prefix(message)}{tensor.name} must be of type {tf_type!r}; "
                            f"got {tensor.dtype!r}")
        return no_op(name="statically_determined_correct_type")


def assert_scalar(tensor, name=None, message=None):
    """Statically checks that `tensor` is a scalar and returns it (tf.compat.v1.assert_scalar);
    ValueError when its rank is not known to be 0."""
    with name_scope(name, "assert_scalar", [tensor]) as scope:
        tensor = convert_to_tensor(tensor, name=scope)
        if tensor.shape.ndims != 0:
            raise ValueError(f"{_message_prefix(message)}Expected scalar shape for {tensor.name}, "
                             f"saw shape: {tensor.shape}.")
        return tensor


def _dimension_sizes(x):
    """Per dimension, its static size or a scalar tensor; a scalar counts as shape (1,)."""
    rank = x.shape.ndims
    if rank == 0:
        return (1,)
    if rank is not None:
        dyn = None
        sizes = []
        for i, d in enumerate(x.shape.as_list()):
            if d is None:
                dyn = array_ops.shape(x) if dyn is None else dyn
                sizes.append(dyn[i])
            else:
                sizes.append(int(d))
        return sizes
    # Unknown rank: append a 1 exactly when x is a scalar (TF uses a cond here).
    pad = math_ops.subtract(1, math_ops.minimum(array_ops.rank(x), 1))
    return _DynamicSizes(array_ops.concat([array_ops.shape(x), array_ops.fill(array_ops.reshape(pad, [1]), 1)], 0))


class _DynamicSizes:
    def __init__(self, t):
        self.t = t

    def __getitem__(self, i):
        return self.t[i]


def _has_known_value(v) -> bool:
    if v is None or isinstance(v, Tensor):
        return False
    try:
        int(v)
        return True
    except (TypeError, ValueError):
        return False


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """Checks tensors' shapes against symbolic shapes, with shared symbols (tf.compat.v1.debugging
    .assert_shapes).

    `shapes` maps (or lists pairs) tensor -> shape spec: integers are exact sizes, strings are
    symbols that must agree across tensors, None or "." any size, and a leading "..." or "*" any
    number of outer dimensions. What is known statically is checked now (ValueError naming the
    tensor and dimension); the rest by Assert ops, grouped into the returned op.
    """
    if isinstance(shapes, dict):
        shapes = shapes.items()
    prefix = _message_prefix(message)
    with name_scope(name, "assert_shapes"):
        constraints = [(convert_to_tensor(x), s) for x, s in shapes if s is not None]
        dim_sizes = []
        for tensor, spec in constraints:
            if not (hasattr(spec, "__iter__") or hasattr(spec, "__getitem__")):
                raise ValueError(f"{prefix}Tensor {tensor.name}.  Specified shape must be an iterable.  An iterable "
                                 f"has the attribute `__iter__` or `__getitem__`.  Received specified shape: {spec}")
            spec = tuple(spec)
            innermost = False
            for i, sym in enumerate(spec):
                if sym is Ellipsis or (isinstance(sym, str) and sym == "*"):
                    if i != 0:
                        raise ValueError(f"{prefix}Tensor {tensor.name} specified shape index {i}.  Symbol `...` or "
                                         "`*` for a variable number of unspecified dimensions is only allowed as "
                                         "the first entry")
                    innermost = True
            sym_sizes = spec[1:] if innermost else spec
            dim_sizes.append((tensor, innermost, _dimension_sizes(tensor), sym_sizes or (1,)))

        rank_asserts = []
        for tensor, innermost, _, sym_sizes in dim_sizes:
            rank = len(sym_sizes)
            if innermost:
                if rank in (0, 1):
                    continue
                a = assert_rank_at_least(tensor, rank, data=data, summarize=summarize, message=message)
            elif rank in (0, 1):
                a = assert_rank_in(tensor, [0, 1], data=data, summarize=summarize, message=message)
            else:
                a = assert_rank(tensor, rank, data=data, summarize=summarize, message=message)
            rank_asserts.append(a)

        size_asserts = []
        specified = {}
        for tensor, innermost, actual_sizes, sym_sizes in dim_sizes:
            for i, sym in enumerate(sym_sizes):
                if sym is None or (isinstance(sym, str) and sym == "."):
                    continue
                dim = i - len(sym_sizes) if innermost else i
                if _has_known_value(sym) or sym in specified:
                    if _has_known_value(sym):
                        want, how = int(sym), "Specified explicitly"
                    else:
                        want, by, at = specified[sym]
                        how = f"Specified by tensor {by.name} dimension {at}"
                    with control_dependencies(rank_asserts):
                        actual = actual_sizes[dim]
                    if _has_known_value(actual) and _has_known_value(want):
                        if int(actual) != int(want):
                            raise ValueError(f"{prefix}{how}.  Tensor {tensor.name} dimension {dim} must have size "
                                             f"{int(want)}.  Received size {int(actual)}, shape {tensor.shape}")
                        continue
                    cond = math_ops.equal(convert_to_tensor(actual, dtype=dtypes.int32),
                                          convert_to_tensor(want, dtype=dtypes.int32))
                    d = data if data is not None else [prefix, how, f"Tensor {tensor.name} dimension", dim,
                                                       "must have size", want, "Received shape: ",
                                                       array_ops.shape(tensor)]
                    size_asserts.append(Assert(cond, d, summarize=summarize))
                else:
                    with control_dependencies(rank_asserts):
                        size = actual_sizes[dim]
                    specified[sym] = (size, tensor, dim)
    with control_dependencies(rank_asserts):
        return group(*size_asserts)


def assert_same_float_dtype(tensors=None, dtype=None):
    """The common floating-point dtype of `tensors` (and `dtype`), float32 when neither says
    (tf.compat.v1.assert_same_float_dtype); ValueError on a mismatch or a non-float dtype."""
    if tensors:
        first = None
        for t in tensors:
            if t is None:
                continue
            if dtype is None:
                dtype, first = t.dtype, t
            elif t.dtype is not dtype:
                where = f" as {first.name}" if first is not None else ""
                raise ValueError(f"{t.name}, type={t.dtype}, must be of the same type ({dtype}){where}.")
    if dtype is None:
        return dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def assert_proper_iterable(values):
    """TypeError unless `values` is an iterable other than a tensor, array or string
    (tf.compat.v1.assert_proper_iterable)."""
    if isinstance(values, (Tensor, np.ndarray, str, bytes)):
        raise TypeError(f'Expected argument "values" to be a "proper" iterable.  Found: {type(values)}')
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


def is_numeric_tensor(tensor) -> bool:
    """Whether `tensor` is a Tensor of a numeric dtype (tf.compat.v1.is_numeric_tensor)."""
    return isinstance(tensor, Tensor) and tensor.dtype.is_numeric and not tensor.dtype.is_bool


def _monotonic(x, compare, name, default):
    with name_scope(name, default, [x]):
        x = array_ops.reshape(convert_to_tensor(x), [-1])
        if not is_numeric_tensor(x):
            raise TypeError(f"Expected x to be numeric, instead found: {x}")
        # x[1:] vs x[:-1]: both empty when x has fewer than two elements, and all([]) is True.
        return math_ops.reduce_all(compare(x[1:], x[:-1]))


def is_non_decreasing(x, name=None):
    """True when x, flattened, never decreases (tf.math.is_non_decreasing); True for < 2 elements."""
    return _monotonic(x, math_ops.greater_equal, name, "is_non_decreasing")


def is_strictly_increasing(x, name=None):
    """True when x, flattened, strictly increases (tf.math.is_strictly_increasing); True for < 2
    elements."""
    return _monotonic(x, math_ops.greater, name, "is_strictly_increasing")
