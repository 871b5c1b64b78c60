"""The distributed runtime with real processes on loopback (af.cluster.LocalCluster): placement,
partitioning with Send/Recv, feeds and fetches across tasks, large tensors, concurrent steps,
between-graph replication, sharded embeddings, the cluster token and malformed frames, and errors.

One cluster (2 PS tasks, 2 workers) serves the whole module: starting one costs a second or two.
State on the parameter servers is shared by every test, so each test names its variables uniquely.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import time

import aiohttp
import msgpack
import numpy as np
import pytest

import actorflow as af
from actorflow import errors
from actorflow.cluster import LocalCluster
from actorflow.cluster.local import free_port, free_ports, task_health
from actorflow.graph.device_spec import DeviceSpec
from actorflow.transport.channel import TOKEN_HEADER, Peer

pytestmark = pytest.mark.timeout(120)

PS0, PS1 = "/job:ps/task:0", "/job:ps/task:1"
W0, W1 = "/job:worker/task:0", "/job:worker/task:1"


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cluster-logs")


@pytest.fixture(scope="module")
def cluster(log_dir):
    c = LocalCluster(ps=2, workers=2, log_dir=str(log_dir))
    c.start()
    yield c
    c.stop()


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"


def address(cluster, job: str, task: int) -> str:
    return cluster.spec.task_address(job, task)


def assert_serving(cluster):
    """Every task still answers its health check and runs a step that touches all of them."""
    for job, task in cluster.spec.tasks():
        assert task_health(address(cluster, job, task), cluster.token, 2.0) is not None, f"/job:{job}/task:{task}"
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [2], name="x")
        vals = []
        for dev in (PS0, PS1, W0, W1):
            with af.device(dev):
                vals.append(x * 2.0)
        total = af.add_n(vals)
        with af.Session(cluster.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(total, {x: np.array([1, 2], np.float32)}), [8, 16])


# ---------------------------------------------------------------------------------------------------
# One graph over several tasks gives the values of one process
# ---------------------------------------------------------------------------------------------------

def _model(prefix: str):
    """A small regression model: weights on the two PS tasks, layers pinned to the two workers, the
    loss and the update left to automatic placement."""
    rng = np.random.default_rng(0)
    x = af.placeholder(af.float32, [None, 5], name="x")
    y = af.placeholder(af.float32, [None, 1], name="y")
    with af.device(PS0):
        w1 = af.Variable(rng.normal(size=(5, 8)).astype(np.float32), name=f"{prefix}/w1")
        b1 = af.Variable(np.zeros(8, np.float32), name=f"{prefix}/b1")
    with af.device(PS1):
        w2 = af.Variable(rng.normal(size=(8, 1)).astype(np.float32), name=f"{prefix}/w2")
    with af.device(W0):
        h = af.nn.relu(af.matmul(x, w1) + b1)
    with af.device(W1):
        out = af.matmul(h, w2)
        scaled = af.reduce_mean(h) * af.reduce_max(out)
    loss = af.reduce_mean(af.square(out - y))
    train = af.train.GradientDescentOptimizer(0.05).minimize(loss)
    return x, y, [w1, b1, w2], out, scaled, loss, train


def _train_and_read(target: str, prefix: str, config=None):
    g = af.Graph()
    with g.as_default():
        x, y, params, out, scaled, loss, train = _model(prefix)
        rng = np.random.default_rng(1)
        xs = rng.normal(size=(16, 5)).astype(np.float32)
        ys = rng.normal(size=(16, 1)).astype(np.float32)
        with af.Session(target, graph=g, config=config) as sess:
            sess.run(af.global_variables_initializer())
            first = sess.run([out, scaled, loss], {x: xs, y: ys})
            losses = [sess.run([loss, train], {x: xs, y: ys})[0] for _ in range(5)]
            return first, losses, sess.run(params)


def test_split_graph_matches_one_process(cluster):
    name = unique("split")
    local_first, local_losses, local_params = _train_and_read("", name)
    dist_first, dist_losses, dist_params = _train_and_read(cluster.target, name)
    for a, b in zip(local_first, dist_first):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dist_losses, local_losses, rtol=1e-5)
    for a, b in zip(local_params, dist_params):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert dist_losses[-1] < dist_losses[0]


def test_split_graph_with_the_jit_on_matches_and_never_waits_on_itself(cluster):
    # With global_jit_level ON_1 each task's partition gets JIT clusters. A cluster must not join ops
    # that depend on different _Recvs: {relu's gradient, ...} fed by the PS's read of the weights
    # and feeding the gradient Send made one _JitCluster wait for its own output across tasks, and
    # the first training step hung until its deadline.
    name = unique("split_jit")
    oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1)
    cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo), operation_timeout_in_ms=30000)
    local_first, local_losses, local_params = _train_and_read("", name)
    dist_first, dist_losses, dist_params = _train_and_read(cluster.target, name, cfg)
    for a, b in zip(local_first, dist_first):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dist_losses, local_losses, rtol=1e-5)
    for a, b in zip(local_params, dist_params):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_while_loop_fed_from_other_tasks(cluster, graph):
    # A while loop stays whole on one task; its inputs and its consumers may live elsewhere.
    with af.device(PS0):
        start = af.Variable(np.array([1.0, 2.0], np.float32), name=unique("loop_start"))
    n = af.placeholder(af.int32, [], name="n")
    with af.device(W1):
        _, powered = af.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 1.5), [af.constant(0), start])
    with af.device(W0):
        out = af.reduce_sum(powered)
    with af.Session(cluster.target) as sess:
        sess.run(start.initializer)
        for k in (0, 1, 5):
            pv, ov = sess.run([powered, out], {n: k})
            np.testing.assert_allclose(pv, np.array([1.0, 2.0]) * 1.5 ** k, rtol=1e-6)
            assert ov == pytest.approx(3.0 * 1.5 ** k, rel=1e-6)


def test_unconstrained_graph_runs_on_the_cluster(cluster, graph):
    # No device anywhere: automatic placement puts everything somewhere valid.
    a = af.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = af.placeholder(af.float32, [3, 2])
    c = af.reduce_sum(af.matmul(a, b), axis=1)
    bv = np.ones((3, 2), np.float32)
    with af.Session(cluster.target) as sess:
        np.testing.assert_array_equal(sess.run(c, {b: bv}), (np.arange(6).reshape(2, 3) @ bv).sum(1))


def _task_graphs(cluster, job, task):
    """{node name: op type} over the partitions a task has registered (its /status?graphs=1)."""
    import urllib.request
    req = urllib.request.Request(f"http://{address(cluster, job, task)}/status?graphs=1",
                                 headers={TOKEN_HEADER: cluster.token})
    with urllib.request.urlopen(req, timeout=10) as r:
        doc = json.loads(r.read())
    return {n[0]: n[1] for part in doc["graphs"] for n in part["nodes"]}


@pytest.mark.parametrize("jit", [True, False])
def test_the_clients_jit_and_rewrite_switches_reach_the_tasks(cluster, graph, jit):
    """OptimizerOptions.global_jit_level and RewriterConfig switches given to a remote session are
    what the workers' compilers do: the JIT on makes a _JitCluster on the worker, off leaves the ops;
    arithmetic_optimization OFF keeps `x * 1`, which the default removes."""
    tag = unique("jit_on" if jit else "jit_off")
    with af.device(W1):
        x = af.placeholder(af.float32, [4], name=f"{tag}/x")
        one = af.multiply(x, 1.0, name=f"{tag}/one")
        y = af.tanh(af.exp(one * 0.5, name=f"{tag}/exp") + 1.0, name=f"{tag}/tanh")
    OO, RC = af.OptimizerOptions, af.RewriterConfig
    cfg = af.ConfigProto(graph_options=af.GraphOptions(
        optimizer_options=OO(global_jit_level=OO.ON_1 if jit else OO.OFF),
        rewrite_options=RC(arithmetic_optimization=RC.DEFAULT if jit else RC.OFF)))
    xv = np.array([0, 1, 2, 3], np.float32)
    with af.Session(cluster.target, config=cfg) as sess:
        got = sess.run(y, {x: xv})
    np.testing.assert_allclose(got, np.tanh(np.exp(xv * 0.5) + 1.0), rtol=1e-6)
    ops = {name: t for name, t in _task_graphs(cluster, "worker", 1).items() if name.startswith(tag)}
    assert ("_JitCluster" in ops.values()) == jit, ops
    assert (f"{tag}/one" in ops) == (not jit), ops          # arithmetic_optimization OFF keeps x * 1
    if not jit:
        assert ops[f"{tag}/exp"] == "Exp" and ops[f"{tag}/tanh"] == "Tanh"


# ---------------------------------------------------------------------------------------------------
# Feeds and fetches on different tasks
# ---------------------------------------------------------------------------------------------------

def test_feeds_and_fetches_on_different_tasks(cluster, graph):
    with af.device(W1):
        x = af.placeholder(af.float32, [3], name="x_on_w1")
        doubled = x * 2.0
    with af.device(PS0):
        n = af.placeholder(af.int32, [], name="n_on_ps0")
        on_ps = doubled + af.cast(n, af.float32)
    with af.device(W0):
        on_w0 = af.reduce_sum(on_ps)
    with af.device(PS1):
        k = af.constant(7.0)
    xv = np.array([1, 2, 3], np.float32)
    with af.Session(cluster.target) as sess:
        fetched = sess.run({"x": x, "doubled": doubled, "on_ps": on_ps, "on_w0": on_w0, "k": k, "n": n},
                           {x: xv, n: 10})
    np.testing.assert_array_equal(fetched["x"], xv)                # a feed fetched back
    np.testing.assert_array_equal(fetched["doubled"], xv * 2)      # fetched from worker 1
    np.testing.assert_array_equal(fetched["on_ps"], xv * 2 + 10)   # from ps 0, fed on two tasks
    assert fetched["on_w0"] == pytest.approx(42.0)                 # from worker 0
    assert fetched["k"] == 7.0
    assert fetched["n"] == 10


def test_one_feed_consumed_on_every_task(cluster, graph):
    x = af.placeholder(af.float64, [None], name="x")
    outs = []
    for i, dev in enumerate((PS0, PS1, W0, W1)):
        with af.device(dev):
            outs.append(af.reduce_sum(x) * float(i + 1))
    with af.Session(cluster.target) as sess:
        for n in (0, 1, 1000):
            xv = np.arange(n, dtype=np.float64)
            np.testing.assert_allclose(sess.run(outs, {x: xv}), [xv.sum() * (i + 1) for i in range(4)])


# ---------------------------------------------------------------------------------------------------
# A 64 MiB tensor crosses intact
# ---------------------------------------------------------------------------------------------------

def test_64mib_tensor_crosses_intact(cluster, graph):
    n = (64 << 20) // 4
    data = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
    x = af.placeholder(af.float32, [n], name="big")
    with af.device(W0):
        a = x * 1.0                       # produced on worker 0...
    with af.device(W1):
        b = a * 1.0                       # ...consumed on worker 1 (a worker-to-worker edge)
        total = af.reduce_sum(af.cast(b, af.float64))
    with af.device(PS0):
        c = b * 1.0                       # ...and forwarded again to ps 0
    with af.Session(cluster.target) as sess:
        bv, cv, tv = sess.run([b, c, total], {x: data})
    digest = hashlib.sha256(data.tobytes()).hexdigest()
    assert bv.dtype == np.float32 and bv.shape == (n,)
    assert hashlib.sha256(bv.tobytes()).hexdigest() == digest
    assert hashlib.sha256(cv.tobytes()).hexdigest() == digest
    assert tv == pytest.approx(data.astype(np.float64).sum(), rel=1e-9, abs=1e-6)


def test_64mib_variable_read_across_tasks(cluster, graph):
    rows = (64 << 20) // (4 * 1024)
    init = np.random.default_rng(3).integers(0, 1 << 30, (rows, 1024)).astype(np.int32)
    with af.device(PS1):
        v = af.Variable(init, name=unique("big_var"))
    with af.device(W0):
        col = af.reduce_sum(af.cast(v, af.int64), axis=0)
    with af.Session(cluster.target) as sess:
        sess.run(v.initializer)
        got_col, got_v = sess.run([col, v])
    np.testing.assert_array_equal(got_col, init.astype(np.int64).sum(0))
    assert hashlib.sha256(got_v.tobytes()).digest() == hashlib.sha256(init.tobytes()).digest()


# ---------------------------------------------------------------------------------------------------
# Concurrent steps across tasks
# ---------------------------------------------------------------------------------------------------

async def test_concurrent_steps_across_tasks(cluster, graph):
    with af.device(PS0):
        v = af.Variable(np.arange(4, dtype=np.float32), name=unique("conc"))
    with af.device(W1):
        x = af.placeholder(af.float32, [4], name="x")
        y = x * 3.0
    with af.device(W0):
        z = y + v
    with af.device(PS1):
        s = af.reduce_sum(z)
    sess = af.Session(cluster.target)
    try:
        await sess.arun(v.initializer)
        feeds = [np.full(4, i, np.float32) for i in range(20)]
        results = await asyncio.gather(*(sess.arun([z, s], {x: f}) for f in feeds))
        for f, (zv, sv) in zip(feeds, results):
            np.testing.assert_array_equal(zv, f * 3 + np.arange(4))
            assert sv == pytest.approx(float((f * 3 + np.arange(4)).sum()))
    finally:
        sess.close()


def test_concurrent_steps_from_threads(cluster, graph):
    with af.device(W1):
        x = af.placeholder(af.int64, [], name="x")
        y = x * 2
    with af.device(W0):
        z = y + 1
    out = {}
    with af.Session(cluster.target) as sess:
        sess.run(z, {x: 0})                  # register once, then hammer from threads

        def client(k):
            out[k] = [sess.run(z, {x: k * 100 + i}) for i in range(10)]
        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert out == {k: [2 * (k * 100 + i) + 1 for i in range(10)] for k in range(4)}


# ---------------------------------------------------------------------------------------------------
# Between-graph replication: state on the PS outlives sessions and is shared by name
# ---------------------------------------------------------------------------------------------------

def _counter_graph(name: str):
    g = af.Graph()
    with g.as_default():
        with af.device(PS0):
            v = af.Variable(np.zeros(3, np.float32), name=name)
        with af.device(W1):
            one = af.ones([3], af.float32)
        inc = v.assign_add(one)
    return g, v, inc


def test_ps_variables_persist_across_sessions_and_graphs(cluster):
    name = unique("counter")
    g1, v1, inc1 = _counter_graph(name)
    with af.Session(cluster.target, graph=g1) as sess:
        sess.run(v1.initializer)
        for _ in range(3):
            sess.run(inc1)
    # A new session on the same graph sees the state: it lives on the PS, not in the session.
    with af.Session(cluster.target, graph=g1) as sess:
        np.testing.assert_array_equal(sess.run(v1), [3, 3, 3])
    # A separately built graph naming the same variable shares it, without initializing it.
    g2, v2, inc2 = _counter_graph(name)
    with af.Session(cluster.target, graph=g2) as sess:
        np.testing.assert_array_equal(sess.run(v2), [3, 3, 3])
        sess.run(inc2)
    with af.Session(cluster.target, graph=g1) as sess:
        np.testing.assert_array_equal(sess.run(v1), [4, 4, 4])


def test_two_clients_share_a_ps_variable(cluster):
    name = unique("shared")
    g1, v1, inc1 = _counter_graph(name)
    g2, v2, inc2 = _counter_graph(name)
    # Each client talks to its own worker task, as in the paper's between-graph replication.
    s1 = af.Session(cluster.task_target("worker", 0), graph=g1)
    s2 = af.Session(cluster.task_target("worker", 1), graph=g2)
    try:
        s1.run(v1.initializer)
        errs = []

        def client(sess, inc):
            try:
                for _ in range(25):
                    sess.run(inc)
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(e)
        threads = [threading.Thread(target=client, args=a) for a in ((s1, inc1), (s2, inc2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errs
        # assign_add runs on the variable's actor on the PS: no update is lost.
        np.testing.assert_array_equal(s1.run(v1), [50, 50, 50])
        np.testing.assert_array_equal(s2.run(v2), [50, 50, 50])
    finally:
        s1.close()
        s2.close()


def test_uninitialized_ps_variable_is_a_clear_error(cluster, graph):
    name = unique("never_initialized")
    with af.device(PS1):
        v = af.Variable(np.zeros(2, np.float32), name=name)
    with af.Session(cluster.target) as sess:
        with pytest.raises(errors.FailedPreconditionError, match=name):
            sess.run(v + 1.0)
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v + 1.0), [1, 1])


# ---------------------------------------------------------------------------------------------------
# Sharded embedding lookup
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_sharded_embedding_lookup(cluster, graph, strategy):
    vocab, dim, k = 1000, 8, 4
    with af.device(af.train.replica_device_setter(ps_tasks=2, worker_device=W1)):
        emb = af.get_variable(unique("emb"), shape=[vocab, dim], partitioner=af.fixed_size_partitioner(k),
                              initializer=af.random_normal_initializer(seed=4))
        ids = af.placeholder(af.int64, [None], name="ids")
        rows = af.nn.embedding_lookup(emb, ids, partition_strategy=strategy)
    shards_vars = list(emb)
    assert len(shards_vars) == k
    # Round-robin over the PS tasks: both hold shards.
    assert {DeviceSpec.from_string(v.device).task for v in shards_vars} == {0, 1}
    ids_v = np.array([0, 999, 3, 3, 500, 1, 998, 250, 251, 0], np.int64)
    with af.Session(cluster.target) as sess:
        sess.run(af.global_variables_initializer())
        shards = sess.run(shards_vars)
        got = sess.run(rows, {ids: ids_v})
        empty = sess.run(rows, {ids: np.zeros(0, np.int64)})
    if strategy == "div":
        expected = np.concatenate(shards)[ids_v]
    else:
        expected = np.stack([shards[i % k][i // k] for i in ids_v])
    np.testing.assert_array_equal(got, expected)
    assert empty.shape == (0, dim)


def test_embedding_shards_as_explicit_variables(cluster, graph):
    # The same lookup with shards built by hand, one per PS task.
    rng = np.random.default_rng(5)
    tables = [rng.normal(size=(50, 4)).astype(np.float32) for _ in range(2)]
    shards = []
    for i, t in enumerate(tables):
        with af.device(f"/job:ps/task:{i}"):
            shards.append(af.Variable(t, name=unique(f"shard{i}")))
    with af.device(W0):
        ids = af.placeholder(af.int32, [None])
        rows = af.nn.embedding_lookup(shards, ids)
    ids_v = np.array([0, 1, 2, 99, 98, 57], np.int32)
    with af.Session(cluster.target) as sess:
        sess.run([s.initializer for s in shards])
        got = sess.run(rows, {ids: ids_v})
    np.testing.assert_array_equal(got, np.stack([tables[i % 2][i // 2] for i in ids_v]))


def _rnn_nce_losses(target, scope):
    """Five SGD steps of an LSTM + nce_loss model, variables on the PS tasks, loop on a worker."""
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((3, 4, 2)).astype(np.float32)
    g = af.Graph()
    with g.as_default(), af.variable_scope(scope):
        placed = af.device(af.train.replica_device_setter(ps_tasks=2, worker_device=W1)) if target else af.device(None)
        with placed:
            x = af.constant(xs)
            cell = af.nn.rnn_cell.LSTMCell(5, initializer=af.constant_initializer(0.1))
            _, state = af.nn.dynamic_rnn(cell, x, sequence_length=[4, 2, 3], dtype=af.float32)
            w = af.get_variable("nce_w", initializer=rng.standard_normal((20, 5)).astype(np.float32))
            b = af.get_variable("nce_b", [20], initializer=af.zeros_initializer())
            labels = af.constant([[1], [4], [9]], af.int64)
            sv = (af.constant([0, 4, 7, 13], af.int64), af.constant([[0.2], [0.3], [0.1]]),
                  af.constant([0.5, 0.3, 0.2, 0.1]))
            loss = af.reduce_mean(af.nn.nce_loss(w, b, labels, state.h, 4, 20, sampled_values=sv))
            step = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        with af.Session(target) as sess:
            sess.run(af.global_variables_initializer())
            out = []
            for _ in range(5):
                out.append(sess.run([loss, step])[0])
    return out


def test_rnn_and_sampled_loss_train_with_variables_on_ps(cluster):
    # The while loop's gradient saves per-iteration values on the worker while the loop reads the
    # PS variables every iteration; the sparse nce gradients update rows on the PS tasks.
    got = _rnn_nce_losses(cluster.target, unique("rnn_nce"))
    want = _rnn_nce_losses(None, "rnn_nce_local")
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]


# ---------------------------------------------------------------------------------------------------
# The cluster token
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [{}, {TOKEN_HEADER: "wrong"}, {TOKEN_HEADER: ""}, {"X-Other": "x"}],
                         ids=["none", "wrong", "empty", "other-header"])
async def test_connection_without_the_token_is_refused(cluster, headers):
    for job, task in cluster.spec.tasks():
        addr = address(cluster, job, task)
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await http.ws_connect(f"http://{addr}/ws", headers=headers)
            assert info.value.status == 401
            async with http.get(f"http://{addr}/health", headers=headers) as r:
                assert r.status == 401
    await asyncio.to_thread(assert_serving, cluster)


async def test_peer_with_a_wrong_token_gets_permission_denied(cluster):
    peer = Peer(address(cluster, "ps", 0), "not-the-token", lambda *a: None, connect_timeout=5)
    try:
        with pytest.raises(errors.PermissionDeniedError):
            await peer.connection()
    finally:
        await peer.close()


def test_session_with_a_wrong_token_fails_cleanly(cluster):
    bad = f"af://{address(cluster, 'worker', 0)}?token=nope"
    with pytest.raises(errors.PermissionDeniedError):
        af.Session(bad)
    assert_serving(cluster)


async def test_token_holder_can_call_rpcs(cluster):
    peer = Peer(address(cluster, "ps", 1), cluster.token, lambda *a: None, connect_timeout=5)
    try:
        conn = await peer.connection()
        result, _ = await conn.call("ping", timeout=5)
        assert result["task"] == "/job:ps/task:1"
        with pytest.raises(errors.UnimplementedError, match="no_such_method"):
            await conn.call("no_such_method", timeout=5)
        # An unknown method is an error for that call only: the connection stays up.
        result, _ = await conn.call("ping", timeout=5)
        assert result["pid"] == cluster.pids()["/job:ps/task:1"]
    finally:
        await peer.close()


# ---------------------------------------------------------------------------------------------------
# Malformed frames close that connection only
# ---------------------------------------------------------------------------------------------------

def _raw_frame(header, payload: bytes = b"") -> bytes:
    packed = msgpack.packb(header, use_bin_type=True)
    return struct.pack("<I", len(packed)) + packed + payload


GARBAGE = {
    "bad-header-length": b"\xff\xff\xff\xffgarbage",
    "not-msgpack": b"\x04\x00\x00\x00\xc1\xc1\xc1\xc1",
    "header-not-a-map": _raw_frame([1, 2, 3]),
    "too-short": b"\x01\x00",
    "lying-sizes": _raw_frame({"k": "t", "t": [["<f4", [2], 8]], "n": 8}, b"\0" * 3),
    "bad-dtype": _raw_frame({"k": "t", "t": [["<M8", [1], 8]], "n": 8}, b"\0" * 8),
    "unhashable-dtype": _raw_frame({"k": "t", "t": [[[], [1], 4]], "n": 4}, b"\0" * 4),
    "too-many-dims": _raw_frame({"k": "t", "t": [["<f4", [1] * 65, 4]], "n": 4}, b"\0" * 4),
}


async def _send_garbage(addr: str, token: str, payload) -> aiohttp.WSMessage:
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"http://{addr}/ws", headers={TOKEN_HEADER: token}, max_msg_size=0)
        try:
            if isinstance(payload, str):
                await ws.send_str(payload)
            else:
                await ws.send_bytes(payload)
        except ConnectionError:
            # The server hung up while we were still writing (an oversized message): refused.
            return None, None
        async with asyncio.timeout(10):
            msg = await ws.receive()
            while msg.type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING,
                                   aiohttp.WSMsgType.ERROR):
                msg = await ws.receive()
        code = ws.close_code
        await ws.close()
        return msg, code


@pytest.mark.parametrize("name", sorted(GARBAGE))
async def test_malformed_frame_closes_that_connection_only(cluster, log_dir, name):
    # Another authenticated connection, open throughout, must not notice.
    bystander = Peer(address(cluster, "worker", 1), cluster.token, lambda *a: None, connect_timeout=5)
    try:
        other = await bystander.connection()
        msg, code = await _send_garbage(address(cluster, "worker", 1), cluster.token, GARBAGE[name])
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
        result, _ = await other.call("ping", timeout=5)
        assert result["task"] == "/job:worker/task:1"
        assert not other.closed
    finally:
        await bystander.close()
    await asyncio.to_thread(assert_serving, cluster)
    log = (log_dir / "worker-1.log").read_text()
    assert "malformed frame" in log


async def test_text_and_oversized_messages_are_refused(cluster):
    addr = address(cluster, "worker", 0)
    msg, code = await _send_garbage(addr, cluster.token, "hello")
    assert code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
    # One websocket message larger than the server's limit (a chunk plus room for a header).
    # The server either closes with 1009 or resets the socket while the message is still arriving.
    msg, code = await _send_garbage(addr, cluster.token, b"\0" * (8 << 20))
    assert code in (aiohttp.WSCloseCode.MESSAGE_TOO_BIG, None)
    await asyncio.to_thread(assert_serving, cluster)


async def test_truncated_chunked_frame_is_refused(cluster):
    # A header announcing 3 MiB of payload in continuation messages, then a text message instead.
    from actorflow.transport.codec import encode
    head, _ = encode({"k": "t", "s": 1, "key": ["x"]}, [np.zeros(3 << 18, np.float32)])
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(f"http://{address(cluster, 'ps', 0)}/ws", headers={TOKEN_HEADER: cluster.token})
        await ws.send_bytes(head)
        await ws.send_bytes(b"\0" * (1 << 20))
        await ws.send_str("not a continuation")
        async with asyncio.timeout(10):
            msg = await ws.receive()
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
        await ws.close()
    await asyncio.to_thread(assert_serving, cluster)


# ---------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------

def test_op_error_on_a_remote_task_names_the_op(cluster, graph):
    x = af.placeholder(af.float32, [None], name="x")
    with af.device(W1):
        bad = af.reshape(x, [5], name="bad_reshape")
    with af.device(W0):
        downstream = bad + 1.0           # waits on a _Recv from worker 1
    with af.device(PS0):
        unrelated = x * 2.0              # a partition that finishes normally
    with af.Session(cluster.target) as sess:
        t0 = time.monotonic()
        with pytest.raises(errors.InvalidArgumentError, match="bad_reshape") as info:
            sess.run([downstream, unrelated], {x: np.ones(3, np.float32)})
        assert time.monotonic() - t0 < 10, "the other tasks' steps were not aborted"
        assert "Reshape" in str(info.value)
        # The session, and the same executable, stay usable.
        got = sess.run([downstream, unrelated], {x: np.ones(5, np.float32)})
        np.testing.assert_array_equal(got[0], np.full(5, 2, np.float32))
        with pytest.raises(errors.InvalidArgumentError, match="bad_reshape"):
            sess.run(downstream, {x: np.ones(4, np.float32)})
        np.testing.assert_array_equal(sess.run(downstream, {x: np.zeros(5, np.float32)}), np.ones(5))


def test_out_of_range_gather_on_the_ps_names_the_op(cluster, graph):
    with af.device(PS1 + "/device:CPU:0"):     # the CPU Gather checks its indices (a GPU one does not)
        table = af.Variable(np.eye(4, dtype=np.float32), name=unique("table"))
        ids = af.placeholder(af.int32, [None])
        picked = af.gather(table, ids, name="gather_rows")
    with af.device(W0):
        out = af.reduce_sum(picked)
    with af.Session(cluster.target) as sess:
        sess.run(table.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="gather_rows"):
            sess.run(out, {ids: np.array([1, 7], np.int32)})
        assert sess.run(out, {ids: np.array([1, 2], np.int32)}) == 2.0


def test_impossible_placement_names_the_op(cluster, graph):
    x = af.placeholder(af.float32, [2], name="x")
    with af.device("/job:ps/task:7"):
        bad = af.identity(x, name="on_missing_task")
    with af.device("/job:nosuchjob/task:0"):
        bad_job = af.identity(x, name="on_missing_job")
    with af.Session(cluster.target) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="on_missing_task") as info:
            sess.run(bad, {x: np.ones(2, np.float32)})
        assert "/job:ps/task:7" in str(info.value)
        with pytest.raises(errors.InvalidArgumentError, match="on_missing_job"):
            sess.run(bad_job, {x: np.ones(2, np.float32)})
        # Nothing was registered for the failed graphs; the session still runs good ones.
        np.testing.assert_array_equal(sess.run(x * 3.0, {x: np.ones(2, np.float32)}), [3, 3])


def test_step_timeout_across_tasks(cluster, graph):
    # A queue dequeue that never completes: the step must fail with DeadlineExceeded, not hang.
    with af.device(PS0):
        q = af.FIFOQueue(4, [af.float32], shapes=[[]], shared_name=unique("never_fed"))
        item = q.dequeue()
    with af.device(W1):
        out = item + 1.0
    with af.Session(cluster.target) as sess:
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(out, timeout=1.0)
        assert sess.run(af.constant(1.0) + 1.0) == 2.0


# ---------------------------------------------------------------------------------------------------
# In-process servers (af.train.Server): several tasks in one process
# ---------------------------------------------------------------------------------------------------

@pytest.fixture
def in_process_servers():
    ps, w0, w1 = free_ports(3)
    spec = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]}
    servers = [af.train.Server(spec, job, i, token="in-process-token")
               for job, n in (("ps", 1), ("worker", 2)) for i in range(n)]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


IN_PROCESS_SCRIPT = """
import numpy as np
import actorflow as af
from actorflow.cluster.local import free_ports
ps, w0, w1 = free_ports(3)
spec = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]}
servers = [af.train.Server(spec, job, i, token="t") for job, n in (("ps", 1), ("worker", 2)) for i in range(n)]
with af.device("/job:ps/task:0"):
    v = af.Variable(np.arange(3, dtype=np.float32), name="v")
