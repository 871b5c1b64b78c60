"""CPU kernels of the image codec ops (graph/ops/image_codec_ops.py): DecodePng, EncodePng, DecodeJpeg,
EncodeJpeg, EncodeJpegVariableQuality, DecodeAndCropJpeg, ExtractJpegShape, DecodeBmp, DecodeGif,
DecodeWebP and DecodeImage.

PNG and BMP are read and written here (zlib and numpy; the PNG filters undone by a numba loop), so
their pixels are exact: TF's libpng and actorflow agree on every sample. PNGs outside the common case
(palettes, bit depths under 8, interlacing, a tRNS chunk) go through Pillow. JPEG and WebP go through
Pillow (imported when first used). A JPEG decodes to TF's exact pixels where Pillow's libjpeg can be
set as TF sets its own (`_jpeg_exact`): the fast integer DCT (TF's default `dct_method`) for gray
files, gray output, 4:4:4 colour, or without `fancy_upscaling`; the accurate DCT
("INTEGER_ACCURATE") with fancy upsampling. TF's default on chroma-subsampled colour (the fast DCT
with fancy upsampling) has no Pillow setting: it decodes with the accurate DCT instead, within a few
levels of TF's (tests/test_image_io.py states the bound it checks). `try_recover_truncated` and
`acceptable_fraction` are accepted and not used. GIFs are read here (the LZW codes by a numba loop)
and composited as TF composites them (disposal methods ignored, as TF ignores them).

Every decoder fails on input it cannot read with InvalidArgumentError naming the op.
"""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel

_PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _scalar_bytes(x, op: str, what: str = "contents") -> bytes:
    a = np.asarray(x, dtype=object)
    if a.ndim != 0:
        raise InvalidArgumentError(f"{op}: {what} must be scalar, got shape {list(a.shape)}")
    v = a[()]
    return v if isinstance(v, bytes) else bytes(v)


def _string(data: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = data
    return out


def _decode_cost(contents, *rest) -> int:
    """About 100 element operations (15 ns) per compressed byte: a decode of over ~7 KB runs on
    the kernel pool (kernels/registry.py)."""
    a = np.asarray(contents, dtype=object)
    return 100 * (len(a[()]) if a.ndim == 0 and isinstance(a[()], bytes) else 0)


def _encode_cost(image, *rest) -> int:
    return 300 * int(np.size(image))


def _pil():
    from PIL import Image
    return Image


# ---------------------------------------------------------------------------------------------
# Channel and depth conversions shared by the decoders (TF's rules)

def _rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    """libpng's luma of uint8 or uint16 RGB as TF asks for it (png_set_rgb_to_gray with 0.299 and
    0.587: coefficients 9797, 19234 and 3737 over 32768), truncated for 8-bit samples and rounded
    for 16-bit ones, as libpng does."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    half = 16384 if rgb.dtype == np.uint16 else 0
    return ((9797 * r + 19234 * g + 3737 * b + half) >> 15).astype(rgb.dtype)[..., None]


def _to_channels(img: np.ndarray, channels: int, op: str, opaque=None) -> np.ndarray:
    """`img` [h, w, c] (c in 1..4: gray, gray+alpha, RGB, RGBA) as `channels` channels (0: as it is);
    an added alpha channel is `opaque` (by default the dtype's maximum)."""
    c = img.shape[-1]
    if channels == 0 or channels == c:
        return img
    opaque = np.iinfo(img.dtype).max if opaque is None else opaque
    has_alpha = c in (2, 4)
    color = img[..., :3] if c >= 3 else np.repeat(img[..., :1], 3, axis=-1)
    if channels == 1:
        return img[..., :1] if c <= 2 else _rgb_to_gray(color)
    if channels == 3:
        return np.ascontiguousarray(color)
    if channels == 4:
        alpha = img[..., -1:] if has_alpha else np.full(img.shape[:-1] + (1,), opaque, img.dtype)
        return np.concatenate([color, alpha], axis=-1)
    raise InvalidArgumentError(f"{op}: channels must be 0, 1, 3 or 4, got {channels}")


def _to_depth(img: np.ndarray, dtype) -> np.ndarray:
    """8-bit samples widened to 16 (v * 257) or 16-bit ones narrowed to 8 (the high byte), as libpng
    does for TF."""
    dtype = np.dtype(dtype)
    if img.dtype == dtype:
        return img
    if dtype == np.uint16:
        return img.astype(np.uint16) * np.uint16(257)
    return (img >> 8).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# PNG

@njit(nogil=True, cache=True)
def _unfilter(rows, bpp):
    """Undoes the PNG filters of `rows` [h, 1 + stride] (uint8) in place; returns [h, stride]."""
    h, n = rows.shape
    out = np.empty((h, n - 1), np.uint8)
    prev = np.zeros(n - 1, np.int32)
    for y in range(h):
        ft = rows[y, 0]
        for x in range(n - 1):
            v = np.int32(rows[y, x + 1])
            a = np.int32(out[y, x - bpp]) if x >= bpp else np.int32(0)
            b = prev[x]
            if ft == 1:
                v += a
            elif ft == 2:
                v += b
            elif ft == 3:
                v += (a + b) >> 1
            elif ft == 4:
                c = prev[x - bpp] if x >= bpp else np.int32(0)
                p = a + b - c
                pa = abs(p - a)
                pb = abs(p - b)
                pc = abs(p - c)
                if pa <= pb and pa <= pc:
                    v += a
                elif pb <= pc:
                    v += b
                else:
                    v += c
            elif ft != 0:
                return out[:0]
            out[y, x] = np.uint8(v & 255)
        for x in range(n - 1):
            prev[x] = out[y, x]
    return out


_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _png_chunks(data: bytes, op: str):
    if not data.startswith(_PNG_SIG):
        raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: no PNG signature")
    pos, chunks = 8, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc) != 4 or zlib.crc32(kind + body) != struct.unpack(">I", crc)[0]:
            raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: chunk {kind!r} is truncated "
                                       "or fails its CRC")
        chunks.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: no IHDR chunk")
    if chunks[-1][0] != b"IEND":
        raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: truncated (no IEND chunk)")
    return chunks


