"""The recurrent layers of tf.keras (TF 1.x): SimpleRNN, LSTM, GRU, the generic RNN over Keras
cells, and the Bidirectional and TimeDistributed wrappers.

A recurrent layer creates its weights when built (Keras's layout: `kernel` [in, gates*units],
`recurrent_kernel` [units, gates*units], `bias`), then runs its cell over the time axis with
af's dynamic_rnn (a while loop), the weights read as loop invariants. The step arithmetic is
Keras's: LSTM gates in the order i, f, c, o with `unit_forget_bias`; GRU gates z, r, h, with
TF 1.x's default `reset_after=False` (the reset gate applied before the recurrent product) and
`reset_after=True` (CuDNN's form); recurrent activation `hard_sigmoid` by default, as in TF 1.x.
`dropout` masks the inputs and `recurrent_dropout` the previous output, one mask per gate held for
the whole sequence, in the training phase only. `unroll` is accepted (the loop is a while loop
either way).

`stateful=True` (a fixed batch size, from `batch_input_shape` or the Input's `batch_shape`): the
final states of each batch are the initial states of the next, held in non-trainable variables
(`layer.states`) that every step, prediction and evaluation updates; `reset_states()` zeroes them.
`time_major=True` takes and returns [time, batch, ...].

Masking (an Embedding with mask_zero, a Masking layer, or `mask=` on the call, [batch, time]
booleans): a masked step leaves the state as it was and outputs the previous step's output, or
zeros with `zero_output_for_mask` (which Bidirectional sets where it returns sequences), as
tf.keras's backend.rnn does; the last output is the last unmasked step's.
"""
from __future__ import annotations

import copy

import numpy as np

from actorflow.graph import dtypes, nest
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.sort_ops import reverse as _reverse
from actorflow.graph.tensor_shape import TensorShape
from actorflow.keras import backend as K
from actorflow.keras.engine import Layer, _act, _con, _init, _reg
from actorflow.rnn import dynamic_rnn

__all__ = ["RNN", "SimpleRNN", "LSTM", "GRU", "SimpleRNNCell", "LSTMCell", "GRUCell", "Bidirectional",
           "TimeDistributed", "Wrapper", "StackedRNNCells", "AbstractRNNCell", "ConvLSTM2D"]


