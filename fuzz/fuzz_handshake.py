"""Fuzzes the websocket handshake of a task's server: random and malformed request lines and headers.

Each example is one raw HTTP request on a fresh TCP connection to a real in-process server
(`af.train.Server` on loopback): the cluster token header (right, wrong, repeated, missing, huge,
non-ASCII bytes), the task header, the websocket upgrade headers, the bulk negotiation header,
extra and oversized headers, and a tail of random bytes after the headers (the first websocket
frames, or a pipelined request). It checks that

- the server answers below 500 (4xx, or 101/200 for a request with exactly the right token) or
  closes the connection, within a bound, never a 5xx and never a hang;
- nothing without exactly the right token is answered 101 or 200 (no way around the token check);
- no request logs a traceback;
- a well-behaved client (/health with the token) is still served afterwards.

Two ways to run it:
- bounded, in the test suite: tests/security/test_net_fuzz.py (a few seconds);
- by hand: `python fuzz/fuzz_handshake.py --minutes 10` prints executions per second and totals;
  `--atheris` drives the same property with atheris's coverage-guided engine where it installs
  (see fuzz/README.md).
"""
from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOKEN = "fuzz-token-0123456789abcdef"
KEY_OK = b"dGhlIHNhbXBsZSBub25jZQ=="
READ_BOUND = 10.0        # seconds an example may take to be answered or closed before it counts as a hang

def _mostly(valid, fuzzed):
    """Seven draws in eight from `valid`: most requests get far enough to meet the token check."""
    return st.integers(0, 7).flatmap(lambda i: fuzzed if i == 0 else valid)


_hdr_value = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=40).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40).map(str.encode),
    st.sampled_from([b"", b" ", b"\x00", b"\xff\xfe", "caf\u00e9".encode(), b"\r", b"\n", b"\t", b"1", b"13"]),
    st.integers(1, 20000).map(lambda n: b"A" * n),          # oversized
)
_token = _mostly(st.just(TOKEN.encode()), st.one_of(
    st.just(TOKEN.encode()[:-1]), st.just(TOKEN.encode() + b"\x80"), st.just(TOKEN.upper().encode()), _hdr_value))


@st.composite
def requests(draw):
    """(request bytes, whether it carries exactly the right token, whether its headers are complete)."""
    method = draw(_mostly(st.sampled_from([b"GET", b"GET", b"GET", b"POST", b"HEAD", b"OPTIONS"]),
                          st.binary(min_size=1, max_size=8)))
    path = draw(_mostly(st.sampled_from([b"/ws", b"/ws", b"/health", b"/", b"/ws?x=1", b"//ws", b"/ws/../health"]),
                        st.binary(max_size=30)))
    version = draw(_mostly(st.just(b"HTTP/1.1"), st.sampled_from([b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b""])))
    headers = []
    if draw(_mostly(st.just(True), st.just(False))):
        headers.append((b"Host", draw(_mostly(st.sampled_from([b"127.0.0.1", b"x"]), _hdr_value))))
    tokens = draw(_mostly(st.lists(_token, min_size=1, max_size=1), st.lists(_token, max_size=3)))
    headers += [(b"X-Actorflow-Token", t) for t in tokens]
    if draw(st.booleans()):
        headers.append((b"X-Actorflow-Task", draw(_mostly(st.sampled_from([b"/job:worker/task:1", b"client"]),
                                                          _hdr_value))))
    if draw(_mostly(st.just(True), st.just(False))):          # a websocket upgrade, each header right or fuzzed
        headers.append((b"Upgrade", draw(_mostly(st.sampled_from([b"websocket", b"WebSocket"]), _hdr_value))))
        headers.append((b"Connection", draw(_mostly(st.sampled_from([b"Upgrade", b"keep-alive, Upgrade"]),
                                                    _hdr_value))))
        headers.append((b"Sec-WebSocket-Key", draw(_mostly(st.just(KEY_OK), _hdr_value))))
        headers.append((b"Sec-WebSocket-Version", draw(_mostly(st.just(b"13"), _hdr_value))))
        if draw(st.booleans()):
            headers.append((b"Sec-WebSocket-Extensions", draw(_mostly(st.just(b"permessage-deflate"), _hdr_value))))
    if draw(st.booleans()):
        headers.append((b"X-Actorflow-Bulk", draw(_mostly(st.just(b"1"), _hdr_value))))
    for _ in range(draw(st.integers(0, 3)) if draw(st.integers(0, 3)) == 0 else 0):
        headers.append((draw(st.binary(min_size=1, max_size=20)), draw(_hdr_value)))
    if draw(st.integers(0, 20)) == 0:                       # too many headers
        headers += [(b"X-Many-%d" % i, b"v") for i in range(100)]
    headers = draw(st.permutations(headers))
    sep = draw(_mostly(st.just(b"\r\n"), st.sampled_from([b"\n", b"\r"])))
    head = method + b" " + path + b" " + version + sep + b"".join(k + b": " + v + sep for k, v in headers)
    complete = draw(st.integers(0, 9)) > 0
    tail = draw(st.binary(max_size=64)) if draw(st.integers(0, 3)) == 0 else b""
    data = head + sep + tail if complete else head[:draw(st.integers(0, len(head)))]
    return data, tokens == [TOKEN.encode()], complete


