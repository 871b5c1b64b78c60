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


def test_where_coordinates_and_boolean_mask_values():
    import numpy as np
    g = af.Graph()
    with g.as_default():
        c = af.placeholder(af.bool, [None, 3])
        x = af.placeholder(af.float32, [None, 3])
        cube = af.constant(np.arange(24.0, dtype=np.float32).reshape(2, 3, 4))
        fetches = [af.where(c), af.boolean_mask(x, af.reduce_any(c, 1)), af.boolean_mask(x, c),
                   af.boolean_mask(cube, [True, False, True], axis=1), af.where(af.constant([0, 3, 0, 1]))]
        cv = np.array([[True, False, True], [False, False, False], [False, True, False]])
        xv = np.arange(9.0, dtype=np.float32).reshape(3, 3)
        with af.Session() as sess:
            w, rows, elems, mid, nz = sess.run(fetches, {c: cv, x: xv})
            assert sess.run(af.where(c), {c: np.zeros((2, 3), bool)}).shape == (0, 2)
        with pytest.raises(ValueError, match="mask"):
            af.boolean_mask(x, af.placeholder(af.bool))
        with pytest.raises(ValueError, match="mask"):
            af.boolean_mask(x, af.placeholder(af.bool, [None, 4]))
    np.testing.assert_array_equal(w, np.argwhere(cv))
    np.testing.assert_array_equal(rows, xv[cv.any(1)])
    np.testing.assert_array_equal(elems, xv[cv])
    np.testing.assert_array_equal(mid, np.arange(24.0).reshape(2, 3, 4)[:, [0, 2]])
    np.testing.assert_array_equal(nz, [[1], [3]])
