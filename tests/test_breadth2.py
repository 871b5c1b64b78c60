"""tf.compat.v1 names TF-1.x programs still hit: af.profiler (parameter and FLOP counts, tfprof's
reports), af.config, af.audio, af.sysconfig, bfloat16 and the dense tf.strings ops, against
TensorFlow 2.21's output recorded by tests/fixtures/make_breadth2.py."""
from __future__ import annotations

import json
import os
from contextlib import nullcontext

import numpy as np
import pytest

import actorflow as af

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "breadth2.json")) as _f:
    FIX = json.load(_f)

# Views that list nodes actorflow names differently, so for these only the totals are compared: the
# constant made from a Python scalar operand ("Const_2" where TF says "mul/x" or "ArgMax/dimension"),
# and ops of gradient functions ("gradients/fc/Softmax_grad/Mul" where TF's says ".../mul").
_NAMES_DIFFER = {"convnet/all_params", "convnet/occurrence", "convnet/shapes_op", "convnet_train/flops",
                 "convnet_train/flops_op"}


def _model(name):
    g = af.Graph()
    with g.as_default():
        exec(FIX["models"][name], {"tf": af})
    return g


def _advice_blocks(text):
    """The advisor's stdout as {checker: report lines} (TF prints the checkers in hash-map order)."""
    blocks, cur = {}, None
    for line in text.splitlines():
        if line.endswith("Checker:"):
            cur = blocks.setdefault(line[:-1], [])
        elif cur is not None and line:
            cur.append(line)
    return blocks


@pytest.mark.parametrize("key", sorted(k for k in FIX["profiles"] if not k.endswith("/advise")))
def test_profiler_reports_match_tensorflow(key, capsys):
    rec = FIX["profiles"][key]
    model, _ = key.split("/")
    g = _model(model)
    opts = eval(rec["options"], {"P": af.profiler.ProfileOptionBuilder})  # noqa: S307 (the fixture's expression)
    got = af.profiler.profile(g, cmd=rec["cmd"], options=opts)
    out = capsys.readouterr().out
    assert got.total_parameters == rec["total_parameters"]
    assert got.total_float_ops == rec["total_float_ops"]
    if key not in _NAMES_DIFFER:
        assert out == rec["stdout"]
        assert str(got) == rec["proto"]


@pytest.mark.parametrize("model", sorted(FIX["models"]))
def test_advise_matches_tensorflow(model, capsys):
    rec = FIX["profiles"][f"{model}/advise"]
    got = af.profiler.advise(_model(model))
    assert str(got) == rec["proto"]
    assert _advice_blocks(capsys.readouterr().out) == _advice_blocks(rec["stdout"])


def test_mlp_and_convnet_counts():
    # The numbers people quote: trainable parameters and forward FLOPs.
    P = af.profiler.ProfileOptionBuilder   # noqa: N806
    for model in ("mlp", "convnet", "convnet_train"):
        g = _model(model)
        params = af.profiler.profile(g, options=P(P.trainable_variables_parameter()).with_empty_output().build())
        flops = af.profiler.profile(g, options=P(P.float_operation()).with_empty_output().build())
        assert params.total_parameters == FIX["profiles"][f"{model}/params"]["total_parameters"]
        assert flops.total_float_ops == FIX["profiles"][f"{model}/flops"]["total_float_ops"]
    assert FIX["profiles"]["mlp/params"]["total_parameters"] == 20 * 16 + 16 + 16 * 4 + 4


