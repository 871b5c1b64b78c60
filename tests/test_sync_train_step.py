"""The synchronous training step (actors/sync_step.py, SyncTrainProgram): training plans run in the
caller's thread give the actors' variable values bit for bit, the actors' errors, and stay atomic
against actor steps of other threads."""
from __future__ import annotations

import asyncio
import sys
import threading

import numpy as np
import pytest

import actorflow as af
import actorflow.actors.sync_step as sync_step
from actorflow.actors.sync_step import SyncTrainProgram

pytestmark = pytest.mark.usefixtures("graph")


def _session(sync: bool, monkeypatch, jit_off: bool = False):
    """A session whose executables are built with (`sync`) or without the synchronous training path
    (`jit_off`: global_jit_level OFF, for a plan without DEFAULT's tiered JIT clusters)."""
    monkeypatch.setattr(sync_step, "TRAINING_STEPS", sync)
    if jit_off:
        oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.OFF)
        return af.Session(config=af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo)))
    return af.Session()


def _mlp(rng, sizes=(96, 160, 128, 10)):
    x = af.placeholder(af.float32, [None, sizes[0]], name="x")
    h = x
    for i in range(len(sizes) - 1):
        w = rng.standard_normal((sizes[i], sizes[i + 1])).astype(np.float32) * 0.1
        h = af.layers.dense(h, sizes[i + 1], activation=af.nn.relu if i < len(sizes) - 2 else None,
                            kernel_initializer=af.constant_initializer(w),
                            bias_initializer=af.constant_initializer(0.01 * (i + 1)))
    return x, h


def _convnet(rng):
    x = af.placeholder(af.float32, [None, 12, 12, 1], name="x")
    h = x
    for filters in (4, 8):
        k = rng.standard_normal((3, 3, h.shape[-1], filters)).astype(np.float32) * 0.2
        h = af.layers.conv2d(h, filters, 3, padding="same", activation=af.nn.relu,
                             kernel_initializer=af.constant_initializer(k), bias_initializer=af.zeros_initializer())
        h = af.layers.max_pooling2d(h, 2, 2)
    w = rng.standard_normal((3 * 3 * 8, 10)).astype(np.float32) * 0.1
    return x, af.layers.dense(af.layers.flatten(h), 10, kernel_initializer=af.constant_initializer(w))


OPTIMIZERS = {
    "sgd": lambda: af.train.GradientDescentOptimizer(0.05),
    "momentum": lambda: af.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda: af.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adam": lambda: af.train.AdamOptimizer(0.01),
}


def _train_values(model, opt, sync, monkeypatch, steps=4, batch=64):
    g = af.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x, logits = (_mlp if model == "mlp" else _convnet)(rng)
        y = af.placeholder(af.int64, [None], name="y")
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = OPTIMIZERS[opt]().minimize(loss)
        init = af.global_variables_initializer()
        variables = af.global_variables()
    shape = (batch,) + tuple(d for d in x.shape.as_list()[1:])
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(steps)]
    ys = [rng.integers(0, 10, batch) for _ in range(steps)]
    monkeypatch.setattr(sync_step, "TRAINING_STEPS", sync)
    with af.Session(graph=g) as sess:
        sess.run(init)
        losses = [sess.run([train, loss], {x: a, y: b})[1] for a, b in zip(xs, ys)]
        kinds = {type(e.sync) for e in sess._cache.values()}
        values = sess.run(variables)
    return losses, values, kinds


@pytest.mark.parametrize("model,opt", [("mlp", "sgd"), ("mlp", "momentum"), ("mlp", "adam"), ("convnet", "sgd"),
                                       ("convnet", "nesterov"), ("convnet", "adam")])
def test_training_steps_match_the_actors_bit_for_bit(model, opt, monkeypatch):
    fast_losses, fast, fast_kinds = _train_values(model, opt, True, monkeypatch)
    slow_losses, slow, slow_kinds = _train_values(model, opt, False, monkeypatch)
    assert SyncTrainProgram in fast_kinds
    assert SyncTrainProgram not in slow_kinds
    assert np.array_equal(fast_losses, slow_losses)
    assert len(fast) == len(slow) > 0
    for u, v in zip(fast, slow):
        assert u.dtype == v.dtype
        np.testing.assert_array_equal(u, v)
    assert fast_losses[-1] != fast_losses[0]          # it trained


def _exe_of(sess, fetch):
    for (fetches, targets, _feeds), e in sess._cache.items():
        if any(f is fetch for f in fetches + targets):
            return e
    raise AssertionError("no executable fetches it")


