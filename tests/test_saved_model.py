"""SavedModel, graph_util and meta graph export/import through the public API."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import actorflow as af

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mlp(g, seed=0):
    rng = np.random.default_rng(seed)
    with g.as_default():
        x = af.placeholder(af.float32, [None, 4], name="x")
        w1 = af.Variable(rng.standard_normal((4, 8)).astype(np.float32), name="w1")
        b1 = af.Variable(rng.standard_normal(8).astype(np.float32), name="b1")
        w2 = af.Variable(rng.standard_normal((8, 3)).astype(np.float32), name="w2")
        h = af.nn.relu(af.matmul(x, w1) + b1)
        logits = af.matmul(h, w2, name="logits")
        probs = af.nn.softmax(logits, name="probs")
    return x, logits, probs, [w1, b1, w2]


def _trained_session(g):
    x, logits, probs, vs = _mlp(g)
    with g.as_default():
        # Change the variables after initialization, so a round trip that re-ran initializers would fail.
        bump = af.group(*[v.assign(v * 1.5 + 0.25) for v in vs])
        init = af.variables_initializer(vs)
    sess = af.Session(graph=g)
    sess.run(init)
    sess.run(bump)
    return sess, x, logits, probs


FEED = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)


def test_simple_save_round_trip_in_fresh_process(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    want = sess.run(probs, {x: FEED})
    export = tmp_path / "model" / "1"
    af.saved_model.simple_save(sess, str(export), inputs={"x": x}, outputs={"probs": probs})
    assert sorted(os.listdir(export)) == ["saved_model.afm", "variables"]
    script = f"""
