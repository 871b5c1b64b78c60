"""Learning-rate schedules added for TF-1.x programs, against TensorFlow 2.21's rates
(tests/fixtures/make_lr_schedules.py), and the noisy schedule's statistics."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "lr_schedules.json").read_text())


@pytest.mark.parametrize("expr", list(FIX["rates"]))
def test_rates_match_tensorflow(expr):
    with af.Graph().as_default():
        step = af.placeholder(af.int64, [], name="step")
        rate = eval(expr, {"tf": af, "step": step})  # noqa: S307 (the fixture's own expressions)
        with af.Session() as s:
            got = [float(s.run(rate, {step: i})) for i in FIX["steps"]]
    np.testing.assert_allclose(got, FIX["rates"][expr], rtol=2e-5, atol=1e-7)


def test_noisy_linear_cosine_decay_is_centred_on_the_linear_cosine_rate():
    with af.Graph().as_default():
        step = af.placeholder(af.int64, [])
        noisy = af.train.noisy_linear_cosine_decay(0.1, step, 40, initial_variance=0.01)
        plain = af.train.linear_cosine_decay(0.1, step, 40)
        assert af.train.piecewise_constant_decay is af.train.piecewise_constant
        with af.Session() as s:
            draws = np.array([s.run(noisy, {step: 10}) for _ in range(400)])
            want = s.run(plain, {step: 10})
    cosine = 0.5 * (1 + np.cos(np.pi * 10 / 40))
    std = np.sqrt(0.01 / 11 ** 0.55) * cosine * 0.1
    assert abs(draws.mean() - want) < 4 * std / np.sqrt(400) and 0.7 * std < draws.std() < 1.3 * std
