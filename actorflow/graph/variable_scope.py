"""Variable scopes and shared variables (tf.compat.v1.variable_scope, tf.compat.v1.get_variable).

A graph owns one variable store, mapping full variable names ("layer/kernel") to the Variables
(and PartitionedVariables) created through `get_variable`. A variable scope prefixes those names,
carries defaults (initializer, regularizer, dtype, partitioner, custom getter) and a reuse mode:

- reuse=False (the default): `get_variable` creates; an existing name is an error.
- reuse=True: `get_variable` returns the existing variable; a missing name is an error.
- reuse=AUTO_REUSE: returns it when it exists, creates it otherwise.

Reuse is inherited: inside a reusing scope every sub-scope reuses. Entering a variable scope also
opens a name scope (uniquified, so ops of a re-entered scope land in "scope_1/..."), as in TF 1.x.
The current scope is per graph and per thread, like name scopes.
"""
from __future__ import annotations

import enum
import inspect
import math
import os
import threading
import traceback

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, get_default_graph
from actorflow.graph.tensor_shape import TensorShape, as_shape
from actorflow.graph.variables import Variable, resolve_sync_aggregation

__all__ = ["variable_scope", "get_variable", "get_local_variable", "get_variable_scope", "VariableScope",
           "AUTO_REUSE", "PartitionedVariable", "fixed_size_partitioner", "variable_axis_size_partitioner",
           "min_max_variable_partitioner", "create_partitioned_variables"]

_STORE_KEY = "__variable_store"
# Frames inside actorflow are left out of "Originally defined at" tracebacks.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SCOPE_KEY = "__varscope"


class _ReuseMode(enum.Enum):
    """The reuse modes beyond True/False (tf.compat.v1.AUTO_REUSE is `_ReuseMode.AUTO_REUSE`)."""
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


# ---------------------------------------------------------------------------------------------
# Partitioned variables
# ---------------------------------------------------------------------------------------------

class SaveSliceInfo:
    """Where a shard lies in its full variable, for checkpoints (tf.Variable.SaveSliceInfo)."""

    __slots__ = ("full_name", "full_shape", "var_offset", "var_shape")

    def __init__(self, full_name, full_shape, var_offset, var_shape):
        self.full_name = full_name
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.var_shape = list(var_shape)

    @property
    def spec(self) -> str:
        """TF's slice spec string: the full shape, then "offset,length" per dimension."""
        return (" ".join(str(d) for d in self.full_shape) + " "
                + ":".join(f"{o},{n}" for o, n in zip(self.var_offset, self.var_shape)))

    def __repr__(self):
        return f"SaveSliceInfo({self.full_name!r}, {self.full_shape}, {self.var_offset}, {self.var_shape})"


