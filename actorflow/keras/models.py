"""Keras models in graph mode: the functional `Model(inputs, outputs)`, `Sequential`, and
training (tf.keras.Model / tf.keras.Sequential of TF 1.x).

A model is a set of input placeholders and output tensors of the default graph, and the layers
between them (found by walking back from the outputs through the layers' call history). `compile`
adds a target placeholder and a sample-weight input per output, the total loss (the weighted
mean per output, plus the layers' regularization losses) and the metric tensors; the first
`fit`/`train_on_batch` adds the optimizer's update ops and the layers' updates (BatchNormalization's
moving averages). Each step is one `Session.run` in `backend.get_session()`, feeding the batch and
the learning phase (True when training). `fit` with `shuffle` uses numpy's global random state,
as Keras does.

A model is a layer too: called on new tensors it replays its layers (Sequential: in order; a
functional model: its recorded calls, which must all be Keras layers). A subclassed Model
(overriding `call`) is built on its first data, with placeholders of the data's shapes.
`save_weights`/`load_weights` use af's checkpoint format (a `.h5` path needs h5py, which is
not a dependency).
"""
from __future__ import annotations

import itertools
import logging
import weakref

import numpy as np

from actorflow import errors
from actorflow.graph import nest
from actorflow.graph.graph import Tensor, get_default_graph
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant, group, placeholder, placeholder_with_default
from actorflow.keras import backend as K
from actorflow.keras import callbacks as cbks
from actorflow.keras import losses as losses_mod
from actorflow.keras import metrics as metrics_mod
from actorflow.keras import optimizers
from actorflow.keras.engine import Input, InputLayer, Layer, keras_history

__all__ = ["Model", "Sequential", "model_from_config", "model_from_json", "deserialize_layer", "load_model"]

_H5 = (".h5", ".hdf5", ".keras")
_END = object()             # what next() gives at the end of a generator's data
log = logging.getLogger(__name__)


def _is_h5(path, save_format=None):
    return save_format in ("h5", "keras") or str(path).lower().endswith(_H5)


def _need_h5py(path):
    try:
        import h5py  # noqa: F401
    except ImportError:
        raise ImportError(f"Saving or loading Keras weights in HDF5 (h5) format needs h5py, which is not installed "
                          f"(path '{path}'); install h5py, or give a path without an .h5 suffix to use "
                          f"actorflow's checkpoint format") from None


def _walk(inputs, outputs):
    """The nodes between `inputs` and `outputs` in creation order, and whether plain graph ops
    (not Keras layers) sit between them."""
    input_ids = {id(t) for t in inputs}
    nodes, seen_nodes, seen_ops = {}, set(), set()
    raw = [False]
    stack = list(outputs)
    while stack:
        t = stack.pop()
        if id(t) in input_ids:
            continue
        hist = keras_history(t)
        if hist is not None:
            layer, ni, _ = hist
            key = (id(layer), ni)
            if key in seen_nodes:
                continue
            seen_nodes.add(key)
            node = layer._inbound_nodes[ni]
            nodes[key] = node
            stack.extend(node.input_tensors)
            continue
        op = t.op
        if id(op) in seen_ops:
            continue
        seen_ops.add(id(op))
        if op.inputs:
            raw[0] = True
        stack.extend(op.inputs)
    return sorted(nodes.values(), key=lambda n: n.seq), raw[0]


def _dedup(items) -> list:
    out, seen = [], set()
    for x in items:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def _is_generator(x) -> bool:
    from actorflow.keras.utils import Sequence
    return isinstance(x, Sequence) or (hasattr(x, "__next__") and not hasattr(x, "shape"))


def _steps(generator, steps, what):
    if steps is None:
        if hasattr(generator, "__len__"):
            return len(generator)
        if isinstance(generator, _DatasetSource):
            return None             # until the data set ends
        raise ValueError(f"`{what}` is needed with a generator that has no length")
    return int(steps)


def _is_dataset(x) -> bool:
    """A tf.data Dataset or a tf.data iterator (duck-typed: keras does not sit above data)."""
    return (hasattr(x, "make_initializable_iterator") and hasattr(x, "cardinality")) or \
        (hasattr(x, "get_next") and hasattr(x, "initializer"))


class _DatasetSource:
    """A tf.data Dataset (or iterator) as a source of numpy batches for the Keras loops, drawn
    through the Keras session. A dataset gets its own initializable iterator, made once (a model
    keeps one source per data set, so repeated calls add nothing to the graph); each call (`start`)
    reads it from its beginning, as tf.keras's calls do, and with `restart_each_pass` (no step
    count: each epoch runs to the end of the data) every epoch does. An iterator is used as it
    stands."""

    def __init__(self, data):
        g = get_default_graph()
        with g.name_scope(None):
            if hasattr(data, "make_initializable_iterator"):
                self._it = data.make_initializable_iterator()
                self._init = self._it.initializer
                self.cardinality = int(K.get_session().run(data.cardinality()))
            else:
                self._it, self._init, self.cardinality = data, None, -2
            self._next = self._it.get_next()
        self.steps, self.restart_each_pass, self._started = None, False, False

    def start(self, steps, steps_name):
        """This source for one call reading `steps` batches an epoch (None: to the data's end)."""
        if steps is None and self.cardinality == -1:
            raise ValueError(f"When passing an infinitely repeating dataset, you must specify the `{steps_name}` "
                             f"argument.")
        self.steps = steps if steps is not None else (self.cardinality if self.cardinality >= 0 else None)
        self.restart_each_pass = steps is None
        self._started = False
        return self

    def __iter__(self):
        if self._init is not None and (self.restart_each_pass or not self._started):
            K.get_session().run(self._init)
        self._started = True
        return self

    def __next__(self):
        try:
            return K.get_session().run(self._next)
        except errors.OutOfRangeError:
            raise StopIteration from None




def _unpack(batch):
    if not isinstance(batch, tuple) or len(batch) not in (2, 3):
        raise ValueError(f"A generator should yield (x, y) or (x, y, sample_weight) tuples, got {type(batch).__name__}"
                         + (f" of length {len(batch)}" if isinstance(batch, tuple) else ""))
    return batch if len(batch) == 3 else (batch[0], batch[1], None)


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _standardize_weights(y, sample_weight, class_weight, mode):
    """The weights of one output's samples (or steps, in "temporal" mode) as tf.keras's graph-mode
    training makes them: `sample_weight` checked against the targets `y`, times the weights of the
    samples' classes (`class_weight`, {class: weight}, from integer or one-hot targets)."""
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float32)
        if mode == "temporal":
            if y is not None and y.ndim < 3:
                raise ValueError(f"Found a sample_weight array for an input with shape {y.shape}. Timestep-wise "
                                 f'sample weighting (use of sample_weight_mode="temporal") is restricted to outputs '
                                 f"that are at least 3D, i.e. that have a time dimension.")
            if sample_weight.ndim != 2:
                raise ValueError(f"Found a sample_weight array with shape {sample_weight.shape}. In order to use "
                                 f"timestep-wise sample weighting, you should pass a 2D sample_weight array.")
        elif sample_weight.ndim != 1:
            raise ValueError(f"Found a sample_weight array with shape {sample_weight.shape}. In order to use "
                             f'timestep-wise sample weights, you should specify sample_weight_mode="temporal" in '
                             f"compile(); found \"{mode}\" instead. If you just mean to use sample-wise weights, "
                             f"make sure your sample_weight array is 1D.")
        if y is not None and y.shape[:sample_weight.ndim] != sample_weight.shape:
            raise ValueError(f"Found a sample_weight array with shape {sample_weight.shape} for an input with shape "
                             f"{y.shape}. sample_weight cannot be broadcast.")
    class_sample_weight = None
    if isinstance(class_weight, dict) and y is not None:
        if y.ndim > 2:
            raise ValueError("`class_weight` not supported for 3+ dimensional targets.")
        classes = y
        if y.ndim == 2:
            classes = np.argmax(y, axis=1) if y.shape[1] > 1 else np.reshape(y, y.shape[0])
        missing = {c.item() for c in np.unique(classes)} - set(class_weight)
        if missing:
            raise ValueError(f"`class_weight` must contain all classes in the data. The classes {missing} exist in "
                             f"the data but not in `class_weight`.")
        class_sample_weight = np.asarray([class_weight[c.item()] for c in classes], dtype=np.float32)
    if class_sample_weight is not None and sample_weight is not None:
        return class_sample_weight * sample_weight
    return sample_weight if sample_weight is not None else class_sample_weight


