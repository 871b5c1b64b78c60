"""Random ops: RandomStandardNormal, RandomUniform, TruncatedNormal, RandomUniformInt, and seeds.

Every random op is `stateful`: two ops with equal inputs and attributes draw different numbers, so
graph passes must never merge (CSE) or fold them. Each op carries two attributes, `seed` and
`seed2`, from which its kernel builds its own Philox stream. Both zero means "non-deterministic";
any other pair makes the op's sequence of draws reproducible across sessions and processes.

The seeds follow TF 2's `random_seed.get_seed` (tf.compat.v1) exactly, and the kernels of
RandomStandardNormal, RandomUniform, TruncatedNormal and RandomUniformInt are TF's Philox streams
bit for bit (kernels/cpu/philox.py): a program that seeds TF and draws in the same order gets TF's
numbers.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.infer import constant_shape, constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["random_normal", "random_uniform", "truncated_normal", "set_random_seed", "get_seed", "random_crop"]

# TF 1.x's constants: the graph seed used when only an op seed is given, and the seed modulus.
DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


# -- op definitions ----------------------------------------------------------------------------
def _output_shape(shape: Tensor) -> TensorShape:
    if not shape.dtype.is_integer:
        raise InferenceError(f"shape must be an int32 or int64 tensor, got {shape.dtype.name}")
    if shape.shape.ndims is not None and shape.shape.ndims != 1:
        raise InferenceError(f"shape must be a 1-D tensor, got a tensor of shape {shape.shape}")
    out = constant_shape(shape)
    if out.dims is not None and any(d is not None and d < 0 for d in out.dims):
        raise InferenceError(f"shape {out} has negative dimensions")
    return out


def _infer_random_float(inputs, attrs):
    dt = dtypes.as_dtype(attrs["dtype"])
    if not dt.is_floating:
        raise InferenceError(f"dtype must be a floating-point type, got {dt.name}")
    return [(dt, _output_shape(inputs[0]))]


def _infer_random_int(inputs, attrs):
    shape, minval, maxval = inputs
    if not minval.dtype.is_integer or minval.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"minval must be int32 or int64, got {minval.dtype.name}")
    if maxval.dtype is not minval.dtype:
        raise InferenceError(f"minval ({minval.dtype.name}) and maxval ({maxval.dtype.name}) must have the same dtype")
    for t, what in ((minval, "minval"), (maxval, "maxval")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")
    lo, hi = _static(minval), _static(maxval)
    if lo is not None and hi is not None and not lo < hi:
        raise InferenceError(f"Need minval < maxval: {lo} >= {hi}")
    return [(minval.dtype, _output_shape(shape))]


def _static(t):
    v = constant_value(t)
    return None if v is None else int(np.reshape(v, ()))


RandomStandardNormal = define_op("RandomStandardNormal", _infer_random_float, stateful=True)
RandomUniform = define_op("RandomUniform", _infer_random_float, stateful=True)
TruncatedNormal = define_op("TruncatedNormal", _infer_random_float, stateful=True)
RandomUniformInt = define_op("RandomUniformInt", _infer_random_int, stateful=True)


# Random draws are not differentiable (TF: ops.NotDifferentiable); a gradient can still reach them
# when their shape is computed from a differentiated tensor, and must stop there quietly.
@RandomStandardNormal.gradient
@RandomUniform.gradient
@TruncatedNormal.gradient
def _random_float_grad(op, grad):
    return [None]


@RandomUniformInt.gradient
def _random_int_grad(op, grad):
    return [None, None, None]


# -- seeds -------------------------------------------------------------------------------------
def set_random_seed(seed):
    """Sets the graph-level random seed of the default graph (tf.compat.v1.set_random_seed).

    With a graph seed set, every random op created afterwards gets a deterministic op seed, so a
    program re-run from scratch draws the same numbers; ops created in the same order on two graphs
    with the same graph seed draw the same numbers.
    """
    get_default_graph().seed = None if seed is None else int(seed)


def _truncate_seed(seed: int) -> int:
    return int(seed) % _MAXINT32


def get_seed(op_seed):
    """The `(seed, seed2)` pair a random op should use (tf.compat.v1.get_seed), with TF 1.x's rules.

    - graph seed set, op seed None: the op seed counts the graph's earlier such calls (0, 1, 2...,
      as TF 2's `_graph_to_seed_dict`), so distinct ops get distinct, reproducible streams, and a
      program that draws in the same order as under TF gets TF's seeds (and, from the Philox
      kernels, TF's numbers);
    - graph seed set, op seed set: both are used;
    - only the op seed set: the graph seed is `DEFAULT_GRAPH_SEED`;
    - neither: `(None, None)`, which random ops record as 0/0, meaning non-deterministic.
    `(0, 0)` would be read as "non-deterministic" by the kernels, so it becomes `(0, 2**31 - 1)`.
    """
    g = get_default_graph()
    global_seed = g.seed
    if global_seed is not None:
        if op_seed is None:
            op_seed = g._seeds_drawn
            g._seeds_drawn += 1
        seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
    else:
        seeds = None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds


def _seed_attrs(seed) -> dict:
    s1, s2 = get_seed(seed)
    return {"seed": s1 or 0, "seed2": s2 or 0}


def _shape_tensor(shape) -> Tensor:
    """A shape argument as an int32/int64 1-D tensor (TF's tensor_util.shape_tensor)."""
    if isinstance(shape, Tensor):
        if not shape.dtype.is_integer:
            raise TypeError(f"shape must be an integer tensor, got {shape.dtype.name} tensor '{shape.name}'")
        return shape
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"Cannot use the partially known shape {shape} as the shape of a random tensor")
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer)):
        shape = [int(shape)]
    if isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape):
        # Python sizes adopt the dtype of the tensor sizes so that the pieces stack.
        dt = next(d.dtype for d in shape if isinstance(d, Tensor))
        return array_ops.stack([d if isinstance(d, Tensor) else convert_to_tensor(d, dtype=dt) for d in shape])
    arr = np.asarray(shape)
    if arr.size == 0:
        arr = arr.astype(np.int32)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(f"shape must be a list of ints or a 1-D integer tensor, got {shape!r}")
    if arr.size and arr.max() >= 2**31:
        return convert_to_tensor(arr.astype(np.int64), name="shape")
    return convert_to_tensor(arr.astype(np.int32), name="shape")


