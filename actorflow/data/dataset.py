"""Datasets (tf.compat.v1.data.Dataset): input pipelines built as graph ops.

A Dataset is a Python object holding a `variant` tensor (the output of its dataset op, see
graph/ops/dataset_ops.py) and the nested structure of its elements' dtypes and static shapes.
Transformations add ops to the default graph; `map`, `filter`, `flat_map` and `interleave` trace
their function into a graph function run by the actor runtime. Iterators (data/iterator.py) run
the pipeline. Element structures follow TF: tuples (and namedtuples) and dicts are structure,
everything else (a list included) is converted to one tensor.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from actorflow import errors as errors_lib
from actorflow.graph import dtypes, nest
from actorflow.graph import function as graph_function
from actorflow.graph.graph import Tensor, convert_to_tensor, register_attr_type
from actorflow.graph.ops import dataset_ops as ops
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["Dataset", "TextLineDataset", "AUTOTUNE"]

AUTOTUNE = -1           # tf.data.experimental.AUTOTUNE


# -- element structures ----------------------------------------------------------------------------

def _normalize(value, what="element"):
    """`value` with every leaf a Tensor (Datasets stay as they are)."""
    if isinstance(value, Dataset):
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_normalize(v, what) for v in value])
    if isinstance(value, tuple):
        return tuple(_normalize(v, what) for v in value)
    if isinstance(value, Mapping):
        return {k: _normalize(value[k], what) for k in value}
    if isinstance(value, Tensor):
        return value
    if value is None:
        raise TypeError(f"a dataset {what} cannot be None")
    if isinstance(value, (str, bytes)) or (isinstance(value, np.ndarray) and value.dtype.kind in "OSU"):
        raise TypeError(f"string {what}s need af.string tensors, which this build cannot make from {value!r:.60}")
    return convert_to_tensor(value)


def _types_of(structure):
    return nest.map_structure(lambda t: t.dtype, structure)


def _shapes_of(structure):
    return nest.map_structure(lambda t: t.shape, structure)


def _flat(structure):
    return tuple(nest.flatten(structure))


def _merge_shapes(a, b) -> TensorShape:
    """The most specific shape both `a` and `b` have (dimensions that differ become unknown)."""
    a, b = as_shape(a), as_shape(b)
    if a.dims is None or b.dims is None or len(a.dims) != len(b.dims):
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.dims, b.dims)])


def _i64(v, name):
    return convert_to_tensor(v, dtype=dtypes.int64, name=name) if not isinstance(v, Tensor) else _cast64(v)


def _cast64(t):
    if t.dtype is dtypes.int64:
        return t
    if not t.dtype.is_integer:
        raise TypeError(f"expected an integer tensor, got {t.dtype.name} tensor '{t.name}'")
    from actorflow.graph.ops.math_ops import cast
    return cast(t, dtypes.int64)


class _GeneratorSpec:
    """The Python side of a from_generator dataset: the callable and the structure of what it yields."""
    __slots__ = ("fn", "structure")

    def __init__(self, fn, structure):
        self.fn = fn
        self.structure = structure

    def __repr__(self):
        return f"<generator {getattr(self.fn, '__name__', self.fn)!s}>"

    def _attr_payload(self):
        # A Python callable cannot travel (as TF's py_func cannot): a serialized graph keeps its
        # name, and running it elsewhere fails saying so.
        return "py_generator", [str(getattr(self.fn, "__name__", self.fn)), self.structure]


def _decode_generator(payload):
    name, structure = payload

    def unavailable(*args):
        raise RuntimeError(f"the Python generator '{name}' of this from_generator dataset is not available in this "
                           f"process: such a dataset runs only in the process that built it")
    return _GeneratorSpec(unavailable, structure)


register_attr_type("py_generator", _decode_generator)


# -- Dataset ---------------------------------------------------------------------------------------

class Dataset:
    """A sequence of elements, each a nested structure of tensors (tf.compat.v1.data.Dataset).

    Graph mode only, as in TF 1.x: iterate it with `make_one_shot_iterator()` or
    `make_initializable_iterator()` and run `get_next()` in a session.
    """

    _options = None         # an Options, set by with_options and carried downstream
    _inner = None           # a window's elements are datasets: their structure, as _Inner leaves

    def __init__(self, variant: Tensor, types, shapes):
        self._variant = variant
        self._types = types
        self._shapes = shapes

    # -- structure ---------------------------------------------------------------------------
    @property
    def output_types(self):
        """The nested structure of the elements' dtypes."""
        return self._types

    @property
    def output_shapes(self):
        """The nested structure of the elements' static shapes (TensorShapes)."""
        return self._shapes

    @property
    def output_classes(self):
        """The nested structure of the elements' classes (always af.Tensor here)."""
        return nest.map_structure(lambda _: Tensor, self._types)

    @property
    def element_spec(self):
        """(dtype, shape) per component, in the elements' structure (TF 2's element_spec, simplified)."""
        return nest.map_structure(lambda t, s: (t, s), self._types, self._shapes)

    def __repr__(self):
        return f"<{type(self).__name__} shapes: {self._shapes}, types: {self._types}>"

    def __iter__(self):
        raise RuntimeError("dataset.__iter__() is only supported when eager execution is enabled; in graph mode, "
                           "use make_one_shot_iterator() or make_initializable_iterator() and run get_next()")

    @staticmethod
    def _make(op_type, inputs, args, types, shapes, name=None, **attrs) -> "Dataset":
        flat_t, flat_s = _flat(types), tuple(as_shape(s) for s in _flat(shapes))
        # The tensors the functions capture by value follow the op's own arguments, function by
        # function; `captured` says how many each takes (actors/dataset.py hands them to its calls).
        captured = tuple((k, len(f.captures)) for k, f in attrs.items()
                         if isinstance(f, graph_function.GraphFunction) and f.captures)
        if captured:
            args = list(args) + [t for k, _ in captured for t in attrs[k].captures]
            attrs["captured"] = captured
        v = getattr(ops, op_type)(*[d._variant for d in inputs], *args, output_types=flat_t, output_shapes=flat_s,
                                  n_inputs=len(inputs), name=name or op_type, **attrs)
        # The runtime names the dataset in its errors.
        v.op.attrs["op_name"] = v.op.name
        out = Dataset(v, types, shapes)
        if len(inputs) == 1 and types is inputs[0]._types:
            out._inner = inputs[0]._inner       # a window's datasets pass through take, shuffle, repeat...
        carried = [d._options for d in inputs if d._options is not None]
        if carried:
            merged = carried[0]
            for o in carried[1:]:
                merged = merged.merge(o)
            out._options = merged
        return out

    # -- options and numpy iteration -------------------------------------------------------------
    def options(self):
        """The Options this dataset carries, its inputs' merged with its own (tf.data.Dataset.options)."""
        from actorflow.data.options import Options
        return self._options if self._options is not None else Options()

    def with_options(self, options, name=None):
        """This dataset with `options` merged over the ones it carries: a property `options` sets
        wins (tf.data.Dataset.with_options). See data/options.py for what actorflow does with them."""
        from actorflow.data.options import Options
        if not isinstance(options, Options):
            raise TypeError(f"with_options expects tf.data.Options, got {type(options).__name__}")
        out = Dataset(self._variant, self._types, self._shapes)
        out._options = self.options().merge(options)
        out._inner = self._inner
        return out

    def cardinality(self):
        """The number of elements, an int64 scalar tensor: INFINITE_CARDINALITY (-1) or
        UNKNOWN_CARDINALITY (-2) where it is not a count (tf.data.Dataset.cardinality; see
        data/cardinality.py for where it differs from TF)."""
        from actorflow.data.cardinality import static_cardinality
        from actorflow.graph.ops.constant import constant
        with self._variant.graph.as_default():
            return constant(static_cardinality(self._variant), dtype=dtypes.int64, name="cardinality")

    def as_numpy_iterator(self):
        """A Python iterator over the elements as numpy values (tf.data.Dataset.as_numpy_iterator).
        Differs from TF, which allows it only in eager mode: here it runs a one-shot iterator of
        this dataset in a session of its own (see NumpyIterator)."""
        from actorflow.data.iterator import NumpyIterator
        return NumpyIterator(self)

    # -- sources ------------------------------------------------------------------------------
    @staticmethod
    def from_tensors(tensors, name=None):
        """A dataset of one element, `tensors` (tf.data.Dataset.from_tensors)."""
        s = _normalize(tensors)
        if any(isinstance(x, Dataset) for x in nest.flatten(s)):
            raise TypeError("from_tensors: an element cannot contain a dataset")
        return Dataset._make("TensorDataset", [], list(_flat(s)), _types_of(s), _shapes_of(s), name=name)

    @staticmethod
    def from_tensor_slices(tensors, name=None):
        """A dataset of the slices of `tensors` along their first dimension
        (tf.data.Dataset.from_tensor_slices); every component must have the same first dimension."""
        s = _normalize(tensors)
        flat = _flat(s)
        if not flat:
            raise ValueError("from_tensor_slices needs at least one tensor")
        n = None
        for t in flat:
            if t.shape.ndims == 0:
                raise ValueError(f"from_tensor_slices: tensor '{t.name}' is a scalar; every component needs a "
                                 f"first dimension to slice")
            d = t.shape.dims[0] if t.shape.dims is not None else None
            if d is not None and n is not None and d != n:
                raise ValueError(f"from_tensor_slices: dimension 0 differs between components "
                                 f"({[t.shape.dims[0] if t.shape.dims else None for t in flat]})")
            n = d if d is not None else n
        shapes = nest.map_structure(lambda t: TensorShape(None) if t.shape.dims is None else TensorShape(t.shape.dims[1:]), s)
        return Dataset._make("TensorSliceDataset", [], list(flat), _types_of(s), shapes, name=name)

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None):
        """Elements as Python's range(start, stop, step), int64 or `output_type`
        (tf.data.Dataset.range)."""
        if not 1 <= len(args) <= 3:
            raise ValueError(f"range takes 1 to 3 arguments, got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        ds = Dataset._make("RangeDataset", [], [_i64(start, "start"), _i64(stop, "stop"), _i64(step, "step")],
                           dtypes.int64, TensorShape([]), name=name)
        out = dtypes.as_dtype(output_type)
        if out is not dtypes.int64:
            from actorflow.graph.ops.math_ops import cast
            ds = ds.map(lambda x: cast(x, out))
        return ds

    @staticmethod
    def zip(*args, datasets=None, name=None):
        """Elements combining one element of each dataset in the nested structure `datasets`
        (tf.data.Dataset.zip: `zip((a, b))`, or TF 2's `zip(a, b)`); ends with the shortest."""
        if datasets is not None and args:
            raise TypeError("zip takes either positional datasets or `datasets`, not both")
        if datasets is None:
            if not args:
                raise TypeError("zip needs at least one dataset")
            datasets = args[0] if len(args) == 1 else tuple(args)
        flat = nest.flatten(datasets)
        if not flat or not all(isinstance(d, Dataset) for d in flat):
            raise TypeError(f"zip takes a nested structure of datasets, got {datasets!r:.100}")
        types = nest.map_structure(lambda d: d._types, datasets)
        shapes = nest.map_structure(lambda d: d._shapes, datasets)
        out = Dataset._make("ZipDataset", flat, [], types, shapes, name=name)
        if any(d._inner is not None for d in flat):
            out._inner = nest.map_structure(
                lambda d: d._inner if d._inner is not None else nest.map_structure(lambda _: None, d._types),
                datasets)
        return out

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):
        """A dataset of what `generator(*args)` yields (tf.data.Dataset.from_generator).

        The generator is called afresh each time an iterator over the dataset starts (and each
        `repeat` epoch), on the runtime's event loop. Each element is converted to `output_types`
        and checked against `output_shapes` (a mismatch fails `get_next` with InvalidArgumentError
        naming the dataset op). `output_signature` (TensorSpecs) may stand for both, as in TF 2.
        Differs from TF: `args` must be numeric tensors.
        """
        if not callable(generator):
            raise TypeError("from_generator: `generator` must be callable")
        if output_signature is not None:
            # TF 2's form: TensorSpecs (or (dtype, shape) pairs) instead of types and shapes.
            if output_types is not None or output_shapes is not None:
                raise TypeError("from_generator: `output_types` and `output_shapes` cannot be used together with "
                                "`output_signature`")
            from actorflow.data.optional import _split_spec
            output_types, output_shapes = _split_spec(output_signature)
        elif output_types is None:
            raise TypeError("from_generator: `output_signature` or `output_types` must be given")
        types = nest.map_structure(dtypes.as_dtype, output_types)
        if output_shapes is None:
            shapes = nest.map_structure(lambda _: TensorShape(None), types)
        else:
            shapes = _shape_structure(types, output_shapes, "from_generator")
        gen_args = [convert_to_tensor(a) for a in (args or ())]
        structure = nest.map_structure(lambda _: None, types)
        return Dataset._make("GeneratorDataset", [], gen_args, types, shapes, name=name,
                             generator=_GeneratorSpec(generator, structure))

    # -- transformations ----------------------------------------------------------------------------
    def _trace(self, fn, what):
        return _trace_fn(fn, what, self._types, self._shapes, self._inner)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """Applies `map_func` to each element (tf.data.Dataset.map). `map_func` is traced once into
        a graph function; a top-level tuple element is passed as positional arguments. With
        `num_parallel_calls` (or AUTOTUNE: the number of cores), that many elements are mapped
        concurrently, results in input order."""
        f = self._trace(map_func, "map")
        if any(isinstance(x, Dataset) for x in nest.flatten(f.structure)):
            raise TypeError("map: the function returned a dataset; use flat_map or interleave")
        types, shapes = _types_of(f.structure), _shapes_of(f.structure)
        if num_parallel_calls is None:
            return Dataset._make("MapDataset", [self], [], types, shapes, f=f, name=name)
        n = convert_to_tensor(num_parallel_calls, dtype=dtypes.int32, name="num_parallel_calls") \
            if not isinstance(num_parallel_calls, Tensor) else num_parallel_calls
        return Dataset._make("ParallelMapDataset", [self], [n], types, shapes, f=f, name=name)

    def filter(self, predicate, name=None):
        """Keeps the elements for which `predicate` returns True (a scalar bool tensor)."""
        f = self._trace(predicate, "filter")
        _check_predicate(f, "filter")
        return Dataset._make("FilterDataset", [self], [], self._types, self._shapes, predicate=f, name=name)

    def _dataset_fn(self, fn, what):
        f = self._trace(fn, what)
        if not isinstance(f.structure, Dataset):
            raise TypeError(f"{what}: the function must return a Dataset, got {f.structure!r:.100}")
        return f, f.structure

    def flat_map(self, map_func, name=None):
        """Maps each element to a dataset and flattens them in order (tf.data.Dataset.flat_map)."""
        f, inner = self._dataset_fn(map_func, "flat_map")
        return Dataset._make("FlatMapDataset", [self], [], inner._types, inner._shapes, f=f, name=name)

    def interleave(self, map_func, cycle_length=AUTOTUNE, block_length=1, num_parallel_calls=None,
                   deterministic=None, name=None):
        """Maps elements to datasets and interleaves them: `cycle_length` open at once,
        `block_length` consecutive elements from each in turn (tf.data.Dataset.interleave).
        `num_parallel_calls` is accepted; the datasets are read in turn, not concurrently."""
        import os
        f, inner = self._dataset_fn(map_func, "interleave")
        if cycle_length is None or (not isinstance(cycle_length, Tensor) and cycle_length == AUTOTUNE):
            cycle_length = os.cpu_count() or 2
        return Dataset._make("InterleaveDataset", [self], [_i64(cycle_length, "cycle_length"),
                                                           _i64(block_length, "block_length")],
                             inner._types, inner._shapes, f=f, name=name)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        """Stacks `batch_size` consecutive elements (tf.data.Dataset.batch). The static batch
        dimension is None unless `drop_remainder` is True and the size is a constant."""
        from actorflow.graph.ops.infer import constant_value
        bs = _i64(batch_size, "batch_size")
        drop = convert_to_tensor(drop_remainder, dtype=dtypes.bool_, name="drop_remainder") \
            if not isinstance(drop_remainder, Tensor) else drop_remainder
        static = constant_value(bs)
        dim = int(static) if drop_remainder is True and static is not None else None
        shapes = nest.map_structure(lambda s: TensorShape([dim]).concatenate(s), self._shapes)
        return Dataset._make("BatchDataset", [self], [bs, drop], self._types, shapes, name=name)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        """Batches elements padded to `padded_shapes` (None dimensions: the batch's largest) with
        `padding_values` (default 0) (tf.data.Dataset.padded_batch)."""
        from actorflow.graph.ops.infer import constant_value
        if padded_shapes is None:
            # As TF: each component padded to its own static shape, unknown dimensions to the batch's largest.
            padded_shapes = nest.map_structure(lambda s: s if s.ndims is not None else _raise(
                ValueError("padded_batch: a component of unknown rank needs padded_shapes")), self._shapes)
        pshapes = _shape_structure(self._types, padded_shapes, "padded_batch")
        for p, s in zip(nest.flatten(pshapes), nest.flatten(self._shapes)):
            if not p.is_compatible_with(s) and not (p.ndims == s.ndims and all(
                    a is None or b is None or a >= b for a, b in zip(p.dims, s.dims))):
                raise ValueError(f"padded_batch: padded shape {p} does not fit element shape {s}")
        if padding_values is None:
            values = nest.map_structure(lambda t: convert_to_tensor(np.zeros((), t.np)), self._types)
        else:
            values = _normalize(padding_values, "padding value")
            nest.assert_same_structure(values, self._types)
        flat_vals = []
        for v, t in zip(nest.flatten(values), nest.flatten(self._types)):
            if v.dtype is not t:
                raise TypeError(f"padded_batch: padding value '{v.name}' has dtype {v.dtype.name}, the component {t.name}")
            flat_vals.append(v)
        flat_shapes = [convert_to_tensor(np.array([-1 if d is None else d for d in p.dims], dtype=np.int64))
                       for p in nest.flatten(pshapes)]
        bs = _i64(batch_size, "batch_size")
        drop = convert_to_tensor(drop_remainder, dtype=dtypes.bool_)
        static = constant_value(bs)
        dim = int(static) if drop_remainder is True and static is not None else None
        shapes = nest.map_structure(lambda p: TensorShape([dim]).concatenate(p), pshapes)
        return Dataset._make("PaddedBatchDataset", [self], [bs, drop, *flat_shapes, *flat_vals], self._types, shapes,
                             name=name)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        """Shuffles with a buffer of `buffer_size` elements (tf.data.Dataset.shuffle): each
        output is a random element of the buffer, replaced by the next input. With a seed (op or
        graph level) the order is reproducible; `reshuffle_each_iteration` (default True) draws a
        new order for each epoch of a later `repeat`. The order is TF's for the same seeds (TF's ring
        buffer and per-epoch seed generator on its Philox stream)."""
        from actorflow.graph.ops.random_ops import get_seed
        s1, s2 = get_seed(seed)
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        return Dataset._make("ShuffleDataset", [self], [_i64(buffer_size, "buffer_size"), _i64(s1 or 0, "seed"),
                                                       _i64(s2 or 0, "seed2")],
                             self._types, self._shapes, reshuffle_each_iteration=reshuffle, name=name)

    def repeat(self, count=None, name=None):
        """Repeats the dataset `count` times, forever when None or -1 (tf.data.Dataset.repeat).
        An epoch with no element ends an endless repeat, as in TF."""
        return Dataset._make("RepeatDataset", [self], [_i64(-1 if count is None else count, "count")],
                             self._types, self._shapes, name=name)

    def take(self, count, name=None):
        """The first `count` elements (all when -1) (tf.data.Dataset.take)."""
        return Dataset._make("TakeDataset", [self], [_i64(count, "count")], self._types, self._shapes, name=name)

    def skip(self, count, name=None):
        """All but the first `count` elements (none when -1) (tf.data.Dataset.skip)."""
        return Dataset._make("SkipDataset", [self], [_i64(count, "count")], self._types, self._shapes, name=name)

    def prefetch(self, buffer_size, name=None):
        """Prepares up to `buffer_size` elements ahead of their use, concurrently with the steps
        that consume them (tf.data.Dataset.prefetch); AUTOTUNE is a fixed buffer of 4. The buffer
        never holds more than `buffer_size` elements: its producer pulls only when there is room."""
        return Dataset._make("PrefetchDataset", [self], [_i64(buffer_size, "buffer_size")],
                             self._types, self._shapes, name=name)

    def cache(self, filename="", name=None):
        """Keeps the elements of the first complete pass in memory and replays them in later
        epochs (tf.data.Dataset.cache). Differs from TF: only the in-memory cache (filename "")."""
        if filename:
            raise NotImplementedError("cache(filename): only the in-memory cache (filename='') is supported")
        return Dataset._make("CacheDataset", [self], [], self._types, self._shapes, name=name)

    def concatenate(self, dataset, name=None):
        """This dataset's elements, then `dataset`'s (tf.data.Dataset.concatenate); the element
        types must match, shapes become the most specific both have."""
        if not isinstance(dataset, Dataset):
            raise TypeError("concatenate takes a Dataset")
        try:
            nest.assert_same_structure(self._types, dataset._types)
        except ValueError as e:
            raise TypeError(f"concatenate: the datasets' structures differ: {e}") from None
        if _flat(self._types) != _flat(dataset._types):
            raise TypeError(f"concatenate: element types {self._types} and {dataset._types} differ")
        shapes = nest.map_structure(_merge_shapes, self._shapes, dataset._shapes)
        return Dataset._make("ConcatenateDataset", [self, dataset], [], self._types, shapes, name=name)

    def enumerate(self, start=0, name=None):
        """(index, element) pairs, the index an int64 counting from `start` (tf.data.Dataset.enumerate)."""
        return Dataset.zip((Dataset.range(start, np.iinfo(np.int64).max), self))

    def apply(self, transformation_func):
        """`transformation_func(self)`, which must return a Dataset (tf.data.Dataset.apply)."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError("apply: the transformation must return a Dataset")
        return out

    # -- the TF-1.x breadth: unbatch, shard, window, scan, reduce, grouping, sampling ----------------
    def unbatch(self, name=None):
        """Splits each element into its rows along the first dimension (tf.data.Dataset.unbatch);
        every component of an element must have the same first dimension."""
        batch = None
        for s in nest.flatten(self._shapes):
            if s.ndims == 0:
                raise ValueError("unbatch: cannot unbatch an input with scalar components")
            d = s.dims[0] if s.dims else None
            if d is not None and batch is not None and d != batch:
                raise ValueError(f"unbatch: cannot unbatch an input whose components have different batch sizes "
                                 f"({[x.dims[0] if x.dims else None for x in nest.flatten(self._shapes)]})")
            batch = d if d is not None else batch
        shapes = nest.map_structure(lambda s: TensorShape(None) if s.dims is None else TensorShape(s.dims[1:]),
                                    self._shapes)
        return Dataset._make("UnbatchDataset", [self], [], self._types, shapes, name=name)

    def shard(self, num_shards, index, name=None):
        """Every `num_shards`-th element, starting with the `index`-th (tf.data.Dataset.shard)."""
        for what, v in (("num_shards", num_shards), ("index", index)):
            if not isinstance(v, (Tensor, int, np.integer)):
                raise TypeError(f"shard: `{what}` must be an integer, got {v!r}")
        return Dataset._make("ShardDataset", [self], [_i64(num_shards, "num_shards"), _i64(index, "index")],
                             self._types, self._shapes, name=name)

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """Windows of `size` elements, `stride` apart within a window, a window starting every
        `shift` elements (default `size`) (tf.data.Dataset.window). Each element is a structure of
        datasets, one per component, to be consumed by a `flat_map` or `interleave` function
        (`window(n).flat_map(lambda w: w.batch(n))`); the last windows may be shorter unless
        `drop_remainder`. Differs from TF: an iterator cannot return the nested datasets."""
        shift = size if shift is None else shift
        drop = convert_to_tensor(bool(drop_remainder), dtype=dtypes.bool_, name="drop_remainder") \
            if not isinstance(drop_remainder, Tensor) else drop_remainder
        types = nest.map_structure(lambda _: dtypes.variant, self._types)
        shapes = nest.map_structure(lambda _: TensorShape([]), self._types)
        out = Dataset._make("WindowDataset", [self], [_i64(size, "size"), _i64(shift, "shift"),
                                                      _i64(stride, "stride"), drop], types, shapes, name=name)
        out._inner = nest.map_structure(lambda t, s: _Inner(t, TensorShape(None) if s.dims is None else s),
                                        self._types, self._shapes)
        return out

    def _trace_state(self, initial_state, fn, what, outputs_element, state_spec=None):
        """Traces `fn(state, element)` for scan and reduce, relaxing the state's shapes (as TF
        does) until the new state's shapes are those it was traced with. `state_spec`, a
        (types, shapes) pair, stands for the initial state where there is none (group_by_reducer)."""
        if state_spec is None:
            state = _normalize(initial_state, "initial state")
            if any(isinstance(x, Dataset) for x in nest.flatten(state)):
                raise TypeError(f"{what}: the initial state cannot contain a dataset")
            s_types, s_shapes = _types_of(state), _shapes_of(state)
        else:
            state = None
            s_types, s_shapes = state_spec
        for _ in range(8):
            f = graph_function.trace(fn, (s_types, self._types), (s_shapes, self._shapes),
                                     name=getattr(fn, "__name__", what), convert=_converter(what))
            out = f.structure
            if outputs_element:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError(f"{what}: the function must return a pair (new_state, output_element), got "
                                    f"{out!r:.100}")
                new_state, elem = out
            else:
                new_state, elem = out, None
            try:
                nest.assert_same_structure(new_state, s_types)
            except (ValueError, TypeError) as e:
                raise TypeError(f"{what}: the new state's structure differs from the initial state's: {e}") from None
            n_types = _types_of(new_state)
            if _flat(n_types) != _flat(s_types):
                raise TypeError(f"{what}: the new state has dtypes {[t.name for t in _flat(n_types)]}, the initial "
                                f"state {[t.name for t in _flat(s_types)]}")
            relaxed = nest.map_structure(_merge_shapes, s_shapes, _shapes_of(new_state))
            if all(a == b for a, b in zip(_flat(relaxed), _flat(s_shapes))):
                return f, state, elem
            s_shapes = relaxed
        raise ValueError(f"{what}: the state's shapes do not settle")

    def scan(self, initial_state, scan_func, name=None):
        """Carries a state through the elements: `scan_func(state, element)` returns
        `(new_state, output_element)` (tf.data.Dataset.scan; tf.data.experimental.scan)."""
        f, state, elem = self._trace_state(initial_state, scan_func, "scan", True)
        return Dataset._make("ScanDataset", [self], list(_flat(state)), _types_of(elem), _shapes_of(elem), f=f,
                             n_state=len(_flat(state)), name=name)

    def reduce(self, initial_state, reduce_func, name=None):
        """The final state of `reduce_func(state, element)` over all elements, as tensors
        (tf.data.Dataset.reduce)."""
        f, state, _ = self._trace_state(initial_state, reduce_func, "reduce", False)
        ds = Dataset._make("ScanDataset", [self], list(_flat(state)), _types_of(state),
                           _shapes_of(f.structure), f=f, n_state=len(_flat(state)), final_only=True,
                           name="ReduceDataset")
        return ds.get_single_element(name=name)

    def take_while(self, predicate, name=None):
        """The elements up to the first for which `predicate` is False (tf.data.Dataset.take_while)."""
        f = self._trace(predicate, "take_while")
        _check_predicate(f, "take_while")
        return Dataset._make("TakeWhileDataset", [self], [], self._types, self._shapes, predicate=f, name=name)

    def unique(self, name=None):
        """Each distinct element once, in order of first occurrence (tf.data.Dataset.unique); the
        elements must be int32, int64 or string, of one component (a dataset of more fails when it
        runs, as TF's)."""
        for t in _flat(self._types):
            if t not in (dtypes.int32, dtypes.int64, dtypes.string):
                raise TypeError(f"unique: `tf.data.Dataset.unique` does not support type {t.name} -- only "
                                f"`tf.int32`, `tf.int64`, and `tf.string` are supported")
        return Dataset._make("UniqueDataset", [self], [], self._types, self._shapes, name=name)

    def ignore_errors(self, log_warning=False, name=None):
        """Drops the elements whose production fails (tf.data.Dataset.ignore_errors;
        tf.data.experimental.ignore_errors)."""
        return Dataset._make("IgnoreErrorsDataset", [self], [], self._types, self._shapes,
                             log_warning=bool(log_warning), name=name)

    def group_by_window(self, key_func, reduce_func, window_size=None, window_size_func=None, name=None):
        """Groups elements by `key_func` (an int64 scalar); each group of its window size, and at
        the end each group left in key order, becomes `reduce_func(key, group_dataset)`, whose
        elements are the output (tf.data.Dataset.group_by_window)."""
        if (window_size is None) == (window_size_func is None):
            raise ValueError("group_by_window: either the `window_size` argument or the `window_size_func` argument "
                             "must be specified")
        if window_size is not None:
            if isinstance(window_size, Tensor):
                raise TypeError("group_by_window: `window_size` must be a Python integer here; use window_size_func")
            size = int(window_size)

            def window_size_func(_key):
                from actorflow.graph.ops.constant import constant
                return constant(size, dtype=dtypes.int64)
        kf = self._trace(key_func, "group_by_window key_func")
        _check_key(kf, "group_by_window")
        wf = graph_function.trace(window_size_func, dtypes.int64, TensorShape([]), name="window_size_func",
                                  convert=_converter("window_size_func"))
        out = nest.flatten(wf.structure)
        if len(out) != 1 or out[0].dtype is not dtypes.int64:
            raise ValueError(f"group_by_window: `window_size_func` must return a single tf.int64 tensor, got "
                             f"{wf.structure!r:.100}")
        rf = _trace_fn(reduce_func, "group_by_window reduce_func", (dtypes.int64, dtypes.variant),
                       (TensorShape([]), TensorShape([])), (None, _Inner(self._types, self._shapes)))
        if not isinstance(rf.structure, Dataset):
            raise TypeError(f"group_by_window: `reduce_func` must return a Dataset, got {rf.structure!r:.100}")
        inner = rf.structure
        return Dataset._make("GroupByWindowDataset", [self], [], inner._types, inner._shapes, key_func=kf,
                             reduce_func=rf, window_size_func=wf, name=name)

    def bucket_by_sequence_length(self, element_length_func, bucket_boundaries, bucket_batch_sizes,
                                  padded_shapes=None, padding_values=None, pad_to_bucket_boundary=False,
                                  no_padding=False, drop_remainder=False, name=None):
        """Batches elements of similar length (`element_length_func`) together: bucket i holds
        lengths in [boundaries[i-1], boundaries[i]) and is batched by `bucket_batch_sizes[i]`,
        padded (tf.data.Dataset.bucket_by_sequence_length; the same group_by_window program as
        TF's). Differs from TF: `pad_to_bucket_boundary` is not supported."""
        from actorflow.graph.ops import array_ops, math_ops
        from actorflow.graph.ops.constant import constant
        if len(bucket_batch_sizes) != len(bucket_boundaries) + 1:
            raise ValueError(f"bucket_by_sequence_length: `len(bucket_batch_sizes)` must equal "
                             f"`len(bucket_boundaries) + 1` but `len(bucket_batch_sizes)={len(bucket_batch_sizes)}` "
                             f"and `len(bucket_boundaries)={len(bucket_boundaries)}`")
        if pad_to_bucket_boundary:
            raise NotImplementedError("bucket_by_sequence_length: pad_to_bucket_boundary=True is not supported")
        boundaries = [int(b) for b in bucket_boundaries]
        sizes = [int(b) for b in bucket_batch_sizes]

        def element_to_bucket_id(*args):
            seq_length = element_length_func(*args)
            lo = constant([np.iinfo(np.int32).min] + boundaries, dtype=seq_length.dtype)
            hi = constant(boundaries + [np.iinfo(np.int32).max], dtype=seq_length.dtype)
            conditions = math_ops.logical_and(math_ops.less_equal(lo, seq_length), math_ops.less(seq_length, hi))
            return math_ops.reduce_min(math_ops.where(conditions))

        def window_size_fn(bucket_id):
            return array_ops.gather(constant(sizes, dtype=dtypes.int64), bucket_id)

        def batching_fn(bucket_id, grouped):
            batch_size = window_size_fn(bucket_id)
            if no_padding:
                return grouped.batch(batch_size, drop_remainder=drop_remainder)
            shapes = padded_shapes or nest.map_structure(
                lambda s: TensorShape(None if s.dims is None else [None] * len(s.dims)), grouped._shapes)
            return grouped.padded_batch(batch_size, shapes, padding_values, drop_remainder=drop_remainder)

        def key(*args):
            return element_to_bucket_id(*args)
        return self.group_by_window(key, batching_fn, window_size_func=window_size_fn)

    def get_single_element(self, name=None):
        """The only element of this dataset, as tensors; running it fails with
        InvalidArgumentError when the dataset is empty or has more than one element
        (tf.data.Dataset.get_single_element; tf.data.experimental.get_single_element)."""
        res, op = _whole_dataset_op(self, "DatasetToSingleElement", [], name=name, output_types=_flat(self._types),
                                    output_shapes=tuple(as_shape(s) for s in _flat(self._shapes)))
        outs = op.outputs
        return nest.pack_sequence_as(self._types, list(outs))

    def rejection_resample(self, class_func, target_dist, initial_dist=None, seed=None, name=None):
        """Resamples the elements so that their classes (`class_func`, an int scalar) follow
        `target_dist`, estimating the input's class distribution (from batches of 32) unless
        `initial_dist` gives it; elements are `(class, element)` (tf.data.Dataset.rejection_resample;
        tf.data.experimental.rejection_resample). TF's program: each element is kept with its
        class's acceptance probability (a random_uniform draw in a filter), mixed with the
        original elements through sample_from_datasets. Differs from TF: the distributions must be
        constants, and no warning is printed when most elements are rejected."""
        from actorflow.graph.ops import array_ops, math_ops, random_ops
        from actorflow.graph.ops.constant import constant
        from actorflow.graph.ops.infer import constant_value

        def static(v, what):
            if isinstance(v, Tensor):
                v = constant_value(v)
                if v is None:
                    raise ValueError(f"rejection_resample: `{what}` must be a constant here")
            return np.asarray(v).astype(np.float32)
        target = static(target_dist, "target_dist")

        def mixing(initial, target_t):
            ratio = target_t / (initial + np.finfo(np.float32).tiny)
            lo = math_ops.reduce_min(ratio)
            return (ratio - lo) / (math_ops.reduce_max(ratio) - lo), lo

        if initial_dist is not None:
            init = static(initial_dist, "initial_dist")
            ratio = target / (init + np.finfo(np.float32).tiny)
            accept = ((ratio - ratio.min()) / (ratio.max() - ratio.min())).astype(np.float32)
            accept_ds = Dataset.from_tensors(accept).repeat()
            prob_original_ds = Dataset.from_tensors(np.float32(ratio.min())).repeat()
            prob_original_static = np.min(target / init)
        else:
            n = len(target)

            def update(counts, c):
                counts = counts + math_ops.reduce_sum(array_ops.one_hot(c, n, dtype=dtypes.int64), 0)
                dist = math_ops.cast(math_ops.truediv(counts, math_ops.reduce_sum(counts)), dtypes.float32)
                return counts, array_ops.tile(array_ops.expand_dims(dist, 0), [32, 1])
            initial_ds = self.map(class_func).batch(32).scan(np.full([n], 10, np.int64), update).unbatch()
            both = initial_ds.map(lambda initial: mixing(initial, constant(target)))
            accept_ds = both.map(lambda a, _: a)
            prob_original_ds = both.map(lambda _, p: p)
            prob_original_static = None

        def classes(data):
            return class_func(*data) if isinstance(data, tuple) else class_func(data)

        def gather_and_copy(acceptance, data):
            c = classes(data)
            return c, array_ops.gather(acceptance, c), data

        def reject(_c, p, _data):
            return random_ops.random_uniform([], seed=seed, dtype=p.dtype) < p
        filtered = Dataset.zip((accept_ds, self)).map(gather_and_copy).filter(reject).map(
            lambda c, _, data: (c, data)).prefetch(3)

        def add_class_value(*x):
            return (class_func(*x), x[0]) if len(x) == 1 else (class_func(*x), x)
        if prob_original_static == 1:
            return self.map(add_class_value)
        if prob_original_static == 0:
            return filtered
        return Dataset.sample_from_datasets(
            [self.map(add_class_value), filtered],
            weights=prob_original_ds.map(lambda p: array_ops.stack([array_ops.stack([p, 1.0 - p])])), seed=seed,
            stop_on_empty_dataset=True)

    # TF 1.x's names for map and filter traced as legacy functions: here every function is traced the same way.
    def map_with_legacy_function(self, map_func, num_parallel_calls=None, deterministic=None):
        """map (tf.compat.v1.data.Dataset.map_with_legacy_function)."""
        return self.map(map_func, num_parallel_calls)

    def filter_with_legacy_function(self, predicate):
        """filter (tf.compat.v1.data.Dataset.filter_with_legacy_function)."""
        return self.filter(predicate)

    @staticmethod
    def random(seed=None, rerandomize_each_iteration=None, name=None):
        """int64 elements, each uniform in [0, 2**32) (tf.data.Dataset.random): TF's numbers for the
        same seeds (one word of the Philox stream each). The seeds come from `get_seed(seed)` as in
        TF; `rerandomize_each_iteration` draws a new sequence for each epoch of a later `repeat`."""
        from actorflow.graph.ops.random_ops import get_seed
        s1, s2 = get_seed(seed)
        return Dataset._make("RandomDataset", [], [_i64(s1 or 0, "seed"), _i64(s2 or 0, "seed2")], dtypes.int64,
                             TensorShape([]), rerandomize_each_iteration=bool(rerandomize_each_iteration), name=name)

    @staticmethod
    def counter(start=0, step=1, dtype=dtypes.int64, name=None):
        """start, start + step, ... without end (tf.data.Dataset.counter; tf.data.experimental.Counter),
        as TF builds it: a scan over an endless repeat."""
        from actorflow.graph.ops.constant import constant
        dtype = dtypes.as_dtype(dtype)
        start_t = constant(start, dtype=dtype, name="start") if not isinstance(start, Tensor) else start
        step_v = step

        def body(state, _):
            return state + constant(step_v, dtype=dtype), state
        return Dataset.from_tensors(0).repeat(None).scan(start_t, body)

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        """The elements of `datasets[i]` for each i of `choice_dataset`, a dataset of int64 scalars
        (tf.data.Dataset.choose_from_datasets; tf.data.experimental.choose_from_datasets)."""
        datasets = list(datasets)
        if not datasets:
            raise ValueError("choose_from_datasets: `datasets` should not be empty")
        if not isinstance(choice_dataset, Dataset):
            raise TypeError(f"choose_from_datasets: `choice_dataset` should be a tf.data.Dataset but is "
                            f"{type(choice_dataset).__name__}")
        if choice_dataset._types is not dtypes.int64 or not TensorShape([]).is_compatible_with(choice_dataset._shapes):
            raise TypeError(f"choose_from_datasets: elements of `choice_dataset` must be scalar tf.int64 tensors but "
                            f"are {choice_dataset._types} {choice_dataset._shapes}")
        return _directed_interleave(choice_dataset, datasets, stop_on_empty_dataset)

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                             rerandomize_each_iteration=None):
        """Elements drawn from `datasets` at random with probabilities `weights` (a list, a tensor
        or a dataset of them) (tf.data.Dataset.sample_from_datasets;
        tf.data.experimental.sample_from_datasets): TF's program, so the same seeds draw TF's
        choices (Dataset.random's words seed stateless_multinomial)."""
        from actorflow.graph.ops import array_ops, math_ops
        from actorflow.graph.ops.constant import constant
        from actorflow.graph.ops.random_more_ops import stateless_categorical
        datasets = list(datasets)
        if not datasets:
            raise ValueError("sample_from_datasets: `datasets` should not be empty")
        if not isinstance(weights, Dataset):
            if weights is None:
                logit_values = np.ones((1, len(datasets)), np.float32)
                logit_dtype = dtypes.float32
            elif isinstance(weights, Tensor):
                # A tensor is used as it is (TF drops zero weights only from a Python list); its value
                # is embedded in the selector function, which cannot capture tensors.
                from actorflow.graph.ops.infer import constant_value
                if not weights.shape.is_compatible_with([len(datasets)]):
                    raise ValueError(f"sample_from_datasets: the shape of `weights` should be compatible with "
                                     f"`[len(datasets)]` but is {weights.shape}")
                if weights.dtype not in (dtypes.float32, dtypes.float64):
                    raise TypeError(f"sample_from_datasets: `weights` type must be either tf.float32 or "
                                    f"tf.float64 but is {weights.dtype.name}")
                w = constant_value(weights)
                if w is None:
                    raise ValueError("sample_from_datasets: `weights` must be a constant tensor, a list or a dataset")
                logit_dtype = weights.dtype
                with np.errstate(divide="ignore"):
                    logit_values = np.log(np.asarray(w, dtype=weights.dtype.np))[None, :]
            else:
                # As TF's convert_to_tensor: a list of Python floats is float32, a numpy array keeps its dtype.
                w = np.asarray(weights)
                if not isinstance(weights, np.ndarray) and w.dtype == np.float64:
                    w = w.astype(np.float32)
                if len(w) != len(datasets):
                    raise ValueError(f"sample_from_datasets: `weights` should have the same length as `datasets` "
                                     f"but got `len(weights)={len(w)}` vs. `len(datasets)={len(datasets)}`")
                if w.dtype not in (np.float32, np.float64):
                    raise TypeError(f"sample_from_datasets: `weights` type must be either tf.float32 or "
                                    f"tf.float64 but is {w.dtype}")
                keep = [i for i in range(len(datasets)) if w[i] > 0]
                if keep:
                    datasets, w = [datasets[i] for i in keep], w[keep]
                else:
                    datasets, w = [datasets[0].take(0)], np.array([1.0], np.float32)
                logit_dtype = dtypes.as_dtype(w.dtype)
                with np.errstate(divide="ignore"):
                    logit_values = np.log(w)[None, :]
            if len(datasets) == 1:
                return datasets[0]

            def select(seed_pair):
                logits = constant(logit_values, dtype=logit_dtype)
                return array_ops.squeeze(stateless_categorical(logits, 1, seed_pair), axis=[0, 1])
            selector = Dataset.random(seed, rerandomize_each_iteration).batch(2).map(select)
        else:
            def select_varying(p, seed_pair):
                logits = math_ops.log(p)
                if logits.shape.ndims == 1:
                    logits = array_ops.expand_dims(logits, 0)
                return array_ops.squeeze(stateless_categorical(logits, 1, seed_pair), axis=[0, 1])
            selector = Dataset.zip((weights, Dataset.random(seed, rerandomize_each_iteration).batch(2))).map(
                select_varying)
        return _directed_interleave(selector, datasets, stop_on_empty_dataset)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None):
        """The file names matching `file_pattern` (a glob or a list of them), shuffled unless
        `shuffle` is False (tf.data.Dataset.list_files). Differs from TF: the patterns are Python
        strings, matched when the dataset is built (TF matches them when it runs)."""
        import glob
        patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
        names = sorted({m for p in patterns for m in glob.glob(p.decode() if isinstance(p, bytes) else str(p))})
        if not names:
            raise errors_lib.InvalidArgumentError(None, None, f"list_files: no files matched pattern: "
                                                              f"{', '.join(map(str, patterns))}")
        ds = Dataset.from_tensor_slices(convert_to_tensor(np.array([n.encode() for n in names], dtype=object)))
        if shuffle is None or shuffle:
            ds = ds.shuffle(max(len(names), 1), seed=seed)
        return ds

    # -- iterators ------------------------------------------------------------------------------------
    def make_one_shot_iterator(self):
        """An iterator that starts on this dataset the first time `get_next()` runs and cannot be
        restarted (tf.compat.v1.data.make_one_shot_iterator)."""
        from actorflow.data.iterator import Iterator
        return Iterator._one_shot(self)

    def make_initializable_iterator(self, shared_name=None):
        """An iterator whose `initializer` op (re)starts it on this dataset
        (tf.compat.v1.data.make_initializable_iterator)."""
        from actorflow.data.iterator import Iterator
        it = Iterator.from_structure(self._types, self._shapes, shared_name=shared_name)
        it._initializer = it.make_initializer(self)
        return it


