"""ParseSingleExample, ParseExample and DecodeRaw (graph/ops/parsing_ops.py)."""
from __future__ import annotations

import struct

import numpy as np

from actorflow import example_proto
from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_KIND = {np.dtype(np.float32): ("float_list", "float"), np.dtype(np.int64): ("int64_list", "int64"),
         np.dtype(object): ("bytes_list", "string")}


def _parse(message_class, record, op):
    """`record` parsed as `message_class` (Example, SequenceExample); InvalidArgumentError naming `op`."""
    try:
        return message_class.FromString(bytes(record))
    except Exception:  # noqa: BLE001 - DecodeError and friends
        raise InvalidArgumentError(f"{op}: Could not parse example input, value: '{bytes(record)[:40]!r}'") \
            from None


def _parser(attrs, batched):
    keys = tuple(attrs["dense_keys"])
    skeys = tuple(attrs.get("sparse_keys", ()))
    stypes = tuple(np.dtype(t) for t in attrs.get("sparse_types", ()))
    types = tuple(np.dtype(t) for t in attrs["Tdense"])
    shapes = tuple(tuple(int(d) for d in s) for s in attrs["dense_shapes"])
    op = "ParseExample" if batched else "ParseSingleExample"
    Example = example_proto.Example

    def one(record, defaults, index):
        ex = _parse(Example, record, op)
        feats = ex.features.feature
        sparse = []
        for key, dt in zip(skeys, stypes):
            field, tname = _KIND[dt]
            if key not in feats or feats[key].WhichOneof("kind") is None:
                sparse.append(np.zeros(0, dtype=dt))
                continue
            kind = feats[key].WhichOneof("kind")
            if kind != field:
                raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {key}, Index: {index}.  Data types don't "
                                           f"match. Data type: {kind.split('_')[0]} but expected type: {tname}")
            vals = getattr(feats[key], field).value
            if dt == np.dtype(object):
                arr = np.empty(len(vals), dtype=object)
                arr[:] = list(vals)
            else:
                arr = np.asarray(vals, dtype=dt)
            sparse.append(arr)
        out = []
        for key, dt, shape, default in zip(keys, types, shapes, defaults):
            field, tname = _KIND[dt]
            n = int(np.prod(shape, dtype=np.int64))
            if key not in feats or feats[key].WhichOneof("kind") is None:
                if default.size == 0 and n:
                    raise InvalidArgumentError(f"{op}: Name: <unknown>, Feature: {key} (data type: {tname}) is "
                                               f"required but could not be found.")
                out.append(np.asarray(default, dtype=dt).reshape(shape))
                continue
            f = feats[key]
            kind = f.WhichOneof("kind")
            if kind != field:
                raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {key}, Index: {index}.  Data types don't "
                                           f"match. Data type: {kind.split('_')[0]} but expected type: {tname}")
            vals = getattr(f, field).value
            if len(vals) != n:
                raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {key}, Index: {index}.  Number of "
                                           f"{tname} values != expected.  Values size: {len(vals)} but output "
                                           f"shape: {list(shape)}")
            if dt == np.dtype(object):
                arr = np.empty(n, dtype=object)
                arr[:] = list(vals)
            else:
                arr = np.asarray(vals, dtype=dt)
            out.append(arr.reshape(shape))
        return sparse, out

    def fn(serialized, *defaults):
        defaults = [np.asarray(d) for d in defaults]
        if not batched:
            sparse, dense = one(np.asarray(serialized).reshape(()).item(), defaults, 0)
            sp_idx = [np.arange(len(v), dtype=np.int64).reshape(-1, 1) for v in sparse]
            sp_shape = [np.array([len(v)], np.int64) for v in sparse]
        else:
            recs = np.asarray(serialized, dtype=object).reshape(-1)
            rows = [one(r, defaults, i) for i, r in enumerate(recs)]
            dense = [np.stack([row[1][k] for row in rows]) if rows else np.zeros((0,) + s, dtype=t)
                     for k, (t, s) in enumerate(zip(types, shapes))]
            sparse, sp_idx, sp_shape = [], [], []
            for k, t in enumerate(stypes):
                parts = [row[0][k] for row in rows]
                idx = [np.stack([np.full(len(p), b, np.int64), np.arange(len(p), dtype=np.int64)], axis=1)
                       for b, p in enumerate(parts)]
                sparse.append(np.concatenate(parts) if parts else np.zeros(0, dtype=t))
                sp_idx.append(np.concatenate(idx) if idx else np.zeros((0, 2), np.int64))
                sp_shape.append(np.array([len(parts), max((len(p) for p in parts), default=0)], np.int64))
        res = sp_idx + sparse + sp_shape + list(dense)
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_kernel("ParseSingleExample", "CPU", releases_gil=False)(lambda attrs: _parser(attrs, False))
register_kernel("ParseExample", "CPU", releases_gil=False)(lambda attrs: _parser(attrs, True))


