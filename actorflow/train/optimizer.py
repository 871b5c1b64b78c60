"""The optimizer base class (tf.compat.v1.train.Optimizer).

`minimize` = `compute_gradients` (af.gradients of the loss for each variable) followed by
`apply_gradients`, which adds one update op per variable, colocated with it: a dense gradient
becomes an Apply* op, an IndexedSlices gradient (from `gather` / `embedding_lookup`) a
SparseApply* op on the touched rows only, so a huge embedding is never densified. After every
update has run, `global_step` (if given) is incremented.

Slots (per-variable optimizer state such as Adam's m and v) are non-trainable variables named
like TF's (`var/Adam`, `var/Adam_1`), created colocated with their variable, so on a cluster they
live on the variable's parameter server.

Differences from TF 1.x:
As in TF, duplicate indices in a sparse gradient are summed first (Unique + UnsortedSegmentSum,
rows in the order they first occur), so a row gathered k times in a step gets one update with its
summed gradient.

Differences from TF 1.x:
- Python-number hyper-parameters are made constants of each variable's dtype directly (TF makes
  float32 constants and casts them), so float64 variables see exact hyper-parameters.
"""
from __future__ import annotations

from collections.abc import Iterable

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.variables import Variable, trainable_variables

__all__ = ["Optimizer", "WrappedOptimizer"]

_VALID_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64)
_TRAIN_OP = getattr(GraphKeys, "TRAIN_OP", "train_op")


def _expand_var_list(var_list) -> list:
    """Flattens nested lists and PartitionedVariables into a list of Variables."""
    from actorflow.graph.variable_scope import PartitionedVariable
    out = []
    for v in var_list:
        if isinstance(v, PartitionedVariable):
            out.extend(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_expand_var_list(v))
        else:
            out.append(v)
    return out


def _gate(grads: list) -> list:
    """GATE_GRAPH: every gradient waits until all of them are computed (tf.tuple)."""
    from actorflow.graph.ops.constant import identity
    deps = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            deps.extend([g.values, g.indices])
        elif g is not None:
            deps.append(g)
    if not deps:
        return grads
    graph = deps[0].graph
    out = []
    with graph.name_scope("tuple"), graph.control_dependencies(deps):
        for g in grads:
            if isinstance(g, IndexedSlices):
                out.append(IndexedSlices(identity(g.values), identity(g.indices), g.dense_shape))
            elif g is not None:
                out.append(identity(g))
            else:
                out.append(None)
    return out


