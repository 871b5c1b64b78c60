"""Image codecs: DecodePng, EncodePng, DecodeJpeg, EncodeJpeg, EncodeJpegVariableQuality,
DecodeAndCropJpeg, ExtractJpegShape, DecodeBmp, DecodeGif and DecodeImage, with TF 1.x's wrappers
(`tf.io.decode_png`, `tf.image.decode_jpeg`, ...) and `is_jpeg`.

TF-1.x counterparts: `tf.compat.v1.image.*` and `tf.compat.v1.io.*` of the same names. The kernels
(kernels/cpu/image_codec.py) say where the pixels can differ from TF's (JPEG decoded with TF's default
fast DCT and fancy upsampling of subsampled chroma, by a few levels). None of these ops has a gradient: strings are not differentiable, as in TF.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.image_ops import convert_image_dtype
from actorflow.graph.ops.string_ops import substr
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["decode_png", "encode_png", "decode_jpeg", "encode_jpeg", "decode_and_crop_jpeg", "extract_jpeg_shape",
           "decode_bmp", "decode_gif", "decode_webp", "decode_image", "is_jpeg", "adjust_jpeg_quality", "random_jpeg_quality"]


def _contents(inputs, op):
    c = inputs[0]
    if c.dtype is not dtypes.string:
        raise InferenceError(f"{op}: contents must be a string tensor, got {c.dtype.name} ('{c.name}')")
    if c.shape.ndims not in (None, 0):
        raise InferenceError(f"{op}: contents must be scalar, but '{c.name}' has shape {c.shape}")


def _channels(attrs, op, allowed=(0, 1, 3, 4)):
    ch = int(attrs.get("channels", 0))
    if ch not in allowed:
        raise InferenceError(f"{op}: channels must be one of {list(allowed)}, got {ch}")
    return ch or None


def _infer_decode(op, allowed, dtype_attr=False, out_dtypes=(dtypes.uint8,)):
    def infer(inputs, attrs):
        _contents(inputs, op)
        ch = _channels(attrs, op, allowed)
        dt = dtypes.as_dtype(attrs.get("dtype", dtypes.uint8)) if dtype_attr else dtypes.uint8
        if dt not in out_dtypes:
            raise InferenceError(f"{op}: dtype must be one of {[d.name for d in out_dtypes]}, got {dt.name}")
        return [(dt, TensorShape([None, None, ch]))]
    return infer


def _infer_decode_and_crop(inputs, attrs):
    _contents(inputs, "DecodeAndCropJpeg")
    w = inputs[1]
    if w.dtype is not dtypes.int32 or not w.shape.is_compatible_with(TensorShape([4])):
        raise InferenceError(f"DecodeAndCropJpeg: crop_window must be an int32 vector of 4, got {w.dtype.name} "
                             f"{w.shape}")
    return [(dtypes.uint8, TensorShape([None, None, _channels(attrs, "DecodeAndCropJpeg", (0, 1, 3))]))]


def _infer_encode(op, allowed_dtypes):
    def infer(inputs, attrs):
        image = inputs[0]
        if image.dtype not in allowed_dtypes:
            raise InferenceError(f"{op}: image must be one of {[d.name for d in allowed_dtypes]}, got "
                                 f"{image.dtype.name} ('{image.name}')")
        if image.shape.ndims not in (None, 3):
            raise InferenceError(f"{op}: image must be 3-dimensional, but '{image.name}' has shape {image.shape}")
        if len(inputs) > 1 and inputs[1].shape.ndims not in (None, 0):
            raise InferenceError(f"{op}: quality must be scalar, got shape {inputs[1].shape}")
        return [(dtypes.string, TensorShape([]))]
    return infer


def _infer_gif(inputs, attrs):
    _contents(inputs, "DecodeGif")
    return [(dtypes.uint8, TensorShape([None, None, None, 3]))]


def _infer_jpeg_shape(inputs, attrs):
    _contents(inputs, "ExtractJpegShape")
    return [(dtypes.as_dtype(attrs.get("output_type", dtypes.int32)), TensorShape([3]))]


def _infer_decode_image(inputs, attrs):
    _contents(inputs, "DecodeImage")
    ch = _channels(attrs, "DecodeImage")
    dt = dtypes.as_dtype(attrs.get("dtype", dtypes.uint8))
    if dt not in (dtypes.uint8, dtypes.uint16, dtypes.float32):
        raise InferenceError(f"DecodeImage: dtype must be uint8, uint16 or float32, got {dt.name}")
    shape = TensorShape(None) if attrs.get("expand_animations", True) else TensorShape([None, None, ch])
    return [(dt, shape)]


DecodePng = define_op("DecodePng", _infer_decode("DecodePng", (0, 1, 3, 4), True, (dtypes.uint8, dtypes.uint16)))
EncodePng = define_op("EncodePng", _infer_encode("EncodePng", (dtypes.uint8, dtypes.uint16)))
DecodeJpeg = define_op("DecodeJpeg", _infer_decode("DecodeJpeg", (0, 1, 3)))
DecodeAndCropJpeg = define_op("DecodeAndCropJpeg", _infer_decode_and_crop)
EncodeJpeg = define_op("EncodeJpeg", _infer_encode("EncodeJpeg", (dtypes.uint8,)))
EncodeJpegVariableQuality = define_op("EncodeJpegVariableQuality",
                                      _infer_encode("EncodeJpegVariableQuality", (dtypes.uint8,)))
ExtractJpegShape = define_op("ExtractJpegShape", _infer_jpeg_shape)
DecodeBmp = define_op("DecodeBmp", _infer_decode("DecodeBmp", (0, 1, 3, 4)))
DecodeGif = define_op("DecodeGif", _infer_gif)
DecodeImage = define_op("DecodeImage", _infer_decode_image)


def _infer_webp(inputs, attrs):
    _contents(inputs, "DecodeWebP")
    ch = _channels(attrs, "DecodeWebP", (0, 3, 4))
    dt = dtypes.as_dtype(attrs.get("dtype", dtypes.uint8))
    if dt is not dtypes.uint8:
        raise InferenceError(f"DecodeWebP: dtype must be uint8 (as TF's), got {dt.name}")
    return [(dt, TensorShape([None, None, None, ch]))]


DecodeWebP = define_op("DecodeWebP", _infer_webp)


def _contents_tensor(contents):
    return convert_to_tensor(contents, dtype=dtypes.string, name="contents")


def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
    """The pixels [height, width, channels] of the PNG `contents` (a string scalar), as uint8 or
    uint16 (tf.io.decode_png). `channels` 0 keeps the file's; 1, 3 and 4 convert (gray to RGB by
    repetition, RGB to gray by libpng's integer luma, an opaque alpha added or the alpha dropped);
    8-bit files read as uint16 are scaled by 257, 16-bit ones read as uint8 keep their high byte."""
    with name_scope(name, "DecodePng", [contents]) as scope:
        return DecodePng(_contents_tensor(contents), channels=int(channels), dtype=dtypes.as_dtype(dtype), name=scope)


def encode_png(image, compression=-1, name=None):
    """`image` [height, width, channels] (uint8 or uint16, 1 to 4 channels) as a PNG string
    (tf.io.encode_png); `compression` is zlib's level, -1 its default. Rows are filtered by libpng's
    heuristic; the bytes can differ from TF's, the pixels they decode to do not."""
    with name_scope(name, "EncodePng", [image]) as scope:
        image = convert_to_tensor(image, name="image")
        return EncodePng(image, compression=int(compression), name=scope)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True, try_recover_truncated=False,
                acceptable_fraction=1, dct_method="", name=None):
    """The pixels [height / ratio, width / ratio, channels] of the JPEG `contents`, uint8
    (tf.io.decode_jpeg), decoded by Pillow's libjpeg set as TF sets its own (`dct_method`,
    `fancy_upscaling`): TF's exact pixels, except for chroma-subsampled colour with the fast DCT and
    fancy upsampling (TF's defaults) or the accurate DCT without it, which Pillow cannot do: there
    within a few levels. `try_recover_truncated` and `acceptable_fraction` are accepted and not
    used (a truncated file fails)."""
    with name_scope(name, "DecodeJpeg", [contents]) as scope:
        return DecodeJpeg(_contents_tensor(contents), channels=int(channels), ratio=int(ratio),
                          fancy_upscaling=bool(fancy_upscaling), try_recover_truncated=bool(try_recover_truncated),
                          acceptable_fraction=float(acceptable_fraction), dct_method=str(dct_method), name=scope)


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """The window `crop_window` = [y, x, height, width] of the decoded JPEG (tf.io.decode_and_crop_jpeg);
    a window outside the image fails the step."""
    with name_scope(name, "DecodeAndCropJpeg", [contents, crop_window]) as scope:
        window = convert_to_tensor(crop_window, dtype=dtypes.int32, name="crop_window")
        return DecodeAndCropJpeg(_contents_tensor(contents), window, channels=int(channels), ratio=int(ratio),
                                 fancy_upscaling=bool(fancy_upscaling),
                                 try_recover_truncated=bool(try_recover_truncated),
                                 acceptable_fraction=float(acceptable_fraction), dct_method=str(dct_method),
                                 name=scope)


