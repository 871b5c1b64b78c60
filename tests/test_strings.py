"""String tensors (af.string) and the string ops, against TF 2.21 (fixtures/strings.json, made by
make_strings.py): constants, placeholders and feeds, fetches as bytes, as_string, strings.join,
strings.length, strings.format, Print and print; strings over the wire and in graph files."""
import json
import logging
import pathlib
import sys

import numpy as np
import pytest

import actorflow as af
from actorflow.transport import codec

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "strings.json").read_text())


def _const(name):
    v, dt = FIX["values"][name]
    return af.constant(v, dtype=dt)


def test_hello_tensorflow():
    g = af.Graph()
    with g.as_default():
        hello = af.constant("Hello, TensorFlow!")
        assert hello.dtype is af.string and hello.shape == af.TensorShape([])
        with af.Session() as sess:
            out = sess.run(hello)
    assert out == b"Hello, TensorFlow!" and type(out) is bytes


def test_string_placeholders_feeds_and_fetches():
    g = af.Graph()
    with g.as_default():
        p = af.placeholder(af.string, [None], name="words")
        ident = af.identity(p)
        joined = af.strings.join([p, "!"], separator="")
        with af.Session() as sess:
            out = sess.run(ident, {p: ["héllo", b"x", np.str_("y")]})
            assert out.dtype == object and out.tolist() == ["héllo".encode(), b"x", b"y"]
            assert sess.run(joined, {p: np.array(["a", "b"])}).tolist() == [b"a!", b"b!"]
            with pytest.raises(ValueError, match="words"):
                sess.run(ident, {p: [1, 2]})
            with pytest.raises(ValueError, match="words"):
                sess.run(ident, {p: [["a"]]})
    assert af.as_dtype("string") is af.string and af.as_dtype(np.object_) is af.string
    assert af.as_dtype(str) is af.string


@pytest.mark.parametrize("case", FIX["format"], ids=[f"{c['value']}-{c['summarize']}" for c in FIX["format"]])
def test_strings_format_matches_tf(case):
    g = af.Graph()
    with g.as_default():
        out = af.strings.format("x={}!", _const(case["value"]), summarize=case["summarize"])
        assert out.dtype is af.string and out.shape == af.TensorShape([])
        with af.Session() as sess:
            assert sess.run(out).decode() == case["out"]


def test_as_string_join_and_length_match_tf():
    g = af.Graph()
    with g.as_default():
        outs = [af.as_string(af.constant(c["value"], dtype=c["dtype"]), **c["kwargs"]) for c in FIX["as_string"]]
        join = af.strings.join([af.constant(["a", "b"]), "x", af.constant(["c", "d"])], separator="-")
        words = af.constant(["héllo", ""])
        length = af.strings.length(words)
        chars = af.strings.length(words, unit="UTF8_CHAR")
        assert join.shape.as_list() == [2] and length.dtype is af.int32
        with af.Session() as sess:
            got, j, n, nc = sess.run([outs, join, length, chars])
    for c, o in zip(FIX["as_string"], got):
        assert [b.decode() for b in o.tolist()] == c["out"], c
    assert [b.decode() for b in j.tolist()] == FIX["join"]
    assert n.tolist() == FIX["length"] and nc.tolist() == FIX["length_chars"]
    with pytest.raises(ValueError, match="fill"):
        af.as_string(af.constant([1]), fill="x")
    with pytest.raises(ValueError, match="string"):
        af.strings.length(af.constant([1.0]))


@pytest.mark.parametrize("case", FIX["print"], ids=[str(i) for i in range(len(FIX["print"]))])
def test_Print_writes_what_tf_writes_to_stderr(case, capsys):
    g = af.Graph()
    with g.as_default():
        data = [_const(n) for n in case["data"]]
        x = af.constant(1.0)
        p = af.Print(x, data, message=case["message"], summarize=case["summarize"], first_n=case["first_n"])
        assert p.shape == x.shape and p.dtype is af.float32
        grad = af.gradients(p * 3.0, x)[0]
        with af.Session() as sess:
            for _ in range(2):
                assert sess.run(p) == 1.0
            captured = capsys.readouterr()
            assert captured.err.splitlines() == case["lines"]
            assert captured.out == ""
            assert sess.run(grad) == 3.0


def test_print_v2_streams(capsys, tmp_path, caplog):
    g = af.Graph()
    with g.as_default():
        t = af.constant([1, 2])
        op = af.print("hello", t, 3, {"a": af.constant(1)})
        to_out = af.print("out", t, output_stream=sys.stdout, sep="|", end=";\n")
        path = tmp_path / "log.txt"
        to_file = af.print("file", t, output_stream=f"file://{path}")
        to_log = af.print("logged", t, output_stream=logging.warning)
        with af.Session() as sess:
            assert sess.run(op) is None
            sess.run(to_out)
            sess.run(to_file)
            sess.run(to_file)
            with caplog.at_level(logging.WARNING):
                sess.run(to_log)
    captured = capsys.readouterr()
    assert captured.err == "hello [1 2] 3 {'a': 1}\n"
    assert captured.out == "out|[1 2];\n"
    assert path.read_text() == "file [1 2]\nfile [1 2]\n"
    assert "logged [1 2]" in caplog.text
    with pytest.raises(ValueError, match="output stream"):
        af.print("x", output_stream=object())