with af.device("/job:worker/task:0"):
    x = af.placeholder(af.float32, [3])
    y = x * 2.0
with af.device("/job:worker/task:1"):
    z = af.reduce_sum(y + 1.0)
    total = z + af.reduce_sum(v)
with af.Session(servers[1].target) as sess:
    print("RESULT", sess.run(z, {x: np.ones(3, np.float32)}, timeout=20))   # the first step: two tasks
    sess.run(v.initializer)
    print("RESULT", sess.run(total, {x: np.ones(3, np.float32)}, timeout=20))
for s in servers:
    s.stop()
"""


def test_in_process_servers_run_a_split_graph():
    # A fresh interpreter, so that this step is the process's first use of the kernels: the servers'
    # event loops (threads of this one process) look them up concurrently.
    r = subprocess.run([sys.executable, "-c", IN_PROCESS_SCRIPT], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["RESULT", "9.0", "RESULT", "12.0"], r.stdout + r.stderr[-2000:]


def test_server_from_tf_config(monkeypatch, graph):
    cluster = {"worker": [f"127.0.0.1:{free_port()}"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    monkeypatch.delenv("ACTORFLOW_TOKEN", raising=False)
    server = af.train.Server()
    try:
        assert server.server_def == {"cluster": cluster, "job_name": "worker", "task_index": 0}
        with af.Session(server.target) as sess:
            assert sess.run(af.constant(2.0) * 3.0) == 6.0
    finally:
        server.stop()
    server.join()                         # returns at once: the server has stopped


class _LoseFirstTensorFrame:
    """A transport fault (actorflow.sim.faults seam): the connection carrying the first tensor frame
    between tasks fails as that frame is written, as after a TCP reset."""

    def __init__(self):
        self.fired = False

    async def before_send(self, conn, frame):
        head = bytes(frame[0][:64])
        if not self.fired and b"\xa1k\xa1t" in head:          # {"k": "t"}: a Send/Recv tensor
            self.fired = True
            raise ConnectionResetError("injected connection reset")


def test_tensor_lost_with_its_connection_fails_the_step(in_process_servers, graph):
    """A tensor lost in flight must fail the step that waits for it (UnavailableError naming the
    connection), not leave the step waiting forever; the session then recovers."""
    from actorflow.kernels.registry import registered_ops
    from actorflow.sim import faults
    registered_ops()                      # load kernels up front: not what this test is about
    _, w0, _ = in_process_servers
    with af.device(W0):
        x = af.placeholder(af.float32, [3])
        y = x * 2.0
    with af.device(W1):
        z = y + 1.0
    with af.Session(w0.target) as sess:
        outcome = []

        def run():
            try:
                outcome.append(sess.run(z, {x: np.ones(3, np.float32)}))
            except Exception as e:  # noqa: BLE001 - inspected below
                outcome.append(e)
        faults.set_injectors(_LoseFirstTensorFrame(), None)
        try:
            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join(10)
        finally:
            faults.set_injectors(None, None)
        assert outcome, "the step is still waiting for a tensor that was lost with its connection"
        assert isinstance(outcome[0], errors.UnavailableError), outcome[0]
        np.testing.assert_array_equal(sess.run(z, {x: np.ones(3, np.float32)}, timeout=20), [3, 3, 3])


# ---------------------------------------------------------------------------------------------------
# Shutdown (last: it stops the module's cluster)
# ---------------------------------------------------------------------------------------------------

def test_zz_cluster_stops_gracefully_after_traffic(cluster):
    """Every task exits on its own after SIGTERM (exit code 0), none needs SIGKILL, even though all
    stop at once while holding websockets to each other."""
    assert_serving(cluster)
    pids = cluster.pids()
    cluster.stop(timeout=8.0)
    codes = {k: p.returncode for k, p in zip(pids, cluster.procs.values())}
    assert codes == {k: 0 for k in pids}, f"tasks killed instead of exiting: {codes}"
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
