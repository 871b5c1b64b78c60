"""WAV audio ops (TF's DecodeWav and EncodeWav, tf.audio): 16-bit PCM WAV <-> float32 samples in
[-1, 1), shaped [samples, channels]. Not differentiable."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["decode_wav", "encode_wav"]


def _infer_decode_wav(inputs, attrs):
    (contents,) = inputs
    if not contents.dtype.is_string:
        raise InferenceError(f"DecodeWav: contents must be a string, got {contents.dtype.name} ('{contents.name}')")
    if contents.shape.ndims not in (None, 0):
        raise InferenceError(f"DecodeWav: contents must be a scalar, got shape {contents.shape} ('{contents.name}')")
    samples, channels = attrs.get("desired_samples", -1), attrs.get("desired_channels", -1)
    return [(dtypes.float32, TensorShape([None if samples == -1 else samples, None if channels == -1 else channels])),
            (dtypes.int32, TensorShape([]))]


def _infer_encode_wav(inputs, attrs):
    audio, rate = inputs
    if audio.dtype != dtypes.float32:
        raise InferenceError(f"EncodeWav: audio must be float32, got {audio.dtype.name} ('{audio.name}')")
    if audio.shape.ndims not in (None, 2):
        raise InferenceError(f"EncodeWav: audio must be 2-dimensional [samples, channels], but '{audio.name}' has "
                             f"shape {audio.shape}")
    if rate.dtype != dtypes.int32 or rate.shape.ndims not in (None, 0):
        raise InferenceError(f"EncodeWav: sample_rate must be an int32 scalar, got {rate.dtype.name} of shape "
                             f"{rate.shape} ('{rate.name}')")
    return [(dtypes.string, TensorShape([]))]


DecodeWav = define_op("DecodeWav", _infer_decode_wav)
EncodeWav = define_op("EncodeWav", _infer_encode_wav)


def decode_wav(contents, desired_channels=-1, desired_samples=-1, name=None):
    """Decodes a 16-bit PCM WAV string (tf.audio.decode_wav): returns (audio float32 [samples,
    channels] in [-1, 1), sample_rate int32). `desired_samples` pads with zeros or truncates;
    `desired_channels` keeps the first channels, or repeats the last one."""
    with name_scope(name, "DecodeWav", [contents]) as scope:
        contents = convert_to_tensor(contents, dtype=dtypes.string, name="contents")
        audio, rate = DecodeWav(contents, desired_channels=int(desired_channels),
                                desired_samples=int(desired_samples), name=scope)
        return audio, rate


def encode_wav(audio, sample_rate, name=None):
    """Encodes float32 `audio` [samples, channels] as a 16-bit PCM WAV string (tf.audio.encode_wav):
    each sample clipped to [-1, 1], times 32768, rounded half away from zero and clamped to int16."""
    with name_scope(name, "EncodeWav", [audio, sample_rate]) as scope:
        audio = convert_to_tensor(audio, dtype=dtypes.float32, name="audio")
        sample_rate = convert_to_tensor(sample_rate, dtype=dtypes.int32, name="sample_rate")
        return EncodeWav(audio, sample_rate, name=scope)
