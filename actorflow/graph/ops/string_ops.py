"""String ops: AsString, StringJoin, StringLength, StringFormat, Print and PrintV2.

String tensors hold numpy object arrays of `bytes` (dtype `af.string`); their kernels run on the
host (kernels/cpu/string.py). `af.Print` and `af.print` write where TF writes: stderr by default.
"""
from __future__ import annotations

import logging
import sys

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["as_string", "string_join", "string_length", "string_format", "string_to_number", "Print", "print_v2"]


def _need_string(t, op):
    if not t.dtype.is_string:
        raise InferenceError(f"{op} expects a string input, got {t.dtype.name} tensor '{t.name}'")


def _infer_as_string(inputs, attrs):
    x = inputs[0]
    if not (x.dtype.is_numeric or x.dtype.is_bool or x.dtype.is_string):
        raise InferenceError(f"AsString does not support {x.dtype.name} inputs")
    return [(dtypes.string, x.shape)]


def _infer_join(inputs, attrs):
    shape = TensorShape([])
    for t in inputs:
        _need_string(t, "StringJoin")
        if t.shape.ndims == 0:
            continue
        if shape.ndims == 0:
            shape = t.shape
        elif not shape.is_compatible_with(t.shape):
            raise InferenceError(f"StringJoin inputs must be scalars or of one shape, got {shape} and {t.shape}")
        else:
            shape = shape.merge_with(t.shape)
    return [(dtypes.string, shape)]


def _infer_length(inputs, attrs):
    _need_string(inputs[0], "StringLength")
    if attrs.get("unit", "BYTE") not in ("BYTE", "UTF8_CHAR"):
        raise InferenceError(f"unit must be 'BYTE' or 'UTF8_CHAR', got {attrs['unit']!r}")
    return [(dtypes.int32, inputs[0].shape)]


def _infer_format(inputs, attrs):
    n = attrs["template"].count(attrs["placeholder"])
    if n != len(inputs):
        raise InferenceError(f"template {attrs['template']!r} has {n} placeholders but {len(inputs)} tensors were given")
    return [(dtypes.string, TensorShape([]))]


def _infer_print_v2(inputs, attrs):
    _need_string(inputs[0], "PrintV2")
    if inputs[0].shape.ndims not in (None, 0):
        raise InferenceError(f"PrintV2 prints a scalar string, got shape {inputs[0].shape}")
    return []


AsString = define_op("AsString", _infer_as_string)
StringJoin = define_op("StringJoin", _infer_join)
StringLength = define_op("StringLength", _infer_length)
StringFormat = define_op("StringFormat", _infer_format)
def _infer_to_number(inputs, attrs):
    _need_string(inputs[0], "StringToNumber")
    out = dtypes.as_dtype(attrs["out_type"])
    if out not in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64):
        raise InferenceError(f"out_type must be float32, float64, int32 or int64, got {out.name}")
    return [(out, inputs[0].shape)]


StringToNumber = define_op("StringToNumber", _infer_to_number)
PrintOp = define_op("Print", lambda i, a: [(i[0].dtype, i[0].shape)], stateful=True)
PrintV2 = define_op("PrintV2", _infer_print_v2, stateful=True)


@PrintOp.gradient
def _print_grad(op, grad):
    return [grad] + [None] * (len(op.inputs) - 1)


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="", name=None):
    """Each element formatted as a string (tf.strings.as_string / tf.as_string): floats as printf's
    %f (%e with `scientific`, %g with `shortest`), `precision` digits, padded to `width` with the
    printf flag `fill` (' ', '0', '+', '-' or '#'); bools as b'true' / b'false'."""
    if fill and fill not in (" ", "0", "+", "-", "#"):
        raise ValueError(f"as_string: fill must be one of ' ', '0', '+', '-', '#', got {fill!r}")
    if scientific and shortest:
        raise ValueError("as_string: cannot select both scientific and shortest notation")
    return AsString(convert_to_tensor(input), precision=int(precision), scientific=bool(scientific),
                    shortest=bool(shortest), width=int(width), fill=str(fill), name=name)


def string_join(inputs, separator="", name=None):
    """Joins string tensors element-wise with `separator`; scalars broadcast (tf.strings.join)."""
    ts = [convert_to_tensor(x, dtype=dtypes.string) if not isinstance(x, Tensor) else x for x in inputs]
    if not ts:
        raise ValueError("string_join needs at least one input")
    return StringJoin(*ts, separator=str(separator), name=name)


