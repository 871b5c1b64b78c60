"""Recurrent networks over time (tf.compat.v1.nn.dynamic_rnn, static_rnn and the bidirectional ones).

`dynamic_rnn` is a dataflow `while_loop`, as in TF: one iteration per time step, the cell built once
inside the body. Each iteration reads its input slice with a gather on the time axis and writes its
output into a preallocated ``[time, batch, depth]`` buffer with TensorScatterUpdate, the job TF's
TensorArray does; the buffer is a loop variable, so the gradient of a step's output is a slice of
the buffer's gradient and the backward loop needs only the saved time index to find it. Time steps
never written (past the longest `sequence_length`) stay zero, as TF's outputs do.

With `sequence_length`, each row stops at its own length: its outputs past it are zeros and its state
is copied through unchanged, so the final state is the state at the row's last valid step.
"""
from __future__ import annotations

import numbers

from actorflow.graph import dtypes, nest
from actorflow.graph.control_flow import while_loop
from actorflow.graph.graph import Tensor, control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.ops.scatter_nd_ops import tensor_scatter_nd_update
from actorflow.graph.ops.tensor_array_ops import TensorArray
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variable_scope import variable_scope
from actorflow.rnn_cell import _zero_state_tensors

__all__ = ["dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "static_bidirectional_rnn", "raw_rnn",
           "static_state_saving_rnn"]


def _check_cell(cell, what="cell"):
    if not (hasattr(cell, "output_size") and hasattr(cell, "state_size") and callable(cell)):
        raise TypeError(f"{what} must be an instance of RNNCell, saw: {type(cell).__name__}")


def _transpose_batch_time(x):
    """Swaps the first two axes: [batch, time, ...] <-> [time, batch, ...]."""
    x = convert_to_tensor(x)
    r = x.shape.ndims
    if r is None:
        raise ValueError(f"dynamic_rnn: the rank of input '{x.name}' must be known")
    if r < 2:
        raise ValueError(f"Expected input tensor '{x.name}' to have rank at least 2, but saw shape {x.shape}")
    return array_ops.transpose(x, [1, 0] + list(range(2, r)))


def _batch_size(flat_input, axis):
    """The static batch size of the first input that has one, else a scalar tensor."""
    for x in flat_input:
        dims = x.shape.dims
        if dims is not None and len(dims) > axis and dims[axis] is not None:
            return dims[axis]
    return array_ops.shape(flat_input[0])[axis]


def _sizes_list(size) -> list:
    return [size] if isinstance(size, numbers.Integral) else TensorShape(size).as_list()


def _sequence_length(sequence_length):
    seq = math_ops.cast(sequence_length, dtypes.int32)
    if seq.shape.ndims not in (None, 1):
        raise ValueError(f"sequence_length must be a vector of length batch_size, but saw shape: {seq.shape}")
    return identity(seq, name="sequence_length")


def _copy_through(copy_cond, old, new):
    """Rows where `copy_cond` holds take `old`, the others `new` (TF's _copy_one_through)."""
    rank = new.shape.ndims
    cond = copy_cond if rank in (None, 1) else array_ops.reshape(copy_cond, [-1] + [1] * (rank - 1))
    out = math_ops.where_v2(cond, old, new)
    out.set_shape(new.shape)
    return out


def _rnn_step(time, sequence_length, zero_output, state, call_cell):
    """One step with per-row lengths: zeros out and copy the state through where time >= length."""
    new_output, new_state = call_cell()
    nest.assert_same_structure(zero_output, new_output)
    nest.assert_same_structure(state, new_state)
    copy_cond = math_ops.greater_equal(time, sequence_length)
    out = [_copy_through(copy_cond, z, n) for z, n in zip(nest.flatten(zero_output), nest.flatten(new_output))]
    st = [_copy_through(copy_cond, s, n) for s, n in zip(nest.flatten(state), nest.flatten(new_state))]
    return nest.pack_sequence_as(new_output, out), nest.pack_sequence_as(new_state, st)