class PartitionedVariable:
    """A variable split into shards along one axis (tf.compat.v1.PartitionedVariable).

    Iterating gives the shard Variables in order (`name/part_0`, `name/part_1`, ...), each a
    separate VariableV2 that a device function may place on its own parameter server; pass the
    shards (or this object) to `af.nn.embedding_lookup` to gather rows without concatenating.
    `as_tensor()` (also used when the object is converted to a tensor) concatenates them.
    """

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not isinstance(variable_list, (list, tuple)) or not variable_list:
            raise ValueError(f"variable_list of PartitionedVariable '{name}' must be a non-empty list, "
                             f"got {variable_list!r}")
        n = 1
        for p in partitions:
            n *= p
        if n != len(variable_list):
            raise ValueError(f"Partitions {list(partitions)} of '{name}' give {n} shards, but "
                             f"{len(variable_list)} variables were given")
        for v in variable_list:
            if getattr(v, "_save_slice_info", None) is None:
                raise ValueError(f"Shard {v.name} of PartitionedVariable '{name}' has no save slice info")
        self._name = name
        self._shape = as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._variable_list = sorted(variable_list, key=lambda v: v._save_slice_info.var_offset)
        self._partitions = list(partitions)
        self._as_tensor_cache = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        if len(self._partition_axes()) > 1:
            raise ValueError(f"Cannot get the length of PartitionedVariable '{self._name}', partitioned "
                             f"along more than one axis: {self._partitions}")
        return len(self._variable_list)

    def __getitem__(self, i):
        return self._variable_list[i]

    def _partition_axes(self):
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _get_variable_list(self):
        return list(self._variable_list)

    def _get_partitions(self):
        return list(self._partitions)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def graph(self):
        return self._variable_list[0].graph

    def _concat(self):
        from actorflow.graph.ops import array_ops
        from actorflow.graph.ops.constant import identity
        g = self.graph
        if len(self._variable_list) == 1:
            with g.name_scope(None):
                return identity(self._variable_list[0], name=self._name)
        axis = self._partition_axes()[0]
        with g.name_scope(self._name + "/ConcatPartitions/"):
            concatenated = array_ops.concat([v.value() for v in self._variable_list], axis)
        with g.name_scope(None):
            return identity(concatenated, name=self._name)

    def as_tensor(self) -> Tensor:
        """The full value: the shards concatenated along the partition axis (a new op each call)."""
        with self.graph.control_dependencies(None):
            return self._concat()

    def _as_graph_element(self):
        # Conversions (fetches, operator arguments) share one concatenation instead of adding an
        # op per use, so repeated Session.run calls hit the same prepared plan.
        if self._as_tensor_cache is None:
            self._as_tensor_cache = self.as_tensor()
        return self._as_tensor_cache

    def _apply_assign_fn(self, assign_fn, value):
        from actorflow.graph.graph import convert_to_tensor
        from actorflow.graph.ops import array_ops
        from actorflow.graph.ops.constant import group
        axis = self._partition_axes()[0]
        value = convert_to_tensor(value, dtype=self._dtype) if not isinstance(value, Tensor) else value
        sizes = [v.shape[axis] for v in self._variable_list]
        parts = array_ops.split(value, sizes, axis=axis)
        return group(*[assign_fn(v, p) for v, p in zip(self._variable_list, parts)])

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Assigns each shard its slice of `value`; returns the grouped op (tf.PartitionedVariable.assign)."""
        return self._apply_assign_fn(lambda v, x: v.assign(x, use_locking=use_locking, read_value=False), value)

    def assign_add(self, value, use_locking=False, name=None, read_value=True):
        return self._apply_assign_fn(lambda v, x: v.assign_add(x, use_locking=use_locking, read_value=False), value)

    def assign_sub(self, value, use_locking=False, name=None, read_value=True):
        return self._apply_assign_fn(lambda v, x: v.assign_sub(x, use_locking=use_locking, read_value=False), value)

    def __repr__(self):
        return (f"<af.PartitionedVariable '{self._name}' shape={self._shape} dtype={self._dtype.name} "
                f"partitions={self._partitions}>")


def fixed_size_partitioner(num_shards, axis=0):
    """A partitioner splitting `axis` into `num_shards` shards (fewer if the axis is shorter)
    (tf.compat.v1.fixed_size_partitioner)."""
    if int(num_shards) < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")

    def _partitioner(shape, dtype=None, **unused):
        shape = as_shape(shape)
        if not 0 <= axis < shape.ndims:
            raise ValueError(f"axis {axis} is out of range for a variable of shape {shape}")
        partitions = [1] * shape.ndims
        partitions[axis] = min(int(num_shards), shape[axis])
        return partitions
    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16, max_shards=None):
    """A partitioner keeping each shard under `max_shard_bytes` along `axis`
    (tf.compat.v1.variable_axis_size_partitioner)."""
    if max_shard_bytes < 1:
        raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")
    if max_shards is not None and max_shards < 1:
        raise ValueError(f"max_shards must be positive, got {max_shards}")

    def _partitioner(shape, dtype, **unused):
        shape = as_shape(shape)
        dtype = dtypes.as_dtype(dtype)
        slice_bytes = dtype.size
        for i, d in enumerate(shape.dims):
            if i != axis:
                slice_bytes *= d
        slices_per_shard = max(1, max_shard_bytes // max(slice_bytes, 1))
        shards = -(-shape[axis] // slices_per_shard)
        if max_shards is not None:
            shards = min(shards, max_shards)
        partitions = [1] * shape.ndims
        partitions[axis] = max(1, min(shards, shape[axis]))
        return partitions
    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10, bytes_per_string_element=16):
    """A partitioner giving each shard at least `min_slice_size` bytes, in at most `max_partitions`
    shards along `axis` (tf.compat.v1.min_max_variable_partitioner): ceil(total bytes /
    min_slice_size), capped by the axis length and `max_partitions`, at least 1."""
    def _partitioner(shape, dtype, **unused):
        shape = as_shape(shape)
        if axis >= shape.ndims:
            raise ValueError(f"Cannot partition variable along axis {axis} when shape is only {shape}")
        dtype = dtypes.as_dtype(dtype)
        per_element = bytes_per_string_element if dtype.is_string else dtype.size
        partitions = shape.num_elements() * per_element / min_slice_size
        out = [1] * shape.ndims
        out[axis] = max(1, min(shape[axis], max_partitions, int(math.ceil(partitions))))
        return out
    return _partitioner


def create_partitioned_variables(shape, slicing, initializer, dtype=dtypes.float32, trainable=True, collections=None,
                                 name=None, reuse=None):
    """Variables that together hold a variable of `shape` split as `slicing` says (one count per
    dimension, at most one above 1), named `<name>/part_<i>` (tf.compat.v1.create_partitioned_variables,
    TF's deprecated form of get_variable with a partitioner). `initializer` is a tensor or array of
    the full shape (sliced per part) or an initializer called per part. Returns the list of parts."""
    shape, slicing = list(shape), list(slicing)
    if len(shape) != len(slicing):
        raise ValueError(f"The 'shape' and 'slicing' of a partitioned Variable must have the length: shape: {shape}, "
                         f"slicing: {slicing}")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    with variable_scope(name, "PartitionedVariable", reuse=reuse) as scope:
        store = _get_store(get_default_graph())
        pv = store._get_partitioned_variable(
            scope.name, lambda **unused: slicing, as_shape(shape), dtypes.as_dtype(dtype), initializer, None,
            scope.reuse, trainable, collections, True, None)
    return list(pv)


def _call_partitioner(partitioner, shape: TensorShape, dtype, name):
    if not shape.is_fully_defined():
        raise ValueError(f"Shape of a new partitioned variable ({name}) must be fully defined, but instead "
                         f"was {shape}.")
    if shape.ndims < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape} (variable {name})")
    slicing = partitioner(shape=shape, dtype=dtype)
    if not isinstance(slicing, (list, tuple)):
        raise ValueError(f"Partitioner must return a sequence, but saw: {slicing!r} (variable {name})")
    slicing = [int(p) for p in slicing]
    if len(slicing) != shape.ndims:
        raise ValueError(f"Partitioner returned a partition list that does not match the Variable's rank: "
                         f"{slicing} vs. {shape} (variable {name})")
    if any(p < 1 for p in slicing):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {slicing} (variable {name})")
    if sum(p > 1 for p in slicing) > 1:
        raise ValueError(f"Can only slice a variable along one dimension: shape: {shape}, partitioning: "
                         f"{slicing} (variable {name})")
    return slicing


def _iter_slices(full_shape, num_slices, slice_dim):
    """(offset, shape) of each shard; the first `dim % num_slices` shards get one extra row (TF's split)."""
    excess = full_shape[slice_dim] % num_slices
    base = full_shape[slice_dim] // num_slices
    offset = [0] * len(full_shape)
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = base + (1 if i < excess else 0)
        yield list(offset), shape
        offset[slice_dim] += shape[slice_dim]


# ---------------------------------------------------------------------------------------------
# The variable store
# ---------------------------------------------------------------------------------------------

def _is_class(x) -> bool:
    return isinstance(x, type)


class _VariableStore:
    """Full names to the variables `get_variable` created in one graph (TF's _VariableStore)."""

    def __init__(self):
        self._vars: dict[str, Variable] = {}
        self._partitioned_vars: dict[str, PartitionedVariable] = {}
        self._lock = threading.RLock()

    def get_variable(self, name, shape=None, dtype=dtypes.float32, initializer=None, regularizer=None, reuse=None,
                     trainable=None, collections=None, caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None, synchronization=None,
                     aggregation=None):
        if custom_getter is not None:
            if not callable(custom_getter):
                raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter!r}")
            return custom_getter(getter=self._true_getter, name=name, shape=shape, dtype=dtype,
                                 initializer=initializer, regularizer=regularizer, reuse=reuse, trainable=trainable,
                                 collections=collections, caching_device=caching_device, partitioner=partitioner,
                                 validate_shape=validate_shape, use_resource=use_resource, constraint=constraint,
                                 synchronization=synchronization, aggregation=aggregation)
        return self._true_getter(name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                                 reuse=reuse, trainable=trainable, collections=collections, partitioner=partitioner,
                                 validate_shape=validate_shape, constraint=constraint,
                                 synchronization=synchronization, aggregation=aggregation)

    def _true_getter(self, name, shape=None, dtype=dtypes.float32, initializer=None, regularizer=None, reuse=None,
                     trainable=None, collections=None, caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, constraint=None, synchronization=None, aggregation=None, **unused):
        _, _, trainable = resolve_sync_aggregation(synchronization, aggregation, trainable, name)
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError(f"If initializer is a constant, do not specify shape (variable {name}).")
        dtype = dtypes.as_dtype(dtype)
        shape = as_shape(shape)
        with self._lock:
            if partitioner is not None and not (shape.ndims == 0):
                if not callable(partitioner):
                    raise ValueError(f"Partitioner must be callable, but received: {partitioner!r}")
                return self._get_partitioned_variable(name, partitioner, shape, dtype, initializer, regularizer,
                                                      reuse, trainable, collections, validate_shape, constraint)
            if reuse is True and name in self._partitioned_vars:
                return self._get_partitioned_variable(name, None, shape, dtype, initializer, regularizer, reuse,
                                                      trainable, collections, validate_shape, constraint)
            if f"{name}/part_0" in self._vars:
                raise ValueError(f"No partitioner was provided, but a partitioned version of the variable was "
                                 f"found: {name}/part_0. Perhaps a variable of the same name was already created "
                                 "with partitioning?")
            return self._get_single_variable(name, shape, dtype, initializer, regularizer, reuse, trainable,
                                             collections, validate_shape, constraint)

    @staticmethod
    def _default_initializer(name, dtype):
        from actorflow.graph import initializers
        if dtype.is_floating:
            return initializers.glorot_uniform_initializer()
        if dtype.is_integer or dtype.is_bool:
            return initializers.zeros_initializer()
        raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")

    def _get_single_variable(self, name, shape, dtype, initializer, regularizer, reuse, trainable, collections,
                             validate_shape, constraint, partition_info=None):
        if name in self._vars:
            found = self._vars[name]
            if reuse is False or reuse is None:
                msg = (f"Variable {name} already exists, disallowed. Did you mean to set reuse=True or "
                       "reuse=tf.AUTO_REUSE in VarScope?")
                tb = getattr(found, "_af_created_at", None)
                if tb:
                    msg += " Originally defined at:\n\n" + "".join(traceback.format_list(tb))
                raise ValueError(msg)
            if not shape.is_compatible_with(found.get_shape()):
                raise ValueError(f"Trying to share variable {name}, but specified shape {shape} and found shape "
                                 f"{found.get_shape()}.")
            if dtype is not found.dtype:
                raise ValueError(f"Trying to share variable {name}, but specified dtype {dtype.name} and found "
                                 f"dtype {found.dtype.name}.")
            return found

        if reuse is True:
            raise ValueError(f"Variable {name} does not exist, or was not created with tf.get_variable(). "
                             "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?")

        variable_dtype = dtype
        if initializer is None:
            initializer = self._default_initializer(name, dtype)
        if _is_class(initializer):
            initializer = initializer()
        if not callable(initializer):
            init_val = initializer                  # a constant: its shape is the variable's
            if isinstance(initializer, Tensor) or hasattr(initializer, "_as_graph_element"):
                variable_dtype = None
        elif shape.is_fully_defined():
            shape_list = shape.as_list()
            kwargs = {"dtype": dtype}
            if _accepts(initializer, "partition_info"):
                kwargs["partition_info"] = partition_info

            def init_val():
                return initializer(shape_list, **kwargs)
        elif _takes_no_arguments(initializer):
            init_val = initializer
            variable_dtype = None
        else:
            raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but instead was {shape}.")

        g = get_default_graph()
        with g.name_scope(None):
            # As in TF, an op already named `name` (say, from af.Variable) makes the graph name this
            # one `name_1`; the store still finds it under `name`.
            v = Variable(initial_value=init_val, name=name, trainable=trainable, collections=collections,
                         validate_shape=validate_shape, dtype=variable_dtype, constraint=constraint)
        v._af_created_at = [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE_DIR)][-5:]
        self._vars[name] = v
        if regularizer is not None:
            with g.colocate_with(v.op), g.name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    def _get_partitioned_variable(self, name, partitioner, shape, dtype, initializer, regularizer, reuse,
                                  trainable, collections, validate_shape, constraint):
        from actorflow.graph import initializers
        if name in self._vars:
            raise ValueError(f"A partitioner was provided, but an unpartitioned version of the variable was found: "
                             f"{name}. Perhaps a variable of the same name was already created without "
                             "partitioning?")
        init_tensor = None
        if initializer is not None and not callable(initializer):
            from actorflow.graph.graph import convert_to_tensor
            init_tensor = convert_to_tensor(initializer, dtype=dtype) \
                if not isinstance(initializer, Tensor) else initializer
            shape = shape.merge_with(init_tensor.shape)
            dtype = init_tensor.dtype
        partitions = None
        if not reuse or partitioner is not None:
            partitions = _call_partitioner(partitioner, shape, dtype, name)

        if name in self._partitioned_vars:
            existing = self._partitioned_vars[name]
            if reuse is False or reuse is None:
                raise ValueError(f"Partitioned variable with name {name} already exists. Did you mean to set "
                                 "reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
            if not shape.is_compatible_with(existing.get_shape()):
                raise ValueError(f"Trying to reuse partitioned variable {name}, but specified shape {shape} and "
                                 f"found shape {existing.get_shape()}.")
            if dtype is not existing.dtype:
                raise ValueError(f"Trying to reuse partitioned variable {name}, but specified dtype {dtype.name} "
                                 f"and found dtype {existing.dtype.name}.")
            if partitions is not None and existing._get_partitions() != partitions:
                raise ValueError(f"Trying to reuse partitioned variable {name}, but specified partitions "
                                 f"{partitions} and found partitions {existing._get_partitions()}.")
            return existing
        if reuse is True:
            raise ValueError(f"PartitionedVariable {name} does not exist, or was not created with "
                             "tf.get_variable(). Did you mean to set reuse=False or reuse=tf.AUTO_REUSE in VarScope?")

        slice_dim, num_slices = 0, 1
        for i, p in enumerate(partitions):
            if p > 1:
                slice_dim, num_slices = i, p
        if f"{name}/part_0" in self._vars:
            if f"{name}/part_{num_slices - 1}" not in self._vars:
                raise ValueError(f"Partitioner returned a different partitioning than what was already found. "
                                 f"Partitioner returned {num_slices} shards, and shard {name}/part_0 was found, "
                                 f"but {name}/part_{num_slices - 1} was not.")
            if f"{name}/part_{num_slices}" in self._vars:
                raise ValueError(f"Partitioner returned a different partitioning than what was already found. "
                                 f"Partitioner returned {num_slices} shards, and shard {name}/part_0 was found, "
                                 f"but so was the extra shard {name}/part_{num_slices}.")

        full_shape = shape.as_list()
        shards = []
        for i, (offset, var_shape) in enumerate(_iter_slices(full_shape, num_slices, slice_dim)):
            shard_name = f"{name}/part_{i}"
            info = initializers.PartitionInfo(full_shape, offset)
            if init_tensor is not None:
                from actorflow.graph.ops import array_ops
                g = get_default_graph()
                with g.name_scope(None), g.name_scope(shard_name + "/PartitionedInitializer"):
                    init, init_shape = array_ops.slice(init_tensor, offset, var_shape), None
            else:
                init, init_shape = initializer, var_shape
            v = self._get_single_variable(shard_name, as_shape(init_shape), dtype, init, regularizer, reuse,
                                          trainable, collections, validate_shape, constraint, partition_info=info)
            v._save_slice_info = SaveSliceInfo(name, full_shape, offset, var_shape)
            shards.append(v)
        pv = PartitionedVariable(name, shape, dtype, shards, partitions)
        self._partitioned_vars[name] = pv
        return pv


def _accepts(fn, param: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return param in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _takes_no_arguments(fn) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _variable_name_taken(g, name: str) -> bool:
    """Whether `get_variable(name)` would collide: a stored variable, shard or op of that name."""
    store = _get_store(g)
    if name in store._vars or name in store._partitioned_vars:
        return True
    try:
        g.get_operation_by_name(name)
    except KeyError:
        return False
    return True


def _get_store(g) -> _VariableStore:
    coll = g.get_collection_ref(_STORE_KEY)
    if not coll:
        coll.append(_VariableStore())
    return coll[0]


# ---------------------------------------------------------------------------------------------
# Variable scopes
# ---------------------------------------------------------------------------------------------

def _wrap_custom_getter(custom_getter, old_getter):
    """Composes a scope's custom getter with its parent's: the new one sees the old as its getter."""
    if custom_getter is None:
        return old_getter
    if old_getter is None:
        return custom_getter

    def wrapped(getter, *args, **kwargs):
        return custom_getter(lambda *a, **k: old_getter(getter, *a, **k), *args, **kwargs)
    return wrapped


class VariableScope:
    """A variable scope's name, reuse mode and defaults (tf.compat.v1.VariableScope).

    Obtained from `with af.variable_scope(...) as scope` or `af.get_variable_scope()`; passing it
    back to `variable_scope` re-enters it (same variable-name prefix).
    """

    def __init__(self, reuse, name="", initializer=None, regularizer=None, caching_device=None, partitioner=None,
                 custom_getter=None, name_scope="", dtype=dtypes.float32, use_resource=None, constraint=None):
        self._name = name
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self):
        """Makes `get_variable` in this scope return existing variables from now on."""
        self._reuse = True

    def set_initializer(self, initializer):
        self._initializer = initializer

    def set_regularizer(self, regularizer):
        self._regularizer = regularizer

    def set_caching_device(self, caching_device):
        self._caching_device = caching_device

    def set_partitioner(self, partitioner):
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter):
        self._custom_getter = custom_getter

    def set_dtype(self, dtype):
        self._dtype = dtypes.as_dtype(dtype)

    def set_use_resource(self, use_resource):
        self._use_resource = use_resource

    def get_collection(self, name):
        """The items of collection `name` under this scope's name."""
        scope = self._name + "/" if self._name else ""
        return get_default_graph().get_collection(name, scope)

    def trainable_variables(self):
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self):
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self):
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None, regularizer=None, reuse=None,
                     trainable=None, collections=None, caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None, synchronization=None,
                     aggregation=None):
        """Gets or creates `name` under this scope from `var_store`, with this scope's defaults."""
        if regularizer is None:
            regularizer = self._regularizer
        if partitioner is None:
            partitioner = self._partitioner
        if constraint is None:
            constraint = self._constraint
        if custom_getter is None:
            custom_getter = self._custom_getter
        elif self._custom_getter is not None:
            custom_getter = _wrap_custom_getter(custom_getter, self._custom_getter)
        if reuse is None:
            reuse = self._reuse
        full_name = self._name + "/" + name if self._name else name
        if dtype is not None and initializer is not None and isinstance(initializer, Tensor):
            if initializer.dtype is not dtypes.as_dtype(dtype):
                raise ValueError(f"Initializer type '{initializer.dtype.name}' and explicit dtype "
                                 f"'{dtypes.as_dtype(dtype).name}' don't match (variable {full_name}).")
        if initializer is None:
            initializer = self._initializer
        if dtype is None:
            if isinstance(initializer, Tensor):
                dtype = initializer.dtype
            elif initializer is not None and not callable(initializer):
                from actorflow.graph.ops.constant import _np_value
                dtype = _np_value(initializer, None)[1]   # TF's defaults: float32, int32
            else:
                dtype = self._dtype
        g = get_default_graph()
        with g.name_scope(None):
            return var_store.get_variable(full_name, shape=shape, dtype=dtype, initializer=initializer,
                                          regularizer=regularizer, reuse=reuse, trainable=trainable,
                                          collections=collections, caching_device=caching_device,
                                          partitioner=partitioner, validate_shape=validate_shape,
                                          use_resource=use_resource, custom_getter=custom_getter,
                                          constraint=constraint, synchronization=synchronization,
                                          aggregation=aggregation)

    def __repr__(self):
        return f"<af.VariableScope '{self._name}' reuse={self._reuse}>"


