"""Optimizers (af.train.*Optimizer) and their update ops (Apply*, SparseApply*): build-time
inference and errors, each optimizer against its update formula in numpy over several steps,
sparse (row) updates that never densify, slots, global step and placement."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
import actorflow.train as train
from actorflow.graph.initializers import random_uniform_initializer
from actorflow.graph.ops import training_ops
from actorflow.graph.variable_scope import fixed_size_partitioner, get_variable, variable_scope

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(11)


def _var(value, name):
    return af.Variable(np.asarray(value), name=name)


def _ops_of_type(prefix):
    return [op for op in af.get_default_graph().get_operations() if op.type.startswith(prefix)]


# ---------------------------------------------------------------------------------------------
# numpy references (one step; `rows` restricts a lazy sparse update to those rows)
# ---------------------------------------------------------------------------------------------

class RefGD:
    def __init__(self, lr):
        self.lr = lr

    def init_slots(self, w):
        return {}

    def step(self, w, g, s, t):
        w -= self.lr * g


class RefMomentum:
    def __init__(self, lr, momentum, nesterov=False):
        self.lr, self.m, self.nesterov = lr, momentum, nesterov

    def init_slots(self, w):
        return {"accum": np.zeros_like(w)}

    def step(self, w, g, s, t):
        a = s["accum"]
        a[...] = self.m * a + g
        w -= self.lr * (g + self.m * a) if self.nesterov else self.lr * a


class RefAdagrad:
    def __init__(self, lr, init=0.1):
        self.lr, self.init = lr, init

    def init_slots(self, w):
        return {"accum": np.full_like(w, self.init)}

    def step(self, w, g, s, t):
        a = s["accum"]
        a += g * g
        w -= self.lr * g / np.sqrt(a)


class RefRMSProp:
    def __init__(self, lr, decay=0.9, momentum=0.0, eps=1e-10, centered=False):
        self.lr, self.rho, self.mom, self.eps, self.centered = lr, decay, momentum, eps, centered

    def init_slots(self, w):
        return {"ms": np.ones_like(w), "mom": np.zeros_like(w), "mg": np.zeros_like(w)}

    def step(self, w, g, s, t):
        s["ms"][...] = self.rho * s["ms"] + (1 - self.rho) * g * g
        denom = s["ms"]
        if self.centered:
            s["mg"][...] = self.rho * s["mg"] + (1 - self.rho) * g
            denom = s["ms"] - s["mg"] ** 2
        s["mom"][...] = self.mom * s["mom"] + self.lr * g / np.sqrt(denom + self.eps)
        w -= s["mom"]


class RefAdam:
    def __init__(self, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def init_slots(self, w):
        return {"m": np.zeros_like(w), "v": np.zeros_like(w)}

    def step(self, w, g, s, t):
        lr_t = self.lr * np.sqrt(1 - self.b2 ** t) / (1 - self.b1 ** t)
        s["m"][...] = self.b1 * s["m"] + (1 - self.b1) * g
        s["v"][...] = self.b2 * s["v"] + (1 - self.b2) * g * g
        w -= lr_t * s["m"] / (np.sqrt(s["v"]) + self.eps)


CASES = {
    "gd": (lambda: train.GradientDescentOptimizer(0.1), lambda: RefGD(0.1), "ApplyGradientDescent"),
    "momentum": (lambda: train.MomentumOptimizer(0.05, 0.9), lambda: RefMomentum(0.05, 0.9), "ApplyMomentum"),
    "nesterov": (lambda: train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
                 lambda: RefMomentum(0.05, 0.9, nesterov=True), "ApplyMomentum"),
    "adagrad": (lambda: train.AdagradOptimizer(0.3, initial_accumulator_value=0.2), lambda: RefAdagrad(0.3, 0.2),
                "ApplyAdagrad"),
    "rmsprop": (lambda: train.RMSPropOptimizer(0.01), lambda: RefRMSProp(0.01), "ApplyRMSProp"),
    "rmsprop_momentum": (lambda: train.RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-6),
                         lambda: RefRMSProp(0.01, 0.8, 0.5, 1e-6), "ApplyRMSProp"),
    "rmsprop_centered": (lambda: train.RMSPropOptimizer(0.01, momentum=0.3, epsilon=1e-4, centered=True),
                         lambda: RefRMSProp(0.01, 0.9, 0.3, 1e-4, centered=True), "ApplyCenteredRMSProp"),
    "adam": (lambda: train.AdamOptimizer(0.1), lambda: RefAdam(0.1), "ApplyAdam"),
}


# ---------------------------------------------------------------------------------------------
# Dense updates against the formulas
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_dense_updates_match_reference(case):
    make_opt, make_ref, op_type = CASES[case]
    w0 = RNG.standard_normal((3, 4))
    c = RNG.uniform(0.5, 2.0, (3, 4))
    d = RNG.standard_normal((3, 4))
    w = _var(w0, "w")
    # loss = sum(c * w^2 + d * w): gradient 2 c w + d depends on w, so every step differs.
    loss = af.reduce_sum(af.add(af.multiply(af.constant(c), af.square(w)), af.multiply(af.constant(d), w)))
    gs = train.get_or_create_global_step()
    step = make_opt().minimize(loss, global_step=gs)
    assert [op.type for op in _ops_of_type("Apply")] == [op_type]
    assert not _ops_of_type("SparseApply")

    ref, ref_w = make_ref(), w0.copy()
    slots = ref.init_slots(ref_w)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        for t in range(1, 5):
            sess.run(step)
            ref.step(ref_w, 2 * c * ref_w + d, slots, t)
            np.testing.assert_allclose(sess.run(w), ref_w, rtol=1e-9, atol=1e-12, err_msg=f"{case}, step {t}")
        assert train.global_step(sess, gs) == 4


def test_float32_variables_and_learning_rate_tensor():
    w0 = RNG.standard_normal(5).astype(np.float32)
    w = _var(w0, "w")
    lr = af.placeholder(af.float32, [], name="lr")
    loss = af.reduce_sum(af.square(w))
    step = train.GradientDescentOptimizer(lr).minimize(loss)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step, {lr: 0.25})
        np.testing.assert_allclose(sess.run(w), w0 * 0.5, rtol=1e-6)
        sess.run(step, {lr: 0.5})
        np.testing.assert_allclose(sess.run(w), np.zeros(5), atol=1e-7)


def test_learning_rate_tensor_of_other_dtype_is_cast():
    w0 = RNG.standard_normal(3)
    w = _var(w0, "w")
    lr = af.constant(0.5, dtype=af.float32)
    step = train.MomentumOptimizer(lr, af.constant(0.0, dtype=af.float32)).minimize(af.reduce_sum(af.square(w)))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        np.testing.assert_allclose(sess.run(w), np.zeros(3), atol=1e-12)


def test_learning_rate_schedule_drives_optimizer():
    w = _var(np.ones(2), "w")
    gs = train.get_or_create_global_step()
    lr = train.exponential_decay(1.0, gs, decay_steps=1, decay_rate=0.5)
    # loss = sum(w): gradient 1, so w drops by 1, 0.5, 0.25.
    step = train.GradientDescentOptimizer(lr).minimize(af.reduce_sum(w), global_step=gs)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        for _ in range(3):
            sess.run(step)
        np.testing.assert_allclose(sess.run(w), np.full(2, 1 - 1.75), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Sparse updates
# ---------------------------------------------------------------------------------------------

SPARSE_TYPES = {"gd": "SparseApplyGradientDescent", "momentum": "SparseApplyMomentum",
                "nesterov": "SparseApplyMomentum", "adagrad": "SparseApplyAdagrad", "rmsprop": "SparseApplyRMSProp",
                "rmsprop_momentum": "SparseApplyRMSProp", "rmsprop_centered": "SparseApplyCenteredRMSProp",
                "adam": "SparseApplyAdam"}


@pytest.mark.parametrize("case", list(CASES))
def test_sparse_updates_touch_only_gathered_rows(case):
    make_opt, make_ref, _ = CASES[case]
    e0 = RNG.standard_normal((10, 3))
    ids = np.array([7, 2, 5])
    c = RNG.uniform(0.5, 2.0, (3, 3))
    emb = _var(e0, "emb")
    rows = af.gather(emb, af.constant(ids))
    loss = af.reduce_sum(af.multiply(af.constant(c), af.square(rows)))
    opt = make_opt()
    (grad, var), = opt.compute_gradients(loss, var_list=[emb])
    assert isinstance(grad, af.IndexedSlices), "the gradient of gather must stay sparse"
    step = opt.apply_gradients([(grad, var)])
    if case == "adam":
        # TF's Adam decays all of m and v, scatter-adds the gradient, moves every row of var
        assert not _ops_of_type("SparseApply") and _ops_of_type("ScatterAdd")
    else:
        assert [op.type for op in _ops_of_type("SparseApply")] == [SPARSE_TYPES[case]]
    assert not _ops_of_type("Apply"), "a sparse gradient must never become a dense Apply* op"

    ref, ref_e = make_ref(), e0.copy()
    slots = ref.init_slots(ref_e[ids])
    untouched = np.setdiff1d(np.arange(10), ids)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        slot_vars = [opt.get_slot(emb, n) for n in opt.get_slot_names()]
        slot_init = sess.run(slot_vars)
        for t in range(1, 4):
            sess.run(step)
            w_rows = ref_e[ids]
            ref.step(w_rows, 2 * c * w_rows, slots, t)
            ref_e[ids] = w_rows
            np.testing.assert_allclose(sess.run(emb), ref_e, rtol=1e-9, atol=1e-12, err_msg=f"{case}, step {t}")
        np.testing.assert_array_equal(sess.run(emb)[untouched], e0[untouched])
        for sv, s0 in zip(sess.run(slot_vars), slot_init):
            np.testing.assert_array_equal(sv[untouched], s0[untouched])


def test_sparse_gradient_descent_duplicate_ids_accumulate():
    e0 = np.zeros((4, 2))
    emb = _var(e0, "emb")
    loss = af.reduce_sum(af.gather(emb, af.constant([1, 3, 1, 1])))
    step = train.GradientDescentOptimizer(0.5).minimize(loss)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        np.testing.assert_allclose(sess.run(emb), [[0, 0], [-1.5, -1.5], [0, 0], [-0.5, -0.5]])


def test_mixed_sparse_and_dense_gradient_of_one_variable_is_dense():
    emb = _var(np.ones((4, 2)), "emb")
    loss = af.add(af.reduce_sum(af.gather(emb, af.constant([0]))), af.reduce_sum(emb))
    step = train.GradientDescentOptimizer(1.0).minimize(loss)
    assert [op.type for op in _ops_of_type("Apply")] == ["ApplyGradientDescent"]
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        np.testing.assert_allclose(sess.run(emb), [[-1, -1], [0, 0], [0, 0], [0, 0]])


def test_large_embedding_sparse_update():
    n, dim = 1_000_000, 64
    emb = get_variable("big_embedding", [n, dim], initializer=random_uniform_initializer(-1.0, 1.0, seed=3))
    ids = np.unique(RNG.integers(0, n, 128))
    probe = np.setdiff1d(RNG.integers(0, n, 256), ids)
    loss = af.reduce_sum(af.gather(emb, af.constant(ids)))
    step = train.AdagradOptimizer(0.5).minimize(loss)
    assert [op.type for op in _ops_of_type("SparseApply")] == ["SparseApplyAdagrad"]
    touched = af.gather(emb, af.constant(ids))
    untouched = af.gather(emb, af.constant(probe))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        before_t, before_u = sess.run([touched, untouched])
        sess.run(step)
        after_t, after_u = sess.run([touched, untouched])
    np.testing.assert_array_equal(after_u, before_u)
    # Adagrad's first step: g = 1, accum = 0.1 + 1, so each touched entry drops by lr / sqrt(1.1).
    np.testing.assert_allclose(after_t, before_t - 0.5 / np.sqrt(1.1), rtol=1e-5, atol=1e-6)


def test_partitioned_embedding_updates_each_shard_sparsely():
    e0 = np.arange(20, dtype=np.float64).reshape(10, 2)
    with variable_scope("model"):
        emb = get_variable("emb", initializer=e0, partitioner=fixed_size_partitioner(3))
    shards = list(emb)
    ids = af.constant([0, 4, 9])
    loss = af.reduce_sum(af.nn.embedding_lookup(emb, ids, partition_strategy="div"))
    opt = train.MomentumOptimizer(1.0, 0.0)
    gvs = opt.compute_gradients(loss)
    assert [v for _, v in gvs] == shards
    assert all(isinstance(g, af.IndexedSlices) for g, _ in gvs)
    step = opt.apply_gradients(gvs)
    assert len(_ops_of_type("SparseApplyMomentum")) == 3
    assert opt.get_slot(shards[0], "momentum").op.name == "model/emb/part_0/Momentum"
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        want = e0.copy()
        want[[0, 4, 9]] -= 1.0
        np.testing.assert_allclose(sess.run(emb.as_tensor()), want)


# ---------------------------------------------------------------------------------------------
# Slots, non-slot variables, global step, placement
# ---------------------------------------------------------------------------------------------

def test_adam_slot_and_accumulator_names():
    w = _var(np.ones(3), "w")
    b = _var(np.ones(2), "b")
    opt = train.AdamOptimizer()
    opt.minimize(af.add(af.reduce_sum(w), af.reduce_sum(b)))
    assert opt.get_slot_names() == ["m", "v"]
    assert opt.get_slot(w, "m").op.name == "w/Adam"
    assert opt.get_slot(w, "v").op.name == "w/Adam_1"
    assert opt.get_slot(b, "m").op.name == "b/Adam"
    assert opt.get_slot(w, "nope") is None
    names = [v.op.name for v in opt.variables()]
    assert names == sorted(["beta1_power", "beta2_power", "w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"])
    assert all(not v.trainable for v in opt.variables())
    assert set(af.trainable_variables()) == {w, b}
    # The accumulators live with the first variable by name ("b").
    assert af.get_default_graph().get_operation_by_name("beta1_power").attrs["_class"] == ("loc:@b",)


def test_other_optimizer_slot_names():
    w = _var(np.ones(3), "w")
    loss = af.reduce_sum(af.square(w))
    rms = train.RMSPropOptimizer(0.1, centered=True)
    rms.minimize(loss)
    assert rms.get_slot_names() == ["mg", "momentum", "rms"]
    assert rms.get_slot(w, "rms").op.name == "w/RMSProp"
    assert rms.get_slot(w, "mg").op.name == "w/RMSProp_1"
    assert rms.get_slot(w, "momentum").op.name == "w/RMSProp_2"
    ada = train.AdagradOptimizer(0.1)
    ada.minimize(loss)
    assert ada.get_slot(w, "accumulator").op.name == "w/Adagrad"
    mom = train.MomentumOptimizer(0.1, 0.9)
    mom.minimize(loss)
    assert mom.get_slot(w, "momentum").op.name == "w/Momentum"
    mom2 = train.MomentumOptimizer(0.1, 0.9)
    mom2.minimize(loss)
    assert mom2.get_slot(w, "momentum").op.name == "w/Momentum_1"


def test_slots_and_updates_are_placed_with_their_variable():
    with af.device("/job:ps/task:1"):
        w = _var(np.ones(3), "w")
    with af.device("/job:worker/task:0"):
        loss = af.reduce_sum(af.square(w))
        opt = train.AdamOptimizer(0.1)
        opt.minimize(loss)
    for slot in ("m", "v"):
        s = opt.get_slot(w, slot)
        assert s.device == "/job:ps/task:1"
        assert s.op.attrs["_class"] == ("loc:@w",)
    (apply_op,) = _ops_of_type("ApplyAdam")
    assert apply_op.device == "/job:ps/task:1"
    assert apply_op.name == "Adam/update_w/ApplyAdam"


def test_train_op_and_global_step():
    w = _var(np.ones(2), "w")
    gs = train.get_or_create_global_step()
    assert gs.op.name == "global_step" and gs.dtype is af.int64 and not gs.trainable
    assert af.get_collection(af.GraphKeys.GLOBAL_STEP) == [gs]
    op = train.GradientDescentOptimizer(0.1).minimize(af.reduce_sum(w), global_step=gs, name="train")
    assert isinstance(op, af.Operation)
    assert op.name == "train" and op.type == "AssignAdd"
    assert af.get_collection("train_op") == [op]
    no_step = train.GradientDescentOptimizer(0.1).minimize(af.reduce_sum(w))
    assert no_step.type == "NoOp" and no_step.name == "GradientDescent"
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run([op, op])
        sess.run(no_step)
        assert train.global_step(sess, gs) == 1
        np.testing.assert_allclose(sess.run(w), [0.8, 0.8])


def test_gate_graph_and_explicit_var_list():
    a = _var(np.ones(2), "a")
    b = _var(np.ones(2), "b")
    loss = af.add(af.reduce_sum(af.square(a)), af.reduce_sum(b))
    opt = train.GradientDescentOptimizer(0.5)
    gvs = opt.compute_gradients(loss, var_list=[a], gate_gradients=train.Optimizer.GATE_GRAPH)
    assert [v for _, v in gvs] == [a]
    step = opt.apply_gradients(gvs)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        np.testing.assert_allclose(sess.run([a, b]), [[0, 0], [1, 1]])


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_optimizer_errors():
    w = _var(np.ones(2, np.float32), "w")
    u = _var(np.ones(2, np.float32), "unused")
    opt = train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.minimize(af.reduce_sum(w), var_list=[u])
    with pytest.raises(ValueError, match="No variables provided"):
        opt.apply_gradients([])
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, w)])
    with pytest.raises(ValueError, match="gate_gradients"):
        opt.compute_gradients(af.reduce_sum(w), gate_gradients=7)
    with pytest.raises(ValueError, match="Invalid type"):
        opt.compute_gradients(af.constant(1), var_list=[w])
    with pytest.raises(ValueError, match="No variables to optimize"):
        g = af.Graph()
        with g.as_default():
            opt.compute_gradients(af.constant(1.0))
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="(?s)shape.*variable 'w'.*update_w"):
        opt.apply_gradients([(af.constant(np.ones(3, np.float32)), w)])


def test_apply_op_inference_errors_name_the_variable():
    w = _var(np.ones((4, 2), np.float32), "weights")
    acc = _var(np.ones((4, 2), np.float32), "acc")
    bad_acc = _var(np.ones((3, 2), np.float32), "bad_acc")
    lr = af.constant(0.1)
    g = af.constant(np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="(?s)float64.*variable .weights.*ApplyGradientDescent"):
        training_ops.apply_gradient_descent(w, af.constant(0.1, dtype=af.float64), g)
    with pytest.raises(ValueError, match="must be a scalar"):
        training_ops.apply_gradient_descent(w, af.constant([0.1, 0.2]), g)
    with pytest.raises(ValueError, match="(?s)bad_acc.*weights"):
        training_ops.apply_adagrad(w, bad_acc, lr, g)
    with pytest.raises(ValueError, match="must be a variable reference"):
        training_ops.ApplyAdagrad(w._ref(), af.identity(acc), lr, g)
    with pytest.raises(ValueError, match="(?s)weights.*must have shape"):
        training_ops.sparse_apply_adagrad(w, acc, lr, af.constant(np.ones((2, 3), np.float32)), af.constant([0, 1]))
    with pytest.raises(ValueError, match="integers"):
        training_ops.sparse_apply_gradient_descent(w, lr, af.constant(np.ones((1, 2), np.float32)),
                                                   af.constant([0.5]))
    i = _var(np.ones(2, np.int32), "ints")
    with pytest.raises(ValueError, match="floating-point"):
        training_ops.apply_gradient_descent(i, af.constant(1), af.constant([1, 1]))


def test_apply_op_inference_outputs():
    w = _var(np.ones((4, 2), np.float32), "w")
    m = _var(np.zeros((4, 2), np.float32), "m")
    v = _var(np.zeros((4, 2), np.float32), "v")
    s = [af.constant(x) for x in (0.9, 0.99, 0.1, 0.9, 0.99, 1e-8)]
    out = training_ops.apply_adam(w, m, v, *s, af.placeholder(af.float32, [None, 2]))
    assert out.dtype is af.float32 and out.shape.as_list() == [4, 2]
    assert out.op.op_def.ref_inputs == (0, 1, 2) and out.op.op_def.stateful
    sp = training_ops.sparse_apply_adam(w, m, v, *s, af.placeholder(af.float32, [None, 2]),
                                        af.placeholder(af.int64, [None]))
    assert sp.op.type == "SparseApplyAdam" and sp.shape.as_list() == [4, 2]
    assert [t.op.type for t in sp.op.inputs[:3]] == ["VariableV2"] * 3


def test_var_list_may_be_any_iterable_of_variables():
    """TF takes a dict's .values() (a public GAN tutorial passes one); only the listed variables train."""
    with af.Graph().as_default(), af.Session() as sess:
        w = {"a": af.Variable(np.ones(3, np.float32)), "b": af.Variable(np.ones(3, np.float32))}
        frozen = af.Variable(np.ones(3, np.float32))
        loss = af.reduce_sum(w["a"] * w["b"] * frozen)
        train = af.train.GradientDescentOptimizer(0.5).minimize(loss, var_list=w.values())
        sess.run(af.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w["a"]), [0.5] * 3)
        np.testing.assert_allclose(sess.run(frozen), [1.0] * 3)
        with pytest.raises(TypeError, match="var_list must hold af.Variables"):
            af.train.GradientDescentOptimizer(0.5).minimize(loss, var_list=iter([loss]))


