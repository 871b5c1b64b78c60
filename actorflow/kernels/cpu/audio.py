"""WAV kernels (graph/ops/audio_ops.py): TF's wav_io, 16-bit little-endian PCM only."""
from __future__ import annotations

import struct

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")      # RIFF, fmt (16 bytes), data headers: 44 bytes


def encode_wav(audio: np.ndarray, sample_rate) -> bytes:
    """`audio` float32 [frames, channels] as a 16-bit PCM WAV file's bytes (TF's EncodeAudioAsS16LEWav)."""
    if audio.ndim != 2:
        raise InvalidArgumentError(f"EncodeWav: audio must be 2-dimensional, got shape {list(audio.shape)}")
    rate = int(np.asarray(sample_rate))
    frames, channels = audio.shape
    if not 0 < rate < 2 ** 32:
        raise InvalidArgumentError(f"EncodeWav: sample_rate must be in (0, 2^32), got: {rate}")
    if not 0 < channels < 2 ** 16:
        raise InvalidArgumentError(f"EncodeWav: num_channels must be in (0, 2^16), got: {channels}")
    data_size = frames * channels * 2
    if _HEADER.size + data_size > 2 ** 32 - 1:
        raise InvalidArgumentError("EncodeWav: Provided channels and frames cannot be encoded as a WAV.")
    # roundf(x * 32768): the product in float32, rounded half away from zero (exactly, in float64),
    # then clamped to int16.
    scaled = (np.asarray(audio, np.float32) * np.float32(32768.0)).astype(np.float64)
    samples = np.clip(np.trunc(scaled + np.copysign(0.5, scaled)), -32768, 32767).astype("<i2")
    header = _HEADER.pack(b"RIFF", _HEADER.size + data_size - 8, b"WAVE", b"fmt ", 16, 1, channels, rate,
                          rate * 2 * channels, 2 * channels, 16, b"data", data_size)
    if frames == 0:
        # TF 2.21 writes 40 bytes here: the header without the data chunk's size field.
        return header[:40]
    return header + samples.tobytes()


def decode_wav(data: bytes):
    """(float32 samples [frames * channels], frames, channels, sample_rate) of a 16-bit PCM WAV
    (TF's DecodeLin16WaveAsFloatVector, with its checks and messages)."""
    off = 0

    def take(n):
        nonlocal off
        if off + n > len(data):
            raise InvalidArgumentError("DecodeWav: Data too short when trying to read string")
        out = data[off:off + n]
        off += n
        return out

    def expect(text):
        found = take(len(text))
        if found != text:
            raise InvalidArgumentError(f"DecodeWav: Header mismatch: Expected {text.decode()} but found "
                                       f"{found.decode('latin-1')}")

    expect(b"RIFF")
    take(4)
    expect(b"WAVE")
    expect(b"fmt ")
    (fmt_size,) = struct.unpack("<I", take(4))
    if fmt_size not in (16, 18):
        raise InvalidArgumentError(f"DecodeWav: Bad file size for WAV: Expected 16 or 18, but got{fmt_size}")
    audio_format, channels, rate, bytes_per_second, bytes_per_sample, bits = struct.unpack("<HHIIHH", take(16))
    if audio_format != 1:
        raise InvalidArgumentError(f"DecodeWav: Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}")
    if channels < 1:
        raise InvalidArgumentError(f"DecodeWav: Bad number of channels for WAV: Expected at least 1, but got "
                                   f"{channels}")
    if bits != 16:
        raise InvalidArgumentError(f"DecodeWav: Can only read 16-bit WAV files, but received {bits}")
    expected = (bits * channels + 7) // 8
    if bytes_per_sample != expected:
        raise InvalidArgumentError(f"DecodeWav: Bad bytes per sample in WAV header: Expected {expected} but got "
                                   f"{bytes_per_sample}")
    if bytes_per_second != bytes_per_sample * rate:
        raise InvalidArgumentError(f"DecodeWav: Bad bytes per second in WAV header: Expected "
                                   f"{bytes_per_sample * rate} but got {bytes_per_second} (sample_rate={rate}, "
                                   f"bytes_per_sample={bytes_per_sample})")
    if fmt_size == 18:
        off += 2
    values, frames = None, 0
    while off < len(data):
        chunk_id = take(4)
        (size,) = struct.unpack("<I", take(4))
        if size > 2 ** 31 - 1:
            raise InvalidArgumentError(f"DecodeWav: WAV data chunk '{chunk_id.decode('latin-1')}' is too large: "
                                       f"{size} bytes, but the limit is {2 ** 31 - 1}")
        if chunk_id == b"data":
            if values is not None:
                raise InvalidArgumentError("DecodeWav: More than one data chunk found in WAV")
            frames = size // bytes_per_sample
            raw = take(2 * frames * channels)
            values = np.frombuffer(raw, "<i2").astype(np.float32) * np.float32(1.0 / 32768)
        else:
            off += size
    if values is None:
        raise InvalidArgumentError("DecodeWav: No data chunk found in WAV")
    return values, frames, channels, rate


@register_kernel("DecodeWav", "CPU")
def decode_wav_kernel(attrs):
    want_ch, want_n = attrs.get("desired_channels", -1), attrs.get("desired_samples", -1)

    def run(contents):
        values, frames, channels, rate = decode_wav(bytes(np.asarray(contents, dtype=object).item()))
        if rate > 2 ** 31 - 1:
            raise InvalidArgumentError(f"DecodeWav: sample_rate {rate} does not fit in int32")
        audio = values.reshape(frames, channels)
        n = frames if want_n == -1 else want_n
        c = channels if want_ch == -1 else want_ch
        out = np.zeros((n, c), np.float32)
        rows = min(n, frames)
        cols = np.minimum(np.arange(c), channels - 1)
        out[:rows] = audio[:rows][:, cols]
        return out, np.asarray(rate, np.int32)
    return run


@register_kernel("EncodeWav", "CPU")
def encode_wav_kernel(attrs):
    def run(audio, sample_rate):
        out = np.empty((), dtype=object)
        out[()] = encode_wav(audio, sample_rate)
        return out
    return run
