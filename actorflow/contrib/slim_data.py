"""slim's data pipeline (tf.contrib.slim's dataset, tfexample_decoder, dataset_data_provider,
parallel_reader and prefetch_queue; TF 1.15's semantics): how slim's training scripts read their
TFRecord datasets (flowers, cifar10, imagenet) through queues.

A `dataset.Dataset` names the files, the reader class and a `TFExampleDecoder`, whose handlers turn the
parsed features of one serialized tf.train.Example into items (`Tensor`, `Image`, `ItemHandlerCallback`).
A `DatasetDataProvider` reads the files with `parallel_reader.parallel_read` (a filename queue, one
reader per `num_readers` feeding a common shuffling or FIFO queue, with queue runners) and decodes each
record; `get(items)` returns the items' tensors. `prefetch_queue` puts tensors in a FIFO queue filled by
queue runners. Start the queue runners (`tf.train.start_queue_runners`, or slim.learning.train does)
before reading.
"""
from __future__ import annotations

import types

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops

__all__ = ["dataset", "tfexample_decoder", "dataset_data_provider", "parallel_reader", "prefetch_queue"]


# -- dataset -----------------------------------------------------------------------------------------------

class Dataset:
    """A dataset's description (slim.dataset.Dataset): `data_sources` (file patterns), `reader` (a reader
    class), `decoder` (a TFExampleDecoder), `num_samples`, `items_to_descriptions`, and any other keyword
    as an attribute (`num_classes`, `labels_to_names`...)."""

    def __init__(self, data_sources, reader, decoder, num_samples, items_to_descriptions, **kwargs):
        kwargs["data_sources"] = data_sources
        kwargs["reader"] = reader
        kwargs["decoder"] = decoder
        kwargs["num_samples"] = num_samples
        kwargs["items_to_descriptions"] = items_to_descriptions
        self.__dict__.update(kwargs)


# -- tfexample_decoder -------------------------------------------------------------------------------------

class ItemHandler:
    """Turns the parsed tensors of `keys` into one item (slim.tfexample_decoder.ItemHandler)."""

    def __init__(self, keys):
        if not isinstance(keys, (tuple, list)):
            keys = [keys]
        self._keys = list(keys)

    @property
    def keys(self):
        return self._keys

    def tensors_to_item(self, keys_to_tensors):
        raise NotImplementedError


class ItemHandlerCallback(ItemHandler):
    """An item made by `func(keys_to_tensors)`."""

    def __init__(self, keys, func):
        super().__init__(keys)
        self._func = func

    def tensors_to_item(self, keys_to_tensors):
        return self._func(keys_to_tensors)


class Tensor_(ItemHandler):  # noqa: N801 - exported as tfexample_decoder.Tensor
    """The tensor of `tensor_key`, reshaped to `shape` (or to the values of `shape_keys`); a sparse one
    made dense with `default_value`."""

    def __init__(self, tensor_key, shape_keys=None, shape=None, default_value=0):
        if shape_keys and shape is not None:
            raise ValueError("Cannot specify both shape_keys and shape parameters.")
        if shape_keys and not isinstance(shape_keys, list):
            shape_keys = [shape_keys]
        self._tensor_key = tensor_key
        self._shape_keys = shape_keys
        self._shape = shape
        self._default_value = default_value
        super().__init__([tensor_key] + (shape_keys or []))

    def tensors_to_item(self, keys_to_tensors):
        from actorflow.graph.ops import sparse_ops
        from actorflow.graph.sparse_tensor import SparseTensor
        tensor = keys_to_tensors[self._tensor_key]
        shape = self._shape
        if self._shape_keys:
            parts = []
            for k in self._shape_keys:
                s = keys_to_tensors[k]
                if isinstance(s, SparseTensor):
                    s = sparse_ops.sparse_tensor_to_dense(s)
                parts.append(array_ops.reshape(s, [-1]))
            shape = array_ops.concat(parts, 0) if len(parts) > 1 else parts[0]
        if isinstance(tensor, SparseTensor):
            if shape is not None:
                tensor = sparse_ops.sparse_reshape(tensor, shape)
            return sparse_ops.sparse_tensor_to_dense(tensor, self._default_value)
        if shape is not None:
            tensor = array_ops.reshape(tensor, shape)
        return tensor


