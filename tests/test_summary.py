"""af.summary against TF 2.21's tf.compat.v1.summary (tests/fixtures/summary.json, made by
tests/fixtures/make_summary.py), read back with TensorBoard's own EventAccumulator."""
from __future__ import annotations

import glob
import io
import json
import os
import struct
import wave

import numpy as np
import pytest

import actorflow as af

pytest.importorskip("tensorboard")
from PIL import Image  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402

from tests.conftest import run

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "summary.json")))


@pytest.fixture(autouse=True)
def _fresh_graph():
    af.reset_default_graph()
    yield
    af.summary.FileWriterCache.clear()


def _accumulator(logdir):
    acc = ea.EventAccumulator(logdir, size_guidance={ea.TENSORS: 0, ea.IMAGES: 0, ea.AUDIO: 0, ea.SCALARS: 0,
                                                     ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


# -- the ops ------------------------------------------------------------------------------------------------

def test_scalar_fetches_serialized_summary_bytes():
    s = af.summary.scalar("loss", af.constant(2.5))
    assert s.dtype is af.string and s.shape.ndims == 0
    out = run(s)
    assert isinstance(out, bytes)
    parsed = af.Summary.FromString(out)
    assert [(v.tag, v.simple_value) for v in parsed.value] == [("loss", 2.5)]


def test_tags_and_op_names_follow_tf_scopes_and_families():
    ops = [af.summary.scalar("loss", 1.0), af.summary.scalar("loss", 2.0)]
    with af.name_scope("train"):
        ops.append(af.summary.scalar("acc", 0.5))
        ops.append(af.summary.scalar("acc", 0.5, family="fam"))
    ops.append(af.summary.scalar("lr", 0.1, family="opt"))
    ops.append(af.summary.scalar("bad name!", 0.1))
    ops.append(af.summary.scalar("/lead", 0.1))
    ops.append(af.summary.histogram("loss", [1.0]))
    assert [t.op.name for t in ops] == FIX["op_names"]
    got = [[v.tag for v in af.Summary.FromString(b).value] for b in run(ops)]
    assert got == FIX["tags"]


def test_collections_and_merge_all():
    a = af.summary.scalar("a", 1.0)
    b = af.summary.scalar("b", 2.0, collections=["mine"])
    assert af.get_collection(af.GraphKeys.SUMMARIES) == [a]
    assert af.get_collection("mine") == [b]
    assert af.summary.merge_all("nothing_here") is None
    merged = af.summary.merge_all()
    assert merged.op.type == "MergeSummary" and merged.op.name == "Merge/MergeSummary"
    assert af.summary.merge([a], name="m").op.name == "m/m"
    both = af.summary.merge([a, b])
    assert af.get_collection(af.GraphKeys.SUMMARIES) == [a]        # merge adds to no collection by default
    m1, m2 = run([merged, both])
    assert [v.tag for v in af.Summary.FromString(m1).value] == ["a"]
    assert [(v.tag, v.simple_value) for v in af.Summary.FromString(m2).value] == [("a", 1.0), ("b", 2.0)]


def test_merge_all_matches_tf_tag_order():
    af.summary.histogram("h", af.constant(FIX["hist_values"], af.float64))
    af.summary.histogram("empty", af.zeros([0]))
    af.summary.image("ip", af.constant(np.array(FIX["img_pos"], np.float32)), max_outputs=5)
    af.summary.image("ineg", af.constant(np.array(FIX["img_neg"], np.float32)), max_outputs=1)
    af.summary.image("inan", af.constant(np.zeros((1, 2, 2, 4), np.float32)))
    af.summary.image("iu8", af.constant(np.array(FIX["img_u8"], np.uint8)))
    af.summary.audio("au", af.constant(np.array(FIX["audio"], np.float32)), 8000, max_outputs=1)
    af.summary.scalar("loss", 1.0)
    af.summary.scalar("loss", 2.0)
    with af.name_scope("train"):
        af.summary.scalar("acc", 0.5)
        af.summary.scalar("acc", 0.5, family="fam")
    af.summary.scalar("lr", 0.1, family="opt")
    af.summary.scalar("bad name!", 0.1)
    af.summary.scalar("/lead", 0.1)
    af.summary.histogram("loss", [1.0])
    af.summary.text("txt", af.constant([["a", "b"], ["c", "d"]]))
    af.summary.scalar("other", 3.0, collections=["mine"])
    merged = run(af.summary.merge_all())
    assert [v.tag for v in af.Summary.FromString(merged).value] == FIX["merged_tags"]


def test_merge_rejects_duplicate_tags():
    a = af.summary.scalar("x", 1.0)
    b = af.summary.scalar("y", 1.0)
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError, match="Duplicate tag x found in summary inputs"):
            sess.run(af.summary.merge([a, a]))
        assert len(af.Summary.FromString(sess.run(af.summary.merge([a, b]))).value) == 2


def test_histogram_buckets_match_tf():
    h = af.summary.histogram("h", af.constant(FIX["hist_values"], af.float64))
    e = af.summary.histogram("empty", af.zeros([0]))
    for out, want in zip(run([h, e]), [FIX["hist"], FIX["hist_empty"]]):
        hp = af.Summary.FromString(out).value[0].histo
        assert list(hp.bucket_limit) == want["bucket_limit"]        # exact doubles, as TF computes them
        assert list(hp.bucket) == want["bucket"]
        for k in ("min", "max", "num", "sum", "sum_squares"):
            assert getattr(hp, k) == pytest.approx(want[k], rel=1e-12), k


def test_histogram_of_nan_fails_the_step_naming_the_tag():
    x = af.placeholder(af.float32, [None])
    h = af.summary.histogram("weights", x)
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError, match="Nan in summary histogram for: weights"):
            sess.run(h, {x: np.array([1.0, np.nan], np.float32)})
        assert sess.run(h, {x: np.array([1.0], np.float32)})       # the session still works


