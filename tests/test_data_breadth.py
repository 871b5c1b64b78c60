"""The TF-1.x tf.data breadth: Dataset.unbatch/shard/window/scan/reduce/take_while/unique/
group_by_window/bucket_by_sequence_length/random/counter/choose_from_datasets/
sample_from_datasets/list_files/get_single_element/ignore_errors and the tf.data.experimental
transformations, checked against TF 2.21's tf.compat.v1 results (tests/fixtures/make_data_breadth.py
records them from tests/fixtures/data_breadth_cases.py), plus their errors."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

pytestmark = [pytest.mark.usefixtures("graph"),
              pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")]  # ignore_errors cases

Dataset = af.data.Dataset
E = af.data.experimental
HERE = pathlib.Path(__file__).resolve().parent / "fixtures"


def _load_cases():
    spec = importlib.util.spec_from_file_location("data_breadth_cases", HERE / "data_breadth_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, json.loads((HERE / "data_breadth.json").read_text())


_CASES, _TF = _load_cases()


@pytest.mark.parametrize("name", sorted(_CASES.CASES))
def test_pipeline_matches_tensorflow(name):
    """Elements, dtypes and static shapes as TF 2.21's tf.compat.v1 gives for the same program;
    the random ones (Dataset.random, sample_from_datasets, shuffle_and_repeat) draw TF's numbers."""
    got = _CASES.run_case(af, _CASES.CASES[name], af.nest.flatten)
    want = _TF["cases"][name]
    assert got["types"] == want["types"]
    assert got["shapes"] == want["shapes"]
    assert got["elements"] == want["elements"]


@pytest.mark.parametrize("name", sorted(_CASES.TENSOR_CASES))
def test_tensors_match_tensorflow(name):
    """reduce, get_single_element and cardinality give TF's values, afresh on every run."""
    got = _CASES.run_tensor_case(af, _CASES.TENSOR_CASES[name], af.nest.flatten)
    assert got == _TF["tensor_cases"][name]


@pytest.mark.parametrize("name", sorted(_CASES.ERROR_CASES))
def test_errors_match_tensorflow(name):
    """Bad arguments fail as TF's do: at construction with the same Python error class, or when
    run with the same af.errors class."""
    got = _CASES.run_error_case(af, _CASES.ERROR_CASES[name], af.nest.flatten)
    assert got == _TF["error_cases"][name]