def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False, chroma_downsampling=True,  # noqa: A002
                density_unit="in", x_density=300, y_density=300, xmp_metadata="", name=None):
    """`image` [height, width, 1 or 3] uint8 as a JPEG string (tf.io.encode_jpeg), by Pillow's libjpeg:
    the same options (quality, progressive, optimize_size, chroma_downsampling: 4:2:0 or 4:4:4,
    density), bytes that differ from TF's."""
    with name_scope(name, "EncodeJpeg", [image]) as scope:
        image = convert_to_tensor(image, name="image")
        return EncodeJpeg(image, format=str(format), quality=int(quality), progressive=bool(progressive),
                          optimize_size=bool(optimize_size), chroma_downsampling=bool(chroma_downsampling),
                          density_unit=str(density_unit), x_density=int(x_density), y_density=int(y_density),
                          xmp_metadata=str(xmp_metadata), name=scope)


def encode_jpeg_variable_quality(images, quality, name=None):
    """encode_jpeg at a quality given as an int32 scalar tensor (TF's EncodeJpegVariableQuality)."""
    with name_scope(name, "EncodeJpegVariableQuality", [images, quality]) as scope:
        images = convert_to_tensor(images, name="images")
        quality = convert_to_tensor(quality, dtype=dtypes.int32, name="quality")
        return EncodeJpegVariableQuality(images, quality, name=scope)


