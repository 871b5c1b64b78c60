"""Summary ops (tf.compat.v1.summary): graph ops whose CPU kernels emit serialized `Summary` protos.

Each op's output is a scalar `af.string` tensor holding one serialized `tensorboard.Summary`
protobuf (fetched as `bytes`, as in TF), which `af.summary.FileWriter.add_summary` writes to an
event file. As in TF 1.x the op is named after its summary scope, so the tag equals the op name
(`loss`, `loss_1`, `train/loss`), and the op is added to `GraphKeys.SUMMARIES` unless
`collections=` says otherwise.

Where actorflow differs: TF passes the tag of ScalarSummary, HistogramSummary, ImageSummary and
AudioSummaryV2 as a string input tensor; here it is the op's `tag` attribute (the TF-1.x wrappers
always pass a constant), so the ops need no string constant in the graph.
"""
from __future__ import annotations

import logging
import re

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, add_to_collection, convert_to_tensor, get_collection
from actorflow.graph.graph import name_scope as _name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["scalar", "histogram", "image", "audio", "text", "tensor_summary", "merge", "merge_all",
           "ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummaryV2",
           "TensorSummaryV2", "MergeSummary"]

log = logging.getLogger(__name__)

_SCALAR_STRING = [(dtypes.string, TensorShape([]))]
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _check_tag(attrs, op):
    tag = attrs.get("tag")
    if not isinstance(tag, str) or not tag:
        raise InferenceError(f"{op} needs a non-empty string attr 'tag', got {tag!r}")


def _infer_scalar(inputs, attrs):
    _check_tag(attrs, "ScalarSummary")
    x = inputs[0]
    if not x.dtype.is_numeric:
        raise InferenceError(f"ScalarSummary needs a real numeric tensor, got {x.dtype.name}")
    if x.shape.ndims is not None and x.shape.ndims != 0:
        raise InferenceError(f"tags and values are not the same shape: the tag '{attrs['tag']}' is a scalar, "
                             f"the values have shape {x.shape}")
    return _SCALAR_STRING


def _infer_histogram(inputs, attrs):
    _check_tag(attrs, "HistogramSummary")
    if not inputs[0].dtype.is_numeric:
        raise InferenceError(f"HistogramSummary needs a real numeric tensor, got {inputs[0].dtype.name}")
    return _SCALAR_STRING


def _infer_image(inputs, attrs):
    _check_tag(attrs, "ImageSummary")
    x = inputs[0]
    if x.dtype not in (dtypes.uint8, dtypes.float32, dtypes.float16, dtypes.float64):
        raise InferenceError(f"ImageSummary takes uint8, float16, float32 or float64 images, got {x.dtype.name}")
    if x.shape.ndims is not None:
        if x.shape.ndims != 4:
            raise InferenceError(f"Tensor must be 4-D with last dim 1, 3, or 4, not {x.shape}")
        c = x.shape.dims[3]
        if c is not None and c not in (1, 3, 4):
            raise InferenceError(f"Tensor must be 4-D with last dim 1, 3, or 4, not {x.shape}")
    m = attrs.get("max_images")
    if not isinstance(m, int) or m < 1:
        raise InferenceError(f"ImageSummary needs max_images >= 1, got {m!r}")
    return _SCALAR_STRING


def _infer_audio(inputs, attrs):
    _check_tag(attrs, "AudioSummaryV2")
    x, rate = inputs
    if not x.dtype.is_floating:
        raise InferenceError(f"AudioSummaryV2 takes float audio in [-1, 1], got {x.dtype.name}")
    if x.shape.ndims is not None and x.shape.ndims not in (2, 3):
        raise InferenceError(f"Tensor must be 3-D or 2-D, got: {x.shape}")
    if rate.shape.ndims is not None and rate.shape.ndims != 0:
        raise InferenceError(f"sample_rate must be a scalar, got shape {rate.shape}")
    m = attrs.get("max_outputs")
    if not isinstance(m, int) or m < 1:
        raise InferenceError(f"AudioSummaryV2 needs max_outputs >= 1, got {m!r}")
    return _SCALAR_STRING


