"""Finding 7 of issue 15: a token header with non-ASCII bytes.

Before: `GET /health` (or the websocket upgrade `GET /ws`) with `X-Actorflow-Token: \\xff\\xfeabc`
reached `secrets.compare_digest(str, str)`, which raises TypeError for non-ASCII strings: the server
answered `500 Internal Server Error` and aiohttp logged "Error handling request" with a traceback,
once per request (200 times for 200 requests).
"""
from __future__ import annotations

import logging

import pytest

from .net_support import TOKEN, WS_UPGRADE, healthy, raw_request, serve, status_of

BAD_VALUES = [b"\xff\xfeabc", "caf\u00e9".encode(), b"\xc3", TOKEN.encode() + b"\x80", b"\x00" + TOKEN.encode(),
              b"", b" " * 100, ("\u00e9" * 3000).encode()]


@pytest.fixture
def server():
    with serve() as s:
        yield s


@pytest.mark.parametrize("path,extra", [("/health", b""), ("/ws", WS_UPGRADE)], ids=["health", "ws"])
def test_malformed_token_headers_get_401_without_a_traceback(server, caplog, path, extra):
    caplog.set_level(logging.DEBUG)
    for value in BAD_VALUES * 3:
        req = (f"GET {path} HTTP/1.1\r\nHost: x\r\n".encode() + b"X-Actorflow-Token: " + value + b"\r\n"
               + extra + b"Connection: close\r\n\r\n")
        resp = raw_request(server, req)
        assert status_of(resp) in (400, 401), (value, resp[:200])
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]
    assert healthy(server)                      # and it still serves a good client


def test_duplicate_or_missing_token_headers_are_refused(server):
    two = (f"GET /health HTTP/1.1\r\nHost: x\r\nX-Actorflow-Token: {TOKEN}\r\nX-Actorflow-Token: {TOKEN}\r\n"
           "Connection: close\r\n\r\n").encode()
    assert status_of(raw_request(server, two)) == 401
    none = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert status_of(raw_request(server, none)) == 401
    good = f"GET /health HTTP/1.1\r\nHost: x\r\nX-Actorflow-Token: {TOKEN}\r\nConnection: close\r\n\r\n".encode()
    assert status_of(raw_request(server, good)) == 200


def test_non_ascii_task_header_is_only_a_label(server, caplog):
    """A websocket client with the token and a garbage X-Actorflow-Task header is served (the header
    only names the peer in logs) and logs no traceback."""
    caplog.set_level(logging.DEBUG)
    for task, status in ((b"\xff\xfe/job:\xc3(", 101), (b"/job:\x1b[31mred", 400)):
        req = (f"GET /ws HTTP/1.1\r\nHost: x\r\nX-Actorflow-Token: {TOKEN}\r\n".encode()
               + b"X-Actorflow-Task: " + task + b"\r\n" + WS_UPGRADE + b"\r\n")
        assert status_of(raw_request(server, req, timeout=10.0)) == status     # returns at the answer's end
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert healthy(server)


def test_header_limits(server, caplog):
    """Too many headers, or one too long, is a 400 logged as one line without a traceback."""
    caplog.set_level(logging.DEBUG)
    many = b"".join(b"X-H-%d: v\r\n" % i for i in range(100))
    long = b"X-Actorflow-Token: " + b"A" * 20000 + b"\r\n"
    for extra in (many, long):
        resp = raw_request(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
        assert status_of(resp) == 400, resp[:200]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert healthy(server)