def extract_jpeg_shape(contents, output_type=dtypes.int32, name=None):
    """[height, width, channels] of the JPEG `contents`, read from its header (tf.io.extract_jpeg_shape)."""
    with name_scope(name, "ExtractJpegShape", [contents]) as scope:
        return ExtractJpegShape(_contents_tensor(contents), output_type=dtypes.as_dtype(output_type), name=scope)


def decode_bmp(contents, channels=0, name=None):
    """The pixels [height, width, channels] of an uncompressed 8-, 24- or 32-bit BMP, uint8
    (tf.io.decode_bmp)."""
    with name_scope(name, "DecodeBmp", [contents]) as scope:
        return DecodeBmp(_contents_tensor(contents), channels=int(channels), name=scope)


def decode_gif(contents, name=None):
    """Every frame [num_frames, height, width, 3] of the GIF `contents`, uint8 (tf.io.decode_gif);
    each frame drawn over the one before (disposal methods ignored, as TF ignores them), the first
    frame's transparent pixels black."""
    with name_scope(name, "DecodeGif", [contents]) as scope:
        return DecodeGif(_contents_tensor(contents), name=scope)


def decode_webp(contents, channels=0, dtype=dtypes.uint8, name=None):
    """Every frame [num_frames, height, width, channels] of the WebP `contents` (tf.io.decode_webp):
    3 channels, or 4 when the file has alpha; `channels` must be 0 or that number."""
    with name_scope(name, "DecodeWebP", [contents]) as scope:
        return DecodeWebP(_contents_tensor(contents), channels=int(channels), dtype=dtypes.as_dtype(dtype), name=scope)


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None, expand_animations=True):
    """A JPEG, PNG, GIF, BMP or WebP, its format read from its first bytes (tf.compat.v1.io.decode_image):
    [height, width, channels], or [frames, height, width, c] for a GIF or WebP with
    `expand_animations` (without, its first frame). `dtype` uint8, uint16, or a float type, scaled to [0, 1]."""
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name, "decode_image", [contents]) as scope:
        contents = _contents_tensor(contents)
        if dtype in (dtypes.uint8, dtypes.uint16, dtypes.float32):
            return DecodeImage(contents, channels=int(channels or 0), dtype=dtype,
                               expand_animations=bool(expand_animations), name=scope)
        if not dtype.is_floating:
            raise ValueError(f"decode_image: dtype must be uint8, uint16 or a float type, got {dtype.name}")
        img = DecodeImage(contents, channels=int(channels or 0), dtype=dtypes.uint16,      # as TF does
                          expand_animations=bool(expand_animations))
        return convert_image_dtype(img, dtype, name=scope)


