"""map_fn, scan, foldl and foldr (tf.compat.v1's functional ops), as TF 1.x builds them: one
while_loop over the elements' first dimension, each element read with `gather` (so a gradient
into the elements is one row per iteration), and the outputs of map_fn and scan written into
tensor lists (graph/ops/list_ops.py) that are stacked after the loop. Gradients flow through all
four, by the while loop's gradient."""
from __future__ import annotations

from actorflow.graph import dtypes, nest
from actorflow.graph.control_flow import while_loop
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops.array_ops import gathering, shapes
from actorflow.graph.ops.list_ops import TensorListReserve, TensorListSetItem, TensorListStack
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["map_fn", "scan", "foldl", "foldr", "vectorized_map"]


def _elements(elems):
    flat = [convert_to_tensor(e, name="elem") for e in nest.flatten(elems)]
    if not flat:
        raise ValueError("elems must be a tensor or a non-empty structure of tensors")
    for e in flat:
        if e.shape.ndims == 0:
            raise ValueError(f"elems must be tensors of rank >= 1 (unpacked along dimension 0), got a scalar "
                             f"'{e.name}'")
    n_static = flat[0].shape.dims[0] if flat[0].shape.dims is not None else None
    for e in flat[1:]:
        d = e.shape.dims[0] if e.shape.dims is not None else None
        if d is not None and n_static is not None and d != n_static:
            raise ValueError(f"elems must have the same first dimension, got {n_static} and {d} ('{e.name}')")
    n = n_static if n_static is not None else shapes.shape(flat[0])[0]
    return flat, n, n_static


def _element(elems, flat, i):
    return nest.pack_sequence_as(elems, [gathering.gather(e, i) for e in flat])


def _check_structure(want, got, what):
    try:
        nest.assert_same_structure(want, got)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{what}: the function's output does not have the structure expected ({e})") from None


def _initial(elems, flat, n, initializer, reverse):
    """(a0, its flat tensors, the first step) of a scan or fold: the initializer, else the first
    element (the last, in reverse), which the loop then skips."""
    if initializer is None:
        a0, start = _element(elems, flat, n - 1 if reverse else 0), 1
    else:
        a0, start = nest.map_structure(convert_to_tensor, initializer), 0
    return a0, [convert_to_tensor(v) for v in nest.flatten(a0)], start


def _lists(n, dts):
    return [TensorListReserve(n if isinstance(n, int) else n, element_dtype=dt, element_shape=TensorShape(None))
            for dt in dts]


def _stack(lists, dts, out_shapes, n_static):
    outs = []
    for lst, dt, shp in zip(lists, dts, out_shapes):
        outs.append(TensorListStack(lst, element_dtype=dt, element_shape=shp,
                                    num_elements=-1 if n_static is None else n_static))
    return outs


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False, infer_shape=True,
           name=None):
    """fn applied to each element of `elems` (unpacked along dimension 0), the results stacked
    (tf.map_fn). `dtype` gives the output's dtypes (and structure) when they differ from `elems`'."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name or "map"):
        flat, n, n_static = _elements(elems)
        out_struct = dtype if dtype is not None else nest.pack_sequence_as(elems, [e.dtype for e in flat])
        dts = [dtypes.as_dtype(d) for d in nest.flatten(out_struct)]
        out_shapes = [None] * len(dts)

        def body(i, *lists):
            y = fn(_element(elems, flat, i))
            _check_structure(out_struct, y, "map_fn")
            ys = [convert_to_tensor(v, dtype=dt) for v, dt in zip(nest.flatten(y), dts)]
            for k, v in enumerate(ys):
                out_shapes[k] = v.shape
            return [i + 1] + [TensorListSetItem(lst, i, v, element_dtype=dt) for lst, v, dt in zip(lists, ys, dts)]
        res = while_loop(lambda i, *lists: i < n, body, [convert_to_tensor(0)] + _lists(n, dts),
                         parallel_iterations=parallel_iterations or 10, back_prop=back_prop, swap_memory=swap_memory)
        outs = _stack(res[1:], dts, out_shapes, n_static)
        return nest.pack_sequence_as(out_struct, outs)


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, infer_shape=True,
         reverse=False, name=None):
    """The running values a = fn(a, x) over the elements of `elems`, stacked (tf.scan); without an
    `initializer` the first element (the last, with `reverse`) starts `a` and is the first output."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name or "scan"):
        flat, n, n_static = _elements(elems)
        a0, a_flat, start = _initial(elems, flat, n, initializer, reverse)
        dts = [v.dtype for v in a_flat]
        out_shapes = [v.shape for v in a_flat]
        lists = _lists(n, dts)
        if initializer is None:
            first = n - 1 if reverse else 0
            lists = [TensorListSetItem(lst, first, v, element_dtype=dt) for lst, v, dt in zip(lists, a_flat, dts)]

        def body(i, *state):
            k = len(a_flat)
            a = nest.pack_sequence_as(a0, list(state[:k]))
            j = n - 1 - i if reverse else i
            y = fn(a, _element(elems, flat, j))
            _check_structure(a0, y, "scan")
            ys = [convert_to_tensor(v, dtype=dt) for v, dt in zip(nest.flatten(y), dts)]
            lists = [TensorListSetItem(lst, j, v, element_dtype=dt) for lst, v, dt in zip(state[k:], ys, dts)]
            return [i + 1] + ys + lists
        invariants = [TensorShape([])] + [TensorShape(None) if v.shape.dims is None else v.shape for v in a_flat] \
            + [TensorShape([])] * len(lists)
        res = while_loop(lambda i, *s: i < n, body, [convert_to_tensor(start)] + a_flat + lists,
                         shape_invariants=invariants, parallel_iterations=parallel_iterations, back_prop=back_prop,
                         swap_memory=swap_memory)
        outs = _stack(res[1 + len(a_flat):], dts, out_shapes, n_static)
        return nest.pack_sequence_as(a0, outs)


