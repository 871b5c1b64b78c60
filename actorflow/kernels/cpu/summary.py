"""CPU kernels of the summary ops: each returns one serialized `Summary` protobuf as a scalar string
(a 0-d object array holding `bytes`), built with TensorBoard's own protobuf classes.

The encodings follow TF's kernels (core/kernels/summary_op.cc, summary_image_op.cc,
summary_audio_op.cc, lib/histogram/histogram.cc) so that TensorBoard shows what it shows for TF:
the same histogram buckets, the same image normalization, 16-bit PCM WAV audio.
"""
from __future__ import annotations

import io
import math
import sys
import wave

import numpy as np

from actorflow import errors
from actorflow.kernels.registry import register_kernel
from actorflow.protos import require

__all__ = ["default_bucket_limits", "histogram_proto"]

_DBL_MAX = sys.float_info.max


def _pb():
    return require("tensorboard.compat.proto.summary_pb2")


def _as_string_scalar(data: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = data
    return out


# -- histograms ----------------------------------------------------------------------------------------

def _make_limits() -> np.ndarray:
    # TF's InitDefaultBucketsInner: 1e-12 grown by 1.1 (in doubles, step by step) up to 1e20,
    # mirrored for negatives, with 0 and ±DBL_MAX.
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(_DBL_MAX)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos, dtype=np.float64)


_LIMITS = _make_limits()


def default_bucket_limits() -> np.ndarray:
    """The right edges of TF's default histogram buckets (tensorflow::histogram::Histogram())."""
    return _LIMITS.copy()


def histogram_proto(values: np.ndarray):
    """A HistogramProto of `values` (as doubles) with TF's default buckets, empty runs collapsed as
    TF's Histogram::EncodeToProto(preserve_zero_buckets=false) does."""
    pb = _pb()
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    counts = np.bincount(np.searchsorted(_LIMITS, x, side="right"), minlength=len(_LIMITS))
    h = pb.HistogramProto()
    if x.size:
        h.min, h.max = float(x.min()), float(x.max())
    else:
        h.min, h.max = _LIMITS[-1], -_LIMITS[-1]     # TF's empty histogram: min=DBL_MAX, max=-DBL_MAX
    h.num = float(x.size)
    h.sum = float(x.sum())
    h.sum_squares = float(np.dot(x, x))
    limits, buckets = [], []
    i, n = 0, len(counts)
    while i < n:
        end, count = _LIMITS[i], counts[i]
        i += 1
        if count <= 0:
            while i < n and counts[i] <= 0:
                end, count = _LIMITS[i], counts[i]
                i += 1
        limits.append(float(end))
        buckets.append(float(count))
    if not limits:
        limits, buckets = [_DBL_MAX], [0.0]
    h.bucket_limit.extend(limits)
    h.bucket.extend(buckets)
    return h


def _cheap(*args):
    return sum(int(np.size(a)) for a in args)


@register_kernel("ScalarSummary", "CPU", cost=_cheap)
def scalar_summary(attrs):
    """ScalarSummary: one `simple_value` (the value as a float) under the op's tag."""
    tag = attrs["tag"]

    def fn(x):
        x = np.asarray(x)
        if x.ndim != 0:
            raise errors.InvalidArgumentError(None, None, f"ScalarSummary '{tag}': tags and values are not the same "
                                                          f"shape: [] != {list(x.shape)} (tag '{tag}')")
        pb = _pb()
        s = pb.Summary(value=[pb.Summary.Value(tag=tag, simple_value=float(x))])
        return _as_string_scalar(s.SerializeToString())
    return fn


@register_kernel("HistogramSummary", "CPU", cost=_cheap)
def histogram_summary(attrs):
    """HistogramSummary: a HistogramProto of all values with TF's default buckets."""
    tag = attrs["tag"]

    def fn(x):
        x = np.asarray(x, dtype=np.float64)
        if not np.isfinite(x).all():
            what = "Nan" if np.isnan(x).any() else "Infinity"
            raise errors.InvalidArgumentError(None, None, f"{what} in summary histogram for: {tag}")
        pb = _pb()
        s = pb.Summary(value=[pb.Summary.Value(tag=tag, histo=histogram_proto(x))])
        return _as_string_scalar(s.SerializeToString())
    return fn


# -- images --------------------------------------------------------------------------------------------

