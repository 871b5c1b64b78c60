"""Deprecated TF-1.x names that TF 2.21's tf.compat.v1 still exports exist in actorflow and compute
what TF computes (fixtures/aliases.json, made by make_aliases.py)."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "aliases.json").read_text())
# bfloat16 is not an actorflow dtype, so neither is its cast.
NOT_SUPPORTED = {"to_bfloat16"}


@pytest.mark.parametrize("name", sorted(n for n, ok in FIX["present"].items() if ok and n not in NOT_SUPPORTED))
def test_name_tf_still_exports_exists(name):
    assert callable(getattr(af, name))


@pytest.mark.parametrize("expr", sorted(FIX["values"]))
def test_alias_values_match_tf(expr):
    g = af.Graph()
    with g.as_default():
        env = {"tf": af, "x": af.constant(np.asarray(FIX["x"], np.float32))}
        out = eval(expr, env)  # noqa: S307 (the fixture's own expressions)
        with af.Session() as sess:
            got = sess.run(out)
    got = got if isinstance(got, list) else [got]
    for g_, want in zip(got, FIX["values"][expr]):
        g_ = np.asarray(g_)
        assert g_.dtype == np.dtype(want["dtype"]), expr
        np.testing.assert_allclose(g_, np.asarray(want["value"], want["dtype"]), rtol=1e-6, err_msg=expr)


def test_deprecated_initializers_and_collections():
    g = af.Graph()
    with g.as_default():
        v = af.Variable(1.0, name="v")
        loc = af.Variable(2.0, name="loc", collections=[af.GraphKeys.LOCAL_VARIABLES])
        assert af.all_variables() == [v]
        af.add_to_collections(["c1", "c2"], v)
        assert af.get_collection("c1") == [v] and af.get_collection("c2") == [v]
        with af.Session() as sess:
            sess.run([af.initialize_variables([v]), af.initialize_local_variables()])
            assert sess.run([v, loc]) == [1.0, 2.0]
        with pytest.raises(ValueError, match="rank"):
            af.matrix_transpose(af.placeholder(af.float32))
