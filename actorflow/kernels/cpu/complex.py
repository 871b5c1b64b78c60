"""CPU kernels of the complex-number ops (graph/ops/complex_ops.py): numpy computes them all."""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel


@register_kernel("Complex", "CPU")
def complex_kernel(attrs):
    """real + i * imag, broadcasting, in the `Tout` dtype."""
    out = np.dtype(attrs["Tout"])

    def make(x, y):
        z = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)), dtype=out)
        z.real = x
        z.imag = y
        return z
    return make


def _part(fn):
    def factory(attrs):
        out = np.dtype(attrs["Tout"])
        return lambda z: np.asarray(fn(z), dtype=out)
    return factory


register_kernel("Real", "CPU")(_part(np.real))
register_kernel("Imag", "CPU")(_part(np.imag))
register_kernel("Angle", "CPU")(_part(np.angle))
register_kernel("ComplexAbs", "CPU")(_part(np.absolute))
register_kernel("Conj", "CPU")(lambda attrs: np.conjugate)
