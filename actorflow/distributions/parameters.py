"""Checking and converting distribution parameters (TF's distributions/util.py, the part the
distributions use): logits and probabilities, integer-valued arguments, the validate_args
assertions, seeds for a second random op, and log multinomial coefficients.

Every assertion message starts with the distribution's name, so that an InvalidArgumentError from a
`validate_args=True` distribution says which one (and the failing op's name is under its scope)."""
from __future__ import annotations

import hashlib

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, check_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import identity


def with_dependencies(dependencies, x):
    """`x`, computed after `dependencies` (TF's control_flow_ops.with_dependencies)."""
    if not dependencies:
        return x
    with control_dependencies(dependencies):
        return identity(x)


def owner(name) -> str:
    """The distribution named by scope `name` ("Normal/" or "vae/Normal_1/"), for error messages."""
    return (name or "distribution").rstrip("/")


def same_float_dtype(tensors, owner_name):
    """The common floating dtype of `tensors`; a TypeError naming the distribution when they differ."""
    dts = {t.dtype.base_dtype for t in tensors}
    if len(dts) != 1 or not next(iter(dts)).is_floating:
        raise TypeError(f"{owner_name}: parameters must have the same floating dtype, got "
                        + ", ".join(f"{t.name}: {t.dtype.name}" for t in tensors))
    return dts.pop()


def largest_integer(dt) -> int:
    """The largest integer `dt` represents exactly."""
    if dt.is_floating:
        return int(2 ** (np.finfo(dt.as_numpy_dtype).nmant + 1))
    if dt.is_integer:
        return int(np.iinfo(dt.as_numpy_dtype).max)
    if dt.base_dtype == dtypes.bool_:
        return 1
    raise TypeError(f"Unrecognized dtype: {dt.name}")


def assert_integer_form(x, message):
    """Asserts that floating `x` has no fractional part."""
    return check_ops.assert_equal(x, math_ops.cast(math_ops.round(x), x.dtype), message=message)


def embed_check_nonnegative_integer_form(x, owner_name, what="x"):
    """`x` after assertions that it is non-negative and integer-valued."""
    x = convert_to_tensor(x, name=what)
    checks = [check_ops.assert_non_negative(x, message=f"{owner_name}: '{what}' must be non-negative")]
    if not x.dtype.is_integer:
        checks.append(assert_integer_form(x, f"{owner_name}: '{what}' cannot contain fractional components"))
    return with_dependencies(checks, x)


def embed_check_integer_casting_closed(x, target_dtype, owner_name):
    """`x` after assertions that it is a non-negative value of `target_dtype` (an integer, or for
    bool, 0 or 1), as a sample of a discrete distribution must be."""
    x = convert_to_tensor(x, name="x")
    checks = [check_ops.assert_non_negative(x, message=f"{owner_name}: Elements must be non-negative")]
    if x.dtype.is_floating:
        checks.append(assert_integer_form(x, f"{owner_name}: Elements must be {target_dtype.name}-equivalent"))
        if target_dtype == dtypes.bool_:
            checks.append(check_ops.assert_less_equal(x, math_ops.cast(1, x.dtype),
                                                      message=f"{owner_name}: Elements cannot exceed 1"))
    elif largest_integer(x.dtype) > largest_integer(target_dtype):
        top = largest_integer(target_dtype)
        checks.append(check_ops.assert_less_equal(x, math_ops.cast(top, x.dtype),
                                                  message=f"{owner_name}: Elements cannot exceed {top}"))
    return with_dependencies(checks, x)


def embed_check_categorical_event_shape(param, owner_name):
    """`param` (logits, probabilities or concentrations over the last axis) after checks that it has
    at least 2 classes, statically where its shape says so."""
    x = convert_to_tensor(param, name="categorical_param")
    max_event_size = largest_integer(x.dtype)
    if x.shape.ndims == 0:
        raise ValueError(f"{owner_name}: a categorical-distribution parameter must have at least 1 dimension.")
    if x.shape.ndims is not None and x.shape.dims[-1] is not None:
        event_size = int(x.shape.dims[-1])
        if event_size < 2:
            raise ValueError(f"{owner_name}: a categorical-distribution parameter must have at least 2 events.")
        if event_size > max_event_size:
            raise ValueError(f"{owner_name}: number of classes {event_size} exceeds what {x.dtype.name} can "
                             f"count ({max_event_size}).")
        return x
    return with_dependencies([
        check_ops.assert_rank_at_least(
            x, 1, message=f"{owner_name}: A categorical-distribution parameter must have at least 1 dimension"),
        check_ops.assert_greater_equal(
            array_ops.shape(x)[-1], 2,
            message=f"{owner_name}: A categorical-distribution parameter must have at least 2 events")], x)


