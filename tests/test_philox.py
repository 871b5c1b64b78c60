"""TF's Philox random streams, bit for bit: the generator against Random123's known answers, and the
random kernels, the stateless ops and a seeded program against TensorFlow 2.21's outputs
(tests/fixtures/philox.json, written by tests/fixtures/make_philox.py)."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import random_ops
from actorflow.kernels.cpu import philox
from tests.conftest import run

pytestmark = pytest.mark.usefixtures("graph")

with open(os.path.join(os.path.dirname(__file__), "fixtures", "philox.json")) as _f:
    FIX = json.load(_f)
BITS = {"float32": np.uint32, "float64": np.uint64, "float16": np.uint16}
OPS = {"RandomUniform": random_ops.RandomUniform, "RandomStandardNormal": random_ops.RandomStandardNormal,
       "TruncatedNormal": random_ops.TruncatedNormal}


def decode(e):
    if "bits" in e:
        return np.array(e["bits"], BITS[e["dtype"]]).view(e["dtype"]).reshape(e["shape"])
    return np.array(e["values"], e["dtype"]).reshape(e["shape"])


def assert_bits(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        raise AssertionError(f"{what}: {bad.size} elements differ from TF's, first at {bad[:5].tolist()}: "
                             f"{got.reshape(-1)[bad[:3]]} vs {want.reshape(-1)[bad[:3]]}")


@pytest.mark.parametrize("counter,key,want", [
    (0, 0, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((1 << 128) - 1, (1 << 64) - 1, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (0x243F6A88 | 0x85A308D3 << 32 | 0x13198A2E << 64 | 0x03707344 << 96, 0xA4093822 | 0x299F31D0 << 32,
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_10_known_answers(counter, key, want):
    """Random123's kat_vectors for philox4x32 with 10 rounds."""
    assert tuple(int(w) for w in philox.philox_blocks(key, counter, 1)[0]) == want


def test_blocks_count_up_with_carry():
    start = (1 << 64) - 2            # the low 64 bits roll over into the high half
    blocks = philox.philox_blocks(5, start, 3)
    for i in range(3):
        np.testing.assert_array_equal(blocks[i], philox.philox_blocks(5, start + i, 1)[0])


@pytest.mark.parametrize("name", sorted(FIX["raw"]))
def test_stateful_kernels_match_tf_across_two_runs(name):
    op_type, dtype, i = name.split("/")
    s1, s2 = FIX["seeds"][int(i)]
    n = FIX["small"]
    if op_type == "RandomUniformInt":
        lo, hi = (-7, 1000003) if dtype == "int32" else (-2**40, 2**62)
        t = random_ops.RandomUniformInt(af.constant([n]), af.constant(lo, dtype), af.constant(hi, dtype),
                                        seed=s1, seed2=s2)
    else:
        t = OPS[op_type](af.constant([n]), dtype=af.as_dtype(dtype), seed=s1, seed2=s2)
    with af.Session() as sess:
        first, second = sess.run(t), sess.run(t)
    want1, want2 = (decode(e) for e in FIX["raw"][name])
    assert_bits(first, want1, f"{name} run 1")
    assert_bits(second, want2, f"{name} run 2")


@pytest.mark.parametrize("name", sorted(FIX["big_sha256"]))
def test_large_draws_match_tf(name):
    """100,003 values each: every rounding of the C library's logf/sinf/cosf the draws meet."""
    op_type, dtype = name.split("/")
    t = OPS[op_type](af.constant([FIX["big"]]), dtype=af.as_dtype(dtype), seed=11, seed2=12)
    assert hashlib.sha256(np.ascontiguousarray(run(t)).tobytes()).hexdigest() == FIX["big_sha256"][name]


@pytest.mark.parametrize("name", sorted(FIX["stateless"]))
def test_stateless_ops_match_tf(name):
    fn, dtype, i = name.split("/")
    seed = af.constant(FIX["seeds"][int(i)], af.int64)
    t = getattr(af.random, fn)([FIX["small"]], seed, dtype=af.as_dtype(dtype))
    assert_bits(run(t), decode(FIX["stateless"][name]), name)


