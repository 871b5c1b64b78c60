"""Fixtures and helpers shared by the test files.

- `graph`: a fresh default graph for one test (`pytestmark = pytest.mark.usefixtures("graph")` gives
  every test of a file one; a test that needs the Graph object takes `graph` as an argument).
- `run(fetches, feed=None)`: runs fetches in a fresh local session on the default graph (import it:
  `from tests.conftest import run`).
- The cluster cookie ($ACTORFLOW_COOKIE) is a fresh file of the test run, not ~/.actorflow/cookie.
- Every test fails if the JIT could not compile a cluster or loop it planned (the kernel then logs
  a warning and runs interpreted: right answers, so nothing else would notice).
"""
from __future__ import annotations

import logging
import os
import tempfile

import pytest

import actorflow as af

# Servers and clients given no token use the user's cookie (cluster/cookie.py): the tests, and the
# processes they start (which inherit the environment), use one of their own, not the home directory's.
os.environ.setdefault("ACTORFLOW_COOKIE", os.path.join(tempfile.mkdtemp(prefix="af-test-cookie-"), "cookie"))


@pytest.fixture
def graph():
    """A fresh Graph, the default graph for the duration of the test."""
    g = af.Graph()
    with g.as_default():
        yield g


def run(fetches, feed=None):
    """The values of `fetches` (with `feed`) in a fresh session on the default graph, closed after."""
    with af.Session() as sess:
        return sess.run(fetches, feed)


class _FailedCompiles(logging.Handler):
    """Records the JIT's "cannot compile ...; it runs interpreted" warnings (scheduler/jit/compile.py)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list = []

    def emit(self, record):
        msg = record.getMessage()
        if "it runs interpreted" in msg:
            self.messages.append(msg)


_FAILED_COMPILES = _FailedCompiles()
logging.getLogger("actorflow.scheduler.jit.compile").addHandler(_FAILED_COMPILES)


@pytest.fixture(autouse=True)
def _no_failed_jit_compiles():
    _FAILED_COMPILES.messages.clear()
    yield
    failed, _FAILED_COMPILES.messages = _FAILED_COMPILES.messages, []
    if failed:
        pytest.fail("the JIT could not compile what it planned (it ran interpreted): " + "; ".join(failed[:3]))
