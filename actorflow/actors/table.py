"""The lookup-table resource (HashTableV2): a dict filled once by its initializer op.

Its operations run on the owning runtime's loop, one at a time, like a queue's; each finishes at
once (nothing waits). Messages follow TF's lookup_table_op.cc and lookup_util.cc. Reading a
vocabulary file happens on the loop too: initialization runs once per table, before any step
that looks up.
"""
from __future__ import annotations

import numpy as np

from actorflow import errors
from actorflow.actors.resource import register_resource

__all__ = ["TableResource"]

WHOLE_LINE, LINE_NUMBER = -2, -1


def _text(v) -> str:
    return v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)


class TableResource:
    """A StaticHashTable's entries: keys (bytes or int) to values of one numpy dtype."""

    def __init__(self, name: str, attrs: dict):
        self.name = name
        self.key_dtype = np.dtype(attrs["key_dtype"])
        self.value_dtype = np.dtype(attrs["value_dtype"])
        self.entries: dict | None = None        # None until initialized

    # -- entry point for the runtime ------------------------------------------------------------------
    def run(self, op_type: str, attrs: dict, args, done, step) -> None:
        if op_type == "InitializeTableV2":
            self._initialize(self._pairs(args[0], args[1]))
            done(None, None)
        elif op_type == "InitializeTableFromTextFileV2":
            self._initialize(self._file_pairs(args[0], attrs))
            done(None, None)
        elif op_type == "LookupTableFindV2":
            done(self._find(args[0], args[1]), None)
        elif op_type == "LookupTableSizeV2":
            done(np.int64(len(self._ready())), None)
        else:
            raise errors.UnimplementedError(None, None, f"table '{self.name}' cannot run {op_type}")

    def _ready(self) -> dict:
        if self.entries is None:
            raise errors.FailedPreconditionError(None, None, "Table not initialized.")
        return self.entries

    def _key(self, k):
        return k if self.key_dtype.kind == "O" else int(k)

    def _pairs(self, keys, values) -> list:
        keys, values = np.asarray(keys), np.asarray(values)
        if keys.size != values.size:
            raise errors.InvalidArgumentError(None, None, f"Expected shape {list(keys.shape)} for value, got "
                                                          f"{list(values.shape)}")
        return list(zip((self._key(k) for k in keys.reshape(-1)), values.reshape(-1)))

    def _file_pairs(self, filename, attrs) -> list:
        path = np.asarray(filename).reshape(())[()]
        path = path.decode("utf-8") if isinstance(path, bytes) else str(path)
        ki, vi = int(attrs["key_index"]), int(attrs["value_index"])
        vocab, delim = int(attrs.get("vocab_size", -1)), attrs.get("delimiter", "\t").encode("utf-8")
        offset = int(attrs.get("offset", 0))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        if vocab >= 0:
            if len(lines) < vocab:
                raise errors.InvalidArgumentError(None, None, f"Invalid vocab_size in {path}: expected {vocab} but "
                                                              f"got {len(lines)}")
            lines = lines[:vocab]
        need = max(ki, vi) + 1
        pairs = []
        for n, line in enumerate(lines):
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                raise errors.InvalidArgumentError(None, None, f"Invalid content in {path}: empty line found at "
                                                              f"line {n}.")
            tokens = line.split(delim) if need > 0 else None
            if need > 0 and len(tokens) < need:
                raise errors.InvalidArgumentError(
                    None, None, f"Invalid number of columns in {path} line {n} ({_text(line)}) for key_index {ki} "
                                f"and value_index {vi} and delimiter {_text(delim)!r}")
            key = self._field(line, tokens, ki, n, 0, self.key_dtype, path)
            value = self._field(line, tokens, vi, n, offset, self.value_dtype, path)
            pairs.append((self._key(key), value))
        return pairs

    @staticmethod
    def _field(line, tokens, index, n, offset, dtype, path):
        if index == LINE_NUMBER:
            return n + offset
        text = line if index == WHOLE_LINE else tokens[index]
        if dtype.kind == "O":
            return text
        try:
            if dtype.kind == "f":
                return float(text)
            if dtype.kind == "b":
                return {b"true": True, b"false": False}[text.strip().lower()]
            v = int(text)
            info = np.iinfo(dtype)
            if not info.min <= v <= info.max:
                raise ValueError
            return v
        except (ValueError, KeyError):
            raise errors.InvalidArgumentError(None, None, f"Field {_text(text)} in line {n} is not a valid "
                                                          f"{dtype.name}. ({path})") from None

    def _initialize(self, pairs) -> None:
        entries: dict = {}
        for k, v in pairs:
            old = entries.get(k, _MISSING)
            if old is _MISSING:
                entries[k] = v
            elif old != v:
                raise errors.FailedPreconditionError(
                    None, None, f"HashTable has different value for same key. Key {_text(k)} has {_text(old)} and "
                                f"trying to add value {_text(v)}")
        if self.entries is not None:
            if entries != self.entries:
                raise errors.FailedPreconditionError(None, None, "Table was already initialized with different data.")
            return
        self.entries = entries

    def _find(self, keys, default):
        entries = self._ready()
        keys = np.asarray(keys)
        d = np.asarray(default).reshape(())[()]
        get = entries.get
        if self.key_dtype.kind == "O":
            vals = [get(k, d) for k in keys.reshape(-1)]
        else:
            vals = [get(k, d) for k in keys.reshape(-1).tolist()]
        if self.value_dtype.kind == "O":
            out = np.empty(len(vals), dtype=object)
            out[:] = vals
            return out.reshape(keys.shape)
        return np.array(vals, dtype=self.value_dtype).reshape(keys.shape)


_MISSING = object()

register_resource("HashTableV2", lambda name, attrs: TableResource(name, attrs))
