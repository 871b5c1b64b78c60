"""Optimizer update ops: Apply* (dense) and SparseApply* (row-sparse) (tf.raw_ops.Apply*).

The first inputs of each op (the variable and its slots) are references: the runtime binds them to
the variables' resource actors, which hand the kernel exclusively owned buffers to update in place.
Every op outputs the updated variable. Hyper-parameters (learning rate, decay rates, epsilon, ...)
are scalars of the variable's dtype (AdagradDA's global_step an integer scalar); dense gradients
have the variable's shape, sparse ones are `values` rows at `indices`
(values.shape == indices.shape + var.shape[1:]).

Input orders and attribute names follow docs/ops.md, the contract with the kernels in
actorflow/kernels/cpu/training.py. These ops have no gradients.
"""
from __future__ import annotations

from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = [
    "ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyRMSProp", "ApplyCenteredRMSProp",
    "ApplyAdam", "SparseApplyGradientDescent", "SparseApplyMomentum", "SparseApplyAdagrad",
    "SparseApplyRMSProp", "SparseApplyCenteredRMSProp", "SparseApplyAdam",
    "apply_gradient_descent", "apply_momentum", "apply_adagrad", "apply_rms_prop",
    "apply_centered_rms_prop", "apply_adam", "sparse_apply_gradient_descent", "sparse_apply_momentum",
    "sparse_apply_adagrad", "sparse_apply_rms_prop", "sparse_apply_centered_rms_prop", "sparse_apply_adam",
    "ApplyAdadelta", "ApplyFtrl", "ApplyFtrlV2", "ApplyProximalGradientDescent", "ApplyProximalAdagrad",
    "ApplyAdagradDA", "SparseApplyAdadelta", "SparseApplyFtrl", "SparseApplyFtrlV2",
    "SparseApplyProximalGradientDescent", "SparseApplyProximalAdagrad", "SparseApplyAdagradDA",
    "apply_adadelta", "apply_ftrl", "apply_ftrl_v2", "apply_proximal_gradient_descent", "apply_proximal_adagrad",
    "apply_adagrad_da", "sparse_apply_adadelta", "sparse_apply_ftrl", "sparse_apply_ftrl_v2",
    "sparse_apply_proximal_gradient_descent", "sparse_apply_proximal_adagrad", "sparse_apply_adagrad_da",
]


# ---------------------------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------------------------

