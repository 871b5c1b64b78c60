"""What a generated loop calls to see whether its step has stopped it (kernels/interrupt.py).

`stopped(cell)` reads a stop cell (a one-element int64 array) with an atomic load: another thread
writes it while the loop runs, and a plain load in a loop that stores nothing else could be hoisted
out of the loop by the optimizer and never see the write. The load is inlined in the loop (no
call); this module imports nothing but numba's extension API, so a loop that checks its cell does
not pay for importing rt (scheduler/jit/rt.py).
"""
from __future__ import annotations

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from numba.core import types  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

__all__ = ["stopped"]


@intrinsic
def stopped(typingctx, cell):
    """True when `cell[0]` is set (read atomically, monotonic order)."""
    if not (isinstance(cell, types.Array) and cell.dtype == types.int64 and cell.ndim == 1):
        return None
    sig = types.boolean(cell)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        v = builder.load_atomic(ary.data, "monotonic", 8)
        return builder.icmp_signed("!=", v, v.type(0))
    return sig, codegen