class _ScopeState(threading.local):
    """One thread's current variable scope in one graph, and how often each scope name was opened."""

    def __init__(self):
        self.current_scope = VariableScope(False)
        self.counts: dict[str, int] = {}

    def open_variable_scope(self, name):
        self.counts[name] = self.counts.get(name, 0) + 1

    def close_variable_subscopes(self, name):
        # Leaving a scope forgets its sub-scopes, so re-entering it names them the same way again
        # (how layers built twice under one reused scope find their variables).
        prefix = None if name is None else name + "/"
        for k in self.counts:
            if prefix is None or k.startswith(prefix):
                self.counts[k] = 0

    def variable_scope_count(self, name):
        return self.counts.get(name, 0)


def _scope_state(g) -> _ScopeState:
    coll = g.get_collection_ref(_SCOPE_KEY)
    if not coll:
        coll.append(_ScopeState())
    return coll[0]


def get_variable_scope() -> VariableScope:
    """The current variable scope (tf.compat.v1.get_variable_scope)."""
    return _scope_state(get_default_graph()).current_scope


def _unique_default_scope_name(state: _ScopeState, prefix: str) -> str:
    cur = state.current_scope.name
    name = cur + "/" + prefix if cur else prefix
    if state.variable_scope_count(name) == 0:
        return prefix
    i = 1
    while state.variable_scope_count(f"{name}_{i}") > 0:
        i += 1
    return f"{prefix}_{i}"


