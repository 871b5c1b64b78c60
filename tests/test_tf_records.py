"""TFRecord files and tf.train.Example: files TensorFlow 2.21 wrote (tests/fixtures/make_tf_records.py)
read and parsed as TF parsed them; what actorflow writes read back (and, in the bench-extra run, by
TensorFlow itself); damaged files and bad features named in the errors."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = pathlib.Path(__file__).parent / "fixtures"
WANT = json.loads((FIX / "tf_records.json").read_text())
SPEC = {"image": af.FixedLenFeature([], af.string), "label": af.FixedLenFeature([], af.int64),
        "score": af.FixedLenFeature([2], af.float32), "tag": af.FixedLenFeature([], af.string),
        "weight": af.FixedLenFeature([], af.float32, default_value=-1.0)}


def _check(parsed, pixels):
    f = WANT["features"]
    np.testing.assert_array_equal(parsed["label"], f["label"])
    np.testing.assert_array_equal(parsed["score"], np.array(f["score"], np.float32))
    np.testing.assert_array_equal(parsed["weight"], np.array(f["weight"], np.float32))
    assert [t.decode() for t in parsed["tag"]] == f["tag"]
    np.testing.assert_array_equal(pixels, WANT["pixels"])


@pytest.mark.parametrize("name, compression", [("examples.tfrecord", None), ("examples.tfrecord.gz", "GZIP")])
def test_records_tensorflow_wrote_read_and_parse_as_in_tensorflow(name, compression):
    path = str(FIX / "tf_records" / name)
    opts = af.python_io.TFRecordOptions(compression)
    records = list(af.python_io.tf_record_iterator(path, opts))
    assert [r.hex() for r in records] == WANT["records"]
    with af.Graph().as_default():
        batch = af.data.TFRecordDataset(path, compression_type=compression or "").batch(5)
        serialized = batch.make_one_shot_iterator().get_next()
        parsed = af.parse_example(serialized, SPEC)
        pixels = af.decode_raw(parsed["image"], af.uint8)
        one = af.parse_single_example(records[1], SPEC)
        with af.Session() as s:
            got, px, single = s.run([parsed, pixels, one])
    _check(got, px)
    assert single["label"] == 1 and single["weight"] == np.float32(0.25) and single["score"].shape == (2,)


def test_writing_examples_and_reading_them_back(tmp_path):
    path = str(tmp_path / "out.tfrecord.z")
    with af.io.TFRecordWriter(path, af.io.TFRecordOptions("ZLIB")) as w:
        for i in range(3):
            ex = af.train.Example(features=af.train.Features(feature={
                "v": af.train.Feature(int64_list=af.train.Int64List(value=[i, 10 * i]))}))
            w.write(ex.SerializeToString())
    with af.Graph().as_default():
        ds = af.data.TFRecordDataset([path], compression_type="ZLIB").map(
            lambda r: af.parse_single_example(r, {"v": af.FixedLenFeature([2], af.int64)})["v"])
        nxt = ds.make_one_shot_iterator().get_next()
        with af.Session() as s:
            assert [s.run(nxt).tolist() for _ in range(3)] == [[0, 0], [1, 10], [2, 20]]
            with pytest.raises(af.errors.OutOfRangeError):
                s.run(nxt)


def test_damaged_files_and_bad_features_are_named(tmp_path):
    path = tmp_path / "bad.tfrecord"
    with af.python_io.TFRecordWriter(str(path)) as w:
        w.write(b"first record")
        w.write(b"second record")
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF                              # a byte of the second record's data
    path.write_bytes(bytes(data))
    it = af.python_io.tf_record_iterator(str(path))
    assert next(it) == b"first record"
    with pytest.raises(af.errors.DataLossError, match=r"corrupted record at 28 in .*bad.tfrecord: the data's checksum"):
        next(it)
    with af.Graph().as_default():
        nxt = af.data.TFRecordDataset(str(path)).make_one_shot_iterator().get_next()
        rec = af.placeholder(af.string, [])
        need = af.parse_single_example(rec, {"missing": af.FixedLenFeature([], af.float32)})
        typed = af.parse_single_example(rec, {"v": af.FixedLenFeature([2], af.float32)})
        raw = af.decode_raw(af.placeholder(af.string, [None], name="raw"), af.float32)
        ex = af.train.Example(features=af.train.Features(feature={
            "v": af.train.Feature(int64_list=af.train.Int64List(value=[1, 2]))})).SerializeToString()
        with af.Session() as s:
            s.run(nxt)
            with pytest.raises(af.errors.DataLossError, match="bad.tfrecord"):
                s.run(nxt)
            with pytest.raises(af.errors.InvalidArgumentError, match="Feature: missing .* is required"):
                s.run(need, {rec: ex})
            with pytest.raises(af.errors.InvalidArgumentError, match="Key: v.*Data types don't match. Data type: "
                                                                     "int64 but expected type: float"):
                s.run(typed, {rec: ex})
            with pytest.raises(af.errors.InvalidArgumentError, match="not a multiple of 4"):
                s.run(raw, {"raw:0": [b"abcde"]})
            with pytest.raises(af.errors.InvalidArgumentError, match="same size"):
                s.run(raw, {"raw:0": [b"abcd", b"abcdefgh"]})
    with pytest.raises(TypeError, match="FixedLenFeature and VarLenFeature only"):
        af.parse_single_example("x", {"v": object()})


def test_tensorflow_reads_what_actorflow_wrote(tmp_path):
    tf = pytest.importorskip("tensorflow")      # the `bench` extra installs it
    path = str(tmp_path / "af.tfrecord.gz")
    with af.python_io.TFRecordWriter(path, "GZIP") as w:
        for i in range(3):
            w.write(af.train.Example(features=af.train.Features(feature={
                "x": af.train.Feature(float_list=af.train.FloatList(value=[i * 0.5]))})).SerializeToString())
    got = [tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([], tf.float32)})["x"].numpy()
           for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    assert got == [0.0, 0.5, 1.0]


def test_var_len_features_parse_into_sparse_tensors():
    records = [af.train.Example(features=af.train.Features(feature={
        "ids": af.train.Feature(int64_list=af.train.Int64List(value=list(range(10, 10 + i)))),
        "y": af.train.Feature(float_list=af.train.FloatList(value=[i]))})).SerializeToString() for i in range(3)]
    spec = {"ids": af.VarLenFeature(af.int64), "y": af.FixedLenFeature([], af.float32)}
    with af.Graph().as_default():
        batch = af.parse_example(records, spec)
        one = af.parse_single_example(records[2], spec)
        assert isinstance(batch["ids"], af.SparseTensor)
        with af.Session() as s:
            b, o = s.run([batch, one])
    assert b["ids"].indices.tolist() == [[1, 0], [2, 0], [2, 1]] and b["ids"].values.tolist() == [10, 10, 11]
    assert b["ids"].dense_shape.tolist() == [3, 2] and b["y"].tolist() == [0.0, 1.0, 2.0]
    assert o["ids"].indices.tolist() == [[0], [1]] and o["ids"].dense_shape.tolist() == [2]
