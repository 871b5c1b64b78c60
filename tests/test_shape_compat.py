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


def test_dense_after_dropout_and_batch_norm_with_a_training_placeholder_trains():
    # The shape of tutorials' MLPs: training= a bool placeholder of unknown shape.
    import numpy as np
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(32, 5)).astype(np.float32)
    ys = rng.integers(0, 3, size=32)
    g = af.Graph()
    with g.as_default():
        # Seeded: unseeded, about one initialization in thirty evaluates worse after the 40 steps (the
        # moving statistics lag the batch statistics the steps trained with).
        af.set_random_seed(7)
        x = af.placeholder(af.float32, [None, 5])
        y = af.placeholder(af.int64, [None])
        training = af.placeholder(af.bool)
        h = af.layers.batch_normalization(af.layers.dense(x, 8, activation=af.nn.relu), training=training)
        logits = af.layers.dense(af.layers.dropout(h, 0.3, training=training), 3)
        assert logits.shape.as_list() == [None, 3]
        loss = af.losses.sparse_softmax_cross_entropy(y, logits)
        with af.control_dependencies(af.get_collection(af.GraphKeys.UPDATE_OPS)):
            train = af.train.AdamOptimizer(0.05).minimize(loss)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            before = sess.run(loss, {x: xs, y: ys, training: False})
            for _ in range(40):
                sess.run(train, {x: xs, y: ys, training: True})
            after = sess.run(loss, {x: xs, y: ys, training: False})
            with pytest.raises(af.errors.InvalidArgumentError):
                sess.run(loss, {x: xs, y: ys, training: [True, False]})   # not a scalar
    assert after < before


def test_dimensions_have_tf1_value_and_behave_as_ints():
    import actorflow as af
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 3, 4])
        shape = x.get_shape()
        assert shape[1].value == 3 and shape[-1].value == 4 and shape[0].value is None
        assert [d.value for d in shape] == [None, 3, 4]
        d = shape[1]
        assert d == 3 and d * 2 == 6 and isinstance(d, int) and str(d) == "3" and hash(d) == hash(3)
        assert af.dimension_value(d) == 3 and af.dimension_value(None) is None and af.dimension_value(5) == 5
        assert af.compat.dimension_value(shape[2]) == 4 and af.dimension_at_index(shape, 0).value is None
        assert af.Dimension(7).value == 7 and af.Dimension(None).value is None
        assert d.is_compatible_with(3) and d.is_compatible_with(None) and not d.is_compatible_with(2)
        with pytest.raises(ValueError, match="not compatible"):
            d.merge_with(5)
        y = af.reshape(x, [-1, shape[1].value * shape[2].value])        # the TF-1.x idiom
        assert y.shape.as_list() == [None, 12]
        z = af.zeros([shape[1], shape[2]])                               # dims as sizes
        assert z.shape.as_list() == [3, 4]