class variable_scope:  # noqa: N801  (TF's name)
    """A context manager for defining ops that create variables (tf.compat.v1.variable_scope).

    `name_or_scope` is a string (a sub-scope of the current one) or a VariableScope (re-entered as
    is); with None, `default_name` is made unique ("dense", "dense_1", ...). `reuse` is True,
    False/None (inherit) or AUTO_REUSE; `initializer`, `regularizer`, `dtype`, `partitioner` and
    `custom_getter` become the defaults of `get_variable` inside. Yields the VariableScope.
    """

    def __init__(self, name_or_scope, default_name=None, values=None, initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                 use_resource=None, constraint=None, auxiliary_name_scope=True):
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is not None and not isinstance(name_or_scope, (str, VariableScope)):
            raise TypeError(f"VariableScope: name_or_scope must be a string or VariableScope, got "
                            f"{type(name_or_scope).__name__}")
        if reuse is False:
            reuse = None                            # False means "inherit", as in TF 1.x
        if not (reuse is None or reuse is True or reuse is AUTO_REUSE):
            raise ValueError(f"reuse must be True, False, None or af.AUTO_REUSE, got {reuse!r}")
        if name_or_scope is None and reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"The custom_getter must be callable, got {custom_getter!r}")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._reuse = reuse
        self._defaults = dict(initializer=initializer, regularizer=regularizer, caching_device=caching_device,
                              partitioner=partitioner, dtype=dtype, use_resource=use_resource,
                              constraint=constraint)
        self._custom_getter = custom_getter
        self._aux = auxiliary_name_scope
        self._exits: list = []

    def _graph(self):
        for v in self._values or ():
            g = getattr(v, "graph", None)
            if g is not None:
                return g
        return get_default_graph()

    def _enter_cm(self, cm):
        out = cm.__enter__()
        self._exits.append(cm)
        return out

    def __enter__(self) -> VariableScope:
        g = self._graph()
        if g is not get_default_graph():
            self._enter_cm(g.as_default())
        state = _scope_state(g)
        old = state.current_scope
        nos = self._name_or_scope
        if nos is not None:
            ns_name = nos if isinstance(nos, str) else nos.name.split("/")[-1]
            opened = self._enter_cm(g.name_scope(ns_name)) if (ns_name and self._aux) else None
            if isinstance(nos, str):
                new_name = old.name + "/" + nos if old.name else nos
                scope_name_scope = opened if opened is not None else nos
            else:
                new_name = nos.name
                scope_name_scope = nos.original_name_scope
        else:
            opened = self._enter_cm(g.name_scope(self._default_name)) if self._aux else None
            unique = _unique_default_scope_name(state, self._default_name)
            new_name = old.name + "/" + unique if old.name else unique
            scope_name_scope = opened if opened is not None else unique

        if isinstance(nos, VariableScope):
            base = nos
            reuse = self._reuse if self._reuse else nos.reuse
            self._saved_counts = dict(state.counts)
        else:
            base = old
            reuse = self._reuse or old.reuse     # reuse is inherited by sub-scopes
            self._saved_counts = None
        new = VariableScope(reuse, name=new_name, initializer=base.initializer, regularizer=base.regularizer,
                            caching_device=base.caching_device, partitioner=base.partitioner,
                            custom_getter=base.custom_getter, name_scope=scope_name_scope, dtype=base.dtype,
                            use_resource=base.use_resource, constraint=base.constraint)
        d = self._defaults
        if d["initializer"] is not None:
            new.set_initializer(d["initializer"])
        if d["regularizer"] is not None:
            new.set_regularizer(d["regularizer"])
        if d["caching_device"] is not None:
            new.set_caching_device(d["caching_device"])
        if d["partitioner"] is not None:
            new.set_partitioner(d["partitioner"])
        if d["dtype"] is not None:
            new.set_dtype(d["dtype"])
        if d["use_resource"] is not None:
            new.set_use_resource(d["use_resource"])
        if d["constraint"] is not None:
            new._constraint = d["constraint"]
        if self._custom_getter is not None:
            new.set_custom_getter(_wrap_custom_getter(self._custom_getter, base.custom_getter))
        state.open_variable_scope(new_name)
        self._state, self._old, self._new_name = state, old, new_name
        state.current_scope = new
        return new

    def __exit__(self, *exc):
        state = self._state
        if self._saved_counts is not None:
            state.counts = self._saved_counts
        else:
            state.close_variable_subscopes(self._new_name)
        state.current_scope = self._old
        while self._exits:
            self._exits.pop().__exit__(*exc)
        return False


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                 collections=None, caching_device=None, partitioner=None, validate_shape=True, use_resource=None,
                 custom_getter=None, constraint=None, synchronization=None, aggregation=None):
    """Gets an existing variable `scope/name` or creates a new one (tf.compat.v1.get_variable).

    Creation uses `initializer` (default: the scope's, else glorot_uniform for floats and zeros
    for integers); a constant initializer (value or tensor) gives the variable its shape. With a
    partitioner (argument or scope default) returns a PartitionedVariable of shards
    `name/part_<i>`. Raises ValueError, with TF's messages, on disallowed creation or reuse and on
    shape or dtype mismatches when sharing.
    """
    g = get_default_graph()
    return get_variable_scope().get_variable(
        _get_store(g), name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
        trainable=trainable, collections=collections, caching_device=caching_device, partitioner=partitioner,
        validate_shape=validate_shape, use_resource=use_resource, custom_getter=custom_getter,
        constraint=constraint, synchronization=synchronization, aggregation=aggregation)


def get_local_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=False,
                       collections=None, caching_device=None, partitioner=None, validate_shape=True,
                       use_resource=None, custom_getter=None, constraint=None, synchronization=None,
                       aggregation=None):
    """Like `get_variable`, for a non-trainable variable in LOCAL_VARIABLES (tf.compat.v1.get_local_variable)."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                        trainable=False, collections=collections, caching_device=caching_device,
                        partitioner=partitioner, validate_shape=validate_shape, use_resource=use_resource,
                        custom_getter=custom_getter, constraint=constraint)
