"""Graph optimizer passes (actorflow/scheduler/optimizer.py): each rewrite happens, computes what the
unrewritten graph computes (bit for bit where the arithmetic is unchanged), is switched off by its
RewriterConfig field, and leaves stateful ops, seeded random ops, control edges, fed and fetched
tensors alone."""
import numpy as np

import actorflow as af
from actorflow.graph.ops import array_ops as raw
from actorflow.scheduler.optimizer import PassOptions, arithmetic_optimization, constant_folding, optimize
from actorflow.scheduler.plan import make_plan

RC = af.RewriterConfig
ALL_OFF = af.ConfigProto(graph_options=af.GraphOptions(rewrite_options=RC(
    constant_folding=RC.OFF, arithmetic_optimization=RC.OFF, dependency_optimization=RC.OFF,
    disable_model_pruning=True)))


def _types(plan):
    return [op.type for op in plan.ops]


def _run(g, fetches, feed, config=None):
    with af.Session(graph=g, config=config) as s:
        return s.run(fetches, feed)


def _same(a, b):
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_constant_folding_through_shape_ops_and_arithmetic():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [2, 3], name="x")
        n = af.cast(raw.Size(x, out_type=af.int32), af.float32) + af.cast(raw.Rank(x), af.float32)  # 6 + 2
        c = af.constant([1.0, 2.0, 3.0]) * 2.0 + af.reduce_sum(af.constant([[1.0, 2.0]]))
        y = x * af.cast(raw.Shape(x, out_type=af.int32)[1], af.float32) + n + c
    plan = make_plan(g, [x], [y], [])
    assert {"Shape", "Size", "Rank", "Sum"} <= set(_types(plan))
    folded = constant_folding(plan)
    types = _types(folded)
    assert "Shape" not in types and "Size" not in types and "Rank" not in types and "Sum" not in types
    assert types.count("Mul") == 1                 # x * 3 stays; the constant product is folded
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    _same(_run(g, [y], {x: xv}), _run(g, [y], {x: xv}, ALL_OFF))


def test_arithmetic_identities_are_bypassed_bit_for_bit():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [4, 5], name="x")
        a = x * 1.0
        b = 0.0 + a
        c = af.negative(af.negative(b))
        d = af.transpose(af.transpose(c, [1, 0]), [1, 0])
        e = af.cast(d, af.float32)
        f = af.reshape(e, [4, 5])
        y = af.exp(f / 1.0)
    plan = make_plan(g, [x], [y], [])
    opt = optimize(plan, PassOptions())
    assert _types(opt) == ["Exp"], _types(opt)
    assert opt.ops[0].inputs[0] is x
    xv = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    _same(_run(g, [y], {x: xv}), _run(g, [y], {x: xv}, ALL_OFF))


def test_constant_chains_collapse_and_common_subexpressions_merge():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [], name="x")
        y = x
        for _ in range(50):
            y = y + 1.0
        z = af.identity(y)                         # the fetched op itself is kept
        u = af.sin(x) * 3.0
        v = af.sin(x) * 3.0
        w = u + v
    plan = make_plan(g, [x], [z, w], [])
    opt = arithmetic_optimization(plan)
    assert _types(opt).count("AddV2") == 2          # x + 50, and u + v
    assert _types(opt).count("Sin") == 1 and _types(opt).count("Mul") == 1
    got = _run(g, [z, w], {x: 0.5})
    ref = _run(g, [z, w], {x: 0.5}, ALL_OFF)
    assert got[0] == ref[0] == np.float32(50.5)     # exact here: small integers
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-6)


def test_identity_removed_but_not_a_variable_read_or_a_fetch():
    g = af.Graph()
    with g.as_default():
        v = af.Variable(np.ones(3, np.float32), name="v")
        x = af.placeholder(af.float32, [3], name="x")
        h = af.identity(af.identity(x) * v)
        y = af.identity(h, name="y")
        init = af.global_variables_initializer()
    plan = make_plan(g, [x], [y], [])
    opt = optimize(plan, PassOptions())
    names = [op.name for op in opt.ops]
    assert "y" in names                             # fetched
    assert "v/read" in names or any(op.type in ("Identity", "_RefRead") and op.inputs[0].op.type == "VariableV2"
                                    for op in opt.ops)
    assert sum(op.type == "Identity" for op in opt.ops) <= 2
    with af.Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(y, {x: [1, 2, 3]}), [1, 2, 3])


def test_stateful_random_control_edges_and_feeds_are_untouched():
    g = af.Graph()
    with g.as_default():
        r1 = af.random_uniform([3], seed=7)
        r2 = af.random_uniform([3], seed=7)
        x = af.placeholder(af.float32, [3], name="x")
        c = af.constant([1.0, 2.0, 3.0]) * 2.0           # fed below: its value must not be folded in
        k0 = af.constant(1.0)                             # fed too: x * k0 is not x
        with af.control_dependencies([r1]):
            k = af.identity(x * k0, name="k")
        y = r1 + r2 + c + k
    plan = make_plan(g, [x, c, k0], [y], [])
    opt = optimize(plan, PassOptions())
    assert _types(opt).count("RandomUniform") == 2   # equal seeded random ops are not merged
    k_op = [op for op in opt.ops if op.name == "k"][0]
    assert [o.name for o in k_op.control_inputs] == [r1.op.name]
    with af.Session(graph=g) as s:
        out = s.run(y, {x: np.ones(3, np.float32), c: np.full(3, 100.0, np.float32), k0: 5.0})
    assert np.all(out >= 105.0) and np.all(out < 107.0)


def test_rewriter_config_fields_turn_each_pass_off():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [2, 3], name="x")
        y = af.exp(af.identity(x * af.cast(raw.Size(x, out_type=af.int32), af.float32)) * 1.0)
    plan = make_plan(g, [x], [y], [])
    rw = RC(constant_folding=RC.OFF, arithmetic_optimization=RC.OFF, dependency_optimization=RC.OFF)
    cfg = af.ConfigProto(graph_options=af.GraphOptions(rewrite_options=rw))
    off = optimize(plan, PassOptions.from_config(cfg))
    assert {"Size", "Identity"} <= set(_types(off)) and _types(off).count("Mul") == 2
    on = optimize(plan, PassOptions.from_config(af.ConfigProto()))
    assert "Size" not in _types(on) and "Identity" not in _types(on) and _types(on).count("Mul") == 1
    xv = np.ones((2, 3), np.float32)
    _same(_run(g, [y], {x: xv}), _run(g, [y], {x: xv}, cfg))


def test_optimizer_leaves_loops_alone_and_they_still_run():
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [], name="n")
        i, v = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 1.0 + 2.0), [0, af.constant(1.0)])
    got = _run(g, [i, v], {n: 5})
    assert got[0] == 5 and got[1] == 11.0


def test_a_fed_constant_is_never_folded_in():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [3], name="x")
        one = af.constant(1.0, name="one")
        y = af.exp(x * one) + af.constant(2.0) * one
    feed = {x: np.zeros(3, np.float32), one: 3.0}
    np.testing.assert_allclose(_run(g, y, feed), np.exp(np.zeros(3) * 3.0) + 6.0)
    np.testing.assert_array_equal(_run(g, y, {x: np.zeros(3, np.float32)}), np.full(3, 3.0, np.float32))
