"""Unit tests of actors and the dispatcher's activation API, without a graph or a session: actors
built by hand on a Runtime attached to a loop the test drives, with a SyncPool (no threads), so an
offloaded kernel runs deterministically in the loop's thread."""
import numpy as np
import pytest

from actorflow import errors
from actorflow.actors.control_flow import FrameState, MergeActor
from actorflow.actors.dispatcher import Runtime, SyncPool, new_loop
from actorflow.actors.node import DEAD, FetchSink, NodeActor, ResourceUpdateActor, SingleInputActor
from actorflow.actors.resource import VariableResource
from actorflow.actors.step import StepState


class _Fetch:
    def __init__(self, i):
        self.name = f"fetch{i}:0"
        self.op = self


class _Plan:
    def __init__(self, n):
        self.fetches = [_Fetch(i) for i in range(n)]


class _Exe:
    """The part of an Executable a StepState uses."""

    def __init__(self, actors, n_sinks, dead_possible=False):
        self.actors = actors
        self.n_sinks = n_sinks
        self.dead_possible = dead_possible
        self.plan = _Plan(n_sinks)

    def drop(self, step):
        for a in self.actors:
            a.drop(step)


@pytest.fixture
def rt():
    loop = new_loop()
    pool = SyncPool()
    rt = Runtime(loop, pool=pool)
    yield rt
    rt.close()
    loop.close()


def _tpl(n_in):
    return [None] * n_in + [n_in]


def _run(rt, exe, activations, n_results):
    """Starts a step on the loop with `activations` [(actor, args)], runs the loop until the step
    ends, and returns (step, results, error)."""
    fut = rt.loop.create_future()
    step = StepState(exe, rt.next_step_id(), n_results,
                     lambda res, err: fut.done() or fut.set_result((res, err)))
    rt.loop.call_soon(rt.start, step, activations)
    res, err = rt.loop.run_until_complete(fut)
    return step, res, err


def _chain(rt, fn_b, offload=False):
    """x -> a (x + 1) -> b (fn_b) -> sink 0."""
    a = SingleInputActor(rt, "a", "AddOne", lambda x: x + 1, 1, _tpl(1))
    b = NodeActor(rt, "b", "B", fn_b, 1, _tpl(1), offload=offload)
    sink = FetchSink(0)
    a.outs = (((b, 0),),)
    b.outs = (((sink, 0),),)
    return a, b, _Exe([a, b], 1)


def test_a_chain_runs_through_the_ready_queue_and_leaves_nothing_outstanding(rt):
    a, b, exe = _chain(rt, lambda x: x * 10)
    step, res, err = _run(rt, exe, [(a, [np.float32(2)])], 1)
    assert err is None and res == [30]
    assert step.outstanding == 0 and not rt.ready and not rt.scheduled
    assert rt.pool.submitted == 0


def test_an_offloaded_kernel_runs_on_the_pool_and_delivers_through_the_loop(rt):
    a, b, exe = _chain(rt, lambda x: x * 10, offload=True)
    step, res, err = _run(rt, exe, [(a, [np.float32(2)])], 1)
    assert err is None and res == [30]
    assert rt.pool.submitted == 1
    assert step.outstanding == 0


def test_a_failing_offloaded_kernel_fails_its_step_naming_the_op(rt):
    def boom(x):
        raise ValueError("bad value")
    a, b, exe = _chain(rt, boom, offload=True)
    step, res, err = _run(rt, exe, [(a, [np.float32(2)])], 1)
    assert res is None and isinstance(err, errors.InvalidArgumentError)
    assert "bad value" in str(err) and "[[node b (B)" in str(err)
    assert step.outstanding == 0


def test_merge_fires_once_on_its_first_live_input_and_dead_when_all_are_dead(rt):
    m = MergeActor(rt, "m", "Merge", None, 2, _tpl(2), n_out=2)
    sinks = FetchSink(0), FetchSink(1)
    m.outs = (((sinks[0], 0),), ((sinks[1], 0),))

    class _Feeder(NodeActor):
        __slots__ = ()

        def fire(self, tag, args):
            for slot, v in enumerate(args):
                m.deliver(tag, slot, v)

    f = _Feeder(rt, "f", "F", None, 2, _tpl(2))
    exe = _Exe([m], 2, dead_possible=True)
    _, res, err = _run(rt, exe, [(f, [DEAD, np.float32(7)])], 2)
    assert err is None and res[0] == 7 and res[1] == 1
    _, res, err = _run(rt, exe, [(f, [DEAD, DEAD])], 2)
    # A dead fetch fails the step (the fetched tensor is on an untaken branch).
    assert res is None and "untaken branch" in str(err)
    assert not m.pending


class _Frame:
    """Records `quiet` calls, as a loop frame would get them."""

    def __init__(self):
        self.quiet_tags = []

    def quiet(self, tag):
        self.quiet_tags.append(tag)


class _Tag:
    def __init__(self, frame):
        self.frame = frame
        self.outstanding = 0


