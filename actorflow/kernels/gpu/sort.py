"""GPU kernels of TopKV2, Cumsum, Cumprod and ReverseV2 on CuPy arrays; k and the axes are read on
the host (TF's HostMemory), and the CPU kernels' checks are reused, so errors read the same.

Unique, UniqueWithCounts and the segment reductions other than UnsortedSegmentSum stay CPU-only:
their output shapes depend on the values (a wait for the GPU), and placement then keeps them on
the CPU. Written without a GPU at hand (checked with numpy standing in for CuPy):
tests/test_seq_ops.py's GPU test compares them with the TF fixture where there is a GPU.
"""
from __future__ import annotations

from actorflow.kernels.cpu.sort import check_top_k, cumulative, reverse_axes
from actorflow.kernels.gpu._common import cp, register_fn
from actorflow.kernels.registry import register_kernel


@register_kernel("TopKV2", "GPU", releases_gil=False, host_inputs=(1,))
def top_k_kernel(attrs):
    index_type = attrs.get("index_type", "int32")

    def top_k(x, k):
        k = check_top_k(x.shape, k)
        n = x.shape[-1]
        # CuPy's sort is thrust's stable sort: as on the CPU, the reversed row sorted ascending
        # and read backwards lists equal values by increasing index.
        order = cp.argsort(x[..., ::-1], axis=-1)[..., ::-1][..., :k]
        idx = (n - 1) - order
        return cp.ascontiguousarray(cp.take_along_axis(x, idx, axis=-1)), idx.astype(index_type)
    return top_k


def _cumulative(op: str, accumulate, identity):
    def factory(attrs):
        exclusive, reverse = bool(attrs.get("exclusive", False)), bool(attrs.get("reverse", False))

        def fn(x, axis):
            return cumulative(cp, op, accumulate, identity, x, axis, exclusive, reverse)
        return fn
    register_kernel(op, "GPU", releases_gil=False, host_inputs=(1,))(factory)


_cumulative("Cumsum", cp.cumsum, 0)
_cumulative("Cumprod", cp.cumprod, 1)


def reverse(x, axis):
    axes = reverse_axes(axis, x.ndim)
    return cp.ascontiguousarray(cp.flip(x, axes)) if axes else x


register_fn("ReverseV2", reverse, host_inputs=(1,))
