"""Devices and placement without (or with) a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.scheduler.devices import gpu_count

HAS_GPU = gpu_count() > 0


def test_cpu_is_always_listed():
    devs = af.list_devices()
    assert devs[0].device_type == "CPU"
    assert devs[0].name.endswith("/device:CPU:0")
    assert sum(d.device_type == "GPU" for d in devs) == gpu_count()


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU fallback")
def test_gpu_placement_without_gpu_needs_soft_placement():
    g = af.Graph()
    with g.as_default():
        with af.device("/device:GPU:0"):
            y = af.constant([1.0, 2.0]) * 3.0
        with af.Session(graph=g) as sess:
            with pytest.raises(af.errors.InvalidArgumentError, match="explicit device specification '/device:GPU:0'"):
                sess.run(y)
        with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as sess:
            np.testing.assert_allclose(sess.run(y), [3.0, 6.0])