def _make_infer(op_type: str, names: tuple, n_refs: int, scalars: tuple, sparse: bool, int_scalars: tuple = ()):
    """An infer function for an update op with inputs `names`.

    The first `n_refs` inputs are the variable and its slots; `scalars` name the hyper-parameter
    inputs; "grad" is the gradient and, when `sparse`, "indices" its row indices; `int_scalars`
    name integer scalar inputs (AdagradDA's global_step).
    """
    index = {n: i for i, n in enumerate(names)}

    def infer(inputs, attrs):
        if len(inputs) != len(names):
            raise InferenceError(f"{op_type} takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
        var = inputs[0]
        vname = var.op.name
        for i in range(n_refs):
            t = inputs[i]
            if t.op.op_def.resource != "variable":
                raise InferenceError(f"input '{names[i]}' must be a variable reference (output of VariableV2), "
                                     f"got '{t.name}', the output of a {t.op.type} op")
        if not var.dtype.is_floating:
            raise InferenceError(f"variable '{vname}' has dtype {var.dtype.name}; optimizers update only "
                                 "floating-point variables")
        for i in range(1, n_refs):
            slot = inputs[i]
            if slot.dtype is not var.dtype:
                raise InferenceError(f"slot '{names[i]}' ('{slot.op.name}') of variable '{vname}' has dtype "
                                     f"{slot.dtype.name}, expected {var.dtype.name}")
            if not slot.shape.is_compatible_with(var.shape):
                raise InferenceError(f"slot '{names[i]}' ('{slot.op.name}') has shape {slot.shape}, which does "
                                     f"not match the shape {var.shape} of variable '{vname}'")
        for n in scalars:
            t = inputs[index[n]]
            if t.dtype is not var.dtype:
                raise InferenceError(f"'{n}' ({t.name}) has dtype {t.dtype.name}, but variable '{vname}' has "
                                     f"dtype {var.dtype.name}; cast it first")
            if t.shape.ndims not in (None, 0):
                raise InferenceError(f"'{n}' ({t.name}) must be a scalar, got shape {t.shape} "
                                     f"(updating variable '{vname}')")
        for n in int_scalars:
            t = inputs[index[n]]
            if not t.dtype.is_integer or t.shape.ndims not in (None, 0):
                raise InferenceError(f"'{n}' ({t.name}) must be an integer scalar, got {t.dtype.name} of shape "
                                     f"{t.shape} (updating variable '{vname}')")
        grad = inputs[index["grad"]]
        if grad.dtype is not var.dtype:
            raise InferenceError(f"gradient '{grad.name}' has dtype {grad.dtype.name}, but variable '{vname}' "
                                 f"has dtype {var.dtype.name}")
        if not sparse:
            if not grad.shape.is_compatible_with(var.shape):
                raise InferenceError(f"gradient '{grad.name}' has shape {grad.shape}, which does not match the "
                                     f"shape {var.shape} of variable '{vname}'")
        else:
            indices = inputs[index["indices"]]
            if not indices.dtype.is_integer:
                raise InferenceError(f"indices '{indices.name}' must be integers, got {indices.dtype.name} "
                                     f"(updating variable '{vname}')")
            if indices.shape.ndims not in (None, 1):
                raise InferenceError(f"indices '{indices.name}' must be a vector, got shape {indices.shape} "
                                     f"(updating variable '{vname}')")
            if var.shape.ndims == 0:
                raise InferenceError(f"variable '{vname}' is a scalar; sparse updates need rank >= 1")
            want = TensorShape([indices.shape[0] if indices.shape.ndims == 1 else None])
            want = want.concatenate(var.shape[1:]) if var.shape.ndims is not None else TensorShape(None)
            if not grad.shape.is_compatible_with(want):
                raise InferenceError(f"gradient rows '{grad.name}' have shape {grad.shape}; for variable "
                                     f"'{vname}' of shape {var.shape} and indices of shape {indices.shape} "
                                     f"they must have shape {want}")
        return [(var.dtype, var.shape)]

    return infer


def _define(op_type: str, names: tuple, n_refs: int, scalars: tuple, sparse: bool = False, int_scalars: tuple = ()):
    return define_op(op_type, _make_infer(op_type, names, n_refs, scalars, sparse, int_scalars),
                     ref_inputs=tuple(range(n_refs)), stateful=True)


ApplyGradientDescent = _define("ApplyGradientDescent", ("var", "alpha", "grad"), 1, ("alpha",))
ApplyMomentum = _define("ApplyMomentum", ("var", "accum", "lr", "grad", "momentum"), 2, ("lr", "momentum"))
ApplyAdagrad = _define("ApplyAdagrad", ("var", "accum", "lr", "grad"), 2, ("lr",))
ApplyRMSProp = _define("ApplyRMSProp", ("var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"), 3,
                       ("lr", "rho", "momentum", "epsilon"))
ApplyCenteredRMSProp = _define("ApplyCenteredRMSProp",
                               ("var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"), 4,
                               ("lr", "rho", "momentum", "epsilon"))
ApplyAdam = _define("ApplyAdam", ("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                                  "epsilon", "grad"), 3,
                    ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"))

SparseApplyGradientDescent = _define("SparseApplyGradientDescent", ("var", "alpha", "grad", "indices"), 1,
                                     ("alpha",), sparse=True)
SparseApplyMomentum = _define("SparseApplyMomentum", ("var", "accum", "lr", "grad", "indices", "momentum"), 2,
                              ("lr", "momentum"), sparse=True)
SparseApplyAdagrad = _define("SparseApplyAdagrad", ("var", "accum", "lr", "grad", "indices"), 2, ("lr",),
                             sparse=True)
SparseApplyRMSProp = _define("SparseApplyRMSProp", ("var", "ms", "mom", "lr", "rho", "momentum", "epsilon",
                                                    "grad", "indices"), 3,
                             ("lr", "rho", "momentum", "epsilon"), sparse=True)
SparseApplyCenteredRMSProp = _define("SparseApplyCenteredRMSProp",
                                     ("var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad",
                                      "indices"), 4, ("lr", "rho", "momentum", "epsilon"), sparse=True)
SparseApplyAdam = _define("SparseApplyAdam", ("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1",
                                              "beta2", "epsilon", "grad", "indices"), 3,
                          ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"), sparse=True)

# The optimizers of tf.compat.v1.train beyond the common five (their inputs in TF's order; the
# gradient input is called "grad" here, "delta" in TF's ApplyProximalGradientDescent).
ApplyAdadelta = _define("ApplyAdadelta", ("var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"), 3,
                        ("lr", "rho", "epsilon"))
ApplyFtrl = _define("ApplyFtrl", ("var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"), 3,
                    ("lr", "l1", "l2", "lr_power"))
ApplyFtrlV2 = _define("ApplyFtrlV2", ("var", "accum", "linear", "grad", "lr", "l1", "l2", "l2_shrinkage",
                                      "lr_power"), 3, ("lr", "l1", "l2", "l2_shrinkage", "lr_power"))
ApplyProximalGradientDescent = _define("ApplyProximalGradientDescent", ("var", "alpha", "l1", "l2", "grad"), 1,
                                       ("alpha", "l1", "l2"))
ApplyProximalAdagrad = _define("ApplyProximalAdagrad", ("var", "accum", "lr", "l1", "l2", "grad"), 2,
                               ("lr", "l1", "l2"))
ApplyAdagradDA = _define("ApplyAdagradDA", ("var", "gradient_accumulator", "gradient_squared_accumulator", "grad",
                                            "lr", "l1", "l2", "global_step"), 3, ("lr", "l1", "l2"),
                         int_scalars=("global_step",))

SparseApplyAdadelta = _define("SparseApplyAdadelta", ("var", "accum", "accum_update", "lr", "rho", "epsilon",
                                                      "grad", "indices"), 3, ("lr", "rho", "epsilon"), sparse=True)
SparseApplyFtrl = _define("SparseApplyFtrl", ("var", "accum", "linear", "grad", "indices", "lr", "l1", "l2",
                                              "lr_power"), 3, ("lr", "l1", "l2", "lr_power"), sparse=True)
SparseApplyFtrlV2 = _define("SparseApplyFtrlV2", ("var", "accum", "linear", "grad", "indices", "lr", "l1", "l2",
                                                  "l2_shrinkage", "lr_power"), 3,
                            ("lr", "l1", "l2", "l2_shrinkage", "lr_power"), sparse=True)
SparseApplyProximalGradientDescent = _define("SparseApplyProximalGradientDescent",
                                             ("var", "alpha", "l1", "l2", "grad", "indices"), 1,
                                             ("alpha", "l1", "l2"), sparse=True)
SparseApplyProximalAdagrad = _define("SparseApplyProximalAdagrad", ("var", "accum", "lr", "l1", "l2", "grad",
                                                                    "indices"), 2, ("lr", "l1", "l2"), sparse=True)
SparseApplyAdagradDA = _define("SparseApplyAdagradDA", ("var", "gradient_accumulator",
                                                        "gradient_squared_accumulator", "grad", "indices", "lr",
                                                        "l1", "l2", "global_step"), 3, ("lr", "l1", "l2"),
                               sparse=True, int_scalars=("global_step",))


# ---------------------------------------------------------------------------------------------
# Wrappers (tf.compat.v1.train's raw training ops: training_ops.apply_*)
# ---------------------------------------------------------------------------------------------

def _ref(v) -> Tensor:
    """The VariableV2 output behind a Variable (or a ref tensor itself)."""
    if hasattr(v, "_ref"):
        return v._ref()
    if isinstance(v, Tensor):
        return v
    raise TypeError(f"Expected a Variable, got {v!r}")


def _val(x, like: Tensor) -> Tensor:
    """A hyper-parameter or gradient as a tensor; Python numbers take the variable's dtype."""
    if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
        return convert_to_tensor(x)
    return convert_to_tensor(x, dtype=like.dtype)


def _idx(indices) -> Tensor:
    return convert_to_tensor(indices)


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None):
    """var -= alpha * delta (tf.raw_ops.ApplyGradientDescent); returns the updated variable."""
    v = _ref(var)
    return ApplyGradientDescent(v, _val(alpha, v), _val(delta, v), use_locking=bool(use_locking), name=name)


def apply_momentum(var, accum, lr, grad, momentum, use_locking=False, use_nesterov=False, name=None):
    """accum = momentum * accum + grad; var -= lr * accum, or with Nesterov
    var -= lr * (grad + momentum * accum) (tf.raw_ops.ApplyMomentum)."""
    v = _ref(var)
    return ApplyMomentum(v, _ref(accum), _val(lr, v), _val(grad, v), _val(momentum, v),
                         use_locking=bool(use_locking), use_nesterov=bool(use_nesterov), name=name)


def apply_adagrad(var, accum, lr, grad, use_locking=False, update_slots=True, name=None):
    """accum += grad**2; var -= lr * grad / sqrt(accum) (tf.raw_ops.ApplyAdagrad)."""
    v = _ref(var)
    return ApplyAdagrad(v, _ref(accum), _val(lr, v), _val(grad, v), use_locking=bool(use_locking),
                        update_slots=bool(update_slots), name=name)


def apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False, name=None):
    """ms = rho*ms + (1-rho)*grad**2; mom = momentum*mom + lr*grad/sqrt(ms+epsilon); var -= mom
    (tf.raw_ops.ApplyRMSProp)."""
    v = _ref(var)
    return ApplyRMSProp(v, _ref(ms), _ref(mom), *[_val(x, v) for x in (lr, rho, momentum, epsilon, grad)],
                        use_locking=bool(use_locking), name=name)


def apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False, name=None):
    """Centered RMSProp: also tracks mg, the mean gradient, and divides by sqrt(ms - mg**2 + epsilon)
    (tf.raw_ops.ApplyCenteredRMSProp)."""
    v = _ref(var)
    return ApplyCenteredRMSProp(v, _ref(mg), _ref(ms), _ref(mom),
                                *[_val(x, v) for x in (lr, rho, momentum, epsilon, grad)],
                                use_locking=bool(use_locking), name=name)


def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking=False,
               use_nesterov=False, name=None):
    """One Adam step (tf.raw_ops.ApplyAdam): lr_t = lr*sqrt(1-beta2_power)/(1-beta1_power);
    m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g**2; var -= lr_t*m/(sqrt(v)+epsilon)."""
    r = _ref(var)
    return ApplyAdam(r, _ref(m), _ref(v),
                     *[_val(x, r) for x in (beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)],
                     use_locking=bool(use_locking), use_nesterov=bool(use_nesterov), name=name)


