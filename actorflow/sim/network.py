"""The simulated network: in-memory websockets between simulated processes, in virtual time.

`SimSocket` has the surface of the aiohttp websockets that `transport.channel.Connection` drives
(`send_bytes`, `receive`, `close`, `closed`), so the real transport code runs over it unchanged;
`SimNetwork.dial` stands in for aiohttp's connect (installed as `channel.DIAL`).

A message from task A to task B crosses, in order: A's CPU (a per-message cost), A's outgoing link
(its size at the link's rate, shared by every connection out of A), the wire (a latency, with a
seeded jitter and any latency fault), B's incoming link and B's CPU. One connection delivers in the
order it sent (TCP's guarantee); messages on different connections interleave as their times fall.
Faults, all drawn from the seed or given by the plan:

- `partition(a, b)`: messages between the sides are held, delivered in order once healed, or the
  connection is reset after `fail_after_s` (a TCP that gave up); new connections are not answered;
- `drop(src, dst, mode)`: the next message from src to dst is lost once: retransmitted after an RTO
  (still in order) or, in "reset" mode, the connection is reset;
- latency and bandwidth conditions on a task's outgoing messages;
- a killed process's sockets are reset: the peers see the connection close one latency later.
"""
from __future__ import annotations

import asyncio
import collections
import random
import zlib

import aiohttp

from actorflow.sim.faults import draw_ms

__all__ = ["SimNetwork", "SimSocket", "NetCosts"]

_BINARY = aiohttp.WSMsgType.BINARY
_CLOSED = aiohttp.WSMessage(aiohttp.WSMsgType.CLOSED, None, None)


class NetCosts:
    """The network's cost model (times in seconds): per-message CPU at each end, the links' rate,
    the one-way latency and its jitter (a uniform fraction, drawn per message from the seed)."""

    def __init__(self, latency_s=100e-6, jitter=0.5, s_per_mb=4.5e-3, cpu_per_msg_s=10e-6, cpu_per_mb_s=0.0):
        self.latency_s = latency_s
        self.jitter = jitter
        self.s_per_mb = s_per_mb
        self.cpu_per_msg_s = cpu_per_msg_s
        self.cpu_per_mb_s = cpu_per_mb_s


def _role(owner) -> str:
    """A process's role for the message counts: `client`, `worker` or `ps`."""
    name = getattr(owner, "name", "") or ""
    return "client" if name.startswith("client") else (name.split("/")[1][4:] if name.startswith("/job:") else "?")


class _Node:
    """A machine's network side: its CPU for messages and its full-duplex link (next free times)."""
    __slots__ = ("task", "cpu", "link_out", "link_in", "bandwidth", "sent", "received")

    def __init__(self, task):
        self.task = task
        self.sent = self.received = 0
        self.cpu = self.link_out = self.link_in = 0.0
        self.bandwidth = None        # a bandwidth fault's cap, MB/s


class SimSocket:
    """One end of a simulated websocket."""

    def __init__(self, net: "SimNetwork", owner, local: str, remote: str):
        self.net = net
        self.owner = owner
        self.local = local               # the task this end is on (network identity)
        self.remote = remote
        self.peer: SimSocket | None = None
        self._inbox: collections.deque = collections.deque()
        self._waiter: asyncio.Future | None = None
        self.closed = False              # closed by this end
        self._eof = False                # the peer closed or the connection was reset
        self._last = 0.0                 # arrival time of the last message sent (in-order delivery)
        self._held: list = []            # messages held by a partition
        self._held_since = 0.0
        self.sent = 0
        self.calls: dict = {}            # count_kinds: call id -> method of the calls sent here

    # -- the websocket surface ------------------------------------------------------------------------
    async def send_bytes(self, data) -> None:
        if self.closed or self._eof:
            raise ConnectionResetError(f"sim: connection {self.local} -> {self.remote} is closed")
        self.net.transmit(self, bytes(data))

    async def receive(self, timeout=None):
        while not self._inbox:
            if self._eof or self.closed:
                return _CLOSED
            self._waiter = self.net.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._inbox.popleft()

    async def close(self, code=None, message=None) -> bool:
        if self.closed:
            return False
        self.closed = True
        self._wake()
        if self.peer is not None and not self.peer._eof:
            self.net.send_eof(self)
        return True

    # -- delivery -------------------------------------------------------------------------------------------
    def _deliver(self, data) -> None:
        if self.closed or self._eof:
            return
        self._inbox.append(aiohttp.WSMessage(_BINARY, data, None))
        self._wake()

    def _reset(self) -> None:
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)


