"""af.image's and af.io's codecs against TensorFlow 2.21 (tests/fixtures/make_image_io.py): the pixels
TF decodes from files its own encoders wrote (and from Pillow-made palette PNGs, BMPs, GIFs and
lossless WebPs), exactly for PNG, BMP, GIF and WebP and within JPEG_TOLERANCE for JPEG; round trips through af's encoders;
TensorProto bytes TF can parse; and the errors corrupt input gets."""
from __future__ import annotations

import base64
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "image_io.json").read_text())
FILES = {k: base64.b64decode(v) for k, v in FIX["files"].items()}
# A JPEG decodes to TF's exact pixels except where Pillow's libjpeg has no setting equal to TF's
# (kernels/cpu/image_codec.py, _jpeg_exact): chroma-subsampled colour output with the fast DCT and
# fancy upsampling (TF's default) or the accurate DCT without it. There no sample differs by more
# than JPEG_TOLERANCE levels on these files, and the mean absolute difference stays under JPEG_MEAN.
JPEG_TOLERANCE = 16
JPEG_MEAN = 3.0
SUBSAMPLED = ("jpeg_rgb95", "jpeg_rgb50")       # 4:2:0 files (TF's encoder's default)


def _jpeg_exact(case) -> bool:
    kw = case["kwargs"]
    if case["fn"] == "extract_jpeg_shape" or not case["file"].startswith("jpeg"):
        return True
    if case["file"] not in SUBSAMPLED or kw.get("channels", 0) == 1:
        return True
    fancy = kw.get("fancy_upscaling", True)
    accurate = kw.get("dct_method", "") == "INTEGER_ACCURATE"
    return fancy == accurate


def _case_id(c):
    return f"{c['fn']}-{c['file']}-" + "-".join(f"{k}={v}" for k, v in c["kwargs"].items())


def _build(c):
    kw = dict(c["kwargs"])
    if "dtype" in kw:
        kw["dtype"] = af.as_dtype(kw["dtype"])
    data = af.constant(FILES[c["file"]])
    if c["fn"] == "decode_and_crop_jpeg":
        return af.image.decode_and_crop_jpeg(data, kw.pop("crop_window"), **kw)
    return getattr(af.io, c["fn"])(data, **kw)


@pytest.mark.parametrize("case", FIX["cases"], ids=_case_id)
def test_decoders_match_tensorflow(case):
    with af.Graph().as_default():
        t = _build(case)
        with af.Session() as s:
            if "error" in case:                 # TF refused this one
                with pytest.raises(getattr(af.errors, case["error"]), match=r"Decode\w+: "):
                    s.run(t)
                return
            got = s.run(t)
    want = np.array(case["value"], dtype=case["dtype"])
    assert got.dtype == want.dtype
    assert list(got.shape) == case["shape"]
    assert t.shape.is_compatible_with(want.shape)
    if _jpeg_exact(case) and want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    elif _jpeg_exact(case):
        np.testing.assert_array_equal(got, want)
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, atol=JPEG_TOLERANCE / 255)
    else:
        unit = 256 if want.dtype == np.uint16 else 1
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64)) / unit
        assert diff.max() <= JPEG_TOLERANCE and diff.mean() <= JPEG_MEAN, (diff.max(), diff.mean())


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png_round_trip_is_exact(dtype, channels):
    img = np.random.default_rng(channels).integers(0, np.iinfo(dtype).max + 1, (9, 13, channels)).astype(dtype)
    with af.Graph().as_default(), af.Session() as s:
        data = af.image.encode_png(img, compression=9)
        back, again = s.run([af.image.decode_png(data, dtype=af.as_dtype(dtype)), af.io.decode_image(data, dtype=af.as_dtype(dtype))])
    np.testing.assert_array_equal(back, img)
    np.testing.assert_array_equal(again, img)


def test_pngs_af_writes_are_read_by_pillow():
    import io

    from PIL import Image
    img = np.random.default_rng(0).integers(0, 256, (6, 5, 3)).astype(np.uint8)
    with af.Graph().as_default(), af.Session() as s:
        data = s.run(af.image.encode_png(img))
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), img)