def sparse_apply_gradient_descent(var, alpha, grad, indices, use_locking=False, name=None):
    """var[indices[i]] -= alpha * grad[i], rows in order (actorflow's SparseApplyGradientDescent)."""
    v = _ref(var)
    return SparseApplyGradientDescent(v, _val(alpha, v), _val(grad, v), _idx(indices),
                                      use_locking=bool(use_locking), name=name)


def sparse_apply_momentum(var, accum, lr, grad, indices, momentum, use_locking=False, use_nesterov=False,
                          name=None):
    """ApplyMomentum on the rows `indices` only (tf.raw_ops.SparseApplyMomentum)."""
    v = _ref(var)
    return SparseApplyMomentum(v, _ref(accum), _val(lr, v), _val(grad, v), _idx(indices), _val(momentum, v),
                               use_locking=bool(use_locking), use_nesterov=bool(use_nesterov), name=name)


def sparse_apply_adagrad(var, accum, lr, grad, indices, use_locking=False, update_slots=True, name=None):
    """ApplyAdagrad on the rows `indices` only (tf.raw_ops.SparseApplyAdagrad)."""
    v = _ref(var)
    return SparseApplyAdagrad(v, _ref(accum), _val(lr, v), _val(grad, v), _idx(indices),
                              use_locking=bool(use_locking), update_slots=bool(update_slots), name=name)


