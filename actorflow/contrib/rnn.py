"""af.contrib.rnn: tf.contrib.rnn of TF 1.15: the core cells and wrappers (af.nn.rnn_cell), the
projection and embedding wrappers, LSTMBlockCell, GRUBlockCell, LayerNormBasicLSTMCell, the
convolutional LSTM cells (ConvLSTMCell, Conv1D/2D/3DLSTMCell), and the static and stacked
bidirectional networks.

The block cells are TF's fused kernels; here they are the same arithmetic over the core cells,
under the same variable names: LSTMBlockCell is an LSTM with forget bias 1.0 and optional
peepholes and cell clipping (scope ``lstm_cell``: ``kernel``, ``bias``, ``w_i_diag``...), exactly
LSTMCell's computation; GRUBlockCell is GRUCell (scope ``gru_cell``).
"""
from __future__ import annotations

import math

from actorflow.contrib.layers import layer_norm
from actorflow.graph.graph import convert_to_tensor, device, name_scope
from actorflow.graph.initializers import constant_initializer, random_uniform_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, math_ops, nn_conv_ops, nn_ops
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variable_scope import get_variable, get_variable_scope, variable_scope
from actorflow.rnn import bidirectional_dynamic_rnn, dynamic_rnn, static_bidirectional_rnn, static_rnn
from actorflow.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DeviceWrapper,
    DropoutWrapper,
    GRUCell,
    LayerRNNCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    ResidualWrapper,
    RNNCell,
    _last_dim,
)

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell",
           "LSTMStateTuple", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper", "OutputProjectionWrapper",
           "InputProjectionWrapper", "EmbeddingWrapper", "LSTMBlockCell", "LSTMBlockFusedCell", "GRUBlockCell", "LayerNormBasicLSTMCell",
           "ConvLSTMCell", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell",
           "static_rnn", "static_bidirectional_rnn", "dynamic_rnn", "bidirectional_dynamic_rnn",
           "stack_bidirectional_rnn", "stack_bidirectional_dynamic_rnn"]


# ---------------------------------------------------------------------------------------------
# Block cells
# ---------------------------------------------------------------------------------------------

class LSTMBlockCell(LSTMCell):
    """tf.contrib.rnn.LSTMBlockCell: an LSTM with `forget_bias` (1.0) added to the forget gate,
    optional peepholes (`use_peephole`) and cell clipping (`cell_clip`), state an LSTMStateTuple.

    TF runs it as one fused kernel; the arithmetic (gates i, j, f, o from ``[x, h] @ kernel +
    bias``) and the variables (``lstm_cell/kernel``, ``lstm_cell/bias``, ``w_i_diag``,
    ``w_f_diag``, ``w_o_diag``) are LSTMCell's, so checkpoints of either load into the other.
    """

    def __init__(self, num_units, forget_bias=1.0, cell_clip=None, use_peephole=False, dtype=None, reuse=None,
                 name="lstm_cell"):
        clip = cell_clip if cell_clip is not None and cell_clip > 0 else None
        super().__init__(num_units, use_peepholes=use_peephole, cell_clip=clip, forget_bias=forget_bias,
                         state_is_tuple=True, reuse=reuse, name=name, dtype=dtype)


class LSTMBlockFusedCell:
    """tf.contrib.rnn.LSTMBlockFusedCell: LSTMBlockCell run over a whole time-major sequence,
    called as ``cell(inputs [time, batch, depth], initial_state=None, dtype=None,
    sequence_length=None)`` and returning ``(outputs [time, batch, num_units],
    LSTMStateTuple(c, h))``.

    Its variables live directly in its own scope (``lstm_fused_cell/kernel``, ``/bias``, and the
    peepholes), made unique per cell and reused by later calls. TF runs one BlockLSTM kernel; here
    it is `dynamic_rnn` over the same step, so outputs past a row's `sequence_length` are zeros and
    its final state is the one at its last valid step, as in TF.
    """

    def __init__(self, num_units, forget_bias=1.0, cell_clip=None, use_peephole=False, reuse=None, dtype=None,
                 name="lstm_fused_cell"):
        self._num_units = int(num_units)
        self._name = name
        self._cell = LSTMBlockCell(num_units, forget_bias=forget_bias, cell_clip=cell_clip,
                                   use_peephole=use_peephole, dtype=dtype, reuse=reuse, name=name)

    @property
    def num_units(self):
        return self._num_units

    @property
    def variables(self) -> list:
        return self._cell.variables

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        inputs = convert_to_tensor(inputs)
        if inputs.shape.ndims != 3:
            raise ValueError(f"LSTMBlockFusedCell: inputs must be 3-D [time, batch, depth], got shape {inputs.shape} "
                             f"('{inputs.name}')")
        cell = self._cell
        if cell._scope is None:
            # The step's variables go straight into the fused cell's scope (no per-step cell scope
            # below it), where TF's BlockLSTM keeps them.
            with variable_scope(scope, default_name=self._name) as sc:
                cell._scope = sc
        if initial_state is not None:
            initial_state = LSTMStateTuple(*initial_state)
        return dynamic_rnn(cell, inputs, sequence_length=sequence_length, initial_state=initial_state,
                           dtype=dtype or (None if initial_state is not None else inputs.dtype), time_major=True,
                           scope=cell._scope)


