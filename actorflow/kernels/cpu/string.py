"""CPU kernels for string ops: AsString, StringJoin, StringLength, StringFormat, Print, PrintV2, and
the text ops (split, substr, regex_replace, strip, case, hash buckets, reduce_join, decode_csv,
read/write_file, base64), each following TF's kernel of the same name, its error messages included.

A string tensor is a numpy object array of `bytes`. Tensors print as TF's
`Tensor::SummarizeValue` prints them: numpy-like for StringFormat / tf.print (print_v2), and the
legacy flat form for tf.Print.
"""
from __future__ import annotations

import logging
import sys
import threading

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

logger = logging.getLogger(__name__)


def _bytes_array(values, shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _one(v, v2: bool) -> str:
    """One element as TF's PrintOneElement writes it (floats round-trip at the fewest digits)."""
    if isinstance(v, bytes):
        text = v.decode("utf-8", "backslashreplace")
        return '"' + text.encode("unicode_escape").decode("ascii") + '"' if v2 else text
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, np.floating):
        if v.dtype.itemsize <= 4:
            s = f"{float(v):.6g}"
            return s if np.float32(s) == v else f"{float(v):.9g}"
        s = f"{float(v):.15g}"
        return s if float(s) == v else f"{float(v):.17g}"
    return str(v)


def summarize_v2(a: np.ndarray, n: int) -> str:
    """numpy-like text with `n` entries at each end of each axis (n < 0: all)."""
    if a.ndim == 0:
        return _one(a[()], True)
    if a.size == 0:
        return "[]"
    if n < 0:
        n = a.size

    def dim(sub, d):
        if not isinstance(sub, np.ndarray):     # an element (object arrays index to their items)
            return _one(sub, True)
        if sub.ndim == 0:
            return _one(sub[()], True)
        count = sub.shape[0]
        spacing = " " if sub.ndim == 1 else "\n" * (sub.ndim - 1) + " " * (d + 1)
        items = [dim(sub[i], d + 1) for i in range(min(n, count))]
        if count > 2 * n:
            items.append("...")
        items += [dim(sub[i], d + 1) for i in range(max(n, count - n), count)]
        return "[" + spacing.join(items) + "]"
    return dim(a, 0)


def summarize_v1(a: np.ndarray, n: int) -> str:
    """The legacy flat form of tf.Print: the first `n` entries, nested brackets, then "..."."""
    flat = a.reshape(-1)
    total = flat.size
    limit = total if n < 0 else min(n, total)
    if total == 0:
        return ""
    if a.ndim == 0:
        return _one(flat[0], False)
    out = []
    idx = [0]

    def dim(d):
        if idx[0] >= limit:
            return
        count = a.shape[d]
        if d == a.ndim - 1:
            for i in range(count):
                if idx[0] >= limit:
                    if d != 0:
                        out.append("...")
                    return
                if i > 0:
                    out.append(" ")
                out.append(_one(flat[idx[0]], False))
                idx[0] += 1
            return
        for _ in range(count):
            opened = idx[0] < limit
            if opened:
                out.append("[")
            dim(d + 1)
            if idx[0] < limit or opened:
                out.append("]")
    dim(0)
    if total > limit:
        out.append("...")
    return "".join(out)


@register_kernel("AsString", "CPU")
def as_string_kernel(attrs):
    """tf.strings.as_string: printf formatting, element by element."""
    prec, width, fill = attrs.get("precision", -1), attrs.get("width", -1), attrs.get("fill", "")
    sci, shortest = attrs.get("scientific", False), attrs.get("shortest", False)
    spec = "%" + fill + (str(width) if width >= 0 else "")

    def fn(x):
        x = np.asarray(x)
        kind = x.dtype.kind
        if kind == "b":
            vals = [b"true" if v else b"false" for v in x.reshape(-1)]
        elif kind == "O":
            vals = list(x.reshape(-1))
        else:
            if kind == "f":
                f = spec + (f".{prec}" if prec >= 0 else "") + ("e" if sci else "g" if shortest else "f")
                conv = float
            else:
                f, conv = spec + "d", int
            vals = [(f % conv(v)).encode() for v in x.reshape(-1)]
        return _bytes_array(vals, x.shape)
    return fn


