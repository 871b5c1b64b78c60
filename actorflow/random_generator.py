"""tf.random.Generator in graph mode: a random-number generator whose state is a variable.

A Generator's state is an int64 Variable [key, counter]. Each sampling op adds 1 to the counter
(one AssignAdd, atomic in the variable's resource actor) and draws with the stateless sampler of
the updated [key, counter] as its seed, so every op and every run gets a fresh, reproducible
stream. Differences from TF: the state has 2 elements, not Philox's 3, and the numbers are
actorflow's Philox stream, not TF's bits; `alg` is recorded but there is one algorithm.
"""
from __future__ import annotations

import enum
import weakref

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import get_default_graph, name_scope
from actorflow.graph.ops import random_more_ops as _sl
from actorflow.graph.variables import Variable, assign, assign_add

__all__ = ["Algorithm", "Generator", "create_rng_state", "get_global_generator", "set_global_generator"]

_STATE_SIZE = 2
_MASK63 = (1 << 63) - 1


class Algorithm(enum.Enum):
    """RNG algorithms (tf.random.Algorithm). actorflow has one (its Philox stream) for all three."""
    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


def _alg(alg):
    if alg is None or alg == "auto_select":
        return Algorithm.AUTO_SELECT
    if isinstance(alg, Algorithm):
        return alg
    if isinstance(alg, str):
        return Algorithm[alg.upper()]
    return Algorithm(int(alg))


def create_rng_state(seed, alg):
    """The initial state [key, counter] (int64 numpy array) for `seed`, an int
    (tf.random.create_rng_state; TF's Philox state has 3 elements, this one 2)."""
    _alg(alg)
    key = np.random.SeedSequence(int(seed) & ((1 << 64) - 1)).generate_state(1, np.uint64)[0]
    return np.array([int(key) & _MASK63, 0], np.int64)


class Generator:
    """A random-number generator whose state is a Variable (tf.random.Generator, graph mode).
    Build with `Generator.from_seed(seed)`, `from_non_deterministic_state()` or
    `from_state(state, alg)`; run `initializer` (or the global variables initializer) first.
    `copy_from` copies the other generator's initial state (TF copies its current state)."""

    def __init__(self, copy_from=None, state=None, alg=None):
        from actorflow.graph.graph import convert_to_tensor
        if copy_from is not None:
            if state is not None:
                raise ValueError("Generator: give copy_from or state, not both")
            state, alg = copy_from._init_state, copy_from.algorithm
        if state is None:
            raise ValueError("Generator: needs a state (use Generator.from_seed)")
        self._alg = _alg(alg)
        with name_scope("Generator"):
            self._init_state = convert_to_tensor(np.asarray(state, np.int64) if isinstance(state, (list, tuple))
                                                 else state, dtype=dtypes.int64, name="initial_state")
            self._state = Variable(self._init_state, trainable=False, name="state")
        if self._state.shape.as_list() != [_STATE_SIZE]:
            raise ValueError(f"Generator: the state must have shape [{_STATE_SIZE}], got {self._state.shape}")

    @classmethod
    def from_seed(cls, seed, alg=None):
        return cls(state=create_rng_state(seed, alg), alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg=None):
        return cls.from_seed(int(np.random.SeedSequence().entropy & _MASK63), alg)

    @classmethod
    def from_state(cls, state, alg):
        return cls(state=state, alg=alg)

    @classmethod
    def from_key_counter(cls, key, counter, alg):
        return cls(state=np.array([int(np.asarray(key).reshape(-1)[0]), int(np.asarray(counter).reshape(-1)[0])],
                                  np.int64), alg=alg)

    @property
    def state(self) -> Variable:
        return self._state

    @property
    def algorithm(self) -> Algorithm:
        return self._alg

    @property
    def key(self):
        return self._state[0]

    @property
    def initializer(self):
        return self._state.initializer

    def reset(self, state):
        """An op setting the state."""
        return assign(self._state, np.asarray(state, np.int64) if isinstance(state, (list, tuple)) else state)

    def reset_from_seed(self, seed):
        """An op resetting the state to `create_rng_state(seed)`."""
        return self.reset(create_rng_state(seed, self._alg))

    def skip(self, delta):
        """An op advancing the counter by `delta` draws."""
        return assign_add(self._state, np.array([0, int(delta)], np.int64))

    def _seed(self):
        # The updated [key, counter]: one atomic AssignAdd per sampling op.
        return assign_add(self._state, np.array([0, 1], np.int64))

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        return _sl.stateless_normal(shape, self._seed(), mean, stddev, dtype, name)

    def uniform(self, shape, minval=0, maxval=None, dtype=dtypes.float32, name=None):
        dtype = dtypes.as_dtype(dtype)
        if dtype.is_integer:
            if maxval is None:
                if minval not in (0, None):
                    raise ValueError("Generator.uniform: an integer dtype with maxval=None needs minval=None")
                return _sl.stateless_uniform_full_int(shape, self._seed(), dtype, name)
            from actorflow.graph.ops import math_ops
            u = _sl.stateless_uniform(shape, self._seed(), dtype=dtypes.float64)
            span = math_ops.cast(maxval, dtypes.float64) - math_ops.cast(minval, dtypes.float64)
            return math_ops.cast(math_ops.floor(u * span), dtype) + math_ops.cast(minval, dtype)
        return _sl.stateless_uniform(shape, self._seed(), minval, maxval, dtype, name)

    def uniform_full_int(self, shape, dtype=dtypes.int64, name=None):
        """Integers over int32's or int64's whole range (TF's default uint64 is not an actorflow dtype)."""
        return _sl.stateless_uniform_full_int(shape, self._seed(), dtype, name)

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        return _sl.stateless_truncated_normal(shape, self._seed(), mean, stddev, dtype, name)

    def binomial(self, shape, counts, probs, dtype=dtypes.int32, name=None):
        return _sl.stateless_binomial(shape, self._seed(), counts, probs, dtype, name)

    def make_seeds(self, count=1):
        """[2, count] int64 seeds for the stateless samplers."""
        from actorflow.graph.ops import array_ops
        return array_ops.transpose(_sl.stateless_uniform_full_int([count, 2], self._seed(), dtypes.int64))

    def split(self, count=1):
        """`count` new Generators. Their states derive from this generator's key and the number of
        earlier splits, not from its counter (unlike TF, splitting does not advance this generator),
        so that their initializers can run with this one's: initialize all together."""
        from actorflow.graph.ops import array_ops, math_ops
        self._splits = getattr(self, "_splits", 0) + 1
        key = self._init_state[0]
        seed = array_ops.stack([key, np.int64(-self._splits)])
        seeds = _sl.stateless_uniform_full_int([count], seed, dtypes.int64)
        out = []
        for i in range(count):
            st = array_ops.stack([math_ops.abs(seeds[i]), np.int64(0)])
            out.append(Generator(state=st, alg=self._alg))
        return out


_globals: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_global_generator() -> Generator:
    """The default graph's global Generator, made (non-deterministically seeded) on first use
    (tf.random.get_global_generator; one per graph here, since its state is a graph's variable)."""
    g = get_default_graph()
    gen = _globals.get(g)
    if gen is None:
        gen = _globals[g] = Generator.from_non_deterministic_state()
    return gen


def set_global_generator(generator: Generator) -> None:
    """Makes `generator` the default graph's global Generator (tf.random.set_global_generator)."""
    if not isinstance(generator, Generator):
        raise TypeError(f"set_global_generator: expected a Generator, got {type(generator).__name__}")
    _globals[get_default_graph()] = generator