def test_profiler_with_traced_steps(capsys, tmp_path):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [8, 20], name="x")
        w = af.get_variable("w", [20, 16])
        y = af.reduce_sum(af.matmul(x, w))
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            meta = af.RunMetadata()
            s.run(y, {x: np.ones([8, 20], np.float32)},
                  options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=meta)
    prof = af.profiler.Profiler(g)
    prof.add_step(3, meta)
    P = af.profiler.ProfileOptionBuilder   # noqa: N806
    opts = P(P.time_and_memory(min_micros=0, min_bytes=0)).select(["occurrence", "device", "float_ops"]).build()
    scope = prof.profile_name_scope(opts)
    ran = {c.name: c for c in scope.children}
    assert ran["MatMul"].run_count == 1 and ran["MatMul"].devices[0].endswith("device:cpu:0")
    assert ran["MatMul"].float_ops == 2 * 20 * 8 * 16           # static FLOPs x runs
    assert "MatMul (" in capsys.readouterr().out
    ops = prof.profile_operations(P(opts).with_empty_output().build())
    assert ops.children and capsys.readouterr().out == ""
    # time_and_memory(): actorflow's traces have no allocator records, so an op's outputs are its bytes.
    mem = prof.profile_name_scope(P(P.time_and_memory()).with_empty_output().build())
    assert {c.name: c.requested_bytes for c in mem.children}["MatMul"] == 8 * 16 * 4
    # A step that was never added: TF reports it on stderr and returns an empty proto.
    assert prof.profile_name_scope(P(opts).with_step(7).build()) == af.profiler.GraphNodeProto()
    assert "Options -step=7 not found" in capsys.readouterr().err
    advice = prof.advise({"ExpensiveOperationChecker": {}})
    assert advice.checkers["ExpensiveOperationChecker"].reports[0].startswith("top 1 operation type: ")
    profile = af.profiler.OpLogProto  # noqa: F841  (the class exists)
    from tensorboard.compat.proto import tfprof_log_pb2
    pp = tfprof_log_pb2.ProfileProto.FromString(prof.serialize_to_string())
    assert list(pp.steps) == [3] and any(n.name == "MatMul" and n.float_ops == 5120 for n in pp.nodes.values())
    # write_op_log writes the OpLogProto with the FLOPs and the trainable variables' type.
    af.profiler.write_op_log(g, str(tmp_path))
    log = tfprof_log_pb2.OpLogProto.FromString((tmp_path / "tfprof_log").read_bytes())
    entries = {e.name: e for e in log.log_entries}
    assert entries["MatMul"].float_ops == 5120 and "_trainable_variables" in entries["w"].types
    # A file output gets the report without the options banner.
    out = tmp_path / "report.txt"
    af.profiler.profile(g, options=P(P.trainable_variables_parameter()).with_file_output(str(out)).build())
    assert out.read_text().splitlines()[-1] == "  w (20x16, 320/320 params)"


def test_profiler_errors():
    g = _model("mlp")
    with pytest.raises(af.errors.InvalidArgumentError, match="unknown cmd: bogus"):
        af.profiler.profile(g, cmd="bogus")
    with pytest.raises(af.errors.InvalidArgumentError, match="unknown output type 'printer'"):
        af.profiler.profile(g, options={"output": "printer"})
    with pytest.raises(af.errors.InvalidArgumentError, match="missing outfile"):
        af.profiler.profile(g, options={"output": "file"})
    with pytest.raises(af.errors.InvalidArgumentError, match=r"unknown option\(s\) \['max_dpth'\]"):
        af.profiler.profile(g, options={"max_dpth": 3})
    with pytest.raises(af.errors.InvalidArgumentError, match="invalid regular expression"):
        af.profiler.profile(g, options=af.profiler.ProfileOptionBuilder().with_accounted_types(["(("]).build())
    with pytest.raises(af.errors.UnimplementedError, match="timeline output is not implemented"):
        af.profiler.profile(g, options=af.profiler.ProfileOptionBuilder().with_timeline_output("t.json").build())
    with pytest.raises(af.errors.InvalidArgumentError, match="unknown checker 'Nope'"):
        af.profiler.advise(g, options={"Nope": {}})


# -- af.config ------------------------------------------------------------------------------------

# TF's eager context initializes on list_logical_devices, after which it refuses new thread counts
# and CPU splits; actorflow applies them to sessions created afterwards (checked below).
_CONFIG_DIFFERS = {"set_inter", "inter_set", "split_cpu", "logical_split", "ldc_split"}


@pytest.fixture
def fresh_config():
    from actorflow import config as cfg
    saved = dict(vars(cfg._ctx))
    saved["optimizer"] = dict(saved["optimizer"])
    saved["virtual"] = dict(saved["virtual"])
    yield cfg
    vars(cfg._ctx).update(saved)


