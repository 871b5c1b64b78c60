"""af.data (issue 16, item 4): datasets, iterators and their TF-1.x semantics, through the public API."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")

Dataset = af.data.Dataset


def drain(sess, t, limit=10_000):
    """Every element `t` gives until OutOfRangeError."""
    out = []
    with pytest.raises(af.errors.OutOfRangeError):
        for _ in range(limit):
            out.append(sess.run(t))
    return out


def one_shot(ds):
    return af.compat.v1.data.make_one_shot_iterator(ds).get_next()


# -- sources and structures -----------------------------------------------------------------------

def test_from_tensor_slices_tuple_values_and_static_shapes():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6, dtype=np.int64)
    ds = Dataset.from_tensor_slices((x, y))
    assert af.compat.v1.data.get_output_types(ds) == (af.float32, af.int64)
    assert [s.as_list() for s in af.compat.v1.data.get_output_shapes(ds)] == [[2], []]
    nx, ny = one_shot(ds)
    assert nx.shape.as_list() == [2] and ny.shape.as_list() == []
    with af.Session() as sess:
        got = drain(sess, (nx, ny))
    assert len(got) == 6
    for i, (a, b) in enumerate(got):
        np.testing.assert_array_equal(a, x[i])
        assert b == i


def test_dict_and_nested_structures():
    ds = Dataset.from_tensor_slices({"img": np.ones((4, 3), np.float32), "lab": (np.arange(4), np.arange(4) * 10)})
    types = af.data.get_output_types(ds)
    assert types == {"img": af.float32, "lab": (af.int64, af.int64)}
    el = one_shot(ds.batch(3))
    assert set(el) == {"img", "lab"}
    assert el["img"].shape.as_list() == [None, 3]
    with af.Session() as sess:
        first = sess.run(el)
        second = sess.run(el)
        with pytest.raises(af.errors.OutOfRangeError):
            sess.run(el)
    np.testing.assert_array_equal(first["lab"][1], [0, 10, 20])
    assert second["img"].shape == (1, 3)


def test_lists_are_tensors_not_structure():
    ds = Dataset.from_tensors([1, 2, 3])
    assert ds.output_shapes.as_list() == [3]
    with af.Session() as sess:
        np.testing.assert_array_equal(sess.run(one_shot(ds)), [1, 2, 3])


def test_from_tensor_slices_checks_leading_dimension():
    with pytest.raises(ValueError, match="dimension 0"):
        Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="scalar"):
        Dataset.from_tensor_slices(np.float32(1))


def test_from_tensors_range_zip_concatenate_enumerate():
    with af.Session() as sess:
        assert drain(sess, one_shot(Dataset.range(5))) == [0, 1, 2, 3, 4]
        assert drain(sess, one_shot(Dataset.range(2, 5))) == [2, 3, 4]
        assert drain(sess, one_shot(Dataset.range(10, 0, -3))) == [10, 7, 4, 1]
        z = one_shot(Dataset.zip((Dataset.range(3), (Dataset.range(10, 20), Dataset.from_tensors(7).repeat()))))
        assert drain(sess, z) == [(0, (10, 7)), (1, (11, 7)), (2, (12, 7))]
        c = Dataset.range(2).concatenate(Dataset.range(5, 7))
        assert drain(sess, one_shot(c)) == [0, 1, 5, 6]
        e = one_shot(Dataset.from_tensor_slices(np.array([5.0, 6.0], np.float32)).enumerate(start=3))
        assert [(int(i), float(v)) for i, v in drain(sess, e)] == [(3, 5.0), (4, 6.0)]
    assert Dataset.range(3).output_types is af.int64


def test_concatenate_requires_matching_types_and_merges_shapes():
    with pytest.raises(TypeError):
        Dataset.range(2).concatenate(Dataset.from_tensors(np.float32(1)))
    a = Dataset.from_tensors(np.zeros((2, 3), np.float32))
    b = Dataset.from_tensors(np.zeros((2, 5), np.float32))
    assert a.concatenate(b).output_shapes.as_list() == [2, None]


def test_take_skip_repeat_cache():
    with af.Session() as sess:
        assert drain(sess, one_shot(Dataset.range(10).skip(3).take(4))) == [3, 4, 5, 6]
        assert drain(sess, one_shot(Dataset.range(3).repeat(2))) == [0, 1, 2, 0, 1, 2]
        assert drain(sess, one_shot(Dataset.range(3).take(-1).skip(-1))) == []
        # An endless repeat of an empty dataset ends instead of spinning (as TF's does).
        assert drain(sess, one_shot(Dataset.range(0).repeat())) == []
    calls = []

    def gen():
        calls.append(1)
        yield from range(3)

    ds = Dataset.from_generator(gen, af.int64, []).cache().repeat(3)
    with af.Session() as sess:
        assert drain(sess, one_shot(ds)) == [0, 1, 2] * 3
    assert len(calls) == 1          # the later epochs came from the cache


# -- batching ---------------------------------------------------------------------------------------

def test_batch_static_shapes_and_drop_remainder():
    x = np.arange(10, dtype=np.int32)
    b = Dataset.from_tensor_slices(x).batch(4)
    assert b.output_shapes.as_list() == [None]
    d = Dataset.from_tensor_slices(x).batch(4, drop_remainder=True)
    assert d.output_shapes.as_list() == [4]
    with af.Session() as sess:
        got = drain(sess, one_shot(b))
        assert [list(v) for v in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        got = drain(sess, one_shot(d))
        assert [list(v) for v in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_batch_of_different_shapes_fails_naming_the_dataset():
    def gen():
        yield np.zeros(2)
        yield np.zeros(3)

    t = one_shot(Dataset.from_generator(gen, af.float64, [None]).batch(2))
    with af.Session() as sess, pytest.raises(af.errors.InvalidArgumentError, match="BatchDataset"):
        sess.run(t)


def test_padded_batch():
    ds = Dataset.range(1, 5).map(lambda n: af.fill(af.reshape(af.cast(n, af.int32), [1]), n))
    b = ds.padded_batch(2, padded_shapes=[None], padding_values=np.int64(-1))
    assert b.output_shapes.as_list() == [None, None]
    f = ds.padded_batch(3, padded_shapes=[5], drop_remainder=True)
    assert f.output_shapes.as_list() == [3, 5]
    with af.Session() as sess:
        got = drain(sess, one_shot(b))
        np.testing.assert_array_equal(got[0], [[1, -1], [2, 2]])
        np.testing.assert_array_equal(got[1], [[3, 3, 3, -1], [4, 4, 4, 4]])
        (only,) = drain(sess, one_shot(f))
        np.testing.assert_array_equal(only, [[1, 0, 0, 0, 0], [2, 2, 0, 0, 0], [3, 3, 3, 0, 0]])


# -- functions --------------------------------------------------------------------------------------

def test_map_filter_on_tuples_and_dicts():
    ds = Dataset.from_tensor_slices((np.arange(6, dtype=np.float32), np.arange(6)))
    m = ds.map(lambda x, y: {"sq": x * x, "odd": af.equal(af.mod(y, 2), 1)}).filter(lambda d: d["odd"])
    el = one_shot(m)
    assert el["sq"].dtype is af.float32 and el["sq"].shape.as_list() == []
    with af.Session() as sess:
        got = drain(sess, el)
    assert [float(g["sq"]) for g in got] == [1.0, 9.0, 25.0]
    with pytest.raises(ValueError, match="scalar bool"):
        ds.filter(lambda x, y: x)


def test_parallel_map_keeps_order():
    for n in (2, af.data.experimental.AUTOTUNE, af.data.AUTOTUNE):
        with af.Graph().as_default():
            t = one_shot(Dataset.range(50).map(lambda x: x * 3 + 1, num_parallel_calls=n).batch(7))
            with af.Session() as sess:
                got = np.concatenate(drain(sess, t))
        np.testing.assert_array_equal(got, np.arange(50) * 3 + 1)


def test_map_function_error_names_the_op_and_dataset():
    def gen():
        yield np.zeros(4, np.float32)
        yield np.zeros(5, np.float32)
        yield np.zeros(4, np.float32)

    t = one_shot(Dataset.from_generator(gen, af.float32, [None]).map(lambda v: af.reshape(v, [2, 2])))
    with af.Session() as sess:
        assert sess.run(t).shape == (2, 2)
        with pytest.raises(af.errors.InvalidArgumentError) as ei:
            sess.run(t)
        msg = str(ei.value)
        assert "Reshape" in msg and "MapDataset" in msg and "IteratorGetNext" in msg
        assert sess.run(t).shape == (2, 2)        # the iterator goes on after a failed element


def _drain(sess, t):
    out = []
    while True:
        try:
            out.append(sess.run(t).tolist())
        except af.errors.OutOfRangeError:
            return out


def test_dataset_functions_capture_the_tensors_of_their_graph():
    """As TF's function graphs: a fed placeholder's value is the one at the iterator's initialization,
    a constant keeps its static value, a lookup table and a variable are the session's own, and an
    inner function captures its outer function's argument."""
    s = af.placeholder(af.int64, [])
    k = af.constant(3, af.int64)
    it = Dataset.range(4).map(lambda i: i + s).filter(lambda x: x > s + 1).map(lambda x: x * k) \
        .make_initializable_iterator()
    table = af.contrib.lookup.index_table_from_tensor(af.constant(["a", "b", "c"]))
    it2 = Dataset.from_tensor_slices(["b", "c", "z"]).map(lambda x: table.lookup(x)).make_initializable_iterator()
    it3 = Dataset.from_tensor_slices(np.array([0, 10], np.int64)).interleave(
        lambda start: Dataset.range(3).map(lambda i: i + start + s), cycle_length=2).make_initializable_iterator()
    v = af.Variable(5, dtype=af.int64)
    it4 = Dataset.range(3).map(lambda i: i + v).make_initializable_iterator()
    shape = af.constant([2, 2])
    assert Dataset.from_tensor_slices(np.zeros((2, 4))).map(lambda x: af.reshape(x, shape)).output_shapes == (2, 2)
    with af.Session() as sess:
        sess.run(it.initializer, {s: 10})
        assert _drain(sess, it.get_next()) == [36, 39]
        sess.run(it.initializer, {s: 1})
        assert _drain(sess, it.get_next()) == [9, 12]
        sess.run(af.tables_initializer())
        sess.run(it2.initializer)
        assert _drain(sess, it2.get_next()) == [1, 2, -1]
        sess.run(it3.initializer, {s: 100})
        assert _drain(sess, it3.get_next()) == [100, 110, 101, 111, 102, 112]
        sess.run(v.initializer)
        sess.run(it4.initializer)
        assert _drain(sess, it4.get_next()) == [5, 6, 7]


