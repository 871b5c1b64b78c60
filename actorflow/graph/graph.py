"""Graph, Operation and Tensor: the dataflow program (tf.Graph, tf.Operation, tf.Tensor)."""
from __future__ import annotations

import contextlib
import functools
import re
import threading

import msgpack
import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, get_op_def
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["Graph", "Operation", "Tensor", "get_default_graph", "reset_default_graph",
           "name_scope", "control_dependencies", "device", "colocate_with", "GraphKeys",
           "convert_to_tensor", "add_to_collection", "get_collection", "get_collection_ref",
           "get_default_session", "default_session"]

# Installed by actorflow.summary.graph_def: (graph, from_version, add_shapes) -> GraphDef.
_graph_def_hook = None
# Installed by actorflow.summary.graph_def: Operation -> NodeDef (Operation.node_def).
_node_def_hook = None


@functools.cache
def _import_op_modules() -> None:
    """Imports every op definition module: a worker rebuilding a graph may not have imported the ones
    that only gradients or helpers use (AccumulatorV2 of a while loop's gradient, for one)."""
    import importlib
    import pkgutil

    from actorflow.graph import ops
    for m in pkgutil.iter_modules(ops.__path__):
        importlib.import_module(f"actorflow.graph.ops.{m.name}")


def tensors_name(inputs, i) -> str:
    x = inputs[i]
    return x.name if isinstance(x, Tensor) else repr(x)


# The ops a variable's reference comes from, and the ops that only read it (the snapshot, a fresh read).
_VARIABLE_OPS = frozenset(["VariableV2", "Variable", "TemporaryVariable"])
_PLAIN_READS = frozenset(["Identity", "_RefRead", "IsVariableInitialized"])


class GraphKeys:
    """Standard collection names (tf.GraphKeys)."""
    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    GLOBAL_STEP = "global_step"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    QUEUE_RUNNERS = "queue_runners"
    SAVERS = "savers"
    SUMMARIES = "summaries"
    SUMMARY_OP = "summary_op"
    INIT_OP = "init_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"
    TRAIN_OP = "train_op"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    READY_OP = "ready_op"
    LOCAL_INIT_OP = "local_init_op"
    TABLE_INITIALIZERS = "table_initializer"
    # Filled by tf.contrib's layers and legacy code (af.contrib), read by apply_regularization.
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"