def _initial_state(cell, initial_state, batch_size, dtype):
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError("If there is no initial_state, you must give a dtype.")
    return cell.zero_state(batch_size, dtype)


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None, parallel_iterations=None,
                swap_memory=False, time_major=False, scope=None):
    """Runs `cell` over the time axis of `inputs` in a while loop (tf.compat.v1.nn.dynamic_rnn).

    `inputs` is ``[batch, time, ...]`` (``[time, batch, ...]`` with `time_major=True`), or a nested
    structure of such tensors. Returns ``(outputs, state)``: outputs stacked over time in the same
    layout, and the final state. `sequence_length` (a ``[batch]`` int vector) stops each row at its
    length (zero outputs, state copied through); `initial_state` defaults to ``cell.zero_state``
    with `dtype`. Variables are created under `scope` (default ``"rnn"``), so a BasicLSTMCell's are
    ``rnn/basic_lstm_cell/kernel`` and ``.../bias`` as in TF. `swap_memory` is accepted and ignored.
    """
    _check_cell(cell)
    with variable_scope(scope or "rnn"):
        flat_input = [convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not flat_input:
            raise ValueError("dynamic_rnn: inputs must not be empty")
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        parallel_iterations = parallel_iterations or 32
        if sequence_length is not None:
            sequence_length = _sequence_length(sequence_length)
        batch_size = _batch_size(flat_input, 1)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(cell, inputs, state, parallel_iterations, sequence_length,
                                                 batch_size, dtypes.as_dtype(dtype) if dtype else None)
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(cell, inputs, initial_state, parallel_iterations, sequence_length, batch_size, dtype=None):
    """The loop of dynamic_rnn. Its outputs (and their zeros past a row's length) are of `dtype`
    when given, else of the state's dtype, as in TF (crf_decode's int32 backpointers rely on it)."""
    state = initial_state
    flat_input = nest.flatten(inputs)
    for x in flat_input:
        if x.shape.ndims is not None and x.shape.ndims < 2:
            raise ValueError(f"dynamic_rnn: input '{x.name}' must be at least rank 2 [time, batch, ...], got "
                             f"shape {x.shape}")
    static_t = [x.shape.dims[0] for x in flat_input if x.shape.dims is not None]
    known_t = {t for t in static_t if t is not None}
    if len(known_t) > 1:
        raise ValueError(f"dynamic_rnn: the inputs' time steps differ: {sorted(known_t)}")
    const_time = known_t.pop() if known_t else None
    const_batch = batch_size if isinstance(batch_size, int) else None
    time_steps = const_time if const_time is not None else array_ops.shape(flat_input[0])[0]
    if const_time == 0:
        raise ValueError("dynamic_rnn: the inputs have 0 time steps")
    first_state = nest.flatten(state)[0]
    if dtype is None:
        dtype = first_state.dtype if isinstance(first_state, Tensor) else flat_input[0].dtype

    with name_scope("dynamic_rnn"):
        zero_output = _zero_state_tensors(cell.output_size, batch_size, dtype)
        flat_sizes = [_sizes_list(s) for s in nest.flatten(cell.output_size)]
        buffers = []
        for i, size in enumerate(flat_sizes):
            if isinstance(time_steps, int) and isinstance(batch_size, int):
                buf = array_ops.zeros([time_steps, batch_size] + size, dtype=dtype, name=f"output_{i}")
            else:
                shape = array_ops.stack([convert_to_tensor(time_steps, dtype=dtypes.int32),
                                         convert_to_tensor(batch_size, dtype=dtypes.int32)] + size)
                buf = array_ops.zeros(shape, dtype=dtype, name=f"output_{i}")
                buf.set_shape([const_time, const_batch] + size)
            buffers.append(buf)
        time = constant(0, dtype=dtypes.int32, name="time")
        if sequence_length is not None:
            max_len = math_ops.reduce_max(sequence_length)
            loop_bound = math_ops.minimum(time_steps, math_ops.maximum(1, max_len))
        else:
            loop_bound = time_steps

    input_shapes = [x.shape.dims[1:] if x.shape.dims is not None else None for x in flat_input]

    def body(time, bufs, state):
        step_in = []
        for x, shp in zip(flat_input, input_shapes):
            x_t = array_ops.gather(x, time)
            if shp is not None:
                x_t.set_shape(shp)
            step_in.append(x_t)
        step_in = nest.pack_sequence_as(inputs, step_in)

        def call_cell():
            return cell(step_in, state)
        if sequence_length is not None:
            output, new_state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
        else:
            output, new_state = call_cell()
        for old, new in zip(nest.flatten(state), nest.flatten(new_state)):
            # The state's static shape must not get less specific around the loop.
            if isinstance(old, Tensor) and new.shape.is_compatible_with(old.shape):
                new.set_shape(old.shape)
        idx = array_ops.reshape(time, [1, 1])
        new_bufs = [tensor_scatter_nd_update(b, idx, array_ops.expand_dims(o, 0))
                    for b, o in zip(bufs, nest.flatten(output))]
        return [time + 1, new_bufs, new_state]

    _, final_bufs, final_state = while_loop(lambda time, *_: math_ops.less(time, loop_bound), body,
                                            [time, buffers, state], parallel_iterations=parallel_iterations,
                                            maximum_iterations=time_steps)
    for b, size in zip(final_bufs, flat_sizes):
        b.set_shape([const_time, const_batch] + size)
    return nest.pack_sequence_as(cell.output_size, final_bufs), final_state


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """Runs `cell` over a Python list of per-step inputs, unrolled in the graph (tf.compat.v1.nn.static_rnn).

    `inputs` is a list of ``[batch, depth]`` tensors (or nested structures of them). Returns
    ``(outputs, state)``: the list of per-step outputs and the final state. With `sequence_length`
    rows past their length give zero outputs and keep their state, as in `dynamic_rnn`.
    """
    _check_cell(cell)
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with variable_scope(scope or "rnn") as varscope:
        flat_first = [convert_to_tensor(x) for x in nest.flatten(inputs[0])]
        batch_size = _batch_size(flat_first, 0)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        if sequence_length is not None:
            sequence_length = _sequence_length(sequence_length)
            first_state = nest.flatten(state)[0]
            zero_output = _zero_state_tensors(cell.output_size, batch_size, first_state.dtype)
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()

            def call_cell(input_=input_, state=state):
                return cell(input_, state)
            if sequence_length is not None:
                output, state = _rnn_step(constant(time, dtype=dtypes.int32), sequence_length, zero_output,
                                          state, call_cell)
            else:
                output, state = call_cell()
            outputs.append(output)
        return outputs, state


def _reverse_time(x, seq_lengths, time_axis, batch_axis):
    """`x` reversed along `time_axis`, each row only over its first `seq_lengths[b]` steps
    (tf.reverse_sequence; all of it with seq_lengths None, tf.reverse)."""
    x = convert_to_tensor(x)
    steps = array_ops.shape(x)[time_axis]
    t = array_ops.range(0, steps)
    if seq_lengths is None:
        out = array_ops.gather(x, steps - 1 - t, axis=time_axis)
        out.set_shape(x.shape)
        return out
    lengths = math_ops.cast(seq_lengths, dtypes.int32)
    # Batch-major view: index[b, t] = len_b - 1 - t inside the row, t beyond it.
    xb = x if (batch_axis, time_axis) == (0, 1) else _transpose_batch_time(x)
    lb = array_ops.expand_dims(lengths, 1)
    tt = array_ops.expand_dims(t, 0)
    idx = math_ops.where_v2(math_ops.less(tt, lb), lb - 1 - tt, tt + 0 * lb)
    out = array_ops.gather(xb, idx, axis=1, batch_dims=1)
    out.set_shape(xb.shape)
    return out if (batch_axis, time_axis) == (0, 1) else _transpose_batch_time(out)


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None, initial_state_fw=None,
                              initial_state_bw=None, dtype=None, parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """A forward and a backward `dynamic_rnn` over the same inputs (tf.compat.v1.nn.bidirectional_dynamic_rnn).

    The backward cell sees each row reversed over its first `sequence_length` steps (all of them
    without lengths) and its outputs are reversed back. Variables live under
    ``bidirectional_rnn/fw/...`` and ``bidirectional_rnn/bw/...``. Returns
    ``((output_fw, output_bw), (state_fw, state_bw))``.
    """
    _check_cell(cell_fw, "cell_fw")
    _check_cell(cell_bw, "cell_bw")
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length=sequence_length,
                                              initial_state=initial_state_fw, dtype=dtype,
                                              parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                                              time_major=time_major, scope=fw_scope)
        time_axis, batch_axis = (0, 1) if time_major else (1, 0)

        def rev(x):
            return _reverse_time(x, sequence_length, time_axis, batch_axis)
        with variable_scope("bw") as bw_scope:
            inputs_rev = nest.map_structure(rev, inputs)
            tmp, state_bw = dynamic_rnn(cell_bw, inputs_rev, sequence_length=sequence_length,
                                        initial_state=initial_state_bw, dtype=dtype,
                                        parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                                        time_major=time_major, scope=bw_scope)
        output_bw = nest.map_structure(rev, tmp)
    return (output_fw, output_bw), (state_fw, state_bw)


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None, initial_state_bw=None, dtype=None,
                             sequence_length=None, scope=None):
    """A forward and a backward `static_rnn` (tf.compat.v1.nn.static_bidirectional_rnn).

    Returns ``(outputs, state_fw, state_bw)`` where each output is the forward and backward outputs
    of that step concatenated along axis 1.
    """
    _check_cell(cell_fw, "cell_fw")
    _check_cell(cell_bw, "cell_bw")
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("inputs must be a non-empty list")

    def reverse_seq(seq):
        if sequence_length is None:
            return list(reversed(seq))
        flat = [nest.flatten(x) for x in seq]
        rev_cols = []
        for k in range(len(flat[0])):
            stacked = array_ops.stack([f[k] for f in flat])
            rev_cols.append(array_ops.unstack(_reverse_time(stacked, sequence_length, 0, 1), num=len(seq)))
        return [nest.pack_sequence_as(seq[i], [col[i] for col in rev_cols]) for i in range(len(seq))]

    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype, sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            tmp, state_bw = static_rnn(cell_bw, reverse_seq(list(inputs)), initial_state_bw, dtype,
                                       sequence_length, scope=bw_scope)
    out_bw = reverse_seq(tmp)
    outputs = [nest.pack_sequence_as(f, [array_ops.concat([a, b], 1)
                                         for a, b in zip(nest.flatten(f), nest.flatten(b_))])
               for f, b_ in zip(out_fw, out_bw)]
    return outputs, state_fw, state_bw