def test_strings_cross_the_wire_codec():
    arr = np.empty((2, 2), dtype=object)
    arr[:] = [[b"a", "é".encode()], [b"", b"x" * 1000]]
    head, bufs = codec.encode({"k": 1}, [arr, np.arange(3.0), np.empty(0, dtype=object)])
    msg = b"".join(codec.split_payload(head, bufs))
    header, off = codec.decode_header(msg)
    s, f, e = codec.decode(header, msg, off)
    assert s.dtype == object and s.tolist() == arr.tolist()
    np.testing.assert_array_equal(f, np.arange(3.0))
    assert e.shape == (0,)
    # Lengths are checked against the payload: a frame that lies is refused, never read past.
    bad = bytearray(msg)
    i = msg.index(b"\x01\x00\x00\x00a")
    bad[i:i + 4] = (10**6).to_bytes(4, "little")
    with pytest.raises(codec.FrameError, match="string"):
        codec.decode(*codec.decode_header(bytes(bad))[:1], bytes(bad), off)
    with pytest.raises(codec.FrameError):
        codec.encode({}, [np.array([1, "a"], dtype=object)])


def test_string_constants_survive_graph_serialization():
    g = af.Graph()
    with g.as_default():
        af.constant([["a", "bb"], ["", "é"]], name="words")
    g2 = af.Graph.from_msgpack(g.to_msgpack())
    t = g2.get_tensor_by_name("words:0")
    assert t.dtype is af.string
    with af.Session(graph=g2) as sess:
        assert sess.run(t).tolist() == [[b"a", b"bb"], [b"", "é".encode()]]


def test_strings_cross_tasks_of_a_cluster():
    from actorflow.cluster.local import free_ports
    spec = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    servers = [af.train.Server(spec, "worker", i, token="strings-token") for i in range(2)]
    try:
        g = af.Graph()
        with g.as_default():
            with af.device("/job:worker/task:0"):
                words = af.placeholder(af.string, [None], name="words")
                n = af.placeholder(af.int32, [], name="n")
                tagged = af.strings.join([words, af.as_string(n)], separator="#")
            with af.device("/job:worker/task:1"):
                joined = af.strings.join([tagged, "end"], separator="/")
                length = af.strings.length(joined)
                hello = af.constant("Hello, TensorFlow!")
            with af.Session(servers[1].target, graph=g) as sess:
                j, ln, h = sess.run([joined, length, hello], {words: ["a", "βγ", ""], n: 7}, timeout=30)
        assert j.tolist() == [b"a#7/end", "βγ#7/end".encode(), b"#7/end"]
        assert ln.tolist() == [7, 10, 6]
        assert h == b"Hello, TensorFlow!"
    finally:
        for s in servers:
            s.stop()


def test_string_to_number():
    g = af.Graph()
    with g.as_default():
        s = af.placeholder(af.string, [None])
        f = af.strings.to_number(s)
        i = af.string_to_number(s, out_type=af.int64)
        assert f.dtype is af.float32 and i.dtype is af.int64 and f.shape.as_list() == [None]
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(f, {s: ["1.5", " -2e3", "7"]}), np.float32([1.5, -2000, 7]))
            assert sess.run(i, {s: ["12", "-3"]}).tolist() == [12, -3]
            with pytest.raises(af.errors.InvalidArgumentError, match="could not correctly convert"):
                sess.run(i, {s: ["1.5"]})
            with pytest.raises(af.errors.InvalidArgumentError, match="out of range"):
                sess.run(af.string_to_number(s, out_type=af.int32), {s: ["99999999999"]})
        with pytest.raises(ValueError, match="out_type"):
            af.strings.to_number(s, out_type=af.bool)


def test_zeros_of_strings_are_empty_strings_and_ones_are_refused():
    """TF: tf.zeros/zeros_like of a string tensor are b"" (the program's `tf.zeros_like(['apple',
    ...])` of Stanford's CS20 examples); ones of strings are a TypeError."""
    p = af.placeholder(af.string, [None])
    with af.Session() as sess:
        got = sess.run([af.zeros_like(["apple", "peach", "banana"]), af.zeros_like(p),
                        af.zeros([2], dtype=af.string), af.zeros([1200], dtype=af.string),
                        af.zeros(af.shape(p), dtype=af.string)], {p: ["a", "b"]})
    assert [list(g[:3]) for g in got] == [[b""] * 3, [b""] * 2, [b""] * 2, [b""] * 3, [b""] * 2]
    for make in (lambda: af.ones([2], dtype=af.string), lambda: af.ones_like(["a"]), lambda: af.ones_like(p)):
        with pytest.raises(TypeError, match="Expected string, but got 1 of type 'int'"):
            make()