def test_a_dataset_function_cannot_use_a_tensor_of_an_unrelated_graph():
    other = af.Graph()
    with other.as_default():
        outer = af.constant(3.0)
    with pytest.raises(ValueError, match="another graph"):
        Dataset.range(3).map(lambda x: af.cast(x, af.float32) * outer)


def test_flat_map_and_interleave():
    fm = Dataset.range(4).flat_map(lambda x: Dataset.from_tensors(x).repeat(x))
    il = Dataset.range(1, 4).interleave(lambda x: Dataset.from_tensors(x).repeat(x), cycle_length=2, block_length=1)
    il2 = Dataset.from_tensor_slices(np.array([0, 10], np.int64)).interleave(
        lambda x: Dataset.range(x, x + 4), cycle_length=2, block_length=2)
    il3 = Dataset.range(1, 6).interleave(lambda x: Dataset.from_tensors(x).repeat(x), cycle_length=2, block_length=3)
    with af.Session() as sess:
        assert drain(sess, one_shot(fm)) == [1, 2, 2, 3, 3, 3]
        # The orders TF 2.21's tf.compat.v1 gives for these (checked once by hand).
        assert drain(sess, one_shot(il)) == [1, 2, 2, 3, 3, 3]
        assert drain(sess, one_shot(il2)) == [0, 1, 10, 11, 2, 3, 12, 13]
        assert drain(sess, one_shot(il3)) == [1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5]
    with pytest.raises(TypeError, match="Dataset"):
        Dataset.range(3).flat_map(lambda x: x)


