"""af.initializers: tf.compat.v1.initializers, the initializer classes under their short names
and the ops that initialize the global, local or given variables."""
from __future__ import annotations

from actorflow.graph.initializers import constant_initializer as constant
from actorflow.graph.initializers import glorot_normal_initializer as glorot_normal
from actorflow.graph.initializers import glorot_uniform_initializer as glorot_uniform
from actorflow.graph.initializers import he_normal, he_uniform, lecun_normal, lecun_uniform
from actorflow.graph.initializers import identity_initializer as identity
from actorflow.graph.initializers import ones_initializer as ones
from actorflow.graph.initializers import orthogonal_initializer as orthogonal
from actorflow.graph.initializers import random_normal_initializer as random_normal
from actorflow.graph.initializers import random_uniform_initializer as random_uniform
from actorflow.graph.initializers import truncated_normal_initializer as truncated_normal
from actorflow.graph.initializers import uniform_unit_scaling_initializer as uniform_unit_scaling
from actorflow.graph.initializers import variance_scaling_initializer as variance_scaling
from actorflow.graph.initializers import zeros_initializer as zeros
from actorflow.graph.ops.lookup_ops import tables_initializer
from actorflow.graph.variables import global_variables_initializer, local_variables_initializer
from actorflow.graph.variables import variables_initializer as variables

__all__ = ["constant", "glorot_normal", "glorot_uniform", "ones", "random_normal", "random_uniform",
           "truncated_normal", "variance_scaling", "zeros", "orthogonal", "uniform_unit_scaling", "global_variables", "local_variables", "variables",
           "he_normal", "he_uniform", "lecun_normal", "lecun_uniform", "identity", "tables_initializer"]


def global_variables():
    """An op initializing every global variable (tf.compat.v1.initializers.global_variables)."""
    return global_variables_initializer()


def local_variables():
    """An op initializing every local variable, metric totals included
    (tf.compat.v1.initializers.local_variables)."""
    return local_variables_initializer()
