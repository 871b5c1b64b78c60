"""Recurrent cells (tf.compat.v1.nn.rnn_cell): BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell,
MultiRNNCell and the Dropout, Residual and Device wrappers.

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step. It owns variables
named as TF 1.x names them, so that checkpoints and `af.trainable_variables()` match a TF program:
on its first call a cell opens a variable scope named after it (``basic_lstm_cell``,
``lstm_cell_1``...) under the current one, creates ``kernel`` and ``bias`` there, and re-enters
that scope with reuse on every later call. The arithmetic follows TF's rnn_cell_impl step for step
(gate order i, j, f, o; the forget bias added before the sigmoid), so the same weights give the same
numbers.

Variables are created outside any cond or while context even when the first call is inside a loop
body (`dynamic_rnn`), as TF's variable initializers are: the loop reads them on every iteration and
the gradient reaches them.
"""
from __future__ import annotations

import collections
import numbers
import re

from actorflow.graph import dtypes, nest
from actorflow.graph.graph import Tensor, convert_to_tensor, device, name_scope
from actorflow.graph.initializers import constant_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, clip_ops, math_ops, nn_ops, random_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variable_scope import fixed_size_partitioner, get_variable, variable_scope
from actorflow.graph.variables import init_scope

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell",
           "DropoutWrapper", "ResidualWrapper", "DeviceWrapper", "LSTMStateTuple"]

_WEIGHTS = "kernel"
_BIAS = "bias"


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The (c, h) state of an LSTM cell: cell state and output (tf.nn.rnn_cell.LSTMStateTuple)."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype is not h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype.name} vs {h.dtype.name}")
        return c.dtype


def _snake(name: str) -> str:
    s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()


def _last_dim(shape: TensorShape, what: str) -> int:
    if shape.dims is None or len(shape.dims) != 2:
        raise ValueError(f"{what}: inputs must be 2-D [batch, depth], got shape {shape}")
    d = shape.dims[-1]
    if d is None:
        raise ValueError(f"{what}: the last dimension of the inputs must be known, got shape {shape}")
    return d


def _zero_state_tensors(state_size, batch_size, dtype):
    """Zeros of shape [batch_size, s] for every leaf s of `state_size` (TF's _zero_state_tensors)."""
    def zeros(s):
        dims = [s] if isinstance(s, numbers.Integral) else list(TensorShape(s).as_list())
        if isinstance(batch_size, Tensor):
            shape = array_ops.concat([array_ops.reshape(math_ops.cast(batch_size, dtypes.int32), [1]),
                                      constant(dims, dtype=dtypes.int32)], 0)
            out = array_ops.zeros(shape, dtype=dtype)
            out._shape = TensorShape([None] + dims)
            return out
        return array_ops.zeros([int(batch_size)] + dims, dtype=dtype)
    return nest.map_structure(zeros, state_size)


