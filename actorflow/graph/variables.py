"""Variables: mutable state held in the graph (tf.compat.v1.Variable, a ref variable).

A Variable is a VariableV2 op (the resource), an Assign op that initializes it, and an Identity
that reads it (`name/read`). Its value lives in a resource actor of the process that owns its
device, and outlives steps; updates are ops that take the VariableV2 output as a reference input.
"""
from __future__ import annotations

import contextlib
import enum

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph, get_default_session
from actorflow.graph.ops import state_ops
from actorflow.graph.ops.constant import Identity, group
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["Variable", "VariableSynchronization", "VariableAggregation", "global_variables", "trainable_variables", "local_variables",
           "global_variables_initializer", "variables_initializer", "local_variables_initializer",
           "initialize_all_variables", "assign", "assign_add", "assign_sub", "scatter_add",
           "scatter_sub", "scatter_update", "scatter_mul", "scatter_max", "scatter_min",
           "scatter_div", "scatter_nd_add", "scatter_nd_sub", "scatter_nd_update",
           "is_variable_initialized", "model_variables", "init_scope", "variable_creator_scope"]


class VariableSynchronization(enum.Enum):
    """When a distributed variable's copies agree (tf.VariableSynchronization). actorflow keeps one
    copy of every variable, on its device, so the value only decides defaults: ON_READ makes a
    variable non-trainable unless `trainable` says otherwise, as in TF."""
    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation(enum.Enum):
    """How the updates of a distributed variable's replicas combine (tf.compat.v1.VariableAggregation);
    recorded on the variable, with one copy per variable nothing is combined."""
    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3   # TF 1.x's alias


def resolve_sync_aggregation(synchronization, aggregation, trainable, name):
    """The (synchronization, aggregation, trainable) a variable gets: the enums checked (TF's
    messages), None as AUTO and NONE, and trainable None as "not ON_READ"."""
    sync = VariableSynchronization.AUTO if synchronization is None else synchronization
    if not isinstance(sync, VariableSynchronization):
        raise ValueError(f"Invalid variable synchronization mode: {synchronization} for variable: {name}")
    agg = VariableAggregation.NONE if aggregation is None else aggregation
    if not isinstance(agg, VariableAggregation):
        raise ValueError(f"Invalid variable aggregation mode: {aggregation} for variable: {name}")
    if trainable is None:
        trainable = sync is not VariableSynchronization.ON_READ
    return sync, agg, trainable


@contextlib.contextmanager
def init_scope():
    """Builds ops outside any cond or while context and without control inputs (tf.init_scope).

    Variables are created this way (when their initial value is not already a tensor), as in TF 1.x:
    a variable first asked for inside a loop body (an RNN cell's kernel in `dynamic_rnn`) is created
    once in the root frame, and the loop reads it on every iteration. The name scope is kept.
    """
    g = get_default_graph()
    st = g._state()
    saved = st.context
    st.context = None
    try:
        with g.control_dependencies(None):
            yield
    finally:
        st.context = saved


class _VariableMeta(type):
    """Routes `Variable(...)` through the creators of `variable_creator_scope`, innermost first, as
    TF's VariableMetaclass does; with no creator it is an ordinary construction."""

    def __call__(cls, *args, **kwargs):
        stack = _creator_stack(get_default_graph())
        if cls is not Variable or not stack:
            return super().__call__(*args, **kwargs)
        import inspect
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        kw = {k: v for k, v in bound.arguments.items() if k != "self"}

        def base(**kwargs):
            return type.__call__(cls, **kwargs)
        creator = base
        for fn in stack:
            creator = _chained(fn, creator)
        return creator(**kw)


def _chained(fn, next_creator):
    def creator(**kwargs):
        return fn(next_creator, **kwargs)
    return creator


def _creator_stack(g) -> list:
    return g.__dict__.setdefault("_variable_creator_stack", [])


