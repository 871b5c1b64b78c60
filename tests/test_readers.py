"""Queue-based readers (TextLineReader, TFRecordReader, FixedLengthRecordReader, WholeFileReader,
IdentityReader): records, keys and counters against what TF 2.21 produced for the same programs
and files (tests/fixtures/reader_cases.py, readers.json), the hunkim CSV pattern end to end,
errors, state, and concurrent readers."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import actorflow as af
from tests.fixtures import reader_cases
from tests.tf_reference import load

FIX = load("readers.json")


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reader_cases.write_files(af)
    return tmp_path


@pytest.mark.parametrize("name", sorted(FIX["cases"]))
def test_records_match_tensorflow(files, name):
    want = FIX["cases"][name]
    with af.Graph().as_default():
        got = reader_cases.run_case(af, reader_cases.CASES[name], af.errors)
    assert got["records"] == want["records"]
    assert got.get("end") == want["end"] == "OutOfRangeError"
    assert got.get("after") == want.get("after")


@pytest.mark.parametrize("batch_size", [10, 50])         # 50: a batch larger than the queue's capacity (32)
def test_hunkim_csv_batches(tmp_path, monkeypatch, batch_size):
    monkeypatch.chdir(tmp_path)
    data = np.arange(100, dtype=np.float32).reshape(25, 4)
    np.savetxt("data.csv", data, delimiter=",", fmt="%g")
    with af.Graph().as_default():
        filename_queue = af.train.string_input_producer(["data.csv"], shuffle=False, name="filename_queue")
        reader = af.TextLineReader()
        key, value = reader.read(filename_queue)
        xy = af.decode_csv(value, record_defaults=[[0.], [0.], [0.], [0.]])
        train_x_batch, train_y_batch = af.train.batch([xy[0:-1], xy[-1:]], batch_size=batch_size)
        assert train_x_batch.shape.as_list() == [batch_size, 3] and train_y_batch.shape.as_list() == [batch_size, 1]
        with af.Session() as sess:
            coord = af.train.Coordinator()
            threads = af.train.start_queue_runners(sess=sess, coord=coord)
            rows = []
            for _ in range(100 // batch_size):    # 100 rows: the 25 of the file 4 times (no num_epochs)
                x, y = sess.run([train_x_batch, train_y_batch])
                rows.append(np.concatenate([x, y], axis=1))
            coord.request_stop()
            coord.join(threads)
    np.testing.assert_array_equal(np.concatenate(rows), np.concatenate([data] * 4))


@pytest.mark.parametrize("smaller", [False, True])
def test_num_epochs_ends_the_batches_with_out_of_range(tmp_path, monkeypatch, smaller):
    monkeypatch.chdir(tmp_path)
    data = np.arange(50, dtype=np.float32).reshape(25, 2)
    np.savetxt("d.csv", data, delimiter=",", fmt="%g")
    with af.Graph().as_default():
        q = af.train.string_input_producer(["d.csv"], shuffle=False, num_epochs=1)
        _, value = af.TextLineReader().read(q)
        a, b = af.decode_csv(value, record_defaults=[[0.], [0.]])
        batch = af.train.batch([a, b], batch_size=10, allow_smaller_final_batch=smaller)
        with af.Session() as sess:
            sess.run(af.local_variables_initializer())
            coord = af.train.Coordinator()
            threads = af.train.start_queue_runners(sess=sess, coord=coord)
            sizes = []
            with pytest.raises(af.errors.OutOfRangeError):
                for _ in range(10):
                    x, _ = sess.run(batch)
                    sizes.append(len(x))
            coord.request_stop()
            coord.join(threads)
    assert sizes == ([10, 10, 5] if smaller else [10, 10])


def _queue_of(names, close=True):
    q = af.FIFOQueue(10, [af.string], shapes=[[]])
    return q, q.enqueue_many([names]), q.close()


def test_missing_file_names_it_and_reading_goes_on(files):
    with af.Graph().as_default():
        q, enq, close = _queue_of(["nope.csv", "b.csv"])
        k, v = af.TextLineReader().read(q)
        with af.Session() as s:
            s.run([enq])
            with pytest.raises(af.errors.NotFoundError, match="nope.csv; No such file or directory"):
                s.run(k)
            assert s.run([k, v]) == [b"b.csv:1", b"x,y"]


def test_whole_file_missing_and_tfrecord_missing(files):
    for make in (af.WholeFileReader, af.TFRecordReader,
                 lambda: af.FixedLengthRecordReader(4)):
        with af.Graph().as_default():
            q, enq, close = _queue_of(["gone.bin"])
            k, _ = make().read(q)
            with af.Session() as s:
                s.run(enq)
                with pytest.raises(af.errors.NotFoundError, match="gone.bin"):
                    s.run(k)


def test_damaged_tfrecord_is_data_loss(files):
    data = open("r.tfrecord", "rb").read()
    with open("bad.tfrecord", "wb") as f:
        f.write(data[:-3])
    with af.Graph().as_default():
        q, enq, close = _queue_of(["bad.tfrecord", "b.csv"])
        k, v = af.TFRecordReader().read(q)
        with af.Session() as s:
            s.run(enq)
            for _ in range(3):
                s.run(v)
            with pytest.raises(af.errors.DataLossError, match="bad.tfrecord"):
                s.run(v)


def test_queue_of_wrong_components_fails_at_run():
    with af.Graph().as_default():
        qi = af.FIFOQueue(3, [af.int32], shapes=[[]])
        q2 = af.FIFOQueue(3, [af.string, af.string], shapes=[[], []])
        r = af.TextLineReader()
        ki, _ = r.read(qi)
        k2, _ = r.read(q2)
        with af.Session() as s:
            s.run([qi.enqueue_many([[1]]), q2.enqueue_many([["a"], ["b"]])])
            with pytest.raises(af.errors.InvalidArgumentError, match="single string component"):
                s.run(ki)
            with pytest.raises(af.errors.InvalidArgumentError, match="Expected single component queue"):
                s.run(k2)


def test_read_up_to_zero_and_negative(files):
    with af.Graph().as_default():
        q, enq, close = _queue_of(["b.csv"])
        r = af.TextLineReader()
        n = af.placeholder(af.int64, [])
        keys, values = r.read_up_to(q, n)
        with af.Session() as s:
            s.run(enq)
            got = s.run(keys, {n: 0})
            assert got.shape == (0,) and s.run(r.num_work_units_completed()) == 0
            with pytest.raises(af.errors.InvalidArgumentError, match="num_records"):
                s.run(keys, {n: -1})
            assert list(s.run(keys, {n: 5})) == [b"b.csv:1", b"b.csv:2", b"b.csv:3"]


def test_identity_reader_state_round_trip_and_reset():
    with af.Graph().as_default():
        q, enq, close = _queue_of(["x", "y", "z"])
        r = af.IdentityReader()
        assert r.supports_serialize and af.WholeFileReader().supports_serialize
        assert not af.TextLineReader().supports_serialize
        k, _ = r.read(q)
        state = r.serialize_state()
        fed = af.placeholder(af.string, [])
        restore = r.restore_state(fed)
        counts = [r.num_records_produced(), r.num_work_units_completed()]
        with af.Session() as s:
            s.run(enq)
            s.run(k)
            s.run(k)
            saved = s.run(state)
            assert saved == b'\x08\x02\x10\x02\x18\x02"\x01y'          # what TF 2.21 writes
            s.run(r.reset())
            assert s.run(counts) == [0, 0] and s.run(state) == b""
            s.run(restore, {fed: saved})
            assert s.run(counts) == [2, 2] and s.run(state) == saved
            s.run(restore, {fed: b"\x08\x07\x10\x09"})                # finished > started is accepted
            assert s.run(counts) == [0, 9]
            with pytest.raises(af.errors.InvalidArgumentError, match="Inconsistent work started"):
                s.run(restore, {fed: b"\x08\x05\x10\x02"})
            assert s.run(counts) == [0, 0]                            # a failed restore resets
            with pytest.raises(af.errors.InvalidArgumentError, match="Could not parse state for IdentityReader"):
                s.run(restore, {fed: b"\x0fgarbage"})
            assert s.run(k) == b"z"


def test_text_reader_state_is_unimplemented():
    with af.Graph().as_default():
        r = af.TextLineReader()
        with af.Session() as s:
            with pytest.raises(af.errors.UnimplementedError, match="Reader SerializeState"):
                s.run(r.serialize_state())
            with pytest.raises(af.errors.UnimplementedError, match="Reader RestoreState"):
                s.run(r.restore_state(b""))


def test_reset_forgets_the_current_file(files):
    with af.Graph().as_default():
        q, enq, close = _queue_of(["b.csv", "a.csv"])
        r = af.TextLineReader()
        k, _ = r.read(q)
        with af.Session() as s:
            s.run(enq)
            assert s.run(k) == b"b.csv:1"
            s.run(r.reset())
            assert s.run(k) == b"a.csv:1"           # the rest of b.csv is dropped, as in TF
            assert s.run(r.num_records_produced()) == 1


def test_concurrent_reads_neither_skip_nor_duplicate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = []
    for i in range(6):
        names.append(f"f{i}.txt")
        with open(names[-1], "w") as f:
            f.write("".join(f"{i}-{j}\n" for j in range(i * 7 + 1)))
    total = sum(i * 7 + 1 for i in range(6))
    with af.Graph().as_default():
        q = af.train.string_input_producer(names, shuffle=False, num_epochs=1, capacity=2)
        r = af.TextLineReader()
        k, v = r.read(q)
        ku, vu = r.read_up_to(q, 3)
        with af.Session() as s:
            s.run(af.local_variables_initializer())
            coord = af.train.Coordinator()
            threads = af.train.start_queue_runners(sess=s, coord=coord)
            got: list = []
            lock = threading.Lock()

            def work(up_to):
                try:
                    while True:
                        if up_to:
                            keys, vals = s.run([ku, vu])
                            pairs = list(zip(keys, vals))
                        else:
                            pairs = [tuple(s.run([k, v]))]
                        with lock:
                            got.extend(pairs)
                except af.errors.OutOfRangeError:
                    pass

            ts = [threading.Thread(target=work, args=(i % 2 == 1,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            assert not any(t.is_alive() for t in ts)
            assert s.run(r.num_records_produced()) == total
            coord.request_stop()
            coord.join(threads)
    want = {(f"f{i}.txt:{j + 1}".encode(), f"{i}-{j}".encode()) for i in range(6) for j in range(i * 7 + 1)}
    assert len(got) == total and set(got) == want


def test_blocked_read_of_a_timed_out_step_loses_no_file(files):
    with af.Graph().as_default():
        q = af.FIFOQueue(10, [af.string], shapes=[[]])
        name = af.placeholder(af.string, [])
        enq = q.enqueue([name])
        r = af.TextLineReader()
        k, _ = r.read(q)
        with af.Session() as s:
            with pytest.raises(af.errors.DeadlineExceededError):
                s.run(k, options=af.RunOptions(timeout_in_ms=200))
            s.run(enq, {name: "b.csv"})
            assert s.run(k) == b"b.csv:1"


def test_names_in_compat_v1():
    for n in ("ReaderBase", "TextLineReader", "TFRecordReader", "FixedLengthRecordReader", "WholeFileReader",
              "IdentityReader"):
        assert getattr(af.compat.v1, n) is getattr(af, n)
    with af.Graph().as_default():
        r = af.TFRecordReader(name="abc")
        assert r.reader_ref.op.type == "TFRecordReaderV2" and r.reader_ref.name == "abc:0"
        out = r.read(af.FIFOQueue(1, [af.string]))
        assert out.key is out[0] and out.value is out[1]
        with pytest.raises(ValueError):
            af.FixedLengthRecordReader(0)


@pytest.mark.timeout(120)
def test_reader_on_a_parameter_server_reads_for_a_worker(tmp_path):
    # The reader and its filename queue live on the PS (both are bound by the read's actor there);
    # the worker batches what it reads. Paths are absolute: the PS process has its own directory.
    from actorflow.cluster import LocalCluster
    path = tmp_path / "d.csv"
    path.write_text("".join(f"{i},{i * 2}\n" for i in range(8)))
    with LocalCluster(ps=1, workers=1) as cluster, af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            q = af.train.string_input_producer([str(path)], shuffle=False, num_epochs=1)
            r = af.TextLineReader()
            k, v = r.read(q)
        with af.device("/job:worker/task:0"):
            a, b = af.decode_csv(v, record_defaults=[[0], [0]])
            s2 = a + b
        with af.Session(cluster.task_target("worker", 0)) as s:
            s.run(af.local_variables_initializer())
            coord = af.train.Coordinator()
            threads = af.train.start_queue_runners(sess=s, coord=coord)
            got = []
            with pytest.raises(af.errors.OutOfRangeError):
                for _ in range(20):
                    got.append(tuple(s.run([k, s2])))
            coord.request_stop()
            coord.join(threads)
    assert got == [(f"{path}:{i + 1}".encode(), 3 * i) for i in range(8)]