def test_jpeg_round_trip_and_quality():
    y, x = np.mgrid[0:32, 0:40]
    img = np.stack([(128 + 100 * np.sin(x / 5 + k) * np.cos(y / 6)) for k in range(3)], -1).astype(np.uint8)
    with af.Graph().as_default(), af.Session() as s:
        q = af.placeholder(af.int32, [])
        hi, lo = af.image.encode_jpeg(img, quality=95), af.image.encode_jpeg(img, quality=10)
        outs = s.run([af.image.decode_jpeg(hi), af.image.decode_jpeg(lo), af.strings.length(hi),
                      af.strings.length(lo), af.image.is_jpeg(hi), af.image.is_jpeg(af.image.encode_png(img)),
                      af.image.extract_jpeg_shape(lo, output_type=af.int64),
                      af.image.adjust_jpeg_quality(img, q)], {q: 95})
    dhi, dlo, nhi, nlo, yes, no, shape, adj = outs
    err_hi = np.abs(dhi.astype(int) - img).mean()
    err_lo = np.abs(dlo.astype(int) - img).mean()
    assert err_hi < 2.0 < err_lo and nlo < nhi
    assert yes and not no
    assert shape.tolist() == [32, 40, 3] and shape.dtype == np.int64
    np.testing.assert_array_equal(adj, dhi)


@pytest.mark.parametrize("fn, data, op", [
    ("decode_png", b"not a png", "DecodePng"),
    ("decode_png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "DecodePng"),
    ("decode_jpeg", b"\xff\xd8\xff\xe0garbage", "DecodeJpeg"),
    ("decode_jpeg", b"GIF89a", "DecodeJpeg"),
    ("decode_bmp", b"BM" + b"\0" * 10, "DecodeBmp"),
    ("decode_gif", b"GIF89a\x01", "DecodeGif"),
    ("decode_image", b"\x00\x01\x02\x03", "DecodeImage"),
    ("extract_jpeg_shape", b"abc", "ExtractJpegShape"),
])
def test_corrupt_input_is_named(fn, data, op):
    with af.Graph().as_default(), af.Session() as s:
        with pytest.raises(af.errors.InvalidArgumentError, match=op):
            s.run(getattr(af.io, fn)(data))


def test_truncated_png_fails():
    img = np.arange(60, dtype=np.uint8).reshape(4, 5, 3)
    with af.Graph().as_default(), af.Session() as s:
        data = s.run(af.image.encode_png(img))
        with pytest.raises(af.errors.InvalidArgumentError, match="DecodePng"):
            s.run(af.image.decode_png(data[:-20]))


def test_bad_arguments_fail_at_build_time():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="channels"):
            af.image.decode_png(b"", channels=2)
        with pytest.raises(ValueError, match="EncodeJpeg"):
            af.image.encode_jpeg(np.zeros((2, 2, 3), np.float32))
        with pytest.raises(ValueError, match="contents must be scalar"):
            af.image.decode_jpeg([b"a", b"b"])
        assert af.image.decode_png(b"", channels=3).shape.as_list() == [None, None, 3]
        assert af.io.decode_image(b"").shape.ndims is None
        assert af.io.decode_image(b"", channels=1, expand_animations=False).shape.as_list() == [None, None, 1]


@pytest.mark.parametrize("expr", list(FIX["serialize_tensor"]))
def test_serialize_tensor_writes_tensorflows_bytes(expr):
    value = eval(expr, {"np": np})  # noqa: S307 (the fixture's own expressions)
    want = base64.b64decode(FIX["serialize_tensor"][expr])
    with af.Graph().as_default(), af.Session() as s:
        dt = af.as_dtype(value.dtype if value.dtype != object else af.string)
        got, back, theirs = s.run([af.io.serialize_tensor(value), af.io.parse_tensor(af.io.serialize_tensor(value), dt),
                                   af.io.parse_tensor(want, dt)])
    assert got == want
    for v in (back, theirs):
        assert v.shape == value.shape
        np.testing.assert_array_equal(v, value)