class RNNCell:
    """The abstract recurrent cell (tf.compat.v1.nn.rnn_cell.RNNCell).

    Subclasses define `state_size`, `output_size` and `call(inputs, state)`, and create their
    variables in `build(inputs_shape)` with `add_variable`. Calling the cell,
    ``cell(inputs, state, scope=None)``, opens the cell's variable scope (`scope` when given on the
    first call, else a unique scope named after the cell under the current one), builds it once, and
    reuses its variables on every later call, as TF's layer-based cells do.
    """

    def __init__(self, trainable=True, name=None, dtype=None, _reuse=None, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(kwargs)}")
        self.trainable = trainable
        self._base_name = name or _snake(type(self).__name__)
        self._dtype = None if dtype is None else dtypes.as_dtype(dtype)
        self._reuse = _reuse
        self._scope = None
        self.built = False
        self._variables: list = []

    @property
    def name(self) -> str:
        """The cell's variable scope name once called, else its base name (``lstm_cell``...)."""
        return self._scope.name if self._scope is not None else self._base_name

    @property
    def dtype(self):
        """The dtype of the cell's variables (from its first inputs unless given)."""
        return self._dtype

    @property
    def state_size(self):
        """The size(s) of the state: an int, a TensorShape, or a nested tuple of them."""
        raise NotImplementedError

    @property
    def output_size(self):
        """The size of the output: an int or a TensorShape."""
        raise NotImplementedError

    @property
    def variables(self) -> list:
        """The variables the cell created (after its first call)."""
        return list(self._variables)

    @property
    def trainable_variables(self) -> list:
        """The cell's variables when it is trainable, else none."""
        return list(self._variables) if self.trainable else []

    weights = variables
    trainable_weights = trainable_variables

    def build(self, inputs_shape):
        """Creates the cell's variables; `inputs_shape` is the static shape of the first inputs."""

    def call(self, inputs, state):
        """One time step: ``(output, new_state)`` from `inputs` and `state` (variables already built)."""
        raise NotImplementedError

    def add_variable(self, name, shape, dtype=None, initializer=None, partitioner=None, trainable=None):
        """A variable of this cell, created in the root frame under the cell's variable scope."""
        with init_scope():
            v = get_variable(name, shape=shape, dtype=dtype or self._dtype or dtypes.float32,
                             initializer=initializer, partitioner=partitioner,
                             trainable=self.trainable if trainable is None else trainable)
        self._variables.append(v)
        return v

    add_weight = add_variable

    def __call__(self, inputs, state, scope=None):
        if scope is not None:
            with variable_scope(scope) as s:
                return self._call_in_scope(inputs, state, s)
        return self._call_in_scope(inputs, state, None)

    def _call_in_scope(self, inputs, state, scope):
        if self._scope is None:
            if self._reuse:
                with variable_scope(scope if scope is not None else self._base_name) as captured:
                    self._scope = captured
            else:
                with variable_scope(scope, default_name=self._base_name) as captured:
                    self._scope = captured
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False), \
                name_scope(self._scope.original_name_scope):
            inputs = nest.map_structure(convert_to_tensor, inputs)
            if not self.built:
                if self._dtype is None:
                    first = nest.flatten(inputs)[0]
                    self._dtype = first.dtype if first.dtype.is_floating else dtypes.float32
                self.build(nest.map_structure(lambda t: t.shape, inputs)
                           if not isinstance(inputs, Tensor) else inputs.shape)
                self.built = True
            return self.call(inputs, state)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """The zero state for `inputs` (batch size and dtype from them) or for `batch_size`/`dtype`."""
        if inputs is not None:
            inputs = convert_to_tensor(inputs)
            dim = inputs.shape.dims[0] if inputs.shape.dims else None
            batch_size = dim if dim is not None else array_ops.shape(inputs)[0]
            dtype = dtype or inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError("get_initial_state needs inputs, or both batch_size and dtype")
        return self.zero_state(batch_size, dtype)

    def zero_state(self, batch_size, dtype):
        """Zero-filled state tensor(s) of shape [batch_size, s] (tf.nn.rnn_cell.RNNCell.zero_state)."""
        with name_scope(type(self).__name__ + "ZeroState", values=[batch_size] if isinstance(batch_size, Tensor)
                        else None):
            return _zero_state_tensors(self.state_size, batch_size, dtypes.as_dtype(dtype))


LayerRNNCell = RNNCell


