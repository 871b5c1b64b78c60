"""`from tensorflow.python.framework import ops` with `tensorflow` replaced by `actorflow`: the module
path TF-1.x programs (the tensorflow_cookbook's, nearly all of them) use for `ops.reset_default_graph()`."""
import actorflow as af
from actorflow.python.framework import ops


def test_ops_reset_default_graph_starts_a_new_default_graph():
    af.constant(1.0, name="before")
    old = af.get_default_graph()
    ops.reset_default_graph()
    assert ops.get_default_graph() is af.get_default_graph() is not old
    assert af.get_default_graph().get_operations() == []
    assert af.constant(2.0, name="before").name == "before:0"


def test_ops_names_are_actorflows():
    for name in ops.__all__:
        assert getattr(ops, name) is getattr(af, name), name
