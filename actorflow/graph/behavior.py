"""TF 1.x's behaviour switches (tf.compat.v1.disable_v2_behavior and friends).

actorflow is TF 1.x's graph mode and nothing else: there is no eager execution, variables are
TF-1.x reference variables, control flow is Switch/Merge/Enter/Exit (v1), and `Tensor == Tensor`
compares identity. Programs written against `tf.compat.v1` begin with the switches that ask for
exactly that (`tf.disable_v2_behavior()`, `tf.disable_eager_execution()`), so those are accepted and
change nothing. The switches that would ask for TF 2's behaviour raise, naming what actorflow does
instead, rather than run the program under semantics it did not ask for.
"""
from __future__ import annotations

__all__ = ["disable_v2_behavior", "enable_v2_behavior", "disable_eager_execution", "enable_eager_execution",
           "executing_eagerly", "executing_eagerly_outside_functions", "disable_resource_variables",
           "enable_resource_variables", "resource_variables_enabled", "disable_control_flow_v2",
           "enable_control_flow_v2", "control_flow_v2_enabled", "disable_tensor_equality", "enable_tensor_equality",
           "disable_v2_tensorshape", "enable_v2_tensorshape"]


def _unsupported(what: str, instead: str):
    raise NotImplementedError(f"actorflow runs TF 1.x graph programs only: {what} is not available ({instead})")


def disable_v2_behavior() -> None:
    """Accepted: actorflow behaves as TF 1.x already (graph mode, v1 control flow, ref variables)."""


def enable_v2_behavior() -> None:
    _unsupported("TF 2 behavior (eager execution, tf.function)",
                 "build a graph and run it with af.Session, as in tf.compat.v1")


def disable_eager_execution() -> None:
    """Accepted: actorflow always builds graphs."""


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    _unsupported("eager execution", "ops build a graph; run it with af.Session().run or await sess.arun")


def executing_eagerly() -> bool:
    """False: ops add nodes to a graph (tf.executing_eagerly in graph mode)."""
    return False


def executing_eagerly_outside_functions() -> bool:
    return False


def disable_resource_variables() -> None:
    """Accepted: af.Variable is a TF-1.x reference variable."""


def enable_resource_variables() -> None:
    _unsupported("resource variables", "af.Variable has TF 1.x's reference-variable semantics")


def resource_variables_enabled() -> bool:
    return False


def disable_control_flow_v2() -> None:
    """Accepted: cond and while_loop build v1 control flow (Switch/Merge/Enter/Exit)."""


def enable_control_flow_v2() -> None:
    _unsupported("control flow v2 (functional If/While)",
                 "cond and while_loop build Switch/Merge/Enter/Exit, with the same results")


def control_flow_v2_enabled() -> bool:
    return False


def disable_tensor_equality() -> None:
    """Accepted: `==` on tensors compares identity, as in TF 1.x (use af.equal for values)."""


def enable_tensor_equality() -> None:
    _unsupported("element-wise `==` on tensors", "use af.equal; `==` compares identity as in TF 1.x")


def disable_v2_tensorshape() -> None:
    """Accepted, and changes nothing: a TensorShape's dimensions are ints or None."""


def enable_v2_tensorshape() -> None:
    """Accepted: a TensorShape's dimensions are already ints or None, as under TF 2's TensorShape."""
