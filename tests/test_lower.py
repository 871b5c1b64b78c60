"""The compiler (actorflow/scheduler/lower.py): the pass pipeline, passes plugged in by name and
turned off by RewriterConfig, the plan dumps (AF_DUMP_PASSES), device copies as plan nodes, and the
op metadata every layer reads from OpDef."""
import dataclasses
import importlib
import inspect
import os
import pkgutil
import shutil

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.op_def import ACTOR_KINDS, registered_op_defs
from actorflow.kernels.registry import KernelDef, has_kernel, register_kernel, registered_ops
from actorflow.scheduler import lower as lower_mod
from actorflow.scheduler.ir import ExecPlan, Feed, Literal, Node, NodeItem, Ref
from actorflow.scheduler.lower import LowerOptions, from_plan, lower, register_pass, run_passes
from actorflow.scheduler.partition import insert_copies
from actorflow.scheduler.plan import make_plan


def _all_op_defs():
    import actorflow.graph.ops as ops_pkg
    for m in pkgutil.iter_modules(ops_pkg.__path__):
        importlib.import_module(f"actorflow.graph.ops.{m.name}")
    return registered_op_defs()


# -- op metadata ---------------------------------------------------------------------------------------

def test_every_op_def_runs_on_the_cpu_and_every_kernel_has_an_op_def():
    from actorflow.actors.executable import _ACTOR_RULES
    from actorflow.actors.resource import resource_factory
    defs = _all_op_defs()
    problems = []
    for t, d in sorted(defs.items()):
        if d.actor not in ACTOR_KINDS or d.actor not in _ACTOR_RULES and d.actor != "handle":
            problems.append(f"{t}: no actor rule for {d.actor!r}")
        if d.actor == "node" and not has_kernel(t, "CPU"):
            problems.append(f"{t}: a kernel op without a CPU kernel")
        if d.actor == "handle":
            resource_factory(t)                   # raises when no resource is made by this op type
            if d.resource is None:
                problems.append(f"{t}: a handle op that creates no resource")
        if d.actor == "resource" and d.ref_inputs[:1] != (0,):
            # Other resources it uses (a read's filename queue) may follow: they reach it bound.
            problems.append(f"{t}: a resource operation must refer to its resource by input 0")
        if (d.ref_inputs or d.resource) and not d.stateful:
            problems.append(f"{t}: refers to or creates a resource but is not stateful")
        if d.internal != t.startswith("_"):
            problems.append(f"{t}: internal ops (made by the compiler) and only they have names starting with _")
        if d.control_flow is not None and d.actor not in (d.control_flow, "identity"):
            problems.append(f"{t}: control-flow role {d.control_flow} but actor {d.actor}")
    for t in registered_ops("CPU"):
        if t not in defs:
            problems.append(f"CPU kernel {t} has no OpDef")
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        for t in registered_ops("GPU"):
            if t not in defs:
                problems.append(f"GPU kernel {t} has no OpDef")
    assert not problems, "\n".join(problems)


def test_the_runtime_tests_no_op_types():
    import actorflow.actors.executable as executable
    src = inspect.getsource(executable)
    for needle in (".type ==", ".type in", "op_type ==", "op_type in", '"Const"', '"Enter"', '"Switch"'):
        assert needle not in src, needle


def test_control_flow_roles_replace_the_type_sets():
    defs = _all_op_defs()
    roles = {t: d.control_flow for t, d in defs.items() if d.control_flow}
    assert roles == {"Switch": "switch", "Merge": "merge", "Enter": "enter", "Exit": "exit",
                     "NextIteration": "next_iteration", "LoopCond": "loop_cond"}
    assert defs["Placeholder"].placement == "host" and defs["Identity"].placement == "pass_through"
    assert defs["RandomUniform"].stateful and not defs["AddV2"].stateful


# -- the pipeline --------------------------------------------------------------------------------------

