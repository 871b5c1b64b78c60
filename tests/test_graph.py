"""Graph construction: default graphs, names, scopes, control dependencies, lookup, serialization."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")


def test_default_graph_stack_and_reset():
    g = af.get_default_graph()
    h = af.Graph()
    with h.as_default():
        assert af.get_default_graph() is h
        c = af.constant(1.0)
        assert c.graph is h
    assert af.get_default_graph() is g


def test_reset_default_graph_is_refused_inside_a_graph_scope():
    with pytest.raises(AssertionError):
        af.reset_default_graph()         # not allowed inside a `with g.as_default()`


def test_unique_names_and_name_scopes():
    a = af.constant(1.0, name="c")
    b = af.constant(2.0, name="c")
    assert (a.op.name, b.op.name) == ("c", "c_1")
    with af.name_scope("layer") as scope:
        assert scope == "layer/"
        x = af.constant(3.0, name="w")
        with af.name_scope("inner"):
            y = af.identity(x, name="y")
    with af.name_scope("layer"):
        z = af.constant(4.0, name="w")
    assert x.op.name == "layer/w"
    assert y.op.name == "layer/inner/y"
    assert z.op.name == "layer_1/w"
    assert x.name == "layer/w:0"


def test_lookup_by_name(graph):
    x = af.placeholder(af.float32, [None, 3], name="x")
    y = af.identity(x, name="y")
    assert graph.get_tensor_by_name("x:0") is x
    assert graph.get_operation_by_name("y") is y.op
    with pytest.raises(KeyError, match="does not exist"):
        graph.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="exists but only has 1 outputs"):
        graph.get_tensor_by_name("x:3")
    with pytest.raises(ValueError, match="looks like"):
        graph.get_tensor_by_name("x")


def test_tensor_static_shapes_and_dtypes():
    x = af.placeholder(af.float32, [None, 3])
    assert x.dtype is af.float32
    assert x.shape.as_list() == [None, 3]
    assert x.get_shape().ndims == 2
    y = x * 2.0
    assert y.shape.as_list() == [None, 3]
    x.set_shape([5, 3])
    assert x.shape.as_list() == [5, 3]
    with pytest.raises(ValueError, match="not compatible"):
        x.set_shape([5, 4])


def test_shape_errors_name_the_op_at_build_time():
    a = af.placeholder(af.float32, [2, 3])
    b = af.placeholder(af.float32, [4, 5])
    with pytest.raises(ValueError, match="mm"):
        af.matmul(a, b, name="mm")
    with pytest.raises((TypeError, ValueError), match="add_me"):
        af.add(a, af.placeholder(af.int32, [2, 3]), name="add_me")


def test_control_dependencies_and_group():
    a = af.constant(1.0, name="a")
    b = af.constant(2.0, name="b")
    with af.control_dependencies([a, b.op]):
        c = af.identity(a, name="c")
        with af.control_dependencies(None):
            d = af.constant(3.0, name="d")
    assert b.op in c.op.control_inputs
    assert a.op not in c.op.control_inputs        # already a data input
    assert d.op.control_inputs == []
    g = af.group(c, d, name="both")
    assert set(g.control_inputs) == {c.op, d.op}
    assert g.type == "NoOp"


def test_operators_build_ops():
    x = af.placeholder(af.float32, [4])
    ops = {"+": x + 1, "-": x - 1, "*": x * 2, "/": x / 2, "//": x // 2, "%": x % 2, "**": x ** 2,
           "neg": -x, "<": x < 1, ">=": x >= 1}
    types = {k: v.op.type for k, v in ops.items()}
    assert types["+"] == "AddV2" and types["neg"] == "Neg" and types["<"] == "Less"
    m = af.placeholder(af.float32, [2, 2])
    assert (m @ m).op.type == "MatMul"
    assert x[1:3].op.type == "StridedSlice"
    assert x == x and x != x + 0    # TF 1.x: == is identity, tensors are hashable
    with pytest.raises(TypeError, match="bool"):
        bool(x)


def test_placeholder_defaults_and_identity_run():
    x = af.placeholder_with_default(af.constant([1.0, 2.0]), [2])
    y = af.identity(x) + 1.0
    with af.Session() as sess:
        np.testing.assert_allclose(sess.run(y), [2.0, 3.0])
        np.testing.assert_allclose(sess.run(y, {x: [5.0, 6.0]}), [6.0, 7.0])
        assert sess.run(af.no_op()) is None


def _build_random_graph(seed, n_ops):
    rng = np.random.default_rng(seed)
    g = af.Graph()
    with g.as_default():
        with af.device("/job:worker/task:1"):
            tensors = [af.placeholder(af.float32, [None, 3], name="x"),
                       af.constant(rng.standard_normal((1, 3)).astype(np.float32), name="c")]
        for i in range(n_ops):
            a, b = rng.choice(len(tensors), 2)
            kind = rng.integers(4)
            with af.name_scope(f"s{i % 3}"):
                if kind == 0:
                    tensors.append(tensors[a] + tensors[b])
                elif kind == 1:
                    tensors.append(af.nn.relu(tensors[a]))
                elif kind == 2:
                    tensors.append(af.reduce_sum(tensors[a], axis=1, keepdims=True) * tensors[b])
                else:
                    with af.control_dependencies([tensors[b]]):
                        tensors.append(af.identity(tensors[a]))
        v = af.Variable(np.ones((1, 3), np.float32), name="v")
        tensors.append(tensors[-1] + v)
    return g, tensors[-1].name


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 25))
def test_msgpack_round_trip_preserves_every_op(seed, n_ops):
    g, out_name = _build_random_graph(seed, n_ops)
    g2 = af.Graph.from_msgpack(g.to_msgpack())
    ops1, ops2 = g.get_operations(), g2.get_operations()
    assert [o.name for o in ops1] == [o.name for o in ops2]
    for a, b in zip(ops1, ops2):
        assert a.type == b.type and a.device == b.device
        assert [t.name for t in a.inputs] == [t.name for t in b.inputs]
        assert [c.name for c in a.control_inputs] == [c.name for c in b.control_inputs]
        assert a.attrs.keys() == b.attrs.keys()
        for k in a.attrs:
            va, vb = a.attrs[k], b.attrs[k]
            if isinstance(va, np.ndarray):
                np.testing.assert_array_equal(va, vb)
                assert va.dtype == vb.dtype and va.shape == vb.shape
            else:
                assert va == vb, k
        assert [(t.dtype, t.shape) for t in a.outputs] == [(t.dtype, t.shape) for t in b.outputs]
    # The deserialized graph runs and computes the same values.
    feed = np.arange(6, dtype=np.float32).reshape(2, 3)
    vals = []
    for graph in (g, g2):
        with af.Session(graph=graph) as sess:
            sess.run(graph.get_operation_by_name("v/Assign"))
            vals.append(sess.run(out_name, {"x:0": feed}))
    np.testing.assert_allclose(vals[0], vals[1])


def test_collections_round_trip():
    v = af.Variable(1.0, name="v")
    g2 = af.Graph.from_msgpack(af.get_default_graph().to_msgpack())
    assert v in af.get_default_graph().get_collection(af.GraphKeys.GLOBAL_VARIABLES)
    assert g2.get_operation_by_name("v").type == "VariableV2"


def test_lists_holding_tensors_are_packed_like_tensorflow():
    """tf.convert_to_tensor auto-packs (nested) lists that hold tensors: `stop_gradient([y])`
    is stop_gradient(stack([y])), and Python numbers beside tensors take the tensors' dtype."""
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 3])
        y = af.stop_gradient([x])
        z = af.convert_to_tensor([[x[0, 0], 2], [3.5, x[1, 1]]])
        assert y.shape.as_list() == [1, None, 3] and z.dtype == af.float32 and z.shape.as_list() == [2, 2]
        with af.Session() as s:
            yv, zv = s.run([y, z], {x: np.arange(6, dtype=np.float32).reshape(2, 3)})
    np.testing.assert_array_equal(yv, np.arange(6).reshape(1, 2, 3))
    np.testing.assert_array_equal(zv, [[0, 2], [3.5, 4]])