@register_kernel("DecodeRaw", "CPU")
def _decode_raw(attrs):
    out = np.dtype(attrs["out_type"])
    dt = out.newbyteorder("<" if attrs.get("little_endian", True) else ">") if out.itemsize > 1 else out
    tf_name = {"float32": "float", "float64": "double"}.get(out.name, out.name)

    def fn(x):
        x = np.asarray(x, dtype=object)
        flat = x.reshape(-1)
        if not flat.size:
            return np.zeros(x.shape + (0,), out)
        size = None
        rows = []
        for i, b in enumerate(flat):
            b = bytes(b)
            if len(b) % out.itemsize:
                raise InvalidArgumentError(f"DecodeRaw: Input to DecodeRaw has length {len(b)} that is not a "
                                           f"multiple of {out.itemsize}, the size of {tf_name}")
            if size is None:
                size = len(b)
            elif len(b) != size:
                raise InvalidArgumentError(f"DecodeRaw: DecodeRaw requires input strings to all be the same size, "
                                           f"but element {i} has size {len(b)} != {size}")
            rows.append(np.frombuffer(b, dtype=dt).astype(out))
        return np.stack(rows).reshape(x.shape + (size // out.itemsize,))
    return fn


@register_kernel("DecodeCompressed", "CPU", releases_gil=True)
def decode_compressed_kernel(attrs):
    """tf.io.decode_compressed: each string inflated (ZLIB: zlib's stream, GZIP: gzip's), or copied."""
    import zlib
    kind = attrs.get("compression_type", "") or ""
    wbits = {"ZLIB": zlib.MAX_WBITS, "GZIP": 16 + zlib.MAX_WBITS}.get(kind)

    def one(s):
        if wbits is None:
            return bytes(s)
        try:
            d = zlib.decompressobj(wbits)
            out = d.decompress(bytes(s)) + d.flush()
        except zlib.error as e:
            raise InvalidArgumentError(f"DecodeCompressed: could not decompress {kind} data "
                                       f"({bytes(s)[:20]!r}...): {e}") from None
        if not d.eof:
            raise InvalidArgumentError(f"DecodeCompressed: {kind} data is truncated ({len(s)} bytes)")
        return out

    def fn(x):
        x = np.asarray(x, dtype=object)
        out = np.empty(x.shape, dtype=object)
        out.reshape(-1)[:] = [one(s) for s in x.reshape(-1)] if x.size else []
        return out
    return fn


def _feature_values(f, dt, op, key, index):
    """The values of Feature `f` as a numpy array of `dt`, checking its kind."""
    field, tname = _KIND[dt]
    kind = f.WhichOneof("kind")
    if kind is None:
        return np.zeros(0, dtype=dt)
    if kind != field:
        raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {key}, Index: {index}.  Data types don't match. "
                                   f"Data type: {kind.split('_')[0]} but expected type: {tname}")
    vals = getattr(f, field).value
    if dt == np.dtype(object):
        arr = np.empty(len(vals), dtype=object)
        arr[:] = list(vals)
        return arr
    return np.asarray(vals, dtype=dt)


def _sequence_parser(attrs, batched):
    """ParseSingleSequenceExample / ParseSequenceExample: context features (as ParseExample's) and
    feature lists (dense: [steps, *shape]; sparse: indices (step, position))."""
    op = "ParseSequenceExample" if batched else "ParseSingleSequenceExample"
    c_skeys = tuple(attrs.get("context_sparse_keys", ()))
    c_stypes = tuple(np.dtype(t) for t in attrs.get("context_sparse_types", ()))
    c_keys = tuple(attrs.get("context_dense_keys", ()))
    c_types = tuple(np.dtype(t) for t in attrs.get("Tcontext_dense", ()))
    c_shapes = tuple(tuple(int(d) for d in s) for s in attrs.get("context_dense_shapes", ()))
    f_skeys = tuple(attrs.get("feature_list_sparse_keys", ()))
    f_stypes = tuple(np.dtype(t) for t in attrs.get("feature_list_sparse_types", ()))
    f_keys = tuple(attrs.get("feature_list_dense_keys", ()))
    f_types = tuple(np.dtype(t) for t in attrs.get("feature_list_dense_types", ()))
    f_shapes = tuple(tuple(int(d) for d in s) for s in attrs.get("feature_list_dense_shapes", ()))
    missing_ok = set(attrs.get("feature_list_dense_missing_assumed_empty", ()))
    SequenceExample = example_proto.SequenceExample

    def one(record, defaults, index):
        ex = _parse(SequenceExample, record, op)
        ctx, lists = ex.context.feature, ex.feature_lists.feature_list
        c_sparse = [_feature_values(ctx[k], t, op, k, index) if k in ctx else np.zeros(0, t)
                    for k, t in zip(c_skeys, c_stypes)]
        c_dense = []
        for k, t, shape, default in zip(c_keys, c_types, c_shapes, defaults):
            n = int(np.prod(shape, dtype=np.int64))
            if k not in ctx or ctx[k].WhichOneof("kind") is None:
                if default.size == 0 and n:
                    raise InvalidArgumentError(f"{op}: Name: <unknown>, Context feature '{k}' is required but could "
                                               "not be found.")
                c_dense.append(np.asarray(default, dtype=t).reshape(shape))
                continue
            v = _feature_values(ctx[k], t, op, k, index)
            if v.size != n:
                raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {k}, Index: {index}.  Number of values != "
                                           f"expected.  values size: {v.size} but output shape: {list(shape)}")
            c_dense.append(v.reshape(shape))
        f_sparse = []
        for k, t in zip(f_skeys, f_stypes):
            steps = [_feature_values(f, t, op, k, i) for i, f in enumerate(lists[k].feature)] if k in lists else []
            f_sparse.append(steps)
        f_dense = []
        for k, t, shape in zip(f_keys, f_types, f_shapes):
            n = int(np.prod(shape, dtype=np.int64))
            if k not in lists:
                if k not in missing_ok:
                    raise InvalidArgumentError(f"{op}: Name: <unknown>, Feature list '{k}' is required but could not "
                                               "be found.  Did you mean to include it in "
                                               "feature_list_dense_missing_assumed_empty or "
                                               "feature_list_dense_defaults?")
                f_dense.append(np.zeros((0,) + shape, dtype=t))
                continue
            rows = []
            for i, f in enumerate(lists[k].feature):
                v = _feature_values(f, t, op, k, i)
                if v.size != n:
                    raise InvalidArgumentError(f"{op}: Name: <unknown>, Key: {k}, Index: {i}.  Number of "
                                               f"{_KIND[t][1]} values != expected.  values size: {v.size} but "
                                               f"output shape: {list(shape)}")
                rows.append(v.reshape(shape))
            f_dense.append(np.stack(rows) if rows else np.zeros((0,) + shape, dtype=t))
        return c_sparse, c_dense, f_sparse, f_dense

    def sparse_out(parts_per_record, t, extra_rank):
        """(indices, values, dense_shape) of lists of values, with the record's position first
        when batched and the step's for feature lists."""
        idx, vals = [], []
        dims = [0] * (batched + extra_rank + 1)
        for b, rec in enumerate(parts_per_record):
            items = rec if extra_rank else [rec]
            if extra_rank:
                dims[batched] = max(dims[batched], len(items))
            for s, v in enumerate(items):
                pre = ([b] if batched else []) + ([s] if extra_rank else [])
                idx += [pre + [j] for j in range(len(v))]
                vals.append(v)
                dims[-1] = max(dims[-1], len(v))
        if batched:
            dims[0] = len(parts_per_record)
        ncols = batched + extra_rank + 1
        values = np.concatenate(vals) if vals else np.zeros(0, dtype=t)
        if values.dtype != t:
            values = values.astype(t)
        return (np.array(idx, np.int64).reshape(-1, ncols), values, np.array(dims, np.int64))

    def fn(serialized, *defaults):
        defaults = [np.asarray(d) for d in defaults]
        recs = [np.asarray(serialized, dtype=object).reshape(()).item()] if not batched else \
            list(np.asarray(serialized, dtype=object).reshape(-1))
        rows = [one(r, defaults, i) for i, r in enumerate(recs)]
        c_sp = [sparse_out([r[0][k] for r in rows], t, 0) for k, t in enumerate(c_stypes)]
        f_sp = [sparse_out([r[2][k] for r in rows], t, 1) for k, t in enumerate(f_stypes)]
        if batched:
            c_dense = [np.stack([r[1][k] for r in rows]) if rows else np.zeros((0,) + s, t)
                       for k, (t, s) in enumerate(zip(c_types, c_shapes))]
            f_dense, lengths = [], []
            for k, (t, s) in enumerate(zip(f_types, f_shapes)):
                seqs = [r[3][k] for r in rows]
                steps = max((len(x) for x in seqs), default=0)
                pad = b"" if t == np.dtype(object) else 0
                out = np.full((len(seqs), steps) + s, pad, dtype=t)
                for b, x in enumerate(seqs):
                    out[b, :len(x)] = x
                f_dense.append(out)
                lengths.append(np.array([len(x) for x in seqs], np.int64))
        else:
            c_dense = list(rows[0][1])
            f_dense = list(rows[0][3])
            lengths = []
        res = ([i for i, _, _ in c_sp] + [v for _, v, _ in c_sp] + [s for _, _, s in c_sp] + c_dense
               + [i for i, _, _ in f_sp] + [v for _, v, _ in f_sp] + [s for _, _, s in f_sp] + f_dense + lengths)
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_kernel("ParseSingleSequenceExample", "CPU", releases_gil=False)(lambda attrs: _sequence_parser(attrs, False))
register_kernel("ParseSequenceExample", "CPU", releases_gil=False)(lambda attrs: _sequence_parser(attrs, True))