def _mlp_graph():
    x = af.placeholder(af.float32, [None, 4], name="x")
    w = af.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, name="w")
    b = af.constant(np.ones(3, np.float32), name="b")
    y = af.nn.relu(af.nn.bias_add(af.matmul(x, w), b), name="y")
    return x, y


def test_lower_emits_frozen_items_with_fusion_as_a_rewritten_plan():
    with af.Graph().as_default() as g:
        x, y = _mlp_graph()
        ep = lower(make_plan(g, [x], [y], []), options=LowerOptions(n_gpu=0))
    assert isinstance(ep, ExecPlan) and all(isinstance(it, NodeItem) for it in ep.items)
    (item,) = ep.items                       # the constants are folded, the chain fused into one node
    assert item.op_type == "_FusedMatMul" and item.name == "y"
    assert [p for p, _ in item.parts] == ["MatMul", "BiasAdd", "y"]
    assert item.template[1] is not None and item.template[2] is not None and item.template[0] is None
    assert ep.feed_targets == (((0, 0),),) and item.fetch_outs == ((0, 0),)
    with pytest.raises(AttributeError):
        item.name = "z"
    off = lower(make_plan(g, [x], [y], []), options=LowerOptions(n_gpu=0, rewrites=(("remapping", False),)))
    assert [it.op_type for it in off.items] == ["MatMul", "BiasAdd", "Relu"]


def _add_mul_pass(ir, options):
    """Replaces Mul(AddV2(a, b), c), the AddV2 used once, with one _TestAddMul node (as the JIT
    replaces a cluster with one node)."""
    by = ir.by_name()
    uses = ir.consumers()
    fused = {}
    for n in ir.nodes:
        x = n.inputs[0] if n.type == "Mul" else None
        if type(x) is Ref and by[x.node].type == "AddV2" and len(uses[x.node]) == 1 and not by[x.node].control:
            add = by[x.node]
            fused[add.name] = None
            fused[n.name] = Node(n.name, "_TestAddMul", {}, add.inputs + (n.inputs[1],), n.outputs, n.control,
                                 n.device, n.task, None, ((add.name, add.type), (n.name, n.type)))
    if not fused:
        return ir
    return ir.replace(nodes=tuple(fused.get(n.name, n) for n in ir.nodes if fused.get(n.name, n) is not None))


_CALLS = []


@pytest.fixture
def add_mul_pass():
    if "_TestAddMul" not in registered_op_defs():
        af.graph.op_def.define_op("_TestAddMul", lambda i, a: [(i[0].dtype, i[0].shape)], internal=True)

        @register_kernel("_TestAddMul", "CPU")
        def _k(attrs):
            def fn(a, b, c):
                _CALLS.append(1)
                return (a + b) * c
            return fn
    register_pass("test_add_mul", _add_mul_pass, after="fold_constants", switch="test_add_mul")
    _CALLS.clear()
    yield
    lower_mod.unregister_pass("test_add_mul")


def _rewrite(**switches):
    return af.ConfigProto(graph_options=af.GraphOptions(rewrite_options=af.RewriterConfig(**switches)))


def test_a_pass_plugs_in_by_name_replaces_nodes_and_a_rewriter_switch_turns_it_off(add_mul_pass):
    names = [p.name for p in lower_mod.pipeline()]
    assert names.index("test_add_mul") == names.index("fold_constants") + 1
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [3])
        out = (a + 2.0) * a
        av = np.array([1, 2, 3], np.float32)
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(out, {a: av}), (av + 2) * av)
        assert len(_CALLS) == 1
        with af.Session(config=_rewrite(test_add_mul=af.RewriterConfig.OFF)) as sess:
            np.testing.assert_array_equal(sess.run(out, {a: av}), (av + 2) * av)
        assert len(_CALLS) == 1


