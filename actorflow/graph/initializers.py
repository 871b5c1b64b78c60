"""Variable initializers (tf.compat.v1 initializers: tf.zeros_initializer, tf.glorot_uniform_initializer, ...).

An initializer is called as ``init(shape, dtype=None, partition_info=None)`` and returns a Tensor
holding the initial value. `get_variable` calls it once per variable, or once per shard of a
partitioned variable with `partition_info` describing the shard's place in the full variable
(scaling initializers compute their fans from the full shape, as TF does).

Scalar fills use the Fill op rather than a Const, so a large variable does not put its whole
initial value into the graph.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.tensor_shape import as_shape

# The names TF 1.x has at top level (tf.zeros_initializer, ...). Also public here, for an
# `initializers` namespace: Initializer, PartitionInfo, identity_initializer, he_normal, he_uniform, lecun_normal, lecun_uniform.
__all__ = ["zeros_initializer", "ones_initializer", "constant_initializer", "random_normal_initializer",
           "truncated_normal_initializer", "random_uniform_initializer", "variance_scaling_initializer",
           "glorot_uniform_initializer", "glorot_normal_initializer", "orthogonal_initializer",
           "uniform_unit_scaling_initializer"]


class PartitionInfo:
    """Where one shard lies in a partitioned variable: the full shape and the shard's offset."""

    __slots__ = ("full_shape", "var_offset")

    def __init__(self, full_shape, var_offset):
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)

    def __repr__(self):
        return f"PartitionInfo(full_shape={self.full_shape}, var_offset={self.var_offset})"


def _shape_list(shape) -> list:
    s = as_shape(shape)
    if not s.is_fully_defined():
        raise ValueError(f"An initializer needs a fully defined shape, got {s}")
    return s.as_list()


def _float_dtype(dtype, who: str):
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"{who} expects a floating-point dtype, got {dtype.name}")
    return dtype


class Initializer:
    """Base class of initializers (tf.compat.v1.keras.initializers.Initializer)."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _fill(shape, value, dtype):
    from actorflow.graph.ops import array_ops
    from actorflow.graph.ops.constant import constant
    return array_ops.fill(shape, constant(value, dtype=dtype))


class zeros_initializer(Initializer):  # noqa: N801  (TF's name)
    """Initializes to zeros (tf.compat.v1.zeros_initializer)."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import array_ops
        return array_ops.zeros(_shape_list(shape), dtypes.as_dtype(dtype or self.dtype))

    def get_config(self):
        return {"dtype": self.dtype.name}


class ones_initializer(Initializer):  # noqa: N801
    """Initializes to ones (tf.compat.v1.ones_initializer)."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import array_ops
        return array_ops.ones(_shape_list(shape), dtypes.as_dtype(dtype or self.dtype))

    def get_config(self):
        return {"dtype": self.dtype.name}


class constant_initializer(Initializer):  # noqa: N801
    """Initializes to `value`: a scalar (filled), or an array of exactly the variable's size,
    reshaped (tf.compat.v1.constant_initializer).

    Differs from TF: for a shard of a partitioned variable, a `value` of the full variable's shape
    is sliced to the shard (TF raises).
    """

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        if not np.isscalar(value) and not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"Invalid type for initial value: {type(value).__name__} (expected a Python "
                            "scalar, list or tuple of values, or a numpy.ndarray)")
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self.verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops.constant import constant
        shape = _shape_list(shape)
        dtype = dtypes.as_dtype(dtype or self.dtype)
        arr = np.asarray(self.value)
        if arr.ndim == 0:
            return _fill(shape, arr.item(), dtype)
        if partition_info is not None and arr.size == int(np.prod(partition_info.full_shape)) \
                and arr.size != int(np.prod(shape)):
            arr = arr.reshape(partition_info.full_shape)
            arr = arr[tuple(slice(o, o + n) for o, n in zip(partition_info.var_offset, shape))]
        if self.verify_shape and list(arr.shape) != shape:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, got {arr.shape}.")
        if arr.size != int(np.prod(shape)):
            raise ValueError(f"constant_initializer has {arr.size} values, but the variable of shape "
                             f"{tuple(shape)} has {int(np.prod(shape))} elements")
        return constant(arr.reshape(shape), dtype=dtype)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name, "verify_shape": self.verify_shape}


class random_normal_initializer(Initializer):  # noqa: N801
    """Samples N(mean, stddev**2) (tf.compat.v1.random_normal_initializer)."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float_dtype(dtype, "random_normal_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import random_ops
        dtype = _float_dtype(dtype or self.dtype, "random_normal_initializer")
        return random_ops.random_normal(_shape_list(shape), mean=self.mean, stddev=self.stddev, dtype=dtype,
                                        seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype.name}


