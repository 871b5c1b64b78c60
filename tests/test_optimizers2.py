"""Adadelta, FTRL, proximal gradient descent, proximal Adagrad and Adagrad-DA against TensorFlow
2.21 (tests/fixtures/make_optimizers2.py): five training steps of a small model with dense and
sparse (gather / embedding_lookup, and a gather with duplicate ids) gradients, every variable and slot after each step; slot names;
the raw SparseApply* kernels on duplicate, unsorted indices; and the bad inputs TF rejects."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import training_ops

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "optimizers2.json").read_text())
TOL = {"float32": dict(rtol=1e-5, atol=1e-7), "float64": dict(rtol=1e-10, atol=1e-13)}
# Cases whose hyper-parameters are not exact in float32 (Adadelta's defaults: 0.001, 0.95, 1e-8). TF
# makes float32 constants and casts them for a float64 variable; actorflow makes float64 constants
# (actorflow/train/optimizer.py), so float64 agrees to float32's rounding of the hyper-parameters only.
INEXACT = {"adadelta"}
ERRORS = {"ValueError": ValueError, "TypeError": TypeError, "InvalidArgumentError": af.errors.InvalidArgumentError}


def _model(mode, dtype):
    """The fixture's model, built with actorflow (same names, values and loss)."""
    a = lambda k: np.asarray(FIX[k], dtype=dtype)  # noqa: E731
    if mode == "dense":
        w = af.Variable(a("W0"), name="w")
        b = af.Variable(a("B0"), name="b")
        pred = af.matmul(af.constant(a("X")), w) + b
        return [w, b], 0.5 * af.reduce_sum(af.square(pred - a("Y")))
    emb = af.Variable(a("E0"), name="emb")
    if mode == "dup":
        rows = af.gather(emb, FIX["IDS_DUP"])
        return [emb], 0.5 * af.reduce_sum(af.square(rows * a("C_DUP") - 1.0))
    rows = af.gather(emb, FIX["IDS"]) if mode == "sparse" else af.nn.embedding_lookup(emb, FIX["IDS"])
    return [emb], 0.5 * af.reduce_sum(af.square(rows * a("C") - a("D")))


def _optimizer(expr, gs):
    return eval(expr, {"tf": af, "gs": gs})  # noqa: S307 (the fixture's own table)


@pytest.mark.parametrize("key", sorted(FIX["cases"]))
def test_training_steps_match_tensorflow(key):
    name, mode, dtype = key.split("/")
    case = FIX["cases"][key]
    ref = case
    tol = TOL[dtype]
    if name in INEXACT and dtype == "float64":
        tol = dict(rtol=1e-6, atol=1e-12)
    if "tf_error" in case:
        # TF cannot build this one (its proximal optimizers pass float32 hyper-parameters to a
        # float64 variable's update); actorflow can, and matches TF's float32 run to float32 precision.
        ref = FIX["cases"][f"{name}/{mode}/float32"]
        tol = dict(rtol=1e-5, atol=1e-6)
    with af.Graph().as_default() as g, af.Session() as s:
        gs = af.train.get_or_create_global_step()
        vs, loss = _model(mode, dtype)
        opt = _optimizer(case["ctor"], gs)
        train = opt.minimize(loss, global_step=gs)
        assert opt.get_slot_names() == ref["slot_names"]
        slots = {v.op.name: {n: opt.get_slot(v, n) for n in ref["slot_names"]} for v in vs}
        assert {k: {n: sv.op.name for n, sv in d.items()} for k, d in slots.items()} == ref["slot_vars"]
        assert sorted({op.type for op in g.get_operations() if "Apply" in op.type}) == ref["update_types"]
        s.run(af.global_variables_initializer())
        for step, want in enumerate(ref["steps"]):
            s.run(train)
            for v in vs:
                got = {v.op.name: s.run(v)}
                got.update({v.op.name + ":" + n: s.run(sv) for n, sv in slots[v.op.name].items()})
                for k, x in got.items():
                    assert x.dtype == np.dtype(dtype), k
                    np.testing.assert_allclose(x, want[k], **tol, err_msg=f"{key} step {step + 1}: {k}")
        assert s.run(gs) == len(ref["steps"])