class BasicRNNCell(RNNCell):
    """The basic RNN cell: ``output = new_state = act(W [x, h] + b)`` (tf.nn.rnn_cell.BasicRNNCell)."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        self._kernel = self.add_variable(_WEIGHTS, [depth + self._num_units, self._num_units])
        self._bias = self.add_variable(_BIAS, [self._num_units], initializer=zeros_initializer())

    def call(self, inputs, state):
        z = math_ops.matmul(array_ops.concat([inputs, state], 1), self._kernel)
        out = self._activation(nn_ops.bias_add(z, self._bias))
        return out, out


class BasicLSTMCell(RNNCell):
    """The basic LSTM cell, no peepholes and no projection (tf.nn.rnn_cell.BasicLSTMCell).

    ``i, j, f, o = split(W [x, h] + b)``; ``c' = c * sigmoid(f + forget_bias) + sigmoid(i) * act(j)``;
    ``h' = act(c') * sigmoid(o)``. The state is an `LSTMStateTuple` (c, h), or their concatenation
    along axis 1 with `state_is_tuple=False`.
    """

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        n = self._num_units
        self._kernel = self.add_variable(_WEIGHTS, [depth + n, 4 * n])
        self._bias = self.add_variable(_BIAS, [4 * n], initializer=zeros_initializer())

    def call(self, inputs, state):
        sigmoid = math_ops.sigmoid
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = array_ops.split(state, 2, axis=1)
        gates = nn_ops.bias_add(math_ops.matmul(array_ops.concat([inputs, h], 1), self._kernel), self._bias)
        i, j, f, o = array_ops.split(gates, 4, axis=1)
        fb = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        new_c = math_ops.add(math_ops.multiply(c, sigmoid(math_ops.add(f, fb))),
                             math_ops.multiply(sigmoid(i), self._activation(j)))
        new_h = math_ops.multiply(self._activation(new_c), sigmoid(o))
        new_state = LSTMStateTuple(new_c, new_h) if self._state_is_tuple else array_ops.concat([new_c, new_h], 1)
        return new_h, new_state


class LSTMCell(RNNCell):
    """The LSTM cell with optional peepholes, cell clipping and output projection (tf.nn.rnn_cell.LSTMCell).

    Peepholes add ``w_f_diag * c`` and ``w_i_diag * c`` to the forget and input gates and
    ``w_o_diag * c'`` to the output gate; `cell_clip` clips c'; `num_proj` multiplies the output by
    ``projection/kernel`` (then `proj_clip` clips it). `num_unit_shards`/`num_proj_shards` split the
    kernels with a fixed-size partitioner, as in TF.
    """

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None, num_proj=None,
                 proj_clip=None, num_unit_shards=None, num_proj_shards=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._num_unit_shards = num_unit_shards
        self._num_proj_shards = num_proj_shards
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        n, p = self._num_units, self._num_proj or self._num_units
        return LSTMStateTuple(n, p) if self._state_is_tuple else n + p

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        n = self._num_units
        h_depth = self._num_proj or n
        part = fixed_size_partitioner(self._num_unit_shards) if self._num_unit_shards is not None else None
        self._kernel = self.add_variable(_WEIGHTS, [depth + h_depth, 4 * n], initializer=self._initializer,
                                         partitioner=part)
        self._bias = self.add_variable(_BIAS, [4 * n], initializer=zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=self._initializer)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=self._initializer)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            ppart = fixed_size_partitioner(self._num_proj_shards) if self._num_proj_shards is not None else None
            self._proj_kernel = self.add_variable("projection/" + _WEIGHTS, [n, self._num_proj],
                                                  initializer=self._initializer, partitioner=ppart)

    def _value(self, v):
        # A partitioned kernel is used as one tensor, its shards concatenated (TF does the same).
        return v.as_tensor() if hasattr(v, "as_tensor") else v

    def call(self, inputs, state):
        sigmoid, act = math_ops.sigmoid, self._activation
        n, p = self._num_units, self._num_proj or self._num_units
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = array_ops.slice(state, [0, 0], [-1, n])
            m_prev = array_ops.slice(state, [0, n], [-1, p])
        gates = nn_ops.bias_add(math_ops.matmul(array_ops.concat([inputs, m_prev], 1), self._value(self._kernel)),
                                self._bias)
        i, j, f, o = array_ops.split(gates, 4, axis=1)
        fb = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        if self._use_peepholes:
            c = (sigmoid(f + fb + self._w_f_diag * c_prev) * c_prev
                 + sigmoid(i + self._w_i_diag * c_prev) * act(j))
        else:
            c = sigmoid(f + fb) * c_prev + sigmoid(i) * act(j)
        if self._cell_clip is not None:
            c = clip_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * act(c)
        else:
            m = sigmoid(o) * act(c)
        if self._num_proj is not None:
            with variable_scope("projection"):
                m = math_ops.matmul(m, self._value(self._proj_kernel))
            if self._proj_clip is not None:
                m = clip_ops.clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else array_ops.concat([c, m], 1)
        return m, new_state


class GRUCell(RNNCell):
    """The gated recurrent unit cell (tf.nn.rnn_cell.GRUCell, Cho et al. 2014).

    ``r, u = sigmoid(W_g [x, h] + b_g)`` (``gates/kernel``, ``gates/bias``, bias 1.0 by default);
    ``c = act(W_c [x, r * h] + b_c)`` (``candidate/...``); ``h' = u * h + (1 - u) * c``.
    """

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None, bias_initializer=None,
                 name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, _reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._activation = activation or math_ops.tanh
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, type(self).__name__)
        n = self._num_units
        self._gate_kernel = self.add_variable("gates/" + _WEIGHTS, [depth + n, 2 * n],
                                              initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable("gates/" + _BIAS, [2 * n], initializer=self._bias_initializer
                                            or constant_initializer(1.0))
        self._candidate_kernel = self.add_variable("candidate/" + _WEIGHTS, [depth + n, n],
                                                   initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable("candidate/" + _BIAS, [n], initializer=self._bias_initializer
                                                 or zeros_initializer())

    def call(self, inputs, state):
        gates = nn_ops.bias_add(math_ops.matmul(array_ops.concat([inputs, state], 1), self._gate_kernel),
                                self._gate_bias)
        r, u = array_ops.split(math_ops.sigmoid(gates), 2, axis=1)
        cand = nn_ops.bias_add(math_ops.matmul(array_ops.concat([inputs, r * state], 1), self._candidate_kernel),
                               self._candidate_bias)
        c = self._activation(cand)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """Cells stacked in layers, each one's output the next one's input (tf.nn.rnn_cell.MultiRNNCell).

    Cell i's variables live under ``multi_rnn_cell/cell_i/``. The state is a tuple with one entry
    per cell, or (with `state_is_tuple=False`) their concatenation along axis 1.
    """

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        cells = list(cells)
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not state_is_tuple and any(isinstance(c.state_size, tuple) for c in cells):
            raise ValueError("Some cells return tuples of states, but the flag state_is_tuple is not set. "
                             f"State sizes are: {[c.state_size for c in cells]}")
        self._cells = cells
        self._state_is_tuple = state_is_tuple

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def zero_state(self, batch_size, dtype):
        with name_scope(type(self).__name__ + "ZeroState"):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return super().zero_state(batch_size, dtype)

    @property
    def variables(self) -> list:
        return [v for c in self._cells for v in c.variables]

    @property
    def trainable_variables(self) -> list:
        return [v for c in self._cells for v in c.trainable_variables]

    def call(self, inputs, state):
        cur = inputs
        new_states = []
        start = 0
        for i, cell in enumerate(self._cells):
            with variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    cur_state = state[i]
                else:
                    cur_state = array_ops.slice(state, [0, start], [-1, cell.state_size])
                    start += cell.state_size
                cur, ns = cell(cur, cur_state)
                new_states.append(ns)
        return cur, (tuple(new_states) if self._state_is_tuple else array_ops.concat(new_states, 1))


class _Wrapper(RNNCell):
    """A cell around another one; it adds no variable scope of its own (TF 1.x wrappers)."""

    def __init__(self, cell):
        super().__init__(name=getattr(cell, "_base_name", None))
        if not isinstance(cell, RNNCell) and not callable(cell):
            raise TypeError(f"The parameter cell is not a RNNCell: {cell!r}")
        self._cell = cell

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    @property
    def variables(self) -> list:
        return self._cell.variables

    @property
    def trainable_variables(self) -> list:
        return self._cell.trainable_variables

    def zero_state(self, batch_size, dtype):
        with name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)


def _default_dropout_state_filter(substate):
    # TF never drops out an LSTM's memory c, only its output h.
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return not isinstance(substate, Tensor) or substate.dtype.is_floating


def _scalar_keep_prob(p):
    """A keep probability as DropoutWrapper uses it: a number as it is; a tensor of unknown rank (a
    ``placeholder(tf.float32, name='keep_prob')`` of no shape) reshaped to the scalar TF requires it
    to be, once, where the wrapper is made. Its known rank then lets the RNN's loop, which takes the
    probability in, compile (scheduler/jit); a fed value that is not a scalar is an error naming the
    reshape, where TF would broadcast it against the values."""
    if isinstance(p, numbers.Real) or not isinstance(p, Tensor) or p.shape.ndims is not None:
        return p
    with name_scope("DropoutWrapperInit"):
        return array_ops.reshape(p, [], name="keep_prob")


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and state (tf.nn.rnn_cell.DropoutWrapper).

    Each keep probability is a float in (0, 1] or a scalar tensor (a placeholder switches dropout off
    at test time). With `variational_recurrent=True` one mask per sequence is drawn (per
    `session.run`) and reused at every time step (Gal & Ghahramani); it needs `dtype`, and
    `input_size` when `input_keep_prob < 1`. The state of an LSTM is dropped out only in its h part,
    unless `dropout_state_filter_visitor` says otherwise.
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):
        super().__init__(cell)
        for what, p in (("input", input_keep_prob), ("state", state_keep_prob), ("output", output_keep_prob)):
            if isinstance(p, numbers.Real) and not 0 < p <= 1:
                raise ValueError(f"Parameter {what}_keep_prob must be between 0 and 1: {p}")
        self._input_keep_prob = _scalar_keep_prob(input_keep_prob)
        self._output_keep_prob = _scalar_keep_prob(output_keep_prob)
        self._state_keep_prob = _scalar_keep_prob(state_keep_prob)
        self._variational = variational_recurrent
        self._seed = seed
        self._filter = dropout_state_filter_visitor or _default_dropout_state_filter
        self._noise = {}
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be provided")
            dtype = dtypes.as_dtype(dtype)

            def noise(size, salt):
                shape = [1] + TensorShape(size).as_list()
                return random_ops.random_uniform(shape, dtype=dtype, seed=self._gen_seed(salt))
            if self._should_dropout(input_keep_prob):
                if input_size is None:
                    raise ValueError("When variational_recurrent=True and input_keep_prob < 1.0 or is unknown, "
                                     "input_size must be provided")
                self._noise["input"] = nest.map_structure(lambda s: noise(s, "input"), input_size)
            self._noise["state"] = nest.map_structure(lambda s: noise(s, "state"), cell.state_size)
            self._noise["output"] = nest.map_structure(lambda s: noise(s, "output"), cell.output_size)

    @staticmethod
    def _should_dropout(p):
        return not isinstance(p, numbers.Real) or p < 1

    def _gen_seed(self, salt):
        if self._seed is None:
            return None
        return (int(self._seed) + sum(map(ord, salt))) % (2**31 - 1)

    def _dropout(self, values, salt, keep_prob, keep_mask=None):
        flat = nest.flatten(values)
        masks = keep_mask if keep_mask is not None else [True] * len(flat)
        noise = nest.flatten(self._noise[salt]) if self._variational else [None] * len(flat)
        out = []
        for k, (v, m, nz) in enumerate(zip(flat, masks, noise)):
            if not m:
                out.append(v)
            elif nz is None:
                seed = None if self._seed is None else self._gen_seed(f"{salt}_{k}")
                out.append(nn_ops.dropout(v, keep_prob=keep_prob, seed=seed))
            else:
                kp = convert_to_tensor(keep_prob, dtype=v.dtype)
                binary = math_ops.floor(kp + nz)
                out.append(math_ops.divide(v, kp) * binary)
        return nest.pack_sequence_as(values, out)

    def _state_mask(self, state) -> list:
        """Which leaves of `state` get dropout, one bool per leaf of nest.flatten(state).

        As TF's get_traverse_shallow_structure: the filter sees each substructure from the top; True
        on a tuple descends into it, a bool elsewhere covers the whole substructure, and a tuple of
        bools (an LSTMStateTuple(c=False, h=True)) covers each child as a whole.
        """
        r = self._filter(state)
        if isinstance(r, (tuple, list)):
            return [bool(b) for child, b in zip(state, r) for _ in nest.flatten(child)]
        if r and isinstance(state, (tuple, list)):
            return [m for child in state for m in self._state_mask(child)]
        return [bool(r)] * len(nest.flatten(state))

    def __call__(self, inputs, state, scope=None):
        if self._should_dropout(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_keep_prob)
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._should_dropout(self._state_keep_prob):
            new_state = self._dropout(new_state, "state", self._state_keep_prob, self._state_mask(new_state))
        if self._should_dropout(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_keep_prob)
        return output, new_state


class ResidualWrapper(_Wrapper):
    """Adds the cell's inputs to its outputs (tf.nn.rnn_cell.ResidualWrapper).

    `residual_fn(inputs, outputs)` replaces the sum; inputs and outputs must have the same structure.
    """

    def __init__(self, cell, residual_fn=None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def __call__(self, inputs, state, scope=None):
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, output), new_state
        nest.assert_same_structure(inputs, output)
        res = nest.map_structure(lambda i, o: convert_to_tensor(i) + o, inputs, output)
        return res, new_state


class DeviceWrapper(_Wrapper):
    """Runs the cell, and builds its zero state, on `device` (tf.nn.rnn_cell.DeviceWrapper)."""

    def __init__(self, cell, device):
        super().__init__(cell)
        self._device = device

    def zero_state(self, batch_size, dtype):
        with device(self._device):
            return super().zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        with device(self._device):
            return self._cell(inputs, state, scope=scope)