class truncated_normal_initializer(Initializer):  # noqa: N801
    """Samples N(mean, stddev**2), redrawing values more than two stddevs from the mean
    (tf.compat.v1.truncated_normal_initializer)."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float_dtype(dtype, "truncated_normal_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import random_ops
        dtype = _float_dtype(dtype or self.dtype, "truncated_normal_initializer")
        return random_ops.truncated_normal(_shape_list(shape), mean=self.mean, stddev=self.stddev, dtype=dtype,
                                           seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype.name}


class random_uniform_initializer(Initializer):  # noqa: N801
    """Samples U[minval, maxval); maxval defaults to 1 for floats (tf.compat.v1.random_uniform_initializer)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import random_ops
        dtype = dtypes.as_dtype(dtype or self.dtype)
        return random_ops.random_uniform(_shape_list(shape), minval=self.minval, maxval=self.maxval, dtype=dtype,
                                         seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed, "dtype": self.dtype.name}


def _compute_fans(shape) -> tuple[float, float]:
    """(fan_in, fan_out) of a weight shape: dense [in, out], conv [..., in, out] (TF's _compute_fans)."""
    if len(shape) < 1:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    return float(shape[-2] * receptive), float(shape[-1] * receptive)


class variance_scaling_initializer(Initializer):  # noqa: N801
    """Samples with variance scale/n, n the fan-in, fan-out or their mean
    (tf.compat.v1.variance_scaling_initializer).

    distribution: "truncated_normal" (or its TF-1.x alias "normal"), "untruncated_normal" or
    "uniform". The truncated normal's stddev is corrected for the truncation, as in TF.
    """

    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("normal", "truncated_normal", "untruncated_normal", "uniform")

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None, dtype=dtypes.float32):
        if scale <= 0.0:
            raise ValueError(f"`scale` must be a positive float, got {scale}")
        if mode not in self._MODES:
            raise ValueError(f"Invalid `mode` argument: {mode!r}; expected one of {self._MODES}")
        distribution = distribution.lower()
        if distribution not in self._DISTRIBUTIONS:
            raise ValueError(f"Invalid `distribution` argument: {distribution!r}; expected one of "
                             f"{self._DISTRIBUTIONS}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _float_dtype(dtype, "variance_scaling_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import random_ops
        dtype = _float_dtype(dtype or self.dtype, "variance_scaling_initializer")
        shape = _shape_list(shape)
        fan_in, fan_out = _compute_fans(partition_info.full_shape if partition_info is not None else shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution in ("normal", "truncated_normal"):
            # Stddev of a unit normal truncated to [-2, 2]: rescale so the samples have variance `scale`.
            stddev = math.sqrt(scale) / 0.87962566103423978
            return random_ops.truncated_normal(shape, mean=0.0, stddev=stddev, dtype=dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, mean=0.0, stddev=math.sqrt(scale), dtype=dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, minval=-limit, maxval=limit, dtype=dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed,
                "dtype": self.dtype.name}


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """U[-limit, limit] with limit = sqrt(6 / (fan_in + fan_out)) (tf.compat.v1.glorot_uniform_initializer);
    the default initializer of `get_variable` for floating-point variables."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out)) (tf.compat.v1.glorot_normal_initializer)."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class orthogonal_initializer(Initializer):  # noqa: N801
    """A (semi-)orthogonal matrix times `gain`, from the QR factorization of a normal sample, the
    leading dimensions flattened into rows (tf.compat.v1.orthogonal_initializer)."""

    def __init__(self, gain=1.0, seed=None, dtype=dtypes.float32):
        self.gain, self.seed = gain, seed
        self.dtype = _float_dtype(dtype, "orthogonal_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import array_ops, math_ops, random_ops
        from actorflow.graph.ops.array_ops.matrix import matrix_diag_part
        from actorflow.graph.ops.misc_ops import qr
        dtype = _float_dtype(dtype or self.dtype, "orthogonal_initializer")
        shape = _shape_list(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        rows = 1
        for d in shape[:-1]:
            rows *= d
        cols = shape[-1]
        flat = (cols, rows) if rows < cols else (rows, cols)
        a = random_ops.random_normal(list(flat), dtype=dtype, seed=self.seed)
        q, r = qr(a, full_matrices=False)
        q = q * math_ops.sign(matrix_diag_part(r))
        if rows < cols:
            q = array_ops.transpose(q)
        return math_ops.multiply(array_ops.reshape(q, shape), math_ops.cast(self.gain, dtype))

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class uniform_unit_scaling_initializer(Initializer):  # noqa: N801
    """U[-m, m] with m = factor * sqrt(3 / input_size), input_size the product of all dimensions
    but the last (tf.compat.v1.uniform_unit_scaling_initializer)."""

    def __init__(self, factor=1.0, seed=None, dtype=dtypes.float32):
        self.factor, self.seed = factor, seed
        self.dtype = _float_dtype(dtype, "uniform_unit_scaling_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        import math as _math

        from actorflow.graph.ops import random_ops
        dtype = _float_dtype(dtype or self.dtype, "uniform_unit_scaling_initializer")
        shape = _shape_list(shape)
        size = 1.0
        for d in shape[:-1]:
            size *= d
        m = _math.sqrt(3 / max(size, 1.0)) * self.factor
        return random_ops.random_uniform(shape, -m, m, dtype=dtype, seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


class identity_initializer(Initializer):  # noqa: N801
    """`gain` times the identity matrix; only for 2-D variables (tf.compat.v1.initializers.identity).
    Under a partitioner the full matrix is built and the shard's slice of it returned, as in TF."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = _float_dtype(dtype, "identity_initializer")

    def __call__(self, shape, dtype=None, partition_info=None):
        from actorflow.graph.ops import array_ops, math_ops
        from actorflow.graph.ops.array_ops.matrix import eye
        dtype = _float_dtype(dtype or self.dtype, "identity_initializer")
        full = _shape_list(shape if partition_info is None else partition_info.full_shape)
        if len(full) != 2:
            raise ValueError(f"identity_initializer: the tensor to initialize must be two-dimensional, "
                             f"got shape {full}")
        out = eye(full[0], full[1], dtype=dtype)
        if partition_info is not None:
            out = array_ops.slice(out, partition_info.var_offset, _shape_list(shape))
        return math_ops.multiply(out, math_ops.cast(self.gain, dtype))

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


def he_normal(seed=None):
    """Truncated normal with stddev sqrt(2 / fan_in) (tf.compat.v1.keras.initializers.he_normal)."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    """U[-limit, limit] with limit = sqrt(6 / fan_in) (tf.compat.v1.keras.initializers.he_uniform)."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    """Truncated normal with stddev sqrt(1 / fan_in) (tf.compat.v1.keras.initializers.lecun_normal)."""
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    """U[-limit, limit] with limit = sqrt(3 / fan_in) (tf.compat.v1.keras.initializers.lecun_uniform)."""
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)