def test_config_matches_tensorflow(fresh_config):
    cpu = af.config.list_physical_devices("CPU")[0]
    for label, src, want in FIX["config"]:
        # TF 2.21 ran on a machine without GPUs: with one, the device lists differ.
        gpu_dependent = label in ("physical", "physical_gpu", "logical", "visible")
        if label in _CONFIG_DIFFERS or (gpu_dependent and af.config.list_physical_devices("GPU")):
            continue
        try:
            got = {"repr": repr(eval(src, {"tf": af, "cpu": cpu}))}  # noqa: S307 (the fixture's expression)
        except Exception as e:  # noqa: BLE001
            got = {"error": type(e).__name__, "message": str(e)}
        assert got == want, (label, src)


def test_config_settings_reach_new_sessions(fresh_config):
    with af.Graph().as_default():
        with af.Session() as s:       # untouched: TF's defaults
            assert s._config.graph_options.optimizer_options.global_jit_level == 0
        af.config.optimizer.set_jit(True)
        af.config.optimizer.set_experimental_options({"constant_folding": False, "remapping": False})
        af.config.threading.set_inter_op_parallelism_threads(-1)
        af.config.set_soft_device_placement(True)
        cpu = af.config.list_physical_devices("CPU")[0]
        af.config.set_logical_device_configuration(cpu, [af.config.LogicalDeviceConfiguration()] * 2)
        assert af.config.list_logical_devices("CPU")[1] == af.config.LogicalDevice("/device:CPU:1", "CPU")
        from actorflow.scheduler.lower import LowerOptions
        s = af.Session()
        opts = LowerOptions.from_config(s._config)
        assert opts.jit_level == af.OptimizerOptions.ON_1 and opts.soft_placement
        assert ("constant_folding", False) in opts.rewrites and ("remapping", False) in opts.rewrites
        assert s._config.inter_op_parallelism_threads == -1 and s._config.device_count == {"CPU": 2}
        x = af.placeholder(af.float32, [3])
        assert s.run(af.exp(x) * 2.0 + 1.0, {x: np.zeros(3, np.float32)}).tolist() == [3.0, 3.0, 3.0]
        s.close()
        af.config.optimizer.set_jit(False)
        with af.Session() as s:
            assert LowerOptions.from_config(s._config).jit_level == af.OptimizerOptions.OFF
        with af.Session(config=af.ConfigProto()) as s:     # a ConfigProto given explicitly wins, as in TF
            assert s._config.inter_op_parallelism_threads == 0


def test_config_threads_size_the_kernel_pool(fresh_config):
    from actorflow.actors import dispatcher
    rt = dispatcher.default_runtime()
    af.config.threading.set_intra_op_parallelism_threads(rt.threads)       # its current size: accepted
    assert af.config.threading.get_intra_op_parallelism_threads() == rt.threads
    with pytest.raises(RuntimeError, match="Intra op parallelism cannot be modified after initialization"):
        af.config.threading.set_intra_op_parallelism_threads(rt.threads + 1)
    dispatcher.set_default_threads(None)


def test_config_visible_devices(fresh_config):
    cpu = af.config.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError, match="the CPU cannot be hidden"):
        af.config.set_visible_devices([], "CPU")
    gpus = af.config.list_physical_devices("GPU")
    af.config.set_visible_devices([cpu])
    assert af.config.get_visible_devices() == [cpu]
    if gpus:    # hidden GPUs are not used by placement
        assert af.config.current_config().device_count["GPU"] == 0
        assert af.config.list_logical_devices("GPU") == []
        with pytest.raises(ValueError, match="from the end of the list only") if len(gpus) > 1 else nullcontext():
            af.config.set_visible_devices([cpu] + gpus[1:])


# -- af.audio, af.strings: values against TF's -----------------------------------------------------

def _wav(*args, **kw):
    from tests.fixtures.make_breadth2 import wav
    return wav(*args, **kw)


def _encode(v):
    import base64
    a = np.asarray(v, dtype=object) if isinstance(v, bytes) else np.asarray(v)
    if a.dtype == object:
        return {"bytes": [base64.b64encode(bytes(x)).decode() for x in a.reshape(-1)], "shape": list(a.shape)}
    return {"values": a.tolist(), "dtype": a.dtype.name, "shape": list(a.shape)}


