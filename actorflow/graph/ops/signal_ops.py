"""Framing, windows and the short-time Fourier transform (tf.signal.frame, hann_window,
hamming_window, overlap_and_add, stft, inverse_stft), built from existing ops: a gather of frame
indices, a pad, an RFFT. Their gradients are those of the ops they are made of.

Differs from TF: the framed axis's length, frame_length and frame_step must be known when the graph is
built (TF also accepts them at run time).
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.fft_ops import irfft, rfft
from actorflow.graph.ops.infer import constant_value

__all__ = ["frame", "hann_window", "hamming_window", "overlap_and_add", "stft", "inverse_stft",
           "inverse_stft_window_fn"]


def _static_int(v, what, op):
    if isinstance(v, (int, np.integer)):
        return int(v)
    c = constant_value(convert_to_tensor(v))
    if c is None:
        raise ValueError(f"{op}: {what} must be known when the graph is built")
    return int(c)


def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """Slices `signal` along `axis` into frames of `frame_length` every `frame_step` (tf.signal.frame):
    that axis becomes [frames, frame_length]; `pad_end` pads the end with `pad_value` so that every
    sample starts a frame's worth of the hop grid."""
    with name_scope(name, "frame", [signal]):
        x = convert_to_tensor(signal)
        fl = _static_int(frame_length, "frame_length", "frame")
        fs = _static_int(frame_step, "frame_step", "frame")
        rank = x.shape.ndims
        if rank is None or rank == 0:
            raise ValueError(f"frame: signal '{x.name}' must have a known rank of at least 1, got {x.shape}")
        ax = axis + rank if axis < 0 else axis
        n = x.shape.dims[ax]
        if n is None:
            raise ValueError(f"frame: the length of axis {axis} of '{x.name}' must be known, got {x.shape}")
        if pad_end:
            count = -(-n // fs)
            need = max((count - 1) * fs + fl - n, 0)
            if need:
                pads = [[0, 0]] * rank
                pads[ax] = [0, need]
                x = array_ops.pad(x, pads, constant_values=pad_value)
        else:
            count = max(0, 1 + (n - fl) // fs) if n >= fl else 0
        idx = (np.arange(count)[:, None] * fs + np.arange(fl)[None, :]).astype(np.int32).reshape(count, fl)
        return array_ops.gather(x, constant(idx), axis=ax)


def _window(a, b, window_length, periodic, dtype, name):
    length = _static_int(window_length, "window_length", name)
    dt = dtypes.as_dtype(dtype)
    if length == 1:
        return constant(np.ones(1), dtype=dt, name=name)
    denom = length - 1 + (1 if periodic and length % 2 == 0 else 0)     # TF's: odd lengths are symmetric
    n = np.arange(length)
    return constant(a - b * np.cos(2 * np.pi * n / denom), dtype=dt, name=name)


def hann_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """0.5 - 0.5 cos(2 pi n / N) (tf.signal.hann_window); N is one less than the length, or the length
    itself when `periodic` and the length is even (TF's rule)."""
    return _window(0.5, 0.5, window_length, periodic, dtype, name or "hann_window")


def hamming_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """0.54 - 0.46 cos(2 pi n / N) (tf.signal.hamming_window)."""
    return _window(0.54, 0.46, window_length, periodic, dtype, name or "hamming_window")


def overlap_and_add(signal, frame_step, name=None):
    """Sums frames [..., frames, frame_length] placed every `frame_step` samples (tf.signal.overlap_and_add):
    a product with a 0/1 placement matrix, so its gradient is the framing."""
    with name_scope(name, "overlap_and_add", [signal]):
        x = convert_to_tensor(signal)
        fs = _static_int(frame_step, "frame_step", "overlap_and_add")
        if x.shape.ndims is None or x.shape.ndims < 2 or not all(d is not None for d in x.shape.dims[-2:]):
            raise ValueError(f"overlap_and_add: '{x.name}' needs known [frames, frame_length] innermost, got {x.shape}")
        count, fl = x.shape.dims[-2:]
        out_len = (count - 1) * fs + fl if count else 0
        place = np.zeros((count * fl, out_len))
        for f in range(count):
            place[f * fl + np.arange(fl), f * fs + np.arange(fl)] = 1.0
        lead = array_ops.shape(x)[:-2]
        flat = array_ops.reshape(x, array_ops.concat([[-1], [count * fl]], 0))
        out = math_ops.matmul(flat, constant(place, dtype=x.dtype))
        return array_ops.reshape(out, array_ops.concat([lead, [out_len]], 0))


def _default_fft_length(frame_length):
    return int(2 ** int(np.ceil(np.log2(frame_length))))


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window, pad_end=False, name=None):
    """The short-time Fourier transform (tf.signal.stft): frames of the innermost axis, windowed,
    each RFFT'd to fft_length // 2 + 1 bins (fft_length defaults to the next power of two)."""
    with name_scope(name, "stft", [signals]):
        x = convert_to_tensor(signals)
        fl = _static_int(frame_length, "frame_length", "stft")
        n = _default_fft_length(fl) if fft_length is None else _static_int(fft_length, "fft_length", "stft")
        framed = frame(x, fl, frame_step, pad_end=pad_end)
        if window_fn is not None:
            framed = math_ops.multiply(framed, window_fn(fl, dtype=x.dtype))
        return rfft(framed, [n])


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window, name=None):
    """The inverse of `stft` by overlap-add of the windowed IRFFT frames (tf.signal.inverse_stft);
    pass `inverse_stft_window_fn`'s window as TF does for a perfect reconstruction."""
    with name_scope(name, "inverse_stft", [stfts]):
        s = convert_to_tensor(stfts)
        fl = _static_int(frame_length, "frame_length", "inverse_stft")
        n = _default_fft_length(fl) if fft_length is None else _static_int(fft_length, "fft_length", "inverse_stft")
        frames = irfft(s, [n])
        frames = frames[..., :fl]
        if fl > n:
            rank = frames.shape.ndims
            frames = array_ops.pad(frames, [[0, 0]] * (rank - 1) + [[0, fl - n]])
        if window_fn is not None:
            frames = math_ops.multiply(frames, window_fn(fl, dtype=frames.dtype))
        return overlap_and_add(frames, frame_step)


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """A window_fn for `inverse_stft` that undoes `forward_window_fn`'s overlapped squares
    (tf.signal.inverse_stft_window_fn): the forward window over the sum of its squares at each hop phase."""
    fs = _static_int(frame_step, "frame_step", "inverse_stft_window_fn")

    def window(frame_length, dtype):
        with name_scope(name, "inverse_stft_window_fn"):
            fl = _static_int(frame_length, "frame_length", "inverse_stft_window_fn")
            fwd = forward_window_fn(fl, dtype=dtype)
            overlaps = -(-fl // fs)
            denom = array_ops.pad(math_ops.square(fwd), [[0, overlaps * fs - fl]])
            denom = math_ops.reduce_sum(array_ops.reshape(denom, [overlaps, fs]), 0, keepdims=True)
            denom = array_ops.reshape(array_ops.tile(denom, [overlaps, 1]), [overlaps * fs])
            return math_ops.divide(fwd, denom[:fl])
    return window