class Tensor:
    """One output of an Operation: a symbolic handle with a dtype and a static shape.

    TF-1.x counterpart: `tf.Tensor`. As in TF 1.x, `==` is identity (tensors are hashable
    feed_dict keys); use `af.equal` for element-wise equality.
    """

    # `_keras_mask`: the boolean mask a Keras layer attached to its output (tf.keras masking: an
    # Embedding with mask_zero, a Masking layer); unset on other tensors, as in TF, where
    # `getattr(t, "_keras_mask", None)` reads it. `aliases`: the names slim's collect_named_outputs
    # records on a layer's output (contrib/layers_utils.py), unset until then, as in TF.
    __slots__ = ("op", "value_index", "dtype", "_shape", "_consumers", "_keras_mask", "aliases", "__weakref__")
    __array_priority__ = 100

    def __init__(self, op: "Operation", value_index: int, dtype, shape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtypes.as_dtype(dtype)
        self._shape = as_shape(shape)
        self._consumers: list[Operation] = []

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def device(self) -> str:
        return self.op.device

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        """Refines the static shape (tf.Tensor.set_shape); incompatible shapes raise ValueError."""
        try:
            self._shape = self._shape.merge_with(as_shape(shape))
        except ValueError:
            raise ValueError(f"Tensor '{self.name}' has shape {self._shape}, which is not "
                             f"compatible with {as_shape(shape)}") from None

    def consumers(self) -> list["Operation"]:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        sess = session or get_default_session()
        if sess is None:
            raise ValueError("Cannot evaluate tensor using `eval()`: no default session is registered. "
                             "Use `with sess.as_default()` or pass an explicit session.")
        return sess.run(self, feed_dict)

    def __repr__(self):
        return f"<af.Tensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    def __bool__(self):
        raise TypeError(f"Using an af.Tensor ('{self.name}') as a Python bool is not allowed; "
                        "use af.cond to branch on a tensor's value.")

    def __iter__(self):
        dims = self._shape.dims
        if dims is None or not dims or dims[0] is None:
            raise TypeError(f"Tensor '{self.name}' is not iterable: its first dimension is unknown.")
        for i in range(dims[0]):
            yield self[i]

    def __len__(self):
        dims = self._shape.dims
        if dims is None or not dims or dims[0] is None:
            raise TypeError(f"len() of tensor '{self.name}' is unknown: its first dimension is not static.")
        return dims[0]

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    # Arithmetic operators are installed by actorflow.graph.ops.overloads.


class Operation:
    """A node of the graph (tf.Operation): an op type, input tensors, attributes and a device."""

    __slots__ = ("name", "type", "inputs", "control_inputs", "outputs", "attrs", "device",
                 "graph", "_id", "op_def", "_control_outputs", "__weakref__")

    def __init__(self, graph, name, op_type, inputs, control_inputs, attrs, device, output_specs):
        self.graph = graph
        self.name = name
        self.type = op_type
        self.op_def = get_op_def(op_type)
        self.inputs = tuple(inputs)
        self.control_inputs = list(control_inputs)
        self.attrs = attrs
        self.device = device or ""
        self._id = graph._next_id()
        self.outputs = tuple(Tensor(self, i, dt, sh) for i, (dt, sh) in enumerate(output_specs))
        self._control_outputs: list[Operation] = []

    @property
    def node_def(self):
        """This op as TF's NodeDef protobuf (name, op, input, device, attr), as tf.Operation.node_def
        returns it; device functions (`af.device(fn)`) commonly read its `.op`."""
        if _node_def_hook is None:
            raise ImportError("Operation.node_def needs actorflow.summary (import actorflow installs it)")
        return _node_def_hook(self)

    def get_attr(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self.name}' ({self.type}) has no attr named '{name}'") from None

    def values(self):
        return self.outputs

    def _add_control_input(self, op: "Operation") -> None:
        if op not in self.control_inputs:
            self.control_inputs.append(op)
            op._control_outputs.append(self)
            self.graph._version += 1
            self.graph._rewired += 1

    def _update_input(self, index: int, tensor: "Tensor") -> None:
        """Rewires input `index` (used to close loops: Merge's back edge from NextIteration)."""
        old = self.inputs[index]
        if tensor.dtype is not old.dtype:
            raise TypeError(f"Cannot rewire input {index} of '{self.name}' from {old.dtype.name} to {tensor.dtype.name}")
        old._consumers.remove(self)
        self.inputs = self.inputs[:index] + (tensor,) + self.inputs[index + 1:]
        tensor._consumers.append(self)
        self.graph._version += 1
        self.graph._rewired += 1

    def run(self, feed_dict=None, session=None):
        sess = session or get_default_session()
        if sess is None:
            raise ValueError(f"Cannot run operation '{self.name}': no default session is registered.")
        sess.run(self, feed_dict)

    def __repr__(self):
        return f"<af.Operation '{self.name}' type={self.type}>"


_VALID_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE = re.compile(r"^[A-Za-z0-9_.\-/>]*$")


def _normalize_attr(v):
    if isinstance(v, (list, tuple)):
        return tuple(_normalize_attr(x) for x in v)
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.dtype):
        return dtypes.as_dtype(v)
    return v


