"""Training runs shaped like the compatibility corpus's programs, step by step against TF 2.21.

The corpus (benchmarks/compat.py) compares final figures of unseeded programs, whose spread is wide:
these runs start both libraries from the same weights and batches (tests/fixtures/trajectory_cases.py)
and compare every loss and the final weights with TensorFlow's, recorded in trajectories.json. They pin
the semantics the corpus programs rely on: RMSProp's and Adam's updates with TF 1.x defaults (`ms`
starting at ones, Adam's bias correction folded into the learning rate), sigmoid, tanh and softmax
gradients, tf.layers conv2d_transpose / conv2d / average_pooling2d / dense, and float64 feeds into
float32 and int32 placeholders.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import actorflow as af

HERE = Path(__file__).parent / "fixtures"
FIXTURE = json.loads((HERE / "trajectories.json").read_text())


def _cases():
    spec = importlib.util.spec_from_file_location("trajectory_cases", HERE / "trajectory_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = _cases()


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_training_run_matches_tensorflow_step_by_step(name):
    want = FIXTURE["cases"][name]
    got = CASES.run_case(af, name)
    # float32 throughout: rounding differs between Eigen's and numpy's kernels, and a dozen steps
    # amplify it a little, never to a different trajectory.
    np.testing.assert_allclose(np.asarray(got["losses"]), np.asarray(want["losses"]), rtol=2e-4, atol=1e-6,
                               err_msg=f"{name}: loss per step")
    assert set(got["weights"]) == set(want["weights"])
    for k, v in want["weights"].items():
        np.testing.assert_allclose(np.asarray(got["weights"][k]), np.asarray(v), rtol=2e-4, atol=2e-5,
                                   err_msg=f"{name}: final {k}")


def test_fixture_trajectories_train():
    """The recorded runs move: a case whose loss stood still would test nothing about the updates."""
    for name, case in FIXTURE["cases"].items():
        first, last = np.asarray(case["losses"][0]), np.asarray(case["losses"][-1])
        assert np.all(np.abs(first - last) > 1e-3 * np.abs(first)), name