def test_end_async_tells_the_frame_only_when_nothing_is_left_outstanding(rt):
    frame = _Frame()
    tag = _Tag(frame)
    rt.begin_async(tag)
    rt.begin_async(tag)
    rt.end_async(tag)
    assert tag.outstanding == 1 and frame.quiet_tags == []
    rt.end_async(tag)
    assert tag.outstanding == 0 and frame.quiet_tags == [tag]
    root = _Tag(None)                 # a step's root tag has no frame: nothing to tell
    rt.begin_async(root)
    rt.end_async(root)
    assert root.outstanding == 0


def test_a_loop_frame_keeps_its_parent_open_until_it_finishes(rt):
    parent_frame = _Frame()
    parent = _Tag(parent_frame)
    exe = _Exe([], 1)
    step = StepState(exe, 1, 1, lambda res, err: None)
    step.frames = {}
    frame = FrameState(rt, step, "loop", parent, (parent, "loop"), 10, 1)
    step.frames[frame.key] = frame
    assert parent.outstanding == 1
    frame.enter_arrived()             # iteration 0 has nothing outstanding: the loop is done
    assert frame.done and parent.outstanding == 0 and parent_frame.quiet_tags == [parent]
    assert step.frames == {}


def test_an_activation_parked_behind_an_offloaded_update_runs_after_it(rt):
    res = VariableResource("v", np.dtype(np.float32), (2,))
    res.store(np.zeros(2, np.float32))
    order = []

    def add(ref, delta):
        order.append("update")
        ref += delta
        return ref

    upd = ResourceUpdateActor(rt, "upd", "AssignAdd", add, 2, _tpl(2), ((0, res),))
    upd.offload = True
    sink_u, sink_r = FetchSink(0), FetchSink(1)
    upd.outs = (((sink_u, 0),),)

    class _Reader(NodeActor):
        __slots__ = ()

        def fire(self, tag, args):
            if res.busy is not None:
                order.append("parked")
                res.park(self, tag, args)
                return
            order.append("read")
            self.emit(tag, res.value.copy())

    reader = _Reader(rt, "r", "Read", None, 0, _tpl(0))
    reader.outs = (((sink_r, 0),),)
    # The pump submits offloaded kernels when it pauses: the reader, queued behind the update,
    # finds the variable busy and parks; the update then runs (SyncPool: at submit), and its
    # `release`, through the loop, queues the reader again.
    step, out, err = _run(rt, _Exe([upd, reader], 2),
                          [(upd, [None, np.ones(2, np.float32)]), (reader, [])], 2)
    assert err is None
    assert order == ["parked", "update", "read"]
    assert rt.pool.submitted == 1
    np.testing.assert_array_equal(out[1], [1, 1])
    assert step.outstanding == 0 and res.busy is None


def test_a_finished_step_frees_its_values_without_the_cyclic_collector():
    # A step's StepState is its own root tag (a reference cycle the collector frees later); what it
    # hands on must not wait for that collection: the fetched array goes as soon as the caller drops it.
    import gc
    import weakref

    import actorflow as af
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 4], name="x")
        y = af.multiply(x, 2.0, name="y")
        with af.Session(graph=g) as sess:
            feed = {x: np.ones((3, 4), np.float32)}
            opts = af.RunOptions(trace_level=af.RunOptions.SOFTWARE_TRACE)   # a traced step runs on the actors
            sess.run(y, feed, options=opts, run_metadata=af.RunMetadata())
            gc.collect()
            gc.disable()
            try:
                out = sess.run(y, feed, options=opts, run_metadata=af.RunMetadata())
                np.testing.assert_array_equal(out, 2 * np.ones((3, 4)))
                ref = weakref.ref(out)
                del out
                assert ref() is None, gc.get_referrers(ref())
            finally:
                gc.enable()


def test_the_offload_policy_compares_estimated_time_whatever_the_costs_unit():
    # MatMul counts multiply-adds, AddV2 elements: each is converted to one core's nanoseconds by
    # its kernel's unit_ns before it is compared with the pool's hand-off (OFFLOAD_NS).
    from actorflow.actors.node import OFFLOAD_NS
    from actorflow.actors.pool import offload_policy
    from actorflow.graph.tensor_shape import TensorShape
    from actorflow.kernels.registry import get_kernel

    def policy(op, *shapes):
        return offload_policy([TensorShape(s) for s in shapes], [None] * len(shapes), get_kernel(op, "CPU"))

    matmul = get_kernel("MatMul", "CPU")
    # 128x256x64: 2.1M multiply-adds, about 50 us: not worth a hand-off (it was, compared in
    # multiply-adds with a threshold meant in nanoseconds).
    assert 128 * 256 * 64 * matmul.unit_ns < OFFLOAD_NS
    assert policy("MatMul", [128, 256], [256, 64])[0] is False
    assert policy("MatMul", [256, 1024], [1024, 1024])[0] is True
    add = get_kernel("AddV2", "CPU")
    small, big = 1024, int(4 * OFFLOAD_NS / add.unit_ns)
    assert policy("AddV2", [small], [small])[0] is False
    assert policy("AddV2", [big], [big])[0] is True
    # Shapes known only at run time: the cost function and its limit, in the cost's units.
    offload, cost, limit = policy("MatMul", [None, 1024], [1024, 1024])
    assert offload is False and cost is matmul.cost and limit == OFFLOAD_NS / matmul.unit_ns