class _KerasCell:
    """What a Keras recurrent cell shares: arguments and weights (made by the layer that runs it)."""
    _gates = 1

    def __init__(self, units, activation="tanh", recurrent_activation="hard_sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 kernel_constraint=None, recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, implementation=1, reset_after=False, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(kwargs)}")
        self.units = int(units)
        self.activation = _act(activation)
        self.recurrent_activation = _act(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _init(kernel_initializer)
        self.recurrent_initializer = _init(recurrent_initializer)
        self.bias_initializer = _init(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.kernel_regularizer, self.recurrent_regularizer = _reg(kernel_regularizer), _reg(recurrent_regularizer)
        self.bias_regularizer = _reg(bias_regularizer)
        self.kernel_constraint, self.recurrent_constraint = _con(kernel_constraint), _con(recurrent_constraint)
        self.bias_constraint = _con(bias_constraint)
        self.dropout = min(1.0, max(0.0, float(dropout)))
        self.recurrent_dropout = min(1.0, max(0.0, float(recurrent_dropout)))
        self.implementation = implementation
        self.reset_after = bool(reset_after)

    @property
    def state_size(self):
        return self.units

    def _bias_initializer(self):
        return self.bias_initializer

    def build(self, layer, input_dim):
        g = self._gates
        self.kernel = layer.add_weight("kernel", [input_dim, g * self.units], initializer=self.kernel_initializer,
                                       regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.recurrent_kernel = layer.add_weight("recurrent_kernel", [self.units, g * self.units],
                                                 initializer=self.recurrent_initializer,
                                                 regularizer=self.recurrent_regularizer,
                                                 constraint=self.recurrent_constraint)
        if self.use_bias:
            shape = [2, g * self.units] if self.reset_after else [g * self.units]
            self.bias = layer.add_weight("bias", shape, initializer=self._bias_initializer(),
                                         regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        else:
            self.bias = None

    def config(self) -> dict:
        from actorflow.keras.engine import _serial
        keys = ("units", "activation", "recurrent_activation", "use_bias", "kernel_initializer",
                "recurrent_initializer", "bias_initializer", "unit_forget_bias", "kernel_regularizer",
                "recurrent_regularizer", "bias_regularizer", "kernel_constraint", "recurrent_constraint",
                "bias_constraint", "dropout", "recurrent_dropout", "implementation", "reset_after")
        return {k: _serial(getattr(self, k)) for k in keys}

    def _split(self, t, n):
        u = self.units
        return [t[:, i * u:(i + 1) * u] for i in range(n)]

    _prepared = None

    def gate_weights(self):
        """The weights split per gate. RNN.call splits them once before the time loop
        (`_prepared`), so that the loop reads them as invariants (and compiles: column slices do
        not), rather than slicing the kernels at every step."""
        return self._prepared if self._prepared is not None else self._gate_weights()

    def _gate_weights(self):
        return None


class SimpleRNNCell(_KerasCell):
    """h = activation(x W + h U + b) (tf.keras.layers.SimpleRNNCell)."""

    def step(self, x, h, xm, hm):
        if xm is not None:
            x = math_ops.multiply(x, xm[0])
        if hm is not None:
            h = math_ops.multiply(h, hm[0])
        z = math_ops.add(math_ops.matmul(x, self.kernel.value()), math_ops.matmul(h, self.recurrent_kernel.value()))
        if self.bias is not None:
            z = nn_ops.bias_add(z, self.bias.value())
        out = self.activation(z)
        return out, out


class LSTMCell(_KerasCell):
    """Keras's LSTM step, gates i, f, c, o (tf.keras.layers.LSTMCell); state [h, c]."""
    _gates = 4

    @property
    def state_size(self):
        return (self.units, self.units)

    def _bias_initializer(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, u = self.bias_initializer, self.units

        def init(shape, dtype=None, partition_info=None):
            return array_ops.concat([base([u], dtype=dtype), array_ops.ones([u], dtype=dtype),
                                     base([2 * u], dtype=dtype)], 0)
        return init

    def step(self, x, state, xm, hm):
        h, c = state
        k, r, b = self.gate_weights()
        zs = []
        for i in range(4):
            xi = math_ops.multiply(x, xm[i]) if xm is not None else x
            hi = math_ops.multiply(h, hm[i]) if hm is not None else h
            zs.append(self._gate(xi, hi, k[i], r[i], None if b is None else b[i]))
        return self._gates_to_state(zs, c)

    def _gate(self, x, h, k, r, b):
        """One gate's pre-activation: x k + h r (+ b)."""
        z = math_ops.add(math_ops.matmul(x, k), math_ops.matmul(h, r))
        return math_ops.add(z, b) if b is not None else z

    def _gates_to_state(self, zs, c):
        """(h, (h, c)) from the four gates' pre-activations i, f, c, o and the previous cell state."""
        i_g = self.recurrent_activation(zs[0])
        f_g = self.recurrent_activation(zs[1])
        c = math_ops.add(math_ops.multiply(f_g, c), math_ops.multiply(i_g, self.activation(zs[2])))
        o_g = self.recurrent_activation(zs[3])
        h = math_ops.multiply(o_g, self.activation(c))
        return h, (h, c)

    def _gate_weights(self):
        k = self._split(self.kernel.value(), 4)
        r = self._split(self.recurrent_kernel.value(), 4)
        b = self._split(array_ops.expand_dims(self.bias.value(), 0), 4) if self.bias is not None else None
        return k, r, b


class GRUCell(_KerasCell):
    """Keras's GRU step, gates z, r, h (tf.keras.layers.GRUCell); `reset_after` False by default."""
    _gates = 3

    def _gate_weights(self):
        k = self._split(self.kernel.value(), 3)
        r = self._split(self.recurrent_kernel.value(), 3)
        if self.bias is None:
            bx = bh = None
        elif self.reset_after:
            bx = self._split(array_ops.expand_dims(self.bias.value()[0], 0), 3)
            bh = self._split(array_ops.expand_dims(self.bias.value()[1], 0), 3)
        else:
            bx, bh = self._split(array_ops.expand_dims(self.bias.value(), 0), 3), None
        return k, r, bx, bh

    def step(self, x, h, xm, hm):
        k, r, bx, bh = self.gate_weights()
        xs = []
        for i in range(3):
            xi = math_ops.multiply(x, xm[i]) if xm is not None else x
            v = math_ops.matmul(xi, k[i])
            xs.append(math_ops.add(v, bx[i]) if bx is not None else v)
        hs = [math_ops.multiply(h, hm[i]) if hm is not None else h for i in range(3)]
        inner = [math_ops.matmul(hs[i], r[i]) for i in range(3)]
        if bh is not None:
            inner = [math_ops.add(v, bh[i]) for i, v in enumerate(inner)]
        z = self.recurrent_activation(math_ops.add(xs[0], inner[0]))
        rg = self.recurrent_activation(math_ops.add(xs[1], inner[1]))
        if self.reset_after:
            hh = self.activation(math_ops.add(xs[2], math_ops.multiply(rg, inner[2])))
        else:
            hh = self.activation(math_ops.add(xs[2], math_ops.matmul(math_ops.multiply(rg, hs[2]), r[2])))
        one = constant(1.0, dtype=h.dtype)
        out = math_ops.add(math_ops.multiply(z, h), math_ops.multiply(math_ops.subtract(one, z), hh))
        return out, out


def _conv_length(n, k, padding, stride, dilation):
    """Keras's conv_output_length."""
    k = k + (k - 1) * (dilation - 1)
    n = n if padding == "same" else n - k + 1
    return (n + stride - 1) // stride


class _ConvLSTM2DCell(LSTMCell):
    """ConvLSTM2D's step (TF 1.x's ConvLSTM2DCell): LSTMCell's gates with convolutions for the
    products, the input's with the layer's strides, padding and dilation, the state's stride 1 and
    "same"; states [rows', cols', filters]."""

    def __init__(self, filters, kernel_size, strides, padding, dilation_rate, **kwargs):
        super().__init__(filters, **kwargs)
        self.kernel_size = tuple(int(v) for v in np.broadcast_to(kernel_size, 2))
        self.strides = tuple(int(v) for v in np.broadcast_to(strides, 2))
        self.dilation_rate = tuple(int(v) for v in np.broadcast_to(dilation_rate, 2))
        self.padding = padding.lower()
        self.spatial = None                 # (rows', cols'), set by the layer's build

    @property
    def state_size(self):
        if self.spatial is None:
            return (self.units, self.units)
        shape = TensorShape(list(self.spatial) + [self.units])
        return (shape, shape)

    @property
    def output_size(self):
        return self.state_size[0]

    def build(self, layer, input_dim):
        g, f = self._gates, self.units
        self.kernel = layer.add_weight("kernel", list(self.kernel_size) + [input_dim, g * f],
                                       initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                       constraint=self.kernel_constraint)
        self.recurrent_kernel = layer.add_weight("recurrent_kernel", list(self.kernel_size) + [f, g * f],
                                                 initializer=self.recurrent_initializer,
                                                 regularizer=self.recurrent_regularizer,
                                                 constraint=self.recurrent_constraint)
        self.bias = layer.add_weight("bias", [g * f], initializer=self._bias_initializer(),
                                     regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None

    def _gate_weights(self):
        f = self.units
        k = [self.kernel.value()[..., i * f:(i + 1) * f] for i in range(4)]
        r = [self.recurrent_kernel.value()[..., i * f:(i + 1) * f] for i in range(4)]
        b = [self.bias.value()[i * f:(i + 1) * f] for i in range(4)] if self.bias is not None else None
        return k, r, b

    def _gate(self, x, h, k, r, b):
        """One gate's pre-activation: conv(x, k) (+ b) + conv(h, r)."""
        zx = nn_ops.conv2d(x, k, strides=[1, *self.strides, 1], padding=self.padding.upper(),
                           dilations=[1, *self.dilation_rate, 1])
        if b is not None:
            zx = nn_ops.bias_add(zx, b)
        return math_ops.add(zx, nn_ops.conv2d(h, r, strides=[1, 1, 1, 1], padding="SAME"))

    def config(self) -> dict:
        cfg = super().config()
        for k in ("units", "reset_after", "implementation"):
            cfg.pop(k)
        cfg.update(filters=self.units, kernel_size=self.kernel_size, strides=self.strides, padding=self.padding,
                   dilation_rate=self.dilation_rate)
        return cfg


def _as_size(d):
    """A state or output size: an int, or a tuple for a state of several dimensions (ConvLSTM2D's
    [rows, cols, filters]) given as a TensorShape."""
    if hasattr(d, "as_list"):
        dims = tuple(int(v) for v in d.as_list())
        return dims[0] if len(dims) == 1 else dims
    return int(d)


def _state_sizes(cell) -> list:
    """A cell's state sizes, flat (an int, a TensorShape, a list or tuple of them, or nested for
    stacked cells)."""
    def flat(x):
        if hasattr(x, "as_list") or not isinstance(x, (list, tuple)):
            return [x]
        return [y for item in x for y in flat(item)]
    return [_as_size(d) for d in flat(cell.state_size)]


def _output_size(cell):
    size = getattr(cell, "output_size", None)
    if size is None:
        return _state_sizes(cell)[0]
    return _as_size(size)


def _dims(size) -> list:
    return list(size) if isinstance(size, tuple) else [size]


def _zeros(batch, size, dtype):
    """Zeros of [batch] + the size's dimensions."""
    return array_ops.zeros(array_ops.stack([batch] + [constant(d) for d in _dims(size)]), dtype=dtype)


def _is_cell(cell) -> bool:
    return isinstance(cell, _KerasCell) or (callable(getattr(cell, "call", None)) and hasattr(cell, "state_size"))


class AbstractRNNCell(Layer):
    """The base of a user's Keras RNN cell (tf.keras.layers.AbstractRNNCell): a layer with
    `state_size`, `output_size` and `call(inputs, states)` returning (output, new states)."""

    @property
    def state_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        raise NotImplementedError("Abstract method")


class _HostedCell(Layer):
    """A built-in Keras cell (LSTMCell, GRUCell, SimpleRNNCell) as a layer of its own, for a stack of
    cells: it holds the cell's weights ("lstm_cell/kernel", ...) and steps it without dropout."""

    def __init__(self, cell, **kwargs):
        from actorflow.keras.engine import _keras_name
        super().__init__(name=_keras_name(type(cell).__name__), **kwargs)      # lstm_cell, lstm_cell_1, ...
        self.cell = cell

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return self.cell.units

    def build(self, input_shape):
        self.cell.build(self, int(input_shape[-1]))
        self.built = True

    def call(self, inputs, states):
        st = states[0] if len(states) == 1 else tuple(states)
        out, new = self.cell.step(inputs, st, None, None)
        return out, list(nest.flatten(new))


class _InnerLayers:
    """The weights, updates and losses of a layer made of other layers (`_inner()`): theirs, in
    order (a wrapper's, a stack of cells'); frozen, all its weights are non-trainable."""

    @property
    def trainable_weights(self):
        return [w for lyr in self._inner() for w in lyr.trainable_weights] if self.trainable else []

    @property
    def non_trainable_weights(self):
        ws = [w for lyr in self._inner() for w in lyr.non_trainable_weights]
        if not self.trainable:
            ws = [w for lyr in self._inner() for w in lyr.trainable_weights] + ws
        return ws

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    @property
    def updates(self):
        return [u for lyr in self._inner() for u in lyr.updates]

    @property
    def losses(self):
        return [x for lyr in self._inner() for x in lyr.losses]

    @property
    def weight_losses(self):
        return [x for lyr in self._inner() for x in lyr.weight_losses]


class StackedRNNCells(_InnerLayers, Layer):
    """Cells run one above the other at each step (tf.keras.layers.StackedRNNCells; what RNN makes
    of a list of cells): each cell's output is the next one's input; the states are the cells'
    states in order."""

    def __init__(self, cells, **kwargs):
        for c in cells:
            if not _is_cell(c):
                raise ValueError(f"All cells must have a `call` method and a `state_size` attribute. Received cells: "
                                 f"{cells}")
        self.cells = [_HostedCell(c) if isinstance(c, _KerasCell) else c for c in cells]
        kwargs.pop("reverse_state_order", None)
        super().__init__(**kwargs)

    @property
    def state_size(self):
        return tuple(c.state_size for c in self.cells)

    @property
    def output_size(self):
        return _output_size(self.cells[-1])

    def call(self, inputs, states):
        states = list(nest.flatten(states))
        new_states = []
        for c in self.cells:
            n = len(_state_sizes(c))
            mine, states = states[:n], states[n:]
            inputs, new = c(inputs, mine)
            new_states += list(nest.flatten(new))
        return inputs, new_states

    def _inner(self):
        return [c for c in self.cells if isinstance(c, Layer)]     # (a cell that is no layer has no weights)

    def get_config(self):
        cfg = super().get_config()
        cfg["cells"] = [{"class_name": type(c).__name__, "config": c.get_config()} for c in self.cells]
        return cfg


class _GenericLoopCell:
    """A user's Keras cell (a layer with `state_size` and `call(inputs, states)`) as an RNNCell for
    dynamic_rnn: states go in as a list, as Keras passes them."""

    def __init__(self, cell, sizes, out_size):
        self.cell, self.sizes, self.out_size = cell, sizes, out_size

    @property
    def state_size(self):
        sizes = [TensorShape(list(s)) if isinstance(s, tuple) else s for s in self.sizes]
        return sizes[0] if len(sizes) == 1 else tuple(sizes)

    @property
    def output_size(self):
        return TensorShape(list(self.out_size)) if isinstance(self.out_size, tuple) else self.out_size

    def __call__(self, inputs, state, scope=None):
        states = list(state) if isinstance(state, tuple) else [state]
        out, new = self.cell(inputs, states)
        new = list(nest.flatten(new))
        return out, new[0] if len(new) == 1 else tuple(new)


class _MaskedCell:
    """Wraps a loop cell for masked inputs: its inputs are (x, mask [batch, 1]) and its state
    (cell state, previous output); a masked row keeps its state and outputs the previous output
    (or zeros)."""

    def __init__(self, cell, zero_output):
        self.cell, self.zero_output = cell, zero_output

    @property
    def state_size(self):
        return (self.cell.state_size, self.cell.output_size)

    @property
    def output_size(self):
        return self.cell.output_size

    def __call__(self, inputs, state, scope=None):
        x, m = inputs
        cell_state, prev = state
        out, new_state = self.cell(x, cell_state)
        keep = math_ops.cast(m, dtypes.bool_)
        new_state = nest.map_structure(lambda n, o: math_ops.where_v2(keep, n, o), new_state, cell_state)
        out = math_ops.where_v2(keep, out, array_ops.zeros_like(out) if self.zero_output else prev)
        return out, (new_state, out)


class _LoopCell:
    """An RNNCell for dynamic_rnn that runs a Keras cell's step with fixed dropout masks."""

    def __init__(self, cell, xm, hm):
        self.cell, self.xm, self.hm = cell, xm, hm

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return getattr(self.cell, "output_size", None) or self.cell.units

    def __call__(self, inputs, state, scope=None):
        return self.cell.step(inputs, state, self.xm, self.hm)


def _masks(rate, like, n, training):
    """n dropout masks of ones shaped like `like` ([batch, dim]), in the training phase only."""
    if not rate:
        return None
    ones = array_ops.ones_like(like)
    static = None if isinstance(training, type(like)) else bool(training)
    out = []
    for _ in range(n):
        dropped = nn_ops.dropout(ones, rate=rate)
        if static is None:
            out.append(math_ops.where(training, dropped, ones))
        else:
            out.append(dropped if static else ones)
    return out


class RNN(Layer):
    """Runs a Keras cell over the time axis of [batch, time, features] (tf.keras.layers.RNN).

    Returns the last output, or every step's with `return_sequences`; with `return_state`, a
    list [output] + final states. `initial_state=` on the call sets the starting state.
    """

    _masking = True

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, time_major=False, name=None, **kwargs):
        zero_output_for_mask = bool(kwargs.pop("zero_output_for_mask", False))
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        if not _is_cell(cell):
            raise ValueError(f"One of the arguments passed to the RNN layer's cell is not a valid RNN cell: {cell!r}. "
                             f"A cell should have a `call` method and a `state_size` attribute.")
        super().__init__(name=name, **kwargs)
        self.cell = cell
        self.return_sequences, self.return_state = bool(return_sequences), bool(return_state)
        self.go_backwards, self.stateful, self.unroll = bool(go_backwards), bool(stateful), bool(unroll)
        self.time_major = bool(time_major)
        self.states = None
        self.zero_output_for_mask = zero_output_for_mask

    @property
    def units(self):
        return getattr(self.cell, "units", None) or _output_size(self.cell)

    def _generic(self) -> bool:
        return not isinstance(self.cell, _KerasCell)

    # a user's cell (or a stack) keeps its own weights; the layer reports them as its own
    @property
    def trainable_weights(self):
        own = super().trainable_weights
        return own + (list(self.cell.trainable_weights) if self._generic() and self.trainable else [])

    @property
    def non_trainable_weights(self):
        own = super().non_trainable_weights
        return own + (list(self.cell.non_trainable_weights) if self._generic() else [])

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    @property
    def updates(self):
        return super().updates + (list(getattr(self.cell, "updates", [])) if self._generic() else [])

    @property
    def losses(self):
        return super().losses + (list(getattr(self.cell, "losses", [])) if self._generic() else [])

    _input_ndim = 3

    def build(self, input_shape):
        if input_shape.ndims != self._input_ndim:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: expected "
                             f"ndim={self._input_ndim}, found ndim={input_shape.ndims}. Full shape received: "
                             f"{input_shape}")
        if input_shape[-1] is None:
            raise ValueError(f"Layer {self.name}: the last dimension of the inputs should be defined")
        if not self._generic():
            self.cell.build(self, int(input_shape[-1]))
        if self.stateful:
            batch = input_shape[1 if self.time_major else 0]
            if batch is None:
                raise ValueError("If a RNN is stateful, it needs to know its batch size. Specify the batch size of "
                                 "your input tensors: \n- If using a Sequential model, specify the batch size by "
                                 "passing a `batch_input_shape` argument to your first layer.\n- If using the "
                                 "functional API, specify the batch size by passing a `batch_shape` argument to "
                                 f"your Input layer. (layer {self.name})")
            self.states = [K.zeros(tuple([int(batch)] + _dims(size)), dtype=K.floatx(), name=f"{self.name}_state_{i}")
                           for i, size in enumerate(_state_sizes(self.cell))]
        self.built = True

    def reset_states(self, states=None):
        """Sets the states of a stateful layer to zeros, or to `states` (arrays, one per state)."""
        if not self.stateful:
            raise AttributeError("Layer must be stateful.")
        if self.states is None:
            raise ValueError(f"Layer {self.name} is not built: it has no states to reset")
        if states is None:
            values = [np.zeros(K.int_shape(v), np.float32) for v in self.states]
        else:
            values = list(states) if isinstance(states, (list, tuple)) else [states]
            if len(values) != len(self.states):
                raise ValueError(f"Layer {self.name} expects {len(self.states)} states, but it received "
                                 f"{len(values)} state values. Input received: {states}")
            for v, val in zip(self.states, values):
                if tuple(np.shape(val)) != K.int_shape(v):
                    raise ValueError(f"State {v.name} is incompatible with layer {self.name}: expected shape="
                                     f"{K.int_shape(v)}, found shape={np.shape(val)}")
        K.batch_set_value(list(zip(self.states, values)))

    def compute_mask(self, inputs, mask=None):
        mask = nest.flatten(mask)[0] if mask is not None else None
        out = mask if self.return_sequences else None
        if self.return_state:
            return [out] + [None] * len(_state_sizes(self.cell))
        return out

    def call(self, inputs, training=None, initial_state=None, mask=None):
        x = convert_to_tensor(inputs)
        if self.time_major:
            x = array_ops.transpose(x, [1, 0, 2])
        if self.stateful and initial_state is None:
            initial_state = [v.value() for v in self.states]
        if mask is not None:
            mask = convert_to_tensor(nest.flatten(mask)[0])
            if mask.shape.ndims is not None and mask.shape.ndims != 2:
                raise ValueError(f"Layer {self.name}: the mask must be [batch, time], got shape {mask.shape}")
            mask = array_ops.expand_dims(math_ops.cast(mask, x.dtype), -1)
        if self.go_backwards:
            x = _reverse(x, [1])
            if mask is not None:
                mask = _reverse(mask, [1])
        cell = self.cell
        batch = array_ops.shape(x)[0]
        sizes = _state_sizes(cell)
        units = _output_size(cell)
        n_states = len(sizes)
        if initial_state is None:
            zeros = [_zeros(batch, size, x.dtype) for size in sizes]
            state = zeros[0] if n_states == 1 else tuple(zeros)
        else:
            states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
            if len(states) != n_states:
                raise ValueError(f"Layer {self.name} expects {n_states} initial state(s), got {len(states)}")
            states = [convert_to_tensor(s) for s in states]
            state = states[0] if n_states == 1 else tuple(states)
        if training is None:
            training = K.learning_phase()
        if self._generic():
            loop_cell = _GenericLoopCell(cell, sizes, units)
        else:
            first = nest.flatten(state)[0]
            xm = _masks(cell.dropout, x[:, 0, :], cell._gates, training)
            hm = _masks(cell.recurrent_dropout, first, cell._gates, training)
            loop_cell = _LoopCell(cell, xm, hm)
            cell._prepared = cell._gate_weights()       # split once, outside the time loop
        try:
            outputs, final, last = self._run_loop(loop_cell, x, state, mask, batch, units, n_states)
        finally:
            if not self._generic():
                cell._prepared = None
        if self.stateful:
            self.add_update([v.assign(s) for v, s in zip(self.states, nest.flatten(final))])
        if self.return_sequences:
            out = array_ops.transpose(outputs, [1, 0, 2]) if self.time_major else outputs
        else:
            out = last
            out.set_shape([x.shape[0]] + _dims(units))
        if self.return_state:
            return [out] + list(nest.flatten(final))
        return out

    def _run_loop(self, loop_cell, x, state, mask, batch, units, n_states):
        """(outputs, final state, last output) of the time loop, masked or not."""
        if mask is None:
            outputs, final = dynamic_rnn(loop_cell, x, initial_state=state, dtype=x.dtype, scope="rnn")
            if self._generic():
                return outputs, final, outputs[:, -1]
            return outputs, final, nest.flatten(final)[0] if n_states > 1 else final
        zero_out = _zeros(batch, units, x.dtype)
        outputs, (final, last) = dynamic_rnn(_MaskedCell(loop_cell, self.zero_output_for_mask), (x, mask),
                                             initial_state=(state, zero_out), dtype=x.dtype, scope="rnn")
        return outputs, final, last

    def get_config(self):
        cfg = super().get_config()
        cfg.update(return_sequences=self.return_sequences, return_state=self.return_state,
                   go_backwards=self.go_backwards, stateful=self.stateful, unroll=self.unroll,
                   time_major=self.time_major)
        if self.zero_output_for_mask:
            cfg["zero_output_for_mask"] = True
        if self._generic():
            cfg["cell"] = {"class_name": type(self.cell).__name__, "config": self.cell.get_config()}
        else:
            cfg.update(self.cell.config())
        return cfg


def _rnn_class(cell_cls, doc, defaults):
    class Layer_(RNN):
        def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                     unroll=False, time_major=False, name=None, **kwargs):
            cell_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _CELL_ARGS}
            for k, v in defaults.items():
                cell_args.setdefault(k, v)
            super().__init__(cell_cls(units, **cell_args), return_sequences=return_sequences,
                             return_state=return_state, go_backwards=go_backwards, stateful=stateful,
                             unroll=unroll, time_major=time_major, name=name, **kwargs)

        @classmethod
        def from_config(cls, config):
            config = dict(config)
            config.pop("name", None)
            return cls(**config)

    Layer_.__doc__ = doc
    return Layer_


_CELL_ARGS = {"activation", "recurrent_activation", "use_bias", "kernel_initializer", "recurrent_initializer",
              "bias_initializer", "unit_forget_bias", "kernel_regularizer", "recurrent_regularizer",
              "bias_regularizer", "kernel_constraint", "recurrent_constraint", "bias_constraint", "dropout",
              "recurrent_dropout", "implementation", "reset_after"}

SimpleRNN = _rnn_class(SimpleRNNCell, "A fully connected RNN (tf.keras.layers.SimpleRNN).", {})
SimpleRNN.__name__ = SimpleRNN.__qualname__ = "SimpleRNN"
LSTM = _rnn_class(LSTMCell, "Long short-term memory (tf.keras.layers.LSTM of TF 1.x): return_state gives "
                            "[output, h, c].", {})
LSTM.__name__ = LSTM.__qualname__ = "LSTM"
GRU = _rnn_class(GRUCell, "Gated recurrent unit (tf.keras.layers.GRU of TF 1.x, reset_after=False by default).",
                 {})
GRU.__name__ = GRU.__qualname__ = "GRU"


class ConvLSTM2D(RNN):
    """Convolutional LSTM over [batch, time, rows, cols, channels] (tf.keras.layers.ConvLSTM2D, TF
    1.x's defaults: hard_sigmoid, unit_forget_bias): the gates are convolutions of the input (with
    `strides`, `padding`, `dilation_rate`) and of the state (stride 1, "same"); the output and the
    states are [batch, rows', cols', filters], a sequence of them with `return_sequences`. Needs the
    rows, columns and channels known when built; channels_last only."""
    _input_ndim = 5

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 activation="tanh", recurrent_activation="hard_sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False, dropout=0.0,
                 recurrent_dropout=0.0, name=None, **kwargs):
        if (data_format or K.image_data_format()) != "channels_last":
            raise NotImplementedError("ConvLSTM2D: only data_format='channels_last' is supported")
        if padding.lower() not in ("valid", "same"):
            raise ValueError(f"ConvLSTM2D: padding must be 'valid' or 'same', got {padding!r}")
        kwargs.pop("unroll", None)
        kwargs.pop("time_major", None)
        cell = _ConvLSTM2DCell(filters, kernel_size, strides, padding, dilation_rate, activation=activation,
                               recurrent_activation=recurrent_activation, use_bias=use_bias,
                               kernel_initializer=kernel_initializer, recurrent_initializer=recurrent_initializer,
                               bias_initializer=bias_initializer, unit_forget_bias=unit_forget_bias,
                               kernel_regularizer=kernel_regularizer, recurrent_regularizer=recurrent_regularizer,
                               bias_regularizer=bias_regularizer, kernel_constraint=kernel_constraint,
                               recurrent_constraint=recurrent_constraint, bias_constraint=bias_constraint,
                               dropout=dropout, recurrent_dropout=recurrent_dropout)
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)

    def build(self, input_shape):
        dims = input_shape.as_list() if input_shape.ndims is not None else None
        if dims is not None and len(dims) == 5:
            if any(d is None for d in dims[2:]):
                raise ValueError(f"Layer {self.name}: the rows, columns and channels of the input must be known, "
                                 f"got {input_shape}")
            cell = self.cell
            cell.spatial = tuple(_conv_length(n, k, cell.padding, st, dl) for n, k, st, dl in
                                 zip(dims[2:4], cell.kernel_size, cell.strides, cell.dilation_rate))
        super().build(input_shape)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("name", None)
        return cls(**config)