class Graph:
    """A dataflow graph (tf.Graph): operations, their name scopes, collections and seed."""

    def __init__(self):
        self._ops: list[Operation] = []
        self._ops_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._id_counter = 0
        self._version = 0
        self._rewired = 0             # bumped when an existing op's inputs change (ancestry caches)
        self._touched_refs: dict = {}  # Operation -> refs its ancestry hands to stateful consumers
        self._touched_at = 0           # the _rewired count _touched_refs holds for
        self._lock = threading.RLock()
        self._finalized = False
        self.seed = None
        self._seeds_drawn = 0   # op seeds get_seed has handed out under the graph seed
        self._local = threading.local()
        self._gradient_override_map: dict = {}
        self._container = ""           # tf.container's name for the stateful ops created now

    # -- per-thread construction state -------------------------------------------------------
    def _state(self):
        s = self._local
        if not hasattr(s, "name_stack"):
            s.name_stack = ""
            s.control_stack = []   # list of lists of Operations; None entry clears
            s.device_stack = []    # strings or callables
            s.colocate_stack = []  # Operations
            s.context = None       # control-flow context (cond / while) being built
        return s

    def _next_id(self) -> int:
        self._id_counter += 1
        return self._id_counter

    @property
    def version(self) -> int:
        return self._version

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        self._finalized = True

    # -- defaults ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        """Makes this graph the default graph of the current thread (tf.Graph.as_default)."""
        stack = _default_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # -- names ------------------------------------------------------------------------------
    def get_name_scope(self) -> str:
        return self._state().name_stack.rstrip("/")

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        stack = self._state().name_stack
        if stack:
            name = stack + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while True:
                candidate = f"{base}_{i}"
                if candidate not in self._names_in_use:
                    break
                i += 1
            if mark_as_used:
                self._names_in_use[candidate] = 1
            name = f"{name}_{i}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name):
        """Pushes a name scope (tf.name_scope). A name ending in '/' is taken as absolute;
        None or '' resets to the root scope. Yields the scope string, ending in '/'."""
        st = self._state()
        old = st.name_stack
        if name is None or name == "":
            new = ""
        elif name.endswith("/"):
            if not _VALID_SCOPE.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = name
        else:
            if not _VALID_SCOPE.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name) + "/"
        st.name_stack = new
        try:
            yield new
        finally:
            st.name_stack = old

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map):
        """Ops of the types in `op_type_map` created inside use the gradient registered under the
        mapped name (af.RegisterGradient) instead of their type's (tf.Graph.gradient_override_map)."""
        if not isinstance(op_type_map, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in op_type_map.items()):
            raise TypeError("op_type_map must be a dictionary mapping strings to strings")
        saved = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map.clear()
            self._gradient_override_map.update(saved)

    # -- control dependencies, devices, colocation ----------------------------------------------
    def _refs_touched_before(self, op: "Operation") -> frozenset:
        """The reference tensors (variables' VariableV2 outputs) that `op` or an op it depends on,
        through data or control edges, takes as an input other than through a plain read: what may
        have written them by the time `op` has run. Cached per op; an op's ancestry changes only when
        its inputs are rewired."""
        cache = self._touched_refs
        if self._touched_at != self._rewired:
            cache.clear()
            self._touched_at = self._rewired
        hit = cache.get(op)
        if hit is not None:
            return hit
        touched, seen, stack = set(), {op}, [op]
        while stack:
            o = stack.pop()
            for t in o.inputs:
                if t.op.type in _VARIABLE_OPS and o.type not in _PLAIN_READS:
                    touched.add(t)
                if t.op not in seen:
                    seen.add(t.op)
                    stack.append(t.op)
            for c in o.control_inputs:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        cache[op] = hit = frozenset(touched)
        return hit

    def _control_may_write_variables(self) -> bool:
        """Whether an op of the current control_dependencies, or one it depends on, may write a variable."""
        return any(self._refs_touched_before(c) for frame in self._state().control_stack for c in frame)

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Ops created inside run after `control_inputs` (tf.control_dependencies); None clears."""
        st = self._state()
        if control_inputs is None:
            saved = st.control_stack
            st.control_stack = []
            try:
                yield
            finally:
                st.control_stack = saved
            return
        ops = []
        for c in control_inputs:
            c = _as_op(c, self)
            if c is not None:
                ops.append(c)
        st.control_stack.append(ops)
        try:
            yield
        finally:
            st.control_stack.pop()

    @contextlib.contextmanager
    def device(self, spec):
        """Device constraint for ops created inside (tf.device): a string or a function of the op."""
        st = self._state()
        st.device_stack.append(spec)
        try:
            yield
        finally:
            st.device_stack.pop()

    @contextlib.contextmanager
    def container(self, container_name: str):
        """Stateful ops created inside (variables, queues, tables) get `container_name` as their
        "container" attribute (tf.Graph.container; TF resets such containers by name)."""
        if not isinstance(container_name, str):
            raise TypeError(f"container name must be a string, got {type(container_name).__name__}")
        saved = self._container
        self._container = container_name
        try:
            yield container_name
        finally:
            self._container = saved

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing=False):
        st = self._state()
        target = _as_op(op, self) if op is not None else None
        saved = st.colocate_stack
        saved_dev = st.device_stack
        if ignore_existing:
            st.colocate_stack = []
        st.colocate_stack = st.colocate_stack + [target]
        if target is not None:
            # As in TF, colocation overrides device scopes and functions inside it.
            st.device_stack = []
        try:
            yield
        finally:
            st.colocate_stack = saved
            st.device_stack = saved_dev

    def _current_device(self, op_stub) -> str:
        from actorflow.graph.device_spec import merge_device
        dev = ""
        for spec in self._state().device_stack:
            if spec is None:
                dev = ""
                continue
            s = spec(op_stub) if callable(spec) else spec
            if hasattr(s, "to_string"):
                s = s.to_string()
            dev = merge_device(dev, s or "")
        return dev

    # -- op creation ------------------------------------------------------------------------
    def create_op(self, op_type: str, inputs, attrs=None, name=None, device=None) -> Operation:
        """Adds an operation of `op_type` with the given inputs and attributes; infers outputs."""
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        op_def = get_op_def(op_type)
        tensors = []
        for x in inputs:
            if not isinstance(x, Tensor):
                x = convert_to_tensor(x)
            if x.graph is not self:
                capture = self.__dict__.get("_capture")
                x = capture(x) if capture is not None else None
                if x is None:
                    raise ValueError(f"Tensor {tensors_name(inputs, len(tensors))} must be from the same graph as "
                                     f"the {op_type} op being created.")
            tensors.append(x)
        attrs = {k: _normalize_attr(v) for k, v in (attrs or {}).items()}
        if self._container and attrs.get("container") == "":
            attrs["container"] = self._container
        override = self.__dict__.get("_gradient_override_map")
        if override and op_type in override:
            attrs["_gradient_op_type"] = override[op_type]
        st = self._state()
        with self._lock:
            if name is not None and not _VALID_NAME.match(name.split("/")[-1] or "x"):
                raise ValueError(f"'{name}' is not a valid node name")
            if name is not None and name.endswith("/"):
                # A name ending in "/" is an exact name already reserved by a name scope.
                full = name[:-1]
                if full in self._ops_by_name:
                    raise ValueError(f"Duplicate node name in graph: '{full}'")
            else:
                full = self.unique_name(name if name is not None else op_type)
            try:
                specs = op_def.infer(tensors, attrs)
            except (InferenceError, ValueError, TypeError) as e:
                raise type(e)(f"{e} (op '{full}' of type {op_type}, inputs: "
                              + ", ".join(f"{t.name} {t.shape} {t.dtype.name}" for t in tensors) + ")") from None
            control = []
            seen = {t.op for t in tensors}
            for frame in st.control_stack:
                for c in frame:
                    if c not in seen and c not in control:
                        control.append(c)
            if st.context is not None:
                control, tensors = st.context.add_op_hook(self, op_type, tensors, control)
            op = Operation(self, full, op_type, tensors, control, attrs, "", specs)
            dev = device if device is not None else self._current_device(op)
            if st.colocate_stack and st.colocate_stack[-1] is not None:
                # Colocation wins over device scopes, as in TF.
                target = st.colocate_stack[-1]
                groups = list(target.attrs.get("_class", ())) or [f"loc:@{target.name}"]
                op.attrs["_class"] = tuple(groups)
                dev = target.device or dev
            op.device = dev
            for t in tensors:
                t._consumers.append(op)
            for c in control:
                c._control_outputs.append(op)
            self._ops.append(op)
            self._ops_by_name[full] = op
            self._version += 1
        if st.context is not None:
            st.context.post_op_hook(op)
        return op

    def _insert_op(self, name, op_type, inputs, control, attrs, device, output_specs) -> "Operation":
        """Appends an op exactly as given, without inference or name scopes (deserialization,
        partitioning)."""
        op = Operation(self, name, op_type, inputs, control, attrs, device, output_specs)
        for t in inputs:
            t._consumers.append(op)
        for c in control:
            c._control_outputs.append(op)
        self._ops.append(op)
        self._ops_by_name[name] = op
        self._names_in_use[name.lower()] = 1
        self._version += 1
        return op

    # -- lookup -----------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings, got {type(name).__name__}")
        if ":" in name:
            raise ValueError(f"Name '{name}' looks like a tensor name; use get_tensor_by_name.")
        try:
            return self._ops_by_name[name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str) or ":" not in name:
            raise ValueError(f"The name '{name}' looks like an (invalid) Operation name, not a Tensor. "
                             "Tensor names must be of the form \"<op_name>:<output_index>\".")
        op_name, _, idx = name.rpartition(":")
        try:
            op = self._ops_by_name[op_name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. "
                           f"The operation, '{op_name}', does not exist in the graph.") from None
        try:
            return op.outputs[int(idx)]
        except (ValueError, IndexError):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                           f"'{op_name}', exists but only has {len(op.outputs)} outputs.") from None

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj.name} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj.name} is not an element of this graph.")
            return obj
        if hasattr(obj, "_as_graph_element"):
            return self.as_graph_element(obj._as_graph_element(), allow_tensor, allow_operation)
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                return self.get_tensor_by_name(obj)
            if allow_operation:
                return self.get_operation_by_name(obj)
        raise TypeError(f"Can not convert a {type(obj).__name__} into a graph element.")

    # -- collections --------------------------------------------------------------------------
    def add_to_collection(self, name, value):
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value):
        for n in ([names] if isinstance(names, str) else names):
            self.add_to_collection(n, value)

    def get_collection(self, name, scope=None):
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        rx = re.compile(scope)
        return [x for x in items if rx.match(getattr(x, "name", ""))]

    def get_collection_ref(self, name):
        return self._collections.setdefault(name, [])

    def get_all_collection_keys(self):
        return list(self._collections)

    def clear_collection(self, name):
        self._collections.pop(name, None)

    # -- serialization ---------------------------------------------------------------------------
    def as_graph_def(self, from_version=None, add_shapes=False):
        """This graph as TF's GraphDef protobuf (tf.Graph.as_graph_def), through TensorBoard's
        published proto classes (the `summary` extra). Differs from TF: `from_version` must be
        None (actorflow's `version` also counts graph edits), and `add_shapes` defaults to False
        as in TF. The conversion lives in
        actorflow/summary/graph_def.py, which installs itself here (layers: graph sits below it);
        see there for what is left out of the NodeDefs."""
        if _graph_def_hook is None:
            raise ImportError("Graph.as_graph_def needs actorflow.summary (import actorflow installs it)")
        return _graph_def_hook(self, from_version, add_shapes)

    def to_msgpack(self) -> bytes:
        """Serializes every op, attribute, device and output signature (the cluster's graph format)."""
        ops = []
        for op in self._ops:
            ops.append({
                "name": op.name, "type": op.type, "device": op.device,
                "inputs": [t.name for t in op.inputs],
                "control": [c.name for c in op.control_inputs],
                "attrs": op.attrs,
                "outputs": [(t.dtype.name, None if t.shape.dims is None else list(t.shape.dims)) for t in op.outputs],
            })
        colls = {}
        for key, items in self._collections.items():
            names = [x.name for x in items if isinstance(x, (Tensor, Operation))]
            if len(names) == len(items):
                colls[key] = names
        return msgpack.packb({"version": 1, "seed": self.seed, "ops": ops, "collections": colls},
                             default=_encode_ext, use_bin_type=True)

    @classmethod
    def from_msgpack(cls, data: bytes) -> "Graph":
        """Rebuilds a graph serialized by `to_msgpack`, without re-running inference."""
        doc = msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=False, strict_map_key=False)
        _import_op_modules()
        g = cls()
        g.seed = doc.get("seed")
        back_edges = []
        for rec in doc["ops"]:
            inputs = []
            for i, n in enumerate(rec["inputs"]):
                if n.rsplit(":", 1)[0] in g._ops_by_name:
                    inputs.append(g.get_tensor_by_name(n))
                else:
                    # A loop back edge (Merge <- NextIteration) names an op serialized after this one:
                    # wire a stand-in of the same dtype now and the real source once it exists.
                    inputs.append(None)
                    back_edges.append((rec["name"], i, n))
            stand_in = next((t for t in inputs if t is not None), None)
            if stand_in is None and inputs:
                raise ValueError(f"Op '{rec['name']}' has no input defined before it")
            inputs = [t if t is not None else stand_in for t in inputs]
            control = [g.get_operation_by_name(n) for n in rec["control"]]
            op = g._insert_op(rec["name"], rec["type"], inputs, control, dict(rec["attrs"]), rec["device"],
                              [(dt, TensorShape(None if sh is None else list(sh))) for dt, sh in rec["outputs"]])
            parts = op.name.split("/")
            for i in range(1, len(parts)):
                g._names_in_use.setdefault("/".join(parts[:i]).lower(), 1)
        for name, i, n in back_edges:
            g._ops_by_name[name]._update_input(i, g.get_tensor_by_name(n))
        for key, names in doc.get("collections", {}).items():
            g._collections[key] = [g.as_graph_element(n) for n in names]
        return g


_EXT_DTYPE, _EXT_SHAPE, _EXT_NDARRAY, _EXT_NONE_TUPLE, _EXT_STRINGS = 1, 2, 3, 4, 5
_EXT_OBJECT = 6
_ATTR_TYPES: dict = {}      # kind -> decode(payload), for attribute values of other layers' types


def register_attr_type(kind: str, decode) -> None:
    """Lets attribute values of a type defined elsewhere (a graph function, a dataset's generator)
    travel in serialized graphs: the value's `_attr_payload()` returns `(kind, payload)`, a
    msgpack-able payload, and `decode(payload)` rebuilds the value."""
    _ATTR_TYPES[kind] = decode


def _encode_ext(obj):
    if isinstance(obj, dtypes.DType):
        return msgpack.ExtType(_EXT_DTYPE, obj.name.encode())
    if isinstance(obj, TensorShape):
        return msgpack.ExtType(_EXT_SHAPE, msgpack.packb(None if obj.dims is None else list(obj.dims)))
    if isinstance(obj, np.ndarray) and obj.dtype == object:
        # A string constant: its shape and its elements as msgpack bin values.
        return msgpack.ExtType(_EXT_STRINGS, msgpack.packb([list(obj.shape), [bytes(x) for x in obj.reshape(-1)]],
                                                           use_bin_type=True))
    if isinstance(obj, np.ndarray):
        arr = obj if obj.flags.c_contiguous else obj.copy(order="C")   # (ascontiguousarray makes 0-d 1-d)
        header = msgpack.packb([arr.dtype.str, list(arr.shape)])
        return msgpack.ExtType(_EXT_NDARRAY, len(header).to_bytes(4, "little") + header + arr.tobytes())
    if isinstance(obj, np.generic):
        return obj.item()
    payload = getattr(obj, "_attr_payload", None)
    if payload is not None:
        return msgpack.ExtType(_EXT_OBJECT, msgpack.packb(list(payload()), default=_encode_ext, use_bin_type=True))
    raise TypeError(f"Cannot serialize attribute value of type {type(obj).__name__}")


def _decode_ext(code, data):
    if code == _EXT_DTYPE:
        return dtypes.as_dtype(data.decode())
    if code == _EXT_SHAPE:
        dims = msgpack.unpackb(data)
        return TensorShape(dims)
    if code == _EXT_NDARRAY:
        n = int.from_bytes(data[:4], "little")
        dt, shape = msgpack.unpackb(data[4:4 + n])
        return np.frombuffer(data, dtype=np.dtype(dt), offset=4 + n).reshape(shape)
    if code == _EXT_STRINGS:
        shape, items = msgpack.unpackb(data, raw=False)
        arr = np.empty(len(items), dtype=object)
        arr[:] = [bytes(x) for x in items]
        return arr.reshape(shape)
    if code == _EXT_OBJECT:
        kind, payload = msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=False, strict_map_key=False)
        if kind not in _ATTR_TYPES:
            raise ValueError(f"Unknown attribute type '{kind}' in serialized graph")
        return _ATTR_TYPES[kind](payload)
    raise ValueError(f"Unknown msgpack extension type {code} in serialized graph")