class GRUBlockCell(GRUCell):
    """tf.contrib.rnn.GRUBlockCell: GRUCell's computation and variables (``gates/kernel``,
    ``gates/bias`` (1.0), ``candidate/kernel``, ``candidate/bias``) under scope ``gru_cell``."""

    def __init__(self, num_units=None, cell_size=None, reuse=None, name="gru_cell"):
        if num_units is None:
            num_units = cell_size
        if num_units is None:
            raise ValueError("GRUBlockCell needs num_units")
        super().__init__(num_units, reuse=reuse, name=name)


# ---------------------------------------------------------------------------------------------
# LayerNormBasicLSTMCell
# ---------------------------------------------------------------------------------------------

class LayerNormBasicLSTMCell(RNNCell):
    """tf.contrib.rnn.LayerNormBasicLSTMCell: a basic LSTM whose four gate pre-activations and new
    cell state are layer-normalized (Ba et al. 2016), with recurrent dropout on the candidate
    (Semeniuta et al. 2016) when `dropout_keep_prob` < 1.

    Variables: ``kernel`` [depth + n, 4n] (``bias`` only with `layer_norm=False`, initialized as
    get_variable's default), and ``input``, ``transform``, ``forget``, ``output``, ``state``
    ``/gamma`` (`norm_gain`) and ``/beta`` (`norm_shift`). Normalization is
    tf.contrib.layers.layer_norm's (epsilon 1e-12).
    """

    def __init__(self, num_units, forget_bias=1.0, input_size=None, activation=math_ops.tanh, layer_norm=True,
                 norm_gain=1.0, norm_shift=0.0, dropout_keep_prob=1.0, dropout_prob_seed=None, reuse=None):
        super().__init__(_reuse=reuse)
        self._num_units = int(num_units)
        self._activation = activation
        self._forget_bias = forget_bias
        self._keep_prob = dropout_keep_prob
        self._seed = dropout_prob_seed
        self._layer_norm = layer_norm
        self._norm_gain = norm_gain
        self._norm_shift = norm_shift

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        n = self._num_units
        self._kernel = self.add_variable("kernel", [depth + n, 4 * n])
        self._bias = None if self._layer_norm else self.add_variable("bias", [4 * n])
        if self._layer_norm:
            for part in ("input", "transform", "forget", "output", "state"):
                self.add_variable(f"{part}/gamma", [n], initializer=constant_initializer(self._norm_gain))
                self.add_variable(f"{part}/beta", [n], initializer=constant_initializer(self._norm_shift))

    def _norm(self, x, scope):
        return layer_norm(x, reuse=True, scope=scope)

    def call(self, inputs, state):
        c, h = state
        z = math_ops.matmul(array_ops.concat([inputs, h], 1), self._kernel)
        if self._bias is not None:
            z = nn_ops.bias_add(z, self._bias)
        i, j, f, o = array_ops.split(z, 4, axis=1)
        if self._layer_norm:
            i, j = self._norm(i, "input"), self._norm(j, "transform")
            f, o = self._norm(f, "forget"), self._norm(o, "output")
        g = self._activation(j)
        if not isinstance(self._keep_prob, float) or self._keep_prob < 1:
            g = nn_ops.dropout(g, keep_prob=self._keep_prob, seed=self._seed)
        fb = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        new_c = c * math_ops.sigmoid(f + fb) + math_ops.sigmoid(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state")
        new_h = self._activation(new_c) * math_ops.sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class ConvLSTMCell(RNNCell):
    """tf.contrib.rnn.ConvLSTMCell (Shi et al. 2015): an LSTM whose gates are convolutions over
    `conv_ndims`-D feature maps of `input_shape` (without the batch dimension, channels last).

    One SAME convolution of [inputs, h] (stride 1) with ``kernel`` of `kernel_shape` +
    [input channels + output_channels, 4 * output_channels], plus ``biases`` (zeros) when `use_bias`,
    gives the input gate, new input, forget gate and output gate, in that order along the channels;
    c' = sigmoid(f + forget_bias) * c + sigmoid(i) * tanh(j), h' = tanh(c') * sigmoid(o). With
    `skip_connection` the output is [h', inputs] along the channels, and so is the state's h, as in
    TF 1.15, whose state_size leaves the inputs out (tensorflow/tensorflow#21400): such a cell steps on
    its own but not in dynamic_rnn. The state is LSTMStateTuple(c, h).
    `initializers` is accepted and unused, as in TF 1.15 (the kernel takes the variable scope's
    initializer)."""

    def __init__(self, conv_ndims, input_shape, output_channels, kernel_shape, use_bias=True, skip_connection=False,
                 forget_bias=1.0, initializers=None, name="conv_lstm_cell"):
        super().__init__(name=name)
        input_shape = list(input_shape)
        if conv_ndims != len(input_shape) - 1:
            raise ValueError(f"Invalid input_shape {input_shape} for conv_ndims={conv_ndims}.")
        self._conv_ndims = int(conv_ndims)
        self._input_shape = input_shape
        self._output_channels = int(output_channels)
        self._kernel_shape = list(kernel_shape)
        self._use_bias = use_bias
        self._forget_bias = forget_bias
        self._skip_connection = skip_connection
        total = self._output_channels + (input_shape[-1] if skip_connection else 0)
        state = TensorShape(input_shape[:-1] + [self._output_channels])
        self._state_size = LSTMStateTuple(state, state)
        self._output_size = TensorShape(input_shape[:-1] + [total])

    @property
    def state_size(self):
        return self._state_size

    @property
    def output_size(self):
        return self._output_size

    def call(self, inputs, state):
        cell, hidden = state
        gates = _conv_linear([inputs, hidden], self._kernel_shape, 4 * self._output_channels, self._use_bias)
        i, j, f, o = array_ops.split(gates, 4, axis=self._conv_ndims + 1)
        new_cell = math_ops.sigmoid(f + self._forget_bias) * cell + math_ops.sigmoid(i) * math_ops.tanh(j)
        output = math_ops.tanh(new_cell) * math_ops.sigmoid(o)
        if self._skip_connection:
            output = array_ops.concat([output, inputs], axis=-1)
        return output, LSTMStateTuple(new_cell, output)


class Conv1DLSTMCell(ConvLSTMCell):
    """ConvLSTMCell over 1-D feature maps (tf.contrib.rnn.Conv1DLSTMCell)."""

    def __init__(self, name="conv_1d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=1, name=name, **kwargs)


class Conv2DLSTMCell(ConvLSTMCell):
    """ConvLSTMCell over 2-D feature maps (tf.contrib.rnn.Conv2DLSTMCell)."""

    def __init__(self, name="conv_2d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=2, name=name, **kwargs)


class Conv3DLSTMCell(ConvLSTMCell):
    """ConvLSTMCell over 3-D feature maps (tf.contrib.rnn.Conv3DLSTMCell)."""

    def __init__(self, name="conv_3d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=3, name=name, **kwargs)


def _conv_linear(args, filter_size, num_features, bias, bias_start=0.0):
    """SAME, stride-1 convolution of `args` concatenated along the channels, with ``kernel`` and
    (when `bias`) ``biases`` in the current variable scope (TF 1.15's conv_lstm `_conv`)."""
    shapes = [a.shape.as_list() for a in args]
    rank = len(shapes[0])
    depth = 0
    for shape in shapes:
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"Conv Linear expects 3D, 4D or 5D arguments: {shapes}")
        if len(shape) != rank:
            raise ValueError(f"Conv Linear expects all args to be of same Dimension: {shapes}")
        depth += shape[-1]
    dtype = args[0].dtype
    kernel = get_variable("kernel", list(filter_size) + [depth, num_features], dtype=dtype)
    x = args[0] if len(args) == 1 else array_ops.concat(args, axis=rank - 1)
    if rank == 3:
        res = nn_conv_ops.conv1d(x, kernel, 1, padding="SAME")
    elif rank == 4:
        res = nn_conv_ops.conv2d(x, kernel, [1] * 4, padding="SAME")
    else:
        from actorflow.graph.ops.nn_conv3d_ops import conv3d
        res = conv3d(x, kernel, [1] * 5, padding="SAME")
    if not bias:
        return res
    biases = get_variable("biases", [num_features], dtype=dtype, initializer=constant_initializer(bias_start))
    return res + biases


# ---------------------------------------------------------------------------------------------
# Projection and embedding wrappers (TF 1.x core_rnn_cell)
# ---------------------------------------------------------------------------------------------

class _OwnScopeWrapper(RNNCell):
    """A wrapper with variables of its own: its scope (``output_projection_wrapper``...) holds them
    and the wrapped cell's scope, as TF 1.x's core_rnn_cell wrappers do."""

    def __init__(self, cell, reuse=None):
        super().__init__(_reuse=reuse)
        if not isinstance(cell, RNNCell):
            raise TypeError(f"The parameter cell is not RNNCell: {cell!r}")
        self._cell = cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def variables(self) -> list:
        return self._cell.variables + list(self._variables)

    @property
    def trainable_variables(self) -> list:
        return self._cell.trainable_variables + (list(self._variables) if self.trainable else [])

    def zero_state(self, batch_size, dtype):
        with name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)


def _check_positive(value, what):
    if int(value) < 1:
        raise ValueError(f"Parameter {what} must be > 0: {value}.")
    return int(value)


class OutputProjectionWrapper(_OwnScopeWrapper):
    """The cell's output times ``kernel`` [cell output, output_size] plus ``bias``, then
    `activation` (tf.contrib.rnn.OutputProjectionWrapper). The projection's variables are made on
    the first call, after the wrapped cell's, as TF 1.x's do (so a graph seed gives them TF's draws)."""

    def __init__(self, cell, output_size, activation=None, reuse=None):
        super().__init__(cell, reuse)
        self._output_size = _check_positive(output_size, "output_size")
        self._activation = activation

    @property
    def output_size(self):
        return self._output_size

    def build(self, inputs_shape):
        self._kernel = self._bias = None

    def call(self, inputs, state):
        output, new_state = self._cell(inputs, state)
        if self._kernel is None:    # after the cell's own variables, as TF 1.x's _Linear (the seeds' order)
            self._kernel = self.add_variable("kernel", [self._cell.output_size, self._output_size])
            self._bias = self.add_variable("bias", [self._output_size], initializer=zeros_initializer())
        projected = nn_ops.bias_add(math_ops.matmul(output, self._kernel), self._bias)
        if self._activation is not None:
            projected = self._activation(projected)
        return projected, new_state


class InputProjectionWrapper(_OwnScopeWrapper):
    """The inputs times ``kernel`` [depth, num_proj] plus ``bias``, then `activation`, fed to the
    cell (tf.contrib.rnn.InputProjectionWrapper)."""

    def __init__(self, cell, num_proj, activation=None, input_size=None, reuse=None):
        super().__init__(cell, reuse)
        self._num_proj = _check_positive(num_proj, "num_proj")
        self._activation = activation

    @property
    def output_size(self):
        return self._cell.output_size

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        self._kernel = self.add_variable("kernel", [depth, self._num_proj])
        self._bias = self.add_variable("bias", [self._num_proj], initializer=zeros_initializer())

    def call(self, inputs, state):
        projected = nn_ops.bias_add(math_ops.matmul(inputs, self._kernel), self._bias)
        if self._activation is not None:
            projected = self._activation(projected)
        return self._cell(projected, state)


class EmbeddingWrapper(_OwnScopeWrapper):
    """Embeds integer inputs with ``embedding`` [embedding_classes, embedding_size] before the cell
    (tf.contrib.rnn.EmbeddingWrapper). The initializer is `initializer`, else the scope's, else
    U[-sqrt(3), sqrt(3)]; the variable takes the state's dtype and lives on the CPU."""

    def __init__(self, cell, embedding_classes, embedding_size, initializer=None, reuse=None):
        super().__init__(cell, reuse)
        self._classes = _check_positive(embedding_classes, "embedding_classes")
        self._size = _check_positive(embedding_size, "embedding_size")
        self._initializer = initializer
        self._embedding = None

    @property
    def output_size(self):
        return self._cell.output_size

    def call(self, inputs, state):
        with device("/cpu:0"):
            if self._embedding is None:
                init = self._initializer or get_variable_scope().initializer
                if init is None:
                    init = random_uniform_initializer(-math.sqrt(3), math.sqrt(3))
                dtype = (state[0] if isinstance(state, tuple) else state).dtype
                self._embedding = self.add_variable("embedding", [self._classes, self._size], dtype=dtype,
                                                    initializer=init)
            embedded = nn_ops.embedding_lookup(self._embedding, array_ops.reshape(inputs, [-1]))
        return self._cell(embedded, state)


# ---------------------------------------------------------------------------------------------
# Stacked bidirectional networks
# ---------------------------------------------------------------------------------------------

def _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw):
    if not cells_fw:
        raise ValueError("Must specify at least one fw cell for BidirectionalRNN.")
    if not cells_bw:
        raise ValueError("Must specify at least one bw cell for BidirectionalRNN.")
    if not isinstance(cells_fw, list):
        raise ValueError("cells_fw must be a list of RNNCells (one per layer).")
    if not isinstance(cells_bw, list):
        raise ValueError("cells_bw must be a list of RNNCells (one per layer).")
    if len(cells_fw) != len(cells_bw):
        raise ValueError("Forward and Backward cells must have the same depth.")
    for what, states in (("fw", initial_states_fw), ("bw", initial_states_bw)):
        if states is not None and (not isinstance(states, list) or len(states) != len(cells_fw)):
            raise ValueError(f"initial_states_{what} must be a list of state tensors (one per layer).")


def stack_bidirectional_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None, initial_states_bw=None, dtype=None,
                            sequence_length=None, scope=None):
    """Layers of `static_bidirectional_rnn`, each fed the previous one's concatenated outputs
    (tf.contrib.rnn.stack_bidirectional_rnn); layer i's variables live under
    ``stack_bidirectional_rnn/cell_i/bidirectional_rnn/{fw,bw}``. Returns
    ``(outputs, states_fw, states_bw)`` with one final state per layer."""
    _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    if not inputs:
        raise ValueError("inputs must not be empty")
    states_fw, states_bw = [], []
    prev = inputs
    with variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            with variable_scope(f"cell_{i}"):
                prev, state_fw, state_bw = static_bidirectional_rnn(
                    cell_fw, cell_bw, prev, initial_state_fw=initial_states_fw[i] if initial_states_fw else None,
                    initial_state_bw=initial_states_bw[i] if initial_states_bw else None,
                    sequence_length=sequence_length, dtype=dtype)
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return prev, tuple(states_fw), tuple(states_bw)