def test_list_files_order_matches_tensorflow(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    assert _CASES.list_files_order(af, str(tmp_path), af.nest.flatten) == _TF["list_files"]


def test_list_files_without_a_match_names_the_pattern(tmp_path):
    with pytest.raises(af.errors.InvalidArgumentError, match="no files matched"):
        Dataset.list_files(str(tmp_path / "nothing*.txt"))


def _run_error(ds):
    it = af.data.make_initializable_iterator(ds)
    nxt = it.get_next()
    with af.Session() as sess:
        sess.run(it.initializer)
        while True:
            sess.run(nxt)


@pytest.mark.parametrize("make, op, words", [
    (lambda: Dataset.range(10).shard(3, 3), "ShardDataset", "Index must be between 0 and 2"),
    (lambda: Dataset.range(10).shard(0, 0), "ShardDataset", "Number of shards must be greater than zero"),
    (lambda: Dataset.range(10).window(0).flat_map(lambda w: w.batch(2)), "WindowDataset",
     "Window size must be greater than zero"),
    (lambda: Dataset.range(2).apply(E.assert_cardinality(3)), "AssertCardinalityDataset",
     "expected to contain 3 elements but contained only 2 elements"),
    (lambda: Dataset.from_tensor_slices(np.array([0, 3], np.int64)).apply(
        lambda sel: Dataset.choose_from_datasets([Dataset.range(2)], sel)), "DirectedInterleaveDataset",
     "Selector index out of range"),
])
def test_run_time_errors_name_the_dataset_op(make, op, words):
    with pytest.raises(af.errors.OpError) as e:
        _run_error(make())
    assert words in e.value.message
    assert f"dataset op '{op}" in e.value.message


def test_get_single_element_errors_name_the_op():
    t = Dataset.range(2).get_single_element()
    with af.Session() as sess, pytest.raises(af.errors.InvalidArgumentError, match="more than one element") as e:
        sess.run(t)
    assert "DatasetToSingleElement" in e.value.message


def test_window_nested_datasets_in_flat_map_and_structure():
    ds = Dataset.from_tensor_slices({"a": np.arange(5), "b": np.arange(5) * 1.5}).window(2, drop_remainder=True)
    out = ds.flat_map(lambda w: Dataset.zip((w["a"].batch(2), w["b"].batch(2))))
    assert out.output_types == (af.int64, af.float64)
    got = list(out.as_numpy_iterator())
    assert [a.tolist() for a, _ in got] == [[0, 1], [2, 3]]
    assert [b.tolist() for _, b in got] == [[0.0, 1.5], [3.0, 4.5]]


def test_scan_reduce_and_take_while_use_python_state_structures():
    ds = Dataset.range(6).scan({"n": np.int64(0), "total": np.float32(0)},
                               lambda s, x: ({"n": s["n"] + 1, "total": s["total"] + af.cast(x, af.float32)},
                                             s["total"]))
    assert [float(v) for v in ds.as_numpy_iterator()] == [0, 0, 1, 3, 6, 10]
    total = Dataset.range(6).take_while(lambda x: x < 3).reduce(np.int64(100), lambda a, x: a - x)
    with af.Session() as sess:
        assert sess.run(total) == 97


def test_random_rerandomizes_each_epoch_only_when_asked():
    fixed = [int(v) for v in Dataset.random(seed=9).take(3).repeat(2).as_numpy_iterator()]
    assert fixed[:3] == fixed[3:]
    fresh = [int(v) for v in Dataset.random(seed=9, rerandomize_each_iteration=True).take(3).repeat(2)
             .as_numpy_iterator()]
    assert fresh[:3] != fresh[3:]
    assert all(0 <= v < 2 ** 32 for v in fixed + fresh)


def test_tfrecord_writer_round_trip(tmp_path):
    path = str(tmp_path / "out.tfrecord")
    records = np.array([b"alpha", b"", b"gamma" * 100], dtype=object)
    write = E.TFRecordWriter(path, "GZIP").write(Dataset.from_tensor_slices(af.constant(records)))
    with af.Session() as sess:
        sess.run(write)
        sess.run(write)                      # each run writes the file afresh
    got = list(af.data.TFRecordDataset(path, compression_type="GZIP").as_numpy_iterator())
    assert got == list(records)
    with pytest.raises(TypeError, match="scalar string"):
        E.TFRecordWriter(path).write(Dataset.range(3))


def test_ignore_errors_keeps_going_past_failed_elements():
    ds = Dataset.from_tensor_slices(np.array([1.0, 0.0, 4.0], np.float32)).map(
        lambda x: af.debugging.check_numerics(2.0 / x, "bad"))
    with pytest.raises(af.errors.InvalidArgumentError):
        list(ds.as_numpy_iterator())
    assert [float(v) for v in ds.ignore_errors().as_numpy_iterator()] == [2.0, 0.5]


def test_group_by_reducer_shapes_and_order():
    # As TF's: a tuple state is passed to finalize_func as positional arguments.
    reducer = E.Reducer(lambda k: (k, np.int64(0)), lambda s, x: (s[0], s[1] + x), lambda k, total: (k, total))
    ds = Dataset.range(10).apply(E.group_by_reducer(lambda x: x % 3, reducer))
    assert ds.output_types == (af.int64, af.int64)
    assert [tuple(int(a) for a in v) for v in ds.as_numpy_iterator()] == [(0, 18), (1, 12), (2, 15)]


def test_get_next_as_optional_and_optional_match_tensorflow():
    assert _CASES.optional_sequence(af, af.nest.flatten) == _TF["optional"]


def test_csv_dataset_matches_tensorflow(tmp_path):
    """CsvDataset's fields, defaults, quoting, header, select_cols, compression and errors as TF's."""
    _CASES.write_csv_files(tmp_path)
    got = _CASES.run_csv_cases(af, str(tmp_path), af.nest.flatten)
    want = _TF["csv"]
    for name in want:
        assert got[name] == want[name], name


def test_csv_errors_name_the_file_and_dataset_op(tmp_path):
    (tmp_path / "bad.csv").write_text("1,x\n")
    ds = E.CsvDataset(str(tmp_path / "bad.csv"), [af.int32, af.int32])
    with pytest.raises(af.errors.InvalidArgumentError) as e:
        list(ds.as_numpy_iterator())
    assert "Field 1 in record 0 is not a valid int32: x" in e.value.message
    assert "bad.csv" in e.value.message and "dataset op 'CsvDataset" in e.value.message
    with pytest.raises(TypeError, match="record_defaults"):
        E.CsvDataset(str(tmp_path / "bad.csv"), [af.bool])


def test_tfrecord_example_pipelines_match_tensorflow():
    """make_batched_features_dataset, parse_example_dataset and TFRecordDataset made in an
    interleave function, over TFRecord files TF wrote (tests/fixtures/data_breadth_examples)."""
    got = _CASES.run_example_cases(af, str(HERE / _CASES.EXAMPLES_DIR), af.nest.flatten)
    want = _TF["examples"]
    for name in want:
        assert got[name] == want[name], name


def test_structure_and_variant_round_trip():
    ds = Dataset.from_tensor_slices((np.arange(3), np.ones((3, 2), np.float32)))
    spec = E.get_structure(ds)
    assert spec == ((af.int64, af.TensorShape([])), (af.float32, af.TensorShape([2])))
    again = E.from_variant(E.to_variant(ds), spec)
    assert [int(a) for a, _ in again.as_numpy_iterator()] == [0, 1, 2]
    it = af.data.make_one_shot_iterator(ds)
    assert E.get_structure(it) == spec


def test_sql_dataset_matches_tensorflow(tmp_path):
    got = _CASES.run_sql_cases(af, str(tmp_path), af.nest.flatten)
    assert got == _TF["sql"]


def test_iterator_get_next_as_optional_method():
    it = af.data.make_one_shot_iterator(Dataset.range(1))
    opt = it.get_next_as_optional()
    has, value = opt.has_value(), opt.get_value()
    with af.Session() as sess:
        assert sess.run(has)
        assert not sess.run(has)
        with pytest.raises(af.errors.InvalidArgumentError, match="does not have a value"):
            sess.run(value)


def test_reduce_state_structure_mismatch_fails_at_construction():
    # TF fails only when it runs (ReduceDataset's component count); here the trace already knows.
    with pytest.raises(TypeError, match="new state's structure differs"):
        Dataset.range(3).reduce((np.int64(0), np.int64(0)), lambda s, x: s[0] + x)


def test_ignore_errors_past_a_failed_cardinality_assertion_ends():
    ds = Dataset.range(2).apply(E.assert_cardinality(3)).ignore_errors()
    assert [int(v) for v in ds.as_numpy_iterator()] == [0, 1]


def test_readers_take_a_dataset_of_file_names(tmp_path):
    """TFRecordDataset(files_dataset) and TextLineDataset(files_dataset), as XLNet's input pipeline
    builds them: each file's records in turn (flat_map), or a record from each of num_parallel_reads
    files in turn (interleave)."""
    paths = []
    for k in range(2):
        with af.python_io.TFRecordWriter(str(tmp_path / f"{k}.tfrecord")) as w:
            for i in range(3):
                w.write(f"{k}-{i}".encode())
        paths.append(str(tmp_path / f"{k}.tfrecord"))
        (tmp_path / f"{k}.txt").write_text(f"a{k}\nb{k}\n")
    files = Dataset.from_tensor_slices(paths)
    seq = list(af.data.TFRecordDataset(files).as_numpy_iterator())
    assert seq == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
    mixed = list(af.data.TFRecordDataset(files, num_parallel_reads=2).as_numpy_iterator())
    assert mixed == [b"0-0", b"1-0", b"0-1", b"1-1", b"0-2", b"1-2"]
    texts = Dataset.from_tensor_slices([str(tmp_path / "0.txt"), str(tmp_path / "1.txt")])
    assert list(af.data.TextLineDataset(texts).as_numpy_iterator()) == [b"a0", b"b0", b"a1", b"b1"]
    with pytest.raises(TypeError, match="scalar `tf.string` elements"):
        af.data.TFRecordDataset(Dataset.range(3))
