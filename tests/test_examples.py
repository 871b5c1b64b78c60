"""The example programs (issue 3): short, seeded runs of each, through their `main(argv)`.

The examples are standalone scripts, not a package, so they are loaded from their files. Each
digits model must reach the issue's 97% test accuracy; the seeds and epoch counts here are chosen
to clear it with a margin (the defaults of the scripts train longer)."""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_mlp_reaches_97_percent(capsys):
    acc = load_example("digits_mlp").main(["--quiet", "--epochs", "10", "--seed", "1"])
    assert acc >= 0.97
    assert f"test accuracy: {acc:.4f}" in capsys.readouterr().out


def test_digits_mlp_is_deterministic_for_a_seed():
    mlp = load_example("digits_mlp")
    runs = [mlp.main(["--quiet", "--epochs", "2", "--seed", "3"]) for _ in range(2)]
    assert runs[0] == runs[1]


def test_digits_convnet_reaches_97_percent(capsys):
    acc = load_example("digits_convnet").main(["--quiet", "--epochs", "15", "--seed", "2"])
    assert acc >= 0.97
    assert f"test accuracy: {acc:.4f}" in capsys.readouterr().out


def test_linear_regression_recovers_coefficients(capsys):
    lr = load_example("linear_regression")
    weights, bias = lr.main(["--quiet", "--steps", "200", "--seed", "0"])
    np.testing.assert_allclose(weights, lr.TRUE_WEIGHTS, atol=0.05)
    assert bias == pytest.approx(float(lr.TRUE_BIAS), abs=0.05)
    out = capsys.readouterr().out
    assert "true" in out and "learned" in out


def test_examples_run_as_programs():
    """`python examples/digits_mlp.py` is the README's main job: it runs as a script, its progress
    bar goes to stderr and the accuracy to stdout."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "digits_mlp.py"), "--epochs", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("test accuracy: ")
    assert "digits mlp" in proc.stderr            # the tqdm bar


def test_keras_digits_reaches_97_percent(capsys):
    # The example's accuracy moves with the seed and with the last bits of the arithmetic (a convolution
    # kernel's summation order): its BatchNormalization's moving statistics (momentum 0.99) lag 40 steps
    # an epoch of Adam at 0.01, and early stopping picks the epoch by validation accuracy. With its 15
    # epochs, and its Dropout layers drawing masks only in training runs (as TF's tf.cond), seeds 1-8
    # gave 0.972-0.992; seed 6 gives 0.992. (While Dropout drew masks in evaluation runs too, seed 5
    # gave 0.71.)
    acc = load_example("keras_digits").main(["--quiet", "--seed", "6"])
    assert acc >= 0.97
    assert f"test accuracy: {acc:.4f}" in capsys.readouterr().out
