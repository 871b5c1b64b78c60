"""One loaded version of a model: its session, its signatures, and the conversion of request data
into feeds that the signature accepts.

A Servable owns a Graph and a local Session holding the version's variables. It counts the requests
running on it, so that a version being replaced (hot reload) is closed only once they are done.
"""
from __future__ import annotations

import asyncio
import logging

import numpy as np

from actorflow import errors
from actorflow.actors.session import ConfigProto, Session
from actorflow.graph import dtypes
from actorflow.graph.graph import Graph
from actorflow.saved_model import loader, signature_constants, tag_constants

log = logging.getLogger(__name__)

__all__ = ["RequestError", "Servable", "SignatureRunner"]


class RequestError(Exception):
    """A request the server refuses; `status` is the HTTP status (400 bad input, 404 unknown model or
    signature, 413 too large, 429 overloaded, 503 unavailable)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(dtypes.as_dtype(name).as_numpy_dtype)


class SignatureRunner:
    """A signature of a servable, prepared: its input and output tensors, numpy dtypes and static
    shapes, and whether requests can be concatenated along dimension 0 (every input and output has an
    unknown first dimension)."""

    def __init__(self, servable: "Servable", key: str, sig):
        g = servable.graph
        self.key = key
        self.method_name = sig.method_name
        self.input_keys = sorted(sig.inputs)
        self.output_keys = sorted(sig.outputs)
        self.inputs = {k: g.get_tensor_by_name(sig.inputs[k].name) for k in self.input_keys}
        self.outputs = [g.get_tensor_by_name(sig.outputs[k].name) for k in self.output_keys]
        self.dtypes = {k: _np_dtype(sig.inputs[k].dtype) for k in self.input_keys}
        self.shapes = {k: sig.inputs[k].tensor_shape for k in self.input_keys}
        self.output_shapes = {k: sig.outputs[k].tensor_shape for k in self.output_keys}
        self.batchable = bool(self.input_keys) and all(
            s is not None and len(s) >= 1 and s[0] is None
            for s in list(self.shapes.values()) + list(self.output_shapes.values()))
        self.session = servable.session
        self.timeout = servable.step_timeout_s

    async def run(self, feeds: dict) -> dict:
        """One session step on already converted feeds; {output key: array}. A step running longer than
        the servable's `step_timeout_s` fails with DeadlineExceededError."""
        vals = await self.session.arun(self.outputs, {self.inputs[k]: v for k, v in feeds.items()},
                                       timeout=self.timeout)
        return dict(zip(self.output_keys, vals))

    # -- request conversion --------------------------------------------------------------------------
    def convert(self, key: str, value, batched: bool) -> np.ndarray:
        """`value` (JSON data or an array) as an array of input `key`'s dtype, its shape checked against
        the signature; RequestError(400) naming the input otherwise. `batched`: the array must have the
        batch dimension (row-format requests always do)."""
        want = self.dtypes[key]
        try:
            a = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (ValueError, TypeError) as e:
            raise RequestError(400, f"input '{key}': not a rectangular array ({e})") from None
        if a.dtype != want:
            kind = a.dtype.kind
            if kind in "OUSV":
                raise RequestError(400, f"input '{key}': expected {want.name} values, got {a.dtype.kind!r}-kind data "
                                        "(strings, objects or ragged lists)")
            if want.kind in "iu" and kind == "f":
                if not np.all(np.isfinite(a)) or not np.array_equal(a, np.floor(a)):
                    raise RequestError(400, f"input '{key}': expected {want.name} values, got non-integral numbers")
            if want.kind == "b" and kind != "b":
                raise RequestError(400, f"input '{key}': expected bool values, got {a.dtype.name}")
            if want.kind in "iu" and kind in "iu":
                info = np.iinfo(want)
                if a.size and (a.min() < info.min or a.max() > info.max):
                    raise RequestError(400, f"input '{key}': values out of range for {want.name}")
            a = a.astype(want)
        shape = self.shapes[key]
        if shape is not None:
            if a.ndim != len(shape):
                raise RequestError(400, f"input '{key}': expected rank {len(shape)} (shape "
                                        f"{_fmt(shape)}), got shape {list(a.shape)}")
            for i, (d, w) in enumerate(zip(a.shape, shape)):
                if w is not None and d != w:
                    raise RequestError(400, f"input '{key}': dimension {i} is {d}, the signature needs {w} "
                                            f"(shape {_fmt(shape)}), got shape {list(a.shape)}")
        if batched and a.ndim == 0:
            raise RequestError(400, f"input '{key}': a scalar has no batch dimension")
        return a

    def check_keys(self, given) -> None:
        missing = [k for k in self.input_keys if k not in given]
        extra = [k for k in given if k not in self.inputs]
        if extra:
            raise RequestError(400, f"signature '{self.key}' has no input named {extra[0]!r} "
                                    f"(inputs: {self.input_keys})")
        if missing:
            raise RequestError(400, f"signature '{self.key}': missing input {missing[0]!r} (inputs: {self.input_keys})")


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


