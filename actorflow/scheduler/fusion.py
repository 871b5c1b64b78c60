"""Op fusion: a pass over a plan that merges short chains of ops into one kernel (TF grappler's
remapper does the same for MatMul + BiasAdd + Relu).

Three patterns, on the CPU, for float32/float64:

- ``MatMul -> BiasAdd [-> Relu]`` becomes one ``_FusedMatMul``: each row block of the product gets
  its bias and ReLU right after its GEMM, while it is still in cache.
- ``Conv2D -> BiasAdd [-> Relu]`` (NHWC) becomes one ``_FusedConv2D``, the same per batch chunk.
- ``MatMul -> ApplyGradientDescent`` (the SGD update of a dense layer's kernel) becomes one
  ``_MatMulApplyGradientDescent``: ``var -= lr * op(a) @ op(b)`` is a single GEMM accumulating into
  the variable, so no gradient buffer is written, read back and thrown away.

A chain fuses only when its inner tensors are invisible: each is consumed once, by the next op of
the chain, and is neither fed nor fetched; no inner op has control edges in or out. The result is
a `Fusion` per surviving (root) op, which keeps its name, outputs and consumers; the inner ops
get no actor. Pure functions over the plan; the runtime builds the actors.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from actorflow.scheduler.plan import Plan

__all__ = ["Fusion", "find_fusions"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True, slots=True)
class Fusion:
    type: str                   # the fused kernel's op type
    attrs: dict                 # its attributes
    inputs: tuple               # its input tensors, in the kernel's argument order
    ref_inputs: frozenset       # which of them are variable refs
    parts: tuple                # the original ops, in chain order (the root last)
    extra_control: tuple = ()   # ops that must run first (readers of an updated variable)


def find_fusions(plan: Plan, on_cpu: Callable | None = None) -> dict:
    """{root op: Fusion} for the fusable chains of `plan`. `on_cpu(op)` tells whether an op runs on
    the CPU (None: everything does)."""
    ops = plan.ops
    in_plan = set(ops)
    fed = set(plan.feeds)
    fetched = {t for t in plan.fetches if t is not None}
    uses: dict = {}                 # tensor -> number of (consumer, slot) edges inside the plan
    controls = set(plan.targets)    # ops something waits on through a control edge
    for op in ops:
        refs = op.op_def.ref_inputs
        for i, t in enumerate(op.inputs):
            if i not in refs:
                uses[t] = uses.get(t, 0) + 1
        controls.update(op.control_inputs)
    cpu = on_cpu or (lambda op: True)

    def inner(t, consumer) -> bool:
        """True when `t` (an input of `consumer`) is a tensor only `consumer` sees."""
        op = t.op
        return (op in in_plan and len(op.outputs) == 1 and uses.get(t) == 1 and t not in fed
                and t not in fetched and op not in controls and not op.control_inputs and cpu(op)
                and cpu(consumer) and t.dtype.np in _FLOATS)

    def matmul_of(t, consumer):
        return t.op if t.op.type == "MatMul" and inner(t, consumer) else None

    def producer_of(t, consumer):
        """The MatMul or NHWC Conv2D whose output `t` only `consumer` sees, or None."""
        op = t.op
        if op.type == "Conv2D" and _attr_str(op, "data_format") == "NHWC" and inner(t, consumer):
            return op
        return matmul_of(t, consumer)

    out: dict = {}
    taken: set = set()
    for op in reversed(ops):            # a Relu claims its BiasAdd before the BiasAdd is a root
        if op in taken:
            continue
        if op.type in ("Relu", "BiasAdd"):
            chain = _bias_chain(op, producer_of, inner)
            if chain is None or any(p in taken for p in chain):
                continue
            first, bias_add = chain[0], chain[1]
            fused_ops = tuple(p.type for p in chain[1:])
            if first.type == "MatMul":
                attrs = {"transpose_a": bool(first.attrs.get("transpose_a", False)),
                         "transpose_b": bool(first.attrs.get("transpose_b", False)), "fused_ops": fused_ops}
            else:
                attrs = {k: first.attrs[k] for k in ("strides", "padding", "dilations", "data_format")
                         if k in first.attrs}
                attrs["fused_ops"] = fused_ops
            out[op] = Fusion("_Fused" + first.type, attrs, (first.inputs[0], first.inputs[1], bias_add.inputs[1]),
                             frozenset(), chain)
            taken.update(chain)
        elif op.type == "ApplyGradientDescent":
            var = op.inputs[0].op
            mm = matmul_of(op.inputs[2], op)
            if mm is None or mm in taken or var.op_def.resource != "variable" or not cpu(op):
                continue
            out[op] = Fusion("_MatMulApplyGradientDescent",
                             {"transpose_a": bool(mm.attrs.get("transpose_a", False)),
                              "transpose_b": bool(mm.attrs.get("transpose_b", False))},
                             (op.inputs[0], op.inputs[1], mm.inputs[0], mm.inputs[1]), frozenset({0}), (mm, op))
            taken.update((mm, op))
    if plan.has_control_flow:
        return out          # control edges must not cross frames: updates just copy when they must
    root_of = {p: root for root, f in out.items() for p in f.parts}
    consumers: dict = {}    # op -> the ops that run after it (data, control, and edges added here)
    for root, f in out.items():
        if f.type == "_MatMulApplyGradientDescent":
            first = _readers_first(root, f.inputs[0].op, in_plan, ops, consumers, root_of)
            if first:
                out[root] = dataclasses.replace(f, extra_control=first)
                for r in first:
                    consumers.setdefault(r, []).append(root)
    return out


def _attr_str(op, name, default="NHWC"):
    v = op.attrs.get(name, default) or default
    return v.decode() if isinstance(v, bytes) else v


def _bias_chain(op, producer_of, inner):
    """(MatMul or Conv2D, BiasAdd[, Relu]) ending at `op`, or None."""
    if op.type == "Relu":
        t = op.inputs[0]
        if t.op.type != "BiasAdd" or not inner(t, op):
            return None
        bias_add, tail = t.op, (op,)
    else:
        bias_add, tail = op, ()
    if _attr_str(bias_add, "data_format") != "NHWC":
        return None
    first = producer_of(bias_add.inputs[0], bias_add)
    if first is None or bias_add.inputs[0].shape.rank != (2 if first.type == "MatMul" else 4):
        return None
    return (first, bias_add) + tail


def _readers_first(update, var, in_plan, ops, consumers, root_of) -> tuple:
    """The plan's other readers of `var` (the fused ops running them, for readers fused away) that
    neither depend on `update` nor precede it already: making the update wait for them lets it
    write the variable in place, instead of copying a buffer a running reader still holds. (Every
    reader sees the value of the step either way.)"""
    readers, seen = [], set()
    stack = [var.outputs[0]]
    while stack:                        # through the variable's read Identities to who uses them
        t = stack.pop()
        for c in t._consumers:
            if c in seen or c not in in_plan or c is update:
                continue
            seen.add(c)
            if not any(x is t and i not in c.op_def.ref_inputs for i, x in enumerate(c.inputs)):
                continue
            if c.type == "Identity":
                stack.append(c.outputs[0])
            else:
                readers.append(c)
    if not readers:
        return ()
    # Ops after `update` (data and control edges, and edges added for earlier updates: a new edge
    # must not close a cycle through them) and ops before it.
    if not consumers:
        for op in ops:
            for t in op.inputs:
                consumers.setdefault(t.op, []).append(op)
            for c in op.control_inputs:
                consumers.setdefault(c, []).append(op)
    after = _reach(update, lambda o: consumers.get(o, ()))
    before = _reach(update, lambda o: [t.op for t in o.inputs] + list(o.control_inputs))
    first = []
    for r in readers:
        r = root_of.get(r, r)
        if r not in after and r not in before and r is not update and r not in first:
            first.append(r)
    return tuple(first)


def _reach(start, nexts) -> set:
    seen: set = set()
    stack = list(nexts(start))
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        stack.extend(nexts(o))
    return seen
