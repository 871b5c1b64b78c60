"""The README's main job: a local cluster (1 PS, 2 workers) trains the digits model asynchronously."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import distributed_digits  # noqa: E402


def test_distributed_digits_reaches_single_process_accuracy(capsys):
    acc = distributed_digits.main(["--steps", "600"])
    assert acc >= 0.97
    # The progress bar ends at the last step (it used to stop one short: 599/600).
    err = capsys.readouterr().err
    assert "600/600" in err and "599/600" not in err.rsplit("\r", 1)[-1]
