"""GPU kernels for variable updates: Assign, AssignAdd/Sub and the Scatter family, in place.

Scatter kernels run one thread per updated element: Add and Sub use atomicAdd, Mul/Max/Min a
compare-and-swap loop, so duplicate indices accumulate as on the CPU (Update: one of the
duplicates wins). Out-of-range indices are skipped, as TF's GPU kernels do (checking them would
wait for the GPU; the CPU kernels raise).
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.state import assign_fn, update_in_place, value_of
from actorflow.kernels.gpu._common import cp, launch, raw_kernel
from actorflow.kernels.registry import register_kernel


@register_kernel("Assign", "GPU", releases_gil=False)
def assign(attrs):
    return assign_fn(bool(attrs.get("validate_shape", True)), cp)


register_kernel("AssignAdd", "GPU", releases_gil=False)(lambda attrs: update_in_place("AssignAdd", cp.add, cp))
register_kernel("AssignSub", "GPU", releases_gil=False)(lambda attrs: update_in_place("AssignSub", cp.subtract, cp))

_ADD, _SUB, _UPDATE, _MUL, _MAX, _MIN = range(6)

_scatter = raw_kernel("af_scatter", r"""
template <typename U> __device__ inline U af_apply(U cur, U u, int mode) {
    if (mode == 3) return cur * u;
    if (mode == 4) return u > cur ? u : cur;
    return u < cur ? u : cur;
}
__device__ inline void af_atomic(float* a, float u, int mode) {
    int* p = (int*)a;
    int old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed, __float_as_int(af_apply(__int_as_float(assumed), u, mode)));
    } while (assumed != old);
}
__device__ inline void af_atomic(double* a, double u, int mode) {
    unsigned long long* p = (unsigned long long*)a;
    unsigned long long old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed,
                        (unsigned long long)__double_as_longlong(af_apply(__longlong_as_double((long long)assumed), u, mode)));
    } while (assumed != old);
}
extern "C" __global__ void af_scatter(T* ref, const long long* idx, const T* upd, long long n, int width,
                                      long long rows, int mode) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= n) return;
    long long i = k / width;
    long long r = idx[i];
    if (r < 0 || r >= rows) return;
    T* dst = ref + r * width + (k - i * width);
    T u = upd[k];
    if (mode == 0) atomicAdd(dst, u);
    else if (mode == 1) atomicAdd(dst, -u);
    else if (mode == 2) *dst = u;
    else af_atomic(dst, u, mode);
}
""")


def _scatter_kernel(op_name, mode):
    def factory(attrs):
        def fn(ref, indices, updates):
            if ref.ndim == 0:
                raise ValueError(f"{op_name}: variable must have rank >= 1, got a scalar")
            updates = value_of(op_name, ref, updates, cp)
            if indices.dtype.kind not in "iu":
                raise TypeError(f"{op_name}: indices must be integers, got {indices.dtype}")
            want = tuple(indices.shape) + ref.shape[1:]
            if updates.shape != want and updates.ndim != 0:
                raise ValueError(f"{op_name}: updates must have shape indices.shape + variable.shape[1:] = "
                                 f"{want} (or be a scalar), got {updates.shape}")
            idx = cp.asarray(indices).reshape(-1).astype(np.int64, copy=False)
            width = int(np.prod(ref.shape[1:]))
            upd = cp.ascontiguousarray(cp.broadcast_to(updates, want).astype(ref.dtype, copy=False))
            if ref.dtype not in (np.float32, np.float64) or not ref.flags.c_contiguous:
                return _scatter_generic(op_name, ref, idx, upd.reshape((idx.size,) + ref.shape[1:]), mode)
            launch(_scatter(ref.dtype), upd.size, (ref, idx, upd, np.int64(upd.size), np.int32(width),
                                                   np.int64(ref.shape[0]), np.int32(mode)))
            return ref
        return fn
    return factory


def _scatter_generic(op_name, ref, idx, upd, mode):
    """Integer variables (rare on the GPU): through CuPy's scatter ufuncs, valid indices only."""
    import cupyx
    keep = (idx >= 0) & (idx < ref.shape[0])
    idx, upd = idx[keep], upd[keep]
    if mode == _ADD:
        cupyx.scatter_add(ref, idx, upd)
    elif mode == _SUB:
        cupyx.scatter_add(ref, idx, -upd)
    elif mode == _UPDATE:
        ref[idx] = upd
    elif mode == _MAX:
        cupyx.scatter_max(ref, idx, upd)
    elif mode == _MIN:
        cupyx.scatter_min(ref, idx, upd)
    else:
        raise TypeError(f"{op_name}: no GPU kernel for {ref.dtype} variables")
    return ref


for _op, _mode in (("ScatterAdd", _ADD), ("ScatterSub", _SUB), ("ScatterUpdate", _UPDATE), ("ScatterMul", _MUL),
                   ("ScatterMax", _MAX), ("ScatterMin", _MIN)):
    register_kernel(_op, "GPU", releases_gil=False)(_scatter_kernel(_op, _mode))