# -- shuffle ----------------------------------------------------------------------------------------

def _shuffled(seed, reshuffle=None, epochs=1, n=20, graph_seed=None):
    with af.Graph().as_default():
        if graph_seed is not None:
            af.set_random_seed(graph_seed)
        ds = Dataset.range(n).shuffle(n, seed=seed, reshuffle_each_iteration=reshuffle).repeat(epochs)
        it = ds.make_initializable_iterator()
        t = it.get_next()
        with af.Session() as sess:
            sess.run(it.initializer)
            first = drain(sess, t)
            sess.run(it.initializer)
            second = drain(sess, t)
    return first, second


def test_seeded_shuffle_is_reproducible_and_a_permutation():
    a, again = _shuffled(seed=7)
    b, _ = _shuffled(seed=7)
    c, _ = _shuffled(seed=8)
    assert sorted(a) == list(range(20))
    assert a == b == again
    assert a != list(range(20)) and a != c
    g1, _ = _shuffled(seed=None, graph_seed=3)
    g2, _ = _shuffled(seed=None, graph_seed=3)
    assert g1 == g2


def test_reshuffle_each_iteration():
    seq, _ = _shuffled(seed=1, epochs=3)
    epochs = [seq[i * 20:(i + 1) * 20] for i in range(3)]
    assert all(sorted(e) == list(range(20)) for e in epochs)
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]
    seq, _ = _shuffled(seed=1, reshuffle=False, epochs=3)
    assert seq[:20] == seq[20:40] == seq[40:]


