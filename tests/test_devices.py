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


# -- device assignment inside one process (pure rules; no GPU needed) -----------------------------

def _assign(g, n_gpu=1, soft=False, no_gpu_kernel=()):
    from actorflow.kernels.registry import get_kernel, has_kernel
    from actorflow.scheduler.placement import assign_devices
    return assign_devices(list(g._ops), n_gpu, soft, lambda t: t not in no_gpu_kernel,
                          lambda t: has_kernel(t, "CPU") and get_kernel(t, "CPU").metadata_only)


def test_float_work_goes_to_the_gpu_and_integer_bookkeeping_stays_on_the_host():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3])
        w = af.Variable(np.ones((3, 2), np.float32))
        y = af.matmul(x, w)
        n = af.shape(y)[0] + 1
        step = af.Variable(0, dtype=af.int64)
        inc = af.assign_add(step, 1)
        init = af.global_variables_initializer()
    d = _assign(g)
    assert d[y.op] == "GPU:0" and d[w.op] == "GPU:0" and d[w.initializer] == "GPU:0"
    assert d[x.op] == "CPU" and d[n.op] == "CPU" and d[y.graph.get_operation_by_name(n.op.inputs[0].op.inputs[0].op.name)] == "CPU"
    assert d[step.op] == "CPU" and d[inc.op] == "CPU"
    assert init.name and _assign(g, n_gpu=0) is None


def test_explicit_gpu_without_kernel_fails_naming_the_op_unless_soft():
    g = af.Graph()
    with g.as_default(), af.device("/gpu:0"):
        x = af.placeholder(af.float32, [2])
        y = af.exp(x, name="needs_kernel")
    with pytest.raises(af.errors.InvalidArgumentError, match="'needs_kernel'.*no supported kernel"):
        _assign(g, no_gpu_kernel={"Exp"})
    assert _assign(g, soft=True, no_gpu_kernel={"Exp"}) is None        # everything falls back to the CPU
    d = _assign(g)
    assert d[y.op] == "GPU:0" and d[x.op] == "CPU"                     # placeholders are fed on the host
    with pytest.raises(af.errors.InvalidArgumentError, match="has 0 GPU"):
        _assign(g, n_gpu=0)


def test_explicit_cpu_wins_and_colocated_ops_share_a_device():
    g = af.Graph()
    with g.as_default():
        with af.device("/cpu:0"):
            v = af.Variable(np.zeros(4, np.float32))
        upd = af.assign_add(v, af.ones([4]))
        z = af.exp(upd)
    d = _assign(g)
    assert d[v.op] == "CPU" and d[upd.op] == "CPU" and d[z.op] == "GPU:0"
