"""af.keras.optimizers: Keras's optimizers with their update rules, defaults and argument names
as TF 1.14/1.15 ship them (tf.keras.optimizers, the OptimizerV2 family: SGD, RMSprop, Adagrad,
Adadelta, Adam, Adamax, Nadam); checked against tf_keras's legacy optimizers (the same classes).

An optimizer keeps its hyper-parameters as variables (`lr`, alias `learning_rate`, `decay`, ...)
and the step counter `iterations`, made in the graph on first use, so that
`K.set_value(model.optimizer.lr, 0.01)` changes the rate of a compiled model.
`get_updates(loss, params)` returns the ops of one step: every new value is computed from the
values read at the start of the step, then assigned (with each weight's constraint applied), as
Keras's optimizers do. `lr` and `learning_rate` are both accepted; `decay` scales the rate by
1 / (1 + decay * iterations); `clipnorm` and `clipvalue` clip each gradient. An af.train
optimizer may be given to `Model.compile` as well (TFOptimizer wraps it).
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, get_default_graph
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.ops import clip_ops, math_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.variables import Variable, assign
from actorflow.keras import backend as K
from actorflow.train.optimizer import Optimizer as _TFOptimizerBase

__all__ = ["Optimizer", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adam", "Adamax", "Nadam", "TFOptimizer", "get",
           "serialize", "deserialize"]


class Optimizer:
    """Base class of Keras optimizers (tf.keras.optimizers.Optimizer of TF 1.x)."""

    _defaults: dict = {}

    def __init__(self, *args, **kwargs):
        if len(args) > len(self._defaults):
            raise TypeError(f"{type(self).__name__} takes at most {len(self._defaults)} positional arguments "
                            f"({', '.join(self._defaults)}), got {len(args)}")
        for k, v in zip(self._defaults, args):
            if k in kwargs or (k == "lr" and "learning_rate" in kwargs):
                raise TypeError(f"{type(self).__name__}: got multiple values for argument {k!r}")
            kwargs[k] = v
        if "learning_rate" in kwargs:
            kwargs["lr"] = kwargs.pop("learning_rate")
        self.clipnorm = kwargs.pop("clipnorm", None)
        self.clipvalue = kwargs.pop("clipvalue", None)
        kwargs.pop("name", None)
        unknown = set(kwargs) - set(self._defaults)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(unknown)}")
        self._values = {**self._defaults, **kwargs}
        if self._values.get("epsilon", 0) is None:
            self._values["epsilon"] = K.epsilon()
        self.initial_decay = float(self._values.get("decay", 0.0))
        self._vars: dict = {}
        self.weights: list = []

    # -- variables ----------------------------------------------------------------------------
    def _var(self, name, value, dtype=dtypes.float32):
        g = get_default_graph()
        v = self._vars.get((g, name))
        if v is None:
            with g.as_default(), g.control_dependencies(None), g.name_scope(None), \
                    g.name_scope(type(self).__name__):
                v = Variable(np.asarray(value, dtype=dtype.as_numpy_dtype), name=name, trainable=False)
            self._vars[(g, name)] = v
        return v

    def _hyper(self, name):
        return self._var(name, self._values[name])

    @property
    def iterations(self):
        """The number of steps taken (an int64 variable)."""
        return self._var("iterations", 0, dtypes.int64)

    @property
    def lr(self):
        """The learning rate, a variable (set it with `K.set_value`)."""
        return self._hyper("lr")

    learning_rate = lr

    def __getattr__(self, name):
        values = self.__dict__.get("_values")
        if values is not None and name in values and name not in ("epsilon", "nesterov", "amsgrad", "centered",
                                                                  "schedule_decay", "initial_accumulator_value"):
            return self._hyper(name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    # -- one step -----------------------------------------------------------------------------
    def get_gradients(self, loss, params):
        """The gradients of `loss` for `params`, dense, clipped by `clipnorm`/`clipvalue`."""
        grads = K.gradients(loss, params)
        missing = [p.name for p, g in zip(params, grads) if g is None]
        if missing:
            raise ValueError(f"An operation has `None` for gradient: no gradient reaches the weights {missing} "
                             f"from the loss. Please make sure that all of your ops have a gradient defined "
                             f"(i.e. are differentiable).")
        grads = [convert_to_tensor(g) if isinstance(g, IndexedSlices) else g for g in grads]
        if self.clipnorm is not None and self.clipnorm > 0:
            norm = math_ops.sqrt(math_ops.add_n([math_ops.reduce_sum(math_ops.square(g)) for g in grads]))
            grads = [_clip_norm(g, self.clipnorm, norm) for g in grads]
        if self.clipvalue is not None and self.clipvalue > 0:
            grads = [clip_ops.clip_by_value(g, constant(-self.clipvalue, g.dtype), constant(self.clipvalue, g.dtype))
                     for g in grads]
        return grads

    def _lr_t(self):
        lr = self.lr.value()
        if self.initial_decay > 0:
            it = math_ops.cast(self.iterations.value(), lr.dtype)
            lr = math_ops.multiply(lr, math_ops.divide(constant(1.0), math_ops.add(
                constant(1.0), math_ops.multiply(self._hyper("decay").value(), it))))
        return lr

    def get_updates(self, loss, params):
        """The ops of one step on `params` (variables) minimizing `loss`."""
        params = list(params)
        grads = self.get_gradients(loss, params)
        g = get_default_graph()
        with g.name_scope("training"), g.name_scope(type(self).__name__):
            pairs = self._rule(params, grads)          # [(variable, new value)]
            new_values = [v for _, v in pairs]
            out = []
            with g.control_dependencies([t.op for t in new_values]):
                for var, value in pairs:
                    if getattr(var, "constraint", None) is not None and any(var is p for p in params):
                        value = var.constraint(value)
                    out.append(assign(var, value, read_value=False))
                out.append(self.iterations.assign_add(constant(1, dtype=dtypes.int64), read_value=False))
        return out

    def _slots(self, params, what, value=0.0):
        slots = []
        for p in params:
            name = p.op.name.replace("/", "_") + "_" + what
            slots.append(self._var(name, np.full(p.shape.as_list(), value), p.dtype.base_dtype))
        self.weights = [self.iterations] + [v for (gr, n), v in self._vars.items() if gr is get_default_graph()
                                            and n not in ("iterations",)]
        return slots

    def get_config(self) -> dict:
        cfg = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
               for k, v in self._values.items()}
        if self.clipnorm is not None:
            cfg["clipnorm"] = self.clipnorm
        if self.clipvalue is not None:
            cfg["clipvalue"] = self.clipvalue
        return cfg

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def _rule(self, params, grads):
        raise NotImplementedError


def _clip_norm(g, clipnorm, norm):
    c = constant(clipnorm, dtype=g.dtype)
    scale = math_ops.divide(c, math_ops.maximum(norm, c))
    return math_ops.multiply(g, scale)


def _r(v):
    return v.value()


class SGD(Optimizer):
    """v = momentum * v - lr * g; p += v (nesterov: p += momentum * v - lr * g) (keras.optimizers.SGD)."""
    _defaults = {"lr": 0.01, "momentum": 0.0, "nesterov": False, "decay": 0.0}

    def _rule(self, params, grads):
        lr = self._lr_t()
        mom = self._hyper("momentum").value()
        moments = self._slots(params, "momentum")
        out = []
        for p, g, m in zip(params, grads, moments):
            v = math_ops.subtract(math_ops.multiply(mom, _r(m)), math_ops.multiply(lr, g))
            out.append((m, v))
            if self._values["nesterov"]:
                new_p = math_ops.subtract(math_ops.add(_r(p), math_ops.multiply(mom, v)), math_ops.multiply(lr, g))
            else:
                new_p = math_ops.add(_r(p), v)
            out.append((p, new_p))
        return out


class RMSprop(Optimizer):
    """RMSprop (keras.optimizers.RMSprop): a = rho * a + (1 - rho) * g**2 (with `centered`, the
    denominator is a - mg**2, mg the mean gradient); without momentum p -= lr * g / (sqrt(a) + eps),
    with it mom = momentum * mom + lr * g / sqrt(a + eps) and p -= mom (TF's ApplyRMSProp)."""
    _defaults = {"lr": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7, "centered": False, "decay": 0.0}

    def _rule(self, params, grads):
        lr, rho = self._lr_t(), self._hyper("rho").value()
        eps = constant(self._values["epsilon"])
        momentum = self._values["momentum"]
        centered = self._values["centered"]
        moms = self._slots(params, "momentum") if momentum else [None] * len(params)
        mgs = self._slots(params, "mg") if centered else [None] * len(params)
        out = []
        for p, g, a, mom, mg in zip(params, grads, self._slots(params, "rms"), moms, mgs):
            new_a = math_ops.add(math_ops.multiply(rho, _r(a)), math_ops.multiply(1.0 - rho, math_ops.square(g)))
            out.append((a, new_a))
            denom = new_a
            if mg is not None:
                new_mg = math_ops.add(math_ops.multiply(rho, _r(mg)), math_ops.multiply(1.0 - rho, g))
                out.append((mg, new_mg))
                denom = math_ops.subtract(new_a, math_ops.square(new_mg))
            if mom is not None:
                new_mom = math_ops.add(math_ops.multiply(self._hyper("momentum").value(), _r(mom)),
                                       math_ops.divide(math_ops.multiply(lr, g),
                                                       math_ops.sqrt(math_ops.add(denom, eps))))
                out.append((mom, new_mom))
                out.append((p, math_ops.subtract(_r(p), new_mom)))
            else:
                out.append((p, math_ops.subtract(_r(p), math_ops.divide(math_ops.multiply(lr, g),
                                                                        math_ops.add(math_ops.sqrt(denom), eps)))))
        return out


class Adagrad(Optimizer):
    """a += g**2 (a starting at `initial_accumulator_value`); p -= lr * g / (sqrt(a) + epsilon)
    (keras.optimizers.Adagrad)."""
    _defaults = {"lr": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7, "decay": 0.0}

    def _rule(self, params, grads):
        lr, eps = self._lr_t(), constant(self._values["epsilon"])
        out = []
        init = float(self._values["initial_accumulator_value"])
        for p, g, a in zip(params, grads, self._slots(params, "accumulator", init)):
            new_a = math_ops.add(_r(a), math_ops.square(g))
            out.append((a, new_a))
            out.append((p, math_ops.subtract(_r(p), math_ops.divide(math_ops.multiply(lr, g),
                                                                    math_ops.add(math_ops.sqrt(new_a), eps)))))
        return out


class Adadelta(Optimizer):
    """Adadelta (keras.optimizers.Adadelta): a = rho*a + (1-rho)*g**2;
    u = g * sqrt(d + eps) / sqrt(a + eps); p -= lr * u; d = rho*d + (1-rho)*u**2."""
    _defaults = {"lr": 0.001, "rho": 0.95, "epsilon": 1e-7, "decay": 0.0}

    def _rule(self, params, grads):
        lr, rho, eps = self._lr_t(), self._hyper("rho").value(), constant(self._values["epsilon"])
        out = []
        for p, g, a, d in zip(params, grads, self._slots(params, "accumulator"),
                              self._slots(params, "delta_accumulator")):
            new_a = math_ops.add(math_ops.multiply(rho, _r(a)), math_ops.multiply(1.0 - rho, math_ops.square(g)))
            upd = math_ops.divide(math_ops.multiply(g, math_ops.sqrt(math_ops.add(_r(d), eps))),
                                  math_ops.sqrt(math_ops.add(new_a, eps)))
            out.append((a, new_a))
            out.append((p, math_ops.subtract(_r(p), math_ops.multiply(lr, upd))))
            out.append((d, math_ops.add(math_ops.multiply(rho, _r(d)), math_ops.multiply(1.0 - rho,
                                                                                       math_ops.square(upd)))))
        return out


def _t(opt):
    return math_ops.cast(math_ops.add(opt.iterations.value(), constant(1, dtype=dtypes.int64)), dtypes.float32)


class Adam(Optimizer):
    """Adam (keras.optimizers.Adam): lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t);
    p -= lr_t * m / (sqrt(v) + epsilon) (with amsgrad, the running max of v)."""
    _defaults = {"lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "amsgrad": False, "decay": 0.0}

    def _rule(self, params, grads):
        lr, t = self._lr_t(), _t(self)
        b1, b2 = self._hyper("beta_1").value(), self._hyper("beta_2").value()
        eps = constant(self._values["epsilon"])
        lr_t = math_ops.multiply(lr, math_ops.divide(math_ops.sqrt(1.0 - math_ops.pow(b2, t)),
                                                     1.0 - math_ops.pow(b1, t)))
        ms, vs = self._slots(params, "m"), self._slots(params, "v")
        vhats = self._slots(params, "vhat") if self._values["amsgrad"] else [None] * len(params)
        out = []
        for p, g, m, v, vh in zip(params, grads, ms, vs, vhats):
            m_t = math_ops.add(math_ops.multiply(b1, _r(m)), math_ops.multiply(1.0 - b1, g))
            v_t = math_ops.add(math_ops.multiply(b2, _r(v)), math_ops.multiply(1.0 - b2, math_ops.square(g)))
            out += [(m, m_t), (v, v_t)]
            denom_v = v_t
            if vh is not None:
                denom_v = math_ops.maximum(_r(vh), v_t)
                out.append((vh, denom_v))
            out.append((p, math_ops.subtract(_r(p), math_ops.divide(math_ops.multiply(lr_t, m_t),
                                                                    math_ops.add(math_ops.sqrt(denom_v), eps)))))
        return out


class Adamax(Optimizer):
    """Adamax (keras.optimizers.Adamax): u = max(beta_2 * u, |g|); p -= lr / (1 - beta_1^t) * m / (u + eps)."""
    _defaults = {"lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "decay": 0.0}

    def _rule(self, params, grads):
        lr, t = self._lr_t(), _t(self)
        b1, b2 = self._hyper("beta_1").value(), self._hyper("beta_2").value()
        eps = constant(self._values["epsilon"])
        lr_t = math_ops.divide(lr, 1.0 - math_ops.pow(b1, t))
        out = []
        for p, g, m, u in zip(params, grads, self._slots(params, "m"), self._slots(params, "u")):
            m_t = math_ops.add(math_ops.multiply(b1, _r(m)), math_ops.multiply(1.0 - b1, g))
            u_t = math_ops.maximum(math_ops.multiply(b2, _r(u)), math_ops.abs(g))
            out += [(m, m_t), (u, u_t)]
            out.append((p, math_ops.subtract(_r(p), math_ops.divide(math_ops.multiply(lr_t, m_t),
                                                                    math_ops.add(u_t, eps)))))
        return out


class Nadam(Optimizer):
    """Nesterov Adam (keras.optimizers.Nadam), with Keras's momentum schedule (schedule_decay)."""
    _defaults = {"lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "schedule_decay": 0.004}

    def _rule(self, params, grads):
        lr, t = self._lr_t(), _t(self)
        b1, b2 = self._hyper("beta_1").value(), self._hyper("beta_2").value()
        eps, sd = constant(self._values["epsilon"]), self._values["schedule_decay"]
        sched = self._var("m_schedule", 1.0)
        mc_t = math_ops.multiply(b1, 1.0 - 0.5 * math_ops.pow(constant(0.96), math_ops.multiply(t, sd)))
        mc_t1 = math_ops.multiply(b1, 1.0 - 0.5 * math_ops.pow(constant(0.96), math_ops.multiply(t + 1.0, sd)))
        s_new = math_ops.multiply(_r(sched), mc_t)
        s_next = math_ops.multiply(s_new, mc_t1)
        out = [(sched, s_new)]
        for p, g, m, v in zip(params, grads, self._slots(params, "m"), self._slots(params, "v")):
            g_prime = math_ops.divide(g, 1.0 - s_new)
            m_t = math_ops.add(math_ops.multiply(b1, _r(m)), math_ops.multiply(1.0 - b1, g))
            m_prime = math_ops.divide(m_t, 1.0 - s_next)
            v_t = math_ops.add(math_ops.multiply(b2, _r(v)), math_ops.multiply(1.0 - b2, math_ops.square(g)))
            v_prime = math_ops.divide(v_t, 1.0 - math_ops.pow(b2, t))
            m_bar = math_ops.add(math_ops.multiply(1.0 - mc_t, g_prime), math_ops.multiply(mc_t1, m_prime))
            out += [(m, m_t), (v, v_t)]
            out.append((p, math_ops.subtract(_r(p), math_ops.divide(math_ops.multiply(lr, m_bar),
                                                                    math_ops.add(math_ops.sqrt(v_prime), eps)))))
        return out


class TFOptimizer(Optimizer):
    """An af.train optimizer used by a Keras model (keras.optimizers.TFOptimizer): one
    `apply_gradients` per step, counting `iterations` as its global step."""

    def __init__(self, optimizer):
        super().__init__()
        self.optimizer = optimizer

    @property
    def lr(self):
        raise AttributeError(f"TFOptimizer around {type(self.optimizer).__name__}: its learning rate is the "
                             f"af.train optimizer's own")

    def get_updates(self, loss, params):
        grads = self.get_gradients(loss, list(params))
        op = self.optimizer.apply_gradients(list(zip(grads, params)), global_step=self.iterations)
        return [op]


_BY_NAME = {"sgd": SGD, "rmsprop": RMSprop, "adagrad": Adagrad, "adadelta": Adadelta, "adam": Adam,
            "adamax": Adamax, "nadam": Nadam}


def get(identifier):
    """A Keras optimizer from a name ("adam", "sgd", ...), a config dict, a Keras optimizer or an
    af.train optimizer (wrapped in TFOptimizer)."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, _TFOptimizerBase):
        return TFOptimizer(identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier.lower())
        if cls is None:
            raise ValueError(f"Unknown optimizer: {identifier!r}; known: {sorted(_BY_NAME)}")
        return cls()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}")


def serialize(optimizer) -> dict:
    return {"class_name": type(optimizer).__name__, "config": optimizer.get_config()}


def deserialize(config, custom_objects=None):
    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or _BY_NAME.get(name.lower())
    if cls is None:
        raise ValueError(f"Unknown optimizer: {name!r}")
    return cls(**config.get("config", {}))