def test_shuffle_buffer_semantics():
    with af.Session() as sess:
        assert drain(sess, one_shot(Dataset.range(10).shuffle(1, seed=2))) == list(range(10))
        got = drain(sess, one_shot(Dataset.range(200).shuffle(5, seed=2)))
    assert sorted(got) == list(range(200))
    # With a buffer of 5, the k-th output is one of the first k + 5 inputs.
    assert all(v < k + 5 for k, v in enumerate(got))
    assert got != list(range(200))


# -- iterators --------------------------------------------------------------------------------------

def test_out_of_range_and_reinitialization_restarts():
    it = Dataset.range(3).make_initializable_iterator()
    t = it.get_next()
    with af.Session() as sess:
        with pytest.raises(af.errors.FailedPreconditionError, match="not been initialized"):
            sess.run(t)
        sess.run(it.initializer)
        assert sess.run(t) == 0
        sess.run(it.initializer)
        assert drain(sess, t) == [0, 1, 2]
        with pytest.raises(af.errors.OutOfRangeError, match="End of sequence"):
            sess.run(t)
        sess.run(it.initializer)
        assert sess.run(t) == 0


def test_initializable_iterator_with_a_fed_placeholder():
    n = af.placeholder(af.int64, [])
    it = Dataset.range(n).make_initializable_iterator()
    t = it.get_next()
    with af.Session() as sess:
        sess.run(it.initializer, {n: 2})
        assert drain(sess, t) == [0, 1]
        sess.run(it.initializer, {n: 4})
        assert drain(sess, t) == [0, 1, 2, 3]