@pytest.mark.parametrize("label", sorted(FIX["values"]))
def test_values_match_tensorflow(label):
    rec = FIX["values"][label]
    with af.Graph().as_default():
        if "build_error" in rec:
            with pytest.raises(Exception) as info:   # noqa: PT011 (the type is checked below)
                eval(rec["src"], {"tf": af, "np": np, "wav": _wav})  # noqa: S307
            assert type(info.value).__name__ == rec["build_error"] or \
                (rec["build_error"] == "ValueError" and isinstance(info.value, ValueError)), info.value
            if rec["build_error"] != "ValueError" or "Shape must be" not in rec["message"]:
                assert rec["message"] in str(info.value)
            return
        t = eval(rec["src"], {"tf": af, "np": np, "wav": _wav})  # noqa: S307
        ts = list(t) if isinstance(t, (tuple, list)) else [t]
        assert [str(x.shape) for x in ts] == rec["shapes"]
        if "run_error" in rec:
            with af.Session() as s, pytest.raises(getattr(af.errors, rec["run_error"]), match=None) as info:
                s.run(ts)
            assert rec["message"].split(", error:")[0] in str(info.value)
            return
        if rec["values"] is not None:
            with af.Session() as s:
                assert [_encode(v) for v in s.run(ts)] == rec["values"]


def test_regex_full_match_rejects_what_re2_lacks():
    with af.Graph().as_default(), af.Session() as s:
        with pytest.raises(af.errors.InvalidArgumentError, match="no look-around or back-references"):
            s.run(af.strings.regex_full_match(["aa"], r"(a)\1"))
        with pytest.raises(af.errors.InvalidArgumentError, match="no look-around"):
            s.run(af.strings.regex_full_match(["ab"], "a(?=b)b"))


def test_wav_round_trip_is_exact_on_int16_grid():
    rng = np.random.default_rng(0)
    samples = (rng.integers(-32768, 32768, size=(50, 3)) / 32768).astype(np.float32)
    with af.Graph().as_default(), af.Session() as s:
        audio, rate = af.audio.decode_wav(af.audio.encode_wav(samples, 48000))
        got, r = s.run([audio, rate])
    np.testing.assert_array_equal(got, samples)
    assert r == 48000 and got.dtype == np.float32


def test_sysconfig_and_bfloat16():
    import sysconfig
    flags = af.sysconfig.get_compile_flags()
    assert f"-I{sysconfig.get_paths()['include']}" in flags and f"-I{af.sysconfig.get_include()}" in flags
    assert os.path.isfile(os.path.join(af.sysconfig.get_include(), "numpy", "arrayobject.h"))
    assert os.path.samefile(af.sysconfig.get_lib(), os.path.dirname(af.__file__))
    assert af.sysconfig.get_link_flags()[0].startswith("-L")
    info = af.sysconfig.get_build_info()
    assert info["is_rocm_build"] is False and info["cpu_compiler"].startswith("llvm ")
    assert info["is_cuda_build"] == (af.config.list_physical_devices("GPU") != [] or "cuda_version" in info)
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:     # no bfloat16 numpy type in this environment: the names are absent
        assert not hasattr(af, "bfloat16") and not hasattr(af, "to_bfloat16")


def test_profiler_op_log_types_and_tensorflow_python_paths(capsys):
    from actorflow.python.profiler import model_analyzer, option_builder, tfprof_logger
    g = _model("mlp")
    log = af.profiler.OpLogProto()
    entry = log.log_entries.add(name="mlp/w2")
    entry.types.append("_head")
    P = option_builder.ProfileOptionBuilder   # noqa: N806
    opts = P(P.trainable_variables_parameter()).with_accounted_types(["_head"]).with_empty_output().build()
    fresh = af.profiler.OpLogProto()
    fresh.CopyFrom(log)                      # (merging extends the caller's entries in place, as TF's does)
    assert model_analyzer.profile(g, op_log=log, options=opts).total_parameters == 16 * 4
    merged = tfprof_logger.merge_default_with_oplog(g, fresh)
    types = {e.name: list(e.types) for e in merged.log_entries}
    assert types["mlp/w2"] == ["_head", "_trainable_variables"] and types["mlp/w1"] == ["_trainable_variables"]
    prof = model_analyzer.Profiler(g)
    flops = prof.profile_graph(P(P.float_operation()).with_empty_output().build())
    assert flops.total_float_ops == FIX["profiles"]["mlp/graph_flops"]["total_float_ops"]
    assert capsys.readouterr().out == ""