class _Inner:
    """The element structure of a dataset that is itself a component of an element (window's):
    a leaf of a Dataset's `_inner` structure."""
    __slots__ = ("types", "shapes")

    def __init__(self, types, shapes):
        self.types = types
        self.shapes = shapes


def _converter(what):
    def convert(out):
        if isinstance(out, list):         # TF 1.x reads a returned list as a tuple
            out = tuple(out)
        return _normalize(out, f"{what} result")
    return convert


def _trace_fn(fn, what, types, shapes, inner=None, unpack_tuple=True):
    """Traces `fn` on arguments of `types`/`shapes`; where `inner` (the same structure, None or
    _Inner leaves) has an _Inner, the argument is a Dataset of that element structure."""
    if inner is None or all(i is None for i in nest.flatten(inner)):
        return graph_function.trace(fn, types, shapes, name=getattr(fn, "__name__", what), convert=_converter(what),
                                    unpack_tuple=unpack_tuple)
    flat_inner = nest.flatten(inner)

    def wrapper(args):
        flat = [Dataset(t, i.types, i.shapes) if i is not None else t
                for t, i in zip(nest.flatten(args), flat_inner)]
        packed = nest.pack_sequence_as(types, flat)
        return fn(*packed) if unpack_tuple and type(packed) is tuple else fn(packed)
    wrapper.__name__ = getattr(fn, "__name__", what)
    return graph_function.trace(wrapper, types, shapes, name=wrapper.__name__, convert=_converter(what),
                                unpack_tuple=False)


