"""Queue-based input pipelines (af.train.slice_input_producer, string_input_producer, batch,
shuffle_batch, batch_join, ...) and count_up_to: run with queue runners, as TF-1.x programs do."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af


def _drain(sess, fetches, first=None):
    """Runs `fetches` with the graph's queue runners until OutOfRangeError; returns the results.
    `first`, if given, is run once before, while the runners are alive (stopping them closes their
    queues), and its result is the first element."""
    coord = af.train.Coordinator()
    threads = af.train.start_queue_runners(sess, coord)
    out = [] if first is None else [sess.run(first)]
    try:
        while True:
            out.append(sess.run(fetches))
    except af.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
        coord.join(threads)
    return out


def _init(sess):
    sess.run([af.global_variables_initializer(), af.local_variables_initializer()])


def test_count_up_to_stops_at_its_limit():
    with af.Graph().as_default():
        v = af.Variable(0, name="counter")
        c = af.count_up_to(v, 3)
        with af.Session() as s:
            _init(s)
            assert [int(s.run(c)) for _ in range(3)] == [0, 1, 2]
            with pytest.raises(af.errors.OutOfRangeError, match="Reached limit of 3"):
                s.run(c)
            assert s.run(v) == 3


def test_slice_input_producer_and_batch_run_epochs_then_stop():
    with af.Graph().as_default():
        images = af.constant(np.arange(10, dtype=np.float32).reshape(10, 1))
        labels = af.constant(np.arange(10))
        img, lab = af.train.slice_input_producer([images, labels], num_epochs=2, shuffle=False)
        bi, bl = af.train.batch([img, lab], batch_size=4, allow_smaller_final_batch=True)
        assert bi.shape.as_list() == [None, 1]
        with af.Session() as s:
            _init(s)
            got = _drain(s, [bi, bl])
    labels_seen = [b[1].tolist() for b in got]
    assert labels_seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    for imgs, labs in got:
        np.testing.assert_array_equal(imgs[:, 0], labs.astype(np.float32))


def test_shuffle_batch_covers_each_epoch_in_random_order():
    with af.Graph().as_default():
        x = af.constant(np.arange(30))
        (item,) = af.train.slice_input_producer([x], num_epochs=1, shuffle=True, seed=3)
        batch = af.train.shuffle_batch([item], batch_size=5, capacity=20, min_after_dequeue=6, seed=4,
                                       allow_smaller_final_batch=True)
        with af.Session() as s:
            _init(s)
            got = np.concatenate([b[0] for b in _drain(s, batch)])
    assert sorted(got.tolist()) == list(range(30)) and got.tolist() != list(range(30))


def test_dict_inputs_dynamic_pad_and_batch_join():
    with af.Graph().as_default():
        n = af.train.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
        seq = af.range(n)                                          # a different length each element
        out = af.train.batch({"n": n, "seq": seq}, batch_size=2, dynamic_pad=True, shapes=[[], [None]])
        assert set(out) == {"n", "seq"}
        joined = af.train.batch_join([[af.constant(1)], [af.constant(2)]], batch_size=4)
        with af.Session() as s:
            _init(s)
            j, *got = _drain(s, out, first=joined)
    assert [g["n"].tolist() for g in got] == [[0, 1], [2, 3]]
    np.testing.assert_array_equal(got[1]["seq"], [[0, 1, 0], [0, 1, 2]])         # padded with zeros
    assert sorted(set(j[0].tolist())) <= [1, 2] and len(j[0]) == 4


def test_string_input_producer_and_shape_errors():
    with af.Graph().as_default():
        q = af.train.string_input_producer(["a.txt", "b.txt"], num_epochs=2, shuffle=False)
        name = q.dequeue()
        with af.Session() as s:
            _init(s)
            got = _drain(s, name)
        assert got == [b"a.txt", b"b.txt", b"a.txt", b"b.txt"]
        with pytest.raises(ValueError, match="fully defined"):
            af.train.batch([af.placeholder(af.float32, [None])], batch_size=2)
        with pytest.raises(ValueError, match="num_epochs must be > 0"):
            af.train.limit_epochs(af.constant(1), 0)


@pytest.mark.parametrize("shuffle", [False, True])
def test_maybe_batch_join_keeps_only_when_keep_input(shuffle):
    def run(keep):
        with af.Graph().as_default():
            a = af.train.range_input_producer(3, num_epochs=1, shuffle=False).dequeue()
            b = af.train.range_input_producer(3, num_epochs=1, shuffle=False).dequeue() + 10
            if shuffle:
                out = af.train.maybe_shuffle_batch_join([[a], [b]], 2, capacity=8, min_after_dequeue=0,
                                                        keep_input=af.constant(keep), seed=1,
                                                        allow_smaller_final_batch=True)
            else:
                out = af.train.maybe_batch_join([[a], [b]], af.constant(keep), 2, allow_smaller_final_batch=True)
            with af.Session() as s:
                _init(s)
                return sorted(int(x) for batch in _drain(s, out) for x in np.ravel(batch))
    assert run(True) == [0, 1, 2, 10, 11, 12]
    assert run(False) == []
