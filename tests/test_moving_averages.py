"""af.train.ExponentialMovingAverage against TensorFlow 2.21 (tests/fixtures/make_moving_averages.py)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "moving_averages.json").read_text())


def test_shadow_values_names_and_restore_map_match_tensorflow():
    with af.Graph().as_default():
        env = {"tf": af, "np": np}
        exec(FIX["program"], env)  # noqa: S102 (the fixture's own program)
        assert env["names"] == FIX["names"]
        assert sorted(env["ema"].variables_to_restore()) == FIX["restore"]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for want in FIX["values"]:
                s.run(env["move"])
                s.run(env["upd"])
                for got, w in zip(s.run(env["fetch"]), want):
                    np.testing.assert_allclose(got, np.array(w, np.float32), rtol=1e-6)


def test_restoring_averages_into_the_model(tmp_path):
    with af.Graph().as_default():
        w = af.Variable([1.0, 2.0], name="w")
        ema = af.train.ExponentialMovingAverage(0.5)
        upd = ema.apply([w])
        saver = af.train.Saver()
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(af.assign(w, [3.0, 6.0]))
            s.run(upd)                                     # shadow = 0.5 * init + 0.5 * w = [2, 4]
            path = saver.save(s, str(tmp_path / "m"))
    with af.Graph().as_default():
        w = af.Variable([0.0, 0.0], name="w")
        ema = af.train.ExponentialMovingAverage(0.5)
        restore = af.train.Saver(ema.variables_to_restore())
        with af.Session() as s:
            restore.restore(s, path)
            np.testing.assert_array_equal(s.run(w), [2.0, 4.0])


def test_bad_input():
    with af.Graph().as_default():
        ema = af.train.ExponentialMovingAverage(0.9)
        with pytest.raises(TypeError, match="half, float, or double"):
            ema.apply([af.Variable(1, name="counter")])
        v = af.Variable(1.0)
        ema.apply([v])
        with pytest.raises(ValueError, match="already computed"):
            ema.apply([v])
        assert ema.average(af.Variable(2.0)) is None