def _as_op(x, graph):
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    if hasattr(x, "_as_graph_element"):
        return _as_op(x._as_graph_element(), graph)
    if hasattr(x, "op") and isinstance(x.op, Operation):
        return x.op
    if isinstance(x, str):
        el = graph.as_graph_element(x)
        return el.op if isinstance(el, Tensor) else el
    if x is None:
        return None
    raise TypeError(f"Can not use {type(x).__name__} as a control input")


# -- default graph stack ---------------------------------------------------------------------
_global_default_graph: Graph | None = None
_thread_local = threading.local()


def _default_stack() -> list:
    s = getattr(_thread_local, "stack", None)
    if s is None:
        s = _thread_local.stack = []
    return s


def get_default_graph() -> Graph:
    """The innermost graph of `with g.as_default()`, else the global default (tf.get_default_graph)."""
    stack = _default_stack()
    if stack:
        return stack[-1]
    global _global_default_graph
    if _global_default_graph is None:
        _global_default_graph = Graph()
    return _global_default_graph


def reset_default_graph() -> None:
    """Replaces the global default graph with a fresh one (tf.reset_default_graph)."""
    if _default_stack():
        raise AssertionError("Do not use reset_default_graph() to clear nested graphs.")
    global _global_default_graph
    _global_default_graph = Graph()


