"""TLS between tasks: which certificate a task presents and which authority it trusts.

Over loopback a cluster token is enough; across a real network the token and every tensor would
travel in clear text, readable and replayable by anyone on the path. A `TLSConfig` names three PEM
files: the task's certificate and private key, and the CA that signed its peers' certificates.
With a CA, TLS is mutual: a server requires every client (masters and other tasks alike) to present
a certificate the CA signed, and a client checks the server's certificate against the CA and its
host name (the host of the task's address in the cluster spec). Without a CA, a client trusts the
system's authorities and a server does not ask for client certificates (the token still applies).
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

__all__ = ["TLSConfig", "ENV_CERT", "ENV_KEY", "ENV_CA"]

ENV_CERT = "ACTORFLOW_TLS_CERT"
ENV_KEY = "ACTORFLOW_TLS_KEY"
ENV_CA = "ACTORFLOW_TLS_CA"


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """PEM file paths: `cert` and `key` (this task's identity), `ca` (whom to trust; turns on mutual TLS).

    No TensorFlow 1.x counterpart (its gRPC servers take no TLS options); the closest is
    `grpc.ssl_server_credentials`. Paths are checked when a context is made, and a missing or
    unreadable file is a ValueError naming it.
    """
    cert: str | None = None
    key: str | None = None
    ca: str | None = None

    def __post_init__(self):
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS needs both a certificate and its private key (tls_cert and tls_key), "
                             f"got cert={self.cert!r}, key={self.key!r}")

    @property
    def mutual(self) -> bool:
        """Whether servers require client certificates signed by `ca`."""
        return self.ca is not None

    @classmethod
    def make(cls, tls=None, cert=None, key=None, ca=None) -> TLSConfig | None:
        """A TLSConfig from a TLSConfig, a dict {cert, key, ca}, or the separate paths; None when none is given."""
        if isinstance(tls, TLSConfig):
            return tls
        if isinstance(tls, dict):
            cert, key, ca = tls.get("cert", cert), tls.get("key", key), tls.get("ca", ca)
        elif tls is not None:
            raise TypeError(f"tls must be a TLSConfig or a dict of cert/key/ca paths, got {type(tls).__name__}")
        if cert is None and key is None and ca is None:
            return None
        return cls(_path(cert), _path(key), _path(ca))

    @classmethod
    def from_env(cls) -> TLSConfig | None:
        """From $ACTORFLOW_TLS_CERT, $ACTORFLOW_TLS_KEY and $ACTORFLOW_TLS_CA; None when none is set."""
        return cls.make(cert=os.environ.get(ENV_CERT) or None, key=os.environ.get(ENV_KEY) or None,
                        ca=os.environ.get(ENV_CA) or None)

    def as_dict(self) -> dict:
        return {k: v for k, v in (("cert", self.cert), ("key", self.key), ("ca", self.ca)) if v is not None}

    def server_context(self) -> ssl.SSLContext:
        """The context a task's server listens with (requires client certificates when `ca` is set)."""
        if self.cert is None:
            raise ValueError("a TLS server needs a certificate and key (tls_cert, tls_key)")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_chain(ctx)
        if self.ca is not None:
            self._load_ca(ctx)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """The context a task or a master connects with: verifies the server, presents `cert` if set."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca is not None:
            self._load_ca(ctx)
        if self.cert is not None:
            self._load_chain(ctx)
        return ctx

    def _load_chain(self, ctx) -> None:
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot load the TLS certificate {self.cert} with key {self.key}: {e}") from None

    def _load_ca(self, ctx) -> None:
        try:
            ctx.load_verify_locations(cafile=self.ca)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot load the TLS CA certificate {self.ca}: {e}") from None


def _path(p):
    return None if p is None else os.fspath(p)
