"""CPU array kernels (actorflow/kernels/cpu/array.py) against numpy references and TF semantics."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.array import strided_slice_spec
from actorflow.kernels.registry import get_kernel

ALL_DTYPES = (np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_)
i32 = np.int32


def kernel(op, **attrs):
    return get_kernel(op, "CPU").factory(attrs)


def run(op, *inputs, **attrs):
    return kernel(op, **attrs)(*inputs)


def vec(*v, dtype=np.int32):
    return np.array(v, dtype=dtype)


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(-50, 50, size=shape).astype(dt)
    return rng.uniform(-5, 5, size=shape).astype(dt)


def same(got, want):
    want = np.asarray(want)
    assert np.asarray(got).dtype == want.dtype, (np.asarray(got).dtype, want.dtype)
    assert np.shape(got) == want.shape, (np.shape(got), want.shape)
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------------------------
# Identity and re-views.

@pytest.mark.parametrize("op", ["Identity", "StopGradient", "PlaceholderWithDefault"])
def test_identity_ops(op):
    x = sample((2, 3), np.float32)
    assert run(op, x) is x
    s = np.float16(2)
    assert run(op, s) is s


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reshape(dtype):
    x = sample((2, 3, 4), dtype)
    same(run("Reshape", x, vec(4, -1)), x.reshape(4, 6))
    same(run("Reshape", x, vec(24, dtype=np.int64)), x.reshape(24))
    same(run("Reshape", np.asarray(x[0, 0, :1]), vec()), x[0, 0, 0].reshape(()))
    same(run("Reshape", np.zeros((0, 3), dtype), vec(3, 0)), np.zeros((3, 0), dtype))
    same(run("Reshape", x.reshape(-1)[0], vec(1, 1)), x.reshape(-1)[:1].reshape(1, 1))


def test_reshape_errors():
    x = np.zeros((2, 3))
    with pytest.raises(InvalidArgumentError, match="6 values"):
        run("Reshape", x, vec(4, 2))
    with pytest.raises(InvalidArgumentError, match="one unknown"):
        run("Reshape", x, vec(-1, -1))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_transpose(dtype):
    x = sample((2, 3, 4), dtype)
    r = run("Transpose", x, vec(2, 0, 1))
    same(r, np.transpose(x, (2, 0, 1)))
    assert r.flags.c_contiguous
    same(run("Transpose", np.asarray(x[0, 0, 0]), vec()), np.asarray(x[0, 0, 0]))
    with pytest.raises(InvalidArgumentError, match="not a permutation"):
        run("Transpose", x, vec(0, 0, 1))


def test_expand_dims_and_squeeze():
    x = sample((2, 3), np.float32)
    for a in (0, 1, 2, -1, -3):
        same(run("ExpandDims", x, i32(a)), np.expand_dims(x, a))
    same(run("ExpandDims", x, vec(1)), np.expand_dims(x, 1))
    same(run("ExpandDims", np.float64(1.5), i32(0)), np.array([1.5]))
    with pytest.raises(InvalidArgumentError):
        run("ExpandDims", x, i32(3))
    y = sample((1, 2, 1, 3, 1), np.int64)
    same(run("Squeeze", y), y.reshape(2, 3))
    same(run("Squeeze", y, squeeze_dims=()), y.reshape(2, 3))
    same(run("Squeeze", y, squeeze_dims=(0, -1)), y.reshape(2, 1, 3))
    same(run("Squeeze", np.zeros((1, 1))), np.zeros(()))
    with pytest.raises(InvalidArgumentError, match="Can not squeeze dim\\[1\\]"):
        run("Squeeze", y, squeeze_dims=(1,))


# ----------------------------------------------------------------------------------------------
# Concatenation, splitting, stacking.

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_v2(dtype):
    a, b, c = sample((2, 3), dtype, 1), sample((2, 1), dtype, 2), sample((2, 0), dtype, 3)
    same(run("ConcatV2", a, b, c, i32(1), N=3), np.concatenate([a, b, c], axis=1))
    same(run("ConcatV2", a, b, c, i32(-1), N=3), np.concatenate([a, b, c], axis=1))
    same(run("ConcatV2", a, a, np.int64(0), N=2), np.concatenate([a, a], axis=0))
    assert run("ConcatV2", a, i32(0), N=1) is a
    with pytest.raises(InvalidArgumentError, match="scalars"):
        run("ConcatV2", np.float32(1), np.float32(2), i32(0), N=2)
    with pytest.raises(InvalidArgumentError, match="should match"):
        run("ConcatV2", a, b, i32(0), N=2)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split(dtype, axis):
    x = sample((4, 6), dtype)
    got = run("Split", i32(axis), x, num_split=2)
    for g, w in zip(got, np.split(x, 2, axis=axis)):
        same(g, w)
        assert g.flags.c_contiguous
    assert len(got) == 2
    with pytest.raises(InvalidArgumentError, match="evenly divide"):
        run("Split", i32(axis), x, num_split=5)


def test_split_v():
    x = sample((3, 7), np.float32)
    got = run("SplitV", x, vec(2, -1, 1), i32(1), num_split=3)
    for g, w in zip(got, np.split(x, [2, 6], axis=1)):
        same(g, w)
    got = run("SplitV", x, vec(0, 3, dtype=np.int64), i32(0), num_split=2)
    same(got[0], x[:0])
    same(got[1], x)
    with pytest.raises(InvalidArgumentError):
        run("SplitV", x, vec(2, 2), i32(1), num_split=2)
    with pytest.raises(InvalidArgumentError, match="one -1"):
        run("SplitV", x, vec(-1, -1), i32(1), num_split=2)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_pack_unpack(dtype, axis):
    xs = [sample((2, 3), dtype, s) for s in range(4)]
    packed = run("Pack", *xs, N=4, axis=axis)
    same(packed, np.stack(xs, axis=axis))
    parts = run("Unpack", packed, num=4, axis=axis)
    assert len(parts) == 4
    for p, x in zip(parts, xs):
        same(p, x)
        assert p.flags.c_contiguous


def test_pack_unpack_edge_cases():
    same(run("Pack", np.float32(1), np.float32(2), N=2), np.array([1, 2], np.float32))
    parts = run("Unpack", np.array([1, 2, 3], np.int32), num=3)
    assert [int(p) for p in parts] == [1, 2, 3] and all(np.asarray(p).dtype == np.int32 for p in parts)
    assert run("Unpack", np.zeros((0, 2)), num=0) == ()
    with pytest.raises(InvalidArgumentError, match="Shapes of all inputs must match"):
        run("Pack", np.zeros(2), np.zeros(3), N=2)
    with pytest.raises(InvalidArgumentError, match="must equal 3"):
        run("Unpack", np.zeros((2, 2)), num=3)


# ----------------------------------------------------------------------------------------------
# Slice and StridedSlice.

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_slice(dtype):
    x = sample((4, 5, 6), dtype)
    same(run("Slice", x, vec(1, 0, 2), vec(2, -1, 3)), x[1:3, :, 2:5])
    same(run("Slice", x, vec(4, 5, 6, dtype=np.int64), vec(0, 0, 0, dtype=np.int64)), x[4:, 5:, 6:])
    with pytest.raises(InvalidArgumentError, match="begin"):
        run("Slice", x, vec(5, 0, 0), vec(-1, -1, -1))
    with pytest.raises(InvalidArgumentError, match="size"):
        run("Slice", x, vec(2, 0, 0), vec(3, -1, -1))


def tf_encode(index):
    """Encodes a Python index tuple into StridedSlice inputs exactly as tf.Tensor.__getitem__."""
    begin, end, strides = [], [], []
    masks = dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    for i, s in enumerate(index):
        bit = 1 << i
        if s is Ellipsis:
            masks["ellipsis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif s is None:
            masks["new_axis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif isinstance(s, slice):
            begin.append(0 if s.start is None else s.start)
            end.append(0 if s.stop is None else s.stop)
            strides.append(1 if s.step is None else s.step)
            if s.start is None:
                masks["begin_mask"] |= bit
            if s.stop is None:
                masks["end_mask"] |= bit
        else:
            begin.append(s), end.append(s + 1), strides.append(1)
            masks["shrink_axis_mask"] |= bit
    return vec(*begin), vec(*end), vec(*strides), masks


STRIDED_CASES = [
    (slice(1, 3),), (slice(None, None, -1),), (Ellipsis, 0), (slice(None), None, 2), (-1,),
    (slice(1, None), Ellipsis, slice(None, None, 2)), (slice(-100, 100),), (slice(100, -100, -2),),
    (None, Ellipsis, None), (1, 2, 3), (Ellipsis,), (), (slice(3, 1),), (0, slice(None, None, -2), -1),
    (None, 1, None, slice(2, 0, -1)), (Ellipsis, None),
]


@pytest.mark.parametrize("index", STRIDED_CASES, ids=str)
@pytest.mark.parametrize("dtype", (np.float32, np.int64, np.bool_))
def test_strided_slice_cases(index, dtype):
    x = sample((3, 4, 5), dtype)
    b, e, s, masks = tf_encode(index)
    got = run("StridedSlice", x, b, e, s, **masks)
    want = np.asarray(x[index])
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert np.shape(got) == want.shape
    if isinstance(got, np.ndarray):
        assert got.flags.c_contiguous


def test_strided_slice_tf_mask_details():
    x = np.arange(24).reshape(2, 3, 4)
    # Masked bounds ignore the begin/end values, whatever they are.
    got = run("StridedSlice", x, vec(9, 9), vec(-9, -9), vec(1, -1), begin_mask=3, end_mask=3)
    same(got, x[:, ::-1])
    # ellipsis takes precedence over new_axis on the same entry; new_axis over shrink.
    same(run("StridedSlice", x, vec(0, 0), vec(0, 0), vec(1, 1), ellipsis_mask=1, new_axis_mask=1,
             begin_mask=2, end_mask=2), x)
    same(run("StridedSlice", x, vec(0), vec(1), vec(1), new_axis_mask=1, shrink_axis_mask=1), x[None])
    # a shrunk axis ignores end and (positive) stride, and takes negative indices from the end
    same(run("StridedSlice", x, vec(-1), vec(0), vec(3), shrink_axis_mask=1), x[-1])
    same(run("StridedSlice", np.arange(5), vec(1), vec(2), vec(1), shrink_axis_mask=1), np.int64(1))


def test_strided_slice_errors():
    x = np.zeros((2, 3))
    with pytest.raises(InvalidArgumentError, match="out of bounds"):
        run("StridedSlice", x, vec(2), vec(3), vec(1), shrink_axis_mask=1)
    with pytest.raises(InvalidArgumentError, match="non-zero"):
        run("StridedSlice", x, vec(0), vec(1), vec(0))
    with pytest.raises(InvalidArgumentError, match="Multiple ellipses"):
        run("StridedSlice", x, vec(0, 0), vec(0, 0), vec(1, 1), ellipsis_mask=3)
    with pytest.raises(InvalidArgumentError, match="only stride 1"):
        run("StridedSlice", x, vec(1), vec(0), vec(-1), shrink_axis_mask=1)
    with pytest.raises(InvalidArgumentError, match="Index out of range"):
        run("StridedSlice", x, vec(0, 0, 0), vec(1, 1, 1), vec(1, 1, 1))
    with pytest.raises(InvalidArgumentError, match="equal size"):
        run("StridedSlice", x, vec(0, 0), vec(1), vec(1, 1))


def test_strided_slice_spec_is_a_pure_function():
    spec = strided_slice_spec(3, [1, 0, 0], [3, 0, 0], [1, 1, 1],
                              {"ellipsis_mask": 2, "new_axis_mask": 4})
    assert spec == (slice(1, 3, 1), slice(None), slice(None), None)
    assert strided_slice_spec(2, [0], [1], [1], {"shrink_axis_mask": 1}) == (0,)
    assert strided_slice_spec(0, [], [], [], {}) == ()


@st.composite
def index_and_shape(draw):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    n_real = draw(st.integers(0, rank))
    items = []
    dim = 0
    for _ in range(n_real):
        d = shape[dim]
        kind = draw(st.sampled_from(["int", "slice", "slice"] if d > 0 else ["slice"]))
        if kind == "int":
            items.append(draw(st.integers(-d, d - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-7, 7))
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
        dim += 1
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return shape, tuple(items)


@settings(max_examples=300, deadline=None)
@given(index_and_shape())
def test_strided_slice_matches_numpy_indexing(case):
    shape, index = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    b, e, s, masks = tf_encode(index)
    try:
        want = np.asarray(x[index])
    except IndexError:  # an index out of range (the ellipsis moved it onto a smaller dimension)
        with pytest.raises(InvalidArgumentError, match="out of bounds"):
            run("StridedSlice", x, b, e, s, **masks)
        return
    got = run("StridedSlice", x, b, e, s, **masks)
    assert np.shape(got) == want.shape
    np.testing.assert_array_equal(got, want)
    # the gradient scatters dy back into the sliced positions
    dy = np.arange(1, want.size + 1, dtype=np.float32).reshape(want.shape)
    dx = run("StridedSliceGrad", vec(*shape), b, e, s, dy, **masks)
    ref = np.zeros(shape, np.float32)
    ref[index] = dy
    same(dx, ref)


def test_strided_slice_grad():
    # dx[:, 3::-2] = dy
    dy = np.arange(1, 7, dtype=np.float64).reshape(3, 2)
    want = np.zeros((3, 4))
    want[:, 3::-2] = dy
    same(run("StridedSliceGrad", vec(3, 4), vec(0, 3), vec(0, 0), vec(1, -2), dy, begin_mask=1,
             end_mask=3), want)
    with pytest.raises(InvalidArgumentError, match="does not match"):
        run("StridedSliceGrad", vec(3, 4), vec(0), vec(2), vec(1), np.ones((3, 4)))
    dx = run("StridedSliceGrad", vec(3), vec(1), vec(2), vec(1), np.float16(5), shrink_axis_mask=1)
    same(dx, np.array([0, 5, 0], np.float16))


# ----------------------------------------------------------------------------------------------
# Tile, Pad, BroadcastTo, Fill, *Like.

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tile(dtype):
    x = sample((2, 3), dtype)
    same(run("Tile", x, vec(2, 3)), np.tile(x, (2, 3)))
    same(run("Tile", x, vec(0, 1, dtype=np.int64)), np.zeros((0, 3), dtype))
    assert run("Tile", x, vec(1, 1)) is x
    same(run("Tile", np.asarray(x[0, 0]), vec()), np.asarray(x[0, 0]))
    with pytest.raises(InvalidArgumentError, match="length 2"):
        run("Tile", x, vec(2))
    assert get_kernel("Tile").cost(x, vec(2, 3)) == 36


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad(dtype):
    x = sample((2, 3), dtype)
    p = np.array([[1, 0], [2, 3]], np.int32)
    same(run("Pad", x, p), np.pad(x, p.tolist()))
    cval = np.asarray(sample((), dtype, 5))
    same(run("PadV2", x, p, cval), np.pad(x, p.tolist(), constant_values=cval))
    same(run("Pad", np.float32(3), np.zeros((0, 2), np.int32)), np.float32(3))
    same(run("Pad", np.zeros((0, 2), dtype), np.array([[1, 1], [0, 0]])), np.zeros((2, 2), dtype))
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        run("Pad", x, np.array([[0, -1], [0, 0]]))
    with pytest.raises(InvalidArgumentError, match="rank"):
        run("Pad", x, np.array([[0, 1]]))
    assert get_kernel("Pad").cost(x, p) == 3 * 8


def test_broadcast_to():
    x = sample((3, 1), np.float16)
    r = run("BroadcastTo", x, vec(2, 3, 4))
    same(r, np.broadcast_to(x, (2, 3, 4)))
    assert r.flags.c_contiguous and r.flags.writeable
    assert run("BroadcastTo", x, vec(3, 1)) is x
    same(run("BroadcastTo", np.int32(7), vec(2)), np.array([7, 7], np.int32))
    with pytest.raises(InvalidArgumentError, match="Incompatible"):
        run("BroadcastTo", x, vec(3, 2, 4))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_fill_and_likes(dtype):
    v = np.asarray(sample((), dtype))
    same(run("Fill", vec(2, 3), v), np.full((2, 3), v, dtype))
    same(run("Fill", vec(), v), v)
    same(run("Fill", vec(0, 4, dtype=np.int64), v), np.zeros((0, 4), dtype))
    x = sample((2, 0, 3) if dtype == np.bool_ else (4, 2), dtype)
    same(run("ZerosLike", x), np.zeros_like(x))
    same(run("OnesLike", x), np.ones_like(x))
    same(run("ZerosLike", np.asarray(v)), np.zeros((), dtype))
    with pytest.raises(InvalidArgumentError):
        run("Fill", vec(-1), v)


# ----------------------------------------------------------------------------------------------
# OneHot, Range.

@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("dtype", (np.float32, np.int64, np.bool_))
def test_one_hot(axis, dtype):
    idx = np.array([[0, 2, -1], [3, 1, 5]], np.int32)  # -1 and 5 are out of range: all off
    on, off = np.asarray(np.ones((), dtype)), np.asarray(np.zeros((), dtype))
    if dtype == np.float32:
        on, off = np.float32(5), np.float32(-1)
    got = run("OneHot", idx, i32(4), on, off, axis=axis)
    ref = np.where(idx[..., None] == np.arange(4), on, off)
    ref = np.moveaxis(ref, -1, axis if axis != -1 else -1)
    same(got, ref.astype(dtype))
    same(run("OneHot", np.int64(2), i32(3), on, off), np.where(np.arange(3) == 2, on, off).astype(dtype))
    assert run("OneHot", np.zeros((0,), np.int32), i32(3), on, off).shape == (0, 3)


def test_one_hot_errors():
    with pytest.raises(InvalidArgumentError, match="axis"):
        run("OneHot", vec(1, 2), i32(3), np.float32(1), np.float32(0), axis=3)
    with pytest.raises(InvalidArgumentError, match="depth"):
        run("OneHot", vec(1, 2), i32(-1), np.float32(1), np.float32(0))


@pytest.mark.parametrize("args,dtype", [
    ((0, 5, 1), np.int32), ((3, 18, 4), np.int64), ((10, 2, -3), np.int32), ((5, 5, 1), np.int32),
    ((0.0, 1.0, 0.25), np.float32), ((1.0, -1.0, -0.3), np.float64), ((0.0, 2.0, 0.5), np.float16),
])
def test_range(args, dtype):
    start, limit, delta = (np.asarray(a, dtype) for a in args)
    got = run("Range", start, limit, delta)
    n = int(np.ceil(abs((float(limit) - float(start)) / float(delta))))
    want = (start + np.arange(n).astype(dtype) * delta).astype(dtype)
    same(got, want)


def test_range_errors():
    with pytest.raises(InvalidArgumentError, match="delta != 0"):
        run("Range", i32(0), i32(5), i32(0))
    with pytest.raises(InvalidArgumentError, match="start <= limit"):
        run("Range", i32(5), i32(0), i32(1))
    with pytest.raises(InvalidArgumentError, match="start >= limit"):
        run("Range", i32(0), i32(5), i32(-1))


# ----------------------------------------------------------------------------------------------
# Shape inspection.

@pytest.mark.parametrize("x", [np.zeros((2, 0, 3), np.float16), np.float32(1), np.array(True)], ids=str)
def test_shape_size_rank(x):
    same(run("Shape", x), np.array(np.shape(x), np.int32))
    same(run("Shape", x, out_type=np.dtype(np.int64)), np.array(np.shape(x), np.int64))
    same(run("Size", x), np.int32(np.size(x)))
    same(run("Size", x, out_type=np.dtype(np.int64)), np.int64(np.size(x)))
    same(run("Rank", x), np.int32(np.ndim(x)))
    assert get_kernel("Shape").cost(np.zeros(10 ** 6)) == 1


@pytest.mark.parametrize("s0,s1,r0,r1", [
    ((2, 3), (2, 3), (), ()),
    ((1,), (1,), (), ()),
    ((), (), (), ()),
    ((2, 3), (3,), (), (0,)),
    ((2, 1), (1, 3), (1,), (0,)),
    ((1, 3), (1, 1), (0,), (0, 1)),
    ((4, 1, 5), (2, 1, 1, 5), (0, 2), (1, 2)),
    ((), (2, 3), (0, 1), ()),
    ((0, 1), (1, 4), (1,), (0,)),
])
def test_broadcast_gradient_args(s0, s1, r0, r1):
    g0, g1 = run("BroadcastGradientArgs", vec(*s0), vec(*s1))
    same(g0, np.array(r0, np.int32))
    same(g1, np.array(r1, np.int32))
    # the reduction really undoes the broadcast
    out = np.broadcast_shapes(s0, s1)
    for shape, red in ((s0, r0), (s1, r1)):
        assert np.sum(np.ones(out), axis=tuple(red)).reshape(shape).shape == shape


def test_broadcast_gradient_args_errors_and_int64():
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        run("BroadcastGradientArgs", vec(2, 3), vec(4))
    g0, g1 = run("BroadcastGradientArgs", vec(5, 1, dtype=np.int64), vec(5, dtype=np.int64))
    assert g0.dtype == np.int64 and g1.dtype == np.int64


# ----------------------------------------------------------------------------------------------
# GatherV2.

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx_shape", [(), (0,), (4,), (2, 3)], ids=str)
def test_gather(dtype, axis, idx_shape):
    params = sample((5, 4, 3), dtype)
    n = params.shape[axis]
    idx = np.random.default_rng(1).integers(0, n, idx_shape).astype(np.int32)
    same(run("GatherV2", params, idx, i32(axis)), np.take(params, idx, axis=axis))
    same(run("GatherV2", params, idx.astype(np.int64), np.int64(axis)), np.take(params, idx, axis=axis))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("row_shape", [(), (1,), (7,), (3, 2)], ids=str)
@pytest.mark.parametrize("idx_dtype", (np.int32, np.int64))
def test_gather_many_rows(dtype, row_shape, idx_dtype):
    params = sample((300,) + row_shape, dtype)
    idx = np.random.default_rng(2).integers(0, 300, (50, 41)).astype(idx_dtype)
    same(run("GatherV2", params, idx, i32(0)), np.take(params, idx, axis=0))
    bad = idx.copy()
    bad[3, 7] = 300
    with pytest.raises(InvalidArgumentError, match=r"indices\[3,7\] = 300 is not in \[0, 300\)"):
        run("GatherV2", params, bad, i32(0))


def test_gather_rejects_negative_indices():
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = -1 is not in \[0, 3\)"):
        run("GatherV2", np.arange(3.0), vec(0, -1), i32(0))
    with pytest.raises(InvalidArgumentError):
        run("GatherV2", np.arange(2000.0), -np.ones(2000, np.int64), i32(0))
    with pytest.raises(InvalidArgumentError, match="scalar"):
        run("GatherV2", np.float32(1), vec(0), i32(0))


def _batched_gather_ref(params, indices, axis, bd):
    if bd == 0:
        return np.take(params, indices, axis=axis)
    return np.stack([_batched_gather_ref(p, i, axis - 1, bd - 1) for p, i in zip(params, indices)])


@pytest.mark.parametrize("bd,axis", [(1, 1), (1, 2), (2, 2), (2, 3), (-1, 2), (1, -1)])
def test_gather_batch_dims(bd, axis):
    params = sample((2, 3, 5, 4), np.float32)
    indices = np.random.default_rng(3).integers(0, 4, (2, 3, 6)).astype(np.int32)
    b = bd + indices.ndim if bd < 0 else bd
    a = axis % params.ndim
    indices = indices[:, :, :] if b > 1 else indices[:, 0]  # rank b + 1
    indices = indices % params.shape[a]
    got = run("GatherV2", params, indices, i32(axis), batch_dims=bd)
    same(got, _batched_gather_ref(params, indices, a, bd + indices.ndim if bd < 0 else bd))


def test_gather_batch_dims_errors():
    params = np.zeros((2, 3, 4))
    with pytest.raises(InvalidArgumentError, match="less than or equal to axis"):
        run("GatherV2", params, np.zeros((2, 3), np.int32), i32(0), batch_dims=1)
    with pytest.raises(InvalidArgumentError, match="must equal"):
        run("GatherV2", params, np.zeros((3, 1), np.int32), i32(1), batch_dims=1)


# ----------------------------------------------------------------------------------------------
# UnsortedSegmentSum, DynamicPartition, DynamicStitch, InvertPermutation.

@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.float64, np.int32, np.int64, np.int8))
@pytest.mark.parametrize("data_shape,ids_shape", [((10,), (10,)), ((10, 3), (10,)), ((4, 5, 2), (4, 5)),
                                                  ((0, 3), (0,)), ((), ())], ids=str)
def test_unsorted_segment_sum(dtype, data_shape, ids_shape):
    data = sample(data_shape, dtype)
    ids = np.random.default_rng(4).integers(-1, 6, ids_shape).astype(np.int32)  # -1 is dropped
    got = run("UnsortedSegmentSum", data, ids, i32(6))
    inner = data_shape[len(ids_shape):]
    ref = np.zeros((6,) + inner, np.float64)
    keep = ids >= 0
    np.add.at(ref, ids[keep], data.astype(np.float64)[keep])
    assert got.dtype == np.dtype(dtype) and got.shape == (6,) + inner
    if np.dtype(dtype).kind == "i":
        same(got, ref.astype(np.int64).astype(dtype))  # integer sums wrap, as in TF
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-3 if dtype == np.float16 else 1e-6)


def test_unsorted_segment_sum_errors():
    with pytest.raises(InvalidArgumentError, match=r"segment_ids\[2\] = 4 is not in \[0, 4\)"):
        run("UnsortedSegmentSum", np.ones(3), vec(0, 1, 4), i32(4))
    with pytest.raises(InvalidArgumentError, match="does not start with"):
        run("UnsortedSegmentSum", np.ones((3, 2)), vec(0, 1), i32(4))
    big = run("UnsortedSegmentSum", np.ones((5000, 4), np.float32), np.arange(5000, dtype=np.int64) % 7,
              np.int64(7))
    np.testing.assert_array_equal(big[:, 0], np.bincount(np.arange(5000) % 7))


@pytest.mark.parametrize("num", [1, 3, 7])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dynamic_partition_and_stitch_round_trip(num, dtype):
    data = sample((4, 5, 2), dtype)
    parts = np.random.default_rng(5).integers(0, num, (4, 5)).astype(np.int32)
    # A single-output op's kernel returns its one array, not a 1-tuple (the kernel contract, docs/ops.md).
    def partition(x):
        out = run("DynamicPartition", x, parts, num_partitions=num)
        return (out,) if num == 1 else out
    got = partition(data)
    assert len(got) == num
    for i in range(num):
        same(got[i], data[parts == i])
    # stitching the partitioned positions back restores the data
    positions = partition(np.arange(20, dtype=np.int32).reshape(4, 5))
    merged = run("DynamicStitch", *positions, *got, N=num)
    same(merged, data.reshape(20, 2))


def test_dynamic_partition_errors_and_scalars():
    with pytest.raises(InvalidArgumentError, match=r"partitions\[1\] = 2 is not in \[0, 2\)"):
        run("DynamicPartition", np.arange(3), vec(0, 2, 1), num_partitions=2)
    r = run("DynamicPartition", np.float32(3), np.int32(1), num_partitions=2)
    same(r[0], np.zeros(0, np.float32))
    same(r[1], np.array([3], np.float32))


def test_dynamic_stitch_tf_example():
    # The example of tf.dynamic_stitch's documentation, with a repeated index (the later wins).
    indices = [np.int32(6), vec(4, 1), np.array([[5, 2], [0, 3]], np.int32), vec(1)]
    data = [np.array([61, 62], np.float32), np.array([[41, 42], [11, 12]], np.float32),
            np.array([[[51, 52], [21, 22]], [[1, 2], [31, 32]]], np.float32), np.array([[99, 98]], np.float32)]
    got = run("DynamicStitch", *indices, *data, N=4)
    same(got, np.array([[1, 2], [99, 98], [21, 22], [31, 32], [41, 42], [51, 52], [61, 62]], np.float32))
    # positions no index names are zero; no indices at all gives an empty result
    same(run("DynamicStitch", vec(2), np.array([7], np.int64), N=1), np.array([0, 0, 7], np.int64))
    same(run("DynamicStitch", vec(), np.zeros((0, 3)), N=1), np.zeros((0, 3)))
    with pytest.raises(InvalidArgumentError):
        run("DynamicStitch", vec(-1), np.ones(1), N=1)
    with pytest.raises(InvalidArgumentError, match="does not start with"):
        run("DynamicStitch", vec(0, 1), np.ones(3), N=1)


@pytest.mark.parametrize("dtype", (np.int32, np.int64))
def test_invert_permutation(dtype):
    p = np.random.default_rng(6).permutation(10).astype(dtype)
    got = run("InvertPermutation", p)
    same(got, np.argsort(p).astype(dtype))
    same(run("InvertPermutation", np.zeros(0, dtype)), np.zeros(0, dtype))
    with pytest.raises(InvalidArgumentError, match="duplicated"):
        run("InvertPermutation", np.array([0, 0, 1], dtype))
    with pytest.raises(InvalidArgumentError, match="not in"):
        run("InvertPermutation", np.array([0, 3, 1], dtype))
