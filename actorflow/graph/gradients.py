"""Reverse-mode automatic differentiation on the graph (tf.gradients).

Gradients are more graph: for every op between `xs` and `ys`, in reverse topological order, the
op's registered gradient function adds ops computing the gradients of its inputs from those of
its outputs. Gradients reaching one tensor along several paths are summed (AddN, or concatenated
when they are all IndexedSlices, so sparse gradients stay sparse).
"""
from __future__ import annotations

import enum
import heapq

from actorflow.graph.graph import Operation, Tensor, convert_to_tensor
from actorflow.graph.indexed_slices import IndexedSlices

__all__ = ["gradients", "aggregate_gradients", "RegisterGradient", "NotDifferentiable", "no_gradient",
           "NoGradient", "gradient_function", "hessians", "AggregationMethod", "UnconnectedGradients"]


class AggregationMethod:
    """How gradients reaching one tensor along several paths are combined (tf.AggregationMethod).
    actorflow always sums them with one AddN (ADD_N); the experimental methods are accepted and
    give the same sums."""
    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients(enum.StrEnum):
    """What `gradients` returns for an x that ys do not depend on (tf.UnconnectedGradients): None,
    or zeros of x's shape. A str, so "none" and "zero" are the same values."""
    NONE = "none"
    ZERO = "zero"


_AGGREGATION_METHODS = (AggregationMethod.ADD_N, AggregationMethod.EXPERIMENTAL_TREE,
                        AggregationMethod.EXPERIMENTAL_ACCUMULATE_N)

# Gradients registered by name (af.RegisterGradient) for names that are not op types: the targets
# of Graph.gradient_override_map and custom_gradient.
_REGISTRY: dict = {}


def _no_grad(op, *grads):
    return [None] * len(op.inputs)


class RegisterGradient:
    """Decorator registering the gradient function of an op type, or of a name that
    `Graph.gradient_override_map` maps op types to (tf.RegisterGradient). Registering a name twice
    is a KeyError, as in TF."""

    def __init__(self, op_type):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn):
        from actorflow.graph.op_def import find_op_def
        d = find_op_def(self._op_type)
        if self._op_type in _REGISTRY or (d is not None and d.grad_fn is not None):
            raise KeyError(f"Registering two gradient with name '{self._op_type}'! (Previous registration was "
                           "in actorflow)")
        if d is not None:
            d.grad_fn = fn
        else:
            _REGISTRY[self._op_type] = fn
        return fn


def NotDifferentiable(op_type):  # noqa: N802 - TF's name
    """Declares that ops of `op_type` have no gradient: every input gets None (tf.NotDifferentiable)."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    from actorflow.graph.op_def import find_op_def
    d = find_op_def(op_type)
    if d is not None:
        d.grad_fn = _no_grad
    else:
        _REGISTRY[op_type] = _no_grad


no_gradient = NoGradient = NotDifferentiable


def gradient_function(op):
    """The gradient function of `op`: its gradient override's (the `_gradient_op_type` attribute
    set under Graph.gradient_override_map), else its op type's; None when it has none."""
    attrs = getattr(op, "attrs", None)              # (a while loop's LoopUnit has none)
    override = attrs.get("_gradient_op_type") if attrs else None
    if override is not None:
        from actorflow.graph.op_def import find_op_def
        d = find_op_def(override)
        fn = _REGISTRY.get(override) or (d.grad_fn if d is not None else None)
        if fn is None:
            raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type}): its gradient "
                              f"override '{override}' is not registered (af.RegisterGradient)")
        return fn
    return op.op_def.grad_fn


def _as_list(x):
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _x_tensor(x) -> Tensor:
    """The tensor to differentiate with respect to: a Variable's ref, so every read of it counts."""
    if hasattr(x, "_ref"):
        return x._ref()
    if isinstance(x, Tensor):
        return x
    return convert_to_tensor(x)


