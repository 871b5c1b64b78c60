"""CPU kernels of the discrete Fourier transforms (graph/ops/fft_ops.py), through numpy.fft.

numpy computes in complex128/float64; results are cast back to the op's dtype (complex64 in,
complex64 out, as TF). numpy's `s=` crops and zero-pads the input to `fft_length` as TF does.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel

_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_CPLX = {v: k for k, v in _REAL.items()}


def _axes(rank):
    return tuple(range(-rank, 0))


def _complex_kernel(fn, rank):
    def factory(attrs):
        return lambda x: fn(x, axes=_axes(rank)).astype(x.dtype, copy=False)
    return factory


def _real_kernel(fn, rank, inverse):
    def factory(attrs):
        def run(x, n):
            if rank > x.ndim:
                raise ValueError(f"input of rank {x.ndim} for a {rank}-D transform")
            s = [int(v) for v in np.asarray(n).reshape(-1)]
            if len(s) != rank:
                raise ValueError(f"fft_length must have {rank} entries, got {s}")
            out = _REAL[x.dtype] if inverse else _CPLX[x.dtype]
            if inverse and min(s) == 0:
                return np.zeros(x.shape[:-rank] + tuple(s), out)
            return fn(x, s=s, axes=_axes(rank)).astype(out, copy=False)
        return run
    return factory


def _fit(a, shape, rank):
    """`a` cropped or zero-padded on its innermost `rank` axes to `shape`'s."""
    want = tuple(int(d) for d in np.asarray(shape).reshape(-1))[-rank:]
    have = a.shape[-rank:]
    if want == have:
        return a
    out = np.zeros(a.shape[:-rank] + want, a.dtype)
    common = tuple(slice(0, min(w, h)) for w, h in zip(want, have))
    out[(Ellipsis,) + common] = a[(Ellipsis,) + common]
    return out


@register_kernel("RFFTGrad", "CPU")
def rfft_grad(attrs):
    """The gradient of RFFT*: the real part of N * IFFT of the half spectrum, zeros elsewhere."""
    rank = int(attrs["rank"])

    def run(g, x_shape, n):
        s = [int(v) for v in np.asarray(n).reshape(-1)]
        full = np.zeros(g.shape[:-1] + (s[-1],), np.complex128)
        full[..., :g.shape[-1]] = g
        out = np.real(np.fft.ifftn(full, s=s, axes=_axes(rank))) * float(np.prod(s))
        return _fit(out.astype(_REAL[g.dtype]), x_shape, rank)
    return run


@register_kernel("IRFFTGrad", "CPU")
def irfft_grad(attrs):
    """The gradient of IRFFT*: RFFT of the gradient, interior frequencies counted twice, over N."""
    rank = int(attrs["rank"])

    def run(g, x_shape, n):
        s = [int(v) for v in np.asarray(n).reshape(-1)]
        spec = np.fft.rfftn(g, s=s, axes=_axes(rank))
        mask = np.full(spec.shape[-1], 2.0)
        mask[0] = 1.0
        if s[-1] % 2 == 0:
            mask[-1] = 1.0
        spec *= mask / float(np.prod(s))
        return _fit(spec.astype(_CPLX[g.dtype]), x_shape, rank)
    return run


for _r, _sfx in ((1, ""), (2, "2D"), (3, "3D")):
    register_kernel(f"FFT{_sfx}", "CPU")(_complex_kernel(np.fft.fftn, _r))
    register_kernel(f"IFFT{_sfx}", "CPU")(_complex_kernel(np.fft.ifftn, _r))
    register_kernel(f"RFFT{_sfx}", "CPU")(_real_kernel(np.fft.rfftn, _r, False))
    register_kernel(f"IRFFT{_sfx}", "CPU")(_real_kernel(np.fft.irfftn, _r, True))