def _check_predicate(f, what):
    out = nest.flatten(f.structure)
    if len(out) != 1 or out[0].dtype is not dtypes.bool_ or out[0].shape.ndims not in (0, None):
        raise ValueError(f"{what}: the predicate must return a scalar bool tensor, got {f.structure!r}")


def _check_key(f, what):
    out = nest.flatten(f.structure)
    if len(out) != 1 or out[0].dtype is not dtypes.int64 or out[0].shape.ndims not in (0, None):
        raise ValueError(f"{what}: `key_func` must return a single tf.int64 scalar tensor, got {f.structure!r:.100}")


def _whole_dataset_op(dataset, op_type, args, name=None, **attrs):
    """An op of `op_type` that runs all of `dataset` on a pipeline of its own (get_single_element,
    TFRecordWriter.write), through an iterator resource of its own."""
    res = ops.IteratorV2(output_types=_flat(dataset._types),
                         output_shapes=tuple(as_shape(s) for s in _flat(dataset._shapes)),
                         shared_name="", container="", name=f"{op_type}Iterator")
    out = getattr(ops, op_type)(res, dataset._variant, *args, name=name or op_type, **attrs)
    op = out[0].op if isinstance(out, (list, tuple)) and out else (out.op if isinstance(out, Tensor) else out)
    op.attrs["op_name"] = op.name
    return res, op


