"""af.initializers' short names (tf.compat.v1.initializers.he_normal, identity, ...): the
distributions they draw from and the identity matrix, whole and partitioned."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.variable_scope import fixed_size_partitioner, get_variable

pytestmark = pytest.mark.usefixtures("graph")


def _init_and_run(fetches):
    with af.Session() as sess:
        sess.run(af.initializers.global_variables())
        return sess.run(fetches)


@pytest.mark.parametrize("name,scale,dist", [
    ("he_normal", 2.0, "normal"), ("he_uniform", 2.0, "uniform"),
    ("lecun_normal", 1.0, "normal"), ("lecun_uniform", 1.0, "uniform"),
])
def test_fan_in_scaled_initializers_draw_the_documented_variance(name, scale, dist):
    fan_in = 50
    init = getattr(af.initializers, name)(seed=3)
    v = get_variable(name, [fan_in, 400], initializer=init)
    x = _init_and_run(v)
    std = np.sqrt(scale / fan_in)
    assert abs(x.std() - std) < 0.05 * std
    if dist == "uniform":
        assert np.abs(x).max() <= np.sqrt(3) * std + 1e-6
    else:  # truncated at two (untruncated) standard deviations
        assert np.abs(x).max() <= 2 * std / 0.87962566103423978 + 1e-6
    # the same seed gives the same values
    again = get_variable(name + "_again", [fan_in, 400], initializer=getattr(af.initializers, name)(seed=3))
    np.testing.assert_array_equal(_init_and_run(again), x)


def test_identity_initializer_gain_and_rectangular():
    v = get_variable("eye", [3, 4], initializer=af.initializers.identity(gain=2.5))
    np.testing.assert_array_equal(_init_and_run(v), 2.5 * np.eye(3, 4, dtype=np.float32))


def test_identity_initializer_partitioned_takes_each_shards_slice():
    pv = get_variable("eye_p", [5, 5], initializer=af.initializers.identity(),
                      partitioner=fixed_size_partitioner(2))
    np.testing.assert_array_equal(_init_and_run(pv.as_tensor()), np.eye(5, dtype=np.float32))


def test_identity_initializer_rejects_non_matrices_and_ints():
    with pytest.raises(ValueError, match="two-dimensional"):
        af.initializers.identity()([2, 2, 2])
    with pytest.raises(ValueError, match="floating-point"):
        af.initializers.identity(dtype=af.int32)


def test_tables_initializer_is_the_top_level_op():
    assert af.initializers.tables_initializer is af.tables_initializer