def _align(mask, per):
    """`mask` shaped for the per-sample losses `per` (tf.keras's squeeze_or_expand_dimensions):
    a trailing size-1 axis dropped, or one added, where the ranks differ by one."""
    rm, rp = mask.shape.ndims, per.shape.ndims
    if rm is not None and rp is not None:
        if rm == rp + 1 and mask.shape.dims[-1] == 1:
            return array_ops.squeeze(mask, [-1])
        if rm == rp - 1:
            return array_ops.expand_dims(mask, -1)
    return mask


def _to_rank(sw, like):
    """Sample weights with trailing axes of size 1 up to `like`'s rank (per-sample weights against
    per-step values)."""
    for _ in range(max((like.shape.ndims or 1) - sw.shape.ndims, 0)):
        sw = array_ops.expand_dims(sw, -1)
    return sw


def _weighted_loss(per, sw, mask):
    """An output's loss as tf.keras computes it in a compiled model (TF 2.21's SUM_OVER_BATCH_SIZE,
    which TF 1.15's compile already used): the per-sample losses times the sample weights, summed
    and divided by their count. With a mask, the masked entries weigh 0 and the others
    size / (unmasked count), so the loss is the weighted mean over the unmasked entries."""
    if mask is None:
        if per.shape.ndims and per.shape.ndims > sw.shape.ndims:     # the mean per sample (or step)
            per = math_ops.reduce_mean(per, list(range(sw.shape.ndims, per.shape.ndims)))
        weighted = math_ops.multiply(per, sw)
    else:
        size = math_ops.cast(array_ops.size(mask), per.dtype)
        w = math_ops.multiply(mask, math_ops.divide(size, math_ops.reduce_sum(mask)))
        weighted = math_ops.multiply(per, math_ops.multiply(_to_rank(sw, w), w))
    return math_ops.div_no_nan(math_ops.reduce_sum(weighted), math_ops.cast(array_ops.size(weighted), per.dtype))


def _mean_parts(values, mask, sample_weight=None):
    """(sum of values, sum of weights) of a metric's values on a batch, the weights the mask (times
    the sample weights, for a weighted metric): what a stateful tf.keras mean metric adds to its
    total and count."""
    values = math_ops.cast(values, K.floatx())
    w = None if mask is None else _align(math_ops.cast(mask, values.dtype), values)
    if sample_weight is not None:
        sw = math_ops.cast(sample_weight, values.dtype)
        if w is not None:
            w = math_ops.multiply(w, _to_rank(sw, w))
        else:
            w = _align(sw, values)
    if w is None:
        return math_ops.reduce_sum(values), math_ops.cast(array_ops.size(values), values.dtype)
    w = math_ops.multiply(w, array_ops.ones_like(values))
    return math_ops.reduce_sum(math_ops.multiply(values, w)), math_ops.reduce_sum(w)


class _Totals:
    """The loss and metrics over batches, as tf.keras's v1 training loops aggregate them: the
    total loss weighted by batch size in float32 (arrays), or with `use_steps` (generators and
    data sets, whose loops count steps) the plain mean of the batches' in float64; each output's
    loss the mean of the batches' (a stateful Mean) and each metric its running sum of values over
    its running sum of weights, in float32."""

    def __init__(self, n_losses, n_fetches, use_steps=False):
        self.n_losses = n_losses
        self.use_steps = use_steps
        self.loss = np.float64(0.0) if use_steps else np.float32(0.0)
        self.sums = [np.float32(0.0)] * (n_fetches - 1)
        self.counts = [np.float32(0.0)] * (n_losses - 1)
        self.seen = 0

    @staticmethod
    def batch(outs, n_losses) -> list:
        """One batch's values: its losses and metrics, as float32."""
        outs = [np.float32(o) for o in outs]
        return outs[:n_losses] + _Totals._ratios(outs[n_losses:])

    @staticmethod
    def _ratios(pairs) -> list:
        """num / den of each (num, den) pair of a flat list (0 for no weight), as float32."""
        return [np.float32(num / den) if den else np.float32(0.0) for num, den in zip(pairs[::2], pairs[1::2])]

    def add(self, outs, n) -> list:
        """Adds a batch of `n` samples; the values to log for it (its losses, the running metrics)."""
        outs = [np.float32(o) for o in outs]
        if self.use_steps:
            self.loss = self.loss + np.float64(outs[0])
            self.seen += 1
        else:
            self.loss = self.loss + outs[0] * np.float32(n)
            self.seen += n
        for i in range(1, self.n_losses):
            self.sums[i - 1] = self.sums[i - 1] + outs[i]
            self.counts[i - 1] = self.counts[i - 1] + np.float32(1.0)
        for i in range(self.n_losses, len(outs)):
            self.sums[i - 1] = self.sums[i - 1] + outs[i]
        return outs[:self.n_losses] + self._metrics()

    def _metrics(self) -> list:
        return self._ratios(self.sums[self.n_losses - 1:])

    def result(self) -> list:
        k = self.n_losses - 1
        loss = self.loss / max(self.seen, 1)
        outs = self._ratios([v for pair in zip(self.sums[:k], self.counts) for v in pair])
        return [loss if self.use_steps else np.float32(loss)] + outs + self._metrics()


