"""Graph.as_graph_def and af.train.write_graph (issue 19), read back with TensorBoard's protobufs."""
from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format
from tensorboard.compat.proto import graph_pb2

import actorflow as af


@pytest.fixture
def graph():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.ones((3, 2), np.float32), name="w")
        y = af.nn.relu(af.matmul(x, w), name="y")
        with af.control_dependencies([y]):
            af.no_op(name="after")
        yield g


def _check(gd):
    nodes = {n.name: n for n in gd.node}
    assert nodes["x"].op == "Placeholder"
    assert nodes["y"].op == "Relu"
    mm = nodes[nodes["y"].input[0]]
    assert mm.op == "MatMul" and list(mm.input) == ["x", "w/read"]
    assert list(nodes["after"].input) == ["^y"]


def test_as_graph_def(graph):
    gd = graph.as_graph_def()
    assert isinstance(gd, graph_pb2.GraphDef)
    _check(gd)
    assert "_output_shapes" not in {k for n in gd.node for k in n.attr}        # add_shapes=False, as in TF
    with_shapes = graph.as_graph_def(add_shapes=True)
    shape = with_shapes.node[[n.name for n in with_shapes.node].index("y")].attr["_output_shapes"].list.shape[0]
    assert [d.size for d in shape.dim] == [-1, 2]
    with pytest.raises(ValueError, match="from_version"):
        graph.as_graph_def(from_version=1)


@pytest.mark.parametrize("as_text", [True, False])
def test_write_graph_reads_back(graph, tmp_path, as_text):
    name = "graph.pbtxt" if as_text else "graph.pb"
    path = af.train.write_graph(graph, str(tmp_path / "logs"), name, as_text=as_text)
    assert path == str(tmp_path / "logs" / name)
    gd = graph_pb2.GraphDef()
    data = open(path, "rb").read()
    if as_text:
        text_format.Parse(data.decode(), gd)
    else:
        gd.ParseFromString(data)
    _check(gd)
    # A GraphDef is written as it is.
    again = af.train.write_graph(gd, str(tmp_path), "copy.pb", as_text=False)
    assert open(again, "rb").read() == gd.SerializeToString()


def test_write_graph_rejects_other_objects(tmp_path):
    with pytest.raises(TypeError, match="af.Graph or a GraphDef"):
        af.train.write_graph({"node": []}, str(tmp_path), "g.pbtxt")
