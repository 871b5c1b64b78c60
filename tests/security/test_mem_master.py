"""Issue 15, finding 4: a session on a cluster must never hang; every wait of a step ends at its deadline.

The master and the client wait in five places: the client thread waiting for the master on the
runtime loop (`Session.run` and `Session.arun`), the connection to a task, `register_graph` (when a
graph is first run, and again after a task lost its graphs), and `run_graph`. Each test below
stalls exactly one of them with a fake task that speaks the wire protocol but never answers the
method under test (or a TCP listener that never completes the websocket handshake), and checks that
the step fails with DeadlineExceededError naming what it waited for.
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np
import pytest
from aiohttp import web

import actorflow as af
from actorflow import errors
from actorflow.actors.dispatcher import default_runtime
from actorflow.cluster.local import free_port
from actorflow.transport.channel import Connection

pytestmark = pytest.mark.timeout(60)

TIMEOUT = af.RunOptions(timeout_in_ms=300)


class FakeTask:
    """A task of a one- or two-task cluster, on its own thread and loop, that answers the master's
    RPCs except those in `swallow`, which it receives and never answers."""

    def __init__(self, other_tasks=()):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.cluster = {"worker": [self.address, *other_tasks]}
        self.swallow: set[str] = set()
        self.lost_graphs = False          # answer run_graph as a task that restarted would
        self.calls: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    def _handle(self, conn, header, tensors):
        method = header.get("m")
        self.calls.append(method)
        if method in self.swallow:
            return
        if method == "cluster":
            conn.reply(header, {"cluster": self.cluster, "job": "worker", "task": 0})
        elif method == "ping":
            conn.reply(header, {"task": "/job:worker/task:0", "pid": 1})
        elif method == "register_graph":
            conn.reply(header, {"handle": 1, "pid": 1})
        elif method == "run_graph":
            if self.lost_graphs:
                conn.reply(header, error=errors.NotFoundError(
                    None, None, "/job:worker/task:0: graph handle 1 is not registered (the task may have restarted)"))
            else:
                conn.reply(header, None, [])
        else:
            conn.reply(header, None)

    def _run(self):
        asyncio.set_event_loop(self._loop)

        async def ws_handler(request):
            ws = web.WebSocketResponse(max_msg_size=8 << 20)
            await ws.prepare(request)
            await Connection(ws, self._handle, "fake").serve()
            return ws

        async def main():
            app = web.Application()
            app.router.add_get("/ws", ws_handler)
            self._runner = web.AppRunner(app, handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()
            await self._runner.cleanup()
        self._loop.run_until_complete(main())

    @property
    def target(self) -> str:
        return f"af://{self.address}?token=t"

    def close(self):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@pytest.fixture
def fake():
    f = FakeTask()
    yield f
    f.close()


def _remote_op():
    with af.device("/job:worker/task:0"):
        return af.no_op(name="remote_work")


def test_a_step_with_only_fed_and_constant_fetches_completes(fake, graph):
    """Old behaviour: fetching only a fed placeholder and a constant from a cluster session ran no
    partition, and the master then waited on a future that nothing completed: `sess.run` hung
    forever, and RunOptions(timeout_in_ms=500) did not end it. Now such a step completes in the
    client without asking any task to run anything."""
    x = af.placeholder(af.float32, [2], name="x")
    k = af.constant([3.0, 4.0])
    with af.Session(fake.target) as sess:
        before = list(fake.calls)
        for opts in (None, TIMEOUT):
            got = sess.run({"x": x, "k": k}, {x: np.array([1, 2], np.float32)}, options=opts)
            np.testing.assert_array_equal(got["x"], [1, 2])
            np.testing.assert_array_equal(got["k"], [3, 4])
        assert "run_graph" not in fake.calls[len(before):]
        assert "register_graph" not in fake.calls[len(before):]


async def test_arun_with_only_local_fetches_completes(fake, graph):
    """Old behaviour: the same hang through `await sess.arun(...)`. Now it completes."""
    x = af.placeholder(af.float32, [], name="x")
    with af.Session(fake.target) as sess:
        assert await sess.arun(x, {x: 5.0}, options=TIMEOUT) == 5.0


def test_run_graph_wait_ends_at_the_deadline(fake, graph):
    """Old behaviour: a task that received run_graph and never answered kept the master waiting
    for timeout + 5 s, and for ever without a timeout configured on the task side. Now the wait
    ends at the step's deadline, naming the task whose partition did not finish."""
    op = _remote_op()
    with af.Session(fake.target) as sess:
        sess.run(op)                                      # registers the graph
        fake.swallow = {"run_graph"}
        with pytest.raises(errors.DeadlineExceededError, match=r"run_graph on /job:worker/task:0"):
            sess.run(op, options=TIMEOUT)
        fake.swallow = set()
        sess.run(op)                                      # the session still works


