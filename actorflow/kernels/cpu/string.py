"""CPU kernels for string ops: AsString, StringJoin, StringLength, StringFormat, Print, PrintV2.

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