def _decode_png_native(data: bytes, op: str):
    """The PNG's samples [h, w, c] (uint8 or uint16) with its own channels (1: gray, 2: gray+alpha,
    3: RGB, 4: RGBA), and the alpha TF adds to it: (1 << bit depth) - 1, the file's bit depth
    (libpng's filler as TF sets it, so a 1-bit gray file gains an alpha of 1)."""
    chunks = _png_chunks(data, op)
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    kinds = {k for k, _ in chunks}
    if ctype in _PNG_CHANNELS and depth in (8, 16) and interlace == 0 and b"tRNS" not in kinds:
        c = _PNG_CHANNELS[ctype]
        bps = depth // 8
        stride = w * c * bps
        try:
            raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
        except zlib.error as e:
            raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: {e}") from None
        if len(raw) < h * (stride + 1):
            raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: image data is truncated")
        rows = np.frombuffer(raw, np.uint8, h * (stride + 1)).reshape(h, stride + 1)
        out = _unfilter(rows, c * bps)
        if out.shape[0] != h:
            raise InvalidArgumentError(f"{op}: Invalid PNG data, size {len(data)}: unknown filter type")
        if bps == 2:
            return out.view(">u2").astype(np.uint16).reshape(h, w, c), 65535
        return out.reshape(h, w, c), 255
    img = _decode_with_pil(data, op)
    return img, (1 << depth) - 1 if ctype != 3 else 255


def _decode_with_pil(data: bytes, op: str) -> np.ndarray:
    """A still image through Pillow, as [h, w, c] uint8 (uint16 for 16-bit gray)."""
    Image = _pil()
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
    except Exception as e:  # noqa: BLE001 (Pillow raises many kinds for bad data)
        raise InvalidArgumentError(f"{op}: Invalid image data, size {len(data)}: {e}") from None
    if im.mode in ("I;16", "I;16B", "I;16L"):
        return np.asarray(im, dtype=np.uint16)[..., None]
    if im.mode == "I":
        return np.asarray(im).astype(np.uint16)[..., None]
    has_alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
    gray = im.mode in ("1", "L", "LA") or (im.mode == "I" and not has_alpha)
    mode = ("LA" if has_alpha else "L") if gray else ("RGBA" if has_alpha else "RGB")
    arr = np.asarray(im.convert(mode), dtype=np.uint8)
    return arr[..., None] if arr.ndim == 2 else arr


