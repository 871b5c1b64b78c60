"""Variable scopes, get_variable, partitioned variables and initializers
(tf.compat.v1.variable_scope / get_variable / *_initializer semantics)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph import initializers as init
from actorflow.graph.variable_scope import (
    AUTO_REUSE,
    PartitionedVariable,
    VariableScope,
    fixed_size_partitioner,
    get_local_variable,
    get_variable,
    get_variable_scope,
    variable_axis_size_partitioner,
    variable_scope,
)

pytestmark = pytest.mark.usefixtures("graph")


def run(fetches, feed=None):
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(af.local_variables_initializer())
        return sess.run(fetches, feed)


# ---------------------------------------------------------------------------------------------
# Names, reuse and nesting
# ---------------------------------------------------------------------------------------------

def test_names_and_nesting():
    with variable_scope("outer") as outer:
        assert outer.name == "outer" and outer.original_name_scope == "outer/"
        with variable_scope("inner"):
            v = get_variable("v", [2])
            assert get_variable_scope().name == "outer/inner"
            c = af.constant(1.0, name="c")
    assert v.name == "outer/inner/v:0" and v.op.name == "outer/inner/v"
    assert c.op.name == "outer/inner/c"        # the variable scope opened a name scope too
    assert get_variable_scope().name == ""
    assert v in af.global_variables() and v in af.trainable_variables()


def test_get_variable_ignores_name_scopes():
    with af.name_scope("ns"):
        v = get_variable("v", [1])
        with variable_scope("vs"):
            w = get_variable("w", [1])
            c = af.constant(0.0, name="c")
    assert v.op.name == "v" and w.op.name == "vs/w"
    assert c.op.name == "ns/vs/c"


def test_reuse_true_returns_the_same_variable():
    with variable_scope("s"):
        v = get_variable("v", [2, 3])
    with variable_scope("s", reuse=True):
        assert get_variable("v") is v
        assert get_variable("v", [2, 3]) is v
    with variable_scope("s") as sc:
        sc.reuse_variables()
        assert sc.reuse is True
        assert get_variable("v") is v


def test_reuse_errors_have_tf_messages():
    with variable_scope("x"):
        get_variable("w", [1])
    with pytest.raises(ValueError, match=r"Variable x/w already exists, disallowed\. Did you mean to set "
                                         r"reuse=True or reuse=tf\.AUTO_REUSE in VarScope\?"):
        with variable_scope("x"):
            get_variable("w", [1])
    with pytest.raises(ValueError, match=r"Variable x/nope does not exist, or was not created with "
                                         r"tf\.get_variable\(\)"):
        with variable_scope("x", reuse=True):
            get_variable("nope", [1])
    with pytest.raises(ValueError, match=r"Trying to share variable x/w, but specified shape \(2,\) and found "
                                         r"shape \(1,\)"):
        with variable_scope("x", reuse=True):
            get_variable("w", [2])
    with pytest.raises(ValueError, match=r"Trying to share variable x/w, but specified dtype float64"):
        with variable_scope("x", reuse=True):
            get_variable("w", [1], dtype=af.float64)
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with variable_scope(None, default_name="d", reuse=True):
            pass


def test_auto_reuse_creates_then_reuses():
    def build():
        with variable_scope("net", reuse=AUTO_REUSE):
            return get_variable("w", [3])
    a, b = build(), build()
    assert a is b
    assert [v.op.name for v in af.global_variables()] == ["net/w"]


def test_reuse_is_inherited_and_cannot_be_turned_off():
    with variable_scope("a"):
        with variable_scope("b"):
            v = get_variable("v", [1])
    with variable_scope("a", reuse=True):
        with variable_scope("b", reuse=False) as sc:
            assert sc.reuse is True
            assert get_variable("v") is v


def test_default_names_are_unique_and_reset_on_reentry():
    with variable_scope(None, default_name="layer") as s0:
        pass
    with variable_scope(None, default_name="layer") as s1:
        pass
    assert (s0.name, s1.name) == ("layer", "layer_1")
    names = []
    for reuse in (None, True):
        with variable_scope("model", reuse=reuse):
            for _ in range(2):
                with variable_scope(None, default_name="dense"):
                    names.append(get_variable_scope().name)
                    get_variable("k", [1])
    # Re-entering "model" names its sub-scopes the same way again, so the second pass reuses.
    assert names == ["model/dense", "model/dense_1", "model/dense", "model/dense_1"]
    assert len(af.global_variables()) == 2


def test_reenter_scope_object():
    with variable_scope("enc") as enc:
        v = get_variable("v", [1])
    with variable_scope("other"):
        with variable_scope(enc, reuse=True) as again:
            assert again.name == "enc"
            assert get_variable("v") is v
            c = af.constant(0.0, name="c")
    assert c.op.name == "other/enc/c"        # a new name scope, as in TF 1.x


def test_scope_defaults_initializer_dtype_and_regularizer():
    def l2(v):
        return af.reduce_sum(af.square(v))
    with variable_scope("s", initializer=init.constant_initializer(3.0), dtype=af.float64, regularizer=l2):
        a = get_variable("a", [2])
        with variable_scope("t"):
            b = get_variable("b", [2], initializer=init.ones_initializer())
        i = get_variable("i", [2], dtype=af.int32, initializer=init.zeros_initializer())
    assert a.dtype is af.float64 and b.dtype is af.float64 and i.dtype is af.int32
    losses = af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 3
    assert losses[0].op.name.startswith("s/a/Regularizer/")
    va, vb, vi, vl = run([a, b, i, losses])
    np.testing.assert_array_equal(va, [3.0, 3.0])
    np.testing.assert_array_equal(vb, [1.0, 1.0])
    np.testing.assert_array_equal(vi, [0, 0])
    assert vl == [18.0, 2.0, 0]


def test_constant_and_tensor_initializers():
    a = get_variable("a", initializer=[[1.0, 2.0]])
    b = get_variable("b", initializer=af.constant(np.arange(3, dtype=np.int64)))
    c = get_variable("c", initializer=np.ones(2), dtype=af.float64)
    assert a.dtype is af.float32 and a.shape.as_list() == [1, 2]
    assert b.dtype is af.int64 and c.dtype is af.float64
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        get_variable("d", [2], initializer=[1.0, 2.0])
    with pytest.raises(ValueError, match="Initializer type 'int64' and explicit dtype 'float32' don't match"):
        get_variable("e", initializer=af.constant(np.arange(2, dtype=np.int64)), dtype=af.float32)
    with pytest.raises(ValueError, match="must be fully defined"):
        get_variable("f", [None, 2])
    va, vb, vc = run([a, b, c])
    np.testing.assert_array_equal(va, [[1.0, 2.0]])
    np.testing.assert_array_equal(vb, [0, 1, 2])


def test_default_initializers():
    w = get_variable("w", [100, 50])
    n = get_variable("n", [4], dtype=af.int64)
    vw, vn = run([w, n])
    limit = np.sqrt(6.0 / 150)
    assert np.all(np.abs(vw) <= limit) and vw.std() > limit / 3   # glorot_uniform
    np.testing.assert_array_equal(vn, np.zeros(4))


def test_trainable_collections_and_local_variables():
    t = get_variable("t", [1], trainable=False)
    c = get_variable("c", [1], collections=["mine"])
    loc = get_local_variable("loc", [2], initializer=init.zeros_initializer())
    assert t in af.global_variables() and t not in af.trainable_variables()
    assert af.get_collection("mine") == [c] and c in af.trainable_variables() and c not in af.global_variables()
    assert loc in af.local_variables() and loc not in af.trainable_variables()


def test_custom_getters_compose():
    calls = []

    def outer_getter(getter, name, *args, **kwargs):
        calls.append(("outer", name))
        return getter(name, *args, **kwargs)

    def inner_getter(getter, name, *args, **kwargs):
        calls.append(("inner", name))
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with variable_scope("a", custom_getter=outer_getter):
        with variable_scope("b", custom_getter=inner_getter):
            v = get_variable("v", [1])
    assert calls == [("inner", "a/b/v"), ("outer", "a/b/v")]
    assert not v.trainable


def test_variable_scope_type_errors():
    with pytest.raises(TypeError):
        variable_scope(3)
    with pytest.raises(TypeError, match="default_name"):
        variable_scope(None)
    with pytest.raises(ValueError):
        variable_scope("x", reuse="yes")


def test_variable_scope_from_values_graph():
    g = af.Graph()
    with g.as_default():
        x = af.constant(1.0)
    with variable_scope("s", values=[x]):
        v = get_variable("v", [1])
    assert v.graph is g


def test_get_variable_scope_is_per_graph():
    with variable_scope("here"):
        g2 = af.Graph()
        with g2.as_default():
            assert get_variable_scope().name == ""
        assert get_variable_scope().name == "here"


# ---------------------------------------------------------------------------------------------
# Partitioned variables
# ---------------------------------------------------------------------------------------------

def test_fixed_size_partitioner_shards():
    value = np.arange(30, dtype=np.float32).reshape(10, 3)
    with variable_scope("emb_scope"):
        pv = get_variable("emb", initializer=value, partitioner=fixed_size_partitioner(3))
    assert isinstance(pv, PartitionedVariable)
    shards = list(pv)
    assert len(pv) == 3
    assert [v.op.name for v in shards] == ["emb_scope/emb/part_0", "emb_scope/emb/part_1", "emb_scope/emb/part_2"]
    assert [v.shape.as_list() for v in shards] == [[4, 3], [3, 3], [3, 3]]
    assert pv.shape.as_list() == [10, 3] and pv.dtype is af.float32 and pv.name == "emb_scope/emb"
    assert [v._save_slice_info.var_offset for v in shards] == [[0, 0], [4, 0], [7, 0]]
    assert shards[1]._save_slice_info.spec == "10 3 4,3:0,3"
    assert all(v in af.trainable_variables() for v in shards)
    full, s0 = run([pv.as_tensor(), shards[0]])
    np.testing.assert_array_equal(full, value)
    np.testing.assert_array_equal(s0, value[:4])


def test_partitioned_variable_with_initializer_fn_and_embedding_lookup():
    pv = get_variable("table", [7, 2], initializer=init.random_normal_initializer(seed=1),
                      partitioner=fixed_size_partitioner(2))
    ids = np.array([6, 0, 3, 3])
    rows = af.nn.embedding_lookup(pv, af.constant(ids), partition_strategy="div")
    rows_list = af.nn.embedding_lookup(list(pv), af.constant(ids), partition_strategy="div")
    full, r, rl = run([pv, rows, rows_list])
    assert full.shape == (7, 2)
    np.testing.assert_array_equal(r, full[ids])
    np.testing.assert_array_equal(rl, full[ids])


def test_partitioner_more_shards_than_rows_and_scope_default():
    with variable_scope("p", partitioner=fixed_size_partitioner(5)):
        pv = get_variable("v", [3, 2])
        scalar = get_variable("s", [])              # scalars are never partitioned
    assert len(pv) == 3 and not isinstance(scalar, PartitionedVariable)


def test_partitioned_reuse_and_errors():
    part = fixed_size_partitioner(2)
    with variable_scope("m"):
        pv = get_variable("e", [4, 2], partitioner=part)
    with variable_scope("m", reuse=True):
        assert get_variable("e", [4, 2], partitioner=part) is pv
        assert get_variable("e") is pv
    with pytest.raises(ValueError, match="Partitioned variable with name m/e already exists"):
        with variable_scope("m"):
            get_variable("e", [4, 2], partitioner=part)
    with pytest.raises(ValueError, match="No partitioner was provided, but a partitioned version"):
        with variable_scope("m", reuse=AUTO_REUSE):
            get_variable("e", [4, 2])
    get_variable("plain", [4, 2])
    with pytest.raises(ValueError, match="an unpartitioned version of the variable was found: plain"):
        get_variable("plain", [4, 2], partitioner=part)
    with pytest.raises(ValueError, match="one dimension"):
        get_variable("bad", [4, 4], partitioner=lambda shape, dtype: [2, 2])


def test_partitioned_shards_follow_device_functions():
    ps = iter(["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2"])
    placed = {}

    def device_fn(op):
        if op.type == "VariableV2":
            placed[op.name] = next(ps)
            return placed[op.name]
        return ""

    with af.device(device_fn):
        pv = get_variable("emb", [9, 4], partitioner=fixed_size_partitioner(3))
    assert [v.device for v in pv] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2"]


def test_partitioned_assign():
    pv = get_variable("a", [5, 1], initializer=init.zeros_initializer(), partitioner=fixed_size_partitioner(2))
    op = pv.assign(np.arange(5, dtype=np.float32).reshape(5, 1))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(op)
        np.testing.assert_array_equal(sess.run(pv.as_tensor()), np.arange(5).reshape(5, 1))


def test_variable_axis_size_partitioner():
    p = variable_axis_size_partitioner(max_shard_bytes=64)
    assert p(shape=af.TensorShape([10, 4]), dtype=af.float32) == [3, 1]   # 16 bytes/row, 4 rows/shard


# ---------------------------------------------------------------------------------------------
# Initializers
# ---------------------------------------------------------------------------------------------

def test_fill_initializers():
    z, o, c, cf = run([init.zeros_initializer()([2, 3]), init.ones_initializer(dtype=af.int32)([2]),
                       init.constant_initializer(2.5)([3], dtype=af.float64),
                       init.constant_initializer([1, 2, 3, 4])([2, 2])])
    np.testing.assert_array_equal(z, np.zeros((2, 3), np.float32))
    assert o.dtype == np.int32 and c.dtype == np.float64
    np.testing.assert_array_equal(c, [2.5, 2.5, 2.5])
    np.testing.assert_array_equal(cf, [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="has 3 values"):
        init.constant_initializer([1, 2, 3])([2, 2])
    with pytest.raises(TypeError):
        init.constant_initializer({"a": 1})


def test_constant_initializer_slices_full_value_per_shard():
    value = np.arange(12, dtype=np.float32).reshape(6, 2)
    pv = get_variable("c", [6, 2], initializer=init.constant_initializer(value), partitioner=fixed_size_partitioner(4))
    np.testing.assert_array_equal(run(pv.as_tensor()), value)


def test_random_initializers_statistics():
    shape = [200, 100]
    rn, tn, ru = run([init.random_normal_initializer(1.0, 2.0, seed=1)(shape),
                      init.truncated_normal_initializer(0.0, 1.0, seed=2)(shape),
                      init.random_uniform_initializer(-3, 5, seed=3)(shape)])
    assert abs(rn.mean() - 1.0) < 0.05 and abs(rn.std() - 2.0) < 0.05
    assert np.all(np.abs(tn) <= 2.0) and 0.8 < tn.std() < 0.95
    assert ru.min() >= -3 and ru.max() < 5 and abs(ru.mean() - 1.0) < 0.1
    again = run(init.random_normal_initializer(1.0, 2.0, seed=1)(shape))
    np.testing.assert_array_equal(again, rn)


@pytest.mark.parametrize("dist", ["truncated_normal", "untruncated_normal", "uniform"])
@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg"])
def test_variance_scaling(dist, mode):
    shape = [3, 3, 40, 60]                 # conv kernel: receptive field 9
    fan_in, fan_out = 9 * 40, 9 * 60
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
    v = run(init.variance_scaling_initializer(2.0, mode, dist, seed=4)(shape))
    np.testing.assert_allclose(v.var(), 2.0 / n, rtol=0.05)
    if dist == "uniform":
        assert np.abs(v).max() <= np.sqrt(3 * 2.0 / n)


def test_glorot_and_he_initializers():
    gu, gn, he = run([init.glorot_uniform_initializer(seed=1)([300, 200]),
                      init.glorot_normal_initializer(seed=1)([300, 200]), init.he_normal(seed=1)([300, 200])])
    assert np.abs(gu).max() <= np.sqrt(6 / 500)
    np.testing.assert_allclose(gn.var(), 2 / 500, rtol=0.05)
    np.testing.assert_allclose(he.var(), 2 / 300, rtol=0.05)


def test_variance_scaling_uses_full_shape_of_partitioned_variable():
    pv = get_variable("w", [400, 100], initializer=init.variance_scaling_initializer(1.0, "fan_in", "uniform", seed=5),
                      partitioner=fixed_size_partitioner(4))
    v = run(pv.as_tensor())
    np.testing.assert_allclose(v.var(), 1.0 / 400, rtol=0.05)


def test_initializer_argument_errors():
    with pytest.raises(ValueError, match="mode"):
        init.variance_scaling_initializer(mode="fan_sideways")
    with pytest.raises(ValueError, match="distribution"):
        init.variance_scaling_initializer(distribution="cauchy")
    with pytest.raises(ValueError, match="positive"):
        init.variance_scaling_initializer(scale=0)
    with pytest.raises(ValueError, match="floating-point"):
        init.random_normal_initializer(dtype=af.int32)
    assert init.glorot_uniform_initializer(seed=3).get_config() == {"seed": 3, "dtype": "float32"}


def test_initializer_class_is_instantiated():
    v = get_variable("v", [2], initializer=init.ones_initializer)
    np.testing.assert_array_equal(run(v), [1, 1])


def test_scope_object_repr_and_root():
    assert isinstance(get_variable_scope(), VariableScope)
    assert get_variable_scope().reuse is False
