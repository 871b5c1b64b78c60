"""Deprecated TF-1.x names that tf.compat.v1 (TensorFlow 2.21) still exports, over current ops.

Only the names TF 2.21's tf.compat.v1 still has are here: `mul`, `sub`, `neg`, `select` and
`batch_matmul` were removed before TF 1.15 and are absent from it, so they are absent here too.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import add_to_collection, convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.variables import global_variables, local_variables_initializer, variables_initializer

__all__ = ["arg_max", "arg_min", "initialize_local_variables", "initialize_variables", "all_variables",
           "log_sigmoid", "matrix_transpose", "shape_n", "rint", "add_to_collections", "op_scope", "variable_op_scope"]


def arg_max(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002 (TF's name)
    """The index of the largest value along `dimension` (tf.compat.v1.arg_max, deprecated for argmax)."""
    return math_ops.argmax(input, axis=dimension, output_type=output_type, name=name)


def arg_min(input, dimension, output_type=dtypes.int64, name=None):  # noqa: A002 (TF's name)
    """The index of the smallest value along `dimension` (tf.compat.v1.arg_min, deprecated for argmin)."""
    return math_ops.argmin(input, axis=dimension, output_type=output_type, name=name)


def initialize_local_variables():
    """tf.compat.v1.initialize_local_variables: the deprecated name of local_variables_initializer."""
    return local_variables_initializer()


def initialize_variables(var_list, name="init"):
    """tf.compat.v1.initialize_variables: the deprecated name of variables_initializer."""
    return variables_initializer(var_list, name=name)


def all_variables():
    """tf.compat.v1.all_variables: the deprecated name of global_variables."""
    return global_variables()


def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x| (tf.math.log_sigmoid)."""
    x = convert_to_tensor(x)
    return math_ops.negative(nn_ops.softplus(math_ops.negative(x)), name=name)


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Swaps the last two axes (tf.linalg.matrix_transpose); needs a known rank of at least 2."""
    a = convert_to_tensor(a)
    rank = a.shape.ndims
    if rank is None or rank < 2:
        raise ValueError(f"matrix_transpose needs a tensor of known rank >= 2, got shape {a.shape} ('{a.name}')")
    return array_ops.transpose(a, list(range(rank - 2)) + [rank - 1, rank - 2], name=name)


def shape_n(input, out_type=dtypes.int32, name=None):  # noqa: A002 (TF's name)
    """The shapes of several tensors (tf.shape_n)."""
    return [array_ops.shape(x, out_type=out_type) for x in input]


def rint(x, name=None):
    """Rounds half to even (tf.math.rint; the same values as af.round)."""
    return math_ops.round(x, name=name)



def add_to_collections(names, value):
    """Adds `value` to each collection in `names` (tf.compat.v1.add_to_collections)."""
    for n in ([names] if isinstance(names, str) else names):
        add_to_collection(n, value)


def op_scope(values, name, default_name=None):
    """TF 1.x's deprecated spelling of `name_scope(name, default_name, values)` (tf.compat.v1.op_scope):
    a context manager yielding the scope's name ("foo/")."""
    from actorflow.graph.graph import name_scope
    return name_scope(name, default_name, values)


def variable_op_scope(values, name_or_scope, default_name=None, initializer=None, regularizer=None,
                      caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                      use_resource=None, constraint=None):
    """TF 1.x's deprecated spelling of `variable_scope(name_or_scope, default_name, values, ...)`
    (tf.compat.v1.variable_op_scope): yields the VariableScope."""
    from actorflow.graph.variable_scope import variable_scope
    return variable_scope(name_or_scope, default_name=default_name, values=values, initializer=initializer,
                          regularizer=regularizer, caching_device=caching_device, partitioner=partitioner,
                          custom_getter=custom_getter, reuse=reuse, dtype=dtype, use_resource=use_resource,
                          constraint=constraint)