def test_one_shot_iterator_method_and_function():
    ds = Dataset.range(2)
    it = ds.make_one_shot_iterator()
    with pytest.raises(ValueError):
        _ = it.initializer
    t = it.get_next()
    with af.Session() as sess:
        assert drain(sess, t) == [0, 1]
        with pytest.raises(af.errors.OutOfRangeError):
            sess.run(t)              # exhausted for good: a one-shot iterator does not restart


def test_iterator_from_structure_switches_datasets():
    train = Dataset.from_tensor_slices((np.ones((5, 2), np.float32), np.arange(5))).batch(2)
    test = Dataset.from_tensor_slices((np.zeros((3, 2), np.float32), np.arange(3) + 100)).batch(3)
    it = af.data.Iterator.from_structure(train.output_types, af.compat.v1.data.get_output_shapes(train))
    x, y = it.get_next()
    assert x.shape.as_list() == [None, 2] and y.dtype is af.int64
    assert it.output_types == (af.float32, af.int64)
    init_train, init_test = it.make_initializer(train), it.make_initializer(test)
    with af.Session() as sess:
        sess.run(init_train)
        assert list(sess.run(y)) == [0, 1]
        sess.run(init_test)
        assert list(sess.run(y)) == [100, 101, 102]
        with pytest.raises(af.errors.OutOfRangeError):
            sess.run(y)
        sess.run(init_train)
        assert len(drain(sess, x)) == 3
    with pytest.raises(TypeError, match="output types"):
        it.make_initializer(Dataset.range(3))
    with pytest.raises(TypeError, match="output shapes"):
        it.make_initializer(Dataset.from_tensor_slices((np.ones((5, 3), np.float32), np.arange(5))))


# -- Python sources ---------------------------------------------------------------------------------

def test_from_generator_structures_args_and_errors():
    def gen(n):
        for i in range(int(n)):
            yield i, {"v": [float(i)] * 2}

    ds = Dataset.from_generator(gen, (af.int32, {"v": af.float32}), ([], {"v": [2]}), args=(3,))
    assert ds.output_shapes[1]["v"].as_list() == [2]
    el = one_shot(ds)
    with af.Session() as sess:
        got = drain(sess, el)
    assert [g[0] for g in got] == [0, 1, 2]
    np.testing.assert_array_equal(got[2][1]["v"], [2.0, 2.0])
    assert got[2][1]["v"].dtype == np.float32

    def bad():
        yield [1, 2, 3]

    t = one_shot(Dataset.from_generator(bad, af.int32, [2]))
    with af.Session() as sess, pytest.raises(af.errors.InvalidArgumentError, match="GeneratorDataset"):
        sess.run(t)

    def boom():
        yield 1
        raise RuntimeError("disk on fire")

    t = one_shot(Dataset.from_generator(boom, af.int32))
    with af.Session() as sess:
        assert sess.run(t) == 1
        with pytest.raises(af.errors.InvalidArgumentError, match="disk on fire"):
            sess.run(t)


def test_text_line_dataset(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"first line\nsecond\r\n\nlast without newline")
    b = tmp_path / "b.txt"
    b.write_text("other\n")
    ds = af.data.TextLineDataset([str(a), str(b)])
    assert ds.output_types is af.string
    with af.Session() as sess:
        got = drain(sess, one_shot(ds))
        assert got == [b"first line", b"second", b"", b"last without newline", b"other"]
        batch = sess.run(one_shot(af.data.TextLineDataset(str(a)).batch(2)))
        assert batch.dtype == object and list(batch) == [b"first line", b"second"]
        t = one_shot(af.data.TextLineDataset(str(tmp_path / "missing.txt")))
        with pytest.raises(af.errors.NotFoundError, match="missing.txt"):
            sess.run(t)


# -- overlap and bounds ------------------------------------------------------------------------------