def test_seeded_program_matches_tf():
    """set_random_seed, then variables, layers and dropout: TF's op seeds, initial values and masks."""
    prog = FIX["program"]
    env = {"tf": af}
    exec(prog["source"], env)
    graph = af.get_default_graph()
    seeds = [[op.type, op.get_attr("seed"), op.get_attr("seed2")] for op in graph.get_operations()
             if op.type in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt")]
    assert seeds == prog["seeds"]
    feed = {env["x"]: np.arange(15, dtype=np.float32).reshape(3, 5) / 10}
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        vals = sess.run(env["fetch"], feed)
        # A different plan (one fetch) runs the same dropout op: its stream goes on, as in TF.
        vals["h_second_run"] = sess.run(env["h"], feed)
    for k, e in prog["values"].items():
        want = decode(e)
        if k in ("d3",):     # through two matmuls: equal up to the GEMM's summation order
            np.testing.assert_allclose(vals[k], want, rtol=1e-6, atol=1e-6, err_msg=k)
        else:
            assert_bits(vals[k], want, k)


def test_stream_state_is_per_session():
    """A new session starts the op's stream again; one session continues it from plan to plan."""
    x = af.random_uniform([6], seed=3)
    y = x + 1.0
    with af.Session() as sess:
        a, b = sess.run(x), sess.run(y)
    with af.Session() as sess:
        c = sess.run(x)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a + np.float32(1.0), b)


def test_unseeded_ops_differ():
    u = af.random_normal([8])
    assert not np.array_equal(run(u), run(u))


def test_tensor_shapes_and_empty():
    t = af.truncated_normal([0, 3], seed=1)
    assert run(t).shape == (0, 3)
    assert run(af.random_uniform([2, 3, 5], seed=1, dtype=af.float64)).shape == (2, 3, 5)
    assert run(af.random_uniform([], seed=1)).shape == ()


@pytest.mark.parametrize("name", sorted(FIX["shuffles"]["random_shuffle"]))
def test_random_shuffle_matches_tf_order(name):
    first, second = FIX["shuffles"]["random_shuffle"][name]
    if name == "matrix":
        t = af.random_shuffle(af.reshape(af.range(150), [50, 3]))
        seeds = (5, 6)
    else:
        t = af.random_shuffle(af.range(int(name[4:])))
        seeds = (1, 2)
    t.op.attrs["seed"], t.op.attrs["seed2"] = seeds
    with af.Session() as sess:
        assert sess.run(t).tolist() == first
        assert sess.run(t).tolist() == second


@pytest.mark.parametrize("case", FIX["data_cases"], ids=[c[0] for c in FIX["data_cases"]])
def test_dataset_shuffle_matches_tf_order(case):
    name, n, make = case
    with af.Graph().as_default():
        nxt = af.data.make_one_shot_iterator(eval(make, {"tf": af, "np": np})).get_next()
        with af.Session() as sess:
            got = [np.asarray(sess.run(nxt)).tolist() for _ in range(n)]
    assert got == FIX["shuffles"]["data"][name]


def test_random_shuffle_queue_dequeues_in_tf_order():
    q = af.RandomShuffleQueue(100, 0, [af.int32], shapes=[[]], seed=3)
    enq, close, d, dm = q.enqueue_many([af.range(20)]), q.close(), q.dequeue(), q.dequeue_many(5)
    with af.Session() as sess:
        sess.run(enq)
        sess.run(close)
        got = [int(sess.run(d)) for _ in range(10)] + sess.run(dm).tolist() + [int(sess.run(d)) for _ in range(5)]
    assert got == FIX["shuffles"]["queue"]


def test_shared_random_shuffle_queue_seeds_by_its_name():
    # TF: a graph seed, no op seed and a shared_name make seed2 a hash of the graph seed and the name,
    # whatever random ops came before (ageron/handson-ml chapter 12's "shared_instance_q").
    want = FIX["shuffles"]["shared_queue"]
    af.set_random_seed(42)
    af.random_uniform([1])
    q = af.RandomShuffleQueue(100, 0, [af.int32], shapes=[[]], shared_name="shared_q")
    assert q.queue_ref.op.get_attr("seed2") == want["seed2"]
    enq, close, dm = q.enqueue_many([af.range(20)]), q.close(), q.dequeue_many(20)
    with af.Session() as sess:
        sess.run(enq)
        sess.run(close)
        assert sess.run(dm).tolist() == want["order"]


