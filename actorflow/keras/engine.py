"""The Keras layer base (tf.keras.layers.Layer of TF 1.x, graph mode), Input and InputLayer.

A Keras layer is an af.layers layer (variables made once with get_variable in the layer's
variable scope, so they are ordinary af Variables in GLOBAL_VARIABLES / TRAINABLE_VARIABLES) with
Keras's additions:

- names "dense", "dense_1", ... per graph (Keras's zero-based unique names);
- string activations, initializers, regularizers and constraints;
- `training` defaulting to `keras.backend.learning_phase()` for layers whose `call` takes it;
- every call is recorded as a Node (the layer, its input and output tensors, the call's
  arguments), and each output tensor remembers the node that made it. A functional Model finds
  its layers by walking back from its outputs, and replays the nodes to be called on new inputs;
- `get_weights`/`set_weights` through `backend.get_session()`, `input`/`output`/`output_shape`,
  `get_config`/`from_config`, `count_params`.
"""
from __future__ import annotations

import inspect
import itertools
import weakref

import numpy as np

from actorflow import layers as _tfl
from actorflow.graph import dtypes, nest
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.initializers import Initializer
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import identity, placeholder
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variables import Variable
from actorflow.keras import activations, constraints, initializers, regularizers
from actorflow.keras import backend as K

__all__ = ["Layer", "InputLayer", "Input", "InputSpec", "Node", "keras_history"]

# output tensor -> (layer, node index, tensor index): how the tensor was made.
_HISTORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def keras_history(t):
    """(layer, node_index, tensor_index) of a tensor a Keras layer made, else None."""
    try:
        return _HISTORY.get(t)
    except TypeError:
        return None


_NODE_SEQ = itertools.count()


class Node:
    """One call of a layer: its inputs and outputs (nested as given and returned), the call's
    other arguments, and the update ops and losses the call added."""

    def __init__(self, layer, inputs, outputs, args, kwargs, updates=(), losses=()):
        self.seq = next(_NODE_SEQ)
        self.layer, self.inputs, self.outputs = layer, inputs, outputs
        self.updates, self.losses = list(updates), list(losses)
        self.args, self.kwargs = tuple(args), dict(kwargs)
        self.input_tensors = [t for t in nest.flatten(inputs) if isinstance(t, Tensor)]
        self.output_tensors = [t for t in nest.flatten(outputs) if isinstance(t, Tensor)]


class InputSpec:
    """What a layer accepts as input (tf.keras.layers.InputSpec): a dtype, a shape (None for any
    size), a rank or a range of ranks, and sizes of given axes. A layer that sets `input_spec` (one
    spec, or a list, one per input) has each call's inputs checked against it, with TF's messages."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None, axes=None,
                 allow_last_axis_squeeze=False, name=None):
        self.dtype = dtypes.as_dtype(dtype).name if dtype is not None else None
        self.shape = tuple(shape) if shape is not None else None
        self.ndim = len(self.shape) if self.shape is not None else ndim
        self.max_ndim, self.min_ndim = max_ndim, min_ndim
        self.name = name
        self.allow_last_axis_squeeze = allow_last_axis_squeeze
        self.axes = {int(k): v for k, v in (axes or {}).items()}
        if self.axes and self.ndim is not None:
            bad = [k for k in self.axes if k >= self.ndim or k < -self.ndim]
            if bad:
                raise ValueError(f"Axis {bad[0]} is greater than the maximum allowed value: {self.ndim - 1}")

    def __repr__(self):
        spec = [f"dtype={self.dtype}" if self.dtype else "", f"shape={self.shape}" if self.shape else "",
                f"ndim={self.ndim}" if self.ndim is not None else "",
                f"max_ndim={self.max_ndim}" if self.max_ndim is not None else "",
                f"min_ndim={self.min_ndim}" if self.min_ndim is not None else "",
                f"axes={self.axes}" if self.axes else ""]
        return f"InputSpec({', '.join(x for x in spec if x)})"

    def get_config(self):
        return {"dtype": self.dtype, "shape": self.shape, "ndim": self.ndim, "max_ndim": self.max_ndim,
                "min_ndim": self.min_ndim, "axes": self.axes}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _check_input_spec(specs, inputs, layer_name):
    """Raises tf.keras's ValueError where `inputs` do not meet `specs`."""
    specs = nest.flatten(specs)
    flat = nest.flatten(inputs)
    if len(flat) != len(specs):
        raise ValueError(f"Layer {layer_name} expects {len(specs)} input(s), but it received {len(flat)} input "
                         f"tensors. Inputs received: {inputs}")
    for i, (x, spec) in enumerate(zip(flat, specs)):
        if spec is None or not isinstance(x, Tensor):
            continue
        shape = x.shape
        where = f"Input {i} of layer {layer_name} is incompatible with the layer"
        full = f"Full shape received: {tuple(shape.as_list()) if shape.ndims is not None else None}"
        nd = shape.ndims
        if spec.ndim is not None and nd is not None and nd != spec.ndim and not spec.allow_last_axis_squeeze:
            raise ValueError(f"{where}: expected ndim={spec.ndim}, found ndim={nd}. {full}")
        if spec.max_ndim is not None and nd is not None and nd > spec.max_ndim:
            raise ValueError(f"{where}: expected max_ndim={spec.max_ndim}, found ndim={nd}")
        if spec.min_ndim is not None and nd is not None and nd < spec.min_ndim:
            raise ValueError(f"{where}: expected min_ndim={spec.min_ndim}, found ndim={nd}. {full}")
        if spec.dtype is not None and x.dtype.base_dtype.name != spec.dtype:
            raise ValueError(f"{where}: expected dtype={spec.dtype}, found dtype={x.dtype.base_dtype.name}")
        if spec.axes and nd is not None:
            dims = shape.as_list()
            for axis, value in spec.axes.items():
                if value is not None and dims[axis] not in (value, None):
                    raise ValueError(f"{where}: expected axis {axis} of input shape to have value {value}, but "
                                     f"received input with shape {tuple(dims)}")
        if spec.shape is not None and nd is not None:
            for want, got in zip(spec.shape, shape.as_list()):
                if want is not None and got is not None and want != got:
                    raise ValueError(f"{where}: expected shape={spec.shape}, found shape={tuple(shape.as_list())}")