def test_prefetch_is_bounded_and_runs_ahead():
    pulled = []
    lock = threading.Lock()

    def gen():
        for i in range(1000):
            with lock:
                pulled.append(i)
            yield i

    t = one_shot(Dataset.from_generator(gen, af.int64, []).prefetch(3))

    def settle(want):
        deadline = time.monotonic() + 10
        while len(pulled) < want and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)              # give a runaway producer the chance to overshoot
        return len(pulled)

    with af.Session() as sess:
        for k in range(1, 6):
            assert sess.run(t) == k - 1
            # The producer refills the buffer behind the consumer, and never beyond it.
            assert settle(k + 3) == k + 3


def test_parallel_map_is_bounded():
    pulled = []

    def gen():
        for i in range(1000):
            pulled.append(i)
            yield i

    t = one_shot(Dataset.from_generator(gen, af.int64, []).map(lambda x: x + 1, num_parallel_calls=4))
    with af.Session() as sess:
        for k in range(1, 4):
            assert sess.run(t) == k
            assert len(pulled) <= k + 4


def test_session_close_stops_the_prefetch_producer():
    pulled = []

    def gen():
        for i in range(10**6):
            pulled.append(i)
            yield i

    t = one_shot(Dataset.from_generator(gen, af.int64, []).prefetch(2))
    sess = af.Session()
    assert sess.run(t) == 0
    sess.close()
    time.sleep(0.05)
    n = len(pulled)
    assert n <= 3


# -- a real program --------------------------------------------------------------------------------

def _digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    xtr, xte, ytr, yte = train_test_split(d.data, d.target.astype(np.int64), test_size=0.2,
                                          stratify=d.target, random_state=0)
    mean, std = xtr.mean(axis=0), xtr.std(axis=0) + 1.0
    return ((xtr - mean) / std).astype(np.float32), ((xte - mean) / std).astype(np.float32), ytr, yte


def _mlp(x, y):
    h = af.layers.dense(x, 64, activation=af.nn.relu, name="hidden")
    logits = af.layers.dense(h, 10, name="logits")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = af.train.AdamOptimizer(3e-3).minimize(loss)
    acc = af.reduce_mean(af.cast(af.equal(af.argmax(logits, axis=1), y), af.float32))
    return train, acc