def _decode_images(out):
    vals = []
    for v in af.Summary.FromString(out).value:
        img = np.asarray(Image.open(io.BytesIO(v.image.encoded_image_string)))
        if img.ndim == 2:
            img = img[..., None]
        vals.append({"tag": v.tag, "height": v.image.height, "width": v.image.width,
                     "colorspace": v.image.colorspace, "pixels": img.tolist()})
    return vals


def test_images_match_tf_pixels_and_tags():
    mask = np.array(FIX["img_nan_mask"])
    nan_img = np.array([[[[np.inf if v is None else v for v in px] for px in row] for row in im]
                        for im in FIX["img_nan"]], np.float32)
    nan_img[mask] = np.nan
    ops = {"ip": af.summary.image("ip", af.constant(np.array(FIX["img_pos"], np.float32)), max_outputs=5),
           "ineg": af.summary.image("ineg", af.constant(np.array(FIX["img_neg"], np.float32)), max_outputs=1),
           "inan": af.summary.image("inan", af.constant(nan_img)),
           "iu8": af.summary.image("iu8", af.constant(np.array(FIX["img_u8"], np.uint8)))}
    out = run(ops)
    for key in ops:
        assert _decode_images(out[key]) == FIX["image_" + key], key


def test_image_shape_errors():
    with pytest.raises(ValueError, match="4-D with last dim 1, 3, or 4"):
        af.summary.image("bad", af.zeros([2, 3, 3, 2]))
    with pytest.raises(ValueError, match="4-D"):
        af.summary.image("bad", af.zeros([3, 3]))
    x = af.placeholder(af.float32)
    s = af.summary.image("late", x)
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError, match="4-D with last dim"):
            sess.run(s, {x: np.zeros((1, 2, 2, 5), np.float32)})


def test_audio_matches_tf_wav():
    a = af.summary.audio("au", af.constant(np.array(FIX["audio"], np.float32)), 8000, max_outputs=1)
    got = []
    for v in af.Summary.FromString(run(a)).value:
        with wave.open(io.BytesIO(v.audio.encoded_audio_string)) as w:
            frames = np.frombuffer(w.readframes(w.getnframes()), "<i2")
            got.append({"tag": v.tag, "sample_rate": v.audio.sample_rate, "num_channels": v.audio.num_channels,
                        "length_frames": v.audio.length_frames, "content_type": v.audio.content_type,
                        "wav_rate": w.getframerate(), "wav_channels": w.getnchannels(), "samples": frames.tolist()})
    assert got == FIX["audio_values"]


def test_audio_stereo_tags_and_channels():
    x = np.zeros((3, 10, 2), np.float32)
    out = run(af.summary.audio("st", x, 16000.0, max_outputs=2))
    vals = af.Summary.FromString(out).value
    assert [v.tag for v in vals] == ["st/audio/0", "st/audio/1"]
    assert all(v.audio.num_channels == 2 and v.audio.length_frames == 10 for v in vals)


def test_text_and_tensor_summary():
    t = af.summary.text("txt", af.constant([["a", "b"], ["c", "d"]]))
    v = af.Summary.FromString(run(t)).value[0]
    assert {"tag": v.tag, "plugin": v.metadata.plugin_data.plugin_name,
            "strings": [s.decode() for s in v.tensor.string_val],
            "shape": [d.size for d in v.tensor.tensor_shape.dim]} == FIX["text"]
    with pytest.raises(ValueError, match="dtype string"):
        af.summary.text("bad", af.constant(1.0))
    ts = af.summary.tensor_summary("tens", af.constant([[1.0, 2.0]]), summary_description="desc")
    v = af.Summary.FromString(run(ts)).value[0]
    assert v.tag == "tens" and v.metadata.summary_description == "desc"
    from tensorboard.util import tensor_util
    np.testing.assert_array_equal(tensor_util.make_ndarray(v.tensor), [[1.0, 2.0]])