def string_length(input, name=None, unit="BYTE"):
    """The length of each string, in bytes or UTF-8 characters (tf.strings.length)."""
    x = input if isinstance(input, Tensor) else convert_to_tensor(input, dtype=dtypes.string)
    return StringLength(x, unit=unit, name=name)


def string_to_number(string_tensor, out_type=dtypes.float32, name=None):
    """Parses each string as a number of `out_type` (tf.strings.to_number / tf.compat.v1.string_to_number);
    a string that is not a number of that type fails the step with InvalidArgumentError."""
    x = string_tensor if isinstance(string_tensor, Tensor) else convert_to_tensor(string_tensor, dtype=dtypes.string)
    return StringToNumber(x, out_type=dtypes.as_dtype(out_type), name=name)


def string_format(template, inputs, placeholder="{}", summarize=3, name=None):
    """A scalar string: `template` with each `placeholder` replaced by one tensor, printed as TF
    prints tensors (numpy-like, `summarize` entries at each end of each axis) (tf.strings.format)."""
    if isinstance(inputs, (Tensor,)) or not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    ts = [convert_to_tensor(x) for x in inputs]
    return StringFormat(*ts, template=str(template), placeholder=str(placeholder), summarize=int(summarize),
                        name=name)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802 (TF's name)
    """Identity on `input_` that writes `message` and the values of `data` to stderr whenever it
    runs (tf.compat.v1.Print): each tensor as "[...]" with its first `summarize` (default 3)
    entries; only the first `first_n` times when that is given."""
    x = convert_to_tensor(input_)
    ts = [convert_to_tensor(d) for d in (data or [])]
    return PrintOp(x, *ts, message=str(message or ""), first_n=-1 if first_n is None else int(first_n),
                   summarize=3 if summarize is None else int(summarize), name=name)


_STREAMS = {"stderr", "stdout", "log(info)", "log(warning)", "log(error)"}


def _stream_name(output_stream) -> str:
    if output_stream is None or output_stream is sys.stderr or output_stream is sys.__stderr__:
        return "stderr"
    if output_stream is sys.stdout or output_stream is sys.__stdout__:
        return "stdout"
    for fn, key in ((logging.info, "log(info)"), (logging.warning, "log(warning)"), (logging.error, "log(error)")):
        if output_stream is fn:
            return key
    name = getattr(output_stream, "__name__", None)
    if name in ("info", "warning", "warn", "error") and callable(output_stream):
        return "log(warning)" if name == "warn" else f"log({name})"
    if isinstance(output_stream, str) and (output_stream in _STREAMS or output_stream.startswith("file://")):
        return output_stream
    raise ValueError(f"Unsupported output stream {output_stream!r}: use sys.stderr, sys.stdout, "
                     "af.logging.info/warning/error, or a 'file://' path")


class _Slot:
    # Stands for a tensor inside a printed Python structure; its repr is the template placeholder.
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def print_v2(*inputs, output_stream=None, summarize=3, sep=" ", end="\n", name=None):
    """Prints tensors and Python values, space-separated, when the returned op runs (tf.print).

    In a graph the returned op must be run, or made a control dependency, as in TF 1.x. Python
    strings print as they are; tensors print numpy-like with `summarize` entries at each end of
    each axis (None: all). `output_stream`: sys.stderr (the default, None), sys.stdout, a logging function
    (logging.info/warning/error) or "file://<path>" (appended to).
    """
    from actorflow.graph import nest
    stream = _stream_name(output_stream)
    placeholder = f"{{{id(inputs)}}}"     # unlikely to occur in any printed Python value
    parts, tensors = [], []
    for x in inputs:
        if isinstance(x, Tensor):
            parts.append(placeholder)
            tensors.append(x)
        elif isinstance(x, str):
            parts.append(x)
        else:
            flat = nest.flatten(x)
            if any(isinstance(v, Tensor) for v in flat):
                tensors.extend(v for v in flat if isinstance(v, Tensor))
                x = nest.pack_sequence_as(x, [_Slot(placeholder) if isinstance(v, Tensor) else v for v in flat])
            parts.append(str(x))
    fmt = string_format(sep.join(parts), tensors, placeholder=placeholder,
                        summarize=-1 if summarize is None else summarize)
    g = get_default_graph()
    return g.create_op("PrintV2", [fmt], {"output_stream": stream, "end": str(end)}, name=name)