def _infer_tensor(inputs, attrs):
    _check_tag(attrs, "TensorSummaryV2")
    if not isinstance(attrs.get("serialized_summary_metadata", b""), bytes):
        raise InferenceError("TensorSummaryV2 needs bytes for attr 'serialized_summary_metadata'")
    return _SCALAR_STRING


def _infer_merge(inputs, attrs):
    if not inputs:
        raise InferenceError("MergeSummary needs at least one input")
    for t in inputs:
        if t.dtype is not dtypes.string:
            raise InferenceError(f"MergeSummary inputs must be serialized summaries (string tensors), "
                                 f"got {t.dtype.name} tensor '{t.name}'")
    return _SCALAR_STRING


# Summary ops compute nothing a later step reuses, but constant folding must not evaluate them at
# build time and CSE must not merge two of them: they are stateful, as in TF.
ScalarSummary = define_op("ScalarSummary", _infer_scalar, stateful=True)
HistogramSummary = define_op("HistogramSummary", _infer_histogram, stateful=True)
ImageSummary = define_op("ImageSummary", _infer_image, stateful=True)
AudioSummaryV2 = define_op("AudioSummaryV2", _infer_audio, stateful=True)
TensorSummaryV2 = define_op("TensorSummaryV2", _infer_tensor, stateful=True)
MergeSummary = define_op("MergeSummary", _infer_merge, stateful=True)


# -- the tf.compat.v1.summary wrappers ---------------------------------------------------------------

def _clean_tag(name):
    """Replaces characters TensorBoard does not allow in tags with '_' and drops leading slashes
    (TF's summary_op_util.clean_tag)."""
    if name is not None:
        new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
        if new_name != name:
            log.info("Summary name %s is illegal; using %s instead.", name, new_name)
            name = new_name
    return name


class _SummaryScope:
    """TF's summary_op_util.summary_scope: a name scope `family/name` whose string, without its
    trailing '/', is both the op's name and the tag (prefixed by the family again, so that the
    summary shows in the family's tab)."""

    def __init__(self, name, family, values):
        self.name = _clean_tag(name)
        self.family = _clean_tag(family)
        base = self.name if self.family is None else f"{self.family}/{self.name}"
        self._cm = _name_scope(base, values=values)

    def __enter__(self):
        scope = self._cm.__enter__()
        tag = scope.rstrip("/")
        if self.family is not None:
            tag = f"{self.family}/{tag}"
        return tag, scope

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def _collect(val, collections, default_collections):
    for key in (default_collections if collections is None else collections):
        add_to_collection(key, val)


def _as_tensor(x, what):
    if isinstance(x, Tensor):
        return x
    return convert_to_tensor(x, name=what)


