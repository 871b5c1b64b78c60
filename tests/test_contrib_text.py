"""tf.contrib.learn's VocabularyProcessor (ids, trimming, padding, save/restore, refusing foreign
pickles) and tf.contrib.tensorboard's projector config."""
import os
import pickle

import numpy as np
import pytest

import actorflow as af

VocabularyProcessor = af.contrib.learn.preprocessing.VocabularyProcessor


def test_ids_follow_first_sight_and_pad_to_the_document_length():
    docs = ["a cat sat", "the cat ran away fast", "dog"]
    vp = VocabularyProcessor(4)
    x = np.array(list(vp.fit_transform(docs)))
    assert x.dtype == np.int64 and x.shape == (3, 4)
    np.testing.assert_array_equal(x, [[1, 2, 3, 0], [4, 2, 5, 6], [8, 0, 0, 0]])
    assert len(vp.vocabulary_) == 9
    np.testing.assert_array_equal(list(vp.transform(["cat unknownword"])), [[2, 0, 0, 0]])
    assert list(vp.reverse([[4, 2, 5, 0]])) == ["the cat ran <UNK>"]


def test_tokenizer_splits_like_tf():
    tok = af.contrib.learn.preprocessing.tokenizer
    assert list(tok(["HTMLParser isn't well-formed, CamelCase ok"])) == [
        ["HTML", "Parser", "isn't", "well-formed", "Camel", "Case", "ok"]]


def test_min_frequency_keeps_frequent_tokens_by_count_then_alphabet():
    docs = ["b b b a a c", "c d", "a b"]
    vp = VocabularyProcessor(3, min_frequency=1)
    vp.fit(docs)
    voc = vp.vocabulary_
    # counts: b 4, a 3, c 2, d 1 -> d dropped (count <= 1)
    assert [voc.reverse(i) for i in range(len(voc))] == ["<UNK>", "b", "a", "c"]
    np.testing.assert_array_equal(list(vp.transform(["d c a"])), [[0, 3, 2]])


def test_save_restore_round_trip_and_tf_class_paths(tmp_path):
    vp = VocabularyProcessor(5).fit(["x y z", "y z w"])
    path = str(tmp_path / "vocab")
    vp.save(path)
    back = VocabularyProcessor.restore(path)
    np.testing.assert_array_equal(list(back.transform(["w x q"])), list(vp.transform(["w x q"])))
    # A file TF 1.x wrote names TF's classes: pickle one through stand-ins at TF's module paths.
    restored = VocabularyProcessor.restore(_tf_style_pickle(vp, tmp_path / "tf_vocab"))
    assert type(restored) is VocabularyProcessor
    assert type(restored.vocabulary_) is af.contrib.learn.preprocessing.CategoricalVocabulary
    np.testing.assert_array_equal(list(restored.transform(["w x q"])), list(vp.transform(["w x q"])))


def _tf_style_pickle(vp, path):
    """`vp` pickled as TensorFlow 1.x pickles its VocabularyProcessor (its module paths)."""
    import sys
    import types
    root = "tensorflow.contrib.learn.python.learn.preprocessing"
    text, cat = types.ModuleType(root + ".text"), types.ModuleType(root + ".categorical_vocabulary")
    made = {}
    for mod, name in ((text, "VocabularyProcessor"), (cat, "CategoricalVocabulary")):
        cls = type(name, (), {"__module__": mod.__name__})
        setattr(mod, name, cls)
        made[name] = cls

    def tokenizer(it):
        return it
    tokenizer.__module__, tokenizer.__qualname__ = text.__name__, "tokenizer"
    text.tokenizer = tokenizer
    parts = root.split(".")
    mods = [types.ModuleType(".".join(parts[:i])) for i in range(1, len(parts) + 1)] + [text, cat]
    saved = {m.__name__: sys.modules.get(m.__name__) for m in mods}
    sys.modules.update({m.__name__: m for m in mods})
    try:
        voc = made["CategoricalVocabulary"].__new__(made["CategoricalVocabulary"])
        voc.__dict__.update(vp.vocabulary_.__dict__)
        proc = made["VocabularyProcessor"].__new__(made["VocabularyProcessor"])
        proc.__dict__.update(vp.__dict__, vocabulary_=voc, _tokenizer=tokenizer)
        path.write_bytes(pickle.dumps(proc, protocol=2))
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return str(path)


def test_restore_refuses_code_in_a_pickle(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    path = tmp_path / "evil"
    path.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load posix.system|refusing to load os.system"):
        VocabularyProcessor.restore(str(path))
    path.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(TypeError, match="not a VocabularyProcessor"):
        VocabularyProcessor.restore(str(path))


def test_projector_config_is_written_for_tensorboard(tmp_path):
    from google.protobuf import text_format
    projector = af.contrib.tensorboard.plugins.projector
    config = projector.ProjectorConfig()
    emb = config.embeddings.add()
    emb.tensor_name = "embedding:0"
    emb.metadata_path = "metadata.tsv"
    writer = af.summary.FileWriter(str(tmp_path))
    projector.visualize_embeddings(writer, config)
    writer.close()
    back = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(), projector.ProjectorConfig())
    assert back.embeddings[0].tensor_name == "embedding:0"
    assert back.embeddings[0].metadata_path == "metadata.tsv"
    with pytest.raises(TypeError, match="ProjectorConfig"):
        projector.visualize_embeddings(writer, {"embeddings": []})


def test_predictor_from_saved_model(tmp_path):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2], name="x")
        w = af.Variable(np.array([[1.0], [-1.0]], np.float32), name="w")
        y = af.matmul(x, w, name="y")
        with af.Session() as sess:
            sess.run(w.initializer)
            af.saved_model.simple_save(sess, str(tmp_path / "m"), inputs={"x": x}, outputs={"y": y})
    predict = af.contrib.predictor.from_saved_model(str(tmp_path / "m"))
    out = predict({"x": np.array([[3.0, 1.0]], np.float32)})
    np.testing.assert_allclose(out["y"], [[2.0]])
    with pytest.raises(ValueError, match="unknown input keys"):
        predict({"z": np.zeros((1, 2))})
    by_name = af.contrib.predictor.from_saved_model(str(tmp_path / "m"), input_names={"in": "x:0"},
                                                    output_names={"out": "y:0"})
    np.testing.assert_allclose(by_name({"in": np.array([[1.0, 1.0]], np.float32)})["out"], [[0.0]])
    with pytest.raises(ValueError, match="no signature 'nope'"):
        af.contrib.predictor.from_saved_model(str(tmp_path / "m"), signature_def_key="nope")