def test_device_function_reads_the_ops_node_def():
    # The multi-tower idiom: variables to the parameter device by a function of the op's NodeDef.
    ps_ops = ["Variable", "VariableV2", "AutoReloadVariable"]

    def assign_to_device(device, ps_device="/cpu:0"):
        def _assign(op):
            node_def = op if isinstance(op, af.NodeDef) else op.node_def
            return "/" + ps_device if node_def.op in ps_ops else device
        return _assign

    g = af.Graph()
    with g.as_default(), af.device(assign_to_device("/cpu:1")):
        v = af.Variable(2.0, name="w")
        y = af.multiply(v, 3.0, name="y")
    assert v.op.device == "/device:CPU:0"
    assert y.op.device == "/device:CPU:1"
    nd = y.op.node_def
    assert isinstance(nd, af.NodeDef) and nd.name == "y" and nd.op == "Mul"
    assert list(nd.input) == ["w/read", "Const"] and nd.device == "/device:CPU:1"


def test_tensor_shape_assertions_and_arithmetic():
    from actorflow.graph import tensor_shape
    s = af.TensorShape([None, 3])
    s.assert_is_compatible_with([2, 3])
    s.assert_same_rank([4, 5])
    s.assert_has_rank(2)
    with pytest.raises(ValueError, match="incompatible"):
        s.assert_is_compatible_with([2, 4])
    with pytest.raises(ValueError, match="same rank"):
        s.assert_same_rank([1])
    with pytest.raises(ValueError, match="not fully defined"):
        s.assert_is_fully_defined()
    assert s.with_rank_at_least(1) is s and s.with_rank_at_most(2) is s
    with pytest.raises(ValueError, match="at least 3"):
        s.with_rank_at_least(3)
    assert (s + [7]).as_list() == [None, 3, 7] and ([1] + s).as_list() == [1, None, 3]
    assert af.TensorShape([2, 3]).most_specific_compatible_shape([2, 4]).as_list() == [2, None]
    assert tensor_shape.scalar().as_list() == [] and tensor_shape.matrix(2, None).as_list() == [2, None]