@register_kernel("StringJoin", "CPU")
def string_join_kernel(attrs):
    """tf.strings.join: element-wise concatenation with a separator; scalars broadcast."""
    sep = attrs.get("separator", "").encode()

    def fn(*xs):
        shape = ()
        for x in xs:
            if np.ndim(x):
                if shape and np.shape(x) != shape:
                    raise InvalidArgumentError(f"StringJoin: input shapes do not match: {list(shape)} vs. "
                                               f"{list(np.shape(x))}")
                shape = np.shape(x)
        cols = [np.broadcast_to(x, shape).reshape(-1) for x in xs]
        size = int(np.prod(shape, dtype=np.int64))
        return _bytes_array([sep.join(c[i] for c in cols) for i in range(size)], shape)
    return fn


@register_kernel("StringLength", "CPU")
def string_length_kernel(attrs):
    """tf.strings.length: bytes, or UTF-8 characters with unit="UTF8_CHAR"."""
    chars = attrs.get("unit", "BYTE") == "UTF8_CHAR"

    def fn(x):
        count = (lambda b: len(b.decode("utf-8", "replace"))) if chars else len
        return np.array([count(b) for b in np.asarray(x).reshape(-1)], dtype=np.int32).reshape(np.shape(x))
    return fn


@register_kernel("StringFormat", "CPU")
def string_format_kernel(attrs):
    """tf.strings.format: the template with each placeholder replaced by one tensor's text."""
    pieces = attrs["template"].split(attrs["placeholder"])
    n = attrs.get("summarize", 3)

    def fn(*xs):
        out = [pieces[0]]
        for x, tail in zip(xs, pieces[1:]):
            out.append(summarize_v2(np.asarray(x), n))
            out.append(tail)
        return _bytes_array(["".join(out).encode("utf-8")], ())
    return fn


@register_kernel("StringToNumber", "CPU")
def string_to_number_kernel(attrs):
    """tf.strings.to_number: each string parsed as a float or an integer of `out_type`."""
    out = np.dtype(attrs["out_type"])
    parse = float if out.kind == "f" else int
    info = None if out.kind == "f" else np.iinfo(out)

    def fn(x):
        x = np.asarray(x)
        vals = []
        for b in x.reshape(-1):
            try:
                v = parse(b.decode("utf-8").strip())
            except (ValueError, UnicodeDecodeError):
                raise InvalidArgumentError(f"StringToNumberOp could not correctly convert string: {b!r}") from None
            if info is not None and not info.min <= v <= info.max:
                raise InvalidArgumentError(f"StringToNumberOp: {b!r} is out of range for {out.name}")
            vals.append(v)
        return np.array(vals, dtype=out).reshape(x.shape)
    return fn


