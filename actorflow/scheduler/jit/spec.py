"""What the JIT compiles: a cluster of ops, or a whole while loop, described by structure only.

A `ClusterSpec` or `LoopSpec` is a frozen, hashable description: op types, the attributes that
change the generated code, dtypes and ranks. Values (of inputs, and of constants that are not
scalars) are not part of it, so one compiled function serves every step and every graph with the
same structure; the on-disk cache is keyed by the generated source, which the spec determines.

References inside a spec (`args`, `outputs`, `cond`, `nexts`):
- ``("i", k)``: input k of the compiled function;
- ``("n", j, o)``: output o of node j (nodes are in topological order).
In a loop, inputs ``0 .. n_vars-1`` are the loop variables (their value in the current iteration)
and the rest are loop invariants.

Saved per-iteration values (a while loop's gradient): a forward loop's `saves` are the values its
body pushes each iteration (what a gradient loop needs); the compiled loop returns each one's
history, an array with one row per iteration, after the loop variables. A gradient loop reads a
row with a ``_HistoryRead(history, index)`` node, the history being one of its invariants.

Static shapes (`Node.statics`, `input_statics`): per value, its size in each dimension as the
graph's static shape has it, -1 where unknown (empty: the rank is all that is known), or a
symbol ``-2 - k`` in a loop analyzed symbolically (symbolic.py: dimensions of one symbol have one
size, checked on entry). The
generated code depends only on which sizes are 1, known, or unknown (it indexes a dimension known
not to broadcast directly, without run-time broadcasting code), never on the sizes themselves, so
one compiled function still serves every graph of the same structure. `JitKernel` checks each
argument against its static shape before a call (a mismatch runs the interpreted ops); the shapes
of the values computed inside then follow from the ops' shape functions.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Node", "ClusterSpec", "LoopSpec", "statics_of"]


@dataclass(frozen=True, slots=True)
class Node:
    op: str             # the op type
    attrs: tuple        # sorted ((name, hashable value), ...): what the emitter needs
    args: tuple         # references to the node's inputs
    dtypes: tuple       # numpy dtype name per output
    ranks: tuple        # rank per output
    statics: tuple = ()  # per output: its static shape (see the module's docstring)

    def attr(self, name, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    inputs: tuple       # ((dtype name, rank), ...) of the function's arguments
    nodes: tuple        # Node, topological
    outputs: tuple      # references: what the function returns, in order
    input_statics: tuple = ()   # per input: its static shape


@dataclass(frozen=True, slots=True)
class LoopSpec:
    inputs: tuple       # ((dtype name, rank), ...): loop variables first, then invariants
    n_vars: int
    nodes: tuple        # cond nodes first (n_cond of them), then body nodes
    n_cond: int
    cond: tuple         # reference to the boolean scalar that keeps the loop going
    nexts: tuple        # per loop variable: reference to its value in the next iteration
    saves: tuple = ()   # references to the values saved each iteration (their histories are returned)
    input_statics: tuple = ()   # per input: its static shape


def statics_of(shape) -> tuple:
    """A `TensorShape` as a spec holds it: its sizes, -1 where unknown; () when the rank is unknown."""
    if shape.ndims is None:
        return ()
    return tuple(-1 if d is None else int(d) for d in shape.as_list())