def aggregate_gradients(grads: list, name: str = None):
    """Sums a list of gradients (Tensors and/or IndexedSlices); None when the list is empty."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    from actorflow.graph.ops import array_ops, math_ops
    if all(isinstance(g, IndexedSlices) for g in grads):
        return IndexedSlices(array_ops.concat([g.values for g in grads], 0),
                             array_ops.concat([math_ops.cast(g.indices, grads[0].indices.dtype) for g in grads], 0),
                             grads[0].dense_shape)
    dense = [array_ops.indexed_slices_to_dense(g) if isinstance(g, IndexedSlices) else g for g in grads]
    return math_ops.add_n(dense, name=name)


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, stop_gradients=None, unconnected_gradients="none"):
    """Symbolic partial derivatives of sum(ys) with respect to each of xs (tf.gradients).

    Returns one entry per x: a Tensor, an IndexedSlices (sparse, e.g. through `gather`), or None
    when x does not affect ys (or zeros with `unconnected_gradients="zero"`). Raises LookupError
    naming the op type when a gradient is needed through an op that has none registered.
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
    if aggregation_method is not None and aggregation_method not in _AGGREGATION_METHODS:
        raise ValueError(f"Invalid aggregation_method specified {aggregation_method!r}: expected one of "
                         "af.AggregationMethod's")
    ys = [convert_to_tensor(y) if not isinstance(y, Tensor) else y for y in _as_list(ys)]
    xs = [_x_tensor(x) for x in _as_list(xs)]
    grad_ys = _as_list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    stop = {(_x_tensor(s) if not isinstance(s, Tensor) else s) for s in _as_list(stop_gradients or [])}
    stop_ops = {t.op for t in stop}
    g = ys[0].graph
    from actorflow.graph.ops import array_ops

    with g.name_scope(name):
        # Ops reachable forward from xs (through data edges).
        fwd: set[Operation] = set()
        stack = [c for x in xs for c in x._consumers]
        while stack:
            op = stack.pop()
            if op in fwd:
                continue
            fwd.add(op)
            for t in op.outputs:
                stack.extend(t._consumers)
        # Of those, the ones that reach ys.
        between: set[Operation] = set()
        stack = [y.op for y in ys if y.op in fwd]
        while stack:
            op = stack.pop()
            if op in between:
                continue
            between.add(op)
            for t in op.inputs:
                if t.op in fwd:
                    stack.append(t.op)

        grads: dict[Tensor, list] = {}
        for y, gy in zip(ys, grad_ys):
            if gy is None:
                if not (y.dtype.is_floating or y.dtype.is_complex):
                    raise TypeError(f"Gradients of a {y.dtype.name} tensor ('{y.name}') are not defined; "
                                    "ys must be floating point or complex")
                gy = array_ops.ones_like(y, name=f"grad_ys_{len(grads)}")
            elif not isinstance(gy, (Tensor, IndexedSlices)):
                gy = convert_to_tensor(gy, dtype=y.dtype)
            grads.setdefault(y, []).append(gy)

        # >>> control-flow hook (actorflow/graph/control_flow_grad.py) >>>
        # Each while loop is differentiated as one unit (a LoopUnit: inputs are its Enters' inputs,
        # outputs its Exits), and gradient ops are built in contexts mirroring their forward op's.
        # A no-op for graphs without control flow.
        from actorflow.graph import control_flow_grad
        cf = control_flow_grad.GradientState.for_gradients(between, fwd, xs, ys)
        unit = cf.unit_of if cf is not None else _same_op
        if cf is not None:
            between = cf.units
        # <<< control-flow hook <<<
        pending: dict[Operation, int] = {op: 0 for op in between}
        for op in between:
            for t in op.inputs:
                if unit(t.op) in between:
                    pending[unit(t.op)] += 1
        # A heap on -id: latest-created first, a deterministic reverse topological order.
        ready = [(-op._id, op) for op in between if pending[op] == 0]
        heapq.heapify(ready)
        while ready:
            op = heapq.heappop(ready)[1]
            out_grads = []
            for t in op.outputs:
                lst = grads.get(t)
                if lst and len(lst) > 1:
                    agg = aggregate_gradients(lst)
                    grads[t] = [agg]
                    out_grads.append(agg)
                else:
                    out_grads.append(lst[0] if lst else None)
            has_grad = any(gr is not None for gr in out_grads) and op not in stop_ops
            if has_grad and any(t.dtype.is_differentiable for t in op.inputs):
                fn = gradient_function(op)
                if fn is None:
                    raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type})")
                with g.name_scope(op.name + "_grad"):
                    with g.device(op.device or None) if colocate_gradients_with_ops else _nullcontext():
                        with cf.grad_context(op) if cf is not None else _nullcontext():   # control-flow hook
                            in_grads = fn(op, *out_grads)
                in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
                if len(in_grads) != len(op.inputs):
                    raise ValueError(f"Gradient function for op '{op.name}' ({op.type}) returned {len(in_grads)} "
                                     f"gradients, expected {len(op.inputs)}")
                for t, gr in zip(op.inputs, in_grads):
                    if gr is None or not t.dtype.is_differentiable or t in stop:
                        continue
                    grads.setdefault(t, []).append(gr)
            for t in op.inputs:
                u = unit(t.op)
                if u in pending:
                    pending[u] -= 1
                    if pending[u] == 0:
                        heapq.heappush(ready, (-u._id, u))

        result = []
        for x in xs:
            gx = aggregate_gradients(grads.get(x, []))
            if gx is None and unconnected_gradients == "zero":
                gx = array_ops.zeros_like(x)
            result.append(gx)
    return result


def hessians(ys, xs, name="hessians", colocate_gradients_with_ops=False, gate_gradients=False,
             aggregation_method=None):
    """The Hessian of sum(ys) with respect to each x of `xs` (tf.hessians): for an x of shape S, a
    tensor of shape S + S whose entry [i, j] is d2 sum(ys) / dx_i dx_j, the gradient of each element
    of the gradient. TF builds a while loop over the elements; for an x of static size this builds
    one gradient per element (no loop), else it raises ValueError."""
    from actorflow.graph.ops import array_ops
    kwargs = {"colocate_gradients_with_ops": colocate_gradients_with_ops, "gate_gradients": gate_gradients,
              "aggregation_method": aggregation_method}
    xs = [_x_tensor(x) for x in _as_list(xs)]
    g = xs[0].graph if xs else None
    out = []
    with (g.name_scope(name) if g is not None else _nullcontext()):
        for x, grad in zip(xs, gradients(ys, xs, **kwargs)):
            n = x.shape.num_elements()
            if n is None:
                raise ValueError(f"hessians: x '{x.name}' must have a static shape, got {x.shape} (actorflow builds "
                                 "one gradient per element)")
            if grad is None:
                out.append(None)
                continue
            if isinstance(grad, IndexedSlices):
                grad = array_ops.indexed_slices_to_dense(grad)
            flat = array_ops.reshape(grad, [-1])
            rows = []
            for j in range(n):
                (second,) = gradients(flat[j], [x], unconnected_gradients="zero", **kwargs)
                if isinstance(second, IndexedSlices):
                    second = array_ops.indexed_slices_to_dense(second)
                rows.append(second)
            shape = x.shape.as_list()
            h = array_ops.stack(rows) if rows else array_ops.zeros([0] + shape, x.dtype)
            out.append(array_ops.reshape(h, shape + shape))
    return out


def _same_op(op):
    return op


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False
