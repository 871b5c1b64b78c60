"""CPU kernels for checkpoints: SaveShard and RestoreShard, on the checkpoint file format of
actorflow/checkpoint_format.py (which `af.train.Saver` uses too)."""
from __future__ import annotations

import json

import numpy as np

from actorflow.checkpoint_format import decode_restore_path, read_tensors, write_shard
from actorflow.kernels.registry import register_kernel

__all__ = ["save_shard", "restore_shard"]


def _file_io_cost(*args):
    # Always worth the thread pool: these kernels block on the file system.
    return 1 << 62


@register_kernel("SaveShard", "CPU", cost=_file_io_cost, releases_gil=True)
def save_shard(attrs):
    """SaveShard: writes its tensors to one safetensors shard file; returns the shard's index entry
    as UTF-8 JSON bytes (the counterpart of tf.raw_ops.SaveV2 for one shard)."""
    names = tuple(attrs["names"])
    shard, num_shards = int(attrs["shard"]), int(attrs["num_shards"])

    def fn(path, *tensors):
        entry = write_shard(decode_restore_path("SaveShard", path)[0], shard, num_shards, names, tensors)
        return np.frombuffer(json.dumps(entry).encode(), dtype=np.uint8)
    return fn


@register_kernel("RestoreShard", "CPU", cost=_file_io_cost, releases_gil=True)
def restore_shard(attrs):
    """RestoreShard: reads tensors by name from a checkpoint, verifying the index (checksum and schema)
    and the tensors' checksums, dtypes and shapes (the counterpart of tf.raw_ops.RestoreV2).

    The kernel holds no key: the caller (`Saver.restore`) checks the index's HMAC and passes the
    sha256 of the index file it checked after a NUL in the path (see encode_restore_path); the kernel
    then reads only that very file, so an index swapped in between is refused."""
    names = tuple(attrs["names"])
    dts = tuple(attrs["dtypes"])
    shapes = tuple(attrs["shapes"])
    reshape = bool(attrs.get("reshape", False))

    def fn(path):
        prefix, digest = decode_restore_path("RestoreShard", path, digest_allowed=True)
        out = read_tensors(prefix, names, dts, shapes, reshape, digest=digest)
        return out[0] if len(out) == 1 else tuple(out)
    return fn
