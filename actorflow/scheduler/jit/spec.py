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

Static dimensions (`Node.statics`, `input_statics`): per value, one entry a dimension: 1 where the
graph's static shape says 1, 0 where it says another size, -1 where it is unknown (empty: all
unknown). The generated code uses them only to choose its broadcasting code (a dimension known
not to broadcast is indexed directly), and checks them at run time: a value of another shape
raises, and the interpreted ops run instead. Sizes themselves are never part of a spec.
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
    statics: tuple = ()  # per output: static dimensions (see the module's docstring)

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
    input_statics: tuple = ()   # per input: static dimensions


@dataclass(frozen=True, slots=True)
class LoopSpec:
    inputs: tuple       # ((dtype name, rank), ...): loop variables first, then invariants
    n_vars: int
    nodes: tuple        # cond nodes first (n_cond of them), then body nodes
    n_cond: int
    cond: tuple         # reference to the boolean scalar that keeps the loop going
    nexts: tuple        # per loop variable: reference to its value in the next iteration
    saves: tuple = ()   # references to the values saved each iteration (their histories are returned)
    input_statics: tuple = ()   # per input: static dimensions


def statics_of(shape) -> tuple:
    """The static dimensions of a `TensorShape` (see the module's docstring)."""
    if shape.ndims is None:
        return ()
    return tuple(-1 if d is None else (1 if d == 1 else 0) for d in shape.as_list())