def sparse_apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, indices, use_locking=False, name=None):
    """ApplyRMSProp on the rows `indices` only (tf.raw_ops.SparseApplyRMSProp)."""
    v = _ref(var)
    return SparseApplyRMSProp(v, _ref(ms), _ref(mom), *[_val(x, v) for x in (lr, rho, momentum, epsilon, grad)],
                              _idx(indices), use_locking=bool(use_locking), name=name)


def sparse_apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices,
                                   use_locking=False, name=None):
    """ApplyCenteredRMSProp on the rows `indices` only (tf.raw_ops.SparseApplyCenteredRMSProp)."""
    v = _ref(var)
    return SparseApplyCenteredRMSProp(v, _ref(mg), _ref(ms), _ref(mom),
                                      *[_val(x, v) for x in (lr, rho, momentum, epsilon, grad)], _idx(indices),
                                      use_locking=bool(use_locking), name=name)


def sparse_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                      use_locking=False, name=None):
    """Lazy Adam: the Adam step on the rows `indices` only; other rows of m and v do not decay
    (actorflow's SparseApplyAdam; like tf.contrib.opt.LazyAdamOptimizer)."""
    r = _ref(var)
    return SparseApplyAdam(r, _ref(m), _ref(v),
                           *[_val(x, r) for x in (beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)],
                           _idx(indices), use_locking=bool(use_locking), name=name)


