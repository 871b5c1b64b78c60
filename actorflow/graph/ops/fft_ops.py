"""Discrete Fourier transforms over the innermost 1, 2 or 3 dimensions (tf.signal.fft family; TF 1.x
also tf.fft, tf.ifft2d..., tf.spectral.*).

FFT/IFFT map complex to complex; RFFT maps real to the non-negative frequencies (the innermost
length becomes fft_length // 2 + 1), IRFFT back, the input cropped or zero-padded to `fft_length`
as TF does. Gradients are TF's: for a real loss, the gradient of an FFT is conj(FFT(conj(g))) (that
is N * IFFT(g)), and the real transforms' gradients are computed by their own kernels (RFFTGrad,
IRFFTGrad: the adjoint of the cropped transform, restricted to what the forward op read).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import define_op
from actorflow.graph.ops.complex_ops import _COMPLEX_OF, _REAL_OF, Conj
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.ops.math_ops import _DTypeError, _grad, _op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "rfft", "irfft", "rfft2d", "irfft2d",
           "rfft3d", "irfft3d"]


def _check_rank(x, rank, what):
    if x.shape.dims is not None and len(x.shape.dims) < rank:
        raise ValueError(f"{what} needs an input of rank at least {rank}, got shape {x.shape}")


def _complex_infer(rank):
    def infer(inputs, attrs):
        (x,) = inputs
        if not x.dtype.is_complex:
            raise _DTypeError(f"input must be complex64 or complex128, got {x.dtype.name}")
        _check_rank(x, rank, "the transform")
        return [(x.dtype, x.shape)]
    return infer


def _inner_shape(x, rank, inner):
    """x's shape with its innermost `rank` dims replaced by `inner` (None entries unknown)."""
    if x.shape.dims is None:
        return TensorShape(None)
    return TensorShape(list(x.shape.dims[:-rank]) + list(inner))


def _lengths(fft_length, rank):
    v = constant_value(fft_length)
    if v is None:
        return None
    v = [int(n) for n in list(v)]
    if len(v) != rank:
        raise ValueError(f"fft_length must have {rank} entries, got {v}")
    return v


def _real_infer(rank, inverse):
    def infer(inputs, attrs):
        x, n = inputs
        if inverse and not x.dtype.is_complex:
            raise _DTypeError(f"input must be complex64 or complex128, got {x.dtype.name}")
        if not inverse and x.dtype not in _COMPLEX_OF:
            raise _DTypeError(f"input must be float32 or float64, got {x.dtype.name}")
        if not n.dtype.is_integer:
            raise _DTypeError(f"fft_length must be int32, got {n.dtype.name}")
        _check_rank(x, rank, "the transform")
        lengths = _lengths(n, rank)
        inner = [None] * rank
        if lengths is not None:
            inner = list(lengths)
            if not inverse:
                inner[-1] = lengths[-1] // 2 + 1
        out = _REAL_OF[x.dtype] if inverse else _COMPLEX_OF[x.dtype]
        return [(out, _inner_shape(x, rank, inner))]
    return infer


_FFT, _IFFT, _RFFT, _IRFFT = {}, {}, {}, {}
for _r, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    _FFT[_r] = define_op(f"FFT{_suffix}", _complex_infer(_r))
    _IFFT[_r] = define_op(f"IFFT{_suffix}", _complex_infer(_r))
    _RFFT[_r] = define_op(f"RFFT{_suffix}", _real_infer(_r, inverse=False))
    _IRFFT[_r] = define_op(f"IRFFT{_suffix}", _real_infer(_r, inverse=True))


def _grad_infer(inputs, attrs):
    g, shape, n = inputs
    out = _REAL_OF[g.dtype] if attrs["real_out"] else _COMPLEX_OF[g.dtype]
    v = constant_value(shape)
    return [(out, TensorShape([int(d) for d in v]) if v is not None else TensorShape(None))]


# (gradient, the forward input's shape, fft_length) -> the gradient of the forward input.
RFFTGrad = define_op("RFFTGrad", _grad_infer)
IRFFTGrad = define_op("IRFFTGrad", _grad_infer)


def _shape_of(x):
    if x.shape.is_fully_defined():
        from actorflow.graph.ops.constant import constant
        return constant(x.shape.as_list(), dtype=dtypes.int32)
    return _op("Shape", x, out_type=dtypes.int32)


for _r in (1, 2, 3):
    def _fft_grad(op, grad, _r=_r):
        return [Conj(_FFT[_r](Conj(grad)))]

    def _ifft_grad(op, grad, _r=_r):
        return [Conj(_IFFT[_r](Conj(grad)))]

    def _rfft_grad(op, grad, _r=_r):
        x, n = op.inputs
        return [RFFTGrad(grad, _shape_of(x), n, rank=_r, real_out=True), None]

    def _irfft_grad(op, grad, _r=_r):
        x, n = op.inputs
        return [IRFFTGrad(grad, _shape_of(x), n, rank=_r, real_out=False), None]

    _grad(_FFT[_r])(_fft_grad)
    _grad(_IFFT[_r])(_ifft_grad)
    _grad(_RFFT[_r])(_rfft_grad)
    _grad(_IRFFT[_r])(_irfft_grad)


def _complex_fn(table, rank, tf_name):
    def fn(input, name=None):  # noqa: A002  (TF's argument name)
        return table[rank](convert_to_tensor(input), name=name)
    fn.__name__ = tf_name
    fn.__doc__ = (f"The {'inverse ' if table is _IFFT else ''}discrete Fourier transform over the innermost "
                  f"{rank} dimension{'s' if rank > 1 else ''} of a complex tensor (tf.signal.{tf_name}).")
    return fn


def _real_fn(table, rank, tf_name, inverse):
    def fn(input_tensor, fft_length=None, name=None):
        with name_scope(name, tf_name, [input_tensor]) as scope:
            x = convert_to_tensor(input_tensor)
            if fft_length is None:
                if x.shape.dims is None or any(d is None for d in x.shape.dims[-rank:]):
                    raise ValueError(f"{tf_name}: fft_length is needed when the innermost dimensions of "
                                     f"'{x.name}' are unknown ({x.shape})")
                inner = list(x.shape.dims[-rank:])
                if inverse:
                    inner[-1] = 2 * (inner[-1] - 1)
                fft_length = inner
            n = convert_to_tensor(fft_length, dtype=dtypes.int32)
            return table[rank](x, n, name=scope)
    fn.__name__ = tf_name
    fn.__doc__ = (f"The {'inverse ' if inverse else ''}real discrete Fourier transform over the innermost {rank} "
                  f"dimension{'s' if rank > 1 else ''} (tf.signal.{tf_name}); `fft_length` crops or zero-pads "
                  "the input as TF's.")
    return fn


fft, fft2d, fft3d = (_complex_fn(_FFT, r, n) for r, n in ((1, "fft"), (2, "fft2d"), (3, "fft3d")))
ifft, ifft2d, ifft3d = (_complex_fn(_IFFT, r, n) for r, n in ((1, "ifft"), (2, "ifft2d"), (3, "ifft3d")))
rfft, rfft2d, rfft3d = (_real_fn(_RFFT, r, n, False) for r, n in ((1, "rfft"), (2, "rfft2d"), (3, "rfft3d")))
irfft, irfft2d, irfft3d = (_real_fn(_IRFFT, r, n, True) for r, n in ((1, "irfft"), (2, "irfft2d"), (3, "irfft3d")))