def scalar(name, tensor, collections=None, family=None):
    """A summary op of one scalar value (tf.compat.v1.summary.scalar): fetched, a serialized
    `Summary` with one `simple_value` under the tag `name` (with its name scope and family).

    As in TF, the op goes to `GraphKeys.SUMMARIES` unless `collections` lists others, and a
    non-scalar tensor is an error (here at build time when its shape is known).
    """
    with _SummaryScope(name, family, [tensor] if isinstance(tensor, Tensor) else None) as (tag, scope):
        val = ScalarSummary(_as_tensor(tensor, "value"), tag=tag, name=scope)
    _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def histogram(name, values, collections=None, family=None):
    """A histogram summary of `values` (tf.compat.v1.summary.histogram), bucketed with TF's default
    exponential bucket limits (1e-12 * 1.1**k and their negatives, then ±DBL_MAX) so that TensorBoard
    shows the same histogram as for TF. Non-finite values fail the step with InvalidArgumentError."""
    with _SummaryScope(name, family, [values] if isinstance(values, Tensor) else None) as (tag, scope):
        val = HistogramSummary(_as_tensor(values, "values"), tag=tag, name=scope)
    _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """A summary of up to `max_outputs` images (tf.compat.v1.summary.image) from a 4-D
    `[batch, height, width, channels]` tensor with 1, 3 or 4 channels, PNG-encoded. uint8 images are
    written as they are; float images are rescaled per image as TF does (non-negative: the largest
    value becomes 255; else centred on 128 and scaled by 127 / max |value|), non-finite pixels red.
    Tags are `name/image` for max_outputs=1, else `name/image/0`, `name/image/1`, ..."""
    with _SummaryScope(name, family, [tensor] if isinstance(tensor, Tensor) else None) as (tag, scope):
        val = ImageSummary(_as_tensor(tensor, "tensor"), tag=tag, max_images=int(max_outputs), name=scope)
    _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """A summary of up to `max_outputs` audio clips (tf.compat.v1.summary.audio) from a float tensor
    `[batch, frames, channels]` or `[batch, frames]` in [-1, 1], encoded as 16-bit PCM WAV at
    `sample_rate` Hz. Tags are `name/audio` for max_outputs=1, else `name/audio/0`, ..."""
    with _SummaryScope(name, family, [tensor] if isinstance(tensor, Tensor) else None) as (tag, scope):
        rate = sample_rate if isinstance(sample_rate, Tensor) else convert_to_tensor(sample_rate, dtypes.float32,
                                                                                     name="sample_rate")
        val = AudioSummaryV2(_as_tensor(tensor, "tensor"), rate, tag=tag, max_outputs=int(max_outputs), name=scope)
    _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def _metadata_bytes(summary_metadata, display_name=None, summary_description=None) -> bytes:
    if summary_metadata is None:
        from actorflow.protos import summary_pb2
        summary_metadata = summary_pb2.SummaryMetadata()
        if display_name is not None:
            summary_metadata.display_name = display_name
        if summary_description is not None:
            summary_metadata.summary_description = summary_description
    if isinstance(summary_metadata, bytes):
        return summary_metadata
    if not hasattr(summary_metadata, "SerializeToString"):
        raise TypeError(f"summary_metadata must be a SummaryMetadata proto or its bytes, got "
                        f"{type(summary_metadata).__name__}")
    return summary_metadata.SerializeToString()


def tensor_summary(name, tensor, summary_description=None, collections=None, summary_metadata=None,
                   family=None, display_name=None):
    """A summary holding a whole tensor as a TensorProto (tf.compat.v1.summary.tensor_summary),
    with `summary_metadata` (a SummaryMetadata proto) telling TensorBoard which plugin shows it."""
    meta = _metadata_bytes(summary_metadata, display_name, summary_description)
    with _SummaryScope(name, family, [tensor] if isinstance(tensor, Tensor) else None) as (tag, scope):
        val = TensorSummaryV2(_as_tensor(tensor, "tensor"), tag=tag, serialized_summary_metadata=meta, name=scope)
    _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


def text(name, tensor, collections=None):
    """A text summary (tf.compat.v1.summary.text): a string tensor (scalar, vector or matrix) shown
    as markdown by TensorBoard's text plugin. A non-string tensor is a ValueError, as in TF."""
    t = _as_tensor(tensor, "tensor")
    if t.dtype is not dtypes.string:
        raise ValueError(f"Expected tensor {t.name} to have dtype string, got {t.dtype.name}")
    from actorflow.protos import summary_pb2
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name=name, tensor=t, summary_metadata=meta, collections=collections)


def merge(inputs, collections=None, name=None):
    """Merges serialized summaries into one (tf.compat.v1.summary.merge); two values with the same
    tag fail the step with InvalidArgumentError, as in TF. Not added to any collection unless
    `collections` names some."""
    name = _clean_tag(name)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    # As TF: the op sits in a scope of its own, `Merge/MergeSummary` (or `name/name`).
    with _name_scope(name, default_name="Merge", values=tensors or None):
        val = MergeSummary(*[_as_tensor(x, "input") for x in inputs], name=name)
    _collect(val, collections, [])
    return val


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """Merges every summary of collection `key` (filtered by the `scope` regex), or returns None when
    there is none (tf.compat.v1.summary.merge_all)."""
    summary_ops = get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)