def get_logits_and_probs(logits=None, probs=None, multidimensional=False, validate_args=False, owner_name="",
                         dtype=None):
    """(logits, probs) from either one: sigmoid/log-odds for a Bernoulli, softmax/log for a categorical
    (`multidimensional`). With validate_args, probs must lie in [0, 1] (and sum to 1 over the last axis)."""
    if (probs is None) == (logits is None):
        raise ValueError(f"{owner_name}: Must pass probs or logits, but not both.")
    if probs is None:
        logits = convert_to_tensor(logits, name="logits", dtype=dtype)
        if not logits.dtype.is_floating:
            raise TypeError(f"{owner_name}: logits must have a floating type, got {logits.dtype.name}.")
        if multidimensional:
            if validate_args:
                logits = embed_check_categorical_event_shape(logits, owner_name)
            return logits, nn_ops.softmax(logits, name="probs")
        return logits, math_ops.sigmoid(logits, name="probs")
    probs = convert_to_tensor(probs, name="probs", dtype=dtype)
    if not probs.dtype.is_floating:
        raise TypeError(f"{owner_name}: probs must have a floating type, got {probs.dtype.name}.")
    if validate_args:
        with name_scope("validate_probs"):
            one = math_ops.cast(1.0, probs.dtype)
            checks = [check_ops.assert_non_negative(probs, message=f"{owner_name}: probs must be non-negative")]
            if multidimensional:
                probs = embed_check_categorical_event_shape(probs, owner_name)
                checks.append(check_ops.assert_near(math_ops.reduce_sum(probs, -1), one,
                                                    message=f"{owner_name}: probs does not sum to 1"))
            else:
                checks.append(check_ops.assert_less_equal(
                    probs, one, message=f"{owner_name}: probs has components greater than 1"))
            probs = with_dependencies(checks, probs)
    with name_scope("logits"):
        if multidimensional:
            return math_ops.log(probs), probs
        return math_ops.log(probs) - math_ops.log1p(-1.0 * probs), probs


def gen_new_seed(seed, salt):
    """The seed of a distribution's second random op, derived from the first's as TF derives it."""
    if seed is None:
        return None
    return int(hashlib.md5((str(seed) + salt).encode("utf-8")).hexdigest()[:8], 16) & 0x7FFFFFFF


def log_combinations(n, counts):
    """log(n! / prod(counts!)), the log multinomial coefficient, summing over the last axis."""
    n = convert_to_tensor(n, name="n")
    counts = convert_to_tensor(counts, name="counts")
    return math_ops.lgamma(n + 1) - math_ops.reduce_sum(math_ops.lgamma(counts + 1), axis=[-1])


def where_defined(defined, value):
    """`value` where `defined` holds, NaN elsewhere (an undefined statistic with allow_nan_stats)."""
    return math_ops.where_v2(defined, value, np.array(np.nan, dtype=value.dtype.as_numpy_dtype))


def _is_literal(v) -> bool:
    return isinstance(v, (bool, int, float, list, tuple, np.ndarray, np.generic))


def convert_params(params: dict, owner_name: str, dtype=None) -> dict:
    """The float parameters as tensors of one dtype: `dtype` if given, else the dtype of those that
    are tensors or variables (float32 when none is, float64 for a float64 numpy array); Python numbers
    and arrays take that dtype. A TypeError naming the distribution when tensors disagree or are not
    floating (TF raises there too)."""
    params = {k: v if _is_literal(v) else convert_to_tensor(v, name=k) for k, v in params.items()}
    given = [v for v in params.values() if not _is_literal(v)]
    if dtype is None and given:
        dtype = same_float_dtype(given, owner_name)
    elif dtype is None:
        # numpy float64 arrays keep their precision; Python numbers and lists are float32, as in TF
        dtype = dtypes.float64 if any(isinstance(v, (np.ndarray, np.generic)) and v.dtype == np.float64
                                      for v in params.values()) else dtypes.float32
    out = {}
    for k, v in params.items():
        if not _is_literal(v) and v.dtype.base_dtype != dtype:
            raise TypeError(f"{owner_name}: {k} has dtype {v.dtype.name}, expected {dtype.name}")
        out[k] = convert_to_tensor(v, dtype=dtype, name=k)
    return out