def test_parse_tensor_errors_name_the_op():
    with af.Graph().as_default(), af.Session() as s:
        data = af.io.serialize_tensor(np.arange(3, dtype=np.float32))
        with pytest.raises(af.errors.InvalidArgumentError, match="ParseTensor: Type mismatch.*float32.*int32"):
            s.run(af.io.parse_tensor(data, af.int32))
        with pytest.raises(af.errors.InvalidArgumentError, match="ParseTensor: Could not parse"):
            s.run(af.io.parse_tensor(b"\x08\x01\x12\x04\x12\x02\x08\x05\"\x04abcd", af.float32))


@pytest.mark.parametrize("kind", ["ZLIB", "GZIP", ""])
def test_decode_compressed(kind):
    import gzip
    import zlib
    raw = [b"hello " * 20, b"", bytes(range(256))]
    pack = {"ZLIB": zlib.compress, "GZIP": gzip.compress, "": bytes}[kind]
    with af.Graph().as_default(), af.Session() as s:
        out = s.run(af.io.decode_compressed(np.array([[pack(r) for r in raw]], dtype=object), compression_type=kind))
        assert out.shape == (1, 3) and list(out[0]) == raw
        if kind:
            with pytest.raises(af.errors.InvalidArgumentError, match="DecodeCompressed"):
                s.run(af.io.decode_compressed(pack(raw[0])[:-5], compression_type=kind))


def test_matching_files(tmp_path):
    for n in ("b.txt", "a.txt", ".hidden.txt", "c.csv"):
        (tmp_path / n).write_bytes(b"x")
    with af.Graph().as_default(), af.Session() as s:
        got = s.run(af.io.matching_files(str(tmp_path / "*.txt")))
        both = s.run(af.io.matching_files([str(tmp_path / "*.csv"), str(tmp_path / "a*")]))
        none = s.run(af.io.matching_files(str(tmp_path / "*.png")))
    assert [pathlib.Path(f.decode()).name for f in got] == [".hidden.txt", "a.txt", "b.txt"]
    assert [pathlib.Path(f.decode()).name for f in both] == ["a.txt", "c.csv"]
    assert none.shape == (0,)


SEQ = json.loads((pathlib.Path(__file__).parent / "fixtures" / "sequence_examples.json").read_text())


def _flatten(result):
    out = {}
    parts = result if isinstance(result, tuple) else (result,)
    for i, d in enumerate(parts):
        for k, v in d.items():
            if isinstance(v, af.SparseTensor):
                out[f"{i}/{k}/indices"], out[f"{i}/{k}/values"], out[f"{i}/{k}/dense_shape"] = (
                    v.indices, v.values, v.dense_shape)
            else:
                out[f"{i}/{k}"] = v
    return out


@pytest.mark.parametrize("key", list(SEQ["cases"]))
def test_sequence_examples_and_sparse_features_parse_as_in_tensorflow(key):
    case = SEQ["cases"][key]
    records = np.array([base64.b64decode(r) for r in SEQ["records"]], dtype=object)
    examples = np.array([base64.b64decode(r) for r in SEQ["examples"]], dtype=object)
    with af.Graph().as_default():
        env = {"tf": af, "rec": af.constant(records), "ex": af.constant(examples)}
        flat = _flatten(eval(case["expr"], env))  # noqa: S307 (the fixture's)
        assert set(flat) == set(case["outputs"])
        with af.Session() as s:
            got = s.run(flat)
    for k, want in case["outputs"].items():
        g = np.asarray(got[k])
        assert list(g.shape) == want["shape"], k
        if want["dtype"] == "string":
            assert [bytes(x) for x in g.reshape(-1)] == [base64.b64decode(x) for x in want["value"]], k
        else:
            assert g.dtype == np.dtype(want["dtype"]), k
            np.testing.assert_array_equal(g.reshape(-1), np.array(want["value"], dtype=want["dtype"]), err_msg=k)
        assert flat[k].shape.is_compatible_with(g.shape), (k, flat[k].shape)