def _raw_id(r):
    return f"{r['op']}-w{r['width']}" + ("-mul" if r["attrs"].get("multiply_linear_by_lr") else "") + \
        f"-p{r['scalars'][-1]}"


@pytest.mark.parametrize("case", FIX["raw"], ids=_raw_id)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_raw_update_ops_match_tensorflow(case, dtype):
    # The wrappers of training_ops against tf.raw_ops; sparse ones on duplicate, unsorted indices,
    # which TF's CPU kernels (and ours) apply row after row.
    fn = getattr(training_ops, case["fn"])
    with af.Graph().as_default(), af.Session() as s:
        refs = {r: af.Variable(np.asarray(case["init"][r], dtype), name=r) for r in case["refs"]}
        args = {"grad": af.constant(np.asarray(case["grad"], dtype))}
        args["delta"] = args["grad"]
        if case["indices"] is not None:
            args["indices"] = af.constant(case["indices"])
        order = [n.strip() for n in case["order"].split(",")]
        names = [n for n in order if n not in ("grad", "indices", "delta")]
        for n, x in zip(names, case["scalars"]):
            args[n] = af.constant(x, dtype=af.int64) if n == "global_step" else af.constant(np.asarray(x, dtype))
        upd = fn(*refs.values(), *[args[n] for n in order], **case["attrs"])
        assert upd.op.type == case["op"]
        s.run(af.global_variables_initializer())
        s.run(upd)
        for r, v in refs.items():
            np.testing.assert_allclose(s.run(v), case["after"][dtype][r], **TOL[dtype], err_msg=r)


@pytest.mark.parametrize("expr", sorted(FIX["bad_ctors"]))
def test_constructor_errors_match_tensorflow(expr):
    with af.Graph().as_default():
        gs = af.train.get_or_create_global_step()
        with pytest.raises(ERRORS[FIX["bad_ctors"][expr]]):
            _optimizer(expr, gs)


@pytest.mark.parametrize("key", sorted(FIX["bad_steps"]))
def test_bad_hyper_parameters_fail_where_tensorflow_fails(key):
    expr, mode = key.rsplit("/", 1)
    want = FIX["bad_steps"][key]

    def step():
        with af.Graph().as_default(), af.Session() as s:
            gs = af.train.get_or_create_global_step()
            vs, loss = _model(mode, np.float32)
            train = _optimizer(expr, gs).minimize(loss, global_step=gs)
            s.run(af.global_variables_initializer())
            s.run(train)
    if want is None:
        step()
    else:
        with pytest.raises(ERRORS[want]) as e:
            step()
        assert any(w in str(e.value) for w in ("global_step", "lr", "l1", "learning_rate")), str(e.value)


def test_adagrad_da_counts_steps_from_the_global_step():
    # t = global_step + 1 before the increment: with l1 = 0 and l2 = 0, var = -lr*g_acc/sqrt(gg_acc)
    # does not depend on t, so make l2 > 0 and check one step by hand.
    with af.Graph().as_default(), af.Session() as s:
        gs = af.Variable(np.int64(4), name="step", trainable=False)
        w = af.Variable(np.array([1.0, -2.0]), name="w")
        opt = af.train.AdagradDAOptimizer(0.5, gs, initial_gradient_squared_accumulator_value=1.0,
                                          l2_regularization_strength=0.25)
        train = opt.minimize(af.reduce_sum(3.0 * w), global_step=gs)
        s.run(af.global_variables_initializer())
        s.run(train)
        t = 5.0
        np.testing.assert_allclose(s.run(w), -0.5 * 3.0 / (0.25 * t * 0.5 + np.sqrt(1.0 + 9.0)) * np.ones(2))
        assert s.run(gs) == 5