def test_a_pass_off_by_default_runs_when_its_switch_is_on(add_mul_pass):
    register_pass("test_add_mul", _add_mul_pass, after="fold_constants", switch="test_add_mul", default_on=False)
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [3])
        out = (a + 1.0) * 2.0
        with af.Session() as sess:
            sess.run(out, {a: np.zeros(3, np.float32)})
        assert not _CALLS
        with af.Session(config=_rewrite(test_add_mul=af.RewriterConfig.ON)) as sess:
            np.testing.assert_array_equal(sess.run(out, {a: np.zeros(3, np.float32)}), [2, 2, 2])
        assert len(_CALLS) == 1


def test_register_pass_names_a_missing_anchor():
    with pytest.raises(ValueError, match="no pass named 'nope'"):
        register_pass("x", _add_mul_pass, after="nope")


# -- AF_DUMP_PASSES ------------------------------------------------------------------------------------

def _dumped(root):
    (d,) = os.listdir(root)
    return os.path.join(root, d), sorted(os.listdir(os.path.join(root, d)))


@pytest.mark.parametrize("how", ["env", "config"])
def test_dump_passes_writes_text_and_pictures_after_each_pass(tmp_path, monkeypatch, how):
    config = None
    if how == "env":
        monkeypatch.setenv("AF_DUMP_PASSES", str(tmp_path))
    else:
        monkeypatch.delenv("AF_DUMP_PASSES", raising=False)
        config = af.ConfigProto(experimental=af.ConfigProto.Experimental(dump_passes_dir=str(tmp_path)))
    with af.Graph().as_default():
        x, y = _mlp_graph()
        with af.Session(config=config) as sess:
            sess.run(y, {x: np.ones((2, 4), np.float32)})
    d, files = _dumped(tmp_path)
    texts = [f for f in files if f.endswith(".txt")]
    assert texts == ["00_prune.txt", "01_constant_folding.txt", "02_arithmetic_optimization.txt",
                     "03_dependency_optimization.txt", "04_jit.txt", "05_model_pruning.txt", "06_place_devices.txt",
                     "07_fold_constants.txt", "08_partition.txt", "09_fuse.txt",
                     "10_serialize_read_modify_writes.txt"]
    pic = ".svg" if shutil.which("dot") else ".dot"
    assert [f for f in files if f.endswith(pic)] == [t[:-4] + pic for t in texts]
    prune, folded, fused = (open(os.path.join(d, f)).read() for f in ("00_prune.txt", "07_fold_constants.txt",
                                                                     "09_fuse.txt"))
    assert "w = Const()" in prune and "w = Const" not in folded and "MatMul(feed[x:0], const[4, 3])" in folded
    assert "y = _FusedMatMul(feed[x:0], const[" in fused and "BiasAdd" not in fused.split("parts=")[0]
    if pic == ".svg":
        assert open(os.path.join(d, "09_fuse.svg")).read().lstrip().startswith("<?xml")