def test_sequence_example_errors():
    rec = base64.b64decode(SEQ["records"][2])
    with af.Graph().as_default(), af.Session() as s:
        _, lists = af.io.parse_single_sequence_example(
            rec, sequence_features={"vecs": af.io.FixedLenSequenceFeature([2], af.float32)})
        assert SEQ["missing_error"] == "InvalidArgumentError"
        with pytest.raises(af.errors.InvalidArgumentError, match="ParseSingleSequenceExample.*'vecs' is required"):
            s.run(lists["vecs"])
        _, lists = af.io.parse_single_sequence_example(
            rec, sequence_features={"tokens": af.io.FixedLenSequenceFeature([2], af.int64)})
        with pytest.raises(af.errors.InvalidArgumentError, match="Number of int64 values != expected"):
            s.run(lists["tokens"])
        with pytest.raises(af.errors.InvalidArgumentError, match="Could not parse example input"):
            s.run(af.io.parse_single_sequence_example(b"\xff\x01", {"id": af.io.FixedLenFeature([], af.int64)})[0]["id"])
        with pytest.raises(ValueError, match="must be None"):
            af.io.parse_sequence_example([rec], sequence_features={
                "tokens": af.io.FixedLenSequenceFeature([], af.int64, default_value=1)})


def test_decode_json_example():
    # TF 2.21 decodes this JSON to b'\n\r\n\x0b\n\x01a\x12\x06\x1a\x04\x08\x01\x08\x02' (unpacked int64s)
    tf_bytes = b"\n\r\n\x0b\n\x01a\x12\x06\x1a\x04\x08\x01\x08\x02"
    js = '{"features": {"feature": {"a": {"int64List": {"value": ["1", 2]}}}}}'
    with af.Graph().as_default(), af.Session() as s:
        out = s.run(af.io.decode_json_example([[js, "{}"]]))
        assert out.shape == (1, 2) and out[0, 1] == b""
        assert af.train.Example.FromString(out[0, 0]) == af.train.Example.FromString(tf_bytes)
        parsed = s.run(af.io.parse_single_example(out[0, 0], {"a": af.io.FixedLenFeature([2], af.int64)}))
        assert parsed["a"].tolist() == [1, 2]
        with pytest.raises(af.errors.InvalidArgumentError, match="DecodeJSONExample.*bad"):
            s.run(af.io.decode_json_example('{"bad": 1}'))


def test_animated_webp_frames():
    import io

    from PIL import Image
    rng = np.random.default_rng(4)
    frames = [rng.integers(0, 256, (3, 4, 3)).astype(np.uint8) for _ in range(3)]
    buf = io.BytesIO()
    Image.fromarray(frames[0]).save(buf, "WEBP", save_all=True, append_images=[Image.fromarray(f) for f in frames[1:]],
                                    lossless=True)
    with af.Graph().as_default(), af.Session() as s:
        every, first = s.run([af.io.decode_webp(buf.getvalue()),
                              af.io.decode_image(buf.getvalue(), expand_animations=False)])
        np.testing.assert_array_equal(every, np.stack(frames))
        np.testing.assert_array_equal(first, frames[0])
        with pytest.raises(af.errors.InvalidArgumentError, match="DecodeWebP: Number of channels"):
            s.run(af.io.decode_webp(buf.getvalue(), channels=4))
        with pytest.raises(af.errors.InvalidArgumentError, match="DecodeWebP"):
            s.run(af.io.decode_webp(b"RIFF\x00\x00\x00\x00WEBPjunk"))


def test_corrupt_gif_frames_fail():
    data = FILES["gif1"]
    with af.Graph().as_default(), af.Session() as s:
        for bad in (data[:len(data) // 2], data[:13] + b"\x2c" + b"\x00" * 9 + b"\x0c\x00"):
            with pytest.raises(af.errors.InvalidArgumentError, match="DecodeGif: Invalid GIF data"):
                s.run(af.io.decode_gif(bad))
