"""String ops: AsString, StringJoin, StringLength, StringFormat, Print and PrintV2; the text ops of
TF 1.x programs (StringSplit, StringSplitV2, Substr, RegexReplace, StringStrip, StringLower,
StringUpper, StringToHashBucketFast, ReduceJoin, DecodeCSV, ReadFile, WriteFile, EncodeBase64,
DecodeBase64). None has a gradient: strings are not differentiable.

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

__all__ = ["as_string", "string_join", "string_length", "string_format", "string_to_number", "Print", "print_v2",
           "string_split", "strings_split_v1", "substr", "regex_replace", "string_strip", "string_lower",
           "string_upper", "string_to_hash_bucket_fast", "reduce_join", "decode_csv", "read_file", "write_file",
           "encode_base64", "decode_base64", "matching_files"]


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


# -- the text ops of TF 1.x programs -------------------------------------------------------------------
def _str_tensor(x, what="input"):
    return x if isinstance(x, Tensor) else convert_to_tensor(x, dtype=dtypes.string, name=what)


def _need_scalar(t, op, what):
    if t.shape.ndims not in (None, 0):
        raise InferenceError(f"{op}: {what} must be a scalar, got shape {t.shape} ('{t.name}')")


def _infer_split(inputs, attrs):
    op = "StringSplitV2" if "maxsplit" in attrs else "StringSplit"
    src, sep = inputs
    _need_string(src, op)
    _need_string(sep, op)
    if src.shape.ndims not in (None, 1):
        raise InferenceError(f"{op}: input must be a vector, got shape {src.shape} ('{src.name}')")
    _need_scalar(sep, op, "the delimiter")
    return [(dtypes.int64, TensorShape([None, 2])), (dtypes.string, TensorShape([None])),
            (dtypes.int64, TensorShape([2]))]


def _infer_unary_string(type_name):
    def infer(inputs, attrs):
        _need_string(inputs[0], type_name)
        return [(dtypes.string, inputs[0].shape)]
    return infer


def _infer_substr(inputs, attrs):
    x, pos, ln = inputs
    _need_string(x, "Substr")
    if attrs.get("unit", "BYTE") not in ("BYTE", "UTF8_CHAR"):
        raise InferenceError(f"Substr: unit must be 'BYTE' or 'UTF8_CHAR', got {attrs['unit']!r}")
    if not (pos.dtype.is_integer and pos.dtype is ln.dtype and pos.dtype in (dtypes.int32, dtypes.int64)):
        raise InferenceError(f"Substr: pos and len must both be int32 or both int64, got {pos.dtype.name} "
                             f"and {ln.dtype.name}")
    if not pos.shape.is_compatible_with(ln.shape):
        raise InferenceError(f"Substr: pos and len must have the same shape, got {pos.shape} and {ln.shape}")
    return [(dtypes.string, _broadcast_shape(x.shape, pos.shape, "Substr"))]


def _broadcast_shape(a, b, op):
    if a.ndims is None or b.ndims is None:
        return TensorShape(None)
    if b.ndims == 0:
        return a
    da, db = list(a.dims), list(b.dims)
    n = max(len(da), len(db))
    da, db = [1] * (n - len(da)) + da, [1] * (n - len(db)) + db
    out = []
    for x, y in zip(da, db):
        if x is None or y is None:
            out.append(y if x == 1 else x if y == 1 else x if y is None else y)
        elif x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise InferenceError(f"{op}: shapes {a} and {b} do not broadcast")
    return TensorShape(out)


def _infer_regex(inputs, attrs):
    x, pattern, rewrite = inputs
    _need_string(x, "RegexReplace")
    _need_string(pattern, "RegexReplace")
    _need_string(rewrite, "RegexReplace")
    _need_scalar(pattern, "RegexReplace", "pattern")
    _need_scalar(rewrite, "RegexReplace", "rewrite")
    return [(dtypes.string, x.shape)]


def _infer_hash_bucket(inputs, attrs):
    _need_string(inputs[0], "StringToHashBucketFast")
    if int(attrs["num_buckets"]) < 1:
        raise InferenceError(f"StringToHashBucketFast: num_buckets must be >= 1, got {attrs['num_buckets']}")
    return [(dtypes.int64, inputs[0].shape)]


def _reduce_axes(shape, axes, op):
    if axes is None:
        return None
    rank = shape.ndims
    out = []
    for a in axes:
        if rank is not None and not -rank <= a < max(rank, 1):
            raise InferenceError(f"{op}: axis {a} is out of range for a tensor of rank {rank}")
        a = a + rank if (a < 0 and rank is not None) else a
        if a in out:
            raise InferenceError(f"{op}: axis {a} is repeated")
        out.append(a)
    return out


def _infer_reduce_join(inputs, attrs):
    from actorflow.graph.ops.infer import constant_value
    x, axes_t = inputs
    _need_string(x, "ReduceJoin")
    v = constant_value(axes_t)
    keep = attrs.get("keep_dims", False)
    if v is None or x.shape.ndims is None:
        return [(dtypes.string, TensorShape(None))]
    axes = _reduce_axes(x.shape, [int(a) for a in v.reshape(-1)], "ReduceJoin")
    dims = list(x.shape.dims)
    out = [1 if i in axes else d for i, d in enumerate(dims)] if keep else \
        [d for i, d in enumerate(dims) if i not in axes]
    return [(dtypes.string, TensorShape(out))]


def _infer_decode_csv(inputs, attrs):
    records, defaults = inputs[0], inputs[1:]
    _need_string(records, "DecodeCSV")
    allowed = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)
    for i, d in enumerate(defaults):
        if d.dtype not in allowed:
            raise InferenceError(f"DecodeCSV: record_defaults[{i}] has dtype {d.dtype.name}; expected one of "
                                 "float32, float64, int32, int64, string")
        if d.shape.ndims is not None and (d.shape.ndims > 1 or (d.shape.ndims == 1 and d.shape.dims[0] not in
                                                                   (None, 0, 1))):
            raise InferenceError(f"DecodeCSV: record_defaults[{i}] must have at most one element, got shape "
                                 f"{d.shape}")
    if len(str(attrs.get("field_delim", ","))) != 1:
        raise InferenceError(f"DecodeCSV: field_delim must be one character, got {attrs.get('field_delim')!r}")
    return [(d.dtype, records.shape) for d in defaults]


def _infer_read_file(inputs, attrs):
    _need_string(inputs[0], "ReadFile")
    _need_scalar(inputs[0], "ReadFile", "filename")
    return [(dtypes.string, TensorShape([]))]


def _infer_write_file(inputs, attrs):
    for t, what in zip(inputs, ("filename", "contents")):
        _need_string(t, "WriteFile")
        _need_scalar(t, "WriteFile", what)
    return []


StringSplit = define_op("StringSplit", _infer_split)
StringSplitV2 = define_op("StringSplitV2", _infer_split)
Substr = define_op("Substr", _infer_substr)
RegexReplace = define_op("RegexReplace", _infer_regex)
StringStrip = define_op("StringStrip", _infer_unary_string("StringStrip"))
StringLower = define_op("StringLower", _infer_unary_string("StringLower"))
StringUpper = define_op("StringUpper", _infer_unary_string("StringUpper"))
StringToHashBucketFast = define_op("StringToHashBucketFast", _infer_hash_bucket)
ReduceJoin = define_op("ReduceJoin", _infer_reduce_join)
DecodeCSV = define_op("DecodeCSV", _infer_decode_csv)
# File I/O blocks: always on the kernel pool, never on the runtime's loop.
ReadFile = define_op("ReadFile", _infer_read_file, stateful=True, placement="host", offload=True)
WriteFile = define_op("WriteFile", _infer_write_file, stateful=True, placement="host", offload=True)


def _infer_matching_files(inputs, attrs):
    _need_string(inputs[0], "MatchingFiles")
    if inputs[0].shape.ndims not in (None, 0, 1):
        raise InferenceError(f"MatchingFiles: pattern must be a scalar or a vector, got shape {inputs[0].shape}")
    return [(dtypes.string, TensorShape([None]))]


MatchingFiles = define_op("MatchingFiles", _infer_matching_files, stateful=True, placement="host", offload=True)
EncodeBase64 = define_op("EncodeBase64", _infer_unary_string("EncodeBase64"))
DecodeBase64 = define_op("DecodeBase64", _infer_unary_string("DecodeBase64"))


def _sparse(indices, values, shape):
    from actorflow.graph.sparse_tensor import SparseTensor
    return SparseTensor(indices, values, shape)


def string_split(source, sep=None, skip_empty=True, delimiter=None, result_type="SparseTensor", name=None):
    """Splits each string of the vector `source` at every byte of `sep` (default " "; "" splits
    into single bytes) into a SparseTensor [len(source), longest] (tf.compat.v1.string_split).
    `delimiter` is TF's deprecated alias of `sep`. Only result_type="SparseTensor" (TF's default)
    is supported: actorflow has no RaggedTensor."""
    if sep is not None and delimiter is not None and sep != delimiter:
        raise ValueError("string_split: cannot specify both 'sep' and its deprecated alias 'delimiter'")
    sep = delimiter if sep is None else sep
    _sparse_only(result_type, "string_split")
    src = _str_tensor(source, "source")
    d = _str_tensor(" " if sep is None else sep, "delimiter")
    idx, vals, shape = StringSplit(src, d, skip_empty=bool(skip_empty), name=name or "StringSplit")
    return _sparse(idx, vals, shape)


def _sparse_only(result_type, fn):
    if result_type == "RaggedTensor":
        raise NotImplementedError(f"{fn}: result_type='RaggedTensor' is not supported (actorflow has no "
                                  "RaggedTensor); use the default 'SparseTensor'")
    if result_type != "SparseTensor":
        raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")


def strings_split_v1(input=None, sep=None, maxsplit=-1, result_type="SparseTensor", source=None,  # noqa: A002
                     name=None):
    """Splits each string as Python's bytes.split(sep, maxsplit) does into a SparseTensor
    (tf.compat.v1.strings.split): `sep` None or "" splits at runs of ASCII whitespace, any other
    `sep` at each occurrence, keeping empty tokens. `source` is TF's deprecated alias of `input`.
    Inputs of rank 0 or 1 only, and only result_type="SparseTensor" (no RaggedTensor here)."""
    if input is not None and source is not None:
        raise ValueError("strings.split: cannot specify both 'input' and its deprecated alias 'source'")
    x = _str_tensor(source if input is None else input)
    _sparse_only(result_type, "strings.split")
    if x.shape.ndims == 0:
        from actorflow.graph.ops.array_ops import expand_dims
        x = expand_dims(x, 0)
    if x.shape.ndims not in (None, 1):
        raise ValueError(f"strings.split: actorflow splits vectors only (a higher rank needs a RaggedTensor), "
                         f"got shape {x.shape} ('{x.name}')")
    idx, vals, shape = StringSplitV2(x, _str_tensor("" if sep is None else sep, "sep"), maxsplit=int(maxsplit),
                                     name=name or "StringSplit")
    return _sparse(idx, vals, shape)


def substr(input, pos, len, name=None, unit="BYTE"):  # noqa: A002 (TF's names)
    """`len` bytes (or UTF-8 characters with unit="UTF8_CHAR") of each string from `pos`
    (negative: from the end) (tf.strings.substr / tf.compat.v1.substr). `pos` and `len` are
    scalars or broadcast against `input`; a `pos` outside a string fails the step as in TF."""
    x = _str_tensor(input)
    p = convert_to_tensor(pos) if not isinstance(pos, Tensor) else pos
    n = convert_to_tensor(len, dtype=p.dtype) if not isinstance(len, Tensor) else len
    return Substr(x, p, n, unit=unit, name=name)


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """Replaces the matches of `pattern` in each string with `rewrite` ("\\\\1" a group, "\\\\0" the
    match) (tf.strings.regex_replace). Patterns are run by Python's `re` on bytes, not RE2: they
    agree on the common syntax; they differ where `re` has features RE2 lacks (backreferences and
    lookaround in patterns are accepted here, rejected by TF), on `$` (re also matches before a
    final newline), and on an empty match right after a match (re.sub replaces it, RE2 does not)."""
    x = _str_tensor(input)
    return RegexReplace(x, _str_tensor(pattern, "pattern"), _str_tensor(rewrite, "rewrite"),
                        replace_global=bool(replace_global), name=name)


def string_strip(input, name=None):  # noqa: A002
    """Removes leading and trailing ASCII whitespace (tf.strings.strip / tf.compat.v1.string_strip)."""
    return StringStrip(_str_tensor(input), name=name)


def _case(op, fn):
    def convert(input, encoding="", name=None):  # noqa: A002
        if encoding not in ("", "utf-8"):
            raise ValueError(f"strings.{fn}: encoding must be '' (ASCII) or 'utf-8', got {encoding!r}")
        return op(_str_tensor(input), encoding=encoding, name=name)
    convert.__name__ = convert.__qualname__ = f"string_{fn}"
    convert.__doc__ = (f"{fn.capitalize()}-cases each string (tf.strings.{fn}): ASCII letters only with encoding '', "
                       f"every letter with 'utf-8' (Python's str.{fn}, where TF uses ICU).")
    return convert


string_lower = _case(StringLower, "lower")
string_upper = _case(StringUpper, "upper")


def string_to_hash_bucket_fast(input, num_buckets, name=None):  # noqa: A002
    """FarmHash Fingerprint64 of each string modulo `num_buckets`, int64 (tf.strings.to_hash_bucket_fast):
    the same buckets as TensorFlow's."""
    return StringToHashBucketFast(_str_tensor(input), num_buckets=int(num_buckets), name=name)


