"""The discrete-event model against the real protocol in virtual time, at small scale.

The model (actorflow/sim/model.py `simulate_protocol`) sends the messages the real code sends
(`Protocol`); these tests check that it sends exactly those (counted in the simulated network), and
that its step times agree with the real code's run in the simulated world with the same virtual
costs. Everything compared is virtual time: nothing here depends on the host's speed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("greenlet")

from actorflow.sim.figures import compare_async, compare_sync, messages_per_step, real_run, sim_costs  # noqa: E402
from actorflow.sim.model import Protocol, Workload, simulate_protocol, sync_messages_per_step  # noqa: E402


def _kinds(per_step: dict) -> dict:
    out: dict = {}
    for k, v in per_step.items():
        roles, kind = k.split(" ")
        a, b = roles.split(">")
        out[(a, b, kind)] = out.get((a, b, kind), 0) + v
    return out


@pytest.mark.parametrize("ps", [1, 2])
def test_model_sends_the_real_protocols_messages(tmp_path, ps):
    costs = sim_costs(0.0)
    short, _ = real_run(4, ps, 8, costs, tmp=str(tmp_path))
    long, _ = real_run(4, ps, 40, costs, tmp=str(tmp_path))
    real = {k: round(v, 6) for k, v in _kinds(messages_per_step(long, short)).items()}
    assert real == Protocol.digits_mlp(ps).messages_per_step()


def test_model_step_is_six_hops_without_costs():
    # One worker, one PS, no CPU, bytes or jitter: a step is the client's time and six latencies
    # (call, value, gradient, token, the global step's token, reply).
    wl = Workload(compute_ms=0.0, log_sigma=0.0, client_ms=0.9, latency_ms=0.1, net_ms_per_mb=0.0, msg_cpu_ms=0.0)
    r = simulate_protocol(wl, Protocol.digits_mlp(1), workers=1, steps=20)
    assert np.allclose(r.step_ms, 0.9 + 6 * 0.1)
    slow = simulate_protocol(dataclasses.replace(wl, compute_ms=5.0), Protocol.digits_mlp(1), workers=1, steps=20)
    # The compute starts when the call reaches the worker, while the values travel; then four hops.
    assert np.allclose(slow.step_ms, 0.9 + 0.1 + 5.0 + 4 * 0.1)


@pytest.mark.parametrize("compute_s", [0.0, 0.010])
def test_model_agrees_with_real_code_async(tmp_path, compute_s):
    row = compare_async(4, 2, compute_s, steps_per_worker=20, tmp=str(tmp_path))
    assert row["model_ms"] == pytest.approx(row["real_ms"], rel=0.15)
    assert row["model_steps_per_s"] == pytest.approx(row["real_steps_per_s"], rel=0.2)


def test_sync_model_sends_the_real_protocols_messages(tmp_path):
    # 4 workers, one a backup, every one contributing to every step (no stragglers): per global step,
    # four worker steps and one run of the chief's sync loop. Heartbeats are per second, not per step.
    costs = sim_costs(0.05)
    short, _ = real_run(4, 2, 6, costs, "sync", 1, tmp=str(tmp_path))
    long, _ = real_run(4, 2, 20, costs, "sync", 1, tmp=str(tmp_path))
    real = {k: round(v, 6) for k, v in _kinds(messages_per_step(long, short)).items() if "ping" not in k[2]}
    assert real == sync_messages_per_step(Protocol.digits_mlp(2), 4)


def test_model_agrees_with_real_code_sync(tmp_path):
    row = compare_sync(4, 2, 1, 0.05, steps=12, tmp=str(tmp_path))
    assert row["model_step_ms"] == pytest.approx(row["real_step_ms"], rel=0.1)
    assert row["model_dropped"] == pytest.approx(row["real_dropped"], abs=3)


def test_model_what_if_group_on_the_global_steps_ps(tmp_path, monkeypatch):
    # The model's what-if (Protocol.finish="gs_ps") is the protocol the real code sends once the
    # optimizer's group of updates is colocated with the global step.
    import actorflow as af
    from actorflow.graph.ops.constant import group
    from actorflow.train import optimizer

    def finish(self, update_ops, name_scope):
        g = af.get_default_graph()
        with g.device(None), g.colocate_with(af.train.get_global_step().op):
            return group(*update_ops, name=name_scope)
    monkeypatch.setattr(optimizer.Optimizer, "_finish", finish)
    costs = sim_costs(0.0)
    short, _ = real_run(4, 2, 8, costs, tmp=str(tmp_path))
    long, _ = real_run(4, 2, 40, costs, tmp=str(tmp_path))
    real = {k: round(v, 6) for k, v in _kinds(messages_per_step(long, short)).items()}
    assert real == dataclasses.replace(Protocol.digits_mlp(2), finish="gs_ps").messages_per_step()