def test_the_graph_optimizer_and_the_jit_are_passes_of_the_one_pipeline(tmp_path, monkeypatch):
    """Grappler's passes and the JIT run in lower's pipeline, each switched by its TF name and shown
    in the dumps: `x * 1` goes in arithmetic_optimization, the rest becomes one _JitCluster in jit."""
    monkeypatch.setenv("AF_DUMP_PASSES", str(tmp_path))
    monkeypatch.delenv("AF_JIT", raising=False)
    names = [p.name for p in lower_mod.pipeline()]
    assert names[:6] == ["constant_folding", "arithmetic_optimization", "dependency_optimization", "jit",
                         "model_pruning", "place_devices"]
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3], name="x")
        y = af.exp(af.multiply(x, 1.0, name="one") + 2.0, name="e") * 3.0 - 1.0     # 4 ops after x * 1 goes
        oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1)
        cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo))
        with af.Session(config=cfg) as sess:
            got = sess.run(y, {x: np.array([0, 1, 2], np.float32)})
    np.testing.assert_allclose(got, np.exp(np.array([0, 1, 2], np.float32) + 2) * 3 - 1, rtol=1e-6)
    d, _ = _dumped(tmp_path)
    read = lambda f: open(os.path.join(d, f)).read()  # noqa: E731
    assert "one = Mul(" in read("01_constant_folding.txt")
    assert "one = Mul(" not in read("02_arithmetic_optimization.txt")
    assert "_JitCluster" not in read("03_dependency_optimization.txt") and "_JitCluster" in read("04_jit.txt")
    # RewriterConfig's OFF of a graph pass leaves it out of the pipeline run (and of the dumps).
    off = LowerOptions.from_config(af.ConfigProto(graph_options=af.GraphOptions(
        rewrite_options=af.RewriterConfig(arithmetic_optimization=af.RewriterConfig.OFF),
        optimizer_options=af.OptimizerOptions(global_jit_level=af.OptimizerOptions.OFF))))
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [3], name="x")
        y = af.exp(af.multiply(x, 1.0, name="one"), name="e") + 1.0
        ep = lower(make_plan(g, [x], [y], []), options=dataclasses.replace(off, n_gpu=0, dump_dir=None))
    assert sorted(it.op_type for it in ep.items) == ["AddV2", "Exp", "Mul"]
    pruning = LowerOptions.from_config(af.ConfigProto(graph_options=af.GraphOptions(
        rewrite_options=af.RewriterConfig(disable_model_pruning=True),
        optimizer_options=af.OptimizerOptions(do_constant_folding=False))))
    assert not pruning.enabled(next(p for p in lower_mod.pipeline() if p.name == "model_pruning"))
    assert not pruning.enabled(next(p for p in lower_mod.pipeline() if p.name == "constant_folding"))


# -- device copies are plan nodes ----------------------------------------------------------------------

def test_partition_puts_a_copy_node_on_every_edge_between_devices(monkeypatch):
    """With a (pretend) GPU: one copy per value and device, a constant read on the GPU marked for it."""
    fake = KernelDef("X", "GPU", lambda a: None)
    from actorflow.scheduler import ir as ir_mod
    real_has, real_get = ir_mod.has_kernel, ir_mod.get_kernel
    monkeypatch.setattr(ir_mod, "has_kernel", lambda t, d="CPU": True if d == "GPU" else real_has(t, d))
    monkeypatch.setattr(ir_mod, "get_kernel", lambda t, d="CPU": fake if d == "GPU" else real_get(t, d))
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [2, 2], name="x")
        m = af.matmul(x, af.constant(np.eye(2, dtype=np.float32)), name="m")
        n = af.matmul(x, m, name="n")
        s = af.reduce_sum(m, name="s")
        ir = run_passes(from_plan(make_plan(g, [x], [n, s], [])), LowerOptions(n_gpu=0),
                        [p for p in lower_mod.pipeline() if p.name == "fold_constants"])
    on_gpu = {"m", "n"}
    ir = ir.replace(nodes=tuple(nd.replace(device="GPU:0") if nd.name in on_gpu else nd for nd in ir.nodes))
    out = insert_copies(ir, LowerOptions())
    by = out.by_name()
    h2d, d2h = by["x:0/_copy_to_GPU:0"], by["m:0/_copy_to_CPU"]
    assert h2d.type == "_HostToDevice" and h2d.inputs == (Feed(0),) and h2d.device == "GPU:0"
    assert d2h.type == "_DeviceToHost" and d2h.inputs == (Ref("m"),) and d2h.device == "GPU:0"
    assert by["m"].inputs[0] == Ref(h2d.name) and by["n"].inputs == (Ref(h2d.name), Ref("m"))
    assert type(by["m"].inputs[1]) is Literal and by["m"].inputs[1].device == "GPU:0"
    assert by["s"].inputs[0] == Ref(d2h.name)
    assert sum(nd.type == "_HostToDevice" for nd in out.nodes) == 1      # one copy of x for both readers
    assert not any("_copy_to_" in nd.name for nd in ir.nodes)             # the pass left its input alone