@contextlib.contextmanager
def variable_creator_scope(variable_creator):
    """Inside, every `Variable(...)` on the default graph (get_variable's too) calls
    `variable_creator(next_creator, **kwargs)`, which may change the arguments, call
    `next_creator(**kwargs)` to make the variable, or return something else
    (tf.compat.v1.variable_creator_scope). Nested scopes chain, the innermost called first."""
    if not callable(variable_creator):
        raise TypeError(f"variable_creator must be callable, got {type(variable_creator).__name__}")
    stack = _creator_stack(get_default_graph())
    stack.append(variable_creator)
    try:
        yield
    finally:
        stack.remove(variable_creator)


class Variable(metaclass=_VariableMeta):
    """A mutable tensor whose value persists across `Session.run` calls (tf.compat.v1.Variable).

    Differences from TF 1.x: reads have snapshot semantics (an update never changes a value
    another op of the same step already read), implemented by copy-on-write in the resource actor.
    An op built inside ``control_dependencies`` reads the variable afresh after those control
    inputs (see `_conversion_tensor`), so it sees what TF 1.x's by-reference read would.
    """

    def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True,
                 caching_device=None, name=None, variable_def=None, dtype=None, expected_shape=None,
                 import_scope=None, constraint=None, use_resource=None, shape=None,
                 synchronization=None, aggregation=None):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        self._synchronization, self._aggregation, trainable = resolve_sync_aggregation(
            synchronization, aggregation, trainable, name)
        g = get_default_graph()
        self._trainable = trainable
        self.constraint = constraint
        lift = init_scope() if not isinstance(initial_value, Tensor) else contextlib.nullcontext()
        with g.name_scope(name or "Variable") as scope_name:
            op_name = scope_name.rstrip("/")
            with g.control_dependencies(None), lift:
                if callable(initial_value):
                    with g.name_scope("Initializer"):
                        initial_value = initial_value()
                init = convert_to_tensor(initial_value, dtype=dtype, name="initial_value") \
                    if not isinstance(initial_value, Tensor) else initial_value
                if dtype is not None and init.dtype is not dtypes.as_dtype(dtype):
                    from actorflow.graph.ops.math_ops import cast
                    init = cast(init, dtype)
                vshape = as_shape(shape) if shape is not None else (init.shape if validate_shape else TensorShape(None))
                if validate_shape and not vshape.is_fully_defined():
                    raise ValueError(f"initial_value of variable '{op_name}' must have a fully defined shape "
                                     f"when validate_shape=True, got {init.shape}")
                # The VariableV2 op takes the scope's exact name (uniquified by the scope itself).
                self._variable = self._create_var_op(g, op_name, vshape, init.dtype)
                self._initial_value = init
                self._initializer_op = state_ops.Assign(self._variable, init, validate_shape=validate_shape,
                                                        use_locking=True, name="Assign").op
                with g.colocate_with(self._variable.op):
                    self._snapshot = Identity(self._variable, name="read")
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections = list(collections) + [GraphKeys.TRAINABLE_VARIABLES]
        g.add_to_collections(collections, self)
        self._save_slice_info = None

    @staticmethod
    def _create_var_op(g, op_name, shape, dtype):
        # The scope reserved `op_name`; a trailing "/" asks for exactly that name.
        return g.create_op("VariableV2", [], {"shape": shape, "dtype": dtype, "container": "",
                                              "shared_name": ""}, name=op_name + "/").outputs[0]

    # -- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self):
        return self._variable.op

    @property
    def synchronization(self) -> VariableSynchronization:
        # A variable rebuilt from a MetaGraphDef (train/meta_graph.py) has the defaults.
        return getattr(self, "_synchronization", VariableSynchronization.AUTO)

    @property
    def aggregation(self) -> VariableAggregation:
        return getattr(self, "_aggregation", VariableAggregation.NONE)

    @property
    def dtype(self):
        return self._variable.dtype

    @property
    def shape(self) -> TensorShape:
        return self._variable.shape

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    @property
    def graph(self):
        return self._variable.graph

    @property
    def device(self) -> str:
        return self._variable.op.device

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def initializer(self):
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    def _as_graph_element(self):
        return self._snapshot

    def _conversion_tensor(self) -> Tensor:
        """The tensor an op built now reads this variable through (convert_to_tensor): the snapshot,
        or inside ``control_dependencies`` whose ops (or their inputs) may write variables, a fresh read
        that runs after those control inputs. TF 1.x
        reads a variable's buffer when the op consuming it runs (a reference variable's snapshot
        aliases the buffer), and TF 2's resource variables read afresh in the current context; so
        ``with tf.control_dependencies([train_op]): tf.identity(v)`` (or an ExponentialMovingAverage
        applied after the optimizer's update) sees the updated value, not the step's first read.
        Inside a cond or while_loop the context's own reads apply (a loop reads its variables at each
        iteration already). Control inputs that write no variable (an assertion on shapes) leave the
        snapshot in place, as TF's graph has it: no write can come between them and the read. (Another
        variable's update can: one Adam applying two gradient lists reads its powers after each.)"""
        g = self._variable.graph
        st = g._state()
        if st.context is None and any(st.control_stack) and get_default_graph() is g \
                and g._control_may_write_variables():
            return state_ops.RefRead(self._variable, name="read")
        return self._snapshot

    def _ref(self) -> Tensor:
        return self._variable

    def value(self) -> Tensor:
        return self._conversion_tensor()

    def read_value(self) -> Tensor:
        """A fresh read of the variable (tf.Variable.read_value): its value when this op runs, so a
        read under ``control_dependencies([update])`` sees the update."""
        return state_ops.RefRead(self._variable, name="read")

    def initialized_value(self) -> Tensor:
        """The variable's value, or its initial value where it is not initialized yet
        (tf.Variable.initialized_value): how TF-1.x programs initialize one variable from another,
        ``tf.Variable(w.initialized_value() * 2)``, whatever order the initializers run in. A cond on
        ``is_variable_initialized`` between a fresh read and the initial value, built outside any
        control context; it initializes nothing itself."""
        from actorflow.graph.control_flow import cond
        with init_scope():
            return cond(is_variable_initialized(self), self.read_value, lambda: self.initial_value)

    def eval(self, session=None):
        return self._snapshot.eval(session=session)

    def load(self, value, session=None):
        sess = session or get_default_session()
        sess.run(self.initializer, {self.initial_value: value})

    # -- updates -------------------------------------------------------------------------------
    def assign(self, value, use_locking=None, name=None, read_value=True):
        return assign(self, value, use_locking=use_locking, name=name, read_value=read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        return assign_add(self, delta, use_locking=use_locking, name=name, read_value=read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        return assign_sub(self, delta, use_locking=use_locking, name=name, read_value=read_value)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return scatter_add(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return scatter_sub(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        return scatter_update(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        return scatter_mul(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        return scatter_div(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        return scatter_max(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        return scatter_min(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_nd_add(self, indices, updates, name=None):
        return scatter_nd_add(self, indices, updates, name=name)

    def scatter_nd_sub(self, indices, updates, name=None):
        return scatter_nd_sub(self, indices, updates, name=name)

    def scatter_nd_update(self, indices, updates, name=None):
        return scatter_nd_update(self, indices, updates, name=name)

    def is_initialized(self, name=None):
        return is_variable_initialized(self, name)

    def __repr__(self):
        return f"<af.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __iter__(self):
        return iter(self._snapshot)

    def __len__(self):
        return len(self._snapshot)

    def __bool__(self):
        raise TypeError(f"Using an af.Variable ('{self.name}') as a Python bool is not allowed.")

    def __array__(self, *a, **k):
        raise TypeError(f"Cannot convert af.Variable '{self.name}' to a numpy array; fetch it with a Session.")


def _ref_of(v):
    if isinstance(v, Variable):
        return v._variable
    if isinstance(v, Tensor) and v.op.op_def.resource == "variable":
        return v
    if hasattr(v, "_ref"):
        return v._ref()
    raise TypeError(f"Expected a Variable, got {v!r}")


def _value_for(ref: Tensor, value):
    return convert_to_tensor(value, dtype=ref.dtype) if not isinstance(value, Tensor) else value


def assign(ref, value, validate_shape=None, use_locking=None, name=None, read_value=True):
    """Assigns `value` to the variable; returns its new value (tf.compat.v1.assign)."""
    r = _ref_of(ref)
    out = state_ops.Assign(r, _value_for(r, value), validate_shape=True if validate_shape is None else validate_shape,
                           use_locking=bool(use_locking), name=name)
    return out if read_value else out.op


def assign_add(ref, value, use_locking=None, name=None, read_value=True):
    """Adds `value` to the variable in place (tf.compat.v1.assign_add)."""
    r = _ref_of(ref)
    out = state_ops.AssignAdd(r, _value_for(r, value), use_locking=bool(use_locking), name=name)
    return out if read_value else out.op


def assign_sub(ref, value, use_locking=None, name=None, read_value=True):
    """Subtracts `value` from the variable in place (tf.compat.v1.assign_sub)."""
    r = _ref_of(ref)
    out = state_ops.AssignSub(r, _value_for(r, value), use_locking=bool(use_locking), name=name)
    return out if read_value else out.op


def _scatter(opdef, ref, indices, updates, use_locking, name):
    r = _ref_of(ref)
    return opdef(r, convert_to_tensor(indices) if not isinstance(indices, Tensor) else indices,
                 _value_for(r, updates), use_locking=bool(use_locking), name=name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    """Adds `updates` to rows `indices` of the variable; duplicates accumulate (tf.compat.v1.scatter_add)."""
    return _scatter(state_ops.ScatterAdd, ref, indices, updates, use_locking, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    """Subtracts `updates` from rows `indices` (tf.compat.v1.scatter_sub)."""
    return _scatter(state_ops.ScatterSub, ref, indices, updates, use_locking, name)


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    """Overwrites rows `indices` with `updates` (tf.compat.v1.scatter_update)."""
    return _scatter(state_ops.ScatterUpdate, ref, indices, updates, use_locking, name)


def scatter_mul(ref, indices, updates, use_locking=False, name=None):
    return _scatter(state_ops.ScatterMul, ref, indices, updates, use_locking, name)


def scatter_max(ref, indices, updates, use_locking=False, name=None):
    return _scatter(state_ops.ScatterMax, ref, indices, updates, use_locking, name)


def scatter_min(ref, indices, updates, use_locking=False, name=None):
    return _scatter(state_ops.ScatterMin, ref, indices, updates, use_locking, name)


def scatter_div(ref, indices, updates, use_locking=False, name=None):
    """Divides rows `indices` of the variable by `updates` (tf.compat.v1.scatter_div); integer
    variables truncate toward zero, as TF's kernel does."""
    return _scatter(state_ops.ScatterDiv, ref, indices, updates, use_locking, name)


def scatter_nd_add(ref, indices, updates, use_locking=False, name=None):
    """Adds `updates` to the slices of the variable addressed by the innermost vectors of `indices`
    (shape [..., K]); duplicates accumulate (tf.compat.v1.scatter_nd_add). Returns the variable's
    updated value."""
    return _scatter(state_ops.ScatterNdAdd, ref, indices, updates, use_locking, name)


def scatter_nd_sub(ref, indices, updates, use_locking=False, name=None):
    """Subtracts `updates` from the slices addressed by `indices` (tf.compat.v1.scatter_nd_sub)."""
    return _scatter(state_ops.ScatterNdSub, ref, indices, updates, use_locking, name)


def scatter_nd_update(ref, indices, updates, use_locking=True, name=None):
    """Overwrites the slices addressed by `indices` with `updates` (tf.compat.v1.scatter_nd_update)."""
    return _scatter(state_ops.ScatterNdUpdate, ref, indices, updates, use_locking, name)


def is_variable_initialized(variable, name=None):
    return state_ops.IsVariableInitialized(_ref_of(variable), name=name)


def global_variables(scope=None):
    """Variables in the GLOBAL_VARIABLES collection (tf.compat.v1.global_variables)."""
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def trainable_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
    """An op that runs the initializers of `var_list` (tf.compat.v1.variables_initializer)."""
    if var_list:
        return group(*[v.initializer for v in var_list], name=name)
    from actorflow.graph.ops.constant import no_op
    return no_op(name=name)


def global_variables_initializer():
    """An op that initializes every global variable (tf.compat.v1.global_variables_initializer)."""
    return variables_initializer(global_variables(), name="init")


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init_local")


def initialize_all_variables():
    return global_variables_initializer()


def _install_operators() -> None:
    from actorflow.graph.ops.overloads import install
    install(Variable)


_install_operators()