class Model(Layer):
    """A functional model `Model(inputs, outputs)` (tf.keras.Model, graph mode); subclass it and
    override `call` for a subclassed model."""

    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if args else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        name = kwargs.pop("name", None)
        super().__init__(name=name, **kwargs)
        self._is_compiled = False
        self.optimizer = None
        self.stop_training = False
        self.history = None
        self.inputs, self.outputs = [], []
        self._nodes: list = []
        self._layers_list: list = []
        self._fns: dict = {}
        self._saver = None
        self._sources = weakref.WeakKeyDictionary()     # data set -> its _DatasetSource
        if inputs is not None:
            if outputs is None:
                raise ValueError("Model needs both `inputs` and `outputs`")
            self._init_graph_network(inputs, outputs)

    # -- structure ----------------------------------------------------------------------------
    def _init_graph_network(self, inputs, outputs):
        self._nested_inputs, self._nested_outputs = inputs, outputs
        self.inputs = [t for t in nest.flatten(inputs)]
        self.outputs = [t for t in nest.flatten(outputs)]
        for t in self.inputs + self.outputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"Model {self.name}: inputs and outputs must be graph tensors, got {t!r}")
        self._nodes, self._raw_ops = _walk(self.inputs, self.outputs)
        layers, seen = [], set()
        for t in self.inputs:
            hist = keras_history(t)
            if hist is not None and id(hist[0]) not in seen:
                seen.add(id(hist[0]))
                layers.append(hist[0])
        for n in self._nodes:
            if id(n.layer) not in seen:
                seen.add(id(n.layer))
                layers.append(n.layer)
        self._layers_list = layers
        self.input_names = [keras_history(t)[0].name if keras_history(t) else t.op.name for t in self.inputs]
        self.output_names = []
        for i, t in enumerate(self.outputs):
            hist = keras_history(t)
            name = hist[0].name if hist is not None else f"output_{i + 1}"
            if name in self.output_names:
                name = f"{name}_{i + 1}"
            self.output_names.append(name)
        self.built = True
        self._fns = {}
        if self._is_compiled:
            self._compile_graph()

    @property
    def input(self):
        """The model's input tensor (a list for several)."""
        return self._one(self.inputs, "input")

    @property
    def output(self):
        """The model's output tensor (a list for several)."""
        return self._one(self.outputs, "output")

    @property
    def input_shape(self):
        return nest.map_structure(K.int_shape, self.input)

    @property
    def output_shape(self):
        return nest.map_structure(K.int_shape, self.output)

    def _one(self, tensors, what):
        if not tensors:
            raise AttributeError(f"Model {self.name} is not built yet: it has no {what}")
        return tensors[0] if len(tensors) == 1 else list(tensors)

    @property
    def layers(self) -> list:
        """The model's layers, input layers first, in the order they were called."""
        return list(self._layers_list)

    def get_layer(self, name=None, index=None):
        """The layer named `name`, or at `index`."""
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only has "
                                 f"{len(self.layers)} layers.")
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name}")

    def _unique(self, attr):
        out, seen = [], set()
        for layer in self.layers:
            for w in getattr(layer, attr):
                if id(w) not in seen:
                    seen.add(id(w))
                    out.append(w)
        return out

    @property
    def trainable_weights(self):
        return self._unique("trainable_weights") if self.trainable else []

    @property
    def non_trainable_weights(self):
        if not self.trainable:
            return self._unique("trainable_weights") + self._unique("non_trainable_weights")
        return self._unique("non_trainable_weights")

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    variables = weights

    @property
    def updates(self):
        """The update ops of the layer calls inside this model (BatchNormalization's moving averages)."""
        out = []
        for n in self._nodes:
            out.extend(n.updates)
        return out

    @property
    def weight_losses(self):
        """The regularization losses of the weights of the model's layers."""
        return _dedup(w for layer in self.layers for w in layer.weight_losses)

    @property
    def losses(self):
        """The regularization losses of the model's weights and of the layer calls inside it
        (activity regularizers)."""
        return _dedup(list(self.weight_losses) + [x for n in self._nodes for x in n.losses])

    @property
    def state_updates(self):
        """The updates of the stateful layers inside (their states after each batch): what
        `predict` and `evaluate` run besides training."""
        out = []
        for layer in self.layers:
            if isinstance(layer, Model):
                out += layer.state_updates
            elif getattr(layer, "stateful", False):
                out += layer.updates
        return _dedup(out)

    def _run_with_states(self, fetches, feed):
        """Runs `fetches` and the stateful layers' updates (grouped once, then reused); the fetches'
        values."""
        if "states" not in self._fns:
            ups = self.state_updates
            self._fns["states"] = group(*ups, name="keras_state_updates") if ups else None
        op = self._fns["states"]
        if op is None:
            return self._run(fetches, feed)
        return self._run(list(fetches) + [op], feed)[:-1]

    @property
    def metrics_names(self) -> list:
        """"loss", the per-output losses when there are several outputs, then the metrics' names."""
        return list(getattr(self, "_metrics_names", ["loss"]))

    def count_params(self) -> int:
        return int(sum(np.prod(w.shape.as_list(), dtype=np.int64) for w in self.weights))

    def get_weights(self):
        return K.batch_get_value(self.weights)

    def set_weights(self, weights):
        params, weights = self.weights, list(weights)
        if len(params) != len(weights):
            raise ValueError(f"Model {self.name}: set_weights got {len(weights)} arrays for {len(params)} weights")
        K.batch_set_value(list(zip(params, weights)))

    def summary(self, line_length=None, positions=None, print_fn=None):
        """Prints (or gives `print_fn`) one line per layer: name, type, output shape, parameters."""
        if not self.built:
            raise ValueError("This model has not yet been built. Build the model first by calling it on data, or "
                             "give the first layer an `input_shape`.")
        print_fn = print_fn or print
        width = line_length or 65
        print_fn(f'Model: "{self.name}"')
        print_fn("_" * width)
        print_fn(f"{'Layer (type)':<29}{'Output Shape':<26}{'Param #':<10}")
        print_fn("=" * width)
        for layer in self.layers:
            try:
                shape = layer.output_shape
            except AttributeError:
                shape = "multiple"
            params = layer.count_params() if layer.built else 0
            print_fn(f"{layer.name + ' (' + type(layer).__name__ + ')':<28} {str(shape):<25} {params:<10}")
        trainable = int(sum(np.prod(w.shape.as_list()) for w in self.trainable_weights))
        total = self.count_params()
        print_fn("=" * width)
        print_fn(f"Total params: {total:,}")
        print_fn(f"Trainable params: {trainable:,}")
        print_fn(f"Non-trainable params: {total - trainable:,}")
        print_fn("_" * width)

    # -- calling ------------------------------------------------------------------------------
    def _is_subclassed(self):
        return type(self).call is not Model.call and not isinstance(self, Sequential)

    def call(self, inputs, training=None, mask=None):
        """Replays the model's layer calls on `inputs` (a functional model)."""
        if self._raw_ops:
            raise NotImplementedError(f"Model {self.name} has graph ops between its layers that are not Keras "
                                      f"layers; only models made of Keras layers can be called on new inputs "
                                      f"(wrap the ops in a Lambda layer)")
        flat = nest.flatten(inputs)
        if len(flat) != len(self.inputs):
            raise ValueError(f"Model {self.name} expects {len(self.inputs)} input(s), got {len(flat)}")
        mapping = {id(t): x for t, x in zip(self.inputs, flat)}

        def sub(t):
            return mapping.get(id(t), t) if isinstance(t, Tensor) else t
        for node in self._nodes:
            kwargs = dict(node.kwargs)
            if training is not None and "training" in kwargs:
                kwargs["training"] = training
            out = node.layer(nest.map_structure(sub, node.inputs), *node.args, **kwargs)
            for old, new in zip(node.output_tensors, [t for t in nest.flatten(out) if isinstance(t, Tensor)]):
                mapping[id(old)] = new
        result = [mapping[id(t)] for t in self.outputs]
        return nest.pack_sequence_as(self._nested_outputs, result)

    def __call__(self, inputs, *args, **kwargs):
        """Calls the model on new tensors: its layers' weights are shared. A model not yet built
        is built on these tensors (its inputs wrap them), and returns its outputs."""
        training = kwargs.get("training")
        if not self.built and all(isinstance(t, Tensor) for t in nest.flatten(inputs)):
            self._build_on(inputs)
            return self._nested_outputs
        if not self.built:
            self._build_on(inputs)
        before = {id(layer): len(layer._inbound_nodes) for layer in self._all_layers()}
        if self._is_subclassed():
            out = type(self).call(self, inputs, *args, **kwargs)
        else:
            out = self.call(inputs, training=training)
        updates, losses = [], []
        for layer in self._all_layers():
            for node in layer._inbound_nodes[before.get(id(layer), 0):]:
                updates += node.updates
                losses += node.losses
        self._record(inputs, out, (), {"training": training} if training is not None else {}, updates, losses)
        return out

    def _all_layers(self):
        return [n.layer for n in self._nodes] + list(self.layers)

    def _build_on(self, inputs):
        """Builds a not-yet-built model on tensors (or arrays: placeholders of their shapes)."""
        flat = nest.flatten(inputs)
        ins = []
        for i, x in enumerate(flat):
            if isinstance(x, Tensor):
                ins.append(Input(tensor=x))
            else:
                x = np.asarray(x)
                dtype = x.dtype.name if np.issubdtype(x.dtype, np.integer) and self._takes_ints() else K.floatx()
                ins.append(Input(batch_shape=(None,) + x.shape[1:], dtype=dtype,
                                 name=f"input_{i + 1}" if len(flat) > 1 else None))
        nested_in = nest.pack_sequence_as(inputs, ins) if isinstance(inputs, (list, tuple)) else ins[0]
        outputs = self._forward(nested_in)
        self._init_graph_network(nested_in, outputs)

    def _takes_ints(self):
        return False

    def _forward(self, inputs):
        if self._is_subclassed():
            return type(self).call(self, inputs)
        raise ValueError(f"Model {self.name} has no inputs; create it with Model(inputs, outputs)")

    # -- compiling ----------------------------------------------------------------------------
    def compile(self, optimizer, loss=None, metrics=None, loss_weights=None, sample_weight_mode=None,
                weighted_metrics=None, target_tensors=None, **kwargs):
        """Sets the optimizer (a name, a Keras optimizer or an af.train optimizer), the loss(es) by
        name, function or Loss object (one, a list per output, or a dict by output name), the
        metrics and the outputs' loss weights (tf.keras.Model.compile)."""
        if kwargs:
            raise TypeError(f"compile: unexpected keyword arguments {sorted(kwargs)}")
        if loss is None:
            raise ValueError("compile needs a `loss`")
        for mode in (sample_weight_mode.values() if isinstance(sample_weight_mode, dict) else
                     sample_weight_mode if isinstance(sample_weight_mode, (list, tuple)) else [sample_weight_mode]):
            if mode not in (None, "samplewise", "temporal"):
                raise ValueError(f'"sample_weight_mode should be None or "temporal". Found: {mode}')
        self.sample_weight_mode = sample_weight_mode
        self.optimizer = optimizers.get(optimizer)
        self.loss, self.loss_weights = loss, loss_weights
        self._compile_metrics = metrics
        self._compile_weighted_metrics = weighted_metrics
        self._target_tensors = target_tensors
        self._is_compiled = True
        self._fns = {}
        if self.built:
            self._compile_graph()

    def _per_output(self, spec, what, default=None):
        n = len(self.outputs)
        if isinstance(spec, dict):
            unknown = set(spec) - set(self.output_names)
            if unknown:
                raise ValueError(f"Unknown entries in {what} dictionary: {sorted(unknown)}. Only expected the "
                                 f"following keys: {self.output_names}")
            return [spec.get(name, default) for name in self.output_names]
        if isinstance(spec, (list, tuple)) and what != "metrics":
            if len(spec) != n:
                raise ValueError(f"When passing a list as {what}, it should have one entry per model output. The "
                                 f"model has {n} outputs, but you passed {what}={spec}")
            return list(spec)
        return [spec] * n

    def _compile_graph(self):
        g = get_default_graph()
        loss_fns = [losses_mod.get(lf) for lf in self._per_output(self.loss, "loss")]
        weights = self._per_output(self.loss_weights, "loss_weights", 1.0) if self.loss_weights is not None \
            else [1.0] * len(self.outputs)
        metrics = self._compile_metrics
        per_output_metrics = [_as_list(m) for m in self._per_output(metrics, "metrics")] \
            if isinstance(metrics, dict) else [_as_list(metrics)] * len(self.outputs)
        wm = getattr(self, "_compile_weighted_metrics", None)
        per_output_weighted = [_as_list(m) for m in self._per_output(wm, "weighted_metrics")] \
            if isinstance(wm, dict) else [_as_list(wm)] * len(self.outputs)
        targets = _as_list(self._target_tensors)
        self._sample_weight_modes = self._per_output(getattr(self, "sample_weight_mode", None), "sample_weight_mode")
        self.targets, self.sample_weights, self._output_losses = [], [], []
        metric_tensors, metric_names = [], []
        total = None
        with g.name_scope(None), g.name_scope("loss"):
            for i, (out, fn) in enumerate(zip(self.outputs, loss_fns)):
                name = self.output_names[i]
                if i < len(targets) and targets[i] is not None:
                    target = targets[i]
                else:
                    target = placeholder(out.dtype.base_dtype, shape=[None] * (out.shape.ndims or 1),
                                         name=f"{name}_target")
                per = losses_mod.per_sample(fn)(target, out)
                mask = getattr(out, "_keras_mask", None)
                if mask is not None:
                    mask = _align(math_ops.cast(mask, per.dtype), per)
                if self._sample_weight_modes[i] == "temporal":       # one weight per sample and step
                    sw = placeholder_with_default(constant([[1.0]], dtype=per.dtype), [None, None],
                                                  name=f"{name}_sample_weights")
                else:
                    sw = placeholder_with_default(constant([1.0], dtype=per.dtype), [None],
                                                  name=f"{name}_sample_weights")
                out_loss = _weighted_loss(per, sw, mask)
                self.targets.append(target)
                self.sample_weights.append(sw)
                self._output_losses.append(out_loss)
                term = out_loss if weights[i] == 1.0 else math_ops.multiply(out_loss, float(weights[i]))
                total = term if total is None else math_ops.add(total, term)
                prefix = f"{name}_" if len(self.outputs) > 1 else ""
                for m in per_output_metrics[i]:
                    mname, mfn = metrics_mod.resolve(m, fn, out)
                    metric_names.append(prefix + mname)
                    metric_tensors.append(_mean_parts(mfn(target, out), mask))
                for m in per_output_weighted[i]:        # weighted by the sample weights (and the mask)
                    mname, mfn = metrics_mod.resolve(m, fn, out)
                    metric_names.append(prefix + "weighted_" + mname)
                    metric_tensors.append(_mean_parts(mfn(target, out), mask, sw))
            reg = self.losses
            if reg:
                total = math_ops.add(total, math_ops.add_n([math_ops.cast(r, total.dtype) for r in reg]))
        self.total_loss = total
        names = ["loss"]
        fetch_losses = [total]
        if len(self.outputs) > 1:
            names += [f"{n}_loss" for n in self.output_names]
            fetch_losses += self._output_losses
        self._metrics_names = names + metric_names
        # Fetched each batch: the losses, then each metric's (sum of values, sum of weights).
        self._eval_fetches = fetch_losses + [t for parts in metric_tensors for t in parts]
        self._n_losses = len(fetch_losses)
        self.metrics_tensors = [math_ops.div_no_nan(num, den) for num, den in metric_tensors]
        self._fns = {}

    def _source(self, data, batch_size, steps, steps_name):
        """The model's source of batches from data set `data`, started for one call."""
        if batch_size is not None:
            raise ValueError(f"The `batch_size` argument must not be specified for the given input type. Received "
                             f"input: {data}, batch_size: {batch_size}")
        src = self._sources.get(data)
        if src is None:
            src = self._sources[data] = _DatasetSource(data)
        return src.start(steps, steps_name)

    def _totals(self, use_steps=False):
        return _Totals(self._n_losses, len(self._eval_fetches), use_steps)

    def _train_op(self):
        op = self._fns.get("train")
        if op is None:
            g = get_default_graph()
            with g.name_scope(None):
                params = self.trainable_weights
                # A frozen model still runs its layers' updates (and reports its loss), as Keras does.
                updates = self.optimizer.get_updates(self.total_loss, params) if params else []
                op = group(*(updates + list(self.updates)), name="keras_train_step")
            self._fns["train"] = op
        return op

    # -- data ---------------------------------------------------------------------------------
    def _arrays(self, data, tensors, names, what, expand=False):
        if data is None:
            return None
        if isinstance(data, dict):
            missing = [n for n in names if n not in data]
            if missing:
                raise ValueError(f"No data provided for {missing}. Need data for each key in: {names}")
            data = [data[n] for n in names]
        # A list is one array per input, except for a single input, where a plain list (of
        # numbers or rows) is the array itself unless it holds exactly one array.
        one_array_list = isinstance(data, (list, tuple)) and len(data) == 1 and hasattr(data[0], "shape")
        if isinstance(data, (list, tuple)) and (len(tensors) > 1 or one_array_list):
            data = list(data)
        else:
            data = [data]
        if len(data) != len(tensors):
            raise ValueError(f"Error when checking model {what}: the list of Numpy arrays that you are passing to "
                             f"your model is not the size the model expected. Expected to see {len(tensors)} "
                             f"array(s), but instead got {len(data)}")
        out = []
        for arr, t, n in zip(data, tensors, names):
            arr = np.asarray(arr)
            rank = t.shape.ndims
            if (expand or arr.ndim == 1) and rank is not None and arr.ndim == rank - 1:
                arr = arr[..., None]        # Keras makes a 1-D array a column (and targets one rank up)
            if rank is not None:
                if arr.ndim != rank:
                    raise ValueError(f"Error when checking {what}: expected {n} to have {rank} dimensions, but got "
                                     f"array with shape {arr.shape}")
                want = t.shape.as_list()
                for d, (a, b) in enumerate(zip(arr.shape, want)):
                    if d > 0 and b is not None and a != b:
                        raise ValueError(f"Error when checking {what}: expected {n} to have shape "
                                         f"{tuple(want[1:])} but got array with shape {arr.shape[1:]}")
            out.append(arr)
        sizes = {a.shape[0] for a in out}
        if len(sizes) > 1:
            raise ValueError(f"All {what} arrays should have the same number of samples. Got array shapes: "
                             f"{[a.shape for a in out]}")
        return out

    def _standardize(self, x, y=None, sample_weight=None, class_weight=None):
        if not self.built:
            self._build_on(x)
        if self._is_compiled and not hasattr(self, "total_loss"):
            self._compile_graph()
        xs = self._arrays(x, self.inputs, self.input_names, "input")
        ys = None
        if y is not None:
            if not self._is_compiled:
                raise RuntimeError("You must compile your model before training/testing. Use "
                                   "`model.compile(optimizer, loss)`.")
            ys = self._arrays(y, self.targets, self.output_names, "target", expand=True)
            if ys[0].shape[0] != xs[0].shape[0]:
                raise ValueError(f"Input arrays should have the same number of samples as target arrays. Found "
                                 f"{xs[0].shape[0]} input samples and {ys[0].shape[0]} target samples.")
        sws = None
        if sample_weight is not None or class_weight is not None:
            if isinstance(sample_weight, dict):
                sample_weight = [sample_weight.get(n) for n in self.output_names]
            given = sample_weight if isinstance(sample_weight, (list, tuple)) else [sample_weight] * len(self.outputs)
            cws = [class_weight.get(n) for n in self.output_names] if isinstance(class_weight, dict) and \
                class_weight and set(class_weight) <= set(self.output_names) else [class_weight] * len(self.outputs)
            modes = getattr(self, "_sample_weight_modes", [None] * len(self.outputs))
            sws = [_standardize_weights(yv, sw, cw, mode) for yv, sw, cw, mode in
                   zip(ys if ys is not None else [None] * len(self.outputs), given, cws, modes)]
            sws = [w if w is not None else np.ones(xs[0].shape[0] if m != "temporal" else ys[i].shape[:2], np.float32)
                   for i, (w, m) in enumerate(zip(sws, modes))]
        return xs, ys, sws

    def _feed(self, xs, ys=None, sws=None, idx=None, training=False):
        def take(a):
            return a if idx is None else a[idx]
        feed = {t: take(a) for t, a in zip(self.inputs, xs)}
        if ys is not None:
            feed.update({t: take(a) for t, a in zip(self.targets, ys)})
        if sws is not None:
            feed.update({t: take(a) for t, a in zip(self.sample_weights, sws)})
        phase = K.learning_phase()
        if isinstance(phase, Tensor):
            feed[phase] = bool(training)
        return feed

    def _run(self, fetches, feed):
        return K.get_session().run(fetches, feed_dict=feed)

    # -- training and inference ---------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, **kwargs):
        """Trains for `epochs` over the arrays in batches of `batch_size` (32 by default); returns
        the History (tf.keras.Model.fit). Epoch logs are the sample-weighted means over the batches
        of the loss and metrics, and `val_` ones on the validation data (`validation_data`, or the
        last `validation_split` of the arrays, taken before shuffling)."""
        if kwargs:
            raise TypeError(f"fit: unexpected keyword arguments {sorted(kwargs)}")
        if _is_dataset(x):
            # TF 1.13+: fit takes a tf.data Dataset of (x, y) or (x, y, sample_weight) batches
            if validation_data is not None and _is_dataset(validation_data):
                validation_data = self._source(validation_data, None, validation_steps, "validation_steps")
            src = self._source(x, batch_size, steps_per_epoch, "steps_per_epoch")
            return self.fit_generator(src, steps_per_epoch=src.steps, epochs=epochs, verbose=verbose,
                                      callbacks=callbacks, validation_data=validation_data,
                                      validation_steps=validation_steps, class_weight=class_weight,
                                      shuffle=False, initial_epoch=initial_epoch)
        if _is_generator(x):
            # TF 1.14+: fit takes a generator or a Sequence, as fit_generator does.
            return self.fit_generator(x, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=verbose,
                                      callbacks=callbacks, validation_data=validation_data,
                                      validation_steps=validation_steps, class_weight=class_weight,
                                      shuffle=shuffle, initial_epoch=initial_epoch)
        if steps_per_epoch is not None:
            raise NotImplementedError("fit: steps_per_epoch with input tensors is not supported; pass arrays, a "
                                      "tf.data Dataset, a generator or a Sequence")
        if x is None:
            raise ValueError("fit needs input arrays `x`")
        batch_size = int(batch_size or 32)
        xs, ys, sws = self._standardize(x, y, sample_weight, class_weight)
        if ys is None:
            raise ValueError("fit needs target arrays `y`")
        val = None
        if validation_data is not None:
            if len(validation_data) not in (2, 3):
                raise ValueError("When passing validation_data, it must contain 2 (x_val, y_val) or 3 (x_val, y_val, "
                                 f"val_sample_weights) items, however it contains {len(validation_data)} items")
            val = self._standardize(*validation_data)
        elif validation_split and 0.0 < validation_split < 1.0:
            n = xs[0].shape[0]
            split_at = int(n * (1.0 - validation_split))
            val = ([a[split_at:] for a in xs], [a[split_at:] for a in ys],
                   [a[split_at:] for a in sws] if sws is not None else None)
            xs, ys = [a[:split_at] for a in xs], [a[:split_at] for a in ys]
            sws = [a[:split_at] for a in sws] if sws is not None else None
        n = xs[0].shape[0]
        train_op = self._train_op()
        fetches = list(self._eval_fetches)
        names = self.metrics_names
        self.history = cbks.History()
        callback_list = [cbks.ProgbarLogger()] if verbose else []
        callback_list = cbks.CallbackList(callback_list + _as_list(callbacks) + [self.history])
        callback_list.set_model(self)
        callback_list.set_params({"batch_size": batch_size, "epochs": epochs, "steps": None, "samples": n,
                                  "verbose": verbose, "do_validation": val is not None,
                                  "metrics": names + ["val_" + m for m in names] if val is not None else names})
        self.stop_training = False
        callback_list.on_train_begin({})
        for epoch in range(initial_epoch, epochs):
            callback_list.on_epoch_begin(epoch, {})
            index = np.arange(n)
            if shuffle == "batch":
                batches = [index[i:i + batch_size] for i in range(0, n, batch_size)]
                np.random.shuffle(batches)
                index = np.concatenate(batches) if batches else index
            elif shuffle:
                np.random.shuffle(index)
            totals = self._totals()
            for b, start in enumerate(range(0, n, batch_size)):
                idx = index[start:start + batch_size]
                logs = {"batch": b, "size": len(idx)}
                callback_list.on_batch_begin(b, logs)
                outs = self._run(fetches + [train_op], self._feed(xs, ys, sws, idx, training=True))[:-1]
                logs.update(zip(names, totals.add(outs, len(idx))))
                callback_list.on_batch_end(b, logs)
                if self.stop_training:
                    break
            epoch_logs = {k: float(v) for k, v in zip(names, totals.result())}
            if val is not None:
                val_outs = self._evaluate_arrays(*val, batch_size=batch_size)
                epoch_logs.update({"val_" + k: float(v) for k, v in zip(names, val_outs)})
            callback_list.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        callback_list.on_train_end({})
        return self.history

    def _evaluate_arrays(self, xs, ys, sws, batch_size):
        n = xs[0].shape[0]
        totals = self._totals()
        for start in range(0, n, batch_size):
            idx = np.arange(start, min(start + batch_size, n))
            totals.add(self._run_with_states(self._eval_fetches, self._feed(xs, ys, sws, idx, training=False)),
                       len(idx))
        return totals.result()

    def evaluate(self, x=None, y=None, batch_size=None, verbose=1, sample_weight=None, steps=None, callbacks=None):
        """The loss and metrics over the arrays, computed in batches (tf.keras.Model.evaluate): a
        scalar when there are no metrics, else a list in `metrics_names` order. `x` may be a
        tf.data Dataset of (x, y) or (x, y, sample_weight) batches, read for `steps` batches or to
        its end; or a generator or Sequence, as evaluate_generator."""
        if _is_dataset(x):
            return self.evaluate_generator(self._source(x, batch_size, steps, "steps"), steps=steps)
        if _is_generator(x):
            return self.evaluate_generator(x, steps=steps)
        xs, ys, sws = self._standardize(x, y, sample_weight)
        if ys is None:
            raise ValueError("evaluate needs target arrays `y`")
        outs = self._evaluate_arrays(xs, ys, sws, int(batch_size or 32))
        return outs[0] if len(outs) == 1 else outs

    def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None):
        """The outputs for the input arrays, computed in batches in the inference phase; `x` may
        be a tf.data Dataset (of inputs, or (inputs, targets) whose targets are ignored), read for
        `steps` batches or to its end, or a generator or Sequence, as predict_generator."""
        if _is_dataset(x):
            return self.predict_generator(self._source(x, batch_size, steps, "steps"), steps=steps)
        if _is_generator(x):
            return self.predict_generator(x, steps=steps)
        xs, _, _ = self._standardize(x)
        batch_size = int(batch_size or 32)
        n = xs[0].shape[0]
        parts = [[] for _ in self.outputs]
        for start in range(0, n, batch_size):
            idx = np.arange(start, min(start + batch_size, n))
            for p, o in zip(parts, self._run_with_states(self.outputs, self._feed(xs, idx=idx))):
                p.append(o)
        outs = [np.concatenate(p) if p else np.zeros((0,)) for p in parts]
        return outs[0] if len(outs) == 1 else outs

    def train_on_batch(self, x, y, sample_weight=None, class_weight=None, reset_metrics=True):
        """One training step on one batch; the loss (and metrics) before the update."""
        xs, ys, sws = self._standardize(x, y, sample_weight, class_weight)
        outs = self._run(list(self._eval_fetches) + [self._train_op()], self._feed(xs, ys, sws, training=True))[:-1]
        outs = _Totals.batch(outs, self._n_losses)
        return outs[0] if len(outs) == 1 else outs

    def test_on_batch(self, x, y, sample_weight=None, reset_metrics=True):
        """The loss (and metrics) on one batch, in the inference phase."""
        xs, ys, sws = self._standardize(x, y, sample_weight)
        outs = _Totals.batch(self._run_with_states(self._eval_fetches, self._feed(xs, ys, sws)), self._n_losses)
        return outs[0] if len(outs) == 1 else outs

    def predict_on_batch(self, x):
        """The outputs for one batch."""
        xs, _, _ = self._standardize(x)
        outs = self._run_with_states(self.outputs, self._feed(xs))
        return outs[0] if len(outs) == 1 else outs

    # -- generators ---------------------------------------------------------------------------
    def fit_generator(self, generator, steps_per_epoch=None, epochs=1, verbose=1, callbacks=None,
                      validation_data=None, validation_steps=None, class_weight=None, max_queue_size=10, workers=1,
                      use_multiprocessing=False, shuffle=True, initial_epoch=0):
        """Trains on batches from a generator (yielding (x, y) or (x, y, sample_weight)) or a
        keras.utils.Sequence, `steps_per_epoch` batches an epoch (a Sequence's length by default);
        `validation_data` is arrays, a generator or a Sequence (tf.keras.Model.fit_generator).
        Batches are drawn in this thread (`workers` and the queue are accepted and not used)."""
        from actorflow.keras.utils import Sequence
        steps = _steps(generator, steps_per_epoch, "steps_per_epoch")
        self.history = cbks.History()
        callback_list = cbks.CallbackList(([cbks.ProgbarLogger()] if verbose else []) + _as_list(callbacks) +
                                          [self.history])
        callback_list.set_model(self)
        self.stop_training = False
        it = None
        started = False
        for epoch in range(initial_epoch, epochs):
            order = list(range(steps)) if steps is not None else itertools.count()
            if isinstance(generator, Sequence):
                if shuffle:
                    np.random.shuffle(order)
            elif it is None or getattr(generator, "restart_each_pass", False):
                it = iter(generator)
            totals = names = None
            for b, i in enumerate(order):
                batch = generator[i] if isinstance(generator, Sequence) else next(it, _END)
                if batch is _END:
                    if steps is not None:
                        log.warning("Your dataset ran out of data; interrupting training. Make sure that your "
                                    "dataset can generate at least `steps_per_epoch * epochs` batches (in this "
                                    "case, %d batches).", steps * epochs)
                        self.stop_training = True
                    break
                x, y, sw = _unpack(batch)
                xs, ys, sws = self._standardize(x, y, sw, class_weight)
                if not started:
                    names = self.metrics_names
                    callback_list.set_params({"epochs": epochs, "steps": steps, "verbose": verbose,
                                              "do_validation": validation_data is not None, "metrics": names,
                                              "samples": None})
                    callback_list.on_train_begin({})
                    started = True
                if b == 0:
                    callback_list.on_epoch_begin(epoch, {})
                names = self.metrics_names
                if totals is None:
                    totals = self._totals(True)
                n = xs[0].shape[0]
                logs = {"batch": b, "size": n}
                callback_list.on_batch_begin(b, logs)
                outs = self._run(list(self._eval_fetches) + [self._train_op()],
                                 self._feed(xs, ys, sws, training=True))[:-1]
                logs.update(zip(names, totals.add(outs, n)))
                callback_list.on_batch_end(b, logs)
                if self.stop_training:
                    break
            if totals is None or not totals.seen:
                if self.stop_training:
                    break
                raise ValueError("fit_generator: the generator gave no batch")
            if isinstance(generator, Sequence):
                generator.on_epoch_end()
            epoch_logs = {k: float(v) for k, v in zip(names, totals.result())}
            if validation_data is not None:
                if isinstance(validation_data, (tuple, list)):
                    val = self.evaluate(*validation_data, verbose=0)
                else:
                    val = self.evaluate_generator(validation_data, steps=validation_steps)
                epoch_logs.update({"val_" + k: float(v) for k, v in zip(names, _as_list(val))})
            callback_list.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        if started:
            callback_list.on_train_end({})
        return self.history

    def evaluate_generator(self, generator, steps=None, callbacks=None, max_queue_size=10, workers=1,
                           use_multiprocessing=False, verbose=0):
        """The loss and metrics over `steps` batches of a generator or Sequence, weighted by batch size."""
        from actorflow.keras.utils import Sequence
        steps = _steps(generator, steps, "steps")
        it = None if isinstance(generator, Sequence) else iter(generator)
        totals = None
        for i in (range(steps) if steps is not None else itertools.count()):
            batch = generator[i] if it is None else next(it, _END)
            if batch is _END:
                break
            x, y, sw = _unpack(batch)
            xs, ys, sws = self._standardize(x, y, sw)
            totals = totals or self._totals(True)
            totals.add(self._run_with_states(self._eval_fetches, self._feed(xs, ys, sws)), xs[0].shape[0])
        if totals is None:
            raise ValueError("evaluate_generator: the generator gave no batch")
        outs = totals.result()
        return outs[0] if len(outs) == 1 else outs

    def predict_generator(self, generator, steps=None, callbacks=None, max_queue_size=10, workers=1,
                          use_multiprocessing=False, verbose=0):
        """The outputs for `steps` batches of inputs from a generator or Sequence, concatenated."""
        from actorflow.keras.utils import Sequence
        steps = _steps(generator, steps, "steps")
        it = None if isinstance(generator, Sequence) else iter(generator)
        parts = None
        for i in (range(steps) if steps is not None else itertools.count()):
            batch = generator[i] if it is None else next(it, _END)
            if batch is _END:
                break
            x = batch[0] if isinstance(batch, tuple) else batch
            out = self.predict_on_batch(x)
            out = out if isinstance(out, list) else [out]
            parts = [[o] for o in out] if parts is None else [p + [o] for p, o in zip(parts, out)]
        if parts is None:
            raise ValueError("predict_generator: the generator gave no batch")
        outs = [np.concatenate(p) for p in parts]
        return outs[0] if len(outs) == 1 else outs

    # -- architecture as a config -------------------------------------------------------------
    def get_config(self) -> dict:
        """The architecture as Keras's functional config: each layer's class and config and the
        calls between them (by layer name, node index and tensor index)."""
        if self._is_subclassed():
            raise NotImplementedError(f"Model {self.name}: a subclassed model has no config (its call is code)")
        if self._raw_ops:
            raise NotImplementedError(f"Model {self.name} has graph ops between its layers that are not Keras "
                                      f"layers: it has no config (wrap them in Lambda layers)")
        index = {}                       # (id(layer), its node index) -> the node's index within this model
        for layer in self.layers:
            ks = [i for i, n in enumerate(layer._inbound_nodes)
                  if n in self._nodes or isinstance(layer, InputLayer) and i == 0]
            for k, i in enumerate(ks):
                index[(id(layer), i)] = k

        def ref(t):
            layer, ni, ti = keras_history(t)
            return [layer.name, index[(id(layer), ni)], ti]
        layers = []
        for layer in self.layers:
            nodes = []
            for n in (x for x in self._nodes if x.layer is layer):
                kw = {k: v for k, v in n.kwargs.items() if isinstance(v, (bool, int, float, str))}
                nodes.append([ref(t) + [kw] for t in n.input_tensors])
            layers.append({"name": layer.name, "class_name": type(layer).__name__, "config": layer.get_config(),
                           "inbound_nodes": nodes})
        return {"name": self.name, "layers": layers, "input_layers": [ref(t) for t in self.inputs],
                "output_layers": [ref(t) for t in self.outputs]}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A functional model rebuilt from `get_config()` in the default graph (new weights)."""
        created, tensors = {}, {}
        pending = []
        for spec in config["layers"]:
            layer = deserialize_layer({"class_name": spec["class_name"], "config": spec["config"]}, custom_objects)
            created[spec["name"]] = layer
            if isinstance(layer, InputLayer):
                tensors[(spec["name"], 0, 0)] = layer.output
            for k, node in enumerate(spec["inbound_nodes"]):
                pending.append((spec["name"], k, node))
        while pending:
            progress = False
            for item in list(pending):
                name, k, node = item
                keys = [(n, ni, ti) for n, ni, ti, _ in node]
                if not all(key in tensors for key in keys):
                    continue
                ins = [tensors[key] for key in keys]
                kwargs = node[0][3] if node else {}
                out = created[name](ins[0] if len(ins) == 1 else ins, **kwargs)
                for ti, t in enumerate(x for x in nest.flatten(out) if isinstance(x, Tensor)):
                    tensors[(name, k, ti)] = t
                pending.remove(item)
                progress = True
            if not progress:
                raise ValueError(f"Model config '{config.get('name')}': the layer calls {[p[0] for p in pending]} "
                                 f"wait on tensors no layer makes")
        ins = [tensors[tuple(r)] for r in config["input_layers"]]
        outs = [tensors[tuple(r)] for r in config["output_layers"]]
        return Model(ins if len(ins) > 1 else ins[0], outs if len(outs) > 1 else outs[0])

    def to_json(self, **kwargs) -> str:
        """The architecture as JSON ({"class_name", "config", "keras_version", "backend"})."""
        import json
        return json.dumps({"class_name": type(self).__name__, "config": self.get_config(),
                           "keras_version": "2.2.4-tf", "backend": "tensorflow"}, default=_json_default, **kwargs)

    # -- weights on disk ----------------------------------------------------------------------
    def _weight_keys(self) -> dict:
        """Checkpoint key -> weight: `layer_with_weights-<j>/weight-<k>`, the k-th weight of the j-th
        layer that has weights (Keras's TF-format checkpoints key by object path likewise), so a
        model rebuilt in another graph, whose variables are named differently, reads them."""
        keys, seen, j = {}, set(), 0
        for layer in self.layers:
            ws = layer.weights
            if not ws:
                continue
            for k, w in enumerate(ws):
                if id(w) not in seen:
                    seen.add(id(w))
                    keys[f"layer_with_weights-{j}/weight-{k}"] = w
            j += 1
        return keys

    def _get_saver(self):
        keys = self._weight_keys()
        sig = [(k, w.name) for k, w in keys.items()]
        if self._saver is None or self._saver[0] != sig:
            from actorflow.train.saver import Saver
            self._saver = (sig, Saver(var_list=keys, max_to_keep=None))
        return self._saver[1]

    def save_weights(self, filepath, overwrite=True, save_format=None):
        """Writes the weights to `filepath` in actorflow's checkpoint format, keyed by layer and
        weight position (`_weight_keys`), read back by `load_weights` of this model or of the same
        architecture rebuilt. An `.h5` path needs h5py."""
        if _is_h5(filepath, save_format):
            _need_h5py(filepath)
            raise NotImplementedError(f"save_weights('{filepath}'): af.keras writes actorflow checkpoints only; "
                                      f"give a path without an .h5 suffix")
        self._get_saver().save(K.get_session(), str(filepath), write_meta_graph=False, write_state=False)

    def load_weights(self, filepath, by_name=False):
        """Reads weights written by `save_weights` (matched by layer and weight position)."""
        if _is_h5(filepath):
            _need_h5py(filepath)
            raise NotImplementedError(f"load_weights('{filepath}'): af.keras reads actorflow checkpoints only")
        self._get_saver().restore(K.get_session(), str(filepath))

    def save(self, filepath, overwrite=True, include_optimizer=True, save_format=None):
        """Saves the architecture, the weights and the compile settings to the directory
        `filepath`: `model.json` (to_json plus the training config) and a `weights` checkpoint in
        actorflow's format; `load_model` reads it back. An `.h5` path needs h5py. Differences from
        TF: the optimizer's slots are not saved (a loaded model restarts its optimizer)."""
        import json
        import os
        if _is_h5(filepath, save_format):
            _need_h5py(filepath)
            raise NotImplementedError(f"Model.save('{filepath}'): af.keras writes a directory (model.json and an "
                                      f"actorflow checkpoint), not HDF5; give a path without an .h5 suffix")
        if os.path.exists(filepath) and not overwrite:
            raise FileExistsError(f"Model.save: '{filepath}' exists and overwrite=False")
        os.makedirs(filepath, exist_ok=True)
        doc = json.loads(self.to_json())
        if self._is_compiled and include_optimizer:
            doc["training_config"] = self._training_config()
        tmp = os.path.join(filepath, "model.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(filepath, "model.json"))
        self.save_weights(os.path.join(filepath, "weights"))

    def _training_config(self):
        def name_of(x):
            if x is None or isinstance(x, (str, int, float)):
                return x
            if isinstance(x, dict):
                return {k: name_of(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [name_of(v) for v in x]
            n = getattr(x, "__name__", None)
            if n is None:
                raise NotImplementedError(f"Model.save: the compile argument {x!r} is an object with no name; "
                                          f"save with include_optimizer=False")
            return n
        opt = self.optimizer
        if isinstance(opt, optimizers.TFOptimizer):
            opt_cfg = None
        else:
            opt_cfg = optimizers.serialize(opt)
        return {"optimizer_config": opt_cfg, "loss": name_of(self.loss), "metrics": name_of(self._compile_metrics),
                "loss_weights": self.loss_weights}

    def reset_states(self):
        """Zeroes the states of the stateful recurrent layers inside."""
        for layer in self.layers:
            if isinstance(layer, Model) or getattr(layer, "stateful", False):
                layer.reset_states()


class Sequential(Model):
    """A linear stack of layers (tf.keras.Sequential). Built as soon as its first layer has an
    input shape (`input_shape=`, or an InputLayer), else on its first data or call."""

    def __init__(self, layers=None, name=None):
        super().__init__(name=name)
        self._stack: list = []
        self._input_layer = None
        for layer in layers or []:
            self.add(layer)

    @property
    def layers(self):
        """The layers added, without the input layer Keras makes for `input_shape`."""
        return list(self._stack)

    def add(self, layer):
        """Appends `layer`; if the model has an input, calls the layer on the current output."""
        if not isinstance(layer, Layer):
            raise TypeError(f"The added layer must be an instance of class Layer. Found: {layer!r}")
        if isinstance(layer, InputLayer):
            if self._stack or self._input_layer is not None:
                raise ValueError("An InputLayer can only be the first layer of a Sequential model")
            self._input_layer = layer
            self._set_network(layer.output, layer.output)
            return
        if not self.outputs:
            shape = layer._batch_input_shape
            if shape is not None and not self._stack:
                x = Input(batch_shape=shape, dtype=layer.dtype.name if layer.dtype else None,
                          name=f"{layer.name}_input")
                self._input_layer = keras_history(x)[0]
                self._stack.append(layer)
                self._set_network(x, layer(x))
                return
            self._stack.append(layer)
            return
        out = layer(self.outputs[0])
        if len(nest.flatten(out)) != 1:
            raise TypeError("All layers in a Sequential model should have a single output tensor. For multi-output "
                            "layers, use the functional API.")
        self._stack.append(layer)
        self._set_network(self.inputs[0], out)

    def _set_network(self, inputs, outputs):
        self._init_graph_network(inputs, outputs)
        self._layers_list = ([self._input_layer] if self._input_layer is not None else []) + list(self._stack)

    def pop(self):
        """Removes the last layer (the model is then rebuilt on the previous output)."""
        if not self._stack:
            raise TypeError("There are no layers in the model.")
        self._stack.pop()
        if self.outputs:
            if self._stack:
                self._set_network(self.inputs[0], self._stack[-1].get_output_at(-1))
            else:
                self.outputs = []
                self.built = False

    def _takes_ints(self):
        return bool(self._stack) and type(self._stack[0]).__name__ == "Embedding"

    def get_config(self) -> dict:
        """{"name", "layers": [{"class_name", "config"}, ...]}; the first layer carries the input shape."""
        layers = []
        for i, layer in enumerate(self._stack):
            c = layer.get_config()
            if i == 0 and self.inputs and "batch_input_shape" not in c:
                c["batch_input_shape"] = K.int_shape(self.inputs[0])
            layers.append({"class_name": type(layer).__name__, "config": c})
        return {"name": self.name, "layers": layers}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A Sequential model rebuilt from `get_config()` (new weights)."""
        model = cls()
        for spec in config["layers"]:
            model.add(deserialize_layer(spec, custom_objects))
        return model

    def _forward(self, inputs):
        x = inputs
        for layer in self._stack:
            x = layer(x)
        return x

    def call(self, inputs, training=None, mask=None):
        x = inputs
        for layer in self._stack:
            kw = {"training": training} if training is not None and layer._call_takes_training else {}
            x = layer(x, **kw)
        return x

    def predict_classes(self, x, batch_size=32, verbose=0):
        """argmax of the predictions, or (p > 0.5) for a single output unit."""
        p = self.predict(x, batch_size=batch_size)
        return p.argmax(-1) if p.shape[-1] > 1 else (p > 0.5).astype("int32")

    def predict_proba(self, x, batch_size=32, verbose=0):
        """The predictions (probabilities for a softmax or sigmoid output)."""
        return self.predict(x, batch_size=batch_size)




def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"to_json: cannot serialize {v!r}")


def deserialize_layer(spec, custom_objects=None):
    """A layer (or model) from {"class_name", "config"} (tf.keras.layers.deserialize); config names
    are kept."""
    from actorflow.keras import layers as layers_mod
    name = spec["class_name"]
    cls = (custom_objects or {}).get(name) or {"Model": Model, "Sequential": Sequential}.get(name) \
        or getattr(layers_mod, name, None)
    if cls is None or not isinstance(cls, type):
        raise ValueError(f"Unknown layer: {name}; pass it in custom_objects")
    config = dict(spec["config"])
    if issubclass(cls, Model):
        return cls.from_config(config, custom_objects)
    if hasattr(cls, "_from_config_with"):
        return cls._from_config_with(config, custom_objects)
    return cls(**config)


def model_from_config(config, custom_objects=None):
    """A model from {"class_name", "config"} (tf.keras.models.model_from_config)."""
    return deserialize_layer(config, custom_objects)


def model_from_json(json_string, custom_objects=None):
    """A model from `to_json()`'s string (tf.keras.models.model_from_json); new weights (load them
    with `load_weights`)."""
    import json
    return deserialize_layer(json.loads(json_string), custom_objects)


def load_model(filepath, custom_objects=None, compile=True):  # noqa: A002
    """A model saved by `Model.save` (a directory): rebuilt from model.json in the default
    graph, its weights restored, and compiled as it was when its training config allows
    (tf.keras.models.load_model). An `.h5` file needs h5py."""
    import json
    import os
    if _is_h5(filepath):
        _need_h5py(filepath)
        raise NotImplementedError(f"load_model('{filepath}'): af.keras reads the directories Model.save writes, "
                                  f"not HDF5")
    path = os.path.join(filepath, "model.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_model: no model.json in '{filepath}' (a directory written by Model.save)")
    with open(path) as f:
        doc = json.load(f)
    model = deserialize_layer(doc, custom_objects)
    model.load_weights(os.path.join(filepath, "weights"))
    tc = doc.get("training_config")
    if compile and tc and tc.get("optimizer_config"):
        model.compile(optimizers.deserialize(tc["optimizer_config"], custom_objects), loss=tc["loss"],
                      metrics=tc.get("metrics"), loss_weights=tc.get("loss_weights"))
    return model