import json, numpy as np, actorflow as af
g = af.Graph()
with af.Session(graph=g) as s:
    mg = af.saved_model.loader.load(s, [af.saved_model.tag_constants.SERVING], {str(export)!r})
    sig = mg.signature_def[af.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
    assert sig.method_name == af.saved_model.signature_constants.PREDICT_METHOD_NAME
    x = np.array({FEED.tolist()!r}, dtype=np.float32)
    out = s.run(sig.outputs["probs"].name, {{sig.inputs["x"].name: x}})
    print(json.dumps({{"out": out.tolist(), "vars": sorted(v.op.name for v in af.global_variables())}}))
"""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.array(got["out"], np.float32), want)
    assert got["vars"] == ["b1", "w1", "w2"]
    sess.close()


def test_builder_tags_signatures_and_af_saved_model_load(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    with g.as_default():
        classes = af.argmax(probs, axis=1, name="classes")
    b = af.saved_model.builder.SavedModelBuilder(str(tmp_path / "e"))
    sig_map = {
        "serving_default": af.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"logits": logits}),
        "classify": af.saved_model.signature_def_utils.classification_signature_def(x, classes, probs),
        "custom": af.saved_model.signature_def_utils.build_signature_def(
            {"in": af.saved_model.utils.build_tensor_info(x)}, {"out": af.saved_model.utils.build_tensor_info(probs)},
            af.saved_model.signature_constants.PREDICT_METHOD_NAME),
    }
    assert af.saved_model.signature_def_utils.is_valid_signature(sig_map["classify"])
    b.add_meta_graph_and_variables(sess, [af.saved_model.tag_constants.SERVING], signature_def_map=sig_map)
    with g.as_default():
        b.add_meta_graph([af.saved_model.tag_constants.TRAINING])
    with pytest.raises(AssertionError):
        b.add_meta_graph([af.saved_model.tag_constants.TRAINING])
    b.save()
    want = sess.run(logits, {x: FEED})
    g2 = af.Graph()
    with af.Session(graph=g2) as s2:
        mg = af.saved_model.load(s2, ["serve"], str(tmp_path / "e"))
        assert sorted(mg.signature_def) == ["classify", "custom", "serving_default"]
        assert mg.signature_def["classify"].outputs["classes"].dtype == "int64"
        assert mg.signature_def["serving_default"].inputs["x"].tensor_shape == [None, 4]
        t_in = af.saved_model.utils.get_tensor_from_tensor_info(mg.signature_def["serving_default"].inputs["x"], g2)
        np.testing.assert_array_equal(s2.run("logits:0", {t_in: FEED}), want)
    with af.Session(graph=af.Graph()) as s3, pytest.raises(RuntimeError, match=r"Available tags: \[\['serve'\], \['train'\]\]"):
        af.saved_model.loader.load(s3, ["gpu"], str(tmp_path / "e"))
    sess.close()


def test_refuses_existing_export_dir_and_bad_signatures(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    with pytest.raises(AssertionError, match="already exists"):
        af.saved_model.simple_save(sess, str(tmp_path / "taken"), {"x": x}, {"y": probs})
    af.saved_model.simple_save(sess, str(tmp_path / "ok"), {"x": x}, {"y": probs})
    with pytest.raises(AssertionError, match="already exists"):
        af.saved_model.simple_save(sess, str(tmp_path / "ok"), {"x": x}, {"y": probs})
    other = af.Graph()
    with other.as_default():
        stray = af.placeholder(af.float32, [None], name="stray_input")
    sig = af.saved_model.predict_signature_def({"x": stray}, {"y": probs})
    b = af.saved_model.builder.SavedModelBuilder(str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="stray_input:0"):
        b.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"s": sig})
    with pytest.raises(ValueError, match="non-empty"):
        af.saved_model.predict_signature_def({}, {"y": probs})
    sess.close()


def test_load_errors_name_the_file(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    export = tmp_path / "m"
    af.saved_model.simple_save(sess, str(export), {"x": x}, {"y": probs})
    sess.close()
    with af.Session(graph=af.Graph()) as s, pytest.raises(OSError, match="does not exist"):
        af.saved_model.loader.load(s, ["serve"], str(tmp_path / "missing"))
    f = export / "saved_model.afm"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with af.Session(graph=af.Graph()) as s, pytest.raises(af.errors.DataLossError, match="saved_model.afm"):
        af.saved_model.loader.load(s, ["serve"], str(export))
    f.write_bytes(b"not a saved model at all")
    with af.Session(graph=af.Graph()) as s, pytest.raises(af.errors.DataLossError, match="saved_model.afm"):
        af.saved_model.loader.load(s, ["serve"], str(export))


def test_corrupt_variables_are_data_loss(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    export = tmp_path / "m"
    af.saved_model.simple_save(sess, str(export), {"x": x}, {"y": probs})
    sess.close()
    data_files = [n for n in os.listdir(export / "variables") if ".data-" in n]
    assert data_files
    p = export / "variables" / data_files[0]
    raw = bytearray(p.read_bytes())
    raw[-3] ^= 0x55
    p.write_bytes(bytes(raw))
    with af.Session(graph=af.Graph()) as s, pytest.raises(af.errors.DataLossError):
        af.saved_model.loader.load(s, ["serve"], str(export))


def test_while_loop_graph_round_trips(tmp_path):
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [], name="n")
        acc = af.Variable(2.0, name="acc")
        out = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * acc), [af.constant(0), af.constant(1.0)])[1]
        out = af.identity(out, name="out")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            af.saved_model.simple_save(s, str(tmp_path / "w"), {"n": n}, {"out": out})
    with af.Session(graph=af.Graph()) as s:
        mg = af.saved_model.loader.load(s, ["serve"], str(tmp_path / "w"))
        assert s.run(mg.signature_def["serving_default"].outputs["out"].name, {"n:0": 5}) == 32.0


def test_convert_variables_to_constants_and_extract_sub_graph():
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    want = sess.run(probs, {x: FEED})
    frozen = af.graph_util.convert_variables_to_constants(sess, g, ["probs"])
    types = [op.type for op in frozen.get_operations()]
    assert "VariableV2" not in types and "Assign" not in types
    assert types.count("Const") >= 3
    with af.Session(graph=frozen) as s:
        np.testing.assert_allclose(s.run("probs:0", {"x:0": FEED}), want, rtol=1e-6)
    # The bytes form works the same, and a kept variable stays a variable.
    part = af.graph_util.convert_variables_to_constants(sess, g.to_msgpack(), ["probs"],
                                                        variable_names_blacklist=["w2"])
    assert [op.name for op in part.get_operations() if op.type == "VariableV2"] == ["w2"]
    sub = af.graph_util.extract_sub_graph(g, ["logits"])
    names = {op.name for op in sub.get_operations()}
    assert "logits" in names and "probs" not in names and "x" in names
    with pytest.raises(KeyError, match="nope"):
        af.graph_util.extract_sub_graph(g, ["nope"])
    with g.as_default():
        upd = af.assign_add(g.get_tensor_by_name("w2:0"), np.ones((8, 3), np.float32), name="upd")
    with pytest.raises(ValueError, match="upd"):
        af.graph_util.convert_variables_to_constants(sess, g, [upd.op.name])
    sess.close()


def test_export_and_import_meta_graph_with_checkpoint(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    want = sess.run(probs, {x: FEED})
    with g.as_default():
        saver = af.train.Saver()
        prefix = saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=3)
        mg = af.train.export_meta_graph(str(tmp_path / "model.meta"))
    assert {r["variable"] for r in mg.variables} == {"w1:0", "b1:0", "w2:0"}
    sess.close()
    g2 = af.Graph()
    with g2.as_default():
        restorer = af.train.import_meta_graph(str(tmp_path / "model.meta"))
        assert sorted(v.op.name for v in af.global_variables()) == ["b1", "w1", "w2"]
        assert len(af.trainable_variables()) == 3
        with af.Session() as s:
            restorer.restore(s, prefix)
            np.testing.assert_array_equal(s.run("probs:0", {"x:0": FEED}), want)
    # Under an import scope the names are prefixed; the checkpoint keys stay the original ones.
    g3 = af.Graph()
    with g3.as_default():
        restorer = af.train.import_meta_graph(str(tmp_path / "model.meta"), import_scope="imported")
        with af.Session() as s:
            restorer.restore(s, prefix)
            np.testing.assert_array_equal(s.run("imported/probs:0", {"imported/x:0": FEED}), want)
    with g2.as_default(), pytest.raises(ValueError, match="already exists"):
        af.train.import_meta_graph(str(tmp_path / "model.meta"))
    (tmp_path / "bad.meta").write_bytes(b"\x00garbage")
    with af.Graph().as_default(), pytest.raises(af.errors.DataLossError, match="bad.meta"):
        af.train.import_meta_graph(str(tmp_path / "bad.meta"))
    with af.Graph().as_default(), pytest.raises(af.errors.NotFoundError, match="absent.meta"):
        af.train.import_meta_graph(str(tmp_path / "absent.meta"))


def test_import_meta_graph_reads_saver_meta_file(tmp_path):
    g = af.Graph()
    sess, x, logits, probs = _trained_session(g)
    want = sess.run(probs, {x: FEED})
    with g.as_default():
        prefix = af.train.Saver().save(sess, str(tmp_path / "m"), write_meta_graph=True)
    sess.close()
    with af.Graph().as_default():
        restorer = af.train.import_meta_graph(prefix + ".meta")
        with af.Session() as s:
            restorer.restore(s, prefix)
            np.testing.assert_array_equal(s.run("probs:0", {"x:0": FEED}), want)
