"""af.image against TensorFlow 2.21's values and gradients (tests/fixtures/make_image.py: the same
expressions, with `tf` bound to actorflow), the random functions' seeding and distributions, and the
errors bad input gets."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "image.json").read_text())
INPUTS = {k: np.array(v["value"], dtype=v["dtype"]) for k, v in FIX["inputs"].items()}
FLOAT_INPUTS = [k for k, v in INPUTS.items() if v.dtype.kind == "f"]

# TF computes these in float32 inside (convert_image_dtype to float32 first, or float32 weights),
# so a float64 result carries float32 rounding: compare at float32's tolerance.
FLOAT32_INSIDE = ("rgb_to_grayscale", "adjust_brightness", "adjust_contrast", "per_image_standardization")
RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5, np.dtype(np.float16): 1e-3}


def _weights(shape):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) % 7 - 3.0) * 0.5


def _close(got, want, rtol, msg):
    want = np.asarray(want)
    atol = rtol * max(1.0, float(np.max(np.abs(want)))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=msg)


def _env():
    env = {"tf": af}
    env.update({k: af.constant(v) for k, v in INPUTS.items()})
    return env


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    case = FIX["cases"][expr]
    want = np.array(case["value"], dtype=case["dtype"])
    float32_inside = any(f in expr for f in FLOAT32_INSIDE)
    half = "float16" in expr        # a half float on the way: its gradients carry half's rounding
    with af.Graph().as_default():
        env = _env()
        y = eval(expr, env)  # noqa: S307 (the fixture's own expressions)
        if y.shape.is_fully_defined():
            assert tuple(y.shape.as_list()) == want.shape, f"{expr}: static shape {y.shape}"
        with af.Session() as s:
            got = s.run(y)
            assert got.dtype == want.dtype, expr
            assert got.shape == want.shape, expr
            if want.dtype.kind in "iub":
                np.testing.assert_array_equal(got, want, err_msg=expr)
            else:
                rtol = 1e-5 if float32_inside else RTOL[want.dtype]
                _close(got, want, rtol, expr)
            if not y.dtype.is_floating:
                return
            loss = af.reduce_sum(af.cast(y, af.float64) * _weights(want.shape))
            srcs = [env[k] for k in FLOAT_INPUTS]
            if case.get("no_gradient"):
                with pytest.raises(LookupError, match="No gradient defined"):
                    af.gradients(loss, srcs)
                return
            grads = af.gradients(loss, srcs)
            for k, g in zip(FLOAT_INPUTS, grads):
                if k not in case["grads"]:
                    assert g is None, f"{expr}: TF has no gradient for {k}"
                    continue
                assert g is not None, f"{expr}: no gradient for {k}"
                gw = np.array(case["grads"][k])
                rtol = 1e-3 if half else 1e-5 if float32_inside else RTOL[INPUTS[k].dtype]
                _close(s.run(af.convert_to_tensor(g)), gw, rtol, f"{expr} d/d{k}")


def test_resize_gradients_against_finite_differences():
    """The resize gradient ops are the transposes of the forward ops, checked numerically on a
    float64 image through float32 outputs (so a loose tolerance)."""
    x0 = np.random.default_rng(0).uniform(0, 1, (1, 4, 5, 2))
    for make in (lambda t: af.image.resize_bilinear(t, [7, 3]),
                 lambda t: af.image.resize_bicubic(t, [6, 8], half_pixel_centers=True),
                 lambda t: af.image.resize_nearest_neighbor(t, [3, 9], align_corners=True)):
        with af.Graph().as_default():
            x = af.placeholder(af.float64, x0.shape)
            y = make(x)
            w = _weights(y.shape.as_list())
            loss = af.reduce_sum(af.cast(y, af.float64) * w)
            (g,) = af.gradients(loss, [x])
            with af.Session() as s:
                gv = s.run(g, {x: x0})
                eps = 1e-2
                for idx in [(0, 0, 0, 0), (0, 3, 4, 1), (0, 2, 1, 0), (0, 1, 3, 1)]:
                    xp, xm = x0.copy(), x0.copy()
                    xp[idx] += eps
                    xm[idx] -= eps
                    fd = (s.run(loss, {x: xp}) - s.run(loss, {x: xm})) / (2 * eps)
                    assert abs(fd - gv[idx]) < 1e-3 * max(1.0, abs(fd)), (y.op.type, idx, fd, gv[idx])


# -- random functions ---------------------------------------------------------------------------

IMAGES = np.arange(8 * 2 * 3 * 1, dtype=np.float32).reshape(8, 2, 3, 1)


def _draws(build, n_runs, seed=None, graph_seed=None):
    with af.Graph().as_default():
        if graph_seed is not None:
            af.set_random_seed(graph_seed)
        y = build(af.constant(IMAGES), seed)
        with af.Session() as s:
            return [s.run(y) for _ in range(n_runs)]


@pytest.mark.parametrize("build", [
    lambda t, seed: af.image.random_flip_left_right(t, seed=seed),
    lambda t, seed: af.image.random_flip_up_down(t[0], seed=seed),
    lambda t, seed: af.image.random_brightness(t, 0.5, seed=seed),
    lambda t, seed: af.image.random_contrast(t, 0.2, 1.8, seed=seed),
    lambda t, seed: af.random_crop(t, [3, 1, 2, 1], seed=seed),
    lambda t, seed: af.image.random_crop(t[1], [2, 2, 1], seed=seed),
    lambda t, seed: af.image.random_hue(af.tile(t / 48.0, [1, 1, 1, 3]) * [0.2, 0.5, 1.0], 0.4, seed=seed),
    lambda t, seed: af.image.random_saturation(af.tile(t / 48.0, [1, 1, 1, 3]) * [0.2, 0.5, 1.0], 0.1, 1.9,
                                               seed=seed),
    lambda t, seed: af.image.random_jpeg_quality(af.tile(t[2] / 48.0, [4, 4, 3]), 5, 95, seed=seed),
    lambda t, seed: af.image.sample_distorted_bounding_box([40, 60, 3], [[[0.1, 0.2, 0.5, 0.9]]], seed=seed,
                                                           min_object_covered=0.3, area_range=[0.1, 0.8])[2],
])
def test_random_functions_are_deterministic_under_seeds(build):
    a = _draws(build, 6, seed=7)
    b = _draws(build, 6, seed=7)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(a[0], x) for x in a[1:]), "a seeded op draws again each run"
    c = _draws(build, 6, graph_seed=3)
    d = _draws(build, 6, graph_seed=3)
    for x, y in zip(c, d):
        np.testing.assert_array_equal(x, y)
    e = _draws(build, 6, seed=8)
    assert any(not np.array_equal(x, y) for x, y in zip(a, e)), "another seed draws other numbers"


def test_random_flips_flip_each_image_half_the_time():
    runs = _draws(lambda t, seed: af.image.random_flip_left_right(t, seed=seed), 200, seed=1)
    flipped = np.array([[np.array_equal(r[i], IMAGES[i, :, ::-1]) for i in range(8)] for r in runs])
    kept = np.array([[np.array_equal(r[i], IMAGES[i]) for i in range(8)] for r in runs])
    assert (flipped ^ kept).all(), "every image is either flipped or kept"
    frac = flipped.mean()
    assert 0.43 < frac < 0.57, frac           # 1600 fair coins: 0.5 +- 0.0125 (1 sd)
    per_run = flipped.sum(1)
    assert 0 < per_run.min() and per_run.max() < 8 or len(set(per_run)) > 3, "images draw independently"
    singles = _draws(lambda t, seed: af.image.random_flip_up_down(t[2], seed=seed), 400, seed=2)
    up = np.mean([np.array_equal(r, IMAGES[2, ::-1]) for r in singles])
    assert 0.42 < up < 0.58, up


def test_random_crop_offsets_are_uniform():
    value = np.arange(6 * 5, dtype=np.int32).reshape(6, 5)
    with af.Graph().as_default():
        af.set_random_seed(4)
        c = af.random_crop(value, [3, 2])
        assert c.shape.as_list() == [3, 2]
        with af.Session() as s:
            corners = [s.run(c)[0, 0] for _ in range(1200)]
    rows, cols = np.divmod(np.array(corners), 5)
    assert set(rows) == set(range(4)) and set(cols) == set(range(4))
    counts = np.bincount(rows * 4 + cols, minlength=16)
    expected = 1200 / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 37.7, counts                # chi-square, 15 dof, p = 0.001


def test_random_brightness_and_contrast_draw_in_range():
    runs = _draws(lambda t, seed: af.image.random_brightness(t, 0.25, seed=seed), 300, seed=5)
    deltas = np.array([r[0, 0, 0, 0] - IMAGES[0, 0, 0, 0] for r in runs])
    assert deltas.min() >= -0.25 and deltas.max() < 0.25
    assert deltas.min() < -0.2 and deltas.max() > 0.2 and abs(deltas.mean()) < 0.03
    for r, d in zip(runs, deltas):
        np.testing.assert_allclose(r, IMAGES + d, rtol=1e-6, atol=1e-5)
    runs = _draws(lambda t, seed: af.image.random_contrast(t, 0.5, 1.5, seed=seed), 300, seed=6)
    mean = IMAGES.mean(axis=(1, 2), keepdims=True)
    factors = np.array([(r[0, 0, 0, 0] - mean[0, 0, 0, 0]) / (IMAGES[0, 0, 0, 0] - mean[0, 0, 0, 0]) for r in runs])
    assert factors.min() >= 0.5 - 1e-5 and factors.max() < 1.5 + 1e-5 and abs(factors.mean() - 1.0) < 0.05
    with pytest.raises(ValueError, match="max_delta must be non-negative"):
        af.image.random_brightness(IMAGES, -1.0)
    with pytest.raises(ValueError, match="upper must be > lower"):
        af.image.random_contrast(IMAGES, 1.0, 1.0)


# -- shapes and errors --------------------------------------------------------------------------

def test_unknown_shapes_run():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, None, None, 3], name="x")
        one = af.placeholder(af.float32, [None, None, 3], name="one")
        ys = [af.image.resize_bilinear(x, [4, 6]), af.image.crop_to_bounding_box(x, 1, 1, 2, 3),
              af.image.pad_to_bounding_box(one, 1, 0, 6, 7), af.image.resize_image_with_crop_or_pad(x, 3, 9),
              af.image.central_crop(one, 0.5), af.image.flip_up_down(one), af.image.rot90(x, 1),
              af.image.random_flip_left_right(x, seed=1)]
        assert ys[0].shape.as_list() == [None, 4, 6, 3]
        assert ys[1].shape.as_list() == [None, 2, 3, 3]
        with af.Session() as s:
            xv = INPUTS["img32"]
            out = s.run(ys, {x: xv, one: xv[0]})
    np.testing.assert_array_equal(out[1], xv[:, 1:3, 1:4])
    np.testing.assert_array_equal(out[2][1:6], xv[0])
    assert out[3].shape == (2, 3, 9, 3)
    np.testing.assert_array_equal(out[4], xv[0, 1:4, 1:6])   # starts int((5 - 2.5) / 2), int((7 - 3.5) / 2)
    np.testing.assert_array_equal(out[5], xv[0, ::-1])
    np.testing.assert_array_equal(out[6], np.rot90(xv, 1, axes=(1, 2)))


def test_tensor_offsets_and_sizes():
    xv = INPUTS["img"]
    with af.Graph().as_default():
        oh = af.placeholder(af.int32, [], name="oh")
        th = af.placeholder(af.int32, [], name="th")
        tp = af.placeholder(af.int32, [], name="tp")
        frac = af.placeholder(af.float32, [], name="frac")
        size = af.placeholder(af.int32, [2], name="size")
        x = af.constant(xv)
        crop = af.image.crop_to_bounding_box(x, oh, 1, th, 3)
        pad = af.image.pad_to_bounding_box(x[0], oh, 2, tp, 9)
        both = af.image.resize_image_with_crop_or_pad(x, th, 4)
        central = af.image.central_crop(x, frac)
        nearest = af.image.resize_images(x, size, method=af.image.ResizeMethod.NEAREST_NEIGHBOR)
        with af.Session() as s:
            c, p, b, cc, nn = s.run([crop, pad, both, central, nearest], {oh: 2, th: 3, tp: 8, frac: 0.5, size: [10, 14]})
            with pytest.raises(af.errors.InvalidArgumentError, match="height must be >= target \\+ offset"):
                s.run(crop, {oh: 3, th: 3})
            with pytest.raises(af.errors.InvalidArgumentError, match="height must be <= target - offset"):
                s.run(pad, {oh: 3, tp: 7})
    np.testing.assert_array_equal(c, xv[:, 2:5, 1:4])
    assert p.shape == (8, 9, 3) and not p[:2].any() and not p[7:].any() and not p[:, :2].any()
    np.testing.assert_array_equal(p[2:7, 2:], xv[0])
    np.testing.assert_array_equal(b, xv[:, 1:4, 1:5])
    np.testing.assert_array_equal(cc, xv[:, 1:4, 1:6])
    np.testing.assert_array_equal(nn, xv.repeat(2, 1).repeat(2, 2))


def test_no_second_derivative_through_a_resize():
    with af.Graph().as_default():
        x = af.constant(INPUTS["img"])
        y = af.image.resize_bilinear(x, [4, 4])
        (g,) = af.gradients(af.reduce_sum(af.square(y)), [x])
        assert af.gradients(af.reduce_sum(g), [x]) == [None]      # TF: ResizeBilinearGrad is not differentiable


def test_bad_input_is_named():
    img = np.zeros((4, 5, 3), np.float32)
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="must have either 3 or 4 dimensions"):
            af.image.resize_images(np.zeros((2, 2)), [3, 3])
        with pytest.raises(ValueError, match="4-dimensional.*op .ResizeBilinear"):
            af.image.resize_bilinear(img, [3, 3])
        with pytest.raises(ValueError, match="align_corners must be False.*ResizeNearestNeighbor"):
            af.image.resize_nearest_neighbor(img[None], [3, 3], align_corners=True, half_pixel_centers=True)
        with pytest.raises(ValueError, match="1-D Tensor of 2 elements"):
            af.image.resize_images(img, [3, 3, 3])
        with pytest.raises(ValueError, match="crop_to_bounding_box: width must be >= target \\+ offset"):
            af.image.crop_to_bounding_box(img, 0, 3, 2, 3)
        with pytest.raises(ValueError, match="crop_to_bounding_box: offset_height must be >= 0"):
            af.image.crop_to_bounding_box(img, -1, 0, 2, 3)
        with pytest.raises(ValueError, match="pad_to_bounding_box: height must be <= target - offset"):
            af.image.pad_to_bounding_box(img, 2, 0, 5, 5)
        with pytest.raises(ValueError, match="central_crop: central_fraction must be within"):
            af.image.central_crop(img, 1.5)
        with pytest.raises(ValueError, match="flip_left_right.*must have either 3 or 4 dimensions"):
            af.image.flip_left_right(np.zeros((1, 2, 3, 4, 5)))
        with pytest.raises(ValueError, match="must be at least three-dimensional"):
            af.image.rot90(np.zeros((2, 3)))
        with pytest.raises(ValueError, match="random_crop: Need value.shape >= size"):
            af.random_crop(img, [5, 5, 3])
        with pytest.raises(ValueError, match="Resize method is not implemented"):
            af.image.resize_images(img, [2, 2], method=7)

        x = af.placeholder(af.float32, None, name="x")
        size = af.placeholder(af.int32, [2], name="size")
        resized = af.image.resize_bilinear(x, size, name="up")
        v = af.placeholder(af.float32, [None, None], name="v")
        crop = af.random_crop(v, [3, 2], name="crop")
        gray = af.image.grayscale_to_rgb(af.placeholder(af.float32, [None, None], name="gray"))
        box = af.image.crop_to_bounding_box(af.placeholder(af.float32, [None, None, 3], name="im"), 1, 1, 3, 3)
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="ResizeBilinear: input must be 4-dimensional") as e:
                s.run(resized, {x: img, size: [2, 2]})
            assert "up" in str(e.value)
            with pytest.raises(af.errors.InvalidArgumentError, match="output dimensions must be positive"):
                s.run(resized, {x: img[None], size: [0, 2]})
            with pytest.raises(af.errors.InvalidArgumentError, match="Need value.shape >= size"):
                s.run(crop, {v: np.zeros((2, 5), np.float32)})
            with pytest.raises(af.errors.InvalidArgumentError, match="width must be >= target \\+ offset"):
                s.run(box, {"im:0": np.zeros((5, 3, 3), np.float32)})
            with pytest.raises(af.errors.InvalidArgumentError, match="grayscale_to_rgb: last dimension"):
                s.run(gray, {"gray:0": np.zeros((5, 2), np.float32)})
            assert s.run(gray, {"gray:0": np.ones((5, 1), np.float32)}).shape == (5, 3)


def test_augmentation_in_an_input_pipeline_and_rot90_of_a_fed_k():
    """A TF-1.x CNN input pipeline: crop, flip and standardize each image in a dataset map."""
    imgs = np.random.default_rng(3).uniform(0, 1, (6, 8, 8, 3)).astype(np.float32)
    with af.Graph().as_default():
        af.set_random_seed(1)
        ds = af.data.Dataset.from_tensor_slices(imgs).map(
            lambda x: af.image.per_image_standardization(af.image.random_flip_left_right(af.random_crop(x, [5, 5, 3]))))
        batch = ds.batch(3).make_one_shot_iterator().get_next()
        k = af.placeholder(af.int32, [])
        r = af.image.rot90(af.constant(imgs), k)
        with af.Session() as s:
            first, second = s.run(batch), s.run(batch)
            for kk in range(-1, 5):
                np.testing.assert_array_equal(s.run(r, {k: kk}), np.rot90(imgs, kk, axes=(1, 2)))
    for b in (first, second):
        assert b.shape == (3, 5, 5, 3)
        np.testing.assert_allclose(b.mean(axis=(1, 2, 3)), 0, atol=1e-5)
        np.testing.assert_allclose(b.std(axis=(1, 2, 3)), 1, rtol=1e-4)


@pytest.mark.parametrize("op, attrs, args", [
    ("ResizeBilinear", {"half_pixel_centers": True}, (np.float64, (6, 5, 7, 3), [9, 4])),
    ("ResizeNearestNeighbor", {"align_corners": True}, (np.uint8, (5, 5, 7, 2), [3, 11])),
    ("ResizeNearestNeighbor", {}, (np.float16, (4, 5, 7, 2), [8, 8])),
    ("ResizeBicubic", {}, (np.float32, (4, 5, 7, 3), [10, 3])),
    ("ResizeArea", {"align_corners": True}, (np.int32, (4, 5, 7, 3), [2, 5])),
    ("ResizeBilinearGrad", {}, (np.float64, (4, 5, 7, 3), (4, 8, 3, 3))),
    ("ResizeBicubicGrad", {"half_pixel_centers": True}, (np.float32, (4, 5, 7, 3), (4, 2, 9, 3))),
    ("ResizeNearestNeighborGrad", {}, (np.float16, (4, 9, 4, 3), [5, 7])),
])
def test_resize_kernels_split_by_batch(op, attrs, args):
    """A big batch splits into blocks for the pool's threads; the blocks compute what the whole call does."""
    from actorflow.kernels.registry import get_kernel
    dtype, shape, last = args
    rng = np.random.default_rng(2)
    x = (rng.uniform(0, 200, shape)).astype(dtype)
    if op in ("ResizeBilinearGrad", "ResizeBicubicGrad"):
        inputs = (rng.standard_normal(last).astype(np.float32), x)
    else:
        inputs = (x, np.array(last, np.int32))
    kd = get_kernel(op)
    whole = kd.factory(attrs)(*inputs)
    res = kd.split(attrs)(2, *inputs)
    assert res is not None
    for t in reversed(res[1]):
        t()
    got = res[2]() if len(res) == 3 else res[0]
    assert got.dtype == whole.dtype
    np.testing.assert_array_equal(got, whole)
    one = tuple(a[:1] if a.ndim == 4 else a for a in inputs)
    assert kd.split(attrs)(2, *one) is None           # one image: nothing to split


