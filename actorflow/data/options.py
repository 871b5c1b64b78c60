"""tf.data.Options: settings a pipeline carries (`Dataset.with_options`, `Dataset.options()`).

The classes and their typed properties are TensorFlow's (setting an unknown property is an
AttributeError, a value of the wrong type a TypeError); options flow downstream through the
transformations, and a later `with_options` overrides what it sets, as in TF. actorflow's pipelines
run the same way whatever they say: maps and batches are deterministic and the runtime's pool does
the parallel work, so these are recorded for code that reads them back, not acted on.
"""
from __future__ import annotations

import enum

__all__ = ["AutoShardPolicy", "AutotuneAlgorithm", "ExternalStatePolicy", "SHARD_HINT", "AutotuneOptions", "DistributeOptions", "OptimizationOptions", "Options",
           "ThreadingOptions", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

INFINITE_CARDINALITY = -1       # tf.data.INFINITE_CARDINALITY
UNKNOWN_CARDINALITY = -2        # tf.data.UNKNOWN_CARDINALITY


class AutoShardPolicy(enum.IntEnum):
    """tf.data.experimental.AutoShardPolicy."""
    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


SHARD_HINT = -1                 # tf.data.experimental.SHARD_HINT: a shard count the distribution fills in


class AutotuneAlgorithm(enum.IntEnum):
    """tf.data.experimental.AutotuneAlgorithm (AutotuneOptions.autotune_algorithm)."""
    DEFAULT = 0
    HILL_CLIMB = 1
    GRADIENT_DESCENT = 2
    MAX_PARALLELISM = 3
    STAGE_BASED = 4


class ExternalStatePolicy(enum.IntEnum):
    """tf.data.experimental.ExternalStatePolicy (Options.experimental_external_state_policy)."""
    WARN = 0
    IGNORE = 1
    FAIL = 2


class _OptionsBase:
    """Typed properties: _PROPS maps a name to (type or tuple of types, default or a factory)."""

    _PROPS: dict = {}

    def __init__(self):
        values = {}
        for name, (_, default) in self._PROPS.items():
            values[name] = default() if callable(default) and isinstance(default, type) else default
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name):
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name not in self._PROPS:
            raise AttributeError(f"Cannot set the property {name} on {type(self).__name__}.")
        want = self._PROPS[name][0]
        if value is not None and not (isinstance(value, want) and not (want is int and isinstance(value, bool))):
            raise TypeError(f'Property "{name}" must be of type {want}, got: {value!r} (type: {type(value)})')
        self._values[name] = value

    def __eq__(self, other):
        return type(self) is type(other) and self._values == other._values

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        set_ = {k: v for k, v in self._values.items() if v is not None and not isinstance(v, _OptionsBase)}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in set_.items())})"

    def _merged(self, other) -> "_OptionsBase":
        """A copy of self with every property `other` sets (not None) taken from it, recursively."""
        out = type(self)()
        for name in self._PROPS:
            mine, theirs = self._values[name], other._values[name]
            if isinstance(mine, _OptionsBase):
                out._values[name] = mine._merged(theirs)
            else:
                out._values[name] = theirs if theirs is not None else mine
        return out


class ThreadingOptions(_OptionsBase):
    """tf.data.ThreadingOptions: max_intra_op_parallelism, private_threadpool_size (ints)."""
    _PROPS = {"max_intra_op_parallelism": (int, None), "private_threadpool_size": (int, None)}


class AutotuneOptions(_OptionsBase):
    """tf.data.experimental.AutotuneOptions."""
    _PROPS = {"autotune_algorithm": (object, None), "cpu_budget": (int, None), "enabled": (bool, None),
              "initial_parallelism": (int, None), "min_parallelism": (int, None), "ram_budget": (int, None)}


class DistributeOptions(_OptionsBase):
    """tf.data.experimental.DistributeOptions."""
    _PROPS = {"auto_shard_policy": (AutoShardPolicy, AutoShardPolicy.AUTO), "num_devices": (int, None)}


class OptimizationOptions(_OptionsBase):
    """tf.data.experimental.OptimizationOptions (TF's graph rewrites of a pipeline; all bools)."""
    _PROPS = {n: (bool, None) for n in (
        "apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
        "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization", "noop_elimination",
        "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion")}


class Options(_OptionsBase):
    """tf.data.Options (see the module docstring). `experimental_deterministic` and
    `experimental_threading` are TF's old names of `deterministic` and `threading`."""
    _PROPS = {
        "autotune": (AutotuneOptions, AutotuneOptions),
        "dataset_name": (str, None),
        "deterministic": (bool, None),
        "experimental_distribute": (DistributeOptions, DistributeOptions),
        "experimental_external_state_policy": (object, None),
        "experimental_optimization": (OptimizationOptions, OptimizationOptions),
        "experimental_slack": (bool, None),
        "experimental_symbolic_checkpoint": (bool, None),
        "experimental_warm_start": (bool, None),
        "framework_type": (list, None),
        "threading": (ThreadingOptions, ThreadingOptions),
    }
    _ALIASES = {"experimental_deterministic": "deterministic", "experimental_threading": "threading"}

    def __getattr__(self, name):
        return super().__getattr__(self._ALIASES.get(name, name))

    def __setattr__(self, name, value):
        super().__setattr__(self._ALIASES.get(name, name), value)

    def merge(self, options) -> "Options":
        """These options with every property that `options` sets taken from it (tf.data.Options.merge)."""
        if not isinstance(options, Options):
            raise TypeError(f"merge expects tf.data.Options, got {type(options).__name__}")
        return self._merged(options)