def _directed_interleave(selector, datasets, stop_on_empty_dataset):
    """The DirectedInterleaveDataset of choose_from_datasets and sample_from_datasets: the datasets'
    types must match; shapes become the most specific all have."""
    for d in datasets:
        if not isinstance(d, Dataset):
            raise TypeError(f"`datasets` must be a list of tf.data.Dataset, got {type(d).__name__}")
    first = datasets[0]
    shapes = first._shapes
    for d in datasets[1:]:
        try:
            nest.assert_same_structure(first._types, d._types)
        except (ValueError, TypeError) as e:
            raise TypeError(f"Incompatible dataset structures: {e}") from None
        if _flat(first._types) != _flat(d._types):
            raise TypeError(f"Incompatible dataset types: {first._types} and {d._types}")
        shapes = nest.map_structure(_merge_shapes, shapes, d._shapes)
    return Dataset._make("DirectedInterleaveDataset", [selector, *datasets], [], first._types, shapes,
                         stop_on_empty_dataset=bool(stop_on_empty_dataset))


def _raise(e):
    raise e


def _shape_structure(types, shapes, what):
    """`shapes` (TensorShapes, lists or tuples of dimensions) as TensorShapes in `types`' structure."""
    def is_shape(x):
        return isinstance(x, TensorShape) or (isinstance(x, (list, tuple)) and all(
            d is None or isinstance(d, (int, np.integer)) for d in x))

    def walk(t, s):
        if isinstance(t, Mapping):
            if not isinstance(s, Mapping) or set(s) != set(t):
                raise ValueError(f"{what}: shapes {s!r} do not match the structure {types!r}")
            return {k: walk(t[k], s[k]) for k in t}
        if isinstance(t, tuple):
            if not isinstance(s, (tuple, list)) or len(s) != len(t):
                raise ValueError(f"{what}: shapes {s!r} do not match the structure {types!r}")
            out = [walk(a, b) for a, b in zip(t, s)]
            return type(t)(*out) if hasattr(t, "_fields") else tuple(out)
        if not is_shape(s) and s is not None:
            raise ValueError(f"{what}: {s!r} is not a shape")
        return as_shape(s)
    return walk(types, shapes)