MORE = tf_reference.load("image_more.json")


# TF computes these in float32 inside (AdjustHue, AdjustSaturation, convert_image_dtype to float32,
# CropAndResize's gradients): a float64 result carries float32 rounding.
MORE_FLOAT32_INSIDE = ("adjust_gamma", "adjust_hue", "adjust_saturation", "psnr", "ssim", "crop_and_resize")


@pytest.mark.parametrize("expr", list(MORE["cases"]))
def test_colour_metrics_and_boxes_match_tensorflow(expr, monkeypatch):
    """tests/fixtures/make_image_more.py: colour spaces, gamma, hue, saturation, image gradients,
    Sobel, total variation, PSNR, SSIM, MS-SSIM, crop_and_resize, NMS and bounding boxes."""
    if any(f in expr for f in MORE_FLOAT32_INSIDE):
        # MS-SSIM of two nearly equal images: its float32 gradient is a difference of nearly equal
        # terms, summed in another order than TF's convolutions sum them.
        floor = 5e-3 if "ssim_multiscale" in expr else 2e-5

        def float32_tolerance(want):
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            return {"rtol": 2e-5, "atol": floor * max(scale, 1e-30)}
        monkeypatch.setattr(tf_reference, "tolerance", float32_tolerance)
    tf_reference.check(MORE, expr)


