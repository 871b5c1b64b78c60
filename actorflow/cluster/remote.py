"""The session backend for a cluster target (`af.Session("grpc://host:port")`): the master plans,
registers and runs the session's graphs on the cluster's tasks; variables live on the parameter
servers and are shared by every client. Installed into the session layer (actors/session.py) when
actorflow.cluster is imported."""
from __future__ import annotations

from actorflow.actors import session as _session
from actorflow.actors.tracing import step_stats_from_dict
from actorflow.cluster.master import connect_master

__all__ = ["RemoteBackend"]


class RemoteBackend:
    """A Session's backend that runs its steps on a cluster through the master (see
    actors/session.py's LocalBackend for the interface)."""

    def __init__(self, target: str, graph, config):
        self.master = connect_master(target, graph, config)

    def build(self, plan, timeout=None):
        return self.master.build(plan, timeout)

    def run(self, exe, feed_values, timeout, trace=None):
        return self.master.run(exe, feed_values, timeout, trace)

    async def arun(self, exe, feed_values, timeout, trace=None):
        return await self.master.arun(exe, feed_values, timeout, trace)

    @staticmethod
    def tracer(exe, level):
        """(trace level, {}): the master fills the dict with each task's stats."""
        return (level, {})

    @staticmethod
    def fill_metadata(tracer, run_metadata) -> None:
        """One StepStats of every task's stats, each put on this process's clock."""
        stats = None
        for task, got in sorted(tracer[1].items()):
            stats = step_stats_from_dict(got["stats"], stats)
            run_metadata.clock_offsets[task] = {"offset_us": got["offset_us"],
                                                "round_trip_us": got["round_trip_us"]}
        run_metadata.step_stats = stats if stats is not None else step_stats_from_dict({"devices": {}})

    def close(self) -> None:
        self.master.close()


_session.set_remote_backend(RemoteBackend)
