"""A Python client for the model server's binary endpoint (msgpack frames of the transport codec)."""
from __future__ import annotations

import aiohttp
import numpy as np

from actorflow import errors
from actorflow.transport import codec

__all__ = ["PredictClient"]

_CT = "application/x-actorflow-frame"


class PredictClient:
    """Calls `:predict` with tensors as one binary frame instead of JSON (no float formatting or
    parsing on either side). Use as `async with PredictClient(url, "model") as c: out = await
    c.predict({"x": array})`. Every call has a timeout (`timeout_s`); a 4xx/5xx answer raises
    InvalidArgumentError (4xx) or UnavailableError (429/5xx) with the server's message."""

    def __init__(self, base_url: str, model: str, version: int | None = None, api_key: str | None = None,
                 timeout_s: float = 30.0, session: aiohttp.ClientSession | None = None):
        path = f"/v1/models/{model}" + (f"/versions/{version}" if version is not None else "") + ":predict"
        self.url = base_url.rstrip("/") + path
        self._headers = {"Content-Type": _CT}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._own = session is None
        self._session = session

    async def __aenter__(self):
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None

    async def predict(self, inputs: dict, signature_name: str | None = None) -> dict:
        """{output key: array} for {input key: array}."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        keys = list(inputs)
        header = {"inputs": keys}
        if signature_name:
            header["signature_name"] = signature_name
        head, bufs = codec.encode(header, [np.asarray(inputs[k]) for k in keys])
        body = head + b"".join(bytes(b) for b in bufs)
        try:
            async with self._session.post(self.url, data=body, headers=self._headers, timeout=self._timeout) as r:
                data = await r.read()
                if r.status != 200:
                    msg = data.decode(errors="replace")
                    cls = errors.UnavailableError if r.status == 429 or r.status >= 500 else errors.InvalidArgumentError
                    raise cls(None, None, f"{self.url}: HTTP {r.status}: {msg}")
        except (TimeoutError, aiohttp.ClientError) as e:
            raise errors.UnavailableError(None, None, f"{self.url}: {type(e).__name__}: {e}") from None
        h, off = codec.decode_header(data)
        arrs = codec.decode(h, data, off)
        return dict(zip(h["outputs"], arrs))
