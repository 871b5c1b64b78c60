"""Static shapes match TensorFlow's for common ops on partially known inputs (fixtures/shapes.json,
made with TF 2.21 by make_shapes.py): math and broadcasting, matmul, reductions, array ops, cond,
nn ops, layers and losses, on inputs such as [None, 3], [2, None] and unknown rank."""
import json
import pathlib

import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "shapes.json").read_text())


def _id(c):
    return c["expr"] + " " + ",".join(str(s) for _, s in c["inputs"])


@pytest.mark.parametrize("case", FIX["cases"], ids=[_id(c) for c in FIX["cases"]])
def test_static_shape_matches_tf(case):
    g = af.Graph()
    with g.as_default():
        env = {"tf": af}
        for name, (dt, shape) in zip("abc", case["inputs"]):
            env[name] = af.placeholder(dt, shape, name=name)
        if "error" in case:
            with pytest.raises((ValueError, TypeError)):
                eval(case["expr"], env)  # noqa: S307 (the fixture's own expressions)
            return
        out = eval(case["expr"], env)  # noqa: S307
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        got = [None if o.shape.ndims is None else o.shape.as_list() for o in outs]
        assert len(got) == len(case["shapes"])
        for mine, tf_shape in zip(got, case["shapes"]):
            assert _at_least_as_known(mine, tf_shape), f"actorflow infers {mine}, TensorFlow {tf_shape}"


def _at_least_as_known(mine, tf_shape) -> bool:
    """Every dimension TF knows, actorflow knows, with the same value. actorflow may know more
    (e.g. the rank of a reduction over a scalar axis that is only fed at run time)."""
    if tf_shape is None:
        return True
    if mine is None or len(mine) != len(tf_shape):
        return False
    return all(t is None or m == t for m, t in zip(mine, tf_shape))


def test_the_comparison_itself():
    assert _at_least_as_known([None, 3], None) and _at_least_as_known([2, 3], [None, 3])
    assert not _at_least_as_known([None, None], [None, 3]) and not _at_least_as_known(None, [None])
    assert not _at_least_as_known([None], [None, 3]) and not _at_least_as_known([4, 3], [5, 3])
