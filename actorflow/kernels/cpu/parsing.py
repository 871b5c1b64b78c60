"""ParseSingleExample, ParseExample and DecodeRaw (graph/ops/parsing_ops.py)."""
from __future__ import annotations

import numpy as np

from actorflow import example_proto
from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_KIND = {np.dtype(np.float32): ("float_list", "float"), np.dtype(np.int64): ("int64_list", "int64"),
         np.dtype(object): ("bytes_list", "string")}


def _parser(attrs, batched):
    keys = tuple(attrs["dense_keys"])
    skeys = tuple(attrs.get("sparse_keys", ()))
    stypes = tuple(np.dtype(t) for t in attrs.get("sparse_types", ()))
    types = tuple(np.dtype(t) for t in attrs["Tdense"])
    shapes = tuple(tuple(int(d) for d in s) for s in attrs["dense_shapes"])
    op = "ParseExample" if batched else "ParseSingleExample"
    Example = example_proto.Example

    def one(record, defaults, index):
        try:
            ex = Example.FromString(bytes(record))
        except Exception:  # noqa: BLE001 - DecodeError and friends
            raise InvalidArgumentError(f"{op}: Could not parse example input, value: '{bytes(record)[:40]!r}'") \
                from None
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
