"""CPU kernels for element-wise math, casts, reductions and arg-reductions (TF's `math_ops`).

Where a numpy ufunc already has TensorFlow's semantics and keeps the input dtype, the factory
returns the ufunc itself: the runtime then calls straight into C (about a microsecond for scalar
operands), with no Python frame of ours in between. Kernels that need adapting build their result
in a fresh array and update it in place, so that each extra step costs one pass and no allocation.

Differences from numpy that these kernels reproduce (TensorFlow's behaviour):
- FloorDiv of floats is ``floor(x / y)`` (numpy's ``floor_divide`` is ``divmod``-based and can be
  one lower); integer FloorDiv, FloorMod and Div by zero raise InvalidArgumentError.
- Div (TF-1.x legacy): true division for floats, *floor* division for integers, which is what
  ``tf.compat.v1.div`` gives for Python-2-style integer division (the raw C++ op truncates).
- Mean of integers divides the sum by the count in the input dtype, truncating toward zero.
- Sum, Prod and Mean of float16 accumulate in float32; integer reductions accumulate in the
  input dtype (wrapping on overflow, as TF does) instead of numpy's promotion to int64.
- Max/Min of an empty tensor give the identity (lowest/highest value) instead of raising.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _register_fn(op_type: str, fn, **kw) -> None:
    """Registers a kernel that needs no attributes: its factory returns `fn` itself."""
    register_kernel(op_type, "CPU", **kw)(lambda attrs, _fn=fn: _fn)


def _broadcast_size(x, y) -> int:
    """Number of elements of ``x op y``, cheaply: the work of a broadcasting binary op."""
    a, b = x.size, y.size
    if a <= 1 or b <= 1 or x.shape == y.shape:
        return a if a > b else b
    sx, sy = x.shape, y.shape
    n = max(len(sx), len(sy))
    sx = (1,) * (n - len(sx)) + sx
    sy = (1,) * (n - len(sy)) + sy
    size = 1
    for da, db in zip(sx, sy):
        size *= da if db == 1 else db
    return size


# ---------------------------------------------------------------------------------------------
# Unary element-wise ops.

# numpy ufuncs that already compute the TF op and keep the input dtype (np.sign(0) == 0, like TF;
# np.floor/np.ceil keep integer dtypes).
_UNARY_UFUNCS = {
    "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Log1p": np.log1p, "Expm1": np.expm1,
    "Sin": np.sin, "Cos": np.cos, "Sqrt": np.sqrt, "Square": np.square, "Abs": np.absolute,
    "Sign": np.sign, "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil,
    "Tanh": np.tanh, "LogicalNot": np.logical_not, "IsNan": np.isnan, "IsInf": np.isinf, "IsFinite": np.isfinite,
    "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh,
}
for _op, _uf in _UNARY_UFUNCS.items():
    _register_fn(_op, _uf)


def rsqrt(x):
    """``1 / sqrt(x)``; tf.math.rsqrt."""
    y = np.sqrt(x)
    y = np.reciprocal(y, out=y) if type(y) is np.ndarray else np.reciprocal(y)
    return y


def round_half_to_even(x):
    """Rounds half to even (banker's rounding), like tf.math.round; integers pass through."""
    return np.rint(x) if x.dtype.kind == "f" else x


def relu(x):
    """``max(x, 0)``; tf.nn.relu."""
    return np.maximum(x, 0)


def relu6(x):
    """``min(max(x, 0), 6)``; tf.nn.relu6."""
    y = np.maximum(x, 0)
    return np.minimum(y, 6, out=y) if type(y) is np.ndarray else np.minimum(y, 6)


def elu(x):
    """``x`` if ``x > 0`` else ``exp(x) - 1``; tf.nn.elu."""
    # expm1 only of the non-positive part, so large x never overflows (and never warns).
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def softplus(x):
    """``log(1 + exp(x))``, computed without overflow; tf.nn.softplus."""
    return np.logaddexp(x, 0)


def sigmoid(x):
    """``1 / (1 + exp(-x))``; tf.math.sigmoid.

    exp(-x) overflows to inf only where the true result is below the smallest normal number, so
    the result (0) is right; the overflow warning it would raise is silenced.
    """
    if x.dtype == _F16:
        # In float16 exp(-x) would overflow from x < -11, where the result is still ~1e-5.
        return sigmoid(x.astype(_F32)).astype(_F16)
    with np.errstate(over="ignore"):
        t = np.negative(x)
        if type(t) is np.ndarray:
            np.exp(t, out=t)
            t += 1
            return np.reciprocal(t, out=t)
        return np.reciprocal(np.exp(t) + 1)


# The error and gamma functions come from scipy.special, imported when a kernel is first built (it
# is slow to import and most graphs never need it). Its float32 loops compute in float64 and
# round, so float32 results are as good as TF's; float16 is computed in float32 and rounded back.

def _scipy_unary(name: str, fix=None):
    def factory(attrs):
        import scipy.special
        uf = getattr(scipy.special, name)

        def fn(x):
            y = uf(x.astype(_F32) if x.dtype == _F16 else x)
            if fix is not None:
                y = fix(x, y)
            return y.astype(x.dtype, copy=False) if y.dtype != x.dtype else y
        return fn
    return factory


def _digamma_poles(x, y):
    """TF's digamma is NaN at the poles 0, -1, -2... (scipy's psi gives -inf or inf at 0)."""
    pole = (x <= 0) & (np.floor(x) == x)
    if pole.any():
        y = np.where(pole, np.nan, y).astype(y.dtype, copy=False)
    return y


for _op, _name, _fix in (("Erf", "erf", None), ("Erfc", "erfc", None), ("Lgamma", "gammaln", None),
                         ("Digamma", "psi", _digamma_poles)):
    register_kernel(_op, "CPU")(_scipy_unary(_name, _fix))


def l2_loss(x):
    """sum(x ** 2) / 2 as a scalar of x's dtype (TF's L2Loss; float16 sums in float32)."""
    flat = x.reshape(-1).astype(np.float32 if x.dtype == np.float16 else x.dtype, copy=False)
    return np.asarray(np.dot(flat, flat) * 0.5, dtype=x.dtype)


_register_fn("L2Loss", l2_loss)


for _op, _fn in {"Rsqrt": rsqrt, "Round": round_half_to_even, "Relu": relu, "Relu6": relu6,
                 "Elu": elu, "Softplus": softplus, "Sigmoid": sigmoid}.items():
    _register_fn(_op, _fn)


# ---------------------------------------------------------------------------------------------
# Binary element-wise ops (numpy broadcasting; both operands share a dtype).

_BINARY_UFUNCS = {
    "Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
    # The graph lets only floating-point operands reach RealDiv, for which true_divide keeps the dtype.
    "RealDiv": np.true_divide,
    # Integers to negative integer powers raise ValueError in numpy, as they fail in TF.
    "Pow": np.power,
    "Maximum": np.maximum, "Minimum": np.minimum,
    "Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or,
}
for _op, _uf in _BINARY_UFUNCS.items():
    _register_fn(_op, _uf, cost=_broadcast_size)
# Atan2(y, x): np.arctan2's signed zeros and quadrants are TF's (C's atan2).
_register_fn("Atan2", np.arctan2, cost=_broadcast_size)


@register_kernel("Polygamma", "CPU", cost=_broadcast_size)
def _polygamma(attrs):
    import scipy.special

    def polygamma(a, x):
        """The a-th derivative of digamma; tf.math.polygamma. NaN where `a` is not a non-negative
        integer (scipy's polygamma answers for some of those), and at the poles of digamma."""
        dtype = np.result_type(a, x)
        a, x = np.broadcast_arrays(a, x)
        valid = (a >= 0) & (np.floor(a) == a)
        with np.errstate(invalid="ignore", divide="ignore"):
            y = scipy.special.polygamma(np.where(valid, a, 0).astype(np.int64), x.astype(np.float64))
        y = np.where(valid, y, np.nan)
        y = np.where(valid & (a == 0), _digamma_poles(x, y), y)
        return y.astype(dtype, copy=False)
    return polygamma


def _check_int_divisor(op: str, y, x=None) -> None:
    # numpy returns 0 (and warns) for integer division by zero; TF fails the op. An empty result
    # divides nothing, and TF runs no division then: `(axes + rank) % rank` with no axes and rank
    # 0 is how reduction gradients normalize axes when a scalar is fed where the rank is unknown.
    if x is not None and (x.size == 0 or y.size == 0):
        return
    zero = (y == 0) if y.size == 1 else not y.all()
    if zero:
        raise InvalidArgumentError(f"{op}: Integer division by zero")


def floor_div(x, y):
    """Division rounded toward -inf; tf.math.floordiv (raw op FloorDiv).

    Floats: ``floor(x / y)`` like TF (numpy's floor_divide can differ by one in the last place
    of the quotient). Integers: Python's ``//``; a zero divisor raises InvalidArgumentError.
    """
    if x.dtype.kind == "f":
        q = np.true_divide(x, y)
        return np.floor(q, out=q) if type(q) is np.ndarray else np.floor(q)
    _check_int_divisor("FloorDiv", y, x)
    return np.floor_divide(x, y)


def floor_mod(x, y):
    """Remainder with the sign of the divisor (Python's ``%``); tf.math.floormod.

    A zero integer divisor raises InvalidArgumentError.
    """
    if x.dtype.kind != "f":
        _check_int_divisor("FloorMod", y, x)
    return np.remainder(x, y)


def div(x, y):
    """TF-1.x legacy Div: true division for floats, floor division for integers.

    This is what `tf.compat.v1.div` computes (Python-2-style ``/``, floor for integers). TF's
    raw C++ Div kernel truncates integer quotients toward zero instead; the two differ only for
    operands of opposite signs. A zero integer divisor raises InvalidArgumentError.
    """
    if x.dtype.kind == "f":
        return np.true_divide(x, y)
    _check_int_divisor("Div", y, x)
    return np.floor_divide(x, y)


def squared_difference(x, y):
    """``(x - y) ** 2``; tf.math.squared_difference."""
    d = np.subtract(x, y)
    return np.square(d, out=d) if type(d) is np.ndarray else np.square(d)


def div_no_nan(x, y):
    """``x / y``, or 0 where ``y == 0``; tf.math.divide_no_nan."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.true_divide(x, y)
    return np.where(y == 0, q.dtype.type(0), q)


for _op, _fn in {"FloorDiv": floor_div, "FloorMod": floor_mod, "Div": div,
                 "SquaredDifference": squared_difference, "DivNoNan": div_no_nan}.items():
    _register_fn(_op, _fn, cost=_broadcast_size)


# ---------------------------------------------------------------------------------------------
# Cast, SelectV2, AddN.

@register_kernel("Cast", "CPU")
def cast_kernel(attrs):
    """tf.cast (raw op Cast): converts to the `DstT` dtype.

    Float to integer truncates toward zero; to bool gives ``x != 0`` (NaN is True), as in TF.
    The input itself is returned when it already has the target dtype.
    """
    dst = np.dtype(attrs["DstT"])

    def cast(x):
        if x.dtype.kind == "c" and dst.kind != "c":   # the real part, as TF (numpy warns)
            x = x.real
        return x.astype(dst, copy=False)
    return cast


def _select_cost(c, t, e):
    return max(c.size, t.size, e.size)


# np.where has SelectV2's signature and numpy broadcasting of all three operands.
_register_fn("SelectV2", np.where, cost=_select_cost)


def add_n(*inputs):
    """Sums N tensors of the same shape and dtype; tf.math.add_n (raw op AddN)."""
    if len(inputs) == 1:
        return inputs[0]
    x = inputs[0]
    if x.dtype.kind == "O" and x.ndim == 0:
        from actorflow.kernels.cpu.tensor_list import TensorList, add_lists
        if isinstance(x[()], TensorList):
            return add_lists(*inputs)
    acc = np.add(inputs[0], inputs[1])
    for x in inputs[2:]:
        acc += x  # in place for arrays; for numpy scalars this rebinds, which is fine
    return acc


_register_fn("AddN", add_n)


# ---------------------------------------------------------------------------------------------
# Gradients of element-wise activations. Each starts with an op on both operands, so the
# temporary it allocates already has the output shape and later steps can run in place.

@njit(cache=True, nogil=True)
def _relu_grad_flat(g, f, out, zero):
    for i in range(out.shape[0]):
        out[i] = g[i] if f[i] > 0 else g[i] * zero     # g * 0, not 0: NaN and -0.0 as numpy (and TF) give


def _relu_grad_fast(g, f) -> bool:
    return (type(g) is np.ndarray and type(f) is np.ndarray and g.shape == f.shape and g.dtype == f.dtype
            and g.dtype in (_F32, _F64) and g.flags.c_contiguous and f.flags.c_contiguous and g.size >= 4096)


def relu_grad(gradients, features):
    """Gradient of relu: ``gradients * (features > 0)``; raw op ReluGrad.

    Same-shape float32/64 buffers take one fused pass (numba), twice as fast as numpy's mask and
    mixed-type multiply; anything else goes through numpy.
    """
    g, f = gradients, features
    if _relu_grad_fast(g, f):
        out = np.empty_like(g)
        _relu_grad_flat(g.reshape(-1), f.reshape(-1), out.reshape(-1), g.dtype.type(0))
        return out
    return np.multiply(gradients, features > 0)


@njit(cache=True, nogil=True)
def _relu_grad_block(out, features, r0, r1, c0, c1, zero):
    # Whole C-contiguous arrays with bounds, each row's part taken as a slice and indexed from 0:
    # numba vectorises that select. A strided view of a column block (generic layout) gave branchy
    # scalar code 40x slower, and indexing out[i, j] with j from range(c0, c1) 7x slower.
    for i in range(r0, r1):
        o = out[i, c0:c1]
        f = features[i, c0:c1]
        for j in range(o.shape[0]):
            g = o[j]
            o[j] = g if f[j] > 0 else g * zero     # as _relu_grad_flat: g * 0, not 0


def relu_grad_in_place_ok(out, features) -> bool:
    """Whether `relu_grad_in_place(out, features, ...)` applies: same-shape C-contiguous float32/64
    matrices."""
    return (type(features) is np.ndarray and features.shape == out.shape and features.dtype == out.dtype
            and out.dtype in (_F32, _F64) and out.ndim == 2 and out.flags.c_contiguous
            and features.flags.c_contiguous)


def relu_grad_in_place(out, features, rows=None, cols=None) -> None:
    """``out = relu_grad(out, features)`` in place, on rows [rows[0], rows[1]) and columns [cols[0],
    cols[1]) only when given, where `relu_grad_in_place_ok`: the epilogue of a GEMM fused with the
    ReluGrad after it (each GEMM block masks its own part of the output)."""
    r0, r1 = rows if rows is not None else (0, out.shape[0])
    c0, c1 = cols if cols is not None else (0, out.shape[1])
    _relu_grad_block(out, features, r0, r1, c0, c1, out.dtype.type(0))


def _relu_grad_split(attrs):
    """Contiguous blocks of a big ReluGrad, one pass each."""
    def split(parts, gradients, features):
        g, f = gradients, features
        if not _relu_grad_fast(g, f) or g.size < (1 << 16) * parts:
            return None
        out = np.empty_like(g)
        gf, ff, of = g.reshape(-1), f.reshape(-1), out.reshape(-1)
        bounds = [gf.size * i // parts for i in range(parts + 1)]
        zero = g.dtype.type(0)
        return out, [functools.partial(_relu_grad_flat, gf[lo:hi], ff[lo:hi], of[lo:hi], zero)
                     for lo, hi in zip(bounds[:-1], bounds[1:])]
    return split


def relu6_grad(gradients, features):
    """Gradient of relu6: ``gradients * (0 < features < 6)``; raw op Relu6Grad."""
    inside = np.greater(features, 0)
    inside &= features < 6
    return np.multiply(gradients, inside)


def elu_grad(gradients, outputs):
    """Gradient of elu from its *outputs*: ``g * (y + 1)`` where ``y < 0``, else ``g``; EluGrad."""
    return np.where(outputs < 0, (outputs + 1) * gradients, gradients)


def softplus_grad(gradients, features):
    """Gradient of softplus: ``gradients * sigmoid(features)``; raw op SoftplusGrad."""
    return np.multiply(gradients, sigmoid(features))


def sigmoid_grad(y, dy):
    """``dy * y * (1 - y)`` from the sigmoid's output y; raw op SigmoidGrad."""
    g = np.multiply(dy, y)
    g *= 1 - y
    return g


def tanh_grad(y, dy):
    """``dy * (1 - y * y)`` from the tanh's output y; raw op TanhGrad."""
    g = np.multiply(y, y)
    g = np.subtract(1, g, out=g) if type(g) is np.ndarray else 1 - g
    g *= dy
    return g


def rsqrt_grad(y, dy):
    """``-0.5 * dy * y ** 3`` from the rsqrt's output y; raw op RsqrtGrad."""
    g = np.multiply(dy, y)
    g *= y
    g *= y
    g *= -0.5
    return g


def sqrt_grad(y, dy):
    """``0.5 * dy / y`` from the sqrt's output y; raw op SqrtGrad."""
    g = np.true_divide(dy, y)
    g *= 0.5
    return g


def reciprocal_grad(y, dy):
    """``-dy * y * y`` from the reciprocal's output y; raw op ReciprocalGrad."""
    g = np.multiply(dy, y)
    g *= y
    return np.negative(g, out=g) if type(g) is np.ndarray else -g


for _op, _fn in {"ReluGrad": relu_grad, "Relu6Grad": relu6_grad, "EluGrad": elu_grad,
                 "SoftplusGrad": softplus_grad, "SigmoidGrad": sigmoid_grad,
                 "TanhGrad": tanh_grad, "RsqrtGrad": rsqrt_grad, "SqrtGrad": sqrt_grad,
                 "ReciprocalGrad": reciprocal_grad}.items():
    _register_fn(_op, _fn, split=_relu_grad_split if _op == "ReluGrad" else None)


# ---------------------------------------------------------------------------------------------
# Reductions.

def reduction_axes(op: str, ndim: int, reduction_indices) -> tuple:
    """Normalizes TF reduction indices (a scalar or 1-D, negatives allowed) to sorted axes.

    Duplicates are merged, as TF's reduction helper does; an axis outside ``[-ndim, ndim)``
    raises InvalidArgumentError naming `op`.
    """
    r = reduction_indices.tolist() if hasattr(reduction_indices, "tolist") else reduction_indices
    if type(r) is int:
        if -ndim <= r < ndim:
            return (r % ndim,)
        r = [r]
    elif not isinstance(r, (list, tuple)):
        r = list(np.asarray(r).reshape(-1).tolist())
    axes = set()
    for a in r:
        if not -ndim <= a < ndim:
            raise InvalidArgumentError(
                f"{op}: Invalid reduction dimension ({a} for input with {ndim} dimension(s))")
        axes.add(a % ndim)
    return tuple(sorted(axes))


def _reduce_factory(op: str, ufunc, *, accumulate: bool):
    """Kernel factory for Sum, Prod, Max, Min, All and Any.

    `accumulate` ops (Sum, Prod) accumulate integers in their own dtype (numpy would promote to
    int64) and float16 in float32. Max/Min of an empty tensor start from the identity.
    """
    def factory(attrs):
        keep = bool(attrs.get("keep_dims", attrs.get("keepdims", False)))

        def reduce(x, reduction_indices):
            axes = reduction_axes(op, x.ndim, reduction_indices)
            if not axes:
                return x
            dt = x.dtype
            if accumulate:
                if dt == _F16:
                    return ufunc.reduce(x, axis=axes, dtype=_F32, keepdims=keep).astype(_F16)
                return ufunc.reduce(x, axis=axes, dtype=dt, keepdims=keep)
            if x.size == 0 and (ufunc is np.maximum or ufunc is np.minimum):
                return ufunc.reduce(x, axis=axes, keepdims=keep, initial=_identity(ufunc, dt))
            return ufunc.reduce(x, axis=axes, keepdims=keep)
        return reduce
    return factory


def _identity(ufunc, dt: np.dtype):
    """The value a TF reduction of an empty set yields for Max (lowest) or Min (highest)."""
    if dt.kind == "f":
        return -np.inf if ufunc is np.maximum else np.inf
    if dt.kind == "b":
        return ufunc is not np.maximum
    info = np.iinfo(dt)
    return info.min if ufunc is np.maximum else info.max


register_kernel("Sum", "CPU")(_reduce_factory("Sum", np.add, accumulate=True))
register_kernel("Prod", "CPU")(_reduce_factory("Prod", np.multiply, accumulate=True))
register_kernel("Max", "CPU")(_reduce_factory("Max", np.maximum, accumulate=False))
register_kernel("Min", "CPU")(_reduce_factory("Min", np.minimum, accumulate=False))
register_kernel("All", "CPU")(_reduce_factory("All", np.logical_and, accumulate=False))
register_kernel("Any", "CPU")(_reduce_factory("Any", np.logical_or, accumulate=False))


@register_kernel("Mean", "CPU")
def mean_kernel(attrs):
    """tf.reduce_mean (raw op Mean), with attribute keep_dims.

    Floats: the sum (float32 for float16 inputs) divided by the count; the mean of no elements
    is NaN. Integers: the sum in the input dtype divided by the count, truncated toward zero
    (TF's integer Mean; numpy would return float64); the mean of no elements is 0.
    """
    keep = bool(attrs.get("keep_dims", attrs.get("keepdims", False)))

    def mean(x, reduction_indices):
        axes = reduction_axes("Mean", x.ndim, reduction_indices)
        if not axes:
            return x
        shape = x.shape
        count = 1
        for a in axes:
            count *= shape[a]
        dt = x.dtype
        if dt.kind == "f":
            s = np.add.reduce(x, axis=axes, dtype=_F32 if dt == _F16 else dt, keepdims=keep)
            if count == 0:
                with np.errstate(invalid="ignore"):
                    s = np.true_divide(s, count)
            elif type(s) is np.ndarray:
                s = np.true_divide(s, count, out=s)
            else:
                s = s / count
            return s.astype(dt, copy=False)
        s = np.add.reduce(x, axis=axes, dtype=dt, keepdims=keep)
        if count == 0:
            return np.zeros_like(s)
        # Truncating division, computed in int64 so that the count fits whatever the dtype.
        s = np.asarray(s).astype(np.int64)
        q = (s - np.fmod(s, count)) // count
        return q.astype(dt) if q.ndim else dt.type(q)
    return mean


def _arg_reduce_factory(op: str, fn):
    def factory(attrs):
        out_type = np.dtype(attrs.get("output_type", np.int64))

        def arg_reduce(x, dimension):
            axis = int(dimension)
            if not -x.ndim <= axis < x.ndim:
                raise InvalidArgumentError(
                    f"{op}: Expected dimension in the range [{-x.ndim}, {x.ndim}), but got {axis}")
            if x.shape[axis] == 0:
                raise InvalidArgumentError(
                    f"{op}: Reduction axis {axis} is empty in shape {list(x.shape)}")
            r = fn(x, axis=axis)
            return r.astype(out_type, copy=False)
        return arg_reduce
    factory.__doc__ = (f"tf.math.{op.lower()} (raw op {op}): index of the first extreme value "
                       "along `dimension`, as `output_type` (default int64).")
    return factory


register_kernel("ArgMax", "CPU")(_arg_reduce_factory("ArgMax", np.argmax))
register_kernel("ArgMin", "CPU")(_arg_reduce_factory("ArgMin", np.argmin))