def _normalize_float_image(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's NormalizeFloatImage for one [h, w, c] image: scale into uint8, non-finite pixels bad_color."""
    dt = np.float64 if img.dtype == np.float64 else np.float32
    v = img.astype(dt, copy=False)
    finite = np.isfinite(v).all(axis=-1)
    good = v[finite]
    lo = float(good.min()) if good.size else math.inf
    hi = float(good.max()) if good.size else -math.inf
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale, offset = (0.0 if max_val < 1e-6 else 127.0 / max_val), 128.0
    else:
        scale, offset = (0.0 if hi < 1e-6 else 255.0 / hi), 0.0
    out = np.empty(v.shape, dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        # The cast truncates toward zero, as Eigen's cast<uint8> does.
        out[...] = np.where(finite[..., None], v * dt(scale) + dt(offset), 0).astype(np.uint8)
    out[~finite] = bad_color[: v.shape[-1]]
    return out


def _png(img: np.ndarray) -> bytes:
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("af.summary.image needs Pillow to encode PNG: pip install 'actorflow[summary]'") from e
    buf = io.BytesIO()
    # One channel is a grayscale PNG, three RGB, four RGBA, as TF's png::WriteImageToBuffer.
    Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img).save(buf, format="PNG")
    return buf.getvalue()


@register_kernel("ImageSummary", "CPU", cost=_cheap)
def image_summary(attrs):
    """ImageSummary: up to max_images PNG images; tags `tag/image` (max_images=1) or `tag/image/i`."""
    tag = attrs["tag"]
    max_images = int(attrs["max_images"])
    bad_color = np.asarray(attrs.get("bad_color", (255, 0, 0, 255)), dtype=np.uint8)

    def fn(x):
        x = np.asarray(x)
        if x.ndim != 4 or x.shape[3] not in (1, 3, 4):
            raise errors.InvalidArgumentError(None, None, f"ImageSummary '{tag}': Tensor must be 4-D with last dim "
                                                          f"1, 3, or 4, not {list(x.shape)}")
        n, h, w, c = x.shape
        if h == 0 or w == 0:
            raise errors.InvalidArgumentError(None, None, f"ImageSummary '{tag}': the images are empty "
                                                          f"(shape {list(x.shape)})")
        pb = _pb()
        s = pb.Summary()
        for i in range(min(n, max_images)):
            img = x[i] if x.dtype == np.uint8 else _normalize_float_image(x[i], bad_color)
            v = s.value.add()
            v.tag = f"{tag}/image/{i}" if max_images > 1 else f"{tag}/image"
            v.image.height, v.image.width, v.image.colorspace = h, w, c
            v.image.encoded_image_string = _png(np.ascontiguousarray(img))
        return _as_string_scalar(s.SerializeToString())
    return fn


# -- audio ---------------------------------------------------------------------------------------------

def _wav(samples: np.ndarray, sample_rate: int) -> bytes:
    # TF's wav::EncodeAudioAsS16LEWav: round(x * 32768), clamped to the int16 range.
    pcm = np.clip(np.round(samples.astype(np.float32) * np.float32(32768.0)), -32768, 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


@register_kernel("AudioSummaryV2", "CPU", cost=_cheap, host_inputs=(1,))
def audio_summary(attrs):
    """AudioSummaryV2: up to max_outputs clips as 16-bit PCM WAV; tags `tag/audio` or `tag/audio/i`."""
    tag = attrs["tag"]
    max_outputs = int(attrs["max_outputs"])

    def fn(x, rate):
        x = np.asarray(x)
        rate = np.asarray(rate)
        if rate.ndim != 0:
            raise errors.InvalidArgumentError(None, None, f"AudioSummaryV2 '{tag}': sample_rate must be a scalar, "
                                                          f"got shape {list(rate.shape)}")
        if x.ndim not in (2, 3):
            raise errors.InvalidArgumentError(None, None, f"AudioSummaryV2 '{tag}': Tensor must be 3-D or 2-D, "
                                                          f"got: {list(x.shape)}")
        sr = float(rate)
        if not sr > 0:
            raise errors.InvalidArgumentError(None, None, f"AudioSummaryV2 '{tag}': sample_rate must be positive, "
                                                          f"got {sr}")
        if x.ndim == 2:
            x = x[:, :, None]
        n, frames, channels = x.shape
        pb = _pb()
        s = pb.Summary()
        for i in range(min(n, max_outputs)):
            v = s.value.add()
            v.tag = f"{tag}/audio/{i}" if max_outputs > 1 else f"{tag}/audio"
            v.audio.sample_rate = sr
            v.audio.num_channels = channels
            v.audio.length_frames = frames
            v.audio.content_type = "audio/wav"
            v.audio.encoded_audio_string = _wav(x[i], int(sr))
        return _as_string_scalar(s.SerializeToString())
    return fn


# -- tensors and merging --------------------------------------------------------------------------------

@register_kernel("TensorSummaryV2", "CPU", cost=_cheap)
def tensor_summary(attrs):
    """TensorSummaryV2: the whole tensor as a TensorProto, with the op's summary metadata."""
    tag = attrs["tag"]
    meta = bytes(attrs.get("serialized_summary_metadata", b""))

    def fn(x):
        pb = _pb()
        tensor_util = require("tensorboard.util.tensor_util")
        v = pb.Summary.Value(tag=tag)
        v.metadata.ParseFromString(meta)
        v.tensor.CopyFrom(tensor_util.make_tensor_proto(np.asarray(x)))
        return _as_string_scalar(pb.Summary(value=[v]).SerializeToString())
    return fn


def _strings(x, op):
    a = np.asarray(x)
    if a.dtype != object:
        raise errors.InvalidArgumentError(None, None, f"{op}: expected serialized summaries (strings), got {a.dtype}")
    return a.reshape(-1)


@register_kernel("MergeSummary", "CPU", cost=_cheap)
def merge_summary(attrs):
    """MergeSummary: the values of every input summary in one Summary; a repeated tag is an error."""
    def fn(*inputs):
        pb = _pb()
        from google.protobuf.message import DecodeError
        out = pb.Summary()
        tags = set()
        for x in inputs:
            for s_in in _strings(x, "MergeSummary"):
                summ = pb.Summary()
                try:
                    summ.ParseFromString(bytes(s_in))
                except DecodeError:
                    raise errors.InvalidArgumentError(None, None, "MergeSummary: Could not parse one of the summary "
                                                                  "inputs") from None
                for v in summ.value:
                    if v.tag and v.tag in tags:
                        raise errors.InvalidArgumentError(None, None, f"MergeSummary: Duplicate tag {v.tag} found in "
                                                                      f"summary inputs")
                    tags.add(v.tag)
                    out.value.add().CopyFrom(v)
        return _as_string_scalar(out.SerializeToString())
    return fn
