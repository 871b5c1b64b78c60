"""GraphDef interoperability: sess.graph_def, af.GraphDef, af.import_graph_def and graph_util over
GraphDefs, as TF-1.x programs freeze, serialize and load a model; and GraphDefs TensorFlow 2.21 wrote
(tests/fixtures/make_tf_graph_def.py), imported and run with TensorFlow's outputs."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af
from actorflow import graph_util

FIX = pathlib.Path(__file__).parent / "fixtures"
FEED = np.random.RandomState(0).randn(4, 3).astype(np.float32)


def _model():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) * 0.1, name="w")
        step = af.Variable(np.int64(7), name="global_step")
        h = af.nn.leaky_relu(af.matmul(x, w) - 0.3, alpha=0.1)
        y = af.identity(h * af.cast(step, af.float32), name="out")
        _, looped = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 1.5), [af.constant(0), y])
        af.identity(looped, name="looped")
        init = af.global_variables_initializer()
    sess = af.Session(graph=g)
    sess.run(init)
    return g, sess


def test_freeze_serialize_parse_import_is_the_same_graph_bit_for_bit():
    g, sess = _model()
    want = sess.run(["out:0", "looped:0"], {"x:0": FEED})
    gd = sess.graph_def
    assert isinstance(gd, af.GraphDef) and {n.name for n in gd.node} >= {"x", "w", "out", "looped"}
    frozen = graph_util.convert_variables_to_constants(sess, gd, ["out", "looped"])
    assert isinstance(frozen, af.GraphDef)            # the kind it was given, as in TF
    ops = {n.name: n.op for n in frozen.node}
    assert ops["w"] == "Const" and ops["global_step"] == "Const" and "VariableV2" not in ops.values()
    sess.close()
    data = frozen.SerializeToString()
    loaded = af.GraphDef()
    loaded.ParseFromString(data)
    with af.Graph().as_default() as g2:
        assert af.import_graph_def(loaded, name="") is None
        assert g2.get_tensor_by_name("global_step:0").shape.dims == ()     # a frozen scalar stays 0-d
        with af.Session(graph=g2) as s:
            got = s.run(["out:0", "looped:0"], {"x:0": FEED})
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_import_graph_def_names_input_map_and_return_elements():
    g, sess = _model()
    want = sess.run("out:0", {"x:0": FEED})
    data = graph_util.convert_variables_to_constants(sess, sess.graph_def, ["out"]).SerializeToString()
    sess.close()
    with af.Graph().as_default() as g2:
        inp = af.placeholder(af.float32, [None, 3], name="inp")
        out, op = af.import_graph_def(data, input_map={"x": inp * 2.0}, return_elements=["out:0", "out"])
        assert out.name == "import/out:0" and op is out.op
        again = af.import_graph_def(data, input_map={"x:0": inp}, return_elements=["out:0"])[0]
        assert again.name == "import_1/out:0"
        with af.name_scope("outer"):
            nested = af.import_graph_def(data, input_map={"x": inp}, return_elements=["out:0"])[0]
        assert nested.name == "outer/import/out:0"
        with af.Session(graph=g2) as s:
            a, b, c = s.run([out, again, nested], {inp: FEED / 2.0})
    np.testing.assert_allclose(a, want, rtol=1e-6)
    np.testing.assert_allclose(b, c)


def test_import_graph_def_errors_name_what_is_at_fault():
    g, sess = _model()
    gd = sess.graph_def
    sess.close()
    with af.Graph().as_default():
        with pytest.raises(ValueError, match=r"not found in graph_def: \['nope:0'\]"):
            af.import_graph_def(gd, input_map={"nope": af.constant(1.0)})
        with pytest.raises(ValueError, match="return_element 'missing:0'"):
            af.import_graph_def(gd, return_elements=["missing:0"])
        with pytest.raises(ValueError, match="neither a serialized GraphDef nor an actorflow graph"):
            af.import_graph_def(b"\xff\x00not a graph at all")
    bad = af.GraphDef()
    bad.CopyFrom(gd)
    node = next(n for n in bad.node if n.name == "out")
    node.op = "NoSuchOp"
    del node.attr["_af"]
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="op 'out' has type 'NoSuchOp'"):
            af.import_graph_def(bad, name="")
    loose = af.GraphDef()
    loose.CopyFrom(gd)
    next(n for n in loose.node if n.name == "out").input[0] = "ghost"
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="op 'out' has input 'ghost:0'"):
            af.import_graph_def(loose)
        assert af.get_default_graph().get_operations() == []      # nothing half-imported


def test_graph_util_over_graph_defs():
    g, sess = _model()
    gd = sess.graph_def
    sess.close()
    sub = graph_util.extract_sub_graph(gd, ["out"])
    assert isinstance(sub, af.GraphDef)
    names = {n.name for n in sub.node}
    assert "out" in names and "looped" not in names and "x" in names
    assert isinstance(graph_util.extract_sub_graph(g, ["out"]), af.Graph)   # and an af.Graph for a graph
    trimmed = graph_util.remove_training_nodes(sub, protected_nodes=["out"])
    assert isinstance(trimmed, af.GraphDef) and "out" in {n.name for n in trimmed.node}


@pytest.mark.parametrize("name", ["frozen_convnet.pb", "while_loop.pb"])
def test_graph_defs_tensorflow_wrote_import_and_match_its_outputs(name):
    case = json.loads((FIX / "tf_graph_def.json").read_text())[name]
    gd = af.GraphDef()
    gd.ParseFromString((FIX / "tf_graph_def" / name).read_bytes())
    with af.Graph().as_default() as g:
        af.import_graph_def(gd, name="")
        feeds = {k + ":0": np.array(v, dtype=case["feed_dtypes"][k]) for k, v in case["feeds"].items()}
        with af.Session(graph=g) as s:
            got = s.run(case["fetches"], feeds)
    for fetch, a, b in zip(case["fetches"], got, case["outputs"]):
        b = np.asarray(b)
        assert np.shape(a) == b.shape, fetch
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=fetch)


def test_a_tensorflow_graph_def_in_a_scope_with_input_map():
    case = json.loads((FIX / "tf_graph_def.json").read_text())["frozen_convnet.pb"]
    data = (FIX / "tf_graph_def" / "frozen_convnet.pb").read_bytes()
    with af.Graph().as_default() as g:
        images = af.placeholder(af.float32, [None, 8, 8, 1], name="images")
        probs, = af.import_graph_def(data, input_map={"images:0": images}, return_elements=["probs:0"],
                                     name="net")
        assert probs.name == "net/probs:0" and probs.shape.as_list() == [None, 3]
        with af.Session(graph=g) as s:
            got = s.run(probs, {images: np.array(case["feeds"]["images"], np.float32)})
    np.testing.assert_allclose(got, np.array(case["outputs"][0]), rtol=1e-5, atol=1e-6)


def test_v1_behaviour_switches():
    af.disable_v2_behavior()
    af.compat.v1.disable_eager_execution()
    af.disable_resource_variables()
    af.disable_control_flow_v2()
    assert af.executing_eagerly() is False and af.control_flow_v2_enabled() is False
    assert af.resource_variables_enabled() is False and af.VERSION == af.__version__
    with pytest.raises(NotImplementedError, match="eager execution"):
        af.enable_eager_execution()
    with pytest.raises(NotImplementedError, match="TF 2 behavior"):
        af.enable_v2_behavior()
    with af.Graph().as_default():              # graphs build as before
        assert af.constant(1.0).op.type == "Const"


def test_nodes_carry_every_attribute_tensorflows_importer_requires():
    """TF's importer rejects a NodeDef without an attribute its OpDef requires ("NodeDef missing attr
    'T'"). For a training graph with a loop, a cond, concat/split/add_n and casts, every node whose op
    TF 2.21 knows carries each required attribute (summary/tf_op_signatures.json, from TF's OpDefs),
    with the dtypes and counts of its tensors."""
    from actorflow.summary.graph_def import _signatures
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.ones((3, 2), np.float32), name="w")
        h = af.concat([af.nn.relu(af.matmul(x, w)), af.cast(af.reshape(af.range(af.shape(x)[0]), [-1, 1]),
                                                             af.float32)], axis=1)
        a, b = af.split(h, [1, 2], axis=1)
        y = af.add_n([a, a, af.reduce_sum(b, 1, keepdims=True)])
        _, total = af.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2.0), [0, af.reduce_sum(y)])
        loss = af.cond(total > 0.0, lambda: total, lambda: -total)
        af.train.AdamOptimizer(0.1).minimize(loss)
        gd = g.as_graph_def()
    sigs = _signatures()
    checked = 0
    for node in gd.node:
        sig = sigs.get(node.op)
        if sig is None:
            continue
        missing = [k for k in sig["required"] if k not in node.attr]
        assert not missing, f"{node.name} ({node.op}) lacks {missing}"
        checked += 1
    assert checked > 100
    by_name = {n.name: n for n in gd.node}
    concat = next(n for n in gd.node if n.op == "ConcatV2")
    assert concat.attr["N"].i == 2 and concat.attr["T"].type == af.float32.as_datatype_enum
    assert concat.attr["Tidx"].type == af.int32.as_datatype_enum
    cast = next(n for n in gd.node if n.op == "Cast")
    assert (cast.attr["SrcT"].type, cast.attr["DstT"].type) == (af.int32.as_datatype_enum,
                                                                 af.float32.as_datatype_enum)
    assert by_name["MatMul"].attr["T"].type == af.float32.as_datatype_enum
    # A scalar's shape attribute is set, though it has no dims (TF: "AttrValue missing value").
    power = next(n for n in gd.node if n.op == "VariableV2" and n.name.endswith("beta1_power"))
    assert power.attr["shape"].WhichOneof("value") == "shape" and not power.attr["shape"].shape.dim
