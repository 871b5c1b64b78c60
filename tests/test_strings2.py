"""TF 1.x's text ops and lookup tables against TensorFlow 2.21 (fixtures/strings2.json, made by
fixtures/make_strings2.py from fixtures/strings2_cases.py), plus table behaviour and errors."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import actorflow as af
from actorflow import errors

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from strings2_cases import CASES, VOCAB_FILE  # noqa: E402

with open(os.path.join(os.path.dirname(__file__), "fixtures", "strings2.json"), encoding="utf-8") as _f:
    FIX = json.load(_f)


def _arg(v):
    if isinstance(v, dict) and "const" in v:
        return af.constant(v["const"], dtype=v["dtype"])
    if isinstance(v, list) and v and all(isinstance(x, (dict, list)) for x in v) and any(isinstance(x, dict) for x in v):
        return [_arg(x) for x in v]
    return v


def _dec(e):
    if "sparse" in e:
        return af.SparseTensorValue(*[_dec(x) for x in e["sparse"]])
    if e["dtype"] == "string":
        out = np.empty(len(e["value"]), dtype=object)
        out[:] = [s.encode("latin-1") for s in e["value"]]
        return out.reshape(e["shape"])
    return np.array(e["value"], dtype=e["dtype"]).reshape(e["shape"])


def _same(got, want):
    if isinstance(want, af.SparseTensorValue):
        assert isinstance(got, af.SparseTensorValue)
        for g, w in zip(got, want):
            _same(g, w)
        return
    got = np.asarray(got, dtype=object) if isinstance(got, bytes) else np.asarray(got)
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.dtype == object and got.reshape(-1).tolist() == want.reshape(-1).tolist()
    else:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _run(build):
    g = af.Graph()
    with g.as_default():
        try:
            out = build()
        except (ValueError, TypeError) as e:
            return ("build", e)
        with af.Session() as s:
            try:
                s.run(af.tables_initializer())
                return ("ok", s.run(out))
            except errors.OpError as e:
                return ("run", e)


def _call(path, kwargs):
    fn = af
    for p in path.split("."):
        fn = getattr(fn, p)
    return fn(**{k: _arg(v) for k, v in kwargs.items()})


def _check(rec, result):
    kind, val = result
    if "build_error" in rec or "run_error" in rec:
        want_kind = "build" if "build_error" in rec else "run"
        assert kind == want_kind, f"expected a {want_kind} error like TF's {rec}, got {val!r}"
        if kind == "run":
            # The same class, the op named, and TF's message up to the first path or value.
            assert type(val).__name__ == rec["run_error"]
            assert "[[node" in val.message
            core = rec["message"].split("\n\t [[")[0].rsplit("\n", 1)[-1]
            prefix = core.split("/")[0].split(":")[0][:40]
            assert prefix in val.message, (core, val.message)
        return
    assert kind == "ok", f"TF gave a value, actorflow raised {val!r}"
    if "outputs" in rec:
        assert len(val) == len(rec["outputs"])
        for g, w in zip(val, rec["outputs"]):
            _same(g, _dec(w))
    else:
        _same(val, _dec(rec["output"]))


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{i}-{p}" for i, (p, _) in enumerate(CASES)])
def test_string_op_matches_tf(i):
    rec = FIX["cases"][i]
    path, kwargs = CASES[i]
    assert rec["fn"] == path
    _check(rec, _run(lambda: _call(path, kwargs)))


def _tables():
    return FIX["tables"]


@pytest.mark.parametrize("rec", [t for t in _tables() if t["case"].startswith("vocab")], ids=lambda r: r["case"])
def test_vocabulary_table_ids_match_tf(rec):
    nb = rec["num_oov_buckets"]
    vocab = ["the", "quick", "brown", "fox", "ünï", ""]
    from strings2_cases import WORDS
    keys = vocab + ["jumps", "over", "THE", "日本", "lazy"] + WORDS[:40]

    def build():
        if rec["case"].startswith("vocab_int"):
            init = af.lookup.KeyValueTensorInitializer(af.constant([10, 20, 30, -5], af.int64),
                                                       af.constant([0, 1, 2, 3], af.int64))
            t = af.lookup.StaticVocabularyTable(init, nb)
            return [t.lookup(af.constant([10, 11, 30, -5, 0, 12345678901, -7], af.int64)), t.size()]
        init = af.lookup.KeyValueTensorInitializer(vocab, af.range(len(vocab), dtype=af.int64))
        t = af.lookup.StaticVocabularyTable(init, nb)
        return [t.lookup(af.constant(keys)), t.size()]
    _check(rec, _run(build))


@pytest.mark.parametrize("rec", [t for t in _tables() if t["case"] == "file"], ids=lambda r: str(r["args"]))
def test_text_file_table_matches_tf(rec, tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text(VOCAB_FILE, encoding="utf-8")
    a = dict(rec["args"])

    def build():
        init = af.lookup.TextFileInitializer(str(path), a["key_dtype"], a["key_index"], a["value_dtype"],
                                             a["value_index"], vocab_size=a.get("vocab_size"),
                                             value_index_offset=a.get("offset", 0))
        t = af.lookup.StaticHashTable(init, a["default"])
        return [t.lookup(af.constant(a["lookup"], dtype=a["key_dtype"])), t.size()]
    _check(rec, _run(build))


def test_lookup_before_initialization_fails_naming_the_op():
    with af.Graph().as_default():
        init = af.lookup.KeyValueTensorInitializer(["a", "b"], af.constant([1, 2], af.int64))
        t = af.lookup.StaticHashTable(init, -1)
        out = t.lookup(af.constant(["a", "c"]), name="my_lookup")
        with af.Session() as s:
            with pytest.raises(errors.FailedPreconditionError, match="(?s)Table not initialized.*my_lookup"):
                s.run(out)
            with pytest.raises(errors.FailedPreconditionError, match="Table not initialized"):
                s.run(t.size())
            s.run(t.initializer)
            np.testing.assert_array_equal(s.run(out), [1, -1])
            s.run(af.initialize_all_tables())      # the same data again: allowed, as in TF
            assert s.run(t.size()) == 2


def test_table_defaults_sparse_keys_and_value_types():
    with af.Graph().as_default():
        init = af.lookup.KeyValueTensorInitializer(af.constant([3, 1, 2], af.int64), ["three", "one", "two"])
        t = af.lookup.StaticHashTable(init, "none")
        sp = af.string_split(["a b", "c"])
        ids = af.lookup.StaticHashTable(af.lookup.KeyValueTensorInitializer(["a", "c"], [1.5, 2.5]), -1.0).lookup(sp)
        with af.Session() as s:
            s.run(af.tables_initializer())
            assert s.run(t.lookup(af.constant([[1, 5], [2, 3]], af.int64))).tolist() == [[b"one", b"none"],
                                                                                          [b"two", b"three"]]
            v = s.run(ids)
            assert isinstance(v, af.SparseTensorValue)
            np.testing.assert_array_equal(v.values, np.array([1.5, -1.0, 2.5], np.float32))
            np.testing.assert_array_equal(v.dense_shape, [2, 2])


def test_duplicate_keys_with_different_values_fail():
    with af.Graph().as_default():
        init = af.lookup.KeyValueTensorInitializer(["a", "a"], af.constant([1, 2], af.int64))
        af.lookup.StaticHashTable(init, -1)
        with af.Session() as s:
            with pytest.raises(errors.FailedPreconditionError, match="different value for same key"):
                s.run(af.tables_initializer())


def test_table_build_errors():
    with af.Graph().as_default():
        init = af.lookup.KeyValueTensorInitializer(["a"], af.constant([1], af.int64))
        t = af.lookup.StaticHashTable(init, -1)
        with pytest.raises(TypeError, match="keys"):
            t.lookup(af.constant([1], af.int64))
        with pytest.raises(ValueError, match="num_oov_buckets"):
            af.lookup.StaticVocabularyTable(init, 0)
        with pytest.raises(ValueError, match="LINE_NUMBER"):
            af.lookup.TextFileInitializer("f", af.string, af.lookup.TextFileIndex.LINE_NUMBER, af.int64, 0)
        assert af.tables_initializer().type in ("NoOp",)


def test_text_file_errors_name_the_file(tmp_path):
    with af.Graph().as_default():
        bad = tmp_path / "bad.txt"
        bad.write_text("a\t1\n\nb\t2\n")
        init = af.lookup.TextFileInitializer(str(bad), af.string, 0, af.int64, 1)
        af.lookup.StaticHashTable(init, -1)
        missing = af.lookup.TextFileInitializer(str(tmp_path / "none.txt"), af.string, 0, af.int64, -1)
        t2 = af.lookup.StaticHashTable(missing, -1)
        with af.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="bad.txt.*empty line"):
                s.run(af.tables_initializer())
            with pytest.raises(errors.NotFoundError, match="none.txt"):
                s.run(t2.initializer)


def test_read_and_write_file_round_trip(tmp_path):
    with af.Graph().as_default():
        path = str(tmp_path / "sub" / "out.bin")
        data = "ünï\x00bytes\n".encode()
        w = af.write_file(path, af.constant(data))
        r = af.read_file(path)
        with af.Session() as s:
            s.run(w)
            assert s.run(r) == data
            assert s.run(af.io.read_file(path)) == data
            with pytest.raises(errors.NotFoundError, match="nope.txt"):
                s.run(af.io.read_file(str(tmp_path / "nope.txt")))


def test_build_errors_name_the_op_or_argument():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="StringSplit"):
            af.string_split(af.constant([["a"]]))
        with pytest.raises(ValueError, match="num_buckets"):
            af.strings.to_hash_bucket_fast(["a"], 0)
        with pytest.raises(ValueError, match="ReduceJoin"):
            af.reduce_join(af.constant([1, 2]))
        with pytest.raises(NotImplementedError, match="RaggedTensor"):
            af.strings.split(["a b"], result_type="RaggedTensor")
        with pytest.raises(ValueError, match="record_defaults"):
            af.decode_csv(["1"], [af.constant([[1, 2]])])


def test_monitored_session_initializes_tables():
    with af.Graph().as_default():
        init = af.lookup.KeyValueTensorInitializer(["a", "b"], af.constant([7, 8], af.int64))
        t = af.lookup.StaticHashTable(init, -1)
        out = t.lookup(af.constant(["b", "x"]))
        af.train.get_or_create_global_step()
        with af.train.MonitoredTrainingSession() as s:
            np.testing.assert_array_equal(s.run(out), [8, -1])