def _keras_name(cls_name: str) -> str:
    base = _tfl._snake_case(cls_name)
    uid = K.get_uid(base)
    return base if uid == 1 else f"{base}_{uid - 1}"


def _serial(v):
    """A config value as Keras writes it: activations by name, objects by class and config."""
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    if isinstance(v, (list, tuple)):
        return type(v)(_serial(x) for x in v)
    if isinstance(v, dtypes.DType):
        return v.name
    if inspect.isfunction(v):
        return v.__name__
    if isinstance(v, Initializer):
        return initializers.serialize(v)
    if hasattr(v, "get_config"):
        return {"class_name": type(v).__name__, "config": v.get_config()}
    return v


class Layer(_tfl.Layer):
    """Base class of Keras layers (tf.keras.layers.Layer in TF 1.x graph mode).

    Subclasses override `build(input_shape)`, `call(inputs, ...)` and `get_config`. A layer may
    be given `input_shape`, `batch_input_shape`, `batch_size` or `input_dim`; the first layer of
    a Sequential model takes its input's shape from them. No eager execution.

    Masking (tf.keras's): a layer's output tensors carry a boolean `_keras_mask` (an Embedding
    with `mask_zero`, a Masking layer, or any layer's `compute_mask`). A layer whose `call` takes
    `mask` receives its inputs' masks there unless the caller passes one; after the call each
    output gets the mask `compute_mask(inputs, mask)` gives, where the layer supports masking or
    overrides `compute_mask` (the base carries the mask through where `supports_masking`, else
    refuses one). Other layers drop the mask, as TF 1.x graph-mode Keras does.
    """
    _masking = False        # what `supports_masking` starts as (tf.keras sets it in __init__)

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        kwargs = self._keras_prelude(kwargs)
        super().__init__(trainable=trainable, name=name or _keras_name(type(self).__name__), dtype=dtype,
                         **kwargs)
        self._keras_post()

    # -- construction helpers shared with the af.layers-based classes ---------------------------
    def _keras_prelude(self, kwargs) -> dict:
        kwargs = dict(kwargs)
        batch_input_shape = kwargs.pop("batch_input_shape", None)
        input_shape = kwargs.pop("input_shape", None)
        input_dim = kwargs.pop("input_dim", None)
        batch_size = kwargs.pop("batch_size", None)
        input_length = kwargs.pop("_input_length", None)
        for k in ("autocast", "dynamic", "weights"):
            if k == "weights" and kwargs.get(k) is not None:
                self._initial_weights = kwargs.pop(k)
            kwargs.pop(k, None)
        if input_shape is None and input_dim is not None:
            input_shape = (input_length, input_dim) if input_length is not None else (input_dim,)
        if batch_input_shape is None and input_shape is not None:
            batch_input_shape = (batch_size,) + tuple(input_shape)
        self._batch_input_shape = None if batch_input_shape is None else tuple(batch_input_shape)
        return kwargs

    def _keras_post(self):
        self._inbound_nodes: list = []
        self.supports_masking = type(self)._masking
        params = inspect.signature(self.call).parameters
        self._call_takes_training = "training" in params
        names = list(params)
        self._call_takes_mask = "mask" in params
        self._mask_position = names.index("mask") - 1 if "mask" in names else None   # among *args

    def _init_keras(self, name, kwargs) -> tuple:
        """For the af.layers-based classes: Keras's kwargs stripped and the name chosen."""
        kwargs = self._keras_prelude(kwargs)
        return name or _keras_name(type(self).__name__), kwargs

    def add_weight(self, name=None, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                   constraint=None, **kwargs):
        """Creates a weight of this layer (tf.keras.layers.Layer.add_weight): initializer,
        regularizer and constraint by name or object; an af Variable named `<layer scope>/<name>`."""
        if name is None:
            raise ValueError(f"Layer {self.name}: add_weight needs a name")
        shape = [] if shape is None else [int(d) if d is not None else None for d in shape]
        n_losses = len(self._losses)
        v = super().add_weight(name, shape, dtype=dtype, initializer=initializers.get(initializer),
                               regularizer=regularizers.get(regularizer),
                               trainable=True if trainable is None else bool(trainable),
                               constraint=constraints.get(constraint), **kwargs)
        if not hasattr(self, "_weight_losses"):
            self._weight_losses = []
        self._weight_losses.extend(self._losses[n_losses:])
        return v

    @property
    def weight_losses(self) -> list:
        """The regularization losses of this layer's weights (not of its outputs): what a model
        that calls the layer adds to its loss whichever call built it."""
        return list(getattr(self, "_weight_losses", []))

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, inputs, *args, **kwargs):
        """Calls the layer on graph tensors (built on the first call) and records the call."""
        if self._call_takes_training and kwargs.get("training") is None and not args:
            kwargs["training"] = K.learning_phase()
        inputs = nest.map_structure(lambda t: t.value() if isinstance(t, Variable) else t, inputs)
        spec = getattr(self, "input_spec", None)
        if spec is not None:
            _check_input_spec(spec, inputs, self.name)
        input_masks, framework_mask = self._collect_input_masks(inputs, args, kwargs)
        if framework_mask:
            kwargs["mask"] = input_masks
        n_updates, n_losses = len(self.updates), len(self.losses)
        self._in_base_call = True
        try:
            outputs = super().__call__(inputs, *args, **kwargs)
        finally:
            self._in_base_call = False
        # An output that is one of the inputs, unchanged (a linear Activation, Dropout at inference),
        # becomes a copy, as in TF, so that it gets its own history and mask.
        input_ids = {id(t) for t in nest.flatten(inputs) if isinstance(t, Tensor)}
        if any(isinstance(t, Tensor) and id(t) in input_ids for t in nest.flatten(outputs)):
            outputs = nest.map_structure(
                lambda t: identity(t) if isinstance(t, Tensor) and id(t) in input_ids else t, outputs)
        reg = self.activity_regularizer
        if reg is not None:
            g = get_default_graph()
            with g.name_scope(f"{self.name}_activity_regularizer"):
                for out in nest.flatten(outputs):
                    loss = reg(out)
                    # TF 1.x Keras makes the strength independent of the batch size.
                    self.add_loss(loss / math_ops.cast(array_ops.shape(out)[0], loss.dtype))
        if getattr(self, "_initial_weights", None) is not None:
            weights, self._initial_weights = self._initial_weights, None
            self.set_weights(weights)
        self._set_mask_metadata(inputs, outputs, input_masks)
        if framework_mask:      # a replay of this call takes the masks of its new inputs
            kwargs = {k: v for k, v in kwargs.items() if k != "mask"}
        self._record(inputs, outputs, args, kwargs, self.updates[n_updates:], self.losses[n_losses:])
        return outputs

    # -- masking ------------------------------------------------------------------------------
    def _collect_input_masks(self, inputs, args, kwargs):
        """(masks, whether to pass them as `mask=`): the `mask` the caller passed, else the
        inputs' `_keras_mask`s (None where none has one)."""
        if "mask" in kwargs:
            return kwargs["mask"], False
        if self._mask_position is not None and len(args) > self._mask_position:
            return args[self._mask_position], False
        masks = nest.map_structure(lambda t: getattr(t, "_keras_mask", None), inputs)
        if all(m is None for m in nest.flatten(masks)):
            return None, False
        return masks, self._call_takes_mask

    def compute_mask(self, inputs, mask=None):
        """The mask of the outputs for inputs with `mask` (tf.keras.layers.Layer.compute_mask): the
        input mask where the layer supports masking, else None (and an error if given a mask)."""
        if not self.supports_masking:
            if any(m is not None for m in nest.flatten(mask)):
                raise TypeError(f"Layer {self.name} does not support masking, but was passed an input_mask: {mask}")
            return None
        return mask

    def _set_mask_metadata(self, inputs, outputs, input_masks):
        flat = [t for t in nest.flatten(outputs) if isinstance(t, Tensor)]
        if not flat:
            return
        if getattr(self, "_compute_output_and_mask_jointly", False) or \
                all(getattr(t, "_keras_mask", None) is not None for t in flat):
            return      # `call` set them
        if not (self.supports_masking or type(self).compute_mask is not Layer.compute_mask):
            masks = [None] * len(flat)
        else:
            out = self.compute_mask(inputs, input_masks)
            masks = [None] * len(flat) if out is None else nest.flatten(out)
        for t, m in zip(flat, masks):
            t._keras_mask = m

    @property
    def input_mask(self):
        """The mask(s) of the inputs of the layer's first call (None where unmasked)."""
        return nest.map_structure(lambda t: getattr(t, "_keras_mask", None), self._node("input mask").inputs)

    @property
    def output_mask(self):
        """The mask(s) of the outputs of the layer's first call (None where unmasked)."""
        return nest.map_structure(lambda t: getattr(t, "_keras_mask", None), self._node("output mask").outputs)

    def _record(self, inputs, outputs, args, kwargs, updates=(), losses=()):
        node = Node(self, inputs, outputs, args, kwargs, updates, losses)
        self._inbound_nodes.append(node)
        for i, t in enumerate(node.output_tensors):
            _HISTORY[t] = (self, len(self._inbound_nodes) - 1, i)

    @property
    def activity_regularizer(self):
        """The regularizer of the layer's outputs (its loss is divided by the batch size, as in TF 1.x Keras)."""
        return None if getattr(self, "_in_base_call", False) else getattr(self, "_activity_reg", None)

    @activity_regularizer.setter
    def activity_regularizer(self, value):
        self._activity_reg = regularizers.get(value)

    # -- facts --------------------------------------------------------------------------------
    def _node(self, what):
        if not self._inbound_nodes:
            raise AttributeError(f"Layer {self.name} is not connected, no {what} to return.")
        return self._inbound_nodes[0]

    @property
    def input(self):
        """The input tensor(s) of the layer's first call."""
        return self._node("input").inputs

    @property
    def output(self):
        """The output tensor(s) of the layer's first call."""
        return self._node("output").outputs

    @property
    def input_shape(self):
        """The static input shape(s) of the first call, as tuples with None for unknown sizes."""
        return nest.map_structure(K.int_shape, self._node("input shape").inputs) \
            if self._inbound_nodes else self._batch_input_shape

    @property
    def output_shape(self):
        """The static output shape(s) of the first call, as tuples with None for unknown sizes."""
        return nest.map_structure(K.int_shape, self._node("output shape").outputs)

    def get_input_at(self, node_index):
        return self._inbound_nodes[node_index].inputs

    def get_output_at(self, node_index):
        return self._inbound_nodes[node_index].outputs

    def count_params(self) -> int:
        """The number of scalars in the layer's weights (an error before it is built)."""
        if not self.built:
            raise ValueError(f"You tried to call `count_params` on {self.name}, but the layer isn't built.")
        return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in self.weights))

    def get_weights(self) -> list:
        """The values of `weights` as numpy arrays, read in `backend.get_session()`."""
        return K.batch_get_value(self.weights)

    def set_weights(self, weights) -> None:
        """Sets `weights` from numpy arrays, in order; a count or shape that does not match is an error."""
        params = self.weights
        weights = list(weights)
        if len(params) != len(weights):
            raise ValueError(f"You called `set_weights(weights)` on layer \"{self.name}\" with a weight list of "
                             f"length {len(weights)}, but the layer was expecting {len(params)} weights.")
        K.batch_set_value(list(zip(params, weights)))

    def compute_output_shape(self, input_shape):
        """The output shape for inputs of `input_shape` (a tuple with None for unknown sizes, or a
        list of them): from the layer's first call when its input shape was the same, else by
        calling a copy of the layer (from its config) on placeholders in a scratch graph."""
        def is_one(s):
            return isinstance(s, TensorShape) or not s or not isinstance(s[0], (tuple, list, TensorShape))
        shapes = [input_shape] if is_one(input_shape) else list(input_shape)
        shapes = [tuple(TensorShape(s).as_list()) for s in shapes]
        if self._inbound_nodes:
            seen = self.input_shape
            if (seen if not is_one(input_shape) else [seen]) == shapes:
                return self.output_shape
        from actorflow.graph.graph import Graph
        with Graph().as_default():
            clone = type(self).from_config(self.get_config())
            dtype = self._dtype or dtypes.as_dtype(K.floatx())
            phs = [placeholder(dtype, shape=list(s)) for s in shapes]
            out = clone(phs[0] if is_one(input_shape) else phs)
            return nest.map_structure(K.int_shape, out)

    # -- configuration ------------------------------------------------------------------------
    _config_keys: tuple = ()

    def get_config(self) -> dict:
        """The layer's constructor arguments, as Keras's get_config (objects as class and config)."""
        cfg = {"name": self.name, "trainable": self.trainable,
               "dtype": self._dtype.name if self._dtype is not None else K.floatx()}
        if self._batch_input_shape is not None:
            cfg["batch_input_shape"] = self._batch_input_shape
        for k in self._config_keys:
            cfg[k] = _serial(getattr(self, k))
        return cfg

    @classmethod
    def from_config(cls, config):
        """A new layer from `get_config()`'s dict (with a fresh name if the config's is taken)."""
        config = dict(config)
        config.pop("name", None)
        return cls(**config)