class Servable:
    """A SavedModel version loaded for serving: `graph`, `session`, `meta_graph` and one
    SignatureRunner per signature. Load with `Servable.load` (blocking: run it in a thread)."""

    def __init__(self, name: str, version: int, path: str, graph, session, meta_graph, step_timeout_s=60.0):
        self.name = name
        self.step_timeout_s = step_timeout_s
        self.version = version
        self.path = path
        self.graph = graph
        self.session = session
        self.meta_graph = meta_graph
        self.signatures = {k: SignatureRunner(self, k, s) for k, s in meta_graph.signature_def.items()}
        self.inflight = 0
        self._idle: asyncio.Event | None = None
        self.batchers: dict = {}

    @classmethod
    def load(cls, name: str, version: int, path: str, tags=(tag_constants.SERVING,), config=None,
             warmup_batch_sizes=(1,), step_timeout_s: float = 60.0) -> "Servable":
        """Loads the meta graph tagged `tags` from the SavedModel at `path`, in a new graph and session,
        and warms it up: one step of zeros per batch size in `warmup_batch_sizes` for every signature
        whose input shapes are known but for the batch dimension (kernels compile and plans are built
        before the version takes traffic, so a hot swap shows no first-request stall)."""
        g = Graph()
        sess = Session(graph=g, config=config or ConfigProto())
        try:
            mg = loader.load(sess, list(tags), path)
        except BaseException:
            sess.close()
            raise
        if not mg.signature_def:
            sess.close()
            raise errors.InvalidArgumentError(None, None, f"SavedModel {path} has no signatures to serve")
        servable = cls(name, version, path, g, sess, mg, step_timeout_s)
        servable._warmup(warmup_batch_sizes)
        return servable

    def _warmup(self, batch_sizes) -> None:
        for r in self.signatures.values():
            shapes = [r.shapes[k] for k in r.input_keys]
            if not r.batchable or any(d is None for s in shapes for d in s[1:]):
                continue
            for n in sorted(set(batch_sizes)):
                feeds = {r.inputs[k]: np.zeros([n] + list(r.shapes[k][1:]), r.dtypes[k]) for k in r.input_keys}
                try:
                    self.session.run(r.outputs, feeds)
                except errors.OpError as e:
                    log.warning("model '%s' version %d: warm-up of signature '%s' with batch %d failed: %s",
                                self.name, self.version, r.key, n, e)
                    break

    def signature(self, key: str | None) -> SignatureRunner:
        key = key or signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
        try:
            return self.signatures[key]
        except KeyError:
            raise RequestError(400, f"Serving signature name: \"{key}\" not found in signature def "
                                    f"(model '{self.name}' version {self.version} has {sorted(self.signatures)})") from None

    # -- lifetime -----------------------------------------------------------------------------------
    def acquire(self) -> None:
        self.inflight += 1

    def release(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self._idle is not None:
            self._idle.set()

    async def drain(self) -> None:
        """Waits until no request runs on this version (it is no longer handed out)."""
        if self.inflight:
            self._idle = asyncio.Event()
            await self._idle.wait()
        for b in self.batchers.values():
            await b.close()

    def close(self) -> None:
        self.session.close()