# -- the master's half: tasks ---------------------------------------------------------------------------

def test_lower_for_cluster_cuts_between_tasks_and_answers_fed_and_constant_fetches(tmp_path):
    from actorflow.graph.device_spec import DeviceSpec
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [2], name="x")
        with af.device("/job:ps/task:0"):
            v = af.Variable(np.ones(2, np.float32), name="v")
        with af.device("/job:worker/task:0"):
            y = af.multiply(x, v, name="y")
        c = af.constant(3.0, name="c")
        plan = make_plan(g, [x], [y, x, c], [])
        parts, local = lower_mod.lower_for_cluster(plan, DeviceSpec(job="worker", task=0),
                                                   {("worker", 0), ("ps", 0)},
                                                   LowerOptions(dump_dir=str(tmp_path)))
    assert sorted(parts) == ["/job:ps/task:0", "/job:worker/task:0"]
    ps, worker = parts["/job:ps/task:0"], parts["/job:worker/task:0"]
    assert [op.type for op in ps.graph.get_operations()].count("_Send") == 1
    assert [op.type for op in worker.graph.get_operations()].count("_Recv") == 1
    assert worker.fetches == [(0, "y:0")] and worker.feeds == [(0, "_feed/x/0:0")]
    assert local[0] == (1, ("feed", 0)) and local[1][0] == 2 and local[1][1][0] == "const"
    d, files = _dumped(tmp_path)
    placed = open(os.path.join(d, "01_place_tasks.txt")).read()
    assert "v = VariableV2() @/job:ps/task:0" in placed and "y = Mul(feed[x:0], v/read) @/job:worker/task:0" in placed, placed


def _drop_identities(ir, options):
    """Reroutes every Identity's consumers to its input (an issue-18-style pass, through substitute)."""
    ids = {n.name: n for n in ir.nodes if n.type == "Identity" and type(n.inputs[0]) is Ref and not n.control}
    values = {}
    for name, n in ids.items():
        src = n.inputs[0]
        while src.node in ids:
            src = ids[src.node].inputs[0]
        values[Ref(name)] = src
    return ir.substitute(values, drop=ids) if ids else ir


def test_substitute_lets_a_pass_remove_nodes_and_reroute_their_consumers():
    register_pass("test_drop_identities", _drop_identities, before="fuse")
    try:
        with af.Graph().as_default() as g:
            a = af.placeholder(af.float32, [2], name="a")
            b = af.identity(af.identity(a * 3.0), name="b")
            c = af.add(b, 1.0, name="c")
            ep = lower(make_plan(g, [a], [c, b], []), options=LowerOptions(n_gpu=0))
            assert sorted(it.op_type for it in ep.items) == ["AddV2", "Mul"]
            with af.Session() as sess:
                cv, bv = sess.run([c, b], {a: np.array([1, 2], np.float32)})
            np.testing.assert_array_equal(cv, [4, 7])
            np.testing.assert_array_equal(bv, [3, 6])
    finally:
        lower_mod.unregister_pass("test_drop_identities")


def test_a_pass_that_loses_a_producer_is_named():
    def drop_muls(ir, options):
        return ir.replace(nodes=tuple(n for n in ir.nodes if n.type != "Mul"))
    register_pass("test_drop_muls", drop_muls, after="fuse")
    try:
        with af.Graph().as_default() as g:
            a = af.placeholder(af.float32, [2], name="a")
            b = af.add(a * 3.0, 1.0, name="b")
            with pytest.raises(ValueError, match="node 'b' \\(AddV2\\) reads \\['mul'\\]"):
                lower(make_plan(g, [a], [b], []), options=LowerOptions(n_gpu=0))
    finally:
        lower_mod.unregister_pass("test_drop_muls")