def _act(a):
    return activations.get(a)


def _init(i):
    return initializers.get(i)


def _reg(r):
    return regularizers.get(r)


def _con(c):
    return constraints.get(c)


class InputLayer(Layer):
    """The layer that holds a model's input placeholder (tf.keras.layers.InputLayer)."""

    def __init__(self, input_shape=None, batch_size=None, dtype=None, input_tensor=None, sparse=False, name=None,
                 **kwargs):
        if sparse:
            raise NotImplementedError("InputLayer: sparse inputs are not supported")
        batch_input_shape = kwargs.pop("batch_input_shape", None)
        if not name:
            name = f"input_{K.get_uid('input')}"
        super().__init__(name=name, dtype=dtype or K.floatx(), **kwargs)
        if input_tensor is None:
            if batch_input_shape is None:
                if input_shape is None:
                    raise ValueError("InputLayer needs input_shape, batch_input_shape or input_tensor")
                batch_input_shape = (batch_size,) + tuple(input_shape)
            g = get_default_graph()
            with g.name_scope(None):
                input_tensor = placeholder(dtypes.as_dtype(dtype or K.floatx()), shape=list(batch_input_shape),
                                           name=name)
        else:
            input_tensor = convert_to_tensor(input_tensor)
            batch_input_shape = K.int_shape(input_tensor)
        self._batch_input_shape = tuple(batch_input_shape) if batch_input_shape is not None else None
        self.is_placeholder = True
        self.built = True
        self._record([], input_tensor, (), {})

    def get_config(self):
        return {"batch_input_shape": self._batch_input_shape, "dtype": self._dtype.name, "sparse": False,
                "name": self.name}


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse=False, tensor=None, **kwargs):  # noqa: N802
    """A placeholder of [batch_size] + shape, with a Keras history, for functional models
    (tf.keras.Input). `tensor=` wraps an existing tensor instead."""
    batch_shape = kwargs.pop("batch_shape", None)
    if kwargs:
        raise TypeError(f"Input: unexpected keyword arguments {sorted(kwargs)}")
    if shape is None and batch_shape is None and tensor is None:
        raise ValueError("Please provide to Input either a `shape` or a `tensor` argument. Note that `shape` does "
                         "not include the batch dimension.")
    if batch_shape is None and shape is not None:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        batch_shape = (batch_size,) + shape
    layer = InputLayer(batch_input_shape=batch_shape, dtype=dtype, input_tensor=tensor, sparse=sparse, name=name)
    return layer.output