def test_big_gemms_are_split_over_the_pool_in_the_callers_thread(monkeypatch):
    # 256x512 @ 512x512 is worth the pool: it runs as blocks, some on the pool's threads.
    a = af.placeholder(af.float32, [256, 512], name="a")
    w = af.Variable(np.full((512, 512), 0.25, np.float32), name="w")
    y = af.matmul(a, w, name="y")
    upd = af.assign_add(w, af.ones_like(w), name="upd")
    with _session(True, monkeypatch) as sess:
        sess.run(w.initializer)
        av = np.ones((256, 512), np.float32)
        out, _ = sess.run([y, upd], {a: av})
        exe = _exe_of(sess, y)
        assert isinstance(exe.sync, SyncTrainProgram)
        assert out.shape == (256, 512)
        # the read happened before or after the update, never half-way (both are valid orders)
        assert np.all(out == 128.0) or np.all(out == 640.0)
        np.testing.assert_array_equal(sess.run(w), np.full((512, 512), 1.25, np.float32))


def test_uninitialized_variable_error_matches_the_actors(monkeypatch):
    v = af.Variable(np.zeros(3, np.float32), name="v")
    x = af.placeholder(af.float32, [3], name="x")
    step = af.assign_add(v, x, name="step")
    with _session(True, monkeypatch) as sess:
        with pytest.raises(af.errors.FailedPreconditionError) as fast:
            sess.run(step, {x: np.ones(3, np.float32)})
        assert isinstance(_exe_of(sess, step).sync, SyncTrainProgram)
        md = af.RunMetadata()
        with pytest.raises(af.errors.FailedPreconditionError) as slow:
            sess.run(step, {x: np.ones(3, np.float32)},
                     options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(step, {x: np.ones(3, np.float32)}), np.ones(3))
    assert str(fast.value) == str(slow.value)
    assert fast.value.node_def == slow.value.node_def


def test_kernel_error_in_a_training_step_matches_the_actors(monkeypatch):
    w = af.Variable(np.ones((4, 3), np.float32), name="w")
    x = af.placeholder(af.float32, [None, None], name="x")
    loss = af.reduce_sum(af.matmul(x, w, name="mm"))
    train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
    bad = {x: np.ones((2, 5), np.float32)}
    with _session(True, monkeypatch) as sess:
        sess.run(w.initializer)
        with pytest.raises(af.errors.InvalidArgumentError) as fast:
            sess.run(train, bad)
        assert isinstance(_exe_of(sess, train).sync, SyncTrainProgram)
        with pytest.raises(af.errors.InvalidArgumentError) as slow:
            sess.run(train, bad, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
                     run_metadata=af.RunMetadata())
        np.testing.assert_array_equal(sess.run(w), np.ones((4, 3)))     # nothing was updated
        sess.run(train, {x: np.ones((2, 4), np.float32)})
        np.testing.assert_allclose(sess.run(w), np.full((4, 3), 0.8))
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)
    assert "mm" in str(fast.value)


def test_concurrent_sync_and_actor_steps_update_atomically(monkeypatch):
    """Threads running synchronous steps, and aruns on another loop (actor steps), increment one
    counter; every increment lands (each update is atomic), and a reader never sees a torn buffer."""
    v = af.Variable(np.zeros(4096, np.float32), name="counter")
    inc = af.assign_add(v, af.ones_like(v), use_locking=True, name="inc")
    read = af.identity(v, name="read")
    threads_n, per_thread, aruns = 3, 40, 40
    torn = []
    with _session(True, monkeypatch) as sess:
        sess.run(v.initializer)
        sess.run(inc)
        assert isinstance(_exe_of(sess, inc).sync, SyncTrainProgram)

        def worker():
            for _ in range(per_thread):
                sess.run(inc)
                r = sess.run(read)
                if r.min() != r.max():
                    torn.append(r)

        async def actor_steps():
            for _ in range(aruns):
                await sess.arun(inc)

        ts = [threading.Thread(target=worker) for _ in range(threads_n)]
        for t in ts:
            t.start()
        asyncio.run(actor_steps())
        for t in ts:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in ts)
        final = sess.run(v)
    assert not torn
    np.testing.assert_array_equal(final, np.full(4096, 1 + threads_n * per_thread + aruns, np.float32))