def _reader(op_type, filenames, what, num_parallel_reads=None, **attrs) -> "Dataset":
    """A file reader's dataset: the file names as an attribute (Python strings), or as its first
    argument when they are a string tensor (a reader made in a dataset function). Given a dataset of
    file names, each file's records follow the last's (flat_map), or with `num_parallel_reads` that
    many files are read in turn, a record each (interleave), as TF reads them."""
    if isinstance(filenames, Dataset):
        if filenames._types is not dtypes.string or as_shape(filenames._shapes).ndims not in (0, None):
            raise TypeError(f"{what}: `filenames` must be a `tf.data.Dataset` of scalar `tf.string` elements.")

        def read_one(name):
            return _reader(op_type, name, what, **attrs)
        if num_parallel_reads is None:
            return filenames.flat_map(read_one)
        return filenames.interleave(read_one, cycle_length=num_parallel_reads, block_length=1)
    if isinstance(filenames, Tensor):
        if filenames.dtype is not dtypes.string or filenames.shape.ndims not in (0, 1, None):
            raise TypeError(f"{what}: `filenames` must be a string scalar or vector, got {filenames!r}")
        return Dataset._make(op_type, [], [filenames], dtypes.string, TensorShape([]), filenames=(), **attrs)
    return Dataset._make(op_type, [], [], dtypes.string, TensorShape([]), filenames=_file_names(filenames, what),
                         **attrs)


