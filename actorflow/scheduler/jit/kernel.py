"""The ops the JIT pass puts in a plan, ``_JitCluster`` and ``_JitLoop``, and their CPU kernel.

Both are plan-internal: the JIT pass creates them (never a user's graph), with the spec to
compile and the interpreted form of the ops they replace as attributes.
"""
from __future__ import annotations

import dataclasses

from actorflow.graph.op_def import InferenceError, define_op, get_op_def
from actorflow.kernels.registry import register_kernel
from actorflow.scheduler.jit.cluster import MAX_BLAS_LOOP_GEMM, MAX_LOOP_GEMM
from actorflow.scheduler.jit.codegen import cluster_source, loop_source
from actorflow.scheduler.jit.compile import JitKernel
from actorflow.scheduler.jit.flat import flat_loop
from actorflow.scheduler.jit.spec import LoopSpec

__all__ = ["JIT_CLUSTER", "JIT_LOOP"]

JIT_CLUSTER = "_JitCluster"
JIT_LOOP = "_JitLoop"


def _no_infer(inputs, attrs):
    raise InferenceError("_JitCluster and _JitLoop ops are made by the JIT pass, not built in a graph")


for _name in (JIT_CLUSTER, JIT_LOOP):
    try:
        get_op_def(_name)
    except LookupError:
        define_op(_name, _no_infer, internal=True)


def _cost(*inputs):
    return 4 * sum(getattr(x, "size", 1) for x in inputs)


def make_kernel(attrs: dict) -> JitKernel:
    """The compiled form of a `_JitCluster`/`_JitLoop` op's spec (compiled now, or on the compile
    thread in async mode)."""
    spec = attrs["spec"]
    loop = isinstance(spec, LoopSpec)
    code = spec
    if loop and spec.shape_only:        # (the compiled function leaves those histories out)
        code = dataclasses.replace(spec, saves=tuple(r for k, r in enumerate(spec.saves) if k not in spec.shape_only),
                                   shape_only=())
    # (a static loop's gradient has no Shape ops to leave values out for: they are constants)
    flat = flat_loop(code) if loop and not spec.shape_only else None
    source = flat.source if flat is not None else loop_source(code) if loop else cluster_source(spec)
    if loop:
        outputs = tuple(spec.inputs[:spec.n_vars]) + tuple(
            (d, r + 1) for d, r in (_ref_type(spec, x) for x in spec.saves))
    else:
        outputs = tuple(_ref_type(spec, r) for r in spec.outputs)
    vary = attrs.get("vary")
    variant = None
    if vary is not None:
        def variant(places):
            spec = vary(places)
            if spec is None:
                return None
            return make_kernel(dict(attrs, spec=spec, vary=None,
                                    what=f"{attrs.get('what', '')} (sizes of 1 at {sorted(places)})"))
    return JitKernel(source, spec.inputs, outputs, attrs["interpreted"], attrs.get("mode"), attrs.get("what", ""),
                     loop=loop, n_vars=spec.n_vars if loop else None, shapes=spec.input_statics,
                     rows=tuple(_ref_statics(spec, r) for r in spec.saves) if loop else (),
                     gemms=_symbolic_gemms(spec), flat=flat, variant=variant,
                     shape_only=spec.shape_only if loop else (), random_ops=attrs.get("random_ops", ()) if loop else ())


def _symbolic_gemms(spec):
    """((m, n, k), limit) of each MatMul of `spec` with a symbolic dimension (symbolic.py): the
    kernel runs the interpreted ops for sizes of more than `limit` multiply-adds, those that would
    have kept a static MatMul from compiling (a bigger limit for one that calls cblas)."""
    out = []
    for node in spec.nodes:
        if node.op != "MatMul" or not node.statics or len(node.statics[0]) != 2:
            continue
        a = _ref_statics(spec, node.args[0])
        if len(a) != 2:
            continue
        m, n = node.statics[0]
        k = a[0] if node.attr("transpose_a") else a[1]
        if min(m, n, k) < -1:
            out.append(((m, n, k), MAX_BLAS_LOOP_GEMM if node.attr("blas") else MAX_LOOP_GEMM))
    return tuple(out)


def _ref_statics(spec, ref):
    if ref[0] == "i":
        return spec.input_statics[ref[1]] if ref[1] < len(spec.input_statics) else (-1,) * spec.inputs[ref[1]][1]
    st = spec.nodes[ref[1]].statics
    return st[ref[2]] if ref[2] < len(st) else (-1,) * spec.nodes[ref[1]].ranks[ref[2]]


def _ref_type(spec, ref):
    if ref[0] == "i":
        return tuple(spec.inputs[ref[1]])
    node = spec.nodes[ref[1]]
    return node.dtypes[ref[2]], node.ranks[ref[2]]


def _loop_cost(*inputs):
    """A loop's cost is unknown until it runs: it always goes to the kernel pool, never the
    runtime's loop, whose thread must stay free to fire the step's deadline (kernels/interrupt.py)."""
    return float("inf")


register_kernel(JIT_CLUSTER, "CPU", cost=_cost)(make_kernel)
register_kernel(JIT_LOOP, "CPU", cost=_loop_cost)(make_kernel)