def test_scalar_rejects_non_scalar_and_non_numeric():
    with pytest.raises(ValueError, match="real numeric"):
        af.summary.scalar("flag", af.constant(True))
    with pytest.raises(ValueError, match="real numeric"):
        af.summary.histogram("flags", af.constant([True, False]))
    with pytest.raises(ValueError, match="not the same shape"):
        af.summary.scalar("v", af.zeros([3]))
    x = af.placeholder(af.float32)
    s = af.summary.scalar("v", x)
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError, match="not the same shape"):
            sess.run(s, {x: np.zeros(3, np.float32)})


# -- FileWriter ---------------------------------------------------------------------------------------------

def _event_files(d):
    return sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))


def test_filewriter_writes_scalars_histograms_images_text_graph(tmp_path):
    x = af.placeholder(af.float32, [None], name="x")
    af.Variable(af.ones([2, 2]), name="w")
    m = af.reduce_mean(x)         # outside the scope: its op "stats/Mean" would make the tag "stats/mean_1", as in TF
    with af.name_scope("stats"):
        af.summary.scalar("mean", m)
        af.summary.histogram("x", x)
    af.summary.image("img", af.reshape(x, [1, 2, 2, 1]))
    af.summary.text("note", af.constant("step **done**"))
    merged = af.summary.merge_all()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        with af.summary.FileWriter(str(tmp_path), sess.graph, filename_suffix=".test") as fw:
            for step in range(4):
                fw.add_summary(sess.run(merged, {x: np.array([1, 2, 3, 4], np.float32) * step}), step)
            fw.add_summary(af.Summary(value=[af.Summary.Value(tag="hand", simple_value=7.5)]), global_step=9)
            assert fw.get_logdir() == str(tmp_path)
    files = _event_files(str(tmp_path))
    assert len(files) == 1 and files[0].endswith(".test")
    acc = _accumulator(str(tmp_path))
    tags = acc.Tags()
    assert set(tags["scalars"]) == {"stats/mean", "hand"}
    assert [(e.step, e.value) for e in acc.Scalars("stats/mean")] == [(s, 2.5 * s) for s in range(4)]
    assert [(e.step, e.value) for e in acc.Scalars("hand")] == [(9, 7.5)]
    hist = acc.Histograms("stats/x")[-1].histogram_value
    assert (hist.min, hist.max, hist.num, hist.sum) == (3.0, 12.0, 4.0, 30.0)
    img = acc.Images("img/image/0")[-1]
    assert (img.width, img.height) == (2, 2)
    pixels = np.asarray(Image.open(io.BytesIO(img.encoded_image_string)))
    np.testing.assert_array_equal(pixels, [[63, 127], [191, 255]])
    assert acc.Tensors("note")[0].tensor_proto.string_val == [b"step **done**"]
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"
    graph = acc.Graph()
    nodes = {n.name: n for n in graph.node}
    assert {"x", "w", "stats/mean", "stats/x", "Merge/MergeSummary"} <= set(nodes)
    assert nodes["x"].op == "Placeholder"
    assert nodes["stats/mean"].op == "ScalarSummary"
    assert nodes["Merge/MergeSummary"].op == "MergeSummary"
    assert nodes["stats/x"].attr["tag"].s == b"stats/x"


def test_graph_def_inputs_control_inputs_devices_and_attrs():
    with af.device("/cpu:0"):
        a = af.constant([1.0, 2.0], name="a")
    b = af.split(af.constant([1.0, 2.0, 3.0, 4.0]), 2, name="sp")
    with af.control_dependencies([a.op]):
        c = af.add(b[1], a, name="c")
    gd = af.summary.as_graph_def()
    nodes = {n.name: n for n in gd.node}
    assert list(nodes["c"].input) == ["sp:1", "a"]
    assert nodes["a"].device == a.op.device
    assert nodes["a"].attr["value"].tensor.tensor_content or nodes["a"].attr["value"].tensor.float_val
    shapes = nodes["c"].attr["_output_shapes"].list.shape
    assert [d.size for d in shapes[0].dim] == [2]
    d = af.no_op(name="d")
    with af.control_dependencies([c.op, d]):
        e = af.identity(c, name="e")
    nodes = {n.name: n for n in af.summary.as_graph_def().node}
    assert list(nodes["e"].input) == ["c", "^d"]       # a control input already an input is not repeated
    assert e.op.name == "e"