def test_traced_training_steps_stay_complete(monkeypatch):
    w = af.Variable(np.ones((8, 8), np.float32), name="w")
    x = af.placeholder(af.float32, [None, 8], name="x")
    train = af.train.GradientDescentOptimizer(0.1).minimize(af.reduce_sum(af.matmul(x, w)))
    with _session(True, monkeypatch) as sess:
        sess.run(w.initializer)
        sess.run(train, {x: np.ones((2, 8), np.float32)})
        md = af.RunMetadata()
        sess.run(train, {x: np.ones((2, 8), np.float32)}, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
                 run_metadata=md)
        names = {ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats}
        assert isinstance(_exe_of(sess, train).sync, SyncTrainProgram)
    assert any("ApplyGradientDescent" in n or "update_w" in n for n in names), names
    assert "w" in names


def test_a_step_goes_to_the_actors_while_an_actor_step_is_in_flight(monkeypatch):
    v = af.Variable(np.zeros(3, np.float32), name="v")
    inc = af.assign_add(v, np.ones(3, np.float32), name="inc")
    with _session(True, monkeypatch) as sess:
        sess.run(v.initializer)
        sess.run(inc)
        exe = _exe_of(sess, inc)
        gate = sess._backend.container.gate
        gate.actor_started()                     # as Executable.start does for an actor step
        try:
            assert exe.run_sync([]) is None       # the caller then runs it on the actors
            np.testing.assert_array_equal(sess.run(inc), np.full(3, 2.0))
        finally:
            gate.actor_ended()
        assert gate.actor_steps == 0
        assert exe.run_sync([]) is not None
        assert all(r.busy is None for r in exe.sync.resources)
        np.testing.assert_array_equal(sess.run(v), np.full(3, 3.0))


def test_arun_on_the_runtime_loop_never_runs_a_training_step_there(monkeypatch):
    v = af.Variable(np.zeros(2, np.float32), name="v")
    inc = af.assign_add(v, np.ones(2, np.float32), name="inc")
    with _session(True, monkeypatch) as sess:
        sess.run(v.initializer)
        sess.run(inc)
        exe = _exe_of(sess, inc)
        assert exe.sync.stateful and exe.run_sync([], on_loop=True) is None

        async def on_loop():
            return await sess.arun(inc)
        out = asyncio.run_coroutine_threadsafe(on_loop(), sess._backend.rt.loop).result(timeout=60)
        np.testing.assert_array_equal(out, np.full(2, 2.0))
        np.testing.assert_array_equal(sess.run(v), np.full(2, 2.0))


def test_update_tail_runs_the_independent_updates_together_and_matches_in_order(monkeypatch):
    """The weight updates that end a step (with the bias gradients that feed their bias updates) run as
    one set of blocks (SyncTrainProgram._tail); the variables come out as in order, bit for bit."""
    rng = np.random.default_rng(7)
    x, logits = _mlp(rng, sizes=(200, 256, 192, 10))
    y = af.placeholder(af.int64, [None], name="y")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = af.train.GradientDescentOptimizer(0.05).minimize(loss)
    variables = af.global_variables()
    init = af.global_variables_initializer()
    feeds = [{x: rng.standard_normal((256, 200)).astype(np.float32), y: rng.integers(0, 10, 256)}
             for _ in range(3)]
    calls = []
    tail = SyncTrainProgram._tail
    monkeypatch.setattr(SyncTrainProgram, "_tail", lambda self, *a: calls.append(self) or tail(self, *a))
    results = []
    # JIT off: DEFAULT's loss cluster takes the last bias gradient, and this test counts the tail's groups
    with _session(True, monkeypatch, jit_off=True) as sess:
        for batched in (True, False):
            sess.run(init)
            sess.run([train, loss], feeds[0])
            prog = _exe_of(sess, train).sync
            start, groups, after = prog.tail
            names = [[prog.code[k][1].name for k in g] for g in groups]
            assert len(groups) >= 5 and [prog.code[k][1].name for k in after] == [train.name]
            assert sum(len(g) == 1 and "kernel" in g[0] for g in names) == 3         # the weight updates
            assert sum(len(g) == 2 and "BiasAddGrad" in g[0] for g in names) == 3    # bias grad + update
            if not batched:
                prog.tail = None
            n = len(calls)
            sess.run(init)
            losses = [sess.run([train, loss], f)[1] for f in feeds]
            assert (prog in calls[n:]) == batched
            results.append((losses, sess.run(variables)))
    (l1, v1), (l2, v2) = results
    assert np.array_equal(l1, l2)
    for a, b in zip(v1, v2):
        np.testing.assert_array_equal(a, b)