class Image(ItemHandler):
    """An image decoded from the bytes of `image_key` by the format in `format_key` ('png', 'jpeg' or
    'jpg', 'raw'), with `channels` channels, reshaped to `shape` when given."""

    def __init__(self, image_key=None, format_key=None, shape=None, channels=3, dtype=dtypes.uint8, repeated=False,
                 dct_method=""):
        if not image_key:
            image_key = "image/encoded"
        if not format_key:
            format_key = "image/format"
        super().__init__([image_key, format_key])
        self._image_key, self._format_key = image_key, format_key
        self._shape, self._channels, self._dtype = shape, channels, dtypes.as_dtype(dtype)
        self._repeated, self._dct_method = repeated, dct_method

    def tensors_to_item(self, keys_to_tensors):
        from actorflow.graph.ops import functional_ops
        buffer, fmt = keys_to_tensors[self._image_key], keys_to_tensors[self._format_key]
        if self._repeated:
            return functional_ops.map_fn(lambda b: self._decode(b, fmt), buffer, dtype=self._dtype)
        return self._decode(buffer, fmt)

    def _decode(self, buffer, fmt):
        from actorflow.graph.control_flow import case
        from actorflow.graph.ops import image_codec_ops as image_ops
        from actorflow.graph.ops.parsing_ops import decode_raw

        def png():
            return image_ops.decode_png(buffer, self._channels, dtype=self._dtype)

        def jpeg():
            return image_ops.decode_jpeg(buffer, self._channels, dct_method=self._dct_method)

        def raw():
            out = decode_raw(buffer, out_type=self._dtype)
            return array_ops.reshape(out, self._shape) if self._shape is not None else out
        image = case([(math_ops.logical_or(math_ops.equal(fmt, "jpeg"), math_ops.equal(fmt, "JPEG")), jpeg),
                      (math_ops.logical_or(math_ops.equal(fmt, "jpg"), math_ops.equal(fmt, "JPG")), jpeg),
                      (math_ops.equal(fmt, "raw"), raw)], default=png, exclusive=True)
        if self._dtype is not dtypes.uint8 and image.dtype is not self._dtype:
            image = math_ops.cast(image, self._dtype)
        image.set_shape([None, None, self._channels])
        if self._shape is not None:
            image = array_ops.reshape(image, self._shape)
        return image


class TFExampleDecoder:
    """Decodes one serialized tf.train.Example into items (slim.tfexample_decoder.TFExampleDecoder):
    `keys_to_features` as parse_single_example takes them, `items_to_handlers` item name -> ItemHandler."""

    def __init__(self, keys_to_features, items_to_handlers):
        self._keys_to_features = keys_to_features
        self._items_to_handlers = items_to_handlers

    def list_items(self):
        return list(self._items_to_handlers.keys())

    def decode(self, serialized_example, items=None):
        from actorflow.graph.ops.parsing_ops import FixedLenFeature, parse_single_example
        example = parse_single_example(serialized_example, self._keys_to_features)
        for k in sorted(self._keys_to_features):
            v = self._keys_to_features[k]
            if isinstance(v, FixedLenFeature):
                example[k] = array_ops.reshape(example[k], v.shape)
        outputs = []
        for item in items or self._items_to_handlers.keys():
            handler = self._items_to_handlers[item]
            outputs.append(handler.tensors_to_item({key: example[key] for key in handler.keys}))
        return outputs


# -- parallel_reader, data providers, prefetch_queue -------------------------------------------------------

def get_data_files(data_sources):
    """The files matching `data_sources` (a pattern or a list of them); a ValueError when none."""
    from actorflow import gfile
    sources = data_sources if isinstance(data_sources, (list, tuple)) else [data_sources]
    files = []
    for s in sources:
        files.extend(gfile.Glob(s))
    if not files:
        raise ValueError(f"No data files found in {data_sources}")
    return sorted(files)


