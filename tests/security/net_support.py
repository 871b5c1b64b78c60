"""Helpers of the network security tests (tests/security/test_net_*.py): in-process servers on
loopback, raw sockets that speak as much HTTP as an attacker cares to, and test certificates."""
from __future__ import annotations

import contextlib
import socket
import time

import actorflow as af
from actorflow.cluster.local import free_port, task_health
from actorflow.transport.listener import ConnectionLimits
from actorflow.transport.tls import TLSConfig

TOKEN = "net-test-token"
WS_UPGRADE = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n")


@contextlib.contextmanager
def serve(token=TOKEN, tls=None, **limits):
    """A one-task in-process server (af.train.Server) with the given ConnectionLimits fields."""
    spec = {"worker": [f"127.0.0.1:{free_port()}"]}
    server = af.train.Server(spec, "worker", 0, token=token, tls=tls,
                             limits=ConnectionLimits(**limits) if limits else None)
    try:
        yield server
    finally:
        server.stop()


def host_port(server) -> tuple[str, int]:
    host, port = server.address.rsplit(":", 1)
    return host, int(port)


def raw_request(server, data: bytes, timeout: float = 5.0) -> bytes:
    """Sends `data` on a new TCP connection and returns everything the server answers until it closes
    the connection or stops answering for `timeout` seconds (b"" for a close without an answer)."""
    with socket.create_connection(host_port(server), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
                if b"\r\n\r\n" in out and _complete(out):
                    break
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def _complete(resp: bytes) -> bool:
    head, _, body = resp.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return head.startswith(b"HTTP/1.1 101")


def status_of(resp: bytes) -> int | None:
    """The HTTP status code of a raw response, None when there is none."""
    if not resp.startswith(b"HTTP/1."):
        return None
    return int(resp.split(b" ", 2)[1])


def is_closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (EOF or reset); reads and discards what it sent before."""
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_closed(socks, timeout: float) -> list:
    """Waits until the server closed every socket in `socks` or `timeout` passes; returns those still open."""
    deadline = time.monotonic() + timeout
    open_ = list(socks)
    while open_ and time.monotonic() < deadline:
        open_ = [s for s in open_ if not is_closed(s)]
        time.sleep(0.05)
    return open_


def healthy(server, tls=None) -> bool:
    """A well-behaved client: /health with the right token answers."""
    return task_health(server.address, server.token, 5.0, tls) is not None


def make_certs(tmp_path):
    """A test CA and certificates for 127.0.0.1 (trustme): (server/task TLSConfig with CA, CA path, paths dict)."""
    import trustme
    ca = trustme.CA()
    task = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.actorflow.test")
    other_ca = trustme.CA()
    paths = {"ca": tmp_path / "ca.pem", "task": tmp_path / "task.pem", "client": tmp_path / "client.pem",
             "other_ca": tmp_path / "other-ca.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    task.private_key_and_cert_chain_pem.write_to_path(str(paths["task"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    other_ca.cert_pem.write_to_path(str(paths["other_ca"]))
    paths = {k: str(v) for k, v in paths.items()}
    return TLSConfig(cert=paths["task"], key=paths["task"], ca=paths["ca"]), paths