def test_updates_of_one_variable_stay_in_order_in_the_tail(monkeypatch):
    v = af.Variable(np.zeros((300, 300), np.float32), name="v")
    w = af.Variable(np.zeros((300, 300), np.float32), name="w")
    x = af.placeholder(af.float32, [300, 300], name="x")
    u1 = af.assign_add(v, x, name="u1")
    u2 = af.assign_add(v, x * 2.0, name="u2")
    u3 = af.assign_add(w, x * 3.0, name="u3")
    step = af.group(u1, u2, u3, name="step")
    with _session(True, monkeypatch) as sess:
        sess.run([v.initializer, w.initializer])
        sess.run(step, {x: np.ones((300, 300), np.float32)})
        prog = _exe_of(sess, step).sync
        assert prog.tail is not None
        start, groups, after = prog.tail
        by_name = {prog.code[k][1].name: gi for gi, g in enumerate(groups) for k in g}
        assert by_name["u1"] == by_name["u2"] != by_name["u3"]      # one variable: one group, in order
        assert [prog.code[k][1].name for k in after] == ["step"]
        sess.run(step, {x: np.ones((300, 300), np.float32)})
        np.testing.assert_array_equal(sess.run(v), np.full((300, 300), 6.0))
        np.testing.assert_array_equal(sess.run(w), np.full((300, 300), 6.0))


@pytest.mark.parametrize("sync", [True, False])
def test_a_clip_fetched_with_the_train_op_runs_before_the_update_it_races(sync, monkeypatch):
    """`sess.run([train_op, clip_op])` (a WGAN's weight clipping): nothing orders the clip's assign and
    the optimizer's update of one variable. TF runs ready nodes in the order they became ready, so
    the clip (ready at once) assigns first and the update (ready at the end of the backward pass)
    applies on top of it; on both paths here too. Before, the synchronous path ran the clip last and
    lost the update (a WGAN's critic never trained)."""
    v = af.Variable([1.0, 2.0], name="v")
    x = af.placeholder(af.float32, [2], name="x")
    loss = af.reduce_sum(af.square(v * x))
    train = af.train.RMSPropOptimizer(0.1).minimize(loss, var_list=[v])
    clip = v.assign(af.clip_by_value(v, -0.5, 0.5))
    with _session(sync, monkeypatch) as sess:
        sess.run(af.global_variables_initializer())
        sess.run([loss, train, clip], {x: [1.0, 1.0]})
        if sync:
            assert isinstance(_exe_of(sess, train).sync, SyncTrainProgram)
        got = sess.run(v)
    # the update of the clipped value: RMSProp (ms starts at 1, decay 0.9) with the gradient 2 v x^2
    # of the unclipped v the step read
    g = np.array([2.0, 4.0], np.float32)
    ms = np.float32(0.9) + np.float32(0.1) * g * g
    np.testing.assert_allclose(got, np.float32(0.5) - np.float32(0.1) * g / np.sqrt(ms), rtol=1e-6)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="huge-page buffers are Linux's")
def test_big_variable_buffers_start_on_a_huge_page_boundary(monkeypatch):
    """Variables of 2 MiB or more live in 2 MiB-aligned buffers advised into huge pages (actors/resource.py),
    through initialization, in-place updates and copy-on-write copies; small ones are plain arrays."""
    big0 = np.arange(784 * 1024, dtype=np.float32).reshape(784, 1024) / 1e5
    w = af.Variable(big0, name="w")
    b = af.Variable(np.ones(1024, np.float32), name="b")
    x = af.placeholder(af.float32, [None, 784], name="x")
    loss = af.reduce_sum(af.matmul(x, w) + b)
    train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
    xv = np.full((4, 784), 0.25, np.float32)
    with _session(True, monkeypatch) as sess:
        sess.run(af.global_variables_initializer())
        held = sess.run(w)                       # a fetched value: the next update must copy, not write over it
        sess.run(train, {x: xv})
        exe = _exe_of(sess, train)
        res = {r.name: r for r in exe.sync.resources}
        assert res["w"].value.ctypes.data % (2 << 20) == 0
        assert res["b"].value.base is None or res["b"].value.nbytes < (2 << 20)
        np.testing.assert_array_equal(held, big0)
        expected = big0 - np.float32(0.5) * (xv.T @ np.ones((4, 1024), np.float32))
        np.testing.assert_allclose(sess.run(w), expected, rtol=1e-6)
        before = res["w"].value.ctypes.data
        sess.run(train, {x: xv})                # nothing else holds it now: updated in place
        assert res["w"].value.ctypes.data == before
        np.testing.assert_allclose(sess.run(b), 1 - 0.5 * 4 * 2, rtol=1e-6)


