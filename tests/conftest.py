"""Fixtures and helpers shared by the test files.

- `graph`: a fresh default graph for one test (`pytestmark = pytest.mark.usefixtures("graph")` gives
  every test of a file one; a test that needs the Graph object takes `graph` as an argument).
- `run(fetches, feed=None)`: runs fetches in a fresh local session on the default graph (import it:
  `from tests.conftest import run`).
"""
from __future__ import annotations

import pytest

import actorflow as af


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
