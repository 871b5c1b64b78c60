"""CPU kernels for graph/ops/special_math_ops.py: Zeta, Igamma, Igammac, IgammaGradA, RandomGammaGrad, Betainc
(scipy.special,
imported when a kernel is first built), TruncateDiv, TruncateMod and Cross (numpy).

scipy's float32 loops compute in float64 and round; float16 is computed in float32 and rounded back,
as kernels/cpu/math.py does for erf and lgamma.
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.math import _broadcast_size
from actorflow.kernels.registry import register_kernel


def _scipy(name):
    def factory(attrs):
        import scipy.special
        uf = getattr(scipy.special, name)

        def fn(*args):
            dtype = np.result_type(*args)
            work = np.float32 if dtype == np.float16 else dtype
            with np.errstate(all="ignore"):
                y = uf(*(np.asarray(a, work) for a in args))
            return np.asarray(y).astype(dtype, copy=False)
        return fn
    return factory


# Zeta(x, q), Igamma(a, x) = P(a, x), Igammac(a, x) = Q(a, x), Betainc(a, b, x) = I_x(a, b).
for _op, _name in (("Zeta", "zeta"), ("Igamma", "gammainc"), ("Igammac", "gammaincc")):
    register_kernel(_op, "CPU", cost=_broadcast_size)(_scipy(_name))
register_kernel("Betainc", "CPU")(_scipy("betainc"))


def igamma_grad_a(a, x):
    """d/da P(a, x) from P's series: P = sum_n t_n with t_n = exp((a + n) log x - x - lgamma(a + n + 1)),
    so dP/da = sum_n t_n (log x - digamma(a + n + 1)); summed until the terms (which fall off past
    n = x) no longer change the sum. NaN where a <= 0 or x < 0, 0 where x = 0. Accurate where the
    derivative is not tiny against log x (x not much larger than a); TF's kernel is more careful
    far in the tail."""
    from scipy.special import gammaln, psi
    dtype = np.result_type(a, x)
    a, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, x))
    out = np.zeros(a.shape)
    ok = (a > 0) & (x > 0)
    aa, xx = a[ok], x[ok]
    if aa.size:
        lx = np.log(xx)
        total = np.zeros(aa.shape)
        n = 0
        while True:
            t = np.exp((aa + n) * lx - xx - gammaln(aa + n + 1))
            term = t * (lx - psi(aa + n + 1))
            total += term
            n += 1
            # Past the peak (n > x) the terms shrink geometrically; stop when none matters.
            if (n > xx).all() and (np.abs(term) <= 1e-17 * np.maximum(np.abs(total), 1e-300)).all() or n > 100000:
                break
        out[ok] = total
    out[(a <= 0) | (x < 0) | np.isnan(a) | np.isnan(x)] = np.nan
    return out.astype(dtype, copy=False)


register_kernel("IgammaGradA", "CPU", cost=_broadcast_size)(lambda attrs: igamma_grad_a)


def random_gamma_grad(alpha, sample):
    """d sample / d alpha of standard Gamma(alpha) samples (TF's RandomGammaGrad): the CDF P(alpha, x) is
    held fixed, so dx/dalpha = -(dP/dalpha) / p(x; alpha) with p(x; alpha) = x^(alpha-1) e^-x / Gamma(alpha).
    0 where the sample is 0 (an underflowed draw), NaN where alpha <= 0."""
    from scipy.special import gammaln
    dtype = np.result_type(alpha, sample)
    a, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(alpha, sample))
    with np.errstate(all="ignore"):
        log_pdf = (a - 1.0) * np.log(x) - x - gammaln(a)
        out = -igamma_grad_a(a, x) / np.exp(log_pdf)
    out = np.where(x > 0, out, 0.0)
    out[(a <= 0) | np.isnan(a)] = np.nan
    return out.astype(dtype, copy=False)


register_kernel("RandomGammaGrad", "CPU", cost=_broadcast_size)(lambda attrs: random_gamma_grad)


def _check_divisor(op, x, y):
    if np.asarray(x).dtype.kind in "iu" and np.size(x) and np.size(y) and not np.all(y):
        raise InvalidArgumentError(f"{op}: Integer division by zero")


def truncate_div(x, y):
    """x / y rounded toward zero (tf.truncatediv); a zero integer divisor raises InvalidArgumentError."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind == "f":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.trunc(np.true_divide(x, y)).astype(x.dtype, copy=False)
    _check_divisor("TruncateDiv", x, y)
    if x.dtype.kind == "u":
        return np.floor_divide(x, y)
    q = np.floor_divide(np.abs(x), np.abs(y))
    return np.where((x < 0) != (y < 0), -q, q).astype(x.dtype, copy=False)


def truncate_mod(x, y):
    """The remainder of truncate_div, with the sign of x (C's fmod; tf.truncatemod)."""
    x, y = np.asarray(x), np.asarray(y)
    _check_divisor("TruncateMod", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(x, y)


register_kernel("TruncateDiv", "CPU", cost=_broadcast_size)(lambda attrs: truncate_div)
register_kernel("TruncateMod", "CPU", cost=_broadcast_size)(lambda attrs: truncate_mod)


@register_kernel("Cross", "CPU")
def cross(attrs):
    """tf.raw_ops.Cross: the cross product of the last dimension's 3-vectors."""
    def fn(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.ndim == 0 or a.shape[-1] != 3:
            raise InvalidArgumentError(f"Cross: a and b must have the same shape with innermost dimension 3, got "
                                       f"{list(a.shape)} and {list(b.shape)}")
        return np.cross(a, b).astype(a.dtype, copy=False)
    return fn


# Xlogy, Xlog1py, Erfinv, Ndtri and the Bessel functions are scipy.special's; Xdivy, MulNoNan and
# NextAfter numpy with TF's zero rules.
for _op, _name in (("Xlogy", "xlogy"), ("Xlog1py", "xlog1py"), ("Erfinv", "erfinv"), ("Ndtri", "ndtri"),
                   ("BesselI0", "i0"), ("BesselI0e", "i0e"), ("BesselI1", "i1"), ("BesselI1e", "i1e")):
    register_kernel(_op, "CPU")(_scipy(_name))


def xdivy(x, y):
    """x / y, 0 where x == 0 (raw op Xdivy)."""
    with np.errstate(all="ignore"):
        q = np.true_divide(x, y)
    return np.where(np.asarray(x) == 0, q.dtype.type(0), q)


def mul_no_nan(x, y):
    """x * y, 0 where y == 0 (raw op MulNoNan)."""
    with np.errstate(all="ignore"):
        p = np.multiply(x, y)
    return np.where(np.asarray(y) == 0, p.dtype.type(0), p)


register_kernel("Xdivy", "CPU", cost=_broadcast_size)(lambda attrs: xdivy)
register_kernel("MulNoNan", "CPU", cost=_broadcast_size)(lambda attrs: mul_no_nan)
register_kernel("NextAfter", "CPU", cost=_broadcast_size)(lambda attrs: np.nextafter)