# -- default session stack -------------------------------------------------------------------
# Kept here, beside the default graph, as TF's ops.py keeps it: `Tensor.eval` and `Operation.run`
# use it, and the session layer above pushes onto it (`with sess.as_default()`). A session is any
# object with `run(fetches, feed_dict)`.
def _session_stack() -> list:
    s = getattr(_thread_local, "sessions", None)
    if s is None:
        s = _thread_local.sessions = []
    return s


def get_default_session():
    """The innermost session entered with `with sess.as_default()` or `with sess:`, in this thread
    (tf.compat.v1.get_default_session), or None."""
    s = _session_stack()
    return s[-1] if s else None


@contextlib.contextmanager
def default_session(session):
    """Makes `session` the default session of this thread inside the block (what
    `Session.as_default()` does)."""
    stack = _session_stack()
    stack.append(session)
    try:
        yield session
    finally:
        stack.remove(session)


def push_default_session(session) -> None:
    """Makes `session` the default of this thread until `pop_default_session(session)`
    (tf.compat.v1.InteractiveSession's lifetime)."""
    _session_stack().append(session)


def pop_default_session(session) -> None:
    stack = _session_stack()
    if session in stack:
        stack.remove(session)


def name_scope(name, default_name=None, values=None):
    """tf.name_scope / tf.compat.v1.name_scope on the default graph."""
    g = get_default_graph()
    if values:
        for v in values:
            if isinstance(v, Tensor):
                g = v.graph
                break
    return g.name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def device(spec):
    return get_default_graph().device(spec)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def container(container_name):
    """tf.container: the default graph's `Graph.container`."""
    return get_default_graph().container(container_name)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def get_collection(name, scope=None):
    return get_default_graph().get_collection(name, scope)