def test_sparse_adam_equals_dense_adam_and_lazy_adam_touches_only_gathered_rows():
    # TF's AdamOptimizer: a sparse gradient updates exactly as its densified gradient would (all
    # of m and v decay); tf.contrib.opt.LazyAdamOptimizer updates the gathered rows only.
    e0 = RNG.standard_normal((6, 3))
    steps = [np.array([4, 1, 4]), np.array([0, 5]), np.array([1, 1, 2])]
    results = {}
    for kind in ("sparse", "dense", "lazy"):
        g = af.Graph()
        with g.as_default():
            emb = _var(e0, "emb")
            ids = af.placeholder(af.int32, [None])
            rows = af.gather(emb, ids) if kind != "dense" else af.gather(af.identity(emb), ids)
            loss = af.reduce_sum(af.square(rows) * af.constant([1.0, 2.0, 3.0], af.float64))
            opt = af.contrib.opt.LazyAdamOptimizer(0.1) if kind == "lazy" else train.AdamOptimizer(0.1)
            step = opt.minimize(loss)
            with af.Session() as sess:
                sess.run(af.global_variables_initializer())
                for i in steps:
                    sess.run(step, {ids: i})
                results[kind] = sess.run(emb)
    np.testing.assert_allclose(results["sparse"], results["dense"], rtol=1e-12, atol=1e-14)
    # Lazy Adam by hand: duplicates summed, then Adam on the touched rows with the global step count.
    ref, m, v = e0.copy(), np.zeros_like(e0), np.zeros_like(e0)
    for t, i in enumerate(steps, 1):
        uniq = list(dict.fromkeys(i.tolist()))
        gr = {r: 0 for r in uniq}
        for r in i:
            gr[r] = gr[r] + 2 * ref[r] * np.array([1.0, 2.0, 3.0])
        lr_t = 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        for r in uniq:
            m[r] = 0.9 * m[r] + 0.1 * gr[r]
            v[r] = 0.999 * v[r] + 0.001 * gr[r] ** 2
            ref[r] -= lr_t * m[r] / (np.sqrt(v[r]) + 1e-8)
    np.testing.assert_allclose(results["lazy"], ref, rtol=1e-10)
    assert not np.allclose(results["lazy"], results["sparse"])
    np.testing.assert_array_equal(results["lazy"][3], e0[3])


def test_duplicate_sparse_rows_are_summed_before_stateful_updates():
    # Adagrad on a row gathered twice: one update with the summed gradient, as TF's base class does.
    emb = _var(np.ones((3, 2)), "emb")
    loss = af.reduce_sum(af.gather(emb, af.constant([2, 2])))
    step = train.AdagradOptimizer(0.5, initial_accumulator_value=0.1).minimize(loss)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        got = sess.run(emb)
    g = 2.0
    np.testing.assert_allclose(got[2], 1 - 0.5 * g / np.sqrt(0.1 + g * g))
    np.testing.assert_array_equal(got[:2], 1.0)