class Wrapper(_InnerLayers, Layer):
    """A layer around another layer (tf.keras.layers.Wrapper): its weights are the inner layer's."""
    _masking = True

    def __init__(self, layer, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.layer = layer

    def _inner(self):
        return [self.layer]

    def get_config(self):
        cfg = super().get_config()
        cfg["layer"] = {"class_name": type(self.layer).__name__, "config": self.layer.get_config()}
        return cfg

    @classmethod
    def _from_config_with(cls, config, custom_objects=None):
        from actorflow.keras.models import deserialize_layer
        config = dict(config)
        inner = dict(config.pop("layer"))
        inner["config"] = {k: v for k, v in inner["config"].items() if k != "name"}
        return cls(deserialize_layer(inner, custom_objects), **config)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("name", None)
        return cls._from_config_with(config)



class TimeDistributed(Wrapper):
    """Applies `layer` to every step of [batch, time, ...] (tf.keras.layers.TimeDistributed), as
    one call on [batch * time, ...]."""

    def _inner_mask(self, mask):
        """The mask for the inner layer's [batch * time, ...] inputs."""
        if mask is None:
            return None
        mask = convert_to_tensor(mask)
        return array_ops.reshape(mask, [-1] + mask.shape[2:].as_list())

    def compute_mask(self, inputs, mask=None):
        """The inner layer's output mask over [batch, time, ...]; else the input mask, reduced to
        [batch, time] (tf.keras's TimeDistributed)."""
        x = convert_to_tensor(inputs)
        inner = list(x.shape[2:].as_list())
        flat = array_ops.reshape(x, [-1] + inner)
        out = self.layer.compute_mask(flat, self._inner_mask(mask)) if (
            self.layer.supports_masking or type(self.layer).compute_mask is not Layer.compute_mask) else None
        if out is None:
            if mask is None:
                return None
            mask = convert_to_tensor(mask)
            nd = mask.shape.ndims
            return mask if nd is None or nd <= 2 else math_ops.reduce_all(mask, list(range(2, nd)))
        dyn = array_ops.shape(x)
        return array_ops.reshape(out, array_ops.concat([dyn[:2], array_ops.shape(out)[1:]], 0))

    def call(self, inputs, training=None, mask=None):
        x = convert_to_tensor(inputs)
        if x.shape.ndims is None or x.shape.ndims < 3:
            raise ValueError(f"`TimeDistributed` Layer should be passed an `input_shape` with at least 3 dimensions, "
                             f"received: {x.shape}")
        inner = list(x.shape[2:].as_list())
        if any(d is None for d in inner):
            raise ValueError(f"TimeDistributed {self.name}: the per-step shape must be static, got {x.shape}")
        dyn = array_ops.shape(x)
        flat = array_ops.reshape(x, [-1] + inner)
        kw = {"training": training} if self.layer._call_takes_training else {}
        if mask is not None and self.layer._call_takes_mask:
            kw["mask"] = self._inner_mask(mask)
        y = convert_to_tensor(self.layer(flat, **kw))
        out_inner = y.shape[1:].as_list()
        out = array_ops.reshape(y, array_ops.concat([dyn[:2], constant(out_inner)], 0))
        out.set_shape([x.shape[0], x.shape[1]] + out_inner)
        return out


class Bidirectional(Wrapper):
    """Runs a recurrent layer forwards and a copy of it backwards and merges the two
    (tf.keras.layers.Bidirectional): merge_mode "concat", "sum", "mul", "ave" or None (a list).
    The backward layer is `layer`'s config with go_backwards flipped, named "backward_<name>";
    with return_sequences its outputs are reversed back into time order."""

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, name=None, **kwargs):
        if not isinstance(layer, RNN):
            raise ValueError(f"Please initialize `Bidirectional` layer with a recurrent layer instance, got {layer!r}")
        if merge_mode not in ("sum", "mul", "ave", "concat", None):
            raise ValueError(f"Invalid merge mode. Merge mode should be one of {{'sum', 'mul', 'ave', 'concat', "
                             f"None}}, got {merge_mode!r}")
        super().__init__(layer, name=name, **kwargs)
        self.forward_layer = layer
        if backward_layer is None:
            # The same cell arguments (a copy: the backward layer builds its own weights), reversed.
            backward_layer = type(layer).__new__(type(layer))
            RNN.__init__(backward_layer, copy.copy(layer.cell), return_sequences=layer.return_sequences,
                         return_state=layer.return_state, go_backwards=not layer.go_backwards,
                         name="backward_" + layer.name)
        self.backward_layer = backward_layer
        for lyr in (self.forward_layer, self.backward_layer):    # as tf.keras: zeros at masked steps
            lyr.zero_output_for_mask = lyr.return_sequences
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = layer.return_sequences, layer.return_state
        if weights is not None:
            self._initial_weights = weights

    def _inner(self):
        return [self.forward_layer, self.backward_layer]

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if self.return_sequences:
            out = [mask, mask] if not self.merge_mode else mask
        else:
            out = [None, None] if not self.merge_mode else None
        if self.return_state:
            states = [None] * len(nest.flatten(self.forward_layer.cell.state_size))
            return (out if isinstance(out, list) else [out]) + states * 2
        return out

    def call(self, inputs, training=None, initial_state=None, mask=None):
        fw_init = bw_init = None
        if initial_state is not None:
            half = len(initial_state) // 2
            fw_init, bw_init = list(initial_state[:half]), list(initial_state[half:])
        y = self.forward_layer(inputs, training=training, initial_state=fw_init, mask=mask)
        y_rev = self.backward_layer(inputs, training=training, initial_state=bw_init, mask=mask)
        states = []
        if self.return_state:
            states = list(y[1:]) + list(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        if self.return_sequences:
            y_rev = _reverse(y_rev, [1])
        if self.merge_mode == "concat":
            out = array_ops.concat([y, y_rev], -1)
        elif self.merge_mode == "sum":
            out = math_ops.add(y, y_rev)
        elif self.merge_mode == "ave":
            out = math_ops.multiply(math_ops.add(y, y_rev), constant(0.5, dtype=y.dtype))
        elif self.merge_mode == "mul":
            out = math_ops.multiply(y, y_rev)
        else:
            out = [y, y_rev]
        if self.return_state:
            return (out if isinstance(out, list) else [out]) + states
        return out

    def get_config(self):
        cfg = super().get_config()
        cfg["merge_mode"] = self.merge_mode
        return cfg