def _decode_png(data: bytes, channels: int, dtype, op: str) -> np.ndarray:
    img, opaque = _decode_png_native(data, op)
    return np.ascontiguousarray(_to_depth(_to_channels(img, channels, op, opaque), dtype))


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _filter_rows(rows: np.ndarray, bpp: int) -> np.ndarray:
    """Each row [h, stride] with the PNG filter (None, Sub, Up, Average, Paeth) whose output has the
    smallest sum of absolute values, as libpng's heuristic picks, behind its filter-type byte.
    Encoding reads only unfiltered neighbours, so every filter is one numpy expression."""
    x = rows.astype(np.int16)
    a = np.zeros_like(x)
    a[:, bpp:] = x[:, :-bpp]
    b = np.zeros_like(x)
    b[1:] = x[:-1]
    c = np.zeros_like(x)
    c[1:, bpp:] = x[:-1, :-bpp]
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
    cands = np.stack([x, x - a, x - b, x - ((a + b) >> 1), x - paeth]).astype(np.uint8)    # mod 256
    cost = np.abs(cands.view(np.int8).astype(np.int32)).sum(axis=2)                      # [5, h]
    best = cost.argmin(axis=0)
    out = np.empty((rows.shape[0], rows.shape[1] + 1), np.uint8)
    out[:, 0] = best
    out[:, 1:] = cands[best, np.arange(rows.shape[0])]
    return out


def encode_png_bytes(image: np.ndarray, compression: int = -1, op: str = "EncodePng") -> bytes:
    """`image` [h, w, c] (uint8 or uint16, c in 1..4) as PNG bytes (each row filtered as libpng's
    heuristic would; zlib at `compression`, -1 its default)."""
    image = np.asarray(image)
    if image.ndim != 3:
        raise InvalidArgumentError(f"{op}: image must be 3-dimensional, got shape {list(image.shape)}")
    h, w, c = image.shape
    if c not in (1, 2, 3, 4):
        raise InvalidArgumentError(f"{op}: image must have 1, 2, 3, or 4 channels, got {c}")
    if image.dtype not in (np.uint8, np.uint16):
        raise InvalidArgumentError(f"{op}: image must be uint8 or uint16, got {image.dtype}")
    if not -1 <= compression <= 9:
        raise InvalidArgumentError(f"{op}: compression must be in [-1, 9], got {compression}")
    if h >= 2 ** 31 or w >= 2 ** 31:
        raise InvalidArgumentError(f"{op}: image too large to encode, shape {list(image.shape)}")
    depth = image.itemsize * 8
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    samples = image.astype(">u2") if depth == 16 else image
    rows = np.ascontiguousarray(samples).reshape(h, -1).view(np.uint8).reshape(h, -1)
    raw = _filter_rows(rows, c * image.itemsize).tobytes()
    return (_PNG_SIG + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, compression)) + _chunk(b"IEND", b""))


@register_kernel("DecodePng", "CPU", cost=_decode_cost, releases_gil=False)
def decode_png_kernel(attrs):
    """tf.io.decode_png: the PNG's pixels [h, w, channels] as uint8 or uint16."""
    channels, dtype = int(attrs.get("channels", 0)), attrs.get("dtype", np.uint8)

    def fn(contents):
        data = _scalar_bytes(contents, "DecodePng")
        kind = sniff(data)
        if kind in ("png", None):
            return _decode_png(data, channels, dtype, "DecodePng")
        return _other_format(data, kind, "DecodePng", channels, dtype)
    return fn


@register_kernel("EncodePng", "CPU", cost=_encode_cost, releases_gil=False)
def encode_png_kernel(attrs):
    """tf.io.encode_png: a [h, w, c] uint8 or uint16 image as PNG bytes."""
    compression = int(attrs.get("compression", -1))
    return lambda image: _string(encode_png_bytes(image, compression))


# ---------------------------------------------------------------------------------------------
# JPEG

def _is_jpeg(data: bytes) -> bool:
    return data[:3] == b"\xff\xd8\xff"


def _open_jpeg(data: bytes, op: str):
    Image = _pil()
    if not _is_jpeg(data):
        raise InvalidArgumentError(f"{op}: Invalid JPEG data or crop window, data size {len(data)}: "
                                   "not a JPEG (no SOI marker)")
    try:
        return Image.open(io.BytesIO(data), formats=["JPEG"])
    except Exception as e:  # noqa: BLE001
        raise InvalidArgumentError(f"{op}: Invalid JPEG data, size {len(data)}: {e}") from None


def _jpeg_channels(im) -> int:
    return {"L": 1, "CMYK": 4}.get(im.mode, 3)