def _emit_zeros(batch_size, size, dtype):
    """Zeros [batch_size] + size; `size` a TensorShape or an int32 shape tensor."""
    if isinstance(size, Tensor):
        b = batch_size if isinstance(batch_size, Tensor) else constant(int(batch_size), dtype=dtypes.int32)
        return array_ops.zeros(array_ops.concat([array_ops.reshape(math_ops.cast(b, dtypes.int32), [1]), size], 0),
                               dtype=dtype)
    return _zero_state_tensors(size, batch_size, dtype)


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """An RNN whose inputs, state and emitted outputs `loop_fn` decides step by step
    (tf.compat.v1.nn.raw_rnn): `loop_fn(time, cell_output, cell_state, loop_state)` returns
    (finished [batch] bool, next_input, next_cell_state, emit_output, next_loop_state); it is called
    once with cell_output None to start (then next_cell_state is the initial state and
    emit_output, if not None, the structure of what is emitted), and after each cell call. The loop
    runs while some row is not finished; finished rows emit zeros and keep their state. Returns
    (emit_ta: TensorArrays of the emitted outputs over time, final_state, final_loop_state)."""
    _check_cell(cell)
    if not callable(loop_fn):
        raise TypeError(f"Argument `loop_fn` must be a callable. Received: {loop_fn}.")
    with variable_scope(scope or "rnn"):
        time = constant(0, dtype=dtypes.int32)
        elements_finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(time, None, None, None)
        flat_input = [convert_to_tensor(x) for x in nest.flatten(next_input)]
        next_input = nest.pack_sequence_as(next_input, flat_input)
        loop_state = init_loop_state if init_loop_state is not None else constant(0, dtype=dtypes.int32)
        static_batch = TensorShape([None])
        for x in flat_input:
            if x.shape.ndims == 0:
                raise ValueError(f"raw_rnn: input '{x.name}' must have a batch dimension")
            b = TensorShape([None]) if x.shape.ndims is None else TensorShape([x.shape[0]])
            if not static_batch.is_compatible_with(b):
                raise ValueError(f"raw_rnn: the inputs' batch sizes differ: {static_batch} and {b}")
            static_batch = static_batch.merge_with(b)
        const_batch = static_batch[0]
        batch_size = const_batch if const_batch is not None else array_ops.shape(flat_input[0])[0]
        nest.assert_same_structure(initial_state, cell.state_size)
        flat_state = [convert_to_tensor(x) for x in nest.flatten(initial_state)]
        state = nest.pack_sequence_as(initial_state, flat_state)
        if emit_structure is not None:
            flat_emit = [convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            emit_sizes = [e.shape if e.shape.is_fully_defined() else array_ops.shape(e) for e in flat_emit]
            emit_dtypes = [e.dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            emit_sizes = [TensorShape(_sizes_list(s)) for s in nest.flatten(emit_structure)]
            emit_dtypes = [flat_state[0].dtype] * len(emit_sizes)
        flat_ta = [TensorArray(dtype=dt, dynamic_size=True, size=0, name=f"rnn_output_{i}",
                               element_shape=TensorShape([const_batch]).concatenate(
                                   sz if isinstance(sz, TensorShape) else TensorShape(None)))
                   for i, (dt, sz) in enumerate(zip(emit_dtypes, emit_sizes))]
        emit_ta = nest.pack_sequence_as(emit_structure, flat_ta)
        zero_emit = nest.pack_sequence_as(emit_structure, [_emit_zeros(batch_size, sz, dt)
                                                           for sz, dt in zip(emit_sizes, emit_dtypes)])

        def body(time, finished, current_input, emit_ta, state, loop_state):
            next_output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state)
            nest.assert_same_structure(cell.output_size, next_output)
            next_time = time + 1
            next_finished, next_input, next_state, emit_output, next_loop_state = loop_fn(
                next_time, next_output, cell_state, loop_state)
            nest.assert_same_structure(state, next_state)
            nest.assert_same_structure(current_input, next_input)
            nest.assert_same_structure(emit_ta, emit_output)
            loop_state = loop_state if next_loop_state is None else next_loop_state

            def copy_some_through(current, candidate):
                def copy_fn(cur, cand):
                    cand = convert_to_tensor(cand)
                    if cur.shape.ndims == 0:       # scalars pass through, as in TF
                        return cand
                    return _copy_through(finished, cur, cand)
                return nest.map_structure(copy_fn, current, candidate)

            emit_output = copy_some_through(zero_emit, emit_output)
            next_state = copy_some_through(state, next_state)
            emit_ta = nest.map_structure(lambda ta, e: ta.write(time, e), emit_ta, emit_output)
            finished = math_ops.logical_or(finished, next_finished)
            return next_time, finished, next_input, emit_ta, next_state, loop_state

        returned = while_loop(lambda t, finished, *_: math_ops.logical_not(math_ops.reduce_all(finished)), body,
                              [time, convert_to_tensor(elements_finished), next_input, emit_ta, state, loop_state],
                              parallel_iterations=parallel_iterations or 32, swap_memory=swap_memory)
        emit_ta, final_state, final_loop_state = returned[-3:]
        return emit_ta, final_state, (None if init_loop_state is None else final_loop_state)


def static_state_saving_rnn(cell, inputs, state_saver, state_name, sequence_length=None, scope=None):
    """static_rnn whose initial state comes from `state_saver.state(name)` and whose final state is
    saved with `state_saver.save_state(name, state)` before the last output and the returned state
    can be read (tf.compat.v1.nn.static_state_saving_rnn). `state_name` is a string, or a structure
    of them matching a nested `cell.state_size`."""
    state_is_tuple = nest.is_nested(cell.state_size)
    if state_is_tuple != nest.is_nested(state_name):
        raise ValueError(f"static_state_saving_rnn: state_name should be the same type as cell.state_size. "
                         f"state_name: {state_name!s}, cell.state_size: {cell.state_size!s}")
    if state_is_tuple:
        nest.assert_same_structure(state_name, cell.state_size)
        initial_state = nest.pack_sequence_as(cell.state_size,
                                              [state_saver.state(n) for n in nest.flatten(state_name)])
    else:
        initial_state = state_saver.state(state_name)
    outputs, state = static_rnn(cell, inputs, initial_state=initial_state, sequence_length=sequence_length,
                                scope=scope)
    outputs = list(outputs)
    flat_state = nest.flatten(state)
    if state_is_tuple:
        save = [state_saver.save_state(n, s) for n, s in zip(nest.flatten(state_name), flat_state)]
    else:
        save = [state_saver.save_state(state_name, state)]
    with control_dependencies(save):
        last = outputs[-1]
        outputs[-1] = nest.pack_sequence_as(last, [identity(o) for o in nest.flatten(last)])
        state = nest.pack_sequence_as(state, [identity(s) for s in flat_state])
    return outputs, state