# -- public API ----------------------------------------------------------------------------------
def random_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """Normally distributed values (tf.compat.v1.random_normal): `mean + stddev * N(0, 1)`."""
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name, "random_normal", [shape, mean, stddev]) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = RandomStandardNormal(shape_t, dtype=dtype, name="RandomStandardNormal", **_seed_attrs(seed))
        return math_ops.add(math_ops.multiply(rnd, stddev_t, name="mul"), mean_t, name=scope)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """Normal values re-drawn until within two standard deviations (tf.compat.v1.truncated_normal)."""
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name, "truncated_normal", [shape, mean, stddev]) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = TruncatedNormal(shape_t, dtype=dtype, name="TruncatedNormal", **_seed_attrs(seed))
        return math_ops.add(math_ops.multiply(rnd, stddev_t, name="mul"), mean_t, name=scope)


def random_uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None):
    """Uniform values in `[minval, maxval)` (tf.compat.v1.random_uniform).

    Floating dtypes default to `maxval=1`; integer dtypes (int32, int64) need `maxval` and draw
    exactly uniform integers with RandomUniformInt.
    """
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer:
        if dtype not in (dtypes.int32, dtypes.int64):
            raise ValueError(f"Invalid dtype {dtype.name} for random_uniform: use a float type, int32 or int64")
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {dtype!r}")
    elif not dtype.is_floating:
        raise ValueError(f"Invalid dtype {dtype.name} for random_uniform")
    elif maxval is None:
        maxval = 1
    with name_scope(name, "random_uniform", [shape, minval, maxval]) as scope:
        shape_t = _shape_tensor(shape)
        lo = convert_to_tensor(minval, dtype=dtype, name="min")
        hi = convert_to_tensor(maxval, dtype=dtype, name="max")
        if dtype.is_integer:
            return RandomUniformInt(shape_t, lo, hi, name=scope, **_seed_attrs(seed))
        rnd = RandomUniform(shape_t, dtype=dtype, name="RandomUniform", **_seed_attrs(seed))
        span = math_ops.subtract(hi, lo, name="sub")
        return math_ops.add(math_ops.multiply(rnd, span, name="mul"), lo, name=scope)


def random_crop(value, size, seed=None, name=None):
    """A slice of `size` from `value` at an offset drawn uniformly from the offsets that fit, every
    dimension on its own (tf.compat.v1.random_crop, also tf.image.random_crop). A `size` larger than
    `value` anywhere fails the step with "Need value.shape >= size"."""
    from actorflow.graph.graph import control_dependencies
    from actorflow.graph.ops.check_ops import Assert
    from actorflow.graph.ops.constant import identity

    with name_scope(name, "random_crop", [value, size]) as scope:
        value = convert_to_tensor(value, name="value")
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        vdims, sv = value.shape.dims, constant_value(size)
        if vdims is not None and sv is not None:
            sv = np.reshape(sv, -1)
            if len(sv) != len(vdims):
                raise ValueError(f"random_crop: size {sv.tolist()} does not have the rank of value {value.shape}")
            if any(d is not None and int(s) > d for d, s in zip(vdims, sv)):
                raise ValueError(f"random_crop: Need value.shape >= size, got {value.shape} and {sv.tolist()}")
        shape = array_ops.shape(value)
        check = Assert(math_ops.reduce_all(math_ops.greater_equal(shape, size)),
                       ["random_crop: Need value.shape >= size, got ", shape, size], summarize=1000)
        with control_dependencies([check]):
            shape = identity(shape)
        limit = shape - size + 1
        offset = math_ops.floormod(random_uniform(array_ops.shape(shape), dtype=dtypes.int32,
                                                  maxval=dtypes.int32.max, seed=seed), limit)
        out = array_ops.slice(value, offset, size, name=scope)
        if sv is not None:
            out.set_shape([int(s) for s in np.reshape(sv, -1)])
        return out
