"""tf.edit_distance on the SparseTensors TF-1.x programs build: a last index past the shape, values out
of order within a sequence (TensorFlow 2.21's values, tests/fixtures/make_edit_distance.py)."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "edit_distance.json").read_text())


@pytest.mark.parametrize("name", sorted(FIX))
def test_edit_distance_matches_tensorflow(name):
    case = FIX[name]
    with af.Graph().as_default():
        d = af.edit_distance(af.SparseTensor(*case["hypothesis"]), af.SparseTensor(*case["truth"]),
                             normalize=case["normalize"])
        with af.Session() as s:
            if case["error"]:
                with pytest.raises(af.errors.InvalidArgumentError, match="index prefix .* outside the output"):
                    s.run(d)
            else:
                np.testing.assert_allclose(s.run(d), case["value"], rtol=1e-6)