def test_sample_distorted_bounding_box_honours_its_constraints():
    with af.Graph().as_default():
        begin, size, bbox = af.image.sample_distorted_bounding_box(
            af.constant([50, 80, 3]), [[[0.2, 0.3, 0.6, 0.7]]], seed=3, min_object_covered=0.5,
            aspect_ratio_range=[0.5, 2.0], area_range=[0.1, 0.6])
        crop = af.slice(af.zeros([50, 80, 3]), begin, size)
        with af.Session() as s:
            for _ in range(30):
                b, z, bb, c = s.run([begin, size, bbox, crop])
                h, w = int(z[0]), int(z[1])
                assert z[2] == -1 and b[2] == 0 and c.shape == (h, w, 3)
                assert 0 <= b[0] and b[0] + h <= 50 and 0 <= b[1] and b[1] + w <= 80
                if (h, w) != (50, 80):
                    assert 0.1 * 4000 <= h * w <= 0.6 * 4000 and 0.5 <= w / h * 1.0 <= 2.0 + 0.05
                    iy = max(0, min(b[0] + h, 30) - max(b[0], 10))
                    ix = max(0, min(b[1] + w, 56) - max(b[1], 24))
                    assert iy * ix >= 0.5 * 20 * 32
                np.testing.assert_allclose(bb[0, 0], [b[0] / 50, b[1] / 80, (b[0] + h) / 50, (b[1] + w) / 80],
                                           rtol=1e-6)
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="SampleDistortedBoundingBoxV2.*No bounding boxes"):
                s.run(af.image.sample_distorted_bounding_box([5, 5, 1], np.zeros([1, 0, 4], np.float32)))


