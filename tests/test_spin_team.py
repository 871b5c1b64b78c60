"""The kernel pool's SpinTeam (actors/pool.py): the helpers that run a split kernel's blocks beside
the thread that splits it, woken by a store to memory; and kernels/spin.py under it."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow.actors.pool import KernelPool, SpinTeam, spin_us
from actorflow.kernels import spin
from actorflow.kernels.cpu import matmul


@pytest.fixture
def team():
    t = SpinTeam(1, 2000)
    yield t
    t.close()
    for th in t.threads:
        th.join(2)


def test_spin_until_sees_another_threads_store():
    flags = spin.new_flags(2)
    assert spin.spin_until(flags, spin.STRIDE, 0, 10) == 0            # runs out: returns what it saw

    def later():
        time.sleep(0.02)
        flags[spin.STRIDE] = 7
    t = threading.Thread(target=later)
    t.start()
    t0 = time.perf_counter()
    v = 0
    while v == 0 and time.perf_counter() - t0 < 5:
        v = spin.spin_until(flags, spin.STRIDE, 0, 10_000_000)
    t.join()
    assert v == 7
    assert spin.iterations_per_us() > 1


def test_run_uses_the_helpers_and_runs_every_block(team):
    seen, done = [], []

    def block(i):
        def f():
            seen.append(threading.current_thread().name)
            time.sleep(0.02)                  # releases the GIL: the helper takes the next block
            done.append(i)
        return f
    assert team.run([block(i) for i in range(6)])
    assert sorted(done) == list(range(6))
    assert any(name.startswith("actorflow-team") for name in seen)
    assert threading.current_thread().name in seen


@pytest.mark.parametrize("us", [0, 2000])
def test_back_to_back_runs_never_return_early(us):
    """Thousands of tiny runs: each returns only after all of its blocks ended (a stale wake-up of
    the run before must not end the next one). With spin_us 0 every wait goes through the events."""
    team = SpinTeam(1, us)
    try:
        _back_to_back(team)
    finally:
        team.close()


def _back_to_back(team):
    for r in range(3000):
        marks = [0, 0, 0]

        def block(i, marks=marks):
            def f():
                marks[i] = 1
            return f
        assert team.run([block(0), block(1), block(2)])
        assert marks == [1, 1, 1], r


def test_the_first_error_is_raised_after_every_block_ran(team):
    ran = []

    def ok(i):
        return lambda: ran.append(i)

    def bad():
        raise ValueError("block 2 failed")
    with pytest.raises(ValueError, match="block 2 failed"):
        team.run([ok(0), ok(1), bad, ok(3), ok(4)])
    assert sorted(ran) == [0, 1, 3, 4]
    assert team.run([ok(5), ok(6)])                           # the team runs on
    assert sorted(ran) == [0, 1, 3, 4, 5, 6]


def test_a_busy_team_declines(team):
    inner = []

    def nested():
        inner.append(team.run([lambda: None, lambda: None]))
    assert team.run([nested, lambda: time.sleep(0.01)])
    assert inner == [False]                   # a block that splits again goes to the pool instead


def test_helpers_sleep_after_spin_us(team):
    """After its last block a helper spins spin_us (2 ms here), then sleeps: no CPU while idle."""
    from actorflow.scheduler.jit.compile import wait_for_compiles
    wait_for_compiles()                 # (an earlier test's compile on the JIT's thread would count)
    team.run([lambda: time.sleep(0.005), lambda: time.sleep(0.005)])
    time.sleep(0.05)
    c0, t0 = time.process_time(), time.perf_counter()
    time.sleep(0.3)
    assert time.process_time() - c0 < 0.1 * (time.perf_counter() - t0)
    done = []
    assert team.run([lambda: done.append(1), lambda: done.append(2)])     # and a sleeping helper wakes
    assert sorted(done) == [1, 2]


def test_close_stops_the_helpers():
    t = SpinTeam(2, 500)
    assert t.run([lambda: None] * 4)
    t.close()
    for th in t.threads:
        th.join(2)
        assert not th.is_alive()
    assert t.run([lambda: None]) is False


def test_af_spin_us(monkeypatch):
    monkeypatch.setenv("AF_SPIN_US", "0")
    pool = KernelPool(2)
    try:
        assert spin_us() == 0 and pool.team() is None
    finally:
        pool.shutdown(wait=True)
    monkeypatch.setenv("AF_SPIN_US", "soon")
    with pytest.raises(ValueError, match="AF_SPIN_US"):
        spin_us()
    monkeypatch.delenv("AF_SPIN_US")
    pool = KernelPool(2)
    try:
        team = pool.team()
        assert team is not None and pool.team() is team
    finally:
        pool.shutdown(wait=True)
    assert all(not th.is_alive() for th in team.threads)
    assert pool.team() is team or pool.team() is None


def _train(spin_setting, monkeypatch, steps=4):
    monkeypatch.setenv("AF_SPIN_US", spin_setting)
    monkeypatch.setattr(matmul, "MIN_SPLIT_MACS", 0)          # the small MLP's GEMMs split too
    rng = np.random.default_rng(3)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 64], name="x")
        y = af.placeholder(af.int64, [None], name="y")
        h = af.layers.dense(x, 256, activation=af.nn.relu,
                            kernel_initializer=af.constant_initializer(rng.standard_normal((64, 256)).astype(np.float32) * 0.1))
        logits = af.layers.dense(h, 10, kernel_initializer=af.constant_initializer(
            rng.standard_normal((256, 10)).astype(np.float32) * 0.1))
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = af.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
        init = af.global_variables_initializer()
    runs = []
    team_run = SpinTeam.run
    monkeypatch.setattr(SpinTeam, "run", lambda self, thunks: runs.append(len(thunks)) or team_run(self, thunks))
    xs = rng.standard_normal((256, 64)).astype(np.float32)
    ys = rng.integers(0, 10, 256)
    with af.Session(graph=g) as sess:
        sess.run(init)
        losses = [sess.run([loss, train], {x: xs, y: ys})[0] for _ in range(steps)]
        used = bool(runs)
        vals = sess.run(g.get_collection(af.GraphKeys.GLOBAL_VARIABLES))
    return losses, vals, used


def test_training_with_the_team_matches_the_pool_bit_for_bit(monkeypatch):
    a_loss, a_vals, a_used = _train("0", monkeypatch)
    b_loss, b_vals, b_used = _train("1000", monkeypatch)
    assert not a_used and b_used
    assert a_loss == b_loss
    for u, v in zip(a_vals, b_vals):
        np.testing.assert_array_equal(u, v)