def test_register_graph_wait_ends_at_the_deadline(fake, graph):
    """Old behaviour: registering a partition waited 60 s for a task that never answered,
    whatever the step's timeout. Now the first run of a graph fails at the step's deadline,
    naming register_graph and the task."""
    op = _remote_op()
    fake.swallow = {"register_graph"}
    with af.Session(fake.target) as sess:
        with pytest.raises(errors.DeadlineExceededError, match=r"register_graph on /job:worker/task:0"):
            sess.run(op, options=TIMEOUT)


def test_reregistration_wait_ends_at_the_deadline(fake, graph):
    """Old behaviour: after a task lost its graphs (a restart), the next step registered them
    again with a 60 s wait, ignoring the step's timeout. Now that wait ends at the deadline too."""
    op = _remote_op()
    with af.Session(fake.target) as sess:
        sess.run(op)
        fake.lost_graphs = True
        with pytest.raises(errors.AbortedError, match="lost its graphs"):
            sess.run(op, options=TIMEOUT)
        fake.lost_graphs = False
        fake.swallow = {"register_graph"}
        with pytest.raises(errors.DeadlineExceededError, match=r"register_graph on /job:worker/task:0"):
            sess.run(op, options=TIMEOUT)


def test_connection_wait_ends_at_the_deadline(graph):
    """Old behaviour: a task whose port accepted TCP but never answered the websocket handshake
    kept the master connecting for ever (no handshake timeout). Now the step fails at its
    deadline naming the connection it waited for."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)                  # the kernel completes the TCP handshake; nobody answers HTTP
        fake = FakeTask(other_tasks=[f"127.0.0.1:{silent.getsockname()[1]}"])
        try:
            with af.device("/job:worker/task:1"):
                op = af.no_op(name="on_the_silent_task")
            with af.Session(fake.target) as sess:
                with pytest.raises(errors.DeadlineExceededError, match=r"connection to /job:worker/task:1"):
                    sess.run(op, options=TIMEOUT)
        finally:
            fake.close()


def _block_runtime_loop(seconds: float) -> threading.Event:
    """Keeps the actorflow runtime loop busy (as a stuck kernel would) for `seconds`."""
    released = threading.Event()

    def block():
        time.sleep(seconds)
        released.set()
    default_runtime().loop.call_soon_threadsafe(block)
    return released


def test_client_wait_for_a_stuck_runtime_loop_ends(fake, graph):
    """Old behaviour: `Session.run` on a cluster waited for the master's future with no limit, so
    a runtime loop that never ran the step kept the client blocked for ever. Now the client gives
    up shortly after the step's deadline with DeadlineExceededError naming the master."""
    op = _remote_op()
    with af.Session(fake.target) as sess:
        sess.run(op)
        released = _block_runtime_loop(4.0)
        with pytest.raises(errors.DeadlineExceededError, match="waiting for the master to run the step"):
            sess.run(op, options=TIMEOUT)
        assert not released.is_set(), "the client waited for the loop instead of the deadline"
        assert released.wait(10)
        sess.run(op)


async def test_arun_wait_for_a_stuck_runtime_loop_ends(fake, graph):
    """Old behaviour: `await sess.arun(...)` waited on the wrapped future with no limit. Now it
    gives up after the step's deadline too."""
    op = _remote_op()
    with af.Session(fake.target) as sess:
        await sess.arun(op)
        released = _block_runtime_loop(4.0)
        with pytest.raises(errors.DeadlineExceededError, match="waiting for the master to run the step"):
            await sess.arun(op, options=TIMEOUT)
        assert not released.is_set()
        await asyncio.to_thread(released.wait, 10)
        await sess.arun(op)
