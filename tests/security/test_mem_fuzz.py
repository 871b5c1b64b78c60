"""Issue 15: the frame codec and the bulk-frame parser under fuzzing, bounded for the suite.

The harnesses live in fuzz/ (fuzz_codec.py, fuzz_bulk.py; see fuzz/README.md), where they also run
by hand for any length of time. Here each property runs a few dozen hypothesis examples (each
amplified into a few random variants): only the documented error (FrameError) escapes, nothing
crashes, and no allocation exceeds what the input itself holds or what the reader announced.
Old behaviour: the bulk stream allocated every bulk frame at its declared size (up to 4 GiB) as
soon as the frame's header arrived, announced or not, so the allocation bound of the bulk
properties (announced sizes plus a constant) did not hold; the harnesses did not exist.
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[2] / "fuzz"


def _load(name: str):
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    spec = importlib.util.spec_from_file_location(name, FUZZ / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


codec = _load("fuzz_codec")
bulk = _load("fuzz_bulk")
EXAMPLES = 100


@pytest.mark.parametrize("prop", codec.make_tests(EXAMPLES), ids=lambda t: t.__name__)
def test_codec(prop):
    prop()


@pytest.mark.parametrize("prop", bulk.make_tests(EXAMPLES), ids=lambda t: t.__name__)
def test_bulk(prop):
    prop()


def test_the_by_hand_mode_reports_executions(capsys):
    assert codec.run_for(0.0005, batch=5, report_every=0.0) == 0
    assert bulk.main(["--minutes", "0.0005", "--batch", "5", "--amplify", "1"]) == 0
    out = capsys.readouterr().out
    assert "[codec] done:" in out and "[bulk] done:" in out and "executions" in out