class Optimizer:
    """Base class of optimizers (tf.compat.v1.train.Optimizer).

    Subclasses implement `_create_slots`, `_prepare`, `_apply_dense` and `_apply_sparse` (and
    optionally `_finish`), as in TF. Hyper-parameters registered with `_set_hyper` may be Python
    numbers, tensors or zero-argument callables; `_hyper(name, dtype)` gives the tensor to use
    for a variable of `dtype`.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = bool(use_locking)
        self._name = name
        self._slots: dict[str, dict] = {}          # slot name -> {variable: slot variable}
        self._non_slot_dict: dict = {}             # (name, graph) -> variable
        self._hyper_values: dict = {}              # name -> number, tensor or callable
        self._hyper_tensors: dict = {}             # (name, dtype) -> tensor, for one apply_gradients

    def get_name(self) -> str:
        return self._name

    # -- the public API ------------------------------------------------------------------------
    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        """Adds ops that update `var_list` (default: trainable variables) to minimize `loss` and
        increment `global_step`; returns the training op (tf.compat.v1.train.Optimizer.minimize)."""
        grads_and_vars = self.compute_gradients(loss, var_list=var_list, gate_gradients=gate_gradients,
                                                aggregation_method=aggregation_method,
                                                colocate_gradients_with_ops=colocate_gradients_with_ops,
                                                grad_loss=grad_loss)
        if not any(g is not None for g, _ in grads_and_vars):
            raise ValueError("No gradients provided for any variable, check your graph for ops that do not support "
                             f"gradients, between variables {[str(v) for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        """Gradients of `loss` for each variable: a list of (gradient, variable) pairs; the gradient
        is a Tensor, an IndexedSlices or None (tf.compat.v1.train.Optimizer.compute_gradients)."""
        from actorflow.graph.gradients import gradients
        if callable(loss) and not isinstance(loss, Tensor):
            raise TypeError("loss must be a Tensor; callable losses are for eager execution, which actorflow "
                            "does not have")
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                             f"Optimizer.GATE_GRAPH.  Not {gate_gradients}")
        loss = convert_to_tensor(loss)
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            grad_loss = convert_to_tensor(grad_loss)
            self._assert_valid_dtypes([grad_loss])
        if var_list is None:
            var_list = trainable_variables()
        # Any iterable of variables (a list, a tuple, a dict's .values()), as TF's nest.flatten takes them.
        iterable = isinstance(var_list, Iterable) and not isinstance(var_list, (Variable, str, bytes))
        var_list = _expand_var_list(list(var_list) if iterable else [var_list])
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"Optimizer '{self._name}': var_list must hold af.Variables, got {v!r}")
        grads = gradients(loss, var_list, grad_ys=grad_loss, gate_gradients=(gate_gradients == Optimizer.GATE_OP),
                          aggregation_method=aggregation_method,
                          colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gate_gradients == Optimizer.GATE_GRAPH:
            grads = _gate(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Adds one update op per (gradient, variable) with a gradient, then increments
        `global_step`; returns the op that does it all (tf.compat.v1.train.Optimizer.apply_gradients)."""
        from actorflow.graph.variables import assign_add
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            if g is not None and not isinstance(g, IndexedSlices):
                try:
                    g = convert_to_tensor(g)
                except (TypeError, ValueError):
                    raise TypeError(f"Gradient must be convertible to a Tensor or IndexedSlices, or None: {g!r}") \
                        from None
            if not isinstance(v, Variable):
                raise TypeError(f"Optimizer '{self._name}' can only update af.Variables, got {v!r}")
            converted.append((g, v))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError(f"No gradients provided for any variable: {[str(v) for _, v in converted]}.")
        graph = var_list[0].graph
        with graph.as_default():
            with graph.control_dependencies(None):
                self._create_slots(var_list)
            with graph.name_scope(name or self._name) as scope:
                self._hyper_tensors = {}
                self._prepare()
                self._prepare_hypers({v.dtype for v in var_list})
                update_ops = []
                for g, v in converted:
                    if g is None:
                        continue
                    # Updates run where the variable lives (TF: colocate_with(var), which also
                    # overrides device functions).
                    with graph.name_scope("update_" + v.op.name), graph.device(None), graph.colocate_with(v.op):
                        if isinstance(g, IndexedSlices):
                            op = self._apply_sparse_duplicate_indices(g, v)
                        else:
                            op = self._apply_dense(g, v)
                    update_ops.append(op.op if isinstance(op, Tensor) else op)
                if global_step is None:
                    apply_updates = self._finish(update_ops, scope)
                else:
                    with graph.control_dependencies([self._finish(update_ops, "update")]):
                        gs_op = global_step.op if hasattr(global_step, "op") else None
                        with graph.device(None), graph.colocate_with(gs_op):
                            apply_updates = assign_add(global_step, 1, name=scope)
                if isinstance(apply_updates, Tensor):
                    apply_updates = apply_updates.op
                train_ops = graph.get_collection_ref(_TRAIN_OP)
                if apply_updates not in train_ops:
                    train_ops.append(apply_updates)
                return apply_updates

    def get_slot(self, var, name):
        """The slot variable `name` of `var`, or None (tf.compat.v1.train.Optimizer.get_slot)."""
        return self._slots.get(name, {}).get(var)

    def get_slot_names(self) -> list:
        """The names of the slots this optimizer creates, sorted (e.g. ["m", "v"] for Adam)."""
        return sorted(self._slots)

    def variables(self) -> list:
        """The optimizer's own variables in the default graph (slots and accumulators), by name."""
        g = get_default_graph()
        out = [v for (n, graph), v in self._non_slot_dict.items() if graph is g]
        for slots in self._slots.values():
            out.extend(s for s in slots.values() if s.graph is g)
        return sorted(out, key=lambda v: v.name)

    # -- subclass hooks ------------------------------------------------------------------------
    def _create_slots(self, var_list):
        """Creates the slots of each variable (default: none)."""

    def _prepare(self):
        """Converts hyper-parameters to tensors before the updates are built (default: nothing
        beyond `_set_hyper` hyper-parameters, which the base class converts)."""

    def _apply_dense(self, grad, var):
        raise NotImplementedError(f"{type(self).__name__} does not implement _apply_dense")

    def _apply_sparse(self, grad, var):
        raise NotImplementedError(f"{type(self).__name__} does not implement _apply_sparse")

    def _apply_sparse_duplicate_indices(self, grad, var):
        """Sums the gradients of duplicate rows (Unique + UnsortedSegmentSum, rows in the order
        they first occur), then `_apply_sparse`: one update per row, as TF's."""
        from actorflow.graph.ops.array_ops.gathering import unsorted_segment_sum
        from actorflow.graph.ops.array_ops.shapes import shape
        from actorflow.graph.ops.sort_ops import unique
        unique_indices, positions = unique(grad.indices)
        summed = unsorted_segment_sum(grad.values, positions, shape(unique_indices)[0])
        return self._apply_sparse(IndexedSlices(summed, unique_indices, grad.dense_shape), var)

    def _finish(self, update_ops, name_scope):
        """Groups the update ops; subclasses add updates of their non-slot state (Adam's powers)."""
        from actorflow.graph.ops.constant import group
        return group(*update_ops, name=name_scope)

    # -- hyper-parameters ----------------------------------------------------------------------
    def _set_hyper(self, name, value):
        self._hyper_values[name] = value

    @staticmethod
    def _call_if_callable(param):
        return param() if callable(param) and not isinstance(param, (Tensor, Variable)) else param

    def _prepare_hypers(self, var_dtypes):
        for dt in sorted(var_dtypes, key=lambda d: d.name):
            for name in self._hyper_values:
                self._hyper(name, dt)

    def _hyper(self, name, dtype) -> Tensor:
        """The hyper-parameter `name` as a tensor of `dtype`, made once per apply_gradients call:
        a constant of that dtype for a Python number, else the tensor cast to it."""
        dtype = dtypes.as_dtype(dtype)
        t = self._hyper_tensors.get((name, dtype))
        if t is not None:
            return t
        if name not in self._hyper_values:
            raise KeyError(f"Optimizer '{self._name}' has no hyper-parameter named '{name}'")
        value = self._call_if_callable(self._hyper_values[name])
        if isinstance(value, (Tensor, Variable)) or hasattr(value, "_as_graph_element"):
            from actorflow.graph.ops.math_ops import cast
            v = convert_to_tensor(value)
            if not v.dtype.is_floating:
                raise TypeError(f"Optimizer '{self._name}': hyper-parameter '{name}' must be a floating-point "
                                f"tensor, got {v.dtype.name} ({v.name})")
            t = cast(v, dtype, name=name)
        else:
            t = convert_to_tensor(value, dtype=dtype, name=name)
        self._hyper_tensors[(name, dtype)] = t
        return t

    # -- slots ---------------------------------------------------------------------------------
    def _slot_dict(self, slot_name) -> dict:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot_with_initializer(self, var, initializer, shape, dtype, slot_name, op_name):
        """The slot `slot_name` of `var`, created with `initializer` if missing."""
        named = self._slot_dict(slot_name)
        if var not in named:
            named[var] = _create_slot(var, initializer, shape, dtype, op_name)
        return named[var]

    def _zeros_slot(self, var, slot_name, op_name):
        """The slot `slot_name` of `var`, created as zeros like `var` if missing."""
        from actorflow.graph.initializers import zeros_initializer
        return self._get_or_make_slot_with_initializer(var, zeros_initializer(dtype=var.dtype), var.shape,
                                                       var.dtype, slot_name, op_name)

    def _get_or_make_slot(self, var, val, slot_name, op_name):
        """The slot `slot_name` of `var`, created with initial value `val` (a tensor) if missing."""
        named = self._slot_dict(slot_name)
        if var not in named:
            named[var] = _create_slot(var, val, None, None, op_name)
        return named[var]

    def _create_non_slot_variable(self, initial_value, name, colocate_with):
        """A variable of the optimizer itself (e.g. Adam's beta1_power), one per graph."""
        graph = colocate_with.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with graph.as_default(), graph.control_dependencies(None), graph.device(None), \
                    graph.colocate_with(colocate_with.op):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name, graph=None):
        return self._non_slot_dict.get((name, graph or get_default_graph()))

    def _non_slot_variables(self):
        return list(self._non_slot_dict.values())

    def _assert_valid_dtypes(self, tensors):
        for t in tensors:
            dtype = t.dtype
            if dtype not in _VALID_DTYPES:
                raise ValueError(f"Invalid type {dtype!r} for {t.name}, expected: "
                                 f"{[d for d in _VALID_DTYPES]}.")