def _jpeg_exact(im, want: int, attrs: dict):
    """Pillow's libjpeg settings that reproduce TF's decode (draft flag: 1 is the fast integer DCT
    without fancy upsampling, 0 the accurate DCT with it), and whether they do so exactly. TF's
    default, the fast DCT with fancy upsampling, exists in Pillow only where no chroma is upsampled:
    gray files or output, and 4:4:4 colour."""
    method = attrs.get("dct_method", "") or ""
    method = method.decode() if isinstance(method, bytes) else method
    layers = getattr(im, "layer", None) or []
    subsampled = want != 1 and len({(h, v) for _, h, v, _ in layers}) > 1
    fancy = bool(attrs.get("fancy_upscaling", True)) and subsampled
    if method == "INTEGER_ACCURATE":
        return (0, True) if fancy or not subsampled else (1, False)
    return (0, False) if fancy else (1, True)


def _decode_jpeg(data: bytes, attrs: dict, op: str) -> np.ndarray:
    channels = int(attrs.get("channels", 0))
    ratio = int(attrs.get("ratio", 1))
    if channels not in (0, 1, 3):
        raise InvalidArgumentError(f"{op}: channels must be 0, 1 or 3, got {channels}")
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"{op}: ratio must be 1, 2, 4, or 8, got {ratio}")
    im = _open_jpeg(data, op)
    want = channels or min(_jpeg_channels(im), 3)
    mode = "L" if want == 1 else "RGB"
    try:
        draft, _ = _jpeg_exact(im, want, attrs)
        scale = 1
        if ratio != 1 or want == 1:
            w, h = im.size
            im.draft(mode, (max(w // ratio, 1), max(h // ratio, 1)))     # Pillow rounds its scale down
            scale = im.decoderconfig[0] if im.decoderconfig else 1
        im.decoderconfig = (scale, draft)
        im.load()
        im = im.convert(mode) if im.mode != mode else im
    except Exception as e:  # noqa: BLE001
        raise InvalidArgumentError(f"{op}: Invalid JPEG data, size {len(data)}: {e}") from None
    arr = np.asarray(im, dtype=np.uint8)
    return np.ascontiguousarray(arr[..., None] if arr.ndim == 2 else arr)


@register_kernel("DecodeJpeg", "CPU", cost=_decode_cost, releases_gil=False)
def decode_jpeg_kernel(attrs):
    """tf.io.decode_jpeg: the JPEG's pixels [h / ratio, w / ratio, channels], uint8."""
    def fn(contents):
        data = _scalar_bytes(contents, "DecodeJpeg")
        kind = sniff(data)
        if kind in ("jpeg", None):
            return _decode_jpeg(data, attrs, "DecodeJpeg")
        return _other_format(data, kind, "DecodeJpeg", int(attrs.get("channels", 0)))
    return fn


@register_kernel("DecodeAndCropJpeg", "CPU", cost=_decode_cost, releases_gil=False)
def decode_and_crop_jpeg_kernel(attrs):
    """tf.io.decode_and_crop_jpeg: the window [y, x, height, width] of the decoded JPEG."""
    def fn(contents, crop_window):
        op = "DecodeAndCropJpeg"
        win = np.asarray(crop_window).reshape(-1)
        if win.shape[0] != 4:
            raise InvalidArgumentError(f"{op}: crop_window must have four elements, got {win.tolist()}")
        img = _decode_jpeg(_scalar_bytes(contents, op), attrs, op)
        y, x, h, w = (int(v) for v in win)
        if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > img.shape[0] or x + w > img.shape[1]:
            raise InvalidArgumentError(f"{op}: Invalid JPEG data or crop window: window {win.tolist()} does not fit "
                                       f"the image [{img.shape[0]}, {img.shape[1]}]")
        return np.ascontiguousarray(img[y:y + h, x:x + w])
    return fn


@register_kernel("ExtractJpegShape", "CPU", releases_gil=False)
def extract_jpeg_shape_kernel(attrs):
    """tf.io.extract_jpeg_shape: [height, width, components] from the JPEG's header."""
    out_type = attrs.get("output_type", np.int32)

    def fn(contents):
        im = _open_jpeg(_scalar_bytes(contents, "ExtractJpegShape"), "ExtractJpegShape")
        w, h = im.size
        return np.array([h, w, _jpeg_channels(im)], dtype=out_type)
    return fn


def encode_jpeg_bytes(image: np.ndarray, attrs: dict, quality: int, op: str = "EncodeJpeg") -> bytes:
    image = np.asarray(image)
    if image.ndim != 3:
        raise InvalidArgumentError(f"{op}: image must be 3-dimensional, got shape {list(image.shape)}")
    c = image.shape[2]
    fmt = attrs.get("format", "") or ""
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    need = {"grayscale": 1, "rgb": 3}.get(fmt)
    if fmt not in ("", "grayscale", "rgb"):
        raise InvalidArgumentError(f"{op}: format must be '', 'grayscale' or 'rgb', got {fmt!r}")
    if (need is not None and c != need) or c not in (1, 3):
        raise InvalidArgumentError(f"{op}: image must have 1 or 3 channels (format {fmt!r}), got {c}")
    if not 0 <= quality <= 100:
        raise InvalidArgumentError(f"{op}: quality must be in [0, 100], got {quality}")
    if 0 in image.shape[:2]:
        raise InvalidArgumentError(f"{op}: image must have a non-zero size, got shape {list(image.shape)}")
    Image = _pil()
    im = Image.fromarray(np.ascontiguousarray(image[..., 0] if c == 1 else image, dtype=np.uint8),
                         "L" if c == 1 else "RGB")
    unit = attrs.get("density_unit", "in")
    unit = unit.decode() if isinstance(unit, bytes) else unit
    dpi = (int(attrs.get("x_density", 300)), int(attrs.get("y_density", 300)))
    if unit == "cm":
        dpi = tuple(d * 2.54 for d in dpi)
    opts = {"quality": max(int(quality), 1), "progressive": bool(attrs.get("progressive", False)),
            "optimize": bool(attrs.get("optimize_size", False)), "dpi": dpi,
            "subsampling": 2 if attrs.get("chroma_downsampling", True) else 0}
    xmp = attrs.get("xmp_metadata", "") or ""
    if xmp:
        opts["xmp"] = xmp.encode() if isinstance(xmp, str) else xmp
    buf = io.BytesIO()
    im.save(buf, "JPEG", **opts)
    return buf.getvalue()


@register_kernel("EncodeJpeg", "CPU", cost=_encode_cost, releases_gil=False)
def encode_jpeg_kernel(attrs):
    """tf.io.encode_jpeg: a [h, w, 1 or 3] uint8 image as JPEG bytes (Pillow's libjpeg)."""
    return lambda image: _string(encode_jpeg_bytes(image, attrs, int(attrs.get("quality", 95))))


@register_kernel("EncodeJpegVariableQuality", "CPU", cost=_encode_cost, releases_gil=False)
def encode_jpeg_variable_quality_kernel(attrs):
    """TF's EncodeJpegVariableQuality: encode_jpeg at a quality given as a tensor."""
    def fn(images, quality):
        q = np.asarray(quality)
        if q.ndim != 0:
            raise InvalidArgumentError(f"EncodeJpegVariableQuality: quality must be scalar, got shape {list(q.shape)}")
        return _string(encode_jpeg_bytes(images, attrs, int(q), "EncodeJpegVariableQuality"))
    return fn


# ---------------------------------------------------------------------------------------------
# BMP

def _decode_bmp(data: bytes, channels: int, op: str) -> np.ndarray:
    """Uncompressed 8-, 24- and 32-bit BMPs, as TF's DecodeBmp reads them: 24-bit as RGB, 32-bit as
    RGBA (the fourth byte the alpha), 8-bit as one gray channel (the palette is not read)."""
    bad = f"{op}: Invalid BMP data, size {len(data)}"
    if channels not in (0, 1, 3, 4):
        raise InvalidArgumentError(f"{op}: channels must be 0, 1, 3 or 4, got {channels}")
    if len(data) < 54 or data[:2] != b"BM":
        raise InvalidArgumentError(f"{bad}: not a BMP (no 'BM' header)")
    offset = struct.unpack_from("<I", data, 10)[0]
    header_size, width, height, _, bpp, compression = struct.unpack_from("<IiiHHI", data, 14)
    if bpp not in (8, 24, 32):
        raise InvalidArgumentError(f"{op}: only 8, 24 or 32 bits per pixel are supported, got {bpp}")
    if compression not in (0, 3) or width <= 0 or height == 0 or header_size < 12:
        raise InvalidArgumentError(f"{bad}: unsupported compression {compression} or size {width}x{height}")
    c = bpp // 8
    top_down = height < 0
    h = abs(height)
    row = (width * c + 3) // 4 * 4
    if offset + row * h > len(data):
        raise InvalidArgumentError(f"{bad}: pixel data is truncated ({width}x{h}, {bpp} bits per pixel)")
    px = np.frombuffer(data, np.uint8, row * h, offset).reshape(h, row)[:, :width * c].reshape(h, width, c)
    if not top_down:
        px = px[::-1]
    if c >= 3:
        px = px[..., [2, 1, 0, 3][:c]]          # BGR(A) to RGB(A)
    want = channels or c
    if c == 1 and want in (3, 4):
        px = np.repeat(px, 3, axis=-1)
        if want == 4:
            px = np.concatenate([px, np.full(px.shape[:2] + (1,), 255, np.uint8)], axis=-1)
    elif c != want:
        if want == 1:
            raise InvalidArgumentError(f"{op}: channels 1 needs an 8-bit BMP, got {bpp} bits per pixel")
        px = px[..., :3] if want == 3 else np.concatenate([px, np.full(px.shape[:2] + (1,), 255, np.uint8)], axis=-1)
    return np.ascontiguousarray(px)


@register_kernel("DecodeBmp", "CPU", cost=_decode_cost, releases_gil=False)
def decode_bmp_kernel(attrs):
    """tf.io.decode_bmp: an uncompressed BMP's pixels [h, w, channels], uint8."""
    channels = int(attrs.get("channels", 0))
    return lambda contents: _decode_bmp(_scalar_bytes(contents, "DecodeBmp"), channels, "DecodeBmp")


# ---------------------------------------------------------------------------------------------
# GIF

@njit(nogil=True, cache=True)
def _lzw(data, min_size, npix):
    """GIF's LZW: the first `npix` colour indices of the frame's data; fewer when it ends early."""
    out = np.zeros(npix, np.uint8)
    prefix = np.zeros(4096, np.int32)
    suffix = np.zeros(4096, np.uint8)
    clear = 1 << min_size
    end = clear + 1
    for i in range(clear):
        prefix[i] = -1
        suffix[i] = i
    size = min_size + 1
    nxt = end + 1
    prev = -1
    bits = 0
    nbits = 0
    n = 0
    stack = np.zeros(4097, np.uint8)
    for byte in data:
        bits |= np.int64(byte) << nbits
        nbits += 8
        while nbits >= size:
            code = np.int32(bits & ((1 << size) - 1))
            bits >>= size
            nbits -= size
            if code == clear:
                size = min_size + 1
                nxt = end + 1
                prev = -1
                continue
            if code == end:
                return out, n
            if prev == -1:
                if code >= clear:
                    return out, -1
                if n < npix:
                    out[n] = suffix[code]
                n += 1
                prev = code
                continue
            if code < nxt:
                c = code
            elif code == nxt:
                c = prev
            else:
                return out, -1
            # unwind c
            k = 0
            cc = c
            while cc != -1:
                stack[k] = suffix[cc]
                k += 1
                cc = prefix[cc]
            first = stack[k - 1]
            for j in range(k - 1, -1, -1):
                if n < npix:
                    out[n] = stack[j]
                n += 1
            if code == nxt:
                if n < npix:
                    out[n] = first
                n += 1
            if nxt < 4096:
                prefix[nxt] = prev
                suffix[nxt] = first
                nxt += 1
                if nxt == (1 << size) and size < 12:
                    size += 1
            prev = code
    return out, n


def _gif_blocks(data: bytes, pos: int):
    """The concatenated data sub-blocks from `pos`, and the position after their terminator."""
    parts = []
    while True:
        if pos >= len(data):
            raise ValueError("truncated data sub-blocks")
        n = data[pos]
        pos += 1
        if n == 0:
            return b"".join(parts), pos
        parts.append(data[pos:pos + n])
        pos += n


def _gif_frames(data: bytes):
    """(width, height, frames): each frame (left, top, w, h, indices [h, w], colour table [n, 3],
    transparent index or -1), de-interlaced, as giflib's DGifSlurp reads them."""
    if len(data) < 13 or data[:6] not in (b"GIF87a", b"GIF89a"):
        raise ValueError("no GIF signature")
    width, height, packed = struct.unpack_from("<HHB", data, 6)
    pos = 13
    global_table = None
    if packed & 0x80:
        n = 2 << (packed & 7)
        global_table = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
        pos += 3 * n
    frames, transparent = [], -1
    while pos < len(data):
        tag = data[pos]
        pos += 1
        if tag == 0x3B:
            break
        if tag == 0x21:
            label = data[pos]
            body, pos = _gif_blocks(data, pos + 1)
            if label == 0xF9 and len(body) >= 4:
                transparent = body[3] if body[0] & 1 else -1
            continue
        if tag != 0x2C:
            raise ValueError(f"unknown block 0x{tag:02x}")
        left, top, w, h, fp = struct.unpack_from("<HHHHB", data, pos)
        pos += 9
        table = global_table
        if fp & 0x80:
            n = 2 << (fp & 7)
            table = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
            pos += 3 * n
        min_size = data[pos]
        raster, pos = _gif_blocks(data, pos + 1)
        if not 2 <= min_size <= 11:
            raise ValueError(f"bad LZW code size {min_size}")
        idx, got = _lzw(np.frombuffer(raster, np.uint8), min_size, w * h)
        if got < w * h:
            raise ValueError(f"frame {len(frames)} holds {max(got, 0)} of its {w * h} pixels")
        idx = idx.reshape(h, w)
        if fp & 0x40 and h:                          # interlaced: rows 0::8, 4::8, 2::4, 1::2
            order = np.concatenate([np.arange(s0, h, st) for s0, st in ((0, 8), (4, 8), (2, 4), (1, 2))])
            rows = np.empty_like(idx)
            rows[order] = idx
            idx = rows
        frames.append((left, top, w, h, idx, table, transparent))
        transparent = -1
    if not frames:
        raise ValueError("Gif file does not contain any image")
    return width, height, frames


def _decode_gif(data: bytes, op: str) -> np.ndarray:
    """Every frame [frames, h, w, 3], composited as TF's gif_io.cc does: each frame starts as a copy
    of the one before (disposal methods ignored), its rectangle's pixels drawn from its colour table
    except its transparent index, which keeps the pixel below (black on the first frame, as is all
    of the first frame outside its rectangle)."""
    if data[:4] != b"GIF8":
        raise InvalidArgumentError(f"{op}: Invalid GIF data (size {len(data)}): no GIF signature")
    try:
        width, height, frames = _gif_frames(data)
    except (ValueError, struct.error, IndexError) as e:
        raise InvalidArgumentError(f"{op}: Invalid GIF data (size {len(data)}): {e}") from None
    out = np.zeros((len(frames), height, width, 3), np.uint8)
    for k, (left, top, w, h, idx, table, transparent) in enumerate(frames):
        if k:
            out[k] = out[k - 1]
        if table is None:
            raise InvalidArgumentError(f"{op}: Missing color map.")
        y0, x0, y1, x1 = max(top, 0), max(left, 0), min(top + h, height), min(left + w, width)
        if y1 <= y0 or x1 <= x0:
            continue
        part = idx[y0 - top:y1 - top, x0 - left:x1 - left]
        opaque = part != transparent
        if (part[opaque] >= table.shape[0]).any():
            raise InvalidArgumentError(f"{op}: Found color index {int(part[opaque].max())} outside of color map "
                                       f"range {table.shape[0]}")
        region = out[k, y0:y1, x0:x1]
        region[opaque] = table[part[opaque]]
        if k == 0:
            region[~opaque] = 0
    return out


@register_kernel("DecodeGif", "CPU", cost=_decode_cost, releases_gil=False)
def decode_gif_kernel(attrs):
    """tf.io.decode_gif: every frame [num_frames, h, w, 3], uint8."""
    def fn(contents):
        data = _scalar_bytes(contents, "DecodeGif")
        kind = sniff(data)
        if kind in ("gif", None):
            return _decode_gif(data, "DecodeGif")
        return _other_format(data, kind, "DecodeGif", 3, frames=True)
    return fn


# ---------------------------------------------------------------------------------------------
# WebP

def _is_webp(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def _decode_webp(data: bytes, channels: int, op: str) -> np.ndarray:
    """Every frame [frames, h, w, c] of a WebP through Pillow's libwebp: c is 4 when the file has
    alpha, else 3; `channels` must be 0 or that (TF's rule)."""
    if not _is_webp(data):
        raise InvalidArgumentError(f"{op}: Invalid WebP data (size {len(data)}): no RIFF/WEBP header")
    Image = _pil()
    frames = []
    try:
        im = Image.open(io.BytesIO(data), formats=["WEBP"])
        mode = "RGBA" if im.mode in ("RGBA", "LA", "PA") or im.info.get("transparency") is not None else "RGB"
        for k in range(getattr(im, "n_frames", 1)):
            im.seek(k)
            frames.append(np.asarray(im.convert(mode), dtype=np.uint8))
    except Exception as e:  # noqa: BLE001
        raise InvalidArgumentError(f"{op}: Invalid WebP data (size {len(data)}): {e}") from None
    c = 4 if mode == "RGBA" else 3
    if channels not in (0, c):
        raise InvalidArgumentError(f"{op}: Number of channels requested ({channels}) does not match the image's "
                                   f"({c})")
    return np.stack(frames)


@register_kernel("DecodeWebP", "CPU", cost=_decode_cost, releases_gil=False)
def decode_webp_kernel(attrs):
    """tf.io.decode_webp: every frame [num_frames, h, w, channels], uint8."""
    channels = int(attrs.get("channels", 0))
    return lambda contents: _decode_webp(_scalar_bytes(contents, "DecodeWebP"), channels, "DecodeWebP")


# ---------------------------------------------------------------------------------------------
# DecodePng, DecodeJpeg and DecodeGif read each other's formats, as TF's shared kernel does

def _other_format(data: bytes, kind: str | None, op: str, channels: int, dtype=np.uint8, frames=False):
    """What TF's DecodePng/DecodeJpeg/DecodeGif return for a file of another of the three formats:
    the image decoded by its own decoder ([1, h, w, 3] for DecodeGif); BMP and unknown data fail."""
    if kind == "bmp":
        raise InvalidArgumentError(f"{op}: Trying to decode BMP format using a wrong op. Use `decode_bmp` or "
                                   "`decode_image` instead.")
    if frames:                                              # DecodeGif: RGB frames
        channels = 3
    if kind == "png":
        img, opaque = _decode_png_native(data, op)
        img = _to_depth(_to_channels(img, channels, op, opaque), np.uint8)
    elif kind == "jpeg":
        img = _decode_jpeg(data, {"channels": channels}, op)      # channels 4 fails, as in TF
    elif kind == "gif":
        gif = _decode_gif(data, op)
        if gif.shape[0] != 1:
            raise InvalidArgumentError(f"{op}: Got {gif.shape[0]} frames, but animated gifs can only be decoded "
                                       "by tf.io.decode_gif or tf.io.decode_image")
        img = _to_channels(gif[0], channels, op)
    else:
        raise InvalidArgumentError(f"{op}: Unknown image file format. One of JPEG, PNG, GIF, BMP required.")
    if frames:
        return np.ascontiguousarray(img[None])
    return np.ascontiguousarray(img if np.dtype(dtype) == np.uint8 else img.astype(np.uint16) << np.uint16(8))


# ---------------------------------------------------------------------------------------------
# DecodeImage: the format sniffed from the first bytes

def sniff(data: bytes) -> str | None:
    if _is_jpeg(data):
        return "jpeg"
    if data.startswith(_PNG_SIG):
        return "png"
    if data[:3] == b"GIF":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if _is_webp(data):
        return "webp"
    return None


@register_kernel("DecodeImage", "CPU", cost=_decode_cost, releases_gil=False)
def decode_image_kernel(attrs):
    """TF's DecodeImage: a JPEG, PNG, GIF or BMP by its first bytes; [h, w, c], or [frames, h, w, 3]
    for a GIF with `expand_animations` (its first frame without). float32 output is scaled to [0, 1]."""
    channels = int(attrs.get("channels", 0))
    dtype = np.dtype(attrs.get("dtype", np.uint8))
    expand = bool(attrs.get("expand_animations", True))
    op = "DecodeImage"

    def fn(contents):
        data = _scalar_bytes(contents, op)
        kind = sniff(data)
        if kind is None:
            raise InvalidArgumentError(f"{op}: Unknown image file format. One of JPEG, PNG, GIF, BMP, WebP required.")
        if kind == "png":
            native, opaque = _decode_png_native(data, op)
            native = _to_channels(native, channels, op, opaque)
            img = native if dtype == np.float32 else _to_depth(native, dtype)
        elif kind == "jpeg":
            img = _decode_jpeg(data, {"channels": channels}, op)
        elif kind == "bmp":
            img = _decode_bmp(data, channels, op)
        elif kind == "webp":
            img = _decode_webp(data, channels, op)
            if not expand:
                img = img[0]
        else:
            if channels not in (0, 3):
                raise InvalidArgumentError(f"{op}: channels must be 0 or 3 for GIF, got {channels}")
            img = _decode_gif(data, op)
            if not expand:
                img = img[0]
        if dtype == np.uint8 or (dtype == np.uint16 and kind == "png"):
            return img
        if dtype == np.uint16 and kind != "png":     # TF widens JPEG, BMP, GIF and WebP samples by a shift
            return img.astype(np.uint16) << np.uint16(8)
        return (img.astype(np.float32) / np.float32(np.iinfo(img.dtype).max)).astype(dtype)
    return fn
