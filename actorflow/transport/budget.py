"""Per-peer memory limits of the transport: how many bytes a peer may make this process hold.

Two things a peer controls hold memory here: payloads being received (a frame's header declares its
size, and the receiver allocates it before the bytes arrive), and tensors received for a step and
not yet consumed (kept in the rendezvous until the step's Recv takes them). `TransportLimits` says
how much of each is allowed; a `ByteBudget` counts the bytes held against one limit.

Defaults (each overridable by an environment variable, a byte count with an optional K/M/G/KiB/
MiB/GiB suffix, or by `TransportLimits(...)` given to `af.train.Server(transport_limits=...)`):

- ``inflight_per_connection`` = 2 GiB (``ACTORFLOW_MAX_INFLIGHT_PER_CONNECTION``): payload bytes one
  connection may have announced and not yet delivered. TF's own gRPC transport cannot move a tensor
  over 2 GB at all; 64 MiB tensors between workers are routine.
- ``inflight_per_process`` = 4 GiB (``ACTORFLOW_MAX_INFLIGHT_PER_PROCESS``): the same, summed over
  all connections of one worker service, plus the tensors waiting in its rendezvous.
- ``pending_per_peer`` = 2 GiB (``ACTORFLOW_MAX_PENDING_PER_PEER``): tensors one connection has
  delivered for steps that have not consumed them yet.
- ``pending_grace`` = 60 s (``ACTORFLOW_PENDING_GRACE_S``): how long tensors for a step that has not
  started here are kept (a sender may legitimately run ahead of the receiver's run_graph request).

Exceeding a budget is a ResourceExhaustedError naming the peer: the frame is skipped (its bytes are
read and dropped, never stored), the step it belongs to fails with that error, and the connection
and every other peer keep working.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from actorflow import errors

__all__ = ["TransportLimits", "ByteBudget", "parse_bytes", "process_budget"]

GiB = 1 << 30
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def parse_bytes(text: str, what: str = "size") -> int:
    """'64MiB' -> 67108864 (binary units; a bare number is bytes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{what}: cannot read {text!r} as a byte count (e.g. 1073741824, 512MiB, 2GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _env_bytes(name: str, default: int) -> int:
    v = os.environ.get(name)
    return default if not v else parse_bytes(v, name)


@dataclass(frozen=True, slots=True)
class TransportLimits:
    """Memory limits per peer and per process (see the module docstring for the defaults)."""

    inflight_per_connection: int = 2 * GiB
    inflight_per_process: int = 4 * GiB
    pending_per_peer: int = 2 * GiB
    pending_grace: float = 60.0

    @classmethod
    def from_env(cls, **overrides) -> TransportLimits:
        """The defaults, overridden by the ACTORFLOW_MAX_* / ACTORFLOW_PENDING_GRACE_S variables,
        then by `overrides`."""
        d = cls()
        vals = {
            "inflight_per_connection": _env_bytes("ACTORFLOW_MAX_INFLIGHT_PER_CONNECTION", d.inflight_per_connection),
            "inflight_per_process": _env_bytes("ACTORFLOW_MAX_INFLIGHT_PER_PROCESS", d.inflight_per_process),
            "pending_per_peer": _env_bytes("ACTORFLOW_MAX_PENDING_PER_PEER", d.pending_per_peer),
            "pending_grace": float(os.environ.get("ACTORFLOW_PENDING_GRACE_S") or d.pending_grace),
        }
        vals.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**vals)

    def __post_init__(self):
        for f in ("inflight_per_connection", "inflight_per_process", "pending_per_peer"):
            if int(getattr(self, f)) <= 0:
                raise ValueError(f"TransportLimits.{f} must be positive, got {getattr(self, f)!r}")
        if not self.pending_grace > 0:
            raise ValueError(f"TransportLimits.pending_grace must be positive, got {self.pending_grace!r}")


class ByteBudget:
    """Counts bytes held against `limit`. Single-threaded (the owning event loop)."""

    __slots__ = ("limit", "used", "name")

    def __init__(self, limit: int, name: str = "this process"):
        self.limit = int(limit)
        self.used = 0
        self.name = name

    def take(self, n: int, peer: str, what: str = "in flight") -> None:
        """Holds `n` more bytes for `peer`, or raises ResourceExhaustedError naming it."""
        if self.used + n > self.limit:
            raise errors.ResourceExhaustedError(
                None, None, f"{peer}: {n} more bytes {what} would exceed the budget of {self.name} "
                            f"({self.used} of {self.limit} bytes held)")
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n
        if self.used < 0:           # a release that was never taken: never let the budget grow
            self.used = 0


_PROCESS: ByteBudget | None = None


def process_budget() -> ByteBudget:
    """The budget of connections that no worker service owns (a client's, a master's)."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = ByteBudget(TransportLimits.from_env().inflight_per_process)
    return _PROCESS