def _emit(stream: str, text: str) -> None:
    if stream == "stderr":
        sys.stderr.write(text)
        sys.stderr.flush()
    elif stream == "stdout":
        sys.stdout.write(text)
        sys.stdout.flush()
    elif stream.startswith("log("):
        level = {"log(info)": logging.INFO, "log(warning)": logging.WARNING}.get(stream, logging.ERROR)
        logger.log(level, "%s", text.rstrip("\n"))
    elif stream.startswith("file://"):
        with open(stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
    else:
        raise InvalidArgumentError(f"PrintV2: unknown output stream {stream!r}")


@register_kernel("PrintV2", "CPU", releases_gil=False)
def print_v2_kernel(attrs):
    """tf.print: writes a scalar string, then `end`, to the output stream."""
    stream, end = attrs.get("output_stream", "stderr"), attrs.get("end", "\n")

    def fn(s):
        _emit(stream, np.asarray(s).reshape(())[()].decode("utf-8", "backslashreplace") + end)
        return ()
    return fn


@register_kernel("Print", "CPU", releases_gil=False)
def print_kernel(attrs):
    """tf.compat.v1.Print: forwards its first input and writes the message and data to stderr,
    at most `first_n` times (per op instance) when first_n >= 0."""
    message, first_n, n = attrs.get("message", ""), attrs.get("first_n", -1), attrs.get("summarize", 3)
    lock = threading.Lock()
    count = [0]

    def fn(x, *data):
        with lock:
            count[0] += 1
            skip = 0 <= first_n < count[0]
        if not skip:
            _emit("stderr", message + "".join("[" + summarize_v1(np.asarray(d), n) + "]" for d in data) + "\n")
        return x
    return fn


# -- the text ops ---------------------------------------------------------------------------------------
def _flat(x) -> list:
    return list(np.asarray(x, dtype=object).reshape(-1))


def _split_result(rows: list[list[bytes]]):
    n = sum(len(r) for r in rows)
    idx = np.empty((n, 2), dtype=np.int64)
    vals = []
    k = 0
    for i, r in enumerate(rows):
        idx[k:k + len(r), 0] = i
        idx[k:k + len(r), 1] = np.arange(len(r))
        k += len(r)
        vals.extend(r)
    longest = max((len(r) for r in rows), default=0)
    return idx, _bytes_array(vals, (n,)), np.array([len(rows), longest], dtype=np.int64)


@register_kernel("StringSplit", "CPU")
def string_split_kernel(attrs):
    """tf.compat.v1.string_split: split at any byte of the delimiter ("" splits into bytes)."""
    import re
    skip = attrs.get("skip_empty", True)

    def fn(source, delimiter):
        if np.ndim(source) != 1:
            raise InvalidArgumentError(f"input must be a vector, got shape: {list(np.shape(source))}")
        d = np.asarray(delimiter).reshape(())[()]
        if d == b"":
            rows = [[bytes([c]) for c in s] for s in _flat(source)]
        else:
            rx = re.compile(b"[" + re.escape(d) + b"]")
            rows = [[t for t in rx.split(s) if t or not skip] if s else [] for s in _flat(source)]
        return _split_result(rows)
    return fn


@register_kernel("StringSplitV2", "CPU")
def string_split_v2_kernel(attrs):
    """tf.strings.split (v1 form): Python's bytes.split(sep or None, maxsplit)."""
    maxsplit = attrs.get("maxsplit", -1)

    def fn(source, sep):
        if np.ndim(source) != 1:
            raise InvalidArgumentError(f"input must be a vector, got shape: {list(np.shape(source))}")
        s = np.asarray(sep).reshape(())[()] or None
        if s is None and maxsplit >= 0:
            rows = [_whitespace_split(x, maxsplit) for x in _flat(source)]
        else:
            rows = [x.split(s, maxsplit) for x in _flat(source)]
        return _split_result(rows)
    return fn


def _whitespace_split(text: bytes, maxsplit: int) -> list[bytes]:
    """TF's whitespace split with a limit: once `maxsplit` tokens are cut, the rest (its leading
    whitespace removed) is one more token, even when empty (b"one" with maxsplit 1 gives
    [b"one", b""], where Python gives [b"one"])."""
    out = []
    while maxsplit != 0:
        text = text.lstrip()
        if not text:
            return out
        parts = text.split(None, 1)
        out.append(parts[0])
        text = text[len(parts[0]):]
        maxsplit -= 1
    out.append(text.lstrip())
    return out


def _utf8_offsets(s: bytes) -> list[int]:
    """Byte offsets of the UTF-8 characters of `s`, and its length."""
    return [i for i, c in enumerate(s) if c & 0xC0 != 0x80] + [len(s)]


@register_kernel("Substr", "CPU")
def substr_kernel(attrs):
    """tf.strings.substr: `len` units from `pos` (negative: from the end); pos out of range fails."""
    chars = attrs.get("unit", "BYTE") == "UTF8_CHAR"

    def fn(x, pos, ln):
        x = np.asarray(x, dtype=object)
        try:
            shape = np.broadcast_shapes(x.shape, np.shape(pos))
        except ValueError:
            raise InvalidArgumentError(f"Incompatible shapes: {list(x.shape)} vs. {list(np.shape(pos))}") from None
        xs = np.broadcast_to(x, shape).reshape(-1)
        ps = np.broadcast_to(pos, shape).reshape(-1)
        ls = np.broadcast_to(ln, shape).reshape(-1)
        out = []
        for s, p, n in zip(xs, ps, ls):
            p, n = int(p), int(n)
            offs = _utf8_offsets(s) if chars else None
            size = len(offs) - 1 if chars else len(s)
            if p < 0:
                p += size
            if not 0 <= p <= size:
                raise InvalidArgumentError(f"pos {int(p if p >= 0 else p - size)} out of range for string "
                                           f"b'{s.decode('utf-8', 'backslashreplace')}' at index {len(out)}")
            end = size if n < 0 else min(p + n, size)
            out.append(s[offs[p]:offs[end]] if chars else s[p:end])
        return _bytes_array(out, shape)
    return fn


def _re2_template(rewrite: bytes):
    """An `re` replacement function for an RE2 rewrite string: \\0-\\9 groups, \\\\ a backslash."""
    parts, i, lit = [], 0, bytearray()
    while i < len(rewrite):
        c = rewrite[i:i + 1]
        if c == b"\\":
            nxt = rewrite[i + 1:i + 2]
            if nxt.isdigit():
                parts.append(bytes(lit))
                lit = bytearray()
                parts.append(int(nxt))
            elif nxt == b"\\":
                lit += b"\\"
            else:
                raise InvalidArgumentError(f"Invalid rewrite pattern: {rewrite.decode('utf-8', 'replace')} "
                                           "(a backslash must be followed by a digit or a backslash)")
            i += 2
        else:
            lit += c
            i += 1
    parts.append(bytes(lit))
    return parts


@register_kernel("RegexReplace", "CPU")
def regex_replace_kernel(attrs):
    """tf.strings.regex_replace, with Python's `re` standing in for RE2."""
    import re
    glob = attrs.get("replace_global", True)

    def fn(x, pattern, rewrite):
        pat = np.asarray(pattern).reshape(())[()]
        try:
            rx = re.compile(pat)
        except re.error as e:
            raise InvalidArgumentError(f"Invalid pattern: {pat.decode('utf-8', 'replace')}, error: {e}") from None
        parts = _re2_template(np.asarray(rewrite).reshape(())[()])
        if any(isinstance(p, int) and p > rx.groups for p in parts):
            raise InvalidArgumentError(f"Invalid rewrite pattern: rewrite names a group the pattern "
                                       f"{pat.decode('utf-8', 'replace')} does not have ({rx.groups} groups)")

        def repl(m):
            return b"".join(p if isinstance(p, bytes) else (m.group(p) or b"") for p in parts)
        count = 0 if glob else 1
        x = np.asarray(x, dtype=object)
        return _bytes_array([rx.sub(repl, s, count=count) for s in x.reshape(-1)], x.shape)
    return fn


def _elementwise(fn):
    def run(x):
        x = np.asarray(x, dtype=object)
        return _bytes_array([fn(s) for s in x.reshape(-1)], x.shape)
    return run


@register_kernel("StringStrip", "CPU")
def string_strip_kernel(attrs):
    """tf.strings.strip: ASCII whitespace off both ends."""
    return _elementwise(bytes.strip)


def _case_kernel(ascii_fn, name):
    def factory(attrs):
        if attrs.get("encoding", "") == "":
            return _elementwise(ascii_fn)
        return _elementwise(lambda s: getattr(s.decode("utf-8", "surrogateescape"), name)()
                            .encode("utf-8", "surrogateescape"))
    return factory


register_kernel("StringLower", "CPU")(_case_kernel(bytes.lower, "lower"))
register_kernel("StringUpper", "CPU")(_case_kernel(bytes.upper, "upper"))


@register_kernel("StringToHashBucketFast", "CPU")
def hash_bucket_fast_kernel(attrs):
    """tf.strings.to_hash_bucket_fast: Fingerprint64(s) mod num_buckets."""
    from actorflow.kernels.cpu.farmhash import fingerprint64
    n = int(attrs["num_buckets"])
    memo: dict = {}

    def bucket(s):
        b = memo.get(s)
        if b is None:
            b = fingerprint64(s) % n
            if len(memo) < 1 << 16:
                memo[s] = b
        return b

    def fn(x):
        x = np.asarray(x, dtype=object)
        return np.array([bucket(s) for s in x.reshape(-1)], dtype=np.int64).reshape(x.shape)
    return fn


@register_kernel("ReduceJoin", "CPU")
def reduce_join_kernel(attrs):
    """tf.strings.reduce_join: joins along the given axes, in row-major order."""
    keep, sep = attrs.get("keep_dims", False), attrs.get("separator", "").encode("utf-8")

    def fn(x, axes):
        x = np.asarray(x, dtype=object)
        rank = x.ndim
        ax = []
        for a in np.asarray(axes).reshape(-1):
            a = int(a)
            if not -rank <= a < max(rank, 1):
                raise InvalidArgumentError(f"Invalid reduction dimension {a} for input with {rank} dimension(s)")
            a = a + rank if a < 0 else a
            if a in ax:
                raise InvalidArgumentError(f"Duplicate reduction dimension {a}")
            ax.append(a)
        if rank == 0:
            return x.copy()
        # TF joins with the first axis listed varying fastest (af.reduce_join lists all axes last
        # to first when axis is None, as TF's wrapper does, so that the join is row-major).
        rest = [i for i in range(rank) if i not in ax]
        moved = np.transpose(x, rest + ax[::-1])
        lead = [x.shape[i] for i in rest]
        rows = moved.reshape(lead + [-1]) if moved.size else np.empty(lead + [0], dtype=object)
        flat = rows.reshape(-1, rows.shape[-1])
        out = _bytes_array([sep.join(r) for r in flat], lead)
        if keep:
            out = out.reshape([1 if i in ax else d for i, d in enumerate(x.shape)])
        return out
    return fn


def _csv_fields(rec: bytes, delim: int, quotes: bool, j: int) -> list[bytes]:
    """The fields of one record, as TF's DecodeCSVOp::ExtractFields splits them."""
    out, i, n = [], 0, len(rec)
    while True:
        if quotes and i < n and rec[i] == 0x22:
            field = bytearray()
            i += 1
            while True:
                if i >= n:
                    raise InvalidArgumentError(f"Quoted field has to end with quote followed by delim or end in "
                                               f"record {j}: {rec.decode('utf-8', 'backslashreplace')}")
                c = rec[i]
                if c == 0x22:
                    if i + 1 < n and rec[i + 1] == 0x22:
                        field.append(0x22)
                        i += 2
                        continue
                    if i + 1 < n and rec[i + 1] != delim:
                        raise InvalidArgumentError(
                            f"Quote inside a string has to be escaped by another quote in record {j}: "
                            f"{rec.decode('utf-8', 'backslashreplace')}")
                    i += 1
                    break
                field.append(c)
                i += 1
            out.append(bytes(field))
        else:
            end = rec.find(bytes([delim]), i)
            end = n if end < 0 else end
            field = rec[i:end]
            if quotes and (b'"' in field or b"\n" in field or b"\r" in field):
                raise InvalidArgumentError(f"Unquoted fields cannot have quotes/CRLFs inside in record {j}: "
                                           f"{rec.decode('utf-8', 'backslashreplace')}")
            out.append(field)
            i = end
        if i >= n:
            return out
        i += 1          # the delimiter
        if i == n:      # a trailing delimiter: one more, empty, field
            out.append(b"")
            return out


@register_kernel("DecodeCSV", "CPU")
def decode_csv_kernel(attrs):
    """tf.io.decode_csv: one output per column, typed by its default."""
    delim = ord(attrs.get("field_delim", ","))
    quotes, na = attrs.get("use_quote_delim", True), attrs.get("na_value", "").encode("utf-8")
    select = list(attrs.get("select_cols", ()) or ())

    def convert(field, dtype, default, col, j):
        if field == b"" or field == na:
            if default.size == 0:
                raise InvalidArgumentError(f"Field {col} is required but missing in record {j}!")
            return default.reshape(-1)[0]
        if dtype.kind == "O":
            return field
        text = field.decode("utf-8", "replace")
        try:
            if dtype.kind == "f":
                v = float(text)
            else:
                v = int(text, 10)
                info = np.iinfo(dtype)
                if not info.min <= v <= info.max:
                    raise ValueError
        except ValueError:
            kind = {"f4": "float", "f8": "double", "i4": "int32", "i8": "int64"}[dtype.str[1:]]
            raise InvalidArgumentError(f"Field {col} in record {j} is not a valid {kind}: {text}") from None
        return v

    def fn(records, *defaults):
        records = np.asarray(records, dtype=object)
        defaults = [np.asarray(d) for d in defaults]
        cols = select or list(range(len(defaults)))
        columns = [[] for _ in defaults]
        for j, rec in enumerate(records.reshape(-1)):
            fields = _csv_fields(rec, delim, quotes, j)
            if select:
                if len(fields) <= cols[-1]:
                    raise InvalidArgumentError(f"Expect {cols[-1] + 1} fields but have {len(fields)} in record {j}")
            elif len(fields) != len(defaults):
                raise InvalidArgumentError(f"Expect {len(defaults)} fields but have {len(fields)} in record {j}")
            for k, (c, d) in enumerate(zip(cols, defaults)):
                columns[k].append(convert(fields[c], d.dtype, d, c, j))
        out = []
        for vals, d in zip(columns, defaults):
            if d.dtype.kind == "O":
                out.append(_bytes_array(vals, records.shape))
            else:
                out.append(np.array(vals, dtype=d.dtype).reshape(records.shape))
        return tuple(out)
    return fn


@register_kernel("ReadFile", "CPU")
def read_file_kernel(attrs):
    """tf.io.read_file: the file's bytes."""
    from actorflow.errors import NotFoundError

    def fn(filename):
        path = np.asarray(filename).reshape(())[()].decode("utf-8")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise NotFoundError(None, None, f"{path}; No such file or directory") from None
        except IsADirectoryError:
            raise InvalidArgumentError(f"{path} is a directory, not a file") from None
        return _bytes_array([data], ())
    return fn


@register_kernel("WriteFile", "CPU")
def write_file_kernel(attrs):
    """tf.io.write_file: writes the bytes, creating the file's directories."""
    import os

    def fn(filename, contents):
        path = np.asarray(filename).reshape(())[()].decode("utf-8")
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(path, "wb") as f:
            f.write(np.asarray(contents).reshape(())[()])
        return ()
    return fn


@register_kernel("EncodeBase64", "CPU")
def encode_base64_kernel(attrs):
    """tf.io.encode_base64: the web-safe alphabet, '=' padding only with `pad`."""
    import base64
    pad = attrs.get("pad", False)
    return _elementwise(lambda s: base64.urlsafe_b64encode(s) if pad else base64.urlsafe_b64encode(s).rstrip(b"="))


@register_kernel("MatchingFiles", "CPU")
def matching_files_kernel(attrs):
    """tf.io.matching_files: every path matching any pattern, sorted."""
    import glob

    def fn(pattern):
        found = []
        for p in np.asarray(pattern, dtype=object).reshape(-1):
            found += glob.glob(p.decode("utf-8"), include_hidden=True)
        return _bytes_array(sorted(f.encode("utf-8") for f in found), (len(found),))
    return fn


@register_kernel("DecodeBase64", "CPU")
def decode_base64_kernel(attrs):
    """tf.io.decode_base64: web-safe base64, with or without padding."""
    import binascii
    import re
    ok = re.compile(rb"[A-Za-z0-9_-]*={0,2}")

    def dec(s):
        if not ok.fullmatch(s) or len(s.rstrip(b"=")) % 4 == 1 or (b"=" in s and len(s) % 4):
            raise InvalidArgumentError(f"Invalid character found in base64. ({s.decode('utf-8', 'replace')!r})")
        body = s.rstrip(b"=")
        try:
            return binascii.a2b_base64(body.replace(b"-", b"+").replace(b"_", b"/") + b"=" * (-len(body) % 4))
        except binascii.Error as e:
            raise InvalidArgumentError(f"Invalid base64 {s.decode('utf-8', 'replace')!r}: {e}") from None
    return _elementwise(dec)