def test_a_kernel_error_in_the_update_tail_names_its_op_as_the_actors_do(monkeypatch):
    v = af.Variable(np.zeros(3, np.float32), name="v")
    w = af.Variable(np.zeros(3, np.float32), name="w")
    x = af.placeholder(af.float32, [None], name="x")
    step = af.group(af.assign_add(v, x, name="add_v"), af.assign_add(w, af.ones([3]), name="add_w"), name="step")
    bad = {x: np.ones(5, np.float32)}
    with _session(True, monkeypatch) as sess:
        sess.run([v.initializer, w.initializer])
        sess.run(step, {x: np.ones(3, np.float32)})
        assert _exe_of(sess, step).sync.tail is not None
        with pytest.raises(af.errors.InvalidArgumentError) as fast:
            sess.run(step, bad)
        with pytest.raises(af.errors.InvalidArgumentError) as slow:
            sess.run(step, bad, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
                     run_metadata=af.RunMetadata())
        np.testing.assert_array_equal(sess.run(v), np.ones(3))
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)
    assert "add_v" in str(fast.value)


def test_small_groups_of_the_tail_share_one_thunk_and_match(monkeypatch):
    """Groups of the tail that took under SERIAL_GROUP_S run together in one thunk (no hand-off to
    another thread; with a single thunk, none at all), and the variables come out the same bit for
    bit as with every group on a thread of its own."""
    rng = np.random.default_rng(11)
    x, logits = _mlp(rng, sizes=(6, 16, 8, 3))
    y = af.placeholder(af.int64, [None], name="y")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = af.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
    variables = af.global_variables()
    init = af.global_variables_initializer()
    feeds = [{x: rng.standard_normal((8, 6)).astype(np.float32), y: rng.integers(0, 3, 8)} for _ in range(4)]
    handed = []
    run_blocks = sync_step._run_blocks
    monkeypatch.setattr(sync_step, "_run_blocks", lambda pool, thunks, threads: handed.append(len(thunks))
                        or run_blocks(pool, thunks, threads))
    results = []
    with _session(True, monkeypatch, jit_off=True) as sess:
        for serial_s in (0.0, 10.0):              # every group on its own; every group small
            monkeypatch.setattr(sync_step, "SERIAL_GROUP_S", serial_s)
            sess.run(init)
            sess.run([train, loss], feeds[0])
            prog = _exe_of(sess, train).sync
            assert prog.tail is not None and len(prog.tail[1]) >= 3
            assert all(t is not None for t in prog.group_s)
            handed.clear()
            losses = [sess.run([train, loss], f)[1] for f in feeds[1:]]
            if serial_s:
                assert handed == []
            else:
                assert handed == [len(prog.tail[1])] * 3
            results.append((losses, sess.run(variables)))
    (l1, v1), (l2, v2) = results
    assert l1 == l2
    for a, b in zip(v1, v2):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sync", [True, False])
def test_an_assign_replaces_a_held_buffer_without_copying_it_first(monkeypatch, sync):
    """An Assign overwrites every element: when a fetched value still holds the variable's buffer, the
    variable takes a new buffer holding the assigned value, without first copying the old one (as
    copy-on-write does for updates that read it); when nothing holds it, it is written in place."""
    from actorflow.actors.resource import VariableResource
    copied = []
    exclusive = VariableResource.exclusive
    monkeypatch.setattr(VariableResource, "exclusive", lambda self: (copied.append(self.name), exclusive(self))[1])
    big0 = np.arange(1 << 20, dtype=np.float32)
    v = af.Variable(big0, name="v")
    x = af.placeholder(af.float32, [1 << 20], name="x")
    assign = af.assign(v, x * 2.0)
    with _session(sync, monkeypatch) as sess:
        sess.run(af.global_variables_initializer())
        held = sess.run(v)
        sess.run(assign, {x: np.ones(1 << 20, np.float32)})
        np.testing.assert_array_equal(held, big0)                 # the snapshot is untouched
        np.testing.assert_array_equal(sess.run(v), 2.0)
        del held
        before = sess.run(v).ctypes.data
        sess.run(assign, {x: np.full(1 << 20, 3.0, np.float32)})   # nothing holds it now: in place
        after = sess.run(v)
        np.testing.assert_array_equal(after, 6.0)
        assert after.ctypes.data == before
    assert "v" not in copied