@register_kernel("DecodeJSONExample", "CPU", releases_gil=False)
def decode_json_example_kernel(attrs):
    """tf.io.decode_json_example: protobuf's JSON form of an Example to its binary form."""
    from google.protobuf import json_format
    Example = example_proto.Example

    def one(text):
        try:
            return json_format.Parse(bytes(text).decode("utf-8"), Example()).SerializeToString()
        except (json_format.ParseError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"DecodeJSONExample: Error while parsing JSON: {e}") from None

    def fn(x):
        x = np.asarray(x, dtype=object)
        out = np.empty(x.shape, dtype=object)
        out.reshape(-1)[:] = [one(s) for s in x.reshape(-1)] if x.size else []
        return out
    return fn


# TF's DataType names of the types ParseTensor reports in a mismatch.
_TYPE_NAMES = {np.dtype(object): "string", np.dtype(np.bool_): "bool"}


@register_kernel("SerializeTensor", "CPU", releases_gil=False)
def serialize_tensor_kernel(attrs):
    """tf.io.serialize_tensor: TF's TensorProto bytes (kernels/cpu/tensor_proto.py), a string scalar."""
    from actorflow.kernels.cpu import tensor_proto

    def fn(x):
        out = np.empty((), dtype=object)
        try:
            out[()] = tensor_proto.encode(np.asarray(x))
        except ValueError as e:
            raise InvalidArgumentError(f"SerializeTensor: {e}") from None
        return out
    return fn


@register_kernel("ParseTensor", "CPU", releases_gil=False)
def parse_tensor_kernel(attrs):
    """tf.io.parse_tensor: the tensor of TensorProto bytes; its dtype must be `out_type`."""
    from actorflow.kernels.cpu import tensor_proto
    want = np.dtype(attrs["out_type"])

    def fn(serialized):
        s = np.asarray(serialized, dtype=object)
        if s.ndim != 0:
            raise InvalidArgumentError(f"ParseTensor: serialized must be a scalar, got shape {list(s.shape)}")
        data = bytes(s[()])
        try:
            value = tensor_proto.decode(data)
        except (ValueError, struct.error) as e:
            raise InvalidArgumentError(f"ParseTensor: Could not parse `serialized` as TensorProto: {e} "
                                       f"('{data[:40]!r}')") from None
        if value.dtype != want:
            raise InvalidArgumentError(f"ParseTensor: Type mismatch between parsed tensor "
                                       f"({_TYPE_NAMES.get(value.dtype, value.dtype.name)}) and dtype "
                                       f"({_TYPE_NAMES.get(want, want.name)})")
        return value
    return fn
