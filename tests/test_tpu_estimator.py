"""TPUEstimator on the CPU (af.estimator.tpu, af.contrib.tpu): params' batch sizes, TPUEstimatorSpec's
eval_metrics, scaffold_fn and host_call, TF's argument checks, CrossShardOptimizer with one shard, the
TPU cluster resolver's error, af.contrib.data; and the variable read that control dependencies on
ops writing no variable leave as the snapshot (BERT's modeling_test checks it)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.estimator import tpu

X = np.random.RandomState(0).randn(40, 3).astype(np.float32)
W = np.array([[1.0], [-2.0], [0.5]], np.float32)
Y = X @ W


def _input_fn(seen):
    def input_fn(params, mode):
        seen.append(dict(params))
        ds = af.data.Dataset.from_tensor_slices(({"x": X}, Y))
        if mode == af.estimator.ModeKeys.TRAIN:
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=True)
    return input_fn


def _model_fn(seen, spec="tpu", host_counter=False):
    def model_fn(features, labels, mode, params):
        seen.append(dict(params))
        pred = af.layers.dense(features["x"], 1, use_bias=False, kernel_initializer=af.zeros_initializer())
        if mode == af.estimator.ModeKeys.PREDICT:
            return tpu.TPUEstimatorSpec(mode, predictions={"y": pred})
        loss = af.losses.mean_squared_error(labels, pred)
        train_op = af.contrib.tpu.CrossShardOptimizer(af.train.GradientDescentOptimizer(0.1)).minimize(
            loss, global_step=af.train.get_global_step())
        if spec == "estimator":
            return af.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
        host_call = None
        if host_counter:
            counter = af.get_variable("host_calls", [], af.int64, af.zeros_initializer(), trainable=False)
            host_call = (lambda step: [af.assign_add(counter, af.cast(af.size(step), af.int64))],
                         [af.reshape(af.train.get_global_step(), [1])])

        def metric_fn(labels, pred):
            return {"mae": af.metrics.mean_absolute_error(labels, pred)}
        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, eval_metrics=(metric_fn, [labels, pred]),
                                    host_call=host_call,
                                    scaffold_fn=lambda: af.train.Scaffold(saver=af.train.Saver(max_to_keep=2)))
    return model_fn


def _config(tmp_path, **kw):
    return tpu.RunConfig(model_dir=str(tmp_path), tpu_config=tpu.TPUConfig(iterations_per_loop=kw.pop("ipl", 2)),
                         save_checkpoints_steps=kw.pop("save", 100), **kw)


def test_tpu_estimator_passes_each_mode_its_batch_size_and_trains_evaluates_predicts_on_the_cpu(tmp_path):
    in_seen, model_seen = [], []
    est = tpu.TPUEstimator(_model_fn(model_seen), config=_config(tmp_path), params={"lr": 0.1}, use_tpu=False,
                           train_batch_size=8, eval_batch_size=4, predict_batch_size=5)
    est.train(_input_fn(in_seen), max_steps=40)
    assert in_seen[-1] == {"lr": 0.1, "batch_size": 8}
    assert model_seen[-1] == {"lr": 0.1, "batch_size": 8, "use_tpu": False}
    res = est.evaluate(_input_fn(in_seen), steps=3)
    assert in_seen[-1]["batch_size"] == 4 and model_seen[-1]["batch_size"] == 4
    assert res["global_step"] == 40 and res["mae"] < 0.05 and set(res) == {"mae", "loss", "global_step"}
    preds = list(est.predict(_input_fn(in_seen)))
    assert in_seen[-1]["batch_size"] == 5 and len(preds) == 40
    np.testing.assert_allclose(np.stack([p["y"] for p in preds]), Y, atol=0.1)
    np.testing.assert_allclose(est.get_variable_value("dense/kernel"), W, atol=0.05)
    assert est.params == {"lr": 0.1}


def test_tpu_estimator_spec_runs_its_host_call_every_step_and_takes_dict_metrics(tmp_path):
    est = tpu.TPUEstimator(_model_fn([], host_counter=True), config=_config(tmp_path), use_tpu=False,
                           train_batch_size=8, eval_batch_size=8)
    est.train(_input_fn([]), steps=7)
    assert est.get_variable_value("host_calls") == 7

    def model_fn(features, labels, mode, params):
        pred = af.layers.dense(features["x"], 1, use_bias=False)
        loss = af.losses.mean_squared_error(labels, pred)
        return tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(
            lambda labels, predictions: {"rmse": af.metrics.root_mean_squared_error(labels, predictions)},
            {"labels": labels, "predictions": pred}))
    res = tpu.TPUEstimator(model_fn, model_dir=str(tmp_path), config=_config(tmp_path), use_tpu=False,
                           eval_batch_size=8).evaluate(_input_fn([]), steps=2)
    assert res["rmse"] == pytest.approx(np.sqrt(res["loss"]), rel=1e-5)


def test_a_plain_estimator_spec_and_export_without_a_batch_size(tmp_path):
    model_seen = []
    est = tpu.TPUEstimator(_model_fn(model_seen, spec="estimator"), config=_config(tmp_path), use_tpu=False,
                           train_batch_size=8)
    est.train(_input_fn([]), steps=3)

    def serving():
        x = af.placeholder(af.float32, [None, 3])
        return af.estimator.export.ServingInputReceiver({"x": x}, {"x": x})
    est.export_saved_model(str(tmp_path / "export"), serving)
    assert "batch_size" not in model_seen[-1] and model_seen[-1]["use_tpu"] is False


def test_use_tpu_true_keeps_tfs_checks_then_runs_on_the_cpu(tmp_path, caplog):
    with pytest.raises(ValueError, match="`train_batch_size` cannot be `None`"):
        tpu.TPUEstimator(_model_fn([]), config=_config(tmp_path), use_tpu=True)
    with pytest.raises(ValueError, match="train_batch_size must be positive integer"):
        tpu.TPUEstimator(_model_fn([]), config=_config(tmp_path), use_tpu=True, train_batch_size=0)
    est = tpu.TPUEstimator(_model_fn([]), config=_config(tmp_path), use_tpu=True, train_batch_size=8)
    assert "no TPU" in caplog.text
    est.train(_input_fn([]), steps=2)
    assert est.get_variable_value("global_step") == 2


def test_tfs_argument_errors():
    with pytest.raises(ValueError, match="must be provided with type `tpu_config.RunConfig`"):
        tpu.TPUEstimator(_model_fn([]), config=af.estimator.RunConfig(), use_tpu=False)
    with pytest.raises(ValueError, match="reserved keys"):
        tpu.TPUEstimator(_model_fn([]), config=tpu.RunConfig(), params={"batch_size": 3}, use_tpu=False)
    est = tpu.TPUEstimator(_model_fn([]), config=tpu.RunConfig(), use_tpu=False, train_batch_size=4)
    with pytest.raises(ValueError, match="input_fn .* does not include params argument"):
        est.train(lambda: ({"x": X}, Y), steps=1)
    est = tpu.TPUEstimator(lambda features, labels, mode: None, config=tpu.RunConfig(), use_tpu=False,
                           train_batch_size=4)
    with pytest.raises(ValueError, match="model_fn .* does not include params argument"):
        est.train(_input_fn([]), steps=1)
    with pytest.raises(RuntimeError, match="length of tensors 1 does not match method args"):
        tpu.TPUEstimatorSpec("eval", loss=af.constant(1.0), eval_metrics=(lambda a, b: {}, [af.constant(1.0)]))
    with pytest.raises(TypeError, match=r"eval_metrics\[0\] should be callable"):
        tpu.TPUEstimatorSpec("eval", loss=af.constant(1.0), eval_metrics=(1, []))
    with pytest.raises(ValueError, match="host_call should have two elements"):
        tpu.TPUEstimatorSpec("train", loss=af.constant(1.0), host_call=(print,))
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook"):
        tpu.TPUEstimatorSpec("train", training_hooks=[object()])


def test_tpu_config_and_run_config():
    cfg = tpu.TPUConfig(iterations_per_loop="2m", per_host_input_for_training=True)
    assert cfg.per_host_input_for_training == tpu.InputPipelineConfig.PER_HOST_V1
    assert tpu.TPUConfig(per_host_input_for_training=False).per_host_input_for_training == 1
    for bad, match in (({"iterations_per_loop": 0}, "iterations_per_loop"),
                       ({"iterations_per_loop": "5x"}, "iterations_per_loop"),
                       ({"num_shards": -1}, "num_shards"), ({"num_cores_per_replica": 3}, "num_cores_per_replica"),
                       ({"eval_training_input_configuration": 3}, "eval_training_input_configuration")):
        with pytest.raises(ValueError, match=match):
            tpu.TPUConfig(**bad)
    rc = tpu.RunConfig(master="grpc://10.0.0.2:8470", tpu_config=cfg, save_checkpoints_steps=5)
    assert rc.master == rc.evaluation_master == "grpc://10.0.0.2:8470"
    new = rc.replace(tpu_config=tpu.TPUConfig(iterations_per_loop=9), model_dir="/tmp/m")
    assert new.tpu_config.iterations_per_loop == 9 and new.model_dir == "/tmp/m" and rc.tpu_config is cfg
    assert isinstance(new, tpu.RunConfig) and new.save_checkpoints_steps == 5
    assert af.contrib.tpu.RunConfig is tpu.RunConfig and af.estimator.tpu.TPUEstimator is tpu.TPUEstimator


def test_examples_per_second_hook_logs_the_global_batch_rate(tmp_path):
    hook = tpu.ExamplesPerSecondHook(batch_size=8, every_n_steps=1)
    g = af.Graph()
    with g.as_default():
        step = af.train.get_or_create_global_step()
        inc = af.assign_add(step, 1)
        with af.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(4):
                sess.run(inc)
    assert len(hook.examples_rates) >= 2
    np.testing.assert_allclose(hook.examples_rates, np.array(hook.rates[-len(hook.examples_rates):]) * 8)


def test_cross_shard_optimizer_applies_the_wrapped_update_with_one_shard():
    v = af.Variable([1.0, 2.0])
    loss = af.reduce_sum(v * v)
    opt = af.contrib.tpu.CrossShardOptimizer(af.train.MomentumOptimizer(0.1, 0.9))
    step = opt.minimize(loss)
    assert opt.get_slot_names() == ["momentum"] and opt.get_slot(v, "momentum") is not None
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(step)
        sess.run(step)
        got = sess.run(v)
    want, mom = np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32)
    for _ in range(2):
        mom = 0.9 * mom + 2 * want
        want = want - 0.1 * mom
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="Unsupported reduction"):
        af.contrib.tpu.CrossShardOptimizer(af.train.GradientDescentOptimizer(0.1), reduction="none")
    with pytest.raises(ValueError, match="needs 2 shards"):
        af.contrib.tpu.CrossShardOptimizer(af.train.GradientDescentOptimizer(0.1), group_assignment=[[0, 1]])


def test_tpu_cluster_resolver_is_a_clear_error():
    for cls in (af.distribute.cluster_resolver.TPUClusterResolver, af.contrib.cluster_resolver.TPUClusterResolver):
        with pytest.raises(ValueError, match="tpu='my-tpu'.*no TPUs"):
            cls(tpu="my-tpu", zone="us-central1-b")


def test_contrib_data_transformations():
    ds = af.data.Dataset.range(7).apply(af.contrib.data.batch_and_drop_remainder(3))
    files = af.data.Dataset.from_tensor_slices(np.array([0, 10], np.int64)).apply(af.contrib.data.parallel_interleave(
        lambda s: af.data.Dataset.range(3).map(lambda i: i * 100), cycle_length=2))
    mapped = af.data.Dataset.range(5).apply(af.contrib.data.map_and_batch(lambda i: i * 2, 2, drop_remainder=True))
    with af.Session() as sess:
        def drain(d):
            it = d.make_one_shot_iterator().get_next()
            out = []
            while True:
                try:
                    out.append(sess.run(it).tolist())
                except af.errors.OutOfRangeError:
                    return out
        assert drain(ds) == [[0, 1, 2], [3, 4, 5]]
        assert drain(files) == [0, 0, 100, 100, 200, 200]
        assert drain(mapped) == [[0, 2], [4, 6]]


def test_control_dependencies_that_write_no_variable_keep_the_snapshot_read():
    """TF builds a variable's `read` once; an op under control_dependencies on an assertion reads
    through it (BERT's modeling_test checks every op is reachable, the snapshot included). Under a
    dependency on a write, actorflow reads afresh, so the read sees the write."""
    v = af.Variable([1.0, 2.0], name="v")
    check = af.assert_less_equal(3, 5)
    with af.control_dependencies([check]):
        sliced = af.slice(v, [0], [1])
    assert sliced.op.inputs[0].name == "v/read:0"
    bump = af.assign_add(v, [10.0, 10.0])
    with af.control_dependencies([af.group(bump)]):
        after = af.identity(v)
    assert after.op.inputs[0].op.type == "_RefRead"
    with af.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_allclose(sess.run(after), [11.0, 12.0])
        np.testing.assert_allclose(sess.run(sliced), [11.0])