def parallel_read(data_sources, reader_class, num_epochs=None, num_readers=4, reader_kwargs=None, shuffle=True,
                  dtypes_=None, capacity=256, min_after_dequeue=128, seed=None, scope=None, **kwargs):
    """(key, value) from `num_readers` readers of the files of `data_sources`, through a common shuffling
    (or FIFO) queue that queue runners fill (slim.parallel_reader.parallel_read)."""
    from actorflow.graph.ops.data_flow_ops import FIFOQueue, RandomShuffleQueue
    from actorflow.graph.ops.summary_ops import scalar
    from actorflow.train.input import string_input_producer
    from actorflow.train.queue_runner import QueueRunner, add_queue_runner
    kinds = kwargs.pop("dtypes", None) or dtypes_ or [dtypes.string, dtypes.string]
    if kwargs:
        raise TypeError(f"parallel_read: unexpected arguments {sorted(kwargs)}")
    files = get_data_files(data_sources)
    with name_scope(scope or "parallel_read"):
        filenames = string_input_producer(files, num_epochs=num_epochs, shuffle=shuffle, seed=seed, name="filenames")
        if shuffle:
            common = RandomShuffleQueue(capacity=capacity, min_after_dequeue=min_after_dequeue, dtypes=kinds, seed=seed,
                                        name="common_queue")
        else:
            common = FIFOQueue(capacity=capacity, dtypes=kinds, name="common_queue")
        scalar(f"fraction_of_{capacity}_full", math_ops.cast(common.size(), dtypes.float32) * (1.0 / capacity))
        readers = [reader_class(**(reader_kwargs or {})) for _ in range(num_readers)]
        enqueues = [common.enqueue(r.read(filenames)) for r in readers]
        add_queue_runner(QueueRunner(common, enqueues))
        return common.dequeue(name="common_dequeue")


class DatasetDataProvider:
    """Reads and decodes a slim Dataset's records (slim.dataset_data_provider.DatasetDataProvider);
    `get(items)` gives the items' tensors, `list_items()` their names, `num_samples()` the count."""

    def __init__(self, dataset, num_readers=1, reader_kwargs=None, shuffle=True, num_epochs=None,
                 common_queue_capacity=256, common_queue_min=128, record_key="record_key", seed=None, scope=None):
        key, data = parallel_read(dataset.data_sources, reader_class=dataset.reader, num_epochs=num_epochs,
                                  num_readers=num_readers, reader_kwargs=reader_kwargs, shuffle=shuffle,
                                  capacity=common_queue_capacity, min_after_dequeue=common_queue_min, seed=seed,
                                  scope=scope)
        items = dataset.decoder.list_items()
        tensors = dataset.decoder.decode(data, items)
        if record_key in items:
            raise ValueError(f"The item name used for `record_key` cannot also be used for a dataset item: "
                             f"{record_key}")
        self._items_to_tensors = dict(zip(items + [record_key], tensors + [key]))
        self._num_samples = dataset.num_samples

    def get(self, items):
        missing = [i for i in items if i not in self._items_to_tensors]
        if missing:
            raise ValueError(f"Items {missing} are not provided; the provider has {sorted(self._items_to_tensors)}")
        return [self._items_to_tensors[i] for i in items]

    def list_items(self):
        return list(self._items_to_tensors)

    def num_samples(self):
        return self._num_samples


def prefetch_queue(tensors, capacity=8, num_threads=1, dynamic_pad=False, shared_name=None, name=None):
    """A FIFO queue of `tensors` (a list or dict) filled by `num_threads` queue runners
    (slim.prefetch_queue.prefetch_queue); `dequeue()` gives them back in the same structure."""
    from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue
    from actorflow.graph.ops.summary_ops import scalar
    from actorflow.train.queue_runner import QueueRunner, add_queue_runner
    if isinstance(tensors, dict):
        names = sorted(tensors)
        values = [tensors[k] for k in names]
    else:
        names, values = None, list(tensors)
    values = [v if isinstance(v, Tensor) else convert_to_tensor(v) for v in values]
    kinds = [v.dtype for v in values]
    shapes = [v.shape for v in values]
    with name_scope(name or "prefetch_queue"):
        cls = PaddingFIFOQueue if dynamic_pad else FIFOQueue
        queue = cls(capacity=capacity, dtypes=kinds, shapes=shapes, names=names, shared_name=shared_name)
        enqueue = queue.enqueue(dict(zip(names, values)) if names else values)
        add_queue_runner(QueueRunner(queue, [enqueue] * num_threads))
        scalar(f"fraction_of_{capacity}_full", math_ops.cast(queue.size(), dtypes.float32) * (1.0 / capacity))
    return queue


dataset = types.SimpleNamespace(Dataset=Dataset)
tfexample_decoder = types.SimpleNamespace(TFExampleDecoder=TFExampleDecoder, ItemHandler=ItemHandler,
                                          ItemHandlerCallback=ItemHandlerCallback, Tensor=Tensor_, Image=Image)
dataset_data_provider = types.SimpleNamespace(DatasetDataProvider=DatasetDataProvider)
parallel_reader = types.SimpleNamespace(parallel_read=parallel_read, get_data_files=get_data_files)
prefetch_queue = types.SimpleNamespace(prefetch_queue=prefetch_queue)