def _file_names(filenames, what):
    if isinstance(filenames, (str, bytes)):
        filenames = [filenames]
    names = tuple(f.decode() if isinstance(f, bytes) else str(f) for f in filenames)
    if not names:
        raise ValueError(f"{what} needs at least one file name")
    return names


class TFRecordDataset(Dataset):
    """The records of TFRecord files, one string element each (tf.data.TFRecordDataset); each
    record's CRCs are checked. `compression_type` "", "ZLIB" or "GZIP". `filenames` is a Python
    string, a list of them, or a string tensor (a dataset function's argument: the
    `list_files(...).interleave(TFRecordDataset)` pattern)."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        from actorflow.tfrecord import TFRecordOptions
        kind = TFRecordOptions.get_compression_type_string(compression_type or "")
        d = _reader("TFRecordDataset", filenames, "TFRecordDataset", num_parallel_reads, compression_type=kind)
        super().__init__(d._variant, d._types, d._shapes)


class FixedLengthRecordDataset(Dataset):
    """Records of `record_bytes` bytes from files, after `header_bytes` and before `footer_bytes`
    (tf.data.FixedLengthRecordDataset), one string element each."""

    def __init__(self, filenames, record_bytes, header_bytes=None, footer_bytes=None, buffer_size=None,
                 compression_type=None, num_parallel_reads=None):
        if compression_type:
            raise NotImplementedError(f"FixedLengthRecordDataset: compression_type {compression_type!r} is not "
                                      "supported")
        if int(record_bytes) <= 0:
            raise ValueError(f"record_bytes must be positive, got {record_bytes}")
        d = _reader("FixedLengthRecordDataset", filenames, "FixedLengthRecordDataset",
                    record_bytes=int(record_bytes), header_bytes=int(header_bytes or 0),
                    footer_bytes=int(footer_bytes or 0))
        super().__init__(d._variant, d._types, d._shapes)


class TextLineDataset(Dataset):
    """The lines of text files, one string element each without its line ending
    (tf.data.TextLineDataset). `filenames` is a Python string, a list of them, or a string tensor
    (a dataset function's argument). Differs from TF: files are read uncompressed."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        if compression_type:
            raise NotImplementedError(f"TextLineDataset: compression_type {compression_type!r} is not supported")
        d = _reader("TextLineDataset", filenames, "TextLineDataset", num_parallel_reads)
        super().__init__(d._variant, d._types, d._shapes)
