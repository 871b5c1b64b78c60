"""Op fusion: a pass over a plan that merges short chains of ops into one kernel (TF grappler's
remapper does the same for MatMul + BiasAdd + Relu).

Six patterns, on the CPU, for float32/float64:

- ``MatMul -> BiasAdd [-> Relu]`` becomes one ``_FusedMatMul``: each row block of the product gets
  its bias and ReLU right after its GEMM, while it is still in cache.
- ``MatMul -> ReluGrad`` (the backward pass through a dense layer into the ReLU below it) becomes
  one ``_FusedMatMul`` with fused_ops ("ReluGrad",) and the ReLU's features as third input: each
  block of the input gradient is masked right after its GEMM, with no pass or hop of its own.
- ``Conv2D -> BiasAdd [-> Relu]`` (NHWC) becomes one ``_FusedConv2D``, the same per block of
  output rows; a ``MaxPool`` of its output whose windows tile it (LeNet's 2x2, stride 2) joins as a
  second output, each block pooled while it is still in cache, its consumers reading that output.
- ``MatMul -> ApplyGradientDescent`` (the SGD update of a dense layer's kernel) becomes one
  ``_MatMulApplyGradientDescent``: ``var -= lr * op(a) @ op(b)`` is a single GEMM accumulating into
  the variable, so no gradient buffer is written, read back and thrown away.
- ``MaxPoolGrad -> ReluGrad`` (NHWC), where the ReluGrad's features are the pool's input (the
  backward pass of ``max_pool(relu(...))``), becomes one ``_FusedMaxPoolGrad`` that applies the
  ReLU mask as it writes each window's gradient; a ``BiasAddGrad`` of its result joins it as a
  second output (the bias gradient summed in the same pass), its consumers reading that output.
  Three passes over the layer's activations become one. Without the pool, ``ReluGrad ->
  BiasAddGrad`` becomes one ``_FusedReluGrad`` the same way (dense layers, unpooled convolutions).

A chain fuses only when its inner tensors are invisible: each is consumed once, by the next op of
the chain, and is neither fed nor fetched; no inner op has control edges in or out. The result is
a `Fusion` per surviving (root) node, and the `fuse` pass replaces the root by one node of the fused
type (keeping its name, outputs and consumers) and drops the inner nodes: the runtime never learns
that a fusion happened, beyond the `parts` it names in errors and traces. A node that joins as an
extra output (a pooled conv output, a bias gradient) is a sibling, not an inner node: it must be
neither fetched nor tied by control edges, and its consumers are rerouted to the fused node's
output 1.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from actorflow.scheduler.ir import Bound, PlanIR, Ref

__all__ = ["Fusion", "find_fusions", "fuse"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True, slots=True)
class Fusion:
    type: str                   # the fused kernel's op type
    attrs: dict                 # its attributes
    inputs: tuple               # its inputs (Ref | Feed | Literal | Bound), in the kernel's argument order
    parts: tuple                # the original nodes, in chain order (then those of extra_outputs)
    extra_control: tuple = ()   # nodes that must run first (readers of an updated variable)
    extra_outputs: tuple = ()   # parts whose (single) output the fused node adds as its output 1, 2, ...


def fuse(ir: PlanIR, options=None) -> PlanIR:
    """The `fuse` pass: every fusable chain of `ir` becomes one node."""
    fusions = find_fusions(ir)
    if not fusions:
        return ir
    inner = {p.name for root, f in fusions.items() for p in f.parts if p is not root}
    moved = {}                  # Ref to an absorbed node's output -> the fused node's extra output
    nodes = []
    for n in ir.nodes:
        if n.name in inner:
            continue
        f = fusions.get(n)
        if f is not None:
            extra = tuple(c.name for c in f.extra_control if c.name not in n.control)
            outputs = n.outputs
            for e in f.extra_outputs:
                moved[Ref(e.name, 0)] = Ref(n.name, len(outputs))
                outputs += e.outputs
            n = n.replace(type=f.type, attrs=f.attrs, inputs=f.inputs, control=n.control + extra,
                          outputs=outputs, parts=tuple((p.name, p.type) for p in f.parts))
        nodes.append(n)
    ir = ir.replace(nodes=tuple(nodes))
    return ir.substitute(values=moved) if moved else ir


def find_fusions(ir, on_cpu: Callable | None = None) -> dict:
    """{root node: Fusion} for the fusable chains of `ir` (a PlanIR, or a pruned Plan). A node runs
    on the CPU when its device says so (or when `on_cpu(node)` does)."""
    if not isinstance(ir, PlanIR):
        from actorflow.scheduler.lower import from_plan
        ir = from_plan(ir)
    nodes = ir.nodes
    by = ir.by_name()
    fetched = {x for x in ir.fetches if type(x) is Ref}
    uses: dict = {}                 # Ref -> number of (consumer, slot) edges
    controls = set(ir.targets)      # nodes something waits on through a control edge
    for n in nodes:
        for x in n.inputs:
            if type(x) is Ref:
                uses[x] = uses.get(x, 0) + 1
        controls.update(n.control)
    cpu = on_cpu or (lambda n: n.device == "CPU")

    def inner(x, consumer):
        """The producer of input `x` of `consumer` when only `consumer` sees its value, else None."""
        if type(x) is not Ref:
            return None              # fed, constant or bound: not an inner tensor
        n = by[x.node]
        if (len(n.outputs) == 1 and uses.get(x) == 1 and x not in fetched and n.name not in controls
                and not n.control and cpu(n) and cpu(consumer) and n.outputs[0][0].np in _FLOATS):
            return n
        return None

    def matmul_of(x, consumer):
        n = inner(x, consumer)
        return n if n is not None and n.type == "MatMul" and not n.parts else None

    def producer_of(x, consumer):
        """The MatMul or NHWC Conv2D whose output only `consumer` sees, or None."""
        n = inner(x, consumer)
        if n is not None and n.type == "Conv2D" and not n.parts and _attr_str(n, "data_format") == "NHWC":
            return n
        return matmul_of(x, consumer)

    consumers_of: dict = {}         # Ref -> its consumer nodes
    for n in nodes:
        for x in n.inputs:
            if type(x) is Ref:
                consumers_of.setdefault(x, []).append(n)

    out: dict = {}
    taken: set = set()
    for n in reversed(nodes):           # a Relu claims its BiasAdd before the BiasAdd is a root
        if n.name in taken or n.parts:
            continue
        if n.type in ("Relu", "BiasAdd"):
            chain = _bias_chain(n, producer_of, inner)
            if chain is None or any(p.name in taken for p in chain):
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
            pool = _tiling_max_pool(n, consumers_of, fetched, controls, taken, cpu) if first.type == "Conv2D" else None
            extra = ()
            if pool is not None:
                extra = (pool,)
                attrs["fused_ops"] = fused_ops + ("MaxPool",)
                attrs["pool_ksize"] = tuple(int(v) for v in pool.attrs["ksize"])
            out[n] = Fusion("_Fused" + first.type, attrs, (first.inputs[0], first.inputs[1], bias_add.inputs[1]),
                            chain + extra, extra_outputs=extra)
            taken.update(p.name for p in chain + extra)
        elif n.type == "ReluGrad":
            # A pool's gradient first (one pass for MaxPoolGrad, ReLU mask and bias gradient); else the
            # mask goes into the GEMM that made the gradient (no pass of its own); else ReluGrad and
            # BiasAddGrad share one pass.
            f = _pool_grad_fusion(n, inner, consumers_of, fetched, controls, taken, cpu)
            if f is None:
                mm = matmul_of(n.inputs[0], n)
                if mm is not None and mm.name not in taken and mm.outputs[0][1].rank == 2:
                    f = Fusion("_FusedMatMul", {"transpose_a": bool(mm.attrs.get("transpose_a", False)),
                                                "transpose_b": bool(mm.attrs.get("transpose_b", False)),
                                                "fused_ops": ("ReluGrad",)},
                               (mm.inputs[0], mm.inputs[1], n.inputs[1]), (mm, n))
            if f is None:
                f = _relu_bias_grad_fusion(n, consumers_of, fetched, controls, taken, cpu)
            if f is not None:
                out[n] = f
                taken.update(p.name for p in f.parts)
        elif n.type == "ApplyGradientDescent":
            var = n.inputs[0]
            mm = matmul_of(n.inputs[2], n)
            if mm is None or mm.name in taken or type(var) is not Bound or var.resource != "variable" or not cpu(n):
                continue
            out[n] = Fusion("_MatMulApplyGradientDescent",
                            {"transpose_a": bool(mm.attrs.get("transpose_a", False)),
                             "transpose_b": bool(mm.attrs.get("transpose_b", False))},
                            (n.inputs[0], n.inputs[1], mm.inputs[0], mm.inputs[1]), (mm, n))
            taken.update((mm.name, n.name))
    if ir.has_control_flow:
        return out          # control edges must not cross frames: updates just copy when they must
    root_of = {p.name: root for root, f in out.items() for p in f.parts}
    consumers: dict = {}    # node name -> the nodes that run after it (data, control, and edges added here)
    for root, f in list(out.items()):
        if f.type == "_MatMulApplyGradientDescent":
            first = _readers_first(root, f.inputs[0].name, ir, by, consumers, root_of)
            if first:
                out[root] = Fusion(f.type, f.attrs, f.inputs, f.parts, first)
                for r in first:
                    consumers.setdefault(r.name, []).append(root.name)
    return out


def _attr_str(n, name, default="NHWC"):
    v = n.attrs.get(name, default) or default
    return v.decode() if isinstance(v, bytes) else v


def _bias_chain(n, producer_of, inner):
    """(MatMul or Conv2D, BiasAdd[, Relu]) nodes ending at `n`, or None."""
    if n.type == "Relu":
        bias_add = inner(n.inputs[0], n)
        if bias_add is None or bias_add.type != "BiasAdd" or bias_add.parts:
            return None
        tail = (n,)
    else:
        bias_add, tail = n, ()
    if _attr_str(bias_add, "data_format") != "NHWC":
        return None
    first = producer_of(bias_add.inputs[0], bias_add)
    if first is None or first.outputs[0][1].rank != (2 if first.type == "MatMul" else 4):
        return None
    return (first, bias_add) + tail


def _tiling_max_pool(root, consumers_of, fetched, controls, taken, cpu):
    """An NHWC MaxPool of `root`'s 4-D output whose windows tile it (window == stride, and the
    output's static height and width multiples of it), that nobody fetches or waits on: the fused
    convolution pools each block of its output while it is in cache. None when there is none."""
    (dtype, shape), = root.outputs
    if shape.rank != 4:
        return None
    h, w = shape.dims[1:3]
    for c in consumers_of.get(Ref(root.name, 0), ()):
        if (c.type != "MaxPool" or c.parts or c.name in taken or _attr_str(c, "data_format") != "NHWC"
                or Ref(c.name, 0) in fetched or c.name in controls or c.control or not cpu(c)
                or c.outputs[0][0] != dtype):
            continue
        k = tuple(int(v) for v in c.attrs.get("ksize", ()))
        st = tuple(int(v) for v in c.attrs.get("strides", ()))
        if (len(k) == 4 and k == st and k[0] == k[3] == 1 and h is not None and w is not None
                and h % k[1] == 0 and w % k[2] == 0):
            return c
    return None


def _pool_grad_fusion(relu_grad, inner, consumers_of, fetched, controls, taken, cpu):
    """The _FusedMaxPoolGrad rooted at `relu_grad`, or None: its gradient input must come from an
    NHWC MaxPoolGrad that only it reads, and its features must be that pool's input (the ReLU's
    output, as the gradient of ``max_pool(relu(x))`` wires it). A BiasAddGrad of its output that
    nobody fetches or waits on joins as a second output."""
    mpg = inner(relu_grad.inputs[0], relu_grad)
    if (mpg is None or mpg.type != "MaxPoolGrad" or mpg.parts or mpg.name in taken
            or _attr_str(mpg, "data_format") != "NHWC" or relu_grad.inputs[1] != mpg.inputs[0]
            or type(mpg.inputs[0]) is not Ref or mpg.outputs[0][1].rank != 4):
        return None
    attrs = {k: mpg.attrs[k] for k in ("ksize", "strides", "padding", "data_format") if k in mpg.attrs}
    extra = _bias_grad_of(relu_grad, consumers_of, fetched, controls, taken, cpu)
    attrs["fused_ops"] = ("ReluGrad",) + tuple(c.type for c in extra)
    return Fusion("_FusedMaxPoolGrad", attrs, mpg.inputs, (mpg, relu_grad) + extra, extra_outputs=extra)


def _bias_grad_of(relu_grad, consumers_of, fetched, controls, taken, cpu) -> tuple:
    """(the BiasAddGrad of `relu_grad`'s output,) when one can join it as a second output (channels
    last, nobody fetches it or waits on it), else ()."""
    if not cpu(relu_grad):
        return ()
    for c in consumers_of.get(Ref(relu_grad.name, 0), ()):
        if (c.type == "BiasAddGrad" and not c.parts and c.name not in taken and _attr_str(c, "data_format") == "NHWC"
                and Ref(c.name, 0) not in fetched and c.name not in controls and not c.control and cpu(c)
                and c.outputs[0][0] == relu_grad.outputs[0][0] and relu_grad.outputs[0][0].np in _FLOATS):
            return (c,)
    return ()


def _relu_bias_grad_fusion(relu_grad, consumers_of, fetched, controls, taken, cpu):
    """The _FusedReluGrad rooted at `relu_grad` (the BiasAddGrad of its output as a second output,
    summed in the same pass), or None when there is no such BiasAddGrad."""
    extra = _bias_grad_of(relu_grad, consumers_of, fetched, controls, taken, cpu)
    if not extra:
        return None
    return Fusion("_FusedReluGrad", {"fused_ops": ("BiasAddGrad",)}, relu_grad.inputs, (relu_grad,) + extra,
                  extra_outputs=extra)


def _readers_first(update, var_name, ir, by, consumers, root_of) -> tuple:
    """The plan's other readers of variable `var_name` (the fused nodes running them, for readers
    fused away) that neither depend on `update` nor precede it already: making the update wait for
    them lets it write the variable in place, instead of copying a buffer a running reader still
    holds. (Every reader sees the value of the step either way.)"""
    if var_name not in by:
        return ()                       # nothing in the plan reads the variable's value
    if not consumers:
        for n in ir.nodes:
            for x in n.inputs:
                if type(x) is Ref:
                    consumers.setdefault(x.node, []).append(n.name)
            for c in n.control:
                consumers.setdefault(c, []).append(n.name)
    readers, seen = [], set()
    stack = [var_name]
    while stack:                        # through the variable's read Identities to who uses them
        name = stack.pop()
        for c in consumers.get(name, ()):
            if c in seen or c == update.name:
                continue
            seen.add(c)
            cn = by[c]
            if not any(type(x) is Ref and x.node == name for x in cn.inputs):
                continue                # a control edge, not a read
            if cn.type == "Identity":
                stack.append(c)
            else:
                readers.append(cn)
    if not readers:
        return ()
    # Nodes after `update` (data and control edges, and edges added for earlier updates: a new edge
    # must not close a cycle through them) and nodes before it.
    after = _reach(update.name, lambda o: consumers.get(o, ()))
    before = _reach(update.name, lambda o: [x.node for x in by[o].inputs if type(x) is Ref] + list(by[o].control))
    first = []
    for r in readers:
        r = root_of.get(r.name, r)
        if r.name not in after and r.name not in before and r is not update and r not in first:
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
