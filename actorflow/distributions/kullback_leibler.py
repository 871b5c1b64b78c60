"""KL divergences between distributions (tf.distributions.kl_divergence, RegisterKL).

A KL function is registered per pair of Distribution classes; `kl_divergence(a, b)` takes the one
registered for the nearest pair of ancestors of their types (the smallest sum of the two MRO
distances), so that KL(Exponential || Gamma) uses the Gamma-Gamma function, Exponential being a
Gamma."""
from __future__ import annotations

from actorflow.graph.graph import control_dependencies, name_scope
from actorflow.graph.ops import check_ops, math_ops
from actorflow.graph.ops.constant import identity

__all__ = ["RegisterKL", "kl_divergence", "cross_entropy"]

_DIVERGENCES: dict = {}


def _registered_kl(type_a, type_b):
    best, best_distance = None, None
    for i, parent_a in enumerate(type_a.__mro__):
        for j, parent_b in enumerate(type_b.__mro__):
            fn = _DIVERGENCES.get((parent_a, parent_b))
            if fn is not None and (best_distance is None or i + j < best_distance):
                best, best_distance = fn, i + j
    return best


def kl_divergence(distribution_a, distribution_b, allow_nan_stats=True, name=None):
    """KL(distribution_a || distribution_b), per batch member (tf.distributions.kl_divergence).
    With allow_nan_stats=False a NaN in the result fails the step with an InvalidArgumentError
    naming both distributions. A NotImplementedError when no KL is registered for the two types."""
    kl_fn = _registered_kl(type(distribution_a), type(distribution_b))
    if kl_fn is None:
        raise NotImplementedError(
            f"No KL(distribution_a || distribution_b) registered for distribution_a type "
            f"{type(distribution_a).__name__} and distribution_b type {type(distribution_b).__name__}")
    with name_scope("KullbackLeibler"):
        kl_t = kl_fn(distribution_a, distribution_b, name=name)
        if allow_nan_stats:
            return kl_t
        kl_t = identity(kl_t, name="kl")
        check = check_ops.Assert(
            math_ops.logical_not(math_ops.reduce_any(math_ops.is_nan(kl_t))),
            [f"KL calculation between {distribution_a.name} and {distribution_b.name} returned NaN values "
             "(and was called with allow_nan_stats=False). Values:", kl_t])
        with control_dependencies([check]):
            return identity(kl_t, name="checked_kl")


def cross_entropy(ref, other, allow_nan_stats=True, name=None):
    """H[ref, other] = entropy(ref) + KL(ref || other)."""
    with name_scope(name or "cross_entropy"):
        return ref.entropy() + kl_divergence(ref, other, allow_nan_stats=allow_nan_stats)


class RegisterKL:
    """Decorator registering a KL function for a pair of Distribution classes
    (tf.distributions.RegisterKL): `@RegisterKL(Normal, Normal) def kl(a, b, name=None): ...`.
    Registering the same pair twice is a ValueError."""

    def __init__(self, dist_cls_a, dist_cls_b):
        self._key = (dist_cls_a, dist_cls_b)

    def __call__(self, kl_fn):
        if not callable(kl_fn):
            raise TypeError(f"kl_fn must be callable, received: {kl_fn}")
        if self._key in _DIVERGENCES:
            raise ValueError(f"KL({self._key[0].__name__} || {self._key[1].__name__}) has already been registered "
                             f"to: {_DIVERGENCES[self._key]}")
        _DIVERGENCES[self._key] = kl_fn
        return kl_fn
