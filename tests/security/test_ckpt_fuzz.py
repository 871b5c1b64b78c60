"""Issue 15: fuzzing the checkpoint index parser, bounded (the harness is fuzz/fuzz_checkpoint_index.py;
run it by hand for minutes with `python fuzz/fuzz_checkpoint_index.py --minutes 10`).

Before the fix, the harness's first few examples already failed: a deleted key gave KeyError, a
string offset TypeError, a 4 PiB shape MemoryError, a traversal string read a file outside. Here a
bounded number of random and mutated indexes and shard files go through every reader, asserting
that each either succeeds or raises DataLossError, that latest_checkpoint agrees with
verify_checkpoint, and that nothing allocates more than a small bound; and the harness is shown to
catch a planted bug (the schema check switched off).
"""
from __future__ import annotations

import importlib.util
import os

import pytest

from actorflow import checkpoint_format as ckpt_io

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "fuzz_checkpoint_index.py")


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("fuzz_checkpoint_index", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# No timing is asserted here: a hang is caught by the suite's timeout (pyproject.toml).
def test_random_and_mutated_indexes_only_raise_data_loss(harness, tmp_path):
    seed = harness.Seed(str(tmp_path))
    stats = harness.Stats()
    with harness.quiet():
        harness.make_test(seed, 100, stats, hang_seconds=None, derandomize=True)()
    assert stats.runs >= 100
    assert stats.refused > 0 and stats.ok > 0        # both sides of the parser were exercised


def test_the_harness_catches_a_planted_bug(harness, tmp_path, monkeypatch):
    seed = harness.Seed(str(tmp_path))
    monkeypatch.setattr(ckpt_io, "_check_schema", lambda doc: None)
    with harness.quiet(), pytest.raises(AssertionError, match="raised|allocated|latest_checkpoint"):
        harness.make_test(seed, 200, harness.Stats(), shrink=False, hang_seconds=None)()