def test_update_op_inference_errors():
    with af.Graph().as_default():
        w = af.Variable(np.ones((3, 2), np.float32), name="weights")
        acc = af.Variable(np.ones((3, 2), np.float32), name="acc")
        g = af.constant(np.ones((3, 2), np.float32))
        with pytest.raises(ValueError, match="(?s)global_step.*integer scalar.*weights"):
            training_ops.apply_adagrad_da(w, acc, acc, g, 0.1, 0.0, 0.0, af.constant(1.0))
        with pytest.raises(ValueError, match="(?s)float64.*weights"):
            training_ops.apply_ftrl(w, acc, acc, g, af.constant(0.1, dtype=af.float64), 0.0, 0.0, -0.5)
        with pytest.raises(ValueError, match="must be a variable reference"):
            training_ops.ApplyProximalAdagrad(w._ref(), af.identity(acc), *[af.constant(0.1)] * 3, g)
        with pytest.raises(ValueError, match="(?s)weights.*must have shape"):
            training_ops.sparse_apply_adadelta(w, acc, acc, 0.1, 0.9, 1e-6, af.constant(np.ones((2, 3), np.float32)),
                                               af.constant([0, 1]))


DENSE = {  # kernel factory name: (input names, attrs); refs first, as the ops take them
    "apply_adadelta": ("var accum accum_update lr rho epsilon grad", {}),
    "apply_ftrl": ("var accum linear grad lr l1 l2 lr_power", {}),
    "apply_ftrl_v2": ("var accum linear grad lr l1 l2 l2_shrinkage lr_power", {"multiply_linear_by_lr": True}),
    "apply_proximal_gradient_descent": ("var lr l1 l2 grad", {}),
    "apply_proximal_adagrad": ("var accum lr l1 l2 grad", {}),
    "apply_adagrad_da": ("var accum linear grad lr l1 l2 global_step", {}),
    "sparse_apply_adadelta": ("var accum accum_update lr rho epsilon grad indices", {}),
    "sparse_apply_ftrl": ("var accum linear grad indices lr l1 l2 lr_power", {"multiply_linear_by_lr": True}),
    "sparse_apply_ftrl_v2": ("var accum linear grad indices lr l1 l2 l2_shrinkage lr_power", {}),
    "sparse_apply_proximal_gradient_descent": ("var lr l1 l2 grad indices", {}),
    "sparse_apply_proximal_adagrad": ("var accum lr l1 l2 grad indices", {}),
    "sparse_apply_adagrad_da": ("var accum linear grad indices lr l1 l2 global_step", {}),
}
SCALARS = {"lr": 0.5, "rho": 0.75, "epsilon": 0.0625, "l1": 0.0625, "l2": 0.125, "l2_shrinkage": 0.25,
           "lr_power": -0.25, "global_step": np.int64(3)}


@pytest.mark.parametrize("kernel", sorted(DENSE))
def test_numpy_fallback_matches_fused_kernel(kernel):
    # Strided (Fortran-order) buffers take the numpy path; C-contiguous ones the numba loop.
    from actorflow.kernels.cpu import training
    names, attrs = DENSE[kernel]
    names = names.split()
    rng = np.random.default_rng(5)
    sparse = "indices" in names
    ids = np.array([3, 0, 3, 1])
    refs = [n for n in names if n in ("var", "accum", "accum_update", "linear")]
    init = {n: rng.normal(size=(5, 3)) if n == "var" else np.abs(rng.normal(size=(5, 3))) + 0.5 for n in refs}
    grad = rng.normal(size=(len(ids), 3) if sparse else (5, 3))
    fn = getattr(training, kernel)(attrs)
    out = []
    for order in ("C", "F"):
        bufs = {n: np.array(init[n], dtype=np.float64, order=order) for n in refs}
        args = [bufs[n] if n in bufs else grad if n == "grad" else ids if n == "indices"
                else np.asarray(SCALARS[n]) for n in names]
        if order == "F":
            assert not bufs["var"].flags.c_contiguous
        fn(*args)
        out.append(bufs)
    for n in refs:
        np.testing.assert_allclose(out[1][n], out[0][n], rtol=1e-12, atol=1e-14, err_msg=n)
        assert not np.allclose(out[0][n], init[n]), f"{kernel} left {n} unchanged"
