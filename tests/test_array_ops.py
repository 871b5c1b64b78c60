"""Array ops: graph-time shape/dtype inference and errors, numerics against numpy through
af.Session (every indexing form, rank-0 and empty tensors), and gradients against finite
differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as af
from actorflow.graph.ops import array_ops
from actorflow.graph.ops.infer import constant_value
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(7)


def ph(dtype, shape=None, name=None):
    return af.placeholder(dtype, shape, name=name)


def dims(t):
    return t.shape.dims


def randn(*shape):
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------------------------------------
# Inference: Reshape, Transpose, ExpandDims, Squeeze
# ---------------------------------------------------------------------------------------------

def test_reshape_infers_minus_one_statically():
    x = ph(af.float32, [None, 28, 28, 1])
    assert dims(af.reshape(x, [-1, 784])) == (None, 784)
    assert dims(af.reshape(ph(af.float32, [6, 4]), [-1, 8])) == (3, 8)
    assert dims(af.reshape(ph(af.float32, [6, 4]), [2, -1, 3])) == (2, 4, 3)
    assert dims(af.reshape(ph(af.float32, [6, 4]), [24])) == (24,)
    assert dims(af.reshape(ph(af.float32, [1]), [])) == ()
    assert dims(af.reshape(ph(af.float32, [0, 3]), [0, -1])) == (0, None)
    assert dims(af.reshape(ph(af.float32), [3, -1])) == (3, None)
    assert dims(af.reshape(ph(af.float32, [2, 3]), ph(af.int32, [3]))) == (None, None, None)
    assert af.reshape(ph(af.float32, [2, 3]), ph(af.int32)).shape.dims is None


def test_reshape_with_tensor_entries_packs_and_infers_the_rest():
    x = ph(af.float32, [None, 12])
    batch = af.shape(x)[0]
    y = af.reshape(x, [batch, 3, -1])
    assert y.op.inputs[1].op.type == "Pack"
    assert dims(y) == (None, 3, None)
    # With a fully known input a single unknown entry is determined.
    z = af.reshape(ph(af.float32, [4, 6]), [ph(af.int32, []), 6])
    assert dims(z) == (4, 6)


def test_reshape_errors_name_both_element_counts_and_the_op():
    x = ph(af.float32, [4, 5])
    with pytest.raises(ValueError) as e:
        af.reshape(x, [3, 3], name="bad")
    msg = str(e.value)
    assert "20" in msg and "9" in msg and "'bad'" in msg and "Reshape" in msg
    with pytest.raises(ValueError, match="multiple of 3"):
        af.reshape(x, [3, -1])
    with pytest.raises(ValueError, match="one dimension"):
        af.reshape(x, [-1, -1])
    with pytest.raises(ValueError, match="non-negative"):
        af.reshape(x, [-2, 10])
    with pytest.raises(ValueError, match="multiple of 7"):
        af.reshape(ph(af.float32, [None, 7]), [10])
    with pytest.raises(TypeError, match="int32 or int64"):
        af.reshape(x, af.constant([2.0, 10.0]))


def test_reshape_accepts_int64_shapes_and_names_like_tf():
    y = af.reshape(ph(af.float32, [6]), af.constant([2, 3], dtype=af.int64), name="r")
    assert dims(y) == (2, 3) and y.op.name == "r"
    z = af.reshape(ph(af.float32, [6]), [3, 2], name="r2")
    assert z.op.inputs[1].op.name == "r2/shape"
    w = af.reshape(ph(af.float32, [6]), [6])
    assert w.op.name == "Reshape" and af.reshape(w, [6]).op.name == "Reshape_1"


def test_transpose_inference():
    x = ph(af.float32, [2, None, 4])
    assert dims(af.transpose(x)) == (4, None, 2)
    assert dims(af.transpose(x, [1, 0, 2])) == (None, 2, 4)
    assert dims(af.transpose(ph(af.float32), [1, 0])) == (None, None)
    assert dims(af.transpose(x, ph(af.int32, [3]))) == (None, None, None)
    assert af.transpose(ph(af.float32)).shape.dims is None
    with pytest.raises(ValueError, match="permutation"):
        af.transpose(x, [0, 0, 1])
    with pytest.raises(ValueError, match="rank 3"):
        af.transpose(x, [1, 0])


def test_expand_dims_and_squeeze_inference():
    x = ph(af.float32, [2, 3])
    assert dims(af.expand_dims(x, 0)) == (1, 2, 3)
    assert dims(af.expand_dims(x, -1)) == (2, 3, 1)
    assert dims(af.expand_dims(x, 2)) == (2, 3, 1)
    assert dims(af.expand_dims(x, dim=1)) == (2, 1, 3)
    assert dims(af.expand_dims(af.constant(1.0), 0)) == (1,)
    with pytest.raises(ValueError, match="out of range"):
        af.expand_dims(x, 4)
    y = ph(af.float32, [1, 2, 1, 3])
    assert dims(af.squeeze(y)) == (2, 3)
    assert dims(af.squeeze(y, [0])) == (2, 1, 3)
    assert dims(af.squeeze(y, axis=-2)) == (1, 2, 3)
    assert dims(af.squeeze(y, squeeze_dims=[0, 2])) == (2, 3)
    assert af.squeeze(ph(af.float32, [None, 1])).shape.dims is None
    assert dims(af.squeeze(ph(af.float32, [None, 1]), [1])) == (None,)
    with pytest.raises(ValueError, match=r"Can not squeeze dim\[1\]"):
        af.squeeze(y, [1])


# ---------------------------------------------------------------------------------------------
# Inference: ConcatV2, Split, SplitV, Pack, Unpack
# ---------------------------------------------------------------------------------------------

def test_concat_inference_and_errors():
    a, b = ph(af.float32, [2, 3]), ph(af.float32, [None, 3])
    assert dims(af.concat([a, b], 0)) == (None, 3)
    assert dims(af.concat([a, a], -1)) == (2, 6)
    assert dims(af.concat([a, b], ph(af.int32, []))) == (None, None)
    assert dims(af.concat([a, [[1.0, 2.0, 3.0]]], 0)) == (3, 3)
    one = af.concat([a], 0, name="single")
    assert one.op.type == "Identity" and one.op.name == "single"
    with pytest.raises(ValueError) as e:
        af.concat([a, ph(af.float32, [2, 4])], 0, name="cat")
    assert "Dimension 1" in str(e.value) and "'cat'" in str(e.value)
    with pytest.raises(ValueError, match="same rank"):
        af.concat([a, ph(af.float32, [2])], 0)
    with pytest.raises(ValueError, match="scalars"):
        af.concat([af.constant(1.0), af.constant(2.0)], 0)
    with pytest.raises(TypeError, match="dtype"):
        af.concat([a, ph(af.float64, [2, 3])], 0)


def test_split_inference_and_errors():
    x = ph(af.float32, [None, 6])
    parts = af.split(x, 3, axis=1)
    assert len(parts) == 3 and all(dims(p) == (None, 2) for p in parts)
    one = af.split(x, 1, axis=1)
    assert isinstance(one, list) and len(one) == 1 and dims(one[0]) == (None, 6)
    a, b, c = af.split(x, [1, -1, 2], 1)
    assert (dims(a), dims(b), dims(c)) == ((None, 1), (None, 3), (None, 2))
    p, q = af.split(x, af.constant([2, 4], dtype=af.int64), axis=-1)
    assert (dims(p), dims(q)) == ((None, 2), (None, 4))
    r = af.split(x, ph(af.int32, [None]), axis=1, num=2)
    assert [dims(t) for t in r] == [(None, None)] * 2
    with pytest.raises(ValueError, match="evenly divide"):
        af.split(x, 4, axis=1)
    with pytest.raises(ValueError, match="sum to"):
        af.split(x, [1, 2], axis=1)
    with pytest.raises(ValueError, match="num"):
        af.split(x, ph(af.int32, [None]), axis=1)


def test_stack_unstack_inference():
    a, b = ph(af.float32, [None, 3]), ph(af.float32, [2, None])
    assert dims(af.stack([a, b])) == (2, 2, 3)
    assert dims(af.stack([a, b], axis=1)) == (2, 2, 3)
    assert dims(af.stack([a, b], axis=-1)) == (2, 3, 2)
    c = af.stack([1, 2, 3])
    assert c.op.type == "Const" and dims(c) == (3,)
    mixed = af.stack([ph(af.float64, []), 2.0])
    assert mixed.dtype is af.float64 and dims(mixed) == (2,)
    with pytest.raises(ValueError, match="must match"):
        af.stack([a, ph(af.float32, [2, 4])])
    with pytest.raises(ValueError, match="out of range"):
        af.stack([a, a], axis=3)
    parts = af.unstack(ph(af.float32, [2, 3, 4]), axis=1)
    assert len(parts) == 3 and dims(parts[0]) == (2, 4)
    assert len(af.unstack(ph(af.float32, [1, 5]))) == 1
    assert af.unstack(ph(af.float32, [0, 5])) == []
    with pytest.raises(ValueError, match="num"):
        af.unstack(ph(af.float32, [None, 3]))
    with pytest.raises(ValueError, match="num is 4"):
        array_ops.Unpack(ph(af.float32, [3]), num=4, axis=0)


# ---------------------------------------------------------------------------------------------
# Inference: Slice, StridedSlice and Python indexing
# ---------------------------------------------------------------------------------------------

def test_slice_inference():
    x = ph(af.float32, [5, None, 4])
    assert dims(af.slice(x, [1, 0, 0], [2, -1, -1])) == (2, None, 4)
    assert dims(af.slice(x, ph(af.int32, [3]), [2, 3, 1])) == (2, 3, 1)
    assert dims(af.slice(x, [0, 0, 0], ph(af.int32, [3]))) == (None, None, None)
    with pytest.raises(ValueError, match=r"size\[0\]"):
        af.slice(x, [4, 0, 0], [2, 1, 1])
    with pytest.raises(ValueError, match="size 3"):
        af.slice(x, [0, 0], [1, 1])
    # The wrapper unifies int32 and int64 arguments; the raw op insists on one dtype.
    mixed = af.slice(x, af.constant([0, 0, 0], dtype=af.int64), [1, 1, 1])
    assert mixed.op.inputs[2].dtype is af.int64 and dims(mixed) == (1, 1, 1)
    with pytest.raises(TypeError, match="same dtype"):
        array_ops.Slice(x, af.constant([0, 0, 0], dtype=af.int64), af.constant([1, 1, 1]))


# Keys applied to a (4, 5, 6) tensor: the inferred static shape must be numpy's.
INDEX_KEYS = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, -1),), (slice(None, None, 2),),
    (slice(-2, None),), (slice(None, -1),), (slice(3, 1, -1),), (slice(10, None),), (slice(-10, 2),),
    (slice(1, 1),), (slice(3, 1),), (0, 1, 2), (-1, -1, -1), (Ellipsis,), (Ellipsis, 0),
    (0, Ellipsis), (Ellipsis, slice(None, None, -2)), (1, Ellipsis, 2), (None,), (None, 1),
    (slice(None), None, 0), (Ellipsis, None), (None, Ellipsis, None), (1, None, Ellipsis, None, -1),
    (slice(None, None, 3), slice(4, 0, -2), slice(-1, -7, -1)), (slice(1, None), None, None, 2),
    (), (slice(None), slice(None), slice(None)), (slice(None, None, -4), 2, slice(5, None, -3)),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=[repr(k) for k in INDEX_KEYS])
def test_indexing_infers_numpy_shapes(key):
    x = ph(af.float64, [4, 5, 6])
    y = x[key]
    assert y.op.type == "StridedSlice"
    assert dims(y) == np.empty((4, 5, 6))[key].shape


def test_indexing_with_unknown_dimensions():
    x = ph(af.float32, [None, 3])
    assert dims(x[:, 0]) == (None,)
    assert dims(x[0]) == (3,)
    assert dims(x[1:, ::-1]) == (None, 3)
    assert dims(x[..., None]) == (None, 3, 1)
    assert x[1:, 0].shape.dims == (None,)
    assert af.placeholder(af.float32)[0].shape.dims is None
    i = ph(af.int32, [])
    assert dims(x[i]) == (3,)
    assert dims(x[:, i]) == (None,)
    assert dims(x[0, i:]) == (None,)
    assert dims(x[0, :i:-1]) == (None,)
    assert dims(ph(af.float32, [5, 3])[af.constant(1, dtype=af.int64)]) == (3,)


def test_indexing_errors():
    x = ph(af.float32, [4, 3])
    with pytest.raises(TypeError, match="valid indices"):
        x[1.5]
    with pytest.raises(TypeError, match="valid indices"):
        x[[0, 1]]
    with pytest.raises(TypeError, match="valid indices"):
        x[ph(af.int32, [2])]
    with pytest.raises(TypeError, match="valid indices"):
        x[ph(af.float32, [])]
    with pytest.raises(ValueError, match="out of bounds"):
        x[4]
    with pytest.raises(ValueError, match="out of bounds"):
        x[:, -4]
    with pytest.raises(ValueError, match="non-zero"):
        x[::0]
    with pytest.raises(ValueError, match="Index out of range"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="ellipses"):
        af.strided_slice(x, [0, 0], [0, 0], [1, 1], ellipsis_mask=3)


def test_strided_slice_masks():
    x = ph(af.float32, [4, 5, 6])
    y = af.strided_slice(x, [1, 0], [3, 0], [1, 1], end_mask=2)
    assert dims(y) == (2, 5, 6)
    y = af.strided_slice(x, [0, 2], [0, 3], strides=[1, 1], shrink_axis_mask=2, ellipsis_mask=1)
    assert dims(y) == (4, 5)
    y = af.strided_slice(x, [0, 0], [0, 0], [1, 1], new_axis_mask=1, begin_mask=2, end_mask=2)
    assert dims(y) == (1, 4, 5, 6)
    y = af.strided_slice(x, ph(af.int32, [2]), ph(af.int32, [2]), [1, 1], shrink_axis_mask=1)
    assert dims(y) == (None, 6)
    y = af.strided_slice(x, ph(af.int32, [1]), ph(af.int32, [1]), begin_mask=1, end_mask=1)
    assert dims(y) == (4, 5, 6)


# ---------------------------------------------------------------------------------------------
# Inference: Tile, Pad, Gather, OneHot, Fill, zeros/ones, Range, Shape/Size/Rank, ...
# ---------------------------------------------------------------------------------------------

def test_tile_and_pad_inference():
    x = ph(af.float32, [2, None])
    assert dims(af.tile(x, [3, 2])) == (6, None)
    assert dims(af.tile(x, [0, 2])) == (0, None)
    assert dims(af.tile(x, [1, 0])) == (2, 0)
    assert dims(af.tile(x, ph(af.int32, [2]))) == (None, None)
    with pytest.raises(ValueError, match="length 2"):
        af.tile(x, [1, 2, 3])
    assert dims(af.pad(x, [[1, 2], [3, 4]])) == (5, None)
    assert af.pad(x, [[1, 1], [1, 1]]).op.type == "Pad"
    padded = af.pad(x, [[1, 1], [1, 1]], constant_values=2.5)
    assert padded.op.type == "PadV2" and padded.op.inputs[2].dtype is af.float32
    assert dims(af.pad(x, ph(af.int32, [2, 2]))) == (None, None)
    with pytest.raises(ValueError, match="rank of inputs"):
        af.pad(x, [[1, 1]])
    with pytest.raises(ValueError, match="non-negative"):
        af.pad(x, [[-1, 1], [0, 0]])
    assert dims(af.pad(x, [[1, 1], [1, 1]], mode="reflect")) == (4, None)      # MirrorPad
    with pytest.raises(ValueError, match="minus 1 in REFLECT mode"):
        af.pad(x, [[2, 0], [1, 1]], mode="REFLECT")
    with pytest.raises(ValueError, match="Unknown padding mode"):
        af.pad(x, [[1, 1], [1, 1]], mode="WRAP")


def test_gather_inference():
    params = ph(af.float32, [10, 4, 5])
    assert dims(af.gather(params, [1, 2, 3])) == (3, 4, 5)
    assert dims(af.gather(params, ph(af.int64, [2, 7]), axis=1)) == (10, 2, 7, 5)
    assert dims(af.gather(params, 3, axis=-1)) == (10, 4)
    assert dims(af.gather(params, ph(af.int32, [10, 3]), axis=1, batch_dims=1)) == (10, 3, 5)
    assert dims(af.gather(params, ph(af.int32, [None, 3]), axis=2, batch_dims=-1)) == (10, 4, 3)
    assert dims(af.gather(params, [0], axis=ph(af.int32, []))) == (None, None, None)
    with pytest.raises(ValueError, match="axis"):
        af.gather(params, [0], axis=3)
    with pytest.raises(TypeError, match="int32 or int64"):
        af.gather(params, [0.5])
    with pytest.raises(ValueError, match="batch_dims"):
        af.gather(params, ph(af.int32, [10, 3]), axis=0, batch_dims=1)


def test_one_hot_inference():
    i = ph(af.int32, [None, 3])
    assert dims(af.one_hot(i, 5)) == (None, 3, 5)
    assert af.one_hot(i, 5).dtype is af.float32
    assert dims(af.one_hot(i, 5, axis=0)) == (5, None, 3)
    assert dims(af.one_hot(i, 5, axis=1)) == (None, 5, 3)
    assert af.one_hot(i, 5, on_value=1, off_value=0).dtype is af.int32
    assert af.one_hot(i, 5, dtype=af.float64).dtype is af.float64
    assert dims(af.one_hot(i, ph(af.int32, []))) == (None, 3, None)
    with pytest.raises(ValueError, match="axis"):
        af.one_hot(i, 5, axis=3)
    with pytest.raises(TypeError):
        af.one_hot(i, 5, on_value=1.0, off_value=af.constant(0))


def test_fill_zeros_ones_and_likes():
    assert dims(af.fill([2, 3], 1.5)) == (2, 3)
    assert af.fill([2, 3], 1.5).dtype is af.float32
    assert dims(af.fill(ph(af.int32, [2]), 1)) == (None, None)
    with pytest.raises(ValueError, match="scalar"):
        af.fill([2], [1.0, 2.0])
    z = af.zeros([2, 3])
    assert z.op.type == "Const" and z.dtype is af.float32 and dims(z) == (2, 3)
    big = af.ones([100, 100], dtype=af.int64)
    assert big.op.type == "Fill" and big.dtype is af.int64 and dims(big) == (100, 100)
    n = ph(af.int32, [])
    dyn = af.zeros([n, 3], dtype=af.float64)
    assert dyn.op.type == "Fill" and dims(dyn) == (None, 3)
    assert dims(af.zeros(af.TensorShape([4]))) == (4,)
    x = ph(af.float64, [None, 2])
    assert af.zeros_like(x).op.type == "ZerosLike" and af.zeros_like(x).dtype is af.float64
    assert af.ones_like(x).op.type == "OnesLike"
    c = af.zeros_like(ph(af.float32, [2, 2]))
    assert c.op.type == "Const" and dims(c) == (2, 2)
    assert af.ones_like(x, dtype=af.int32).dtype is af.int32


def test_range_inference():
    assert dims(af.range(5)) == (5,) and af.range(5).dtype is af.int32
    assert dims(af.range(2, 11, 3)) == (3,)
    assert dims(af.range(10, 0, -3)) == (4,)
    assert dims(af.range(0.0, 1.0, 0.3)) == (4,) and af.range(0.0, 1.0, 0.3).dtype is af.float32
    assert af.range(3, dtype=af.float64).dtype is af.float64
    assert af.range(af.constant(3, dtype=af.int64), 10).dtype is af.int64
    assert af.range(ph(af.int32, []), 3.5).dtype is af.float32
    assert dims(af.range(ph(af.int32, []))) == (None,)
    assert dims(af.range(0)) == (0,)
    with pytest.raises(ValueError, match="delta != 0"):
        af.range(0, 5, 0)
    with pytest.raises(ValueError, match="start <= limit"):
        af.range(5, 0, 1)


def test_shape_size_rank_fold_when_static():
    x = ph(af.float32, [2, 3])
    s = af.shape(x)
    assert s.op.type == "Const" and constant_value(s).tolist() == [2, 3] and s.dtype is af.int32
    assert af.shape(x, out_type=af.int64).dtype is af.int64
    assert af.size(x).op.type == "Const" and int(constant_value(af.size(x))) == 6
    assert af.rank(x).op.type == "Const" and int(constant_value(af.rank(x))) == 2
    y = ph(af.float32, [None, 3])
    assert af.shape(y).op.type == "Shape" and dims(af.shape(y)) == (2,)
    assert af.size(y).op.type == "Size" and dims(af.size(y)) == ()
    assert af.rank(ph(af.float32)).op.type == "Rank"
    assert dims(af.shape(ph(af.float32))) == (None,)
    # The raw ops fold through infer.constant_value when the input shape is static.
    assert constant_value(array_ops.Shape(x, out_type=af.int32)).tolist() == [2, 3]


def test_broadcast_to_and_segment_ops_inference():
    assert dims(af.broadcast_to(ph(af.float32, [3, 1]), [2, 3, 4])) == (2, 3, 4)
    assert dims(af.broadcast_to(ph(af.float32, [3]), ph(af.int32, [2]))) == (None, 3)
    with pytest.raises(ValueError, match="broadcast"):
        af.broadcast_to(ph(af.float32, [3]), [2, 4])
    data = ph(af.float32, [6, 4])
    assert dims(af.unsorted_segment_sum(data, ph(af.int64, [6]), 3)) == (3, 4)
    assert dims(af.unsorted_segment_sum(data, ph(af.int32, [6, 4]), ph(af.int32, []))) == (None,)
    with pytest.raises(ValueError, match="prefix"):
        af.unsorted_segment_sum(data, ph(af.int32, [5]), 3)
    parts = af.dynamic_partition(data, ph(af.int32, [6]), 3)
    assert len(parts) == 3 and all(dims(p) == (None, 4) for p in parts)
    assert len(af.dynamic_partition(data, ph(af.int32, [6]), 1)) == 1
    st = af.dynamic_stitch([[0, 2], [1, 3]], [ph(af.float32, [2, 5]), ph(af.float32, [2, 5])])
    assert dims(st) == (4, 5)
    st = af.dynamic_stitch([ph(af.int32, [None])], [ph(af.float32, [None, 5])])
    assert dims(st) == (None, 5)
    assert dims(af.invert_permutation([2, 0, 1])) == (3,)
    with pytest.raises(TypeError):
        af.invert_permutation(af.constant([1.0]))


# ---------------------------------------------------------------------------------------------
# Numerics against numpy
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", INDEX_KEYS, ids=[repr(k) for k in INDEX_KEYS])
def test_indexing_matches_numpy(key):
    a = np.arange(120.0).reshape(4, 5, 6)
    x = ph(af.float64, [None, 5, None])
    np.testing.assert_array_equal(run(x[key], {x: a}), a[key])


def test_indexing_with_tensor_indices_matches_numpy():
    a = np.arange(30).reshape(5, 6).astype(np.int32)
    x = ph(af.int32, [5, 6])
    i = ph(af.int32, [])
    j = ph(af.int64, [])
    fetches = [x[i], x[:, i], x[i, j], x[i:], x[:j:-1], x[-1, i:j], x[i, ..., None]]
    out = run(fetches, {x: a, i: 2, j: 4})
    for got, want in zip(out, [a[2], a[:, 2], a[2, 4], a[2:], a[:4:-1], a[-1, 2:4], a[2, ..., None]]):
        np.testing.assert_array_equal(got, want)
    # A negative tensor index counts from the end, like an int.
    np.testing.assert_array_equal(run(x[i], {x: a, i: -1}), a[-1])


def test_indexing_rank0_and_empty():
    s = ph(af.float32, [])
    np.testing.assert_array_equal(run(s[...], {s: 3.0}), np.float32(3.0))
    np.testing.assert_array_equal(run(s[None], {s: 3.0}), np.array([3.0], np.float32))
    np.testing.assert_array_equal(run(s[()], {s: 3.0}), np.float32(3.0))
    e = ph(af.float32, [0, 3])
    out = run([e[1:], e[:, 1], e[..., None]], {e: np.zeros((0, 3), np.float32)})
    assert [o.shape for o in out] == [(0, 3), (0,), (0, 3, 1)]


def test_reshape_transpose_expand_squeeze_numerics():
    a = randn(2, 3, 4)
    x = ph(af.float64, [None, 3, 4])
    out = run([af.reshape(x, [-1, 4]), af.reshape(x, [af.shape(x)[0], -1]), af.transpose(x),
               af.transpose(x, [1, 0, 2]), af.expand_dims(x, 1), af.squeeze(af.expand_dims(x, -1), [3]),
               af.reshape(x[0, 0, 0], [1, 1]), af.reshape(af.zeros([0, 4]), [-1, 2, 2])], {x: a})
    want = [a.reshape(-1, 4), a.reshape(2, -1), a.T, a.transpose(1, 0, 2), a[:, None], a, a[0, 0, 0].reshape(1, 1),
            np.zeros((0, 2, 2))]
    for got, w in zip(out, want):
        np.testing.assert_allclose(got, w)
    u = ph(af.float32)
    np.testing.assert_array_equal(run(af.transpose(u), {u: np.ones((1, 2, 3), np.float32)}), np.ones((3, 2, 1)))


def test_concat_split_stack_numerics():
    a, b = randn(2, 3), randn(2, 5)
    x, y = ph(af.float64, [2, 3]), ph(af.float64, [2, None])
    out = run([af.concat([x, y], 1), af.concat([x, x], 0), af.stack([x, x], axis=2), af.unstack(x, axis=1)],
              {x: a, y: b})
    np.testing.assert_allclose(out[0], np.concatenate([a, b], 1))
    np.testing.assert_allclose(out[1], np.concatenate([a, a], 0))
    np.testing.assert_allclose(out[2], np.stack([a, a], 2))
    for got, w in zip(out[3], np.moveaxis(a, 1, 0)):
        np.testing.assert_allclose(got, w)
    c = randn(2, 6)
    z = ph(af.float64, [2, 6])
    parts = run(af.split(z, 3, axis=1) + af.split(z, [1, -1, 2], -1), {z: c})
    want = np.split(c, 3, axis=1) + np.split(c, [1, 4], axis=1)
    for got, w in zip(parts, want):
        np.testing.assert_allclose(got, w)
    np.testing.assert_array_equal(run(af.stack([af.constant(1), ph(af.int32, [], "s")]), {"s:0": 5}), [1, 5])


def test_slice_tile_pad_numerics():
    a = randn(4, 5)
    x = ph(af.float64, [None, 5])
    out = run([af.slice(x, [1, 2], [2, -1]), af.tile(x, [2, 3]), af.pad(x, [[1, 0], [2, 3]]),
               af.pad(x, [[0, 1], [1, 0]], constant_values=-1.5), af.strided_slice(x, [3, 0], [0, 5], [-1, 2])],
              {x: a})
    want = [a[1:3, 2:], np.tile(a, (2, 3)), np.pad(a, [[1, 0], [2, 3]]),
            np.pad(a, [[0, 1], [1, 0]], constant_values=-1.5), a[3:0:-1, 0:5:2]]
    for got, w in zip(out, want):
        np.testing.assert_allclose(got, w)
    s = ph(af.int32, [])
    np.testing.assert_array_equal(run(af.tile(af.reshape(s, [1]), [3]), {s: 7}), [7, 7, 7])


def test_gather_numerics():
    p = randn(5, 3, 4)
    x = ph(af.float64, [5, 3, 4])
    idx = np.array([[0, 4], [2, 2]])
    out = run([af.gather(x, idx), af.gather(x, np.array([2, 0], np.int64), axis=1), af.gather(x, 3, axis=2),
               af.gather(x, np.array([[1, 0], [2, 2], [0, 0], [1, 1], [2, 1]]), axis=1, batch_dims=1)], {x: p})
    np.testing.assert_allclose(out[0], p[idx])
    np.testing.assert_allclose(out[1], p[:, [2, 0]])
    np.testing.assert_allclose(out[2], p[:, :, 3])
    bi = np.array([[1, 0], [2, 2], [0, 0], [1, 1], [2, 1]])
    np.testing.assert_allclose(out[3], np.stack([p[b][bi[b]] for b in range(5)]))


def test_one_hot_fill_range_numerics():
    i = np.array([0, 2, -1, 3])
    out = run([af.one_hot(i, 3), af.one_hot(i, 3, on_value=5, off_value=-1, axis=0), af.fill([2, 2], 7),
               af.range(1, 10, 3), af.range(5.0, 0.0, -1.5), af.range(0), af.zeros([2, 0]), af.ones([3], af.bool)])
    np.testing.assert_array_equal(out[0], np.eye(3, dtype=np.float32)[[0, 2]].tolist() + [[0, 0, 0], [0, 0, 0]])
    want = np.full((3, 4), -1)
    want[0, 0] = want[2, 1] = 5
    np.testing.assert_array_equal(out[1], want)
    np.testing.assert_array_equal(out[2], np.full((2, 2), 7))
    np.testing.assert_array_equal(out[3], np.arange(1, 10, 3))
    np.testing.assert_allclose(out[4], np.arange(5.0, 0.0, -1.5, dtype=np.float32))
    assert out[5].shape == (0,) and out[6].shape == (2, 0)
    assert out[7].dtype == np.bool_ and out[7].all()


def test_dynamic_shapes_and_likes_numerics():
    x = ph(af.float32, [None, None])
    a = np.ones((3, 2), np.float32)
    n = ph(af.int32, [])
    out = run([af.shape(x), af.size(x), af.rank(ph(af.float32, name="u")), af.zeros_like(x), af.ones_like(x),
               af.zeros([n, 2], af.float64), af.ones_like(x, dtype=af.int64), af.range(n)],
              {x: a, "u:0": np.zeros((1, 1, 1), np.float32), n: 4})
    np.testing.assert_array_equal(out[0], [3, 2])
    assert out[1] == 6 and out[2] == 3
    np.testing.assert_array_equal(out[3], np.zeros((3, 2)))
    np.testing.assert_array_equal(out[4], np.ones((3, 2)))
    assert out[5].shape == (4, 2) and out[5].dtype == np.float64
    assert out[6].dtype == np.int64 and out[6].shape == (3, 2)
    np.testing.assert_array_equal(out[7], np.arange(4))


def test_segment_partition_stitch_numerics():
    data = randn(6, 2)
    ids = np.array([0, 2, -1, 2, 0, 1])
    d = ph(af.float64, [6, 2])
    out = run([af.unsorted_segment_sum(d, ids, 4), af.dynamic_partition(d, np.array([1, 0, 1, 1, 0, 2]), 3),
               af.dynamic_stitch([[0, 2], [1, 3]], [[1.0, 2.0], [3.0, 4.0]]), af.invert_permutation([2, 0, 1]),
               af.broadcast_to(af.constant([1, 2]), [3, 2])], {d: data})
    want = np.zeros((4, 2))
    for r, k in enumerate(ids):
        if k >= 0:
            want[k] += data[r]
    np.testing.assert_allclose(out[0], want)
    for k, part in enumerate(out[1]):
        np.testing.assert_allclose(part, data[np.array([1, 0, 1, 1, 0, 2]) == k])
    np.testing.assert_array_equal(out[2], [1.0, 3.0, 2.0, 4.0])
    np.testing.assert_array_equal(out[3], [1, 2, 0])
    np.testing.assert_array_equal(out[4], [[1, 2]] * 3)


def test_indexed_slices_to_dense_sums_duplicates():
    values = af.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    s = af.IndexedSlices(values, af.constant([2, 0, 2]), af.constant([4, 2]))
    dense = array_ops.indexed_slices_to_dense(s)
    assert dims(dense) == (4, 2)
    np.testing.assert_allclose(run(dense), [[3, 4], [0, 0], [6, 8], [0, 0]])
    np.testing.assert_allclose(run(af.convert_to_tensor(s)), [[3, 4], [0, 0], [6, 8], [0, 0]])


# ---------------------------------------------------------------------------------------------
# Gradients against finite differences
# ---------------------------------------------------------------------------------------------

def runtime(value, shape="same"):
    """`value` as a tensor whose value (and, with shape=None, shape) only the run time knows."""
    c = af.constant(value)
    return af.placeholder_with_default(c, c.shape if shape == "same" else shape)


GRAD_CASES = {
    "reshape": (lambda x: af.reshape(x, [-1, 2]) * af.constant(np.arange(6.0).reshape(3, 2)), [randn(2, 3)]),
    "reshape_dynamic": (lambda x: af.reshape(af.placeholder_with_default(x, [None, 3]), [-1]) ** 2,
                        [randn(2, 3)]),
    "transpose": (lambda x: af.transpose(x, [2, 0, 1]) * af.constant(randn(4, 2, 3)), [randn(2, 3, 4)]),
    "expand_squeeze": (lambda x: af.squeeze(af.expand_dims(x, 1)) ** 3, [randn(3, 2)]),
    "concat": (lambda x, y: af.concat([x, y, x], 1) ** 2, [randn(2, 3), randn(2, 1)]),
    "concat_dynamic": (lambda x, y: af.concat([af.placeholder_with_default(x, [None, None]), y], -1) ** 2,
                       [randn(2, 3), randn(2, 2)]),
    "split": (lambda x: af.split(x, 3, axis=1)[0] * 2.0 + af.split(x, 3, axis=1)[2] ** 2, [randn(2, 6)]),
    "split_v": (lambda x: af.split(x, [1, 3], axis=0)[1] ** 2, [randn(4, 2)]),
    "slice": (lambda x: af.slice(x, [1, 0], [2, -1]) ** 2, [randn(4, 3)]),
    "slice_dynamic": (lambda x: af.slice(af.placeholder_with_default(x, [None, 3]), [1, 1], [2, 2]) ** 2,
                      [randn(4, 3)]),
    "index": (lambda x: x[1:, ::-2, None, 0] ** 2 + x[-1, 0, 1], [randn(3, 4, 2)]),
    "strided_slice_grad_grad": (lambda x: af.gradients(af.reduce_sum(x[::2] ** 3), x)[0], [randn(5)]),
    "tile": (lambda x: af.tile(x, [2, 3]) * af.constant(randn(4, 9)), [randn(2, 3)]),
    "tile_dynamic": (lambda x: af.tile(af.placeholder_with_default(x, [None, None]), [2, 1]) ** 2, [randn(2, 3)]),
    "pad": (lambda x: af.pad(x, [[1, 2], [0, 1]]) ** 2, [randn(2, 2)]),
    "pad_v2": (lambda x: af.pad(x, [[1, 0], [1, 1]], constant_values=3.0) ** 2, [randn(2, 2)]),
    "stack_unstack": (lambda x, y: af.unstack(af.stack([x, y], axis=1), axis=2)[1] ** 2, [randn(3, 2), randn(3, 2)]),
    "gather_axis1": (lambda x: af.gather(x, [2, 0, 2], axis=1) ** 2, [randn(2, 3, 2)]),
    "gather_batch": (lambda x: af.gather(x, [[1, 1], [0, 2]], axis=1, batch_dims=1) ** 2, [randn(2, 3, 2)]),
    "gather_batch_dynamic": (
        lambda x: af.gather(af.placeholder_with_default(x, [None, None, 2]), [[1, 1], [0, 2]], axis=1,
                            batch_dims=1) ** 2, [randn(2, 3, 2)]),
    "gather_runtime_axis": (lambda x: af.gather(x, [1, 0, 1], axis=runtime(-2)) ** 2, [randn(2, 2, 3)]),
    "gather_unknown_rank": (lambda x: af.gather(af.placeholder_with_default(x, None), [[2], [0]], axis=1) ** 2,
                            [randn(2, 3, 2)]),
    "segment_sum": (lambda x: af.unsorted_segment_sum(x, [0, 2, -1, 0], 3) ** 2, [randn(4, 2)]),
    "dynamic_partition": (lambda x: af.dynamic_partition(x, [1, 0, 1], 3)[1] ** 2, [randn(3, 2)]),
    "dynamic_stitch": (lambda x, y: af.dynamic_stitch([[0, 2], [1]], [x, y]) ** 2, [randn(2, 2), randn(1, 2)]),
    "fill": (lambda v: af.fill([2, 3], v) * af.constant(randn(2, 3)), [np.array(0.7)]),
    "broadcast_to": (lambda x: af.broadcast_to(x, [2, 3, 2]) ** 2, [randn(3, 1)]),
    # Index-like arguments known only at run time take the dynamic branches of the gradients.
    "transpose_runtime_perm": (lambda x: af.transpose(x, runtime([2, 0, 1])) * af.constant(randn(4, 2, 3)),
                               [randn(2, 3, 4)]),
    "concat_runtime_axis": (lambda x, y: af.concat([x, y], runtime(-1)) ** 2, [randn(2, 3), randn(2, 2)]),
    "pad_runtime_paddings": (lambda x: af.pad(x, runtime(np.array([[1, 0], [2, 1]], np.int64))) ** 2,
                             [randn(2, 3)]),
    "tile_runtime_multiples": (lambda x: af.tile(x, runtime([1, 3])) ** 2, [randn(2, 1)]),
    "segment_sum_runtime_ids": (lambda x: af.unsorted_segment_sum(x, runtime(np.array([0, 2, -1, 0])), 3) ** 2,
                                [randn(4, 2)]),
    "segment_sum_unknown_rank": (
        lambda x: af.unsorted_segment_sum(af.placeholder_with_default(x, None), runtime([0, 2, -1], None), 3) ** 2,
        [randn(3, 2)]),
    "index_runtime_tensor": (lambda x: x[runtime(-2), ::-1] ** 2 + x[:, runtime(1)], [randn(3, 3)]),
    "reshape_int64_shape": (lambda x: af.reshape(x, af.constant([3, 2], dtype=af.int64)) ** 2, [randn(6)]),
    "stitch_of_sparse": (lambda p: af.dynamic_stitch([[1, 0]], [af.gather(p, [2, 0])]) ** 2, [randn(3, 2)]),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients(case):
    build, inputs = GRAD_CASES[case]
    check_gradients(build, inputs)


def test_gather_axis0_gradient_is_indexed_slices():
    x = ph(af.float64, [5, 2])
    y = af.reduce_sum(af.gather(x, [[1, 3], [1, 0]]) * 2.0)
    (g,) = af.gradients(y, [x])
    assert isinstance(g, af.IndexedSlices)
    assert dims(g.values) == (4, 2) and dims(g.indices) == (4,)
    want = np.zeros((5, 2))
    for r in (1, 3, 1, 0):
        want[r] += 2.0
    np.testing.assert_allclose(run(af.convert_to_tensor(g), {x: np.zeros((5, 2))}), want)
    check_gradients(lambda p: af.gather(p, [[1, 3], [1, 0]]) ** 2, [randn(5, 2)])


def test_variables_index_gather_and_get_sparse_gradients():
    v = af.Variable(np.arange(6.0).reshape(3, 2))
    (g,) = af.gradients(af.reduce_sum(af.gather(v, [0, 2, 0]) * 3.0), [v])
    assert isinstance(g, af.IndexedSlices)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        rows, dense, shp = sess.run([v[1:, ::-1], af.convert_to_tensor(g), af.shape(v)])
    np.testing.assert_array_equal(rows, [[3.0, 2.0], [5.0, 4.0]])
    np.testing.assert_array_equal(dense, [[6.0, 6.0], [0.0, 0.0], [3.0, 3.0]])
    np.testing.assert_array_equal(shp, [3, 2])


def test_sparse_gradient_flows_through_reshape_and_concat():
    # Dense-expecting gradient functions densify an IndexedSlices output gradient.
    check_gradients(lambda p: af.reshape(af.gather(p, [2, 2, 0]), [-1]) ** 2, [randn(4, 3)])
    check_gradients(lambda p: af.concat([af.gather(p, [1]), p], 0) ** 2, [randn(3, 2)])


def test_non_differentiable_ops_give_no_gradient():
    x = ph(af.float32, [None, 3])
    y = af.reduce_sum(af.cast(af.shape(x), af.float32)) + af.reduce_sum(af.zeros_like(x))
    assert af.gradients(y, [x]) == [None]


# ---------------------------------------------------------------------------------------------
# Property test: indexing agrees with numpy, shapes at build time and values at run time
# ---------------------------------------------------------------------------------------------

_bound = st.one_of(st.none(), st.integers(-7, 7))
_key_item = st.one_of(
    st.integers(-5, 4),
    st.builds(slice, _bound, _bound, st.sampled_from([None, 1, 2, 3, -1, -2, -3])),
    st.just(Ellipsis),
    st.none(),
)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
       key=st.lists(_key_item, min_size=0, max_size=4).map(tuple))
def test_indexing_property(shape, key):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        want = a[key]
    except IndexError:
        with af.Graph().as_default(), pytest.raises(ValueError):
            af.placeholder(af.float64, shape)[key]
        return
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float64, shape)
        y = x[key]
        assert y.shape.dims == want.shape
        # With every dimension unknown the kernel alone decides, and must agree too.
        u = af.placeholder(af.float64, [None] * len(shape))
        with af.Session(graph=g) as sess:
            got, got_u = sess.run([y, u[key]], {x: a, u: a})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_u, want)


@pytest.mark.parametrize("axes,bshape", [(1, (2, 5)), (2, (4, 2, 5)), (0, (2,)), ([[2], [0]], (2, 5)),
                                         ([[-1], [0]], (2, 5)), ([[0, 2], [1, 0]], (2, 3, 5))])
def test_tensordot_of_operands_whose_rank_is_known_only_at_run_time(axes, bshape):
    """TF builds tensordot from the runtime shapes when a rank is unknown (tf.image.rgb_to_grayscale
    of a tf.image.decode_image, a placeholder without a shape); numpy's tensordot is the reference."""
    rng = np.random.default_rng(3)
    av = rng.standard_normal((3, 4, 2)).astype(np.float32)
    bv = rng.standard_normal(bshape).astype(np.float32)
    a = af.placeholder(af.float32, name="a")                 # rank unknown
    b = af.placeholder(af.float32, [None] * len(bshape), name="b")
    out = af.tensordot(a, b, axes)
    want = np.tensordot(av, bv, axes if isinstance(axes, int) else ([x % 3 for x in axes[0]], axes[1]))
    np.testing.assert_allclose(run(out, {a: av, b: bv}), want, rtol=1e-5, atol=1e-5)
    if axes == [[2], [0]]:         # the gradients flow through the runtime transposes and reshapes
        ga, gb = af.gradients(af.reduce_sum(out), [a, b])
        got_a, got_b = run([ga, gb], {a: av, b: bv})
        np.testing.assert_allclose(got_a, np.broadcast_to(bv.sum(1), av.shape), rtol=1e-5)
        np.testing.assert_allclose(got_b, np.broadcast_to(av.sum((0, 1))[:, None], bv.shape), rtol=1e-5)


def test_rgb_to_grayscale_of_a_decoded_image_of_unknown_rank():
    png = af.image.encode_png(af.constant(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)))
    img = af.image.decode_image(png)
    assert img.shape.ndims is None
    gray = af.image.rgb_to_grayscale(af.cast(img, af.float32))
    px = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    np.testing.assert_allclose(run(gray)[..., 0], px @ np.float32([0.2989, 0.587, 0.114]), rtol=1e-5)
