"""custom_gradient (tf.custom_gradient, graph mode) and identity_n (tf.identity_n).

As TF builds it in graph mode: the function's outputs and its inputs pass together through one
IdentityN op whose gradient is overridden (Graph.gradient_override_map) by a function registered
under a unique name. That gradient calls the user's `grad_fn` on the outputs' gradients and gives
its results to the inputs; the function's own ops get no gradient through this path.
"""
from __future__ import annotations

import functools
import inspect
import itertools

from actorflow.graph import nest
from actorflow.graph.gradients import RegisterGradient
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.op_def import define_op

__all__ = ["custom_gradient", "identity_n", "grad_pass_through", "recompute_grad"]


def _infer_identity_n(inputs, attrs):
    return [(t.dtype, t.shape) for t in inputs]


IdentityN = define_op("IdentityN", _infer_identity_n, placement="pass_through")
IdentityN.gradient(lambda op, *grads: list(grads))

_ids = itertools.count()


def identity_n(input, name=None):  # noqa: A002
    """The tensors `input` returned as they are, through one op (tf.identity_n)."""
    xs = [convert_to_tensor(x) for x in input]
    out = IdentityN(*xs, T=tuple(x.dtype for x in xs), name=name or "IdentityN")
    return list(out) if isinstance(out, tuple) else [out]


def custom_gradient(f=None):
    """Decorator giving `f` its own gradient (tf.custom_gradient): `f(*x)` returns `(y, grad_fn)`,
    and `grad_fn(*dy)` returns the gradients of the inputs x (one per input, or a single one when f
    has one input). Graph mode; a `grad_fn` that takes `variables` (gradients of variables f uses)
    is not supported and raises."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        if kwargs:
            raise ValueError("The custom_gradient decorator only supports positional arguments (got keyword "
                             f"arguments {sorted(kwargs)})")
        g = get_default_graph()
        xs = [a if isinstance(a, Tensor) else convert_to_tensor(a) for a in args]
        result, grad_fn = f(*xs)
        if "variables" in inspect.signature(grad_fn).parameters:
            raise NotImplementedError("custom_gradient: a grad_fn taking `variables` (gradients of the variables "
                                      f"{f.__name__} reads) is not supported by actorflow")
        flat = [convert_to_tensor(r) for r in nest.flatten(result)]
        n = len(flat)
        name = f"CustomGradient-{next(_ids)}"

        @RegisterGradient(name)
        def _grad(op, *grads):
            dys = [gr for gr in grads[:n]]
            in_grads = grad_fn(*dys)
            in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
            if len(in_grads) != len(xs):
                raise ValueError(f"custom_gradient: the gradient function of {f.__name__} returned "
                                 f"{len(in_grads)} gradients for {len(xs)} inputs")
            return [None] * n + in_grads
        with g.gradient_override_map({"IdentityN": name}):
            outs = identity_n(flat + xs)
        return nest.pack_sequence_as(result, outs[:n])
    return wrapped


def grad_pass_through(f):
    """`f` with the identity as its gradient (tf.grad_pass_through): the returned function computes
    ``f(*args)`` and hands each output's gradient straight to the matching input, as if f were the
    identity (a straight-through estimator). f takes as many tensors as it returns."""
    @functools.wraps(f)
    def wrapped(*args):
        @custom_gradient
        def _pass_through(*xs):
            return f(*xs), lambda *dys: list(dys) if len(dys) > 1 else dys[0]
        return _pass_through(*args)
    return wrapped


def recompute_grad(f):
    """tf.recompute_grad: TF recomputes f's forward ops during the backward pass to save memory.
    actorflow returns f as it is: the values and gradients are the same, the forward activations
    are kept instead of recomputed."""
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        return f(*args, **kwargs)
    return wrapped