def reduce_join(inputs, axis=None, keep_dims=None, separator="", name=None, reduction_indices=None,
                keepdims=None):
    """Joins the strings along `axis` (None: all axes) with `separator` (tf.compat.v1.reduce_join /
    tf.compat.v1.strings.reduce_join); `reduction_indices` and `keep_dims` are TF's old names. Over
    several axes the first axis listed varies fastest, as in TF (axis=None: row-major); an empty
    axis joins to b""."""
    if axis is not None and reduction_indices is not None:
        raise ValueError("reduce_join: cannot specify both 'axis' and 'reduction_indices'")
    if keep_dims is not None and keepdims is not None and bool(keep_dims) != bool(keepdims):
        raise ValueError("reduce_join: cannot specify both 'keep_dims' and 'keepdims'")
    axis = reduction_indices if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    x = _str_tensor(inputs, "inputs")
    if axis is None:
        if x.shape.ndims is None:
            from actorflow.graph.ops.array_ops import range as af_range
            from actorflow.graph.ops.array_ops import rank
            axes = af_range(rank(x) - 1, -1, -1)
        else:
            axes = convert_to_tensor(list(range(x.shape.ndims - 1, -1, -1)), dtype=dtypes.int32)
    else:
        axes = axis if isinstance(axis, Tensor) else convert_to_tensor(axis, dtype=dtypes.int32)
    return ReduceJoin(x, axes, keep_dims=keep, separator=str(separator), name=name)


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None, na_value="",
               select_cols=None):
    """Parses CSV records into one tensor per column, of the records' shape (tf.compat.v1.decode_csv,
    tf.io.decode_csv). `record_defaults`: a value or tensor per column, whose dtype (float32,
    float64, int32, int64, string) types the column; an empty one makes the column required.
    `use_quote_delim`: fields in double quotes may hold the delimiter, '""' is a quote. Fields equal
    to `na_value` take the default. `select_cols`: the sorted column indices to keep."""
    recs = _str_tensor(records, "records")
    defaults = []
    for i, d in enumerate(record_defaults):
        if isinstance(d, Tensor):
            defaults.append(d)
        elif isinstance(d, (list, tuple)) and not d:
            raise ValueError(f"decode_csv: record_defaults[{i}] is an empty list with no dtype; give an empty "
                             "tensor of the column's dtype, e.g. af.constant([], af.int32)")
        else:
            defaults.append(convert_to_tensor(d, name=f"record_defaults_{i}"))
    cols = [] if select_cols is None else [int(c) for c in select_cols]
    if cols and (any(b <= a for a, b in zip(cols, cols[1:])) or cols[0] < 0):
        raise ValueError(f"decode_csv: select_cols must be non-negative and strictly increasing, got {cols}")
    if cols and len(cols) != len(defaults):
        raise ValueError(f"decode_csv: Length of select_cols ({len(cols)}) and record_defaults "
                         f"({len(defaults)}) should match")
    out = DecodeCSV(recs, *defaults, field_delim=str(field_delim), use_quote_delim=bool(use_quote_delim),
                    na_value=str(na_value), select_cols=tuple(cols), name=name)
    return list(out) if isinstance(out, tuple) else [out]