def _create_slot(primary: Variable, initializer, shape, dtype, op_name: str) -> Variable:
    """A slot variable `primary/op_name` (made unique: `_1`, `_2`, ...), non-trainable, colocated
    with `primary` and registered in the variable store, as TF's slot_creator does."""
    from actorflow.graph.variable_scope import (
        SaveSliceInfo,
        VariableScope,
        _variable_name_taken,
        get_variable,
        variable_scope,
    )
    g = primary.graph
    base = primary.op.name + "/" + op_name
    name, i = base, 0
    while _variable_name_taken(g, name):
        i += 1
        name = f"{base}_{i}"
    with g.as_default(), g.name_scope(None), g.control_dependencies(None), g.device(None), \
            g.colocate_with(primary.op), variable_scope(VariableScope(False, name="")):
        if isinstance(initializer, (Tensor, Variable)):
            slot = get_variable(name, initializer=initializer, trainable=False)
        else:
            slot = get_variable(name, shape=shape, dtype=dtype, initializer=initializer, trainable=False)
    info = getattr(primary, "_save_slice_info", None)
    if info is not None:
        suffix = name[len(primary.op.name) + 1:]
        slot._save_slice_info = SaveSliceInfo(info.full_name + "/" + suffix, info.full_shape, info.var_offset,
                                              info.var_shape)
    return slot



class WrappedOptimizer(Optimizer):
    """An optimizer that hands its slots and variables to the optimizer it wraps, `self._opt`
    (SyncReplicasOptimizer, tf.contrib.tpu's CrossShardOptimizer)."""

    def get_slot(self, *args, **kwargs):
        """The wrapped optimizer's slot."""
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        """The wrapped optimizer's slot names."""
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables."""
        return self._opt.variables()