def test_permutation_is_a_permutation_for_every_size():
    for n in (0, 1, 2, 3, 4, 5, 17, 1000):
        p = philox.permutation(123, 456 << 64, n)
        assert sorted(p.tolist()) == list(range(n))
    assert philox.shuffle_blocks(1) == 0 and philox.shuffle_blocks(2) == 1 and philox.shuffle_blocks(6) == 2


def test_multinomial_and_categorical_draw_tf_classes():
    want = FIX["shuffles"]["multinomial"]
    logits = af.log([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    raw = af.multinomial(logits, 10)
    raw.op.attrs["seed"], raw.op.attrs["seed2"] = 1, 2
    ops = {"raw": raw, "stateless": af.random.stateless_categorical(logits, 9, af.constant([4, 5], af.int64))}
    af.set_random_seed(7)
    ops["categorical"] = af.random.categorical(af.constant([[0.0, 1.0, -1.0, 2.0]]), 12)
    with af.Session() as sess:
        r1, r2 = sess.run(ops), sess.run(ops)
    for k in ops:
        assert [r1[k].tolist(), r2[k].tolist()] == want[k], k


@pytest.mark.parametrize("name", sorted(FIX["samplers"]["ids"]))
def test_candidate_samplers_draw_tf_ids(name):
    tc = af.constant([[1], [2]], af.int64)
    unique = name.endswith("unique")
    if name.startswith("log_uniform"):
        t = af.nn.log_uniform_candidate_sampler(tc, 1, 20, unique, 100, seed=3)[0]
    else:
        t = af.nn.uniform_candidate_sampler(tc, 1, 20, unique, 64 if name.endswith("pow2") else 100, seed=3)[0]
    with af.Session() as sess:
        got = [sess.run(t).tolist(), sess.run(t).tolist()]
    assert got == FIX["samplers"]["ids"][name]


def test_sampled_losses_match_tf_under_a_graph_seed():
    env = {}
    exec(FIX["samplers"]["losses_source"], {"tf": af, "np": np}, env)
    got = run(env["fetch"])
    for k, want in FIX["samplers"]["losses"].items():
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-6, err_msg=k)


def test_gamma_draws_match_tf():
    from actorflow.graph.ops.random_more_ops import RandomGamma
    want = FIX["shuffles"]["gamma"]
    ops = {"raw64": RandomGamma(af.constant([7]), af.constant([0.5, 1.0, 2.5], af.float64), seed=1, seed2=2),
           "raw32": RandomGamma(af.constant([3, 2]), af.constant([[0.3], [4.0]], af.float32), seed=3, seed2=4),
           "random_gamma": af.random_gamma([4], [0.7, 2.0], beta=[[1.0], [3.0]], seed=5)}
    with af.Session() as sess:
        r1, r2 = sess.run(ops), sess.run(ops)
    for k in ops:
        assert_bits(r1[k], decode(want[k][0]), f"{k} run 1")
        assert_bits(r2[k], decode(want[k][1]), f"{k} run 2")


def test_poisson_draws_match_tf():
    from actorflow.graph.ops.random_more_ops import RandomPoissonV2
    want = FIX["shuffles"]["poisson"]
    rates = af.constant([0.5, 3.0, 9.9, 10.0, 55.5, 1000.0], af.float64)
    ops = {"raw64": RandomPoissonV2(af.constant([9]), rates, seed=1, seed2=2, dtype=af.float64),
           "raw_int": RandomPoissonV2(af.constant([5]), af.constant([2.0, 40.0]), seed=3, seed2=4, dtype=af.int32),
           "random_poisson": af.random_poisson([1.5, 12.0], [3], seed=6)}
    with af.Session() as sess:
        r1, r2 = sess.run(ops), sess.run(ops)
    for k in ops:
        assert_bits(r1[k], decode(want[k][0]), f"{k} run 1")
        assert_bits(r2[k], decode(want[k][1]), f"{k} run 2")


def test_every_dropout_form_matches_tf_bit_for_bit():
    """TF's dropout_v2: x * (1 / (1 - rate)) or x / (1 - rate) for a fed rate, then a select, so the
    dropped NaN, inf and negative inputs are +0.0."""
    d = FIX["dropout"]
    env = {}
    exec(d["source"], {"tf": af, "np": np}, env)
    with af.Session() as sess:
        got = sess.run(env["fetch"], {env["x"]: decode(d["x"]), env["kp"]: 0.7})
    for k, e in d["values"].items():
        assert_bits(got[k], decode(e), k)


def test_first_random_kernels_run_on_the_pool_until_numba_is_loaded():
    """Loading numba (0.3-1 s) must not stop a server's event loop in its first step: until numba is
    imported, the Philox kernels that need it are offloaded; word-by-word readers never need it."""
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import sys
        from actorflow.actors.pool import offload_policy
        from actorflow.graph.tensor_shape import TensorShape
        from actorflow.kernels import lazy_numba
        from actorflow.kernels.cpu import philox
        from actorflow.kernels.registry import get_kernel
        shapes, values = [TensorShape([1])], [None]
        kdef = get_kernel("RandomStandardNormal", "CPU")
        before = offload_policy(shapes, values, kdef)[0]
        uniform_inline = not offload_policy(shapes, values, get_kernel("RandomUniform", "CPU"))[0]
        words = philox.PhiloxWords(1, 2)
        first = [words() for _ in range(3)], philox.stateless_key_counter(3, 4)
        drawn = philox.uniform(5, 6, 1000, "float32"), philox.uniform_int(5, 6, 100, 0, 7, "int32")
        after = "numba" in sys.modules
        lazy_numba.import_numba()
        print(before, uniform_inline, after, offload_policy(shapes, values, kdef)[0])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False", "False"]


def test_numpy_and_numba_paths_draw_the_same_words():
    """Uniforms and integers come from a numpy Philox until numba is loaded, then from numba: the
    same numbers either way (a parameter server's Glorot-uniform init needs no numba)."""
    from unittest import mock
    for key, counter in ((7, 3 << 64), (2**64 - 1, 2**64 - 2), (12345, (2**128) - 3)):
        np.testing.assert_array_equal(philox.philox_blocks_numpy(key, counter, 9), philox.philox_blocks(key, counter, 9))
    with mock.patch.object(philox, "numba_imported", lambda: False):
        slow = [philox.uniform(7, 3 << 64, 1001, dt) for dt in ("float32", "float64", "float16")] + \
            [philox.uniform_int(7, 5, 999, -3, 10**6, np.int32), philox.words(9, 2**64 - 3, 37)]
    fast = [philox.uniform(7, 3 << 64, 1001, dt) for dt in ("float32", "float64", "float16")] + \
        [philox.uniform_int(7, 5, 999, -3, 10**6, np.int32), philox.words(9, 2**64 - 3, 37)]
    for a, b in zip(slow, fast):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_a_random_op_the_optimizer_rewrote_keeps_one_stream_across_plans():
    """A pass that replaces a random op's input copies the op into that plan (scheduler/rewrite.py);
    the copy is the same op, so its stream goes on from plan to plan as TF's shared kernel's does
    (gcn's dropout drew the same mask in each evaluation as in the training step before it)."""
    def build():
        g = af.Graph()
        with g.as_default():
            af.set_random_seed(3)
            x = af.placeholder(af.float32, [None, 4])
            r = af.random_uniform(af.shape(x) * 1)        # x * 1 is rewritten: the op is copied per plan
            s = r + 1.0
        return g, x, r, s
    d = np.zeros((3, 4), np.float32)
    g, x, r, _ = build()
    with af.Session(graph=g) as sess:
        one_plan = [sess.run(r, {x: d}) for _ in range(3)]
    g, x, r, s = build()
    with af.Session(graph=g) as sess:
        mixed = [sess.run(r, {x: d}), sess.run(s, {x: d}) - 1.0, sess.run(r, {x: d})]
    for a, b in zip(one_plan, mixed):
        np.testing.assert_allclose(a, b, rtol=1e-6)