class SimNetwork:
    def __init__(self, loop, seed: int, costs: NetCosts | None = None, log=None):
        self.loop = loop
        self.seed = seed
        self.costs = costs or NetCosts()
        self.log = log                   # log(kind, **fields): the world's event log
        self.listeners: dict = {}        # address -> process (with .accept(sock) and .ctx)
        self.nodes: dict = {}            # task -> _Node
        self._rngs: dict = {}
        self.partitions: dict = {}       # fault id -> (side a, side b, fail_after_s)
        self.drops: list = []            # pending drop commands
        self.conditions: dict = {}       # fault id -> (spec, active, rng)
        self.sockets: dict = {}          # owner -> [SimSocket]
        self.messages = 0
        self.bytes = 0
        self.kinds: collections.Counter | None = None   # count_kinds(): (from role, to role, kind) -> messages

    def node(self, task) -> _Node:
        n = self.nodes.get(task)
        if n is None:
            n = self.nodes[task] = _Node(task)
        return n

    def rng(self, key: str) -> random.Random:
        r = self._rngs.get(key)
        if r is None:
            r = self._rngs[key] = random.Random(zlib.crc32(f"{self.seed}/{key}".encode()) ^ (self.seed << 32))
        return r

    def _emit(self, kind, **fields):
        if self.log is not None:
            self.log(kind, **fields)

    # -- connecting -------------------------------------------------------------------------------------
    async def dial(self, address: str, local_task: str, token: str):
        """Opens a connection to the process listening at `address` (channel.DIAL): one round trip,
        ConnectionRefusedError when nothing listens there, no answer across a partition."""
        from actorflow.sim.loop import OWNER
        owner = OWNER.get()
        src = owner.net_task if owner is not None else local_task
        target = self.listeners.get(address)
        dst = target.net_task if target is not None else address
        rtt = 2 * self._latency(src, dst)
        await asyncio.sleep(rtt)
        while self._cut(src, dst) is not None:
            await asyncio.sleep(0.05)         # SYNs lost: the caller's connect deadline ends this
        target = self.listeners.get(address)
        if target is None or not target.alive:
            raise ConnectionRefusedError(f"sim: nothing listens at {address}")
        if token != target.token:
            raise ConnectionRefusedError(f"sim: {address} refused the token")
        a = SimSocket(self, owner, src, target.net_task)
        b = SimSocket(self, target, target.net_task, src)
        a.peer, b.peer = b, a
        self.sockets.setdefault(owner, []).append(a)
        self.sockets.setdefault(target, []).append(b)
        self.loop.call_soon(target.accept, b, local_task, context=target.ctx)
        return a

    # -- sending ----------------------------------------------------------------------------------------
    def _latency(self, src, dst) -> float:
        c = self.costs
        lat = c.latency_s * (1.0 + c.jitter * self.rng(f"lat/{src}/{dst}").random())
        for spec, active, rng in self.conditions.values():
            if active and spec["kind"] == "latency" and src in spec["tasks"] and \
                    (not spec.get("peers") or dst in spec["peers"]):
                lat += draw_ms(spec["delay"], rng) / 1e3
        return lat

    def _cut(self, src, dst):
        for fid, (a, b, fail_after) in self.partitions.items():
            if (src in a and dst in b) or (src in b and dst in a):
                return fid, fail_after
        return None

    def count_kinds(self) -> None:
        """From now on, counts the messages sent by kind in `kinds`: (sender's role, receiver's role,
        kind), the kind being `call:<method>`, `reply:<method>`, `tensor` (a Send/Recv value),
        `payload` (a large frame's continuation) or `other`. A measurement hook: it decodes every
        frame's header, so it is off unless asked for."""
        if self.kinds is None:
            self.kinds = collections.Counter()

    def _kind(self, sock: SimSocket, data: bytes) -> str:
        import msgpack
        try:
            n = int.from_bytes(data[:4], "little")
            h = msgpack.unpackb(data[4:4 + n], raw=False)
            k = h.get("k")
        except Exception:  # noqa: BLE001 - raw payload bytes, not a header
            return "payload"
        if k == "call":
            sock.calls[h.get("i")] = h.get("m")
            return f"call:{h.get('m')}"
        if k == "reply":
            m = sock.peer.calls.pop(h.get("i"), "?") if sock.peer is not None else "?"
            return f"reply:{m}"
        return "tensor" if k == "t" else "other"

    def transmit(self, sock: SimSocket, data: bytes) -> None:
        src, dst = sock.local, sock.remote
        self.messages += 1
        self.bytes += len(data)
        if self.kinds is not None:
            self.kinds[(_role(sock.owner), _role(sock.peer.owner if sock.peer else None), self._kind(sock, data))] += 1
        cut = self._cut(src, dst)
        if cut is not None or sock._held:
            sock._held.append(data)
            if len(sock._held) == 1:
                sock._held_since = self.loop.time()
                self._arm(sock)
            return
        extra = 0.0
        if self.drops:
            for cmd in self.drops:
                if cmd["task"] == src and (cmd.get("peer") is None or cmd["peer"] == dst):
                    self.drops.remove(cmd)
                    self._emit("drop_applied", task=src, fault=cmd["fault"], episode=cmd.get("episode"), peer=dst,
                               mode=cmd.get("mode", "retransmit"), bytes=len(data))
                    if cmd.get("mode", "retransmit") == "reset":
                        self.reset(sock, f"fault {cmd['fault']}")
                        return
                    extra = float(cmd.get("rto_ms", 200.0)) / 1e3
                    break
        self._schedule(sock, data, extra)

    def _schedule(self, sock: SimSocket, data: bytes, extra: float = 0.0) -> None:
        c = self.costs
        now = self.loop.time()
        a, b = self.node(sock.local), self.node(sock.remote)
        mb = len(data) / 1e6
        a.sent += 1
        b.received += 1
        cpu = c.cpu_per_msg_s + mb * c.cpu_per_mb_s
        a.cpu = max(a.cpu, now) + cpu
        rate = c.s_per_mb if a.bandwidth is None else max(c.s_per_mb, 1.0 / a.bandwidth)
        a.link_out = max(a.link_out, a.cpu) + mb * rate
        t = a.link_out + self._latency(sock.local, sock.remote) + extra
        b.link_in = max(b.link_in, t) + mb * c.s_per_mb
        b.cpu = max(b.cpu, b.link_in) + cpu
        t = max(b.cpu, sock._last)
        sock._last = t
        peer = sock.peer
        self.loop.call_at(t, peer._deliver, data, context=peer.owner.ctx if peer.owner is not None else None)

    def send_eof(self, sock: SimSocket) -> None:
        t = max(self.loop.time() + self._latency(sock.local, sock.remote), sock._last)
        sock._last = t
        peer = sock.peer
        self.loop.call_at(t, peer._reset, context=peer.owner.ctx if peer.owner is not None else None)

    def reset(self, sock: SimSocket, why: str) -> None:
        """Resets the connection of `sock`: both ends see it fail (the far end one latency later)."""
        sock._held.clear()
        sock._reset()
        if sock.peer is not None and not sock.peer._eof:
            sock.peer._held.clear()
            self.send_eof(sock)

    def _arm(self, sock: SimSocket) -> None:
        """A connection whose oldest held message has waited the current partition's `fail_after_s`
        fails (TCP's timeout counts from the first unacknowledged segment)."""
        cut = self._cut(sock.local, sock.remote)
        if cut is None or cut[1] is None or not sock._held:
            return
        self.loop.call_at(max(self.loop.time(), sock._held_since + float(cut[1])), self._partition_timeout, sock)

    def _partition_timeout(self, sock) -> None:
        cut = self._cut(sock.local, sock.remote)
        if not sock._held or sock._eof or cut is None or cut[1] is None:
            return
        if self.loop.time() - sock._held_since >= float(cut[1]) - 1e-9:
            self._emit("partition_failed_connection", task=sock.local, fault=cut[0], peer=sock.remote)
            self.reset(sock, f"partition {cut[0]}")

    # -- the plan's commands -------------------------------------------------------------------------------
    def partition(self, fid, a, b, fail_after_s=None) -> None:
        self.partitions[fid] = (frozenset(a), frozenset(b), fail_after_s)
        self._rearm()

    def _rearm(self) -> None:
        for socks in self.sockets.values():
            for s in socks:
                if s._held and not s._eof:
                    self._arm(s)

    def heal(self, fid) -> None:
        self.partitions.pop(fid, None)
        for socks in self.sockets.values():
            for s in socks:
                if s._held and self._cut(s.local, s.remote) is None and not s._eof:
                    held, s._held = s._held, []
                    for data in held:
                        self._schedule(s, data)
        self._rearm()

    def drop(self, cmd: dict) -> None:
        self.drops.append(cmd)

    def set_condition(self, spec: dict, active: bool) -> None:
        fid = spec["id"]
        old = self.conditions.get(fid)
        if old is not None:
            rng = old[2]
        else:
            import numpy as np
            rng = np.random.default_rng([self.seed & 0xFFFFFFFF, int(fid), zlib.crc32(b"net")])
        self.conditions[fid] = (spec, active, rng)
        if spec["kind"] == "bandwidth":
            for t in spec["tasks"]:
                self.node(t).bandwidth = float(spec["mb_per_s"]) if active else None

    def process_died(self, owner) -> None:
        """Resets every connection of a killed process; its listener is gone."""
        for addr, p in list(self.listeners.items()):
            if p is owner:
                del self.listeners[addr]
        for s in self.sockets.pop(owner, []):
            s.closed = True
            s._held.clear()
            if s.peer is not None and not s.peer._eof:
                self.send_eof(s)

    def forget_closed(self) -> None:
        for owner, socks in list(self.sockets.items()):
            self.sockets[owner] = [s for s in socks if not (s.closed and s._eof)]