def test_digits_mlp_trained_from_a_pipeline_matches_numpy_feeding():
    xtr, xte, ytr, yte = _digits()
    steps = 4 * (len(xtr) // 32 + 1)
    with af.Graph().as_default():
        af.set_random_seed(0)
        it = Dataset.from_tensor_slices((xtr, ytr)).shuffle(len(xtr), seed=1).batch(32).repeat() \
            .make_initializable_iterator()
        xb, yb = it.get_next()
        x = af.placeholder_with_default(xb, [None, 64])
        y = af.placeholder_with_default(yb, [None])
        train, acc = _mlp(x, y)
        with af.Session() as sess:
            sess.run([af.global_variables_initializer(), it.initializer])
            for _ in range(steps):
                sess.run(train)
            pipeline_acc = sess.run(acc, {x: xte, y: yte})
    with af.Graph().as_default():
        af.set_random_seed(0)
        x = af.placeholder(af.float32, [None, 64])
        y = af.placeholder(af.int64, [None])
        train, acc = _mlp(x, y)
        rng = np.random.default_rng(1)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            done = 0
            while done < steps:
                order = rng.permutation(len(xtr))
                for s in range(0, len(order), 32):
                    if done == steps:
                        break
                    sess.run(train, {x: xtr[order[s:s + 32]], y: ytr[order[s:s + 32]]})
                    done += 1
            numpy_acc = sess.run(acc, {x: xte, y: yte})
    assert numpy_acc > 0.93
    assert abs(pipeline_acc - numpy_acc) < 0.03


def test_graph_with_datasets_serializes_and_runs_after_a_round_trip():
    """A meta graph (Saver) or a cluster partition carries dataset functions; a Python generator
    travels as its name and says so when run elsewhere."""
    ds = Dataset.range(4).map(lambda x: x * 10).filter(lambda x: x > 0)
    it = ds.make_initializable_iterator()
    t = it.get_next()
    Dataset.from_generator(lambda: iter([1]), af.int32).make_one_shot_iterator().get_next(name="gen_next")
    g2 = af.Graph.from_msgpack(af.get_default_graph().to_msgpack())
    with af.Session(graph=g2) as sess:
        sess.run(g2.get_operation_by_name(it.initializer.name))
        assert drain(sess, g2.get_tensor_by_name(t.name)) == [10, 20, 30]
        with pytest.raises(af.errors.InvalidArgumentError, match="not available in this process"):
            sess.run(g2.get_tensor_by_name("gen_next:0"))


def test_saver_works_in_a_graph_with_a_pipeline(tmp_path):
    v = af.Variable(1.0, name="v")
    t = one_shot(Dataset.range(3).map(lambda x: af.cast(x, af.float32)))
    saver = af.train.Saver()
    with af.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(t + v) == 1.0
        saver.save(sess, str(tmp_path / "model"))


# -- against TF 2.21 ----------------------------------------------------------------------------------

def _load_cases():
    import importlib.util
    import json
    import pathlib
    here = pathlib.Path(__file__).resolve().parent / "fixtures"
    spec = importlib.util.spec_from_file_location("data_cases", here / "data_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, json.loads((here / "data.json").read_text())["cases"]


_CASES, _TF_RESULTS = _load_cases()


@pytest.mark.parametrize("name", sorted(_CASES.CASES))
def test_pipeline_matches_tensorflow(name):
    """Elements, dtypes and static shapes as TF 2.21's tf.compat.v1 gives for the same program
    (tests/fixtures/make_data.py)."""
    got = _CASES.run_case(af, _CASES.CASES[name], af.nest.flatten)
    want = _TF_RESULTS[name]
    assert got["types"] == want["types"]
    assert got["shapes"] == want["shapes"]
    assert got["elements"] == want["elements"]


def test_a_blocking_generator_behind_prefetch_does_not_stall_other_steps():
    """Behind prefetch the generator runs off the runtime's loop: while it blocks, other steps run
    (the generator is released by a step that could not run if it held the loop)."""
    release = threading.Event()
    seen = []

    def gen():
        yield 0
        seen.append(release.wait(20))        # True: released by the test, not by the timeout
        yield 1

    t = one_shot(Dataset.from_generator(gen, af.int64, []).prefetch(1))
    other = af.constant(2.0) * 3.0
    with af.Session() as sess:
        assert sess.run(t) == 0
        assert sess.run(other) == 6.0          # runs while the producer is blocked in the generator
        release.set()
        assert sess.run(t) == 1
    assert seen == [True]


@pytest.mark.timeout(120)
def test_pipeline_on_a_cluster_worker():
    """Datasets, their map functions and the iterator run in the worker that owns them; the
    elements feed an update on a parameter server."""
    from actorflow.cluster import LocalCluster
    c = LocalCluster(ps=1, workers=1)
    c.start()
    try:
        with af.device("/job:worker/task:0"):
            it = Dataset.from_tensor_slices(np.arange(6)).map(lambda x: x * 2).batch(4).make_initializable_iterator()
            n = it.get_next()
        with af.device("/job:ps/task:0"):
            v = af.Variable(np.int64(0), name="data_sum")
            update = af.assign_add(v, af.reduce_sum(n))
        with af.Session(c.target) as sess:
            sess.run([v.initializer, it.initializer])
            assert [sess.run(update) for _ in range(2)] == [12, 30]
            with pytest.raises(af.errors.OutOfRangeError):
                sess.run(update)
            sess.run(it.initializer)
            assert list(sess.run(n)) == [0, 2, 4, 6]
    finally:
        c.stop()
