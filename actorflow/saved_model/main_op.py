"""The SavedModel main ops (tf.compat.v1.saved_model.main_op): what a loader runs after restoring
the variables, to initialize the rest."""
from __future__ import annotations

from actorflow.graph.graph import control_dependencies, get_default_graph
from actorflow.graph.ops.constant import group
from actorflow.graph.ops.lookup_ops import tables_initializer
from actorflow.graph.variables import local_variables_initializer

__all__ = ["main_op", "main_op_with_restore"]


def main_op():
    """One op initializing the local variables and the tables (tf.compat.v1.saved_model.main_op.main_op)."""
    return group(local_variables_initializer(), tables_initializer())


def main_op_with_restore(restore_op_name):
    """main_op, then the op named `restore_op_name` (a Saver's restore op, or its name) (TF's
    tf.compat.v1.saved_model.main_op_with_restore)."""
    g = get_default_graph()
    restore = g.as_graph_element(restore_op_name, allow_tensor=False) if isinstance(restore_op_name, str) \
        else restore_op_name
    with control_dependencies([main_op()]):
        return group(restore)