def is_jpeg(contents, name=None):
    """Whether the string `contents` starts with a JPEG's SOI marker (tf.io.is_jpeg: its first three
    bytes are 0xff 0xd8 0xff)."""
    with name_scope(name, "is_jpeg", [contents]) as scope:
        contents = _contents_tensor(contents)
        return math_ops.equal(substr(contents, 0, 3), b"\xff\xd8\xff", name=scope)


def adjust_jpeg_quality(image, jpeg_quality, dct_method="", name=None):
    """`image` encoded as a JPEG of quality `jpeg_quality` (0-100, a number or an int32 scalar tensor)
    and decoded again, in its own dtype (tf.image.adjust_jpeg_quality: convert_image_dtype to uint8
    with saturation, EncodeJpeg, DecodeJpeg, back). One image [height, width, 1 or 3] at a time."""
    from actorflow.graph.graph import Tensor
    with name_scope(name, "adjust_jpeg_quality", [image]) as scope:
        image = convert_to_tensor(image, name="image")
        channels = image.shape.dims[-1] if image.shape.ndims is not None else None
        orig = image.dtype
        u8 = convert_image_dtype(image, dtypes.uint8, saturate=True)
        if isinstance(jpeg_quality, Tensor):
            data = encode_jpeg_variable_quality(u8, jpeg_quality)
        else:
            data = encode_jpeg(u8, quality=int(jpeg_quality))
        decoded = decode_jpeg(data, channels=channels or 0, dct_method=dct_method)
        return convert_image_dtype(decoded, orig, saturate=True, name=scope)


def random_jpeg_quality(image, min_jpeg_quality, max_jpeg_quality, seed=None):
    """adjust_jpeg_quality at a quality drawn uniformly from [min_jpeg_quality, max_jpeg_quality)
    (tf.image.random_jpeg_quality)."""
    from actorflow.graph.ops import random_ops
    if not 0 <= min_jpeg_quality < max_jpeg_quality <= 100:
        raise ValueError("jpeg_quality must be in [0, 100] and min_jpeg_quality < max_jpeg_quality.")
    q = random_ops.random_uniform([], min_jpeg_quality, max_jpeg_quality, seed=seed, dtype=dtypes.int32)
    return adjust_jpeg_quality(image, q)