def stack_bidirectional_dynamic_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None, initial_states_bw=None,
                                    dtype=None, sequence_length=None, parallel_iterations=None, time_major=False,
                                    scope=None, swap_memory=False):
    """Layers of `bidirectional_dynamic_rnn`, each fed the previous one's forward and backward
    outputs concatenated on the depth axis (tf.contrib.rnn.stack_bidirectional_dynamic_rnn).

    Layer i's variables live under ``stack_bidirectional_rnn/cell_i/bidirectional_rnn/{fw,bw}``.
    Returns ``(outputs, states_fw, states_bw)``: the last layer's outputs [batch, time, 2 * depth]
    (time-major with `time_major`) and one final state per layer and direction.
    """
    _check_stack(cells_fw, cells_bw, initial_states_fw, initial_states_bw)
    if inputs is None:
        raise ValueError("inputs must not be None")
    states_fw, states_bw = [], []
    prev = inputs
    with variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            with variable_scope(f"cell_{i}"):
                outputs, (state_fw, state_bw) = bidirectional_dynamic_rnn(
                    cell_fw, cell_bw, prev, initial_state_fw=initial_states_fw[i] if initial_states_fw else None,
                    initial_state_bw=initial_states_bw[i] if initial_states_bw else None,
                    sequence_length=sequence_length, parallel_iterations=parallel_iterations, dtype=dtype,
                    swap_memory=swap_memory, time_major=time_major)
                prev = array_ops.concat(list(outputs), 2)
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return prev, tuple(states_fw), tuple(states_bw)