def _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, default, reverse):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name or default):
        flat, n, _ = _elements(elems)
        a0, a_flat, start = _initial(elems, flat, n, initializer, reverse)

        def body(i, *state):
            a = nest.pack_sequence_as(a0, list(state))
            y = fn(a, _element(elems, flat, n - 1 - i if reverse else i))
            _check_structure(a0, y, default)
            return [i + 1] + [convert_to_tensor(v, dtype=t.dtype) for v, t in zip(nest.flatten(y), a_flat)]
        res = while_loop(lambda i, *s: i < n, body, [convert_to_tensor(start)] + a_flat,
                         parallel_iterations=parallel_iterations, back_prop=back_prop, swap_memory=swap_memory)
        return nest.pack_sequence_as(a0, list(res[1:]))


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, name=None):
    """a = fn(a, x) over the elements of `elems` from the first (tf.foldl); without an
    `initializer`, the first element starts `a`."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, "foldl", False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False, name=None):
    """a = fn(a, x) over the elements of `elems` from the last (tf.foldr)."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, "foldr", True)


def _output_dtypes(fn, elems, flat):
    """The structure of fn's output dtypes, from a trace of fn on placeholders of one element in a
    scratch graph; when fn uses tensors of the current graph, from a trace on element 0 here (its ops
    are never run)."""
    from actorflow.graph.graph import Graph, get_default_graph
    from actorflow.graph.ops.constant import placeholder
    scratch = Graph()
    try:
        with scratch.as_default():
            holders = [placeholder(e.dtype, TensorShape(None) if e.shape.dims is None else e.shape.dims[1:])
                       for e in flat]
            out = fn(nest.pack_sequence_as(elems, holders))
    except ValueError:
        g = get_default_graph()
        with g.name_scope("trace"):
            out = fn(_element(elems, flat, 0))
    return nest.map_structure(lambda t: convert_to_tensor(t).dtype if not hasattr(t, "dtype") else t.dtype, out)


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """fn applied to each element of `elems` (unpacked along dimension 0), the results stacked
    (tf.vectorized_map). Differs from TF: there is no pfor vectorizer, so this is always TF's
    fallback, a map_fn while loop (the same values); the output dtypes come from a trace of fn on
    one element (in a scratch graph when fn uses no tensor of the caller's)."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope("vectorized_map"):
        flat, _, _ = _elements(elems)
        dtype = _output_dtypes(fn, elems, flat)
        return map_fn(fn, elems, dtype=dtype, name="loop")