def _step(global_step) -> Tensor:
    """AdagradDA's global step: an integer scalar tensor (Python ints become int64, as in TF)."""
    if isinstance(global_step, Tensor) or hasattr(global_step, "_as_graph_element"):
        return convert_to_tensor(global_step)
    from actorflow.graph import dtypes
    return convert_to_tensor(global_step, dtype=dtypes.int64)


def apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad, use_locking=False, name=None):
    """accum = rho*accum + (1-rho)*grad**2; update = sqrt(accum_update+epsilon)/sqrt(accum+epsilon)*grad;
    var -= lr*update; accum_update = rho*accum_update + (1-rho)*update**2 (tf.raw_ops.ApplyAdadelta)."""
    v = _ref(var)
    return ApplyAdadelta(v, _ref(accum), _ref(accum_update), *[_val(x, v) for x in (lr, rho, epsilon, grad)],
                         use_locking=bool(use_locking), name=name)


def apply_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power, use_locking=False, multiply_linear_by_lr=False,
               name=None):
    """One FTRL-proximal step (tf.raw_ops.ApplyFtrl): new_accum = accum + grad**2;
    linear += grad - (new_accum**-lr_power - accum**-lr_power)/lr * var;
    var = (clip(linear, -l1, l1) - linear) / (new_accum**-lr_power/lr + 2*l2); accum = new_accum.
    lr_power == -0.5 uses sqrt, as TF's fast path does."""
    v = _ref(var)
    return ApplyFtrl(v, _ref(accum), _ref(linear), *[_val(x, v) for x in (grad, lr, l1, l2, lr_power)],
                     use_locking=bool(use_locking), multiply_linear_by_lr=bool(multiply_linear_by_lr), name=name)


def apply_ftrl_v2(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power, use_locking=False,
                  multiply_linear_by_lr=False, name=None):
    """ApplyFtrl with L2 shrinkage: linear sees grad + 2*l2_shrinkage*var (accum still sees grad)
    (tf.raw_ops.ApplyFtrlV2)."""
    v = _ref(var)
    return ApplyFtrlV2(v, _ref(accum), _ref(linear),
                       *[_val(x, v) for x in (grad, lr, l1, l2, l2_shrinkage, lr_power)],
                       use_locking=bool(use_locking), multiply_linear_by_lr=bool(multiply_linear_by_lr), name=name)


def apply_proximal_gradient_descent(var, alpha, l1, l2, delta, use_locking=False, name=None):
    """prox = var - alpha*delta; var = sign(prox)*max(|prox| - alpha*l1, 0)/(1 + alpha*l2)
    (tf.raw_ops.ApplyProximalGradientDescent)."""
    v = _ref(var)
    return ApplyProximalGradientDescent(v, *[_val(x, v) for x in (alpha, l1, l2, delta)],
                                        use_locking=bool(use_locking), name=name)