def test_add_graph_event_session_log_and_run_metadata(tmp_path):
    af.constant(1.0, name="one")
    fw = af.summary.FileWriter(str(tmp_path))
    fw.add_graph(af.get_default_graph(), global_step=3)
    with pytest.raises(TypeError, match="must be an instance of `Graph`"):
        fw.add_graph("not a graph")
    with pytest.raises(ValueError, match="not both"):
        fw.add_graph(af.get_default_graph(), graph_def=af.summary.as_graph_def())
    fw.add_session_log(af.SessionLog(status=af.SessionLog.START), 1)
    fw.add_run_metadata(af.RunMetadata(), "step_1", global_step=1)
    with pytest.raises(ValueError, match="already used"):
        fw.add_run_metadata(af.RunMetadata(), "step_1")
    fw.add_event(af.Event(step=5, summary=af.Summary(value=[af.Summary.Value(tag="ev", simple_value=1.0)])))
    with pytest.raises(TypeError):
        fw.add_summary(12)
    with pytest.raises(af.errors.InvalidArgumentError, match="not a serialized Summary"):
        fw.add_summary(b"\xff\xff\xff")
    fw.flush()
    acc = _accumulator(str(tmp_path))
    assert [n.name for n in acc.Graph().node] == ["one"]
    assert acc.Tags()["run_metadata"] == ["step_1"]
    assert [(e.step, e.value) for e in acc.Scalars("ev")] == [(5, 1.0)]
    fw.close()
    fw.add_summary(af.Summary(value=[af.Summary.Value(tag="late", simple_value=1.0)]))   # dropped, as in TF
    fw.reopen()
    fw.add_summary(af.Summary(value=[af.Summary.Value(tag="again", simple_value=2.0)]), 1)
    fw.close()
    assert len(_event_files(str(tmp_path))) == 2
    acc = _accumulator(str(tmp_path))
    assert "late" not in acc.Tags()["scalars"] and "again" in acc.Tags()["scalars"]


def test_event_file_is_tfrecord_with_masked_crc32c(tmp_path):
    with af.summary.FileWriter(str(tmp_path)) as fw:
        fw.add_summary(af.Summary(value=[af.Summary.Value(tag="t", simple_value=1.0)]), 1)
    data = open(_event_files(str(tmp_path))[0], "rb").read()
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    events, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack("<Q", data[pos:pos + 8])
        assert struct.unpack("<I", data[pos + 8:pos + 12])[0] == masked_crc32c(data[pos:pos + 8])
        body = data[pos + 12:pos + 12 + n]
        assert struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])[0] == masked_crc32c(body)
        events.append(af.Event.FromString(body))
        pos += 16 + n
    assert events[0].file_version == "brain.Event:2"
    assert events[1].summary.value[0].tag == "t" and events[1].step == 1


def test_plugin_metadata_written_once_per_tag(tmp_path):
    t = af.summary.text("txt", af.constant("hi"))
    with af.Session() as sess, af.summary.FileWriter(str(tmp_path)) as fw:
        for step in range(3):
            fw.add_summary(sess.run(t), step)
    data = open(_event_files(str(tmp_path))[0], "rb").read()
    assert data.count(b"text") == 1


def test_filewriter_cache_shares_one_writer(tmp_path):
    a = af.summary.FileWriterCache.get(str(tmp_path))
    assert af.summary.FileWriterCache.get(str(tmp_path)) is a
    af.summary.FileWriterCache.clear()
    b = af.summary.FileWriterCache.get(str(tmp_path))
    assert b is not a


def test_proto_aliases():
    assert af.Summary is af.summary.Summary
    assert af.Event is af.summary.Event and af.SessionLog is af.summary.SessionLog
    s = af.Summary(value=[af.Summary.Value(tag="x", simple_value=1.0)])
    assert af.Summary.FromString(s.SerializeToString()).value[0].simple_value == 1.0


def test_writer_errors_name_the_directory(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(af.errors.FailedPreconditionError, match="a_file"):
        af.summary.FileWriter(str(blocker / "logs"))
    with pytest.raises(NotImplementedError):
        af.summary.FileWriter(str(tmp_path), session=object())


def test_missing_tensorboard_names_the_extra():
    from actorflow import protos
    with pytest.raises(ImportError, match=r"actorflow\[summary\]"):
        protos.require("tensorboard.no_such_module")


def test_train_aliases():
    assert af.train.SummaryWriterCache is af.summary.FileWriterCache
    timer = af.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(0)
    timer.update_last_triggered_step(0)
    assert not timer.should_trigger_for_step(0) and not timer.should_trigger_for_step(2)
    assert timer.should_trigger_for_step(3)
