"""TFRecord files: TensorFlow's framing of byte records, read and written bit-compatibly.

Each record is `uint64 length | uint32 masked crc32c(length) | data | uint32 masked crc32c(data)`,
little-endian, where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (TF's lib/io/record_writer).
A file may be compressed whole with GZIP or ZLIB (TFRecordOptions). Reading checks both CRCs and
raises DataLossError naming the file and the offset of a damaged or truncated record.

This module imports only actorflow.errors: the python_io namespace, the datasets (actors) and
the readers share it.
"""
from __future__ import annotations

import gzip
import struct
import zlib

from actorflow import errors

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "masked_crc32c", "encode_record", "RecordReader",
           "open_for_write", "open_for_read"]

_MASK_DELTA = 0xa282ead8


def _crc32c(data) -> int:
    import google_crc32c
    return google_crc32c.value(bytes(data))


def masked_crc32c(data) -> int:
    c = _crc32c(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xffffffff


class TFRecordCompressionType:
    """tf.python_io.TFRecordCompressionType."""
    NONE = 0
    ZLIB = 1
    GZIP = 2


_NAMES = {None: 0, "": 0, "NONE": 0, "ZLIB": 1, "GZIP": 2, 0: 0, 1: 1, 2: 2}


class TFRecordOptions:
    """Options of a TFRecord file (tf.io.TFRecordOptions): its compression ("", "ZLIB", "GZIP", or a
    TFRecordCompressionType) and the zlib compression level."""

    def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None, output_buffer_size=None,
                 window_bits=None, compression_level=None, compression_method=None, mem_level=None,
                 compression_strategy=None):
        self.compression_type = _compression(compression_type)
        self.compression_level = -1 if compression_level is None else int(compression_level)

    @staticmethod
    def get_compression_type_string(options):
        c = _compression(options.compression_type if isinstance(options, TFRecordOptions) else options)
        return {0: "", 1: "ZLIB", 2: "GZIP"}[c]


def _compression(value) -> int:
    if isinstance(value, TFRecordOptions):
        return value.compression_type
    key = value.upper() if isinstance(value, str) else value
    if key not in _NAMES:
        raise ValueError(f"Unsupported TFRecord compression type {value!r}: use '', 'ZLIB' or 'GZIP'")
    return _NAMES[key]


def encode_record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


class _ZlibWriter:
    def __init__(self, f, level):
        self.f = f
        self.z = zlib.compressobj(level)

    def write(self, b):
        self.f.write(self.z.compress(b))

    def flush(self):
        self.f.write(self.z.flush(zlib.Z_SYNC_FLUSH))
        self.f.flush()

    def close(self):
        self.f.write(self.z.flush())
        self.f.close()


def open_for_write(path: str, options=None):
    """A binary file object for `path` that compresses as `options` say (flush() and close() work)."""
    from actorflow import gfile
    kind = _compression(options)
    level = options.compression_level if isinstance(options, TFRecordOptions) else -1
    raw = gfile.GFile(path, "wb")
    if kind == TFRecordCompressionType.GZIP:
        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9 if level < 0 else level)
    if kind == TFRecordCompressionType.ZLIB:
        return _ZlibWriter(raw, level)
    return raw


class RecordReader:
    """Iterates the records of one TFRecord file, checking their CRCs."""

    def __init__(self, path: str, compression=None, op: str | None = None, raw=None):
        self.path = path
        self.op = op
        if raw is None:          # `raw`: the file, already opened in binary mode by the caller
            try:
                raw = open(path, "rb")  # noqa: SIM115 - closed by close() or at the end
            except OSError as e:
                raise errors.NotFoundError(op, None, f"{path}: {e.strerror}") from None
        self.f = open_for_read(raw, compression)
        self.offset = 0

    def _damaged(self, what):
        where = f" (op '{self.op}')" if self.op else ""
        return errors.DataLossError(self.op, None, f"corrupted record at {self.offset} in {self.path}: {what}{where}")

    def _read(self, n):
        try:
            b = self.f.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise self._damaged(f"the compressed stream is damaged ({e})") from None
        return b

    def next(self):
        """The next record's bytes, or None at the end of the file."""
        header = self._read(12)
        if not header:
            return None
        if len(header) < 12:
            raise self._damaged("truncated record header")
        length_bytes, crc = header[:8], struct.unpack("<I", header[8:])[0]
        if masked_crc32c(length_bytes) != crc:
            raise self._damaged("the length's checksum does not match")
        (n,) = struct.unpack("<Q", length_bytes)
        body = self._read(n + 4)
        if len(body) < n + 4:
            raise self._damaged(f"truncated record (expected {n} bytes of data)")
        data, (crc,) = body[:n], struct.unpack("<I", body[n:])
        if masked_crc32c(data) != crc:
            raise self._damaged("the data's checksum does not match")
        self.offset += 12 + n + 4
        return data

    def __iter__(self):
        try:
            while True:
                r = self.next()
                if r is None:
                    return
                yield r
        finally:
            self.close()

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None


def open_for_read(raw, compression=None):
    """A file object whose read(n) gives the bytes of the binary file `raw` decompressed as
    `compression` says (a TFRecordOptions, a TFRecordCompressionType, "", "ZLIB" or "GZIP");
    `raw` itself when it is not compressed. Closing it closes `raw`."""
    kind = _compression(compression)
    if kind == TFRecordCompressionType.GZIP:
        return _GzipReader(raw)
    if kind == TFRecordCompressionType.ZLIB:
        return _ZlibReader(raw)
    return raw


class _GzipReader:
    # A GzipFile given a file object leaves it open when it closes.
    def __init__(self, raw):
        self.raw = raw
        self.g = gzip.GzipFile(fileobj=raw, mode="rb")

    def read(self, n):
        return self.g.read(n)

    def close(self):
        self.g.close()
        self.raw.close()


class _ZlibReader:
    def __init__(self, raw):
        self.raw = raw
        self.z = zlib.decompressobj()
        self.buf = b""

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.raw.read(65536)
            if not chunk:
                self.buf += self.z.flush()
                break
            self.buf += self.z.decompress(chunk)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def close(self):
        self.raw.close()