def read_file(filename, name=None):
    """The whole contents of the file `filename`, a scalar string (tf.io.read_file / tf.compat.v1.read_file)."""
    return ReadFile(_str_tensor(filename, "filename"), name=name)


def matching_files(pattern, name=None):
    """The files matching the glob `pattern` (a string, or a vector of them), sorted, as a string
    vector, empty when none match (tf.io.matching_files); `*` matches dotfiles too, as in TF."""
    return MatchingFiles(_str_tensor(pattern, "pattern"), name=name)


def write_file(filename, contents, name=None):
    """An op that writes the scalar string `contents` to `filename`, creating its directories
    (tf.io.write_file / tf.compat.v1.write_file)."""
    g = get_default_graph()
    return g.create_op("WriteFile", [_str_tensor(filename, "filename"), _str_tensor(contents, "contents")], {},
                       name=name)


def encode_base64(input, pad=False, name=None):  # noqa: A002
    """Web-safe base64 of each string ('-' and '_' for '+' and '/'), '=' padded only with `pad`
    (tf.io.encode_base64 / tf.compat.v1.encode_base64)."""
    return EncodeBase64(_str_tensor(input), pad=bool(pad), name=name)


def decode_base64(input, name=None):  # noqa: A002
    """Decodes web-safe base64, padded or not (tf.io.decode_base64 / tf.compat.v1.decode_base64)."""
    return DecodeBase64(_str_tensor(input), name=name)