def get_collection_ref(name):
    return get_default_graph().get_collection_ref(name)


def _holds_tensors(value) -> bool:
    return any(isinstance(v, Tensor) or hasattr(v, "_as_graph_element")
               or (isinstance(v, (list, tuple)) and _holds_tensors(v)) for v in value)


def _autopack(value, dtype, name) -> Tensor:
    """A (nested) list holding tensors becomes one stacked tensor, as TF's auto-packing conversion does:
    `tf.stop_gradient([y])` is `tf.stop_gradient(tf.stack([y]))`."""
    from actorflow.graph.ops.array_ops.packing import stack
    if dtype is None:          # the elements' common dtype is the first tensor's, as in TF
        dtype = next(convert_to_tensor(v).dtype for v in _flatten_packable(value)
                     if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"))
    elems = [_autopack(v, dtype, "packed") if isinstance(v, (list, tuple)) and _holds_tensors(v)
             else convert_to_tensor(v, dtype=dtype) for v in value]
    return stack(elems, name=name)


def _flatten_packable(value):
    for v in value:
        if isinstance(v, (list, tuple)):
            yield from _flatten_packable(v)
        else:
            yield v


# (priority, order registered, base type, function) of register_tensor_conversion_function, sorted.
_CONVERSIONS: list = []


def register_tensor_conversion_function(base_type, conversion_func, priority=100):
    """Makes convert_to_tensor turn instances of `base_type` (a type or tuple of types) into tensors
    with `conversion_func(value, dtype=None, name=None, as_ref=False)`, which returns a Tensor or
    NotImplemented (tf.register_tensor_conversion_function). Lower priorities are tried first.
    Python numbers and numpy values cannot be registered, as in TF."""
    types = base_type if isinstance(base_type, tuple) else (base_type,)
    if not types or not all(isinstance(t, type) for t in types):
        raise TypeError(f"Argument `base_type` must be a type or a tuple of types. Obtained: {base_type}")
    import numpy as _np
    if any(issubclass(t, (int, float, complex, _np.generic, _np.ndarray)) for t in types):
        raise TypeError("Cannot register conversions for Python numeric types and NumPy scalars and arrays.")
    if not callable(conversion_func):
        raise TypeError(f"Argument `conversion_func` must be callable. Received {conversion_func}.")
    _CONVERSIONS.append((int(priority), len(_CONVERSIONS), types, conversion_func))
    _CONVERSIONS.sort(key=lambda c: (c[0], c[1]))


def _registered_conversion(value, dtype, name):
    for _, _, types, fn in _CONVERSIONS:
        if isinstance(value, types):
            out = fn(value, dtype=dtype, name=name, as_ref=False)
            if out is NotImplemented:
                continue
            if not isinstance(out, Tensor):
                raise RuntimeError(f"Conversion function {fn!r} for type {type(value).__name__} returned "
                                   f"non-Tensor: {out!r}")
            if dtype is not None and out.dtype is not dtypes.as_dtype(dtype):
                raise RuntimeError(f"Conversion function {fn!r} for type {type(value).__name__} returned incompatible "
                                   f"dtype: requested = {dtypes.as_dtype(dtype).name}, actual = {out.dtype.name}")
            return out
    return None


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None) -> Tensor:
    """Converts Python and numpy values to a Const tensor (tf.convert_to_tensor); values of types
    given to `register_tensor_conversion_function` by their functions."""
    if isinstance(value, Tensor):
        if dtype is not None and dtypes.as_dtype(dtype) is not value.dtype:
            raise ValueError(f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for Tensor "
                             f"with dtype {value.dtype.name}: {value!r}")
        return value
    conv = getattr(value, "_conversion_tensor", None)
    if conv is not None:                 # a variable: its read for an op built now
        return convert_to_tensor(conv(), dtype, name)
    if hasattr(value, "_as_graph_element"):
        return convert_to_tensor(value._as_graph_element(), dtype, name)
    if _CONVERSIONS:
        out = _registered_conversion(value, dtype, name)
        if out is not None:
            return out
    if isinstance(value, (list, tuple)) and _holds_tensors(value):
        return _autopack(value, dtype, name or "packed")
    from actorflow.graph.ops.constant import constant
    if dtype is None and preferred_dtype is not None:
        try:
            return constant(value, dtype=preferred_dtype, name=name)
        except (TypeError, ValueError):
            pass
    return constant(value, dtype=dtype, name=name)