def test_box_ops_bad_input_is_named():
    with af.Graph().as_default(), af.Session() as s:
        img = np.zeros((1, 4, 4, 1), np.float32)
        with pytest.raises(af.errors.InvalidArgumentError, match="CropAndResize: box_index has values outside"):
            s.run(af.image.crop_and_resize(img, [[0, 0, 1, 1]], [3], [2, 2]))
        with pytest.raises(ValueError, match="NonMaxSuppressionV3: boxes must be 2-D"):
            af.image.non_max_suppression(np.zeros((2, 2, 4), np.float32), [0.5, 0.2], 1)
        with pytest.raises(af.errors.InvalidArgumentError, match="NonMaxSuppressionV3: iou_threshold"):
            s.run(af.image.non_max_suppression(np.zeros((2, 4), np.float32), [0.5, 0.2], 1, iou_threshold=1.5))
        with pytest.raises(af.errors.InvalidArgumentError, match="CombinedNonMaxSuppression: third dimension"):
            s.run(af.image.combined_non_max_suppression(np.zeros((1, 2, 3, 4), np.float32),
                                                        np.zeros((1, 2, 2), np.float32), 1, 2))


def test_crop_and_resize_gradients_against_finite_differences():
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0, 1, (2, 6, 5, 2))
    # No sample lands on a pixel centre (where TF's gradient takes one side of a kink).
    b0 = np.array([[0.1, 0.2, 0.78, 0.7], [0.3, 0.06, 0.9, 0.91]], np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float64, x0.shape)
        b = af.placeholder(af.float32, b0.shape)
        y = af.image.crop_and_resize(x, b, [1, 0], [4, 3])
        loss = af.reduce_sum(af.cast(y, af.float64) * np.sin(np.arange(48).reshape(2, 4, 3, 2)))
        gx, gb = af.gradients(loss, [x, b])
        with af.Session() as s:
            gxv, gbv = s.run([gx, gb], {x: x0, b: b0})
            eps = 1e-3
            for idx in [(0, 2, 1, 0), (1, 4, 3, 1), (1, 1, 0, 0)]:
                xp, xm = x0.copy(), x0.copy()
                xp[idx] += eps
                xm[idx] -= eps
                fd = (s.run(loss, {x: xp, b: b0}) - s.run(loss, {x: xm, b: b0})) / (2 * eps)
                assert abs(fd - gxv[idx]) < 1e-3 * max(1.0, abs(fd)), (idx, fd, gxv[idx])
            for idx in [(0, 0), (0, 3), (1, 1), (1, 2)]:
                bp, bm = b0.copy(), b0.copy()
                bp[idx] += eps
                bm[idx] -= eps
                fd = (s.run(loss, {x: x0, b: bp}) - s.run(loss, {x: x0, b: bm})) / (2 * eps)
                assert abs(fd - gbv[idx]) < 2e-2 * max(1.0, abs(fd)), (idx, fd, gbv[idx])


def test_extract_glimpse_fills_outside_with_noise_in_range():
    x = np.arange(1 * 5 * 6 * 1, dtype=np.float32).reshape(1, 5, 6, 1) + 1
    with af.Graph().as_default(), af.Session() as s:
        g = s.run(af.image.extract_glimpse(x, [3, 4], [[-0.9, -0.9]]))[0, ..., 0]
        # TF 2.21 gives [[noise x4], [noise, 1, 2, 3], [noise, 7, 8, 9]] here
        np.testing.assert_array_equal(g[1:, 1:], [[1, 2, 3], [7, 8, 9]])
        noise = np.concatenate([g[0], g[1:, 0]])
        assert noise.min() >= 1 and noise.max() < 30
        g = s.run(af.image.extract_glimpse(x, [3, 4], [[4.0, 5.0]], centered=False, normalized=False))[0, ..., 0]
        np.testing.assert_array_equal(g[:, :3], [[16, 17, 18], [22, 23, 24], [28, 29, 30]])
        with pytest.raises(af.errors.InvalidArgumentError, match="ExtractGlimpse: offsets must be"):
            s.run(af.image.extract_glimpse(x, [2, 2], [[0.0, 0.0], [0.0, 0.0]]))