class Target:
    """A real in-process task server on loopback, and the checks of one example against it."""

    def __init__(self, handshake_timeout: float = 0.5):
        import actorflow as af
        from actorflow.cluster.local import free_port
        from actorflow.transport.listener import ConnectionLimits
        self.server = af.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, token=TOKEN,
                                      limits=ConnectionLimits(handshake_timeout=handshake_timeout,
                                                              max_unauthenticated=1024))
        host, port = self.server.address.rsplit(":", 1)
        self.addr = (host, int(port))
        self.executions = 0
        self.statuses: dict = {}
        self.tracebacks: list[logging.LogRecord] = []
        target = self

        class _Catch(logging.Handler):
            def emit(self, record):
                if record.exc_info or record.levelno >= logging.ERROR:
                    target.tracebacks.append(record)
        self._handler = _Catch(logging.DEBUG)
        logging.getLogger().addHandler(self._handler)

    def close(self) -> None:
        logging.getLogger().removeHandler(self._handler)
        self.server.stop()

    def one(self, data: bytes, authorized: bool, complete: bool) -> None:
        """Sends one request and checks the answer; raises AssertionError on a violation."""
        self.executions += 1
        self.tracebacks.clear()
        resp = b""
        with socket.create_connection(self.addr, timeout=READ_BOUND) as s:
            try:
                s.sendall(data)
                if not complete:
                    s.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + READ_BOUND
                while True:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"no answer and no close within {READ_BOUND:g} s for {data[:200]!r}")
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    resp += chunk
                    if _answered(resp, data.startswith(b"HEAD ")):
                        break
            except (ConnectionResetError, BrokenPipeError):
                pass                 # closed on us: a clean refusal
            except TimeoutError:
                raise AssertionError(f"no answer and no close within {READ_BOUND:g} s for {data[:200]!r}") from None
        status = _status(resp)
        if resp and status is None:
            raise AssertionError(f"answer that is not HTTP: {resp[:200]!r} to {data[:200]!r}")
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status is not None and status >= 500:
            raise AssertionError(f"server error {status} for {data[:300]!r}: {resp[:300]!r}")
        if status in (101, 200) and not authorized:
            raise AssertionError(f"answered {status} without exactly the right token: {data[:300]!r}")
        if self.tracebacks:
            r = self.tracebacks[0]
            self.tracebacks.clear()
            raise AssertionError(f"logged {r.levelname} {r.getMessage()} for {data[:300]!r}")

    def good_client_served(self) -> bool:
        from actorflow.cluster.local import task_health
        return task_health(self.server.address, TOKEN, 5.0) is not None


def _status(resp: bytes):
    if not resp.startswith(b"HTTP/"):      # aiohttp echoes the request's version, HTTP/2.0 included
        return None
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def _answered(resp: bytes, head_request: bool) -> bool:
    head, sep, body = resp.partition(b"\r\n\r\n")
    if not sep:
        return False
    if head_request or b" 101 " in head.split(b"\r\n", 1)[0]:
        return True          # no body follows
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def make_test(target: Target, max_examples: int, check_every: int = 1):
    """A hypothesis test that runs `max_examples` requests against `target`."""
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(requests())
    def fuzz_handshake(req):
        target.one(*req)
        if target.executions % check_every == 0:
            assert target.good_client_served(), "a well-behaved client is no longer served"
    return fuzz_handshake


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=1.0, help="how long to run (default 1)")
    p.add_argument("--atheris", action="store_true", help="drive the property with atheris (coverage-guided)")
    p.add_argument("--check-every", type=int, default=50, help="check a good client every N executions")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    target = Target()
    start = time.monotonic()
    end = start + args.minutes * 60
    last = start
    try:
        if args.atheris:
            try:
                import atheris
            except ImportError:
                print("atheris is not installed here (pip install atheris; see fuzz/README.md)", file=sys.stderr)
                return 2
            test = make_test(target, 1, args.check_every)

            def one_input(buf: bytes) -> None:
                test.hypothesis.fuzz_one_input(buf)
                if time.monotonic() > end:
                    _report(target, start)
                    os._exit(0)
            atheris.Setup([sys.argv[0], "-max_len=4096"], one_input)
            atheris.Fuzz()
            return 0
        test = make_test(target, 500, args.check_every)
        while time.monotonic() < end:
            test()
            now = time.monotonic()
            if now - last >= 30:
                last = now
                _report(target, start, partial=True)
        assert target.good_client_served()
        _report(target, start)
        return 0
    finally:
        target.close()


def _report(target: Target, start: float, partial: bool = False) -> None:
    dt = time.monotonic() - start
    print(f"{'...' if partial else 'done:'} {target.executions} executions in {dt:.0f} s "
          f"({target.executions / dt:.1f}/s); answers: "
          + ", ".join(f"{k or 'closed'}: {v}" for k, v in sorted(target.statuses.items(), key=lambda kv: -kv[1])),
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