def apply_proximal_adagrad(var, accum, lr, l1, l2, grad, use_locking=False, name=None):
    """accum += grad**2; ApplyProximalGradientDescent with the step lr/sqrt(accum)
    (tf.raw_ops.ApplyProximalAdagrad)."""
    v = _ref(var)
    return ApplyProximalAdagrad(v, _ref(accum), *[_val(x, v) for x in (lr, l1, l2, grad)],
                                use_locking=bool(use_locking), name=name)


def apply_adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2, global_step,
                     use_locking=False, name=None):
    """Adagrad dual averaging (tf.raw_ops.ApplyAdagradDA): g_acc += grad; gg_acc += grad**2;
    var = -sign(g_acc)*lr*max(|g_acc| - l1*t, 0)/(l2*t*lr + sqrt(gg_acc)) with t = global_step."""
    v = _ref(var)
    return ApplyAdagradDA(v, _ref(gradient_accumulator), _ref(gradient_squared_accumulator),
                          *[_val(x, v) for x in (grad, lr, l1, l2)], _step(global_step),
                          use_locking=bool(use_locking), name=name)


def sparse_apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad, indices, use_locking=False, name=None):
    """ApplyAdadelta on the rows `indices` only, in order (tf.raw_ops.SparseApplyAdadelta)."""
    v = _ref(var)
    return SparseApplyAdadelta(v, _ref(accum), _ref(accum_update), *[_val(x, v) for x in (lr, rho, epsilon, grad)],
                               _idx(indices), use_locking=bool(use_locking), name=name)


def sparse_apply_ftrl(var, accum, linear, grad, indices, lr, l1, l2, lr_power, use_locking=False,
                      multiply_linear_by_lr=False, name=None):
    """ApplyFtrl on the rows `indices` only, in order (tf.raw_ops.SparseApplyFtrl)."""
    v = _ref(var)
    return SparseApplyFtrl(v, _ref(accum), _ref(linear), _val(grad, v), _idx(indices),
                           *[_val(x, v) for x in (lr, l1, l2, lr_power)], use_locking=bool(use_locking),
                           multiply_linear_by_lr=bool(multiply_linear_by_lr), name=name)


def sparse_apply_ftrl_v2(var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power, use_locking=False,
                         multiply_linear_by_lr=False, name=None):
    """ApplyFtrlV2 on the rows `indices` only, in order (tf.raw_ops.SparseApplyFtrlV2)."""
    v = _ref(var)
    return SparseApplyFtrlV2(v, _ref(accum), _ref(linear), _val(grad, v), _idx(indices),
                             *[_val(x, v) for x in (lr, l1, l2, l2_shrinkage, lr_power)],
                             use_locking=bool(use_locking), multiply_linear_by_lr=bool(multiply_linear_by_lr),
                             name=name)


def sparse_apply_proximal_gradient_descent(var, alpha, l1, l2, grad, indices, use_locking=False, name=None):
    """ApplyProximalGradientDescent on the rows `indices` only, in order
    (tf.raw_ops.SparseApplyProximalGradientDescent)."""
    v = _ref(var)
    return SparseApplyProximalGradientDescent(v, *[_val(x, v) for x in (alpha, l1, l2, grad)], _idx(indices),
                                              use_locking=bool(use_locking), name=name)


def sparse_apply_proximal_adagrad(var, accum, lr, l1, l2, grad, indices, use_locking=False, name=None):
    """ApplyProximalAdagrad on the rows `indices` only, in order (tf.raw_ops.SparseApplyProximalAdagrad)."""
    v = _ref(var)
    return SparseApplyProximalAdagrad(v, _ref(accum), *[_val(x, v) for x in (lr, l1, l2, grad)], _idx(indices),
                                      use_locking=bool(use_locking), name=name)


def sparse_apply_adagrad_da(var, gradient_accumulator, gradient_squared_accumulator, grad, indices, lr, l1, l2,
                            global_step, use_locking=False, name=None):
    """ApplyAdagradDA on the rows `indices` only, in order (tf.raw_ops.SparseApplyAdagradDA)."""
    v = _ref(var)
    return SparseApplyAdagradDA(v, _ref(gradient_accumulator), _ref(gradient_squared_accumulator), _val(grad, v),
                                _idx(indices), *[_val(x, v) for x in (lr, l1, l2)], _step(global_step),
                                use_locking=bool(use_locking), name=name)
