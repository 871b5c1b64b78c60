"""Object-based checkpoints in graph mode: tf.compat.v1.train.Checkpoint, CheckpointManager and
CheckpointOptions, built over af.train.Saver and its checkpoint format.

A Checkpoint tracks the objects given as keyword arguments: Variables (and PartitionedVariables),
optimizers (their slot variables for tracked variables, and their own variables, e.g. Adam's
beta powers), other Checkpoints (nested) and objects exposing `variables()`. Each variable is saved
under the key of its object path, spelled as TF's object graph spells it
("model/kernel/.ATTRIBUTES/VARIABLE_VALUE", "v/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE";
checked against TF 2.21 for variables, nested checkpoints and Adam), but the file is an
actorflow checkpoint (safetensors shards plus index, see af.train.Saver), not TF's object graph
proto: TF cannot read it, and restoring matches keys, not the object graph. Restoration is not
deferred: an object added after `restore` is not restored when created.
"""
from __future__ import annotations

import os

from actorflow.clock import time as _now
from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, get_default_session
from actorflow.graph.ops import array_ops
from actorflow.graph.variables import Variable, assign_add, variables_initializer
from actorflow.train import saver as saver_lib

__all__ = ["Checkpoint", "CheckpointManager", "CheckpointOptions"]

_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"


class CheckpointOptions:
    """Options for saving and restoring (tf.train.CheckpointOptions). Accepted for compatibility:
    actorflow writes each shard on the task that holds it, so `experimental_io_device` and
    `experimental_enable_async_checkpoint` have no effect."""

    __slots__ = ("experimental_io_device", "experimental_enable_async_checkpoint",
                 "experimental_write_callbacks", "enable_async", "experimental_sharding_callback",
                 "experimental_skip_slot_variables")

    def __init__(self, experimental_io_device=None, experimental_enable_async_checkpoint=False,
                 experimental_write_callbacks=None, enable_async=False, experimental_sharding_callback=None,
                 experimental_skip_slot_variables=False):
        self.experimental_io_device = experimental_io_device
        self.experimental_enable_async_checkpoint = bool(experimental_enable_async_checkpoint)
        self.experimental_write_callbacks = experimental_write_callbacks
        self.enable_async = bool(enable_async)
        self.experimental_sharding_callback = experimental_sharding_callback
        self.experimental_skip_slot_variables = bool(experimental_skip_slot_variables)


def _session(session):
    sess = session if session is not None else get_default_session()
    if sess is None:
        raise ValueError("Checkpoint: in graph mode a session is needed: pass session= or enter one "
                         "(with sess.as_default())")
    return sess


def _is_variable(obj) -> bool:
    return isinstance(obj, Variable) or (isinstance(obj, Tensor) and obj.op.op_def.resource == "variable")


class _LoadStatus:
    """What `Checkpoint.restore` returns (TF's CheckpointLoadStatus, graph mode): the restore ops are
    built; `run_restore_ops(session)` runs them."""

    def __init__(self, saver, save_path, matched: dict, unmatched_objects: list, unused_keys: list):
        self._saver, self._path = saver, save_path
        self._matched, self._unmatched, self._unused = matched, unmatched_objects, unused_keys

    def assert_consumed(self):
        """Raises AssertionError unless every tracked variable and every checkpoint value matched."""
        if self._unmatched or self._unused:
            raise AssertionError(f"Checkpoint {self._path}: unmatched objects {self._unmatched}, "
                                 f"unused checkpoint values {self._unused}")
        return self

    def assert_existing_objects_matched(self):
        """Raises AssertionError when a tracked variable has no value in the checkpoint."""
        if self._unmatched:
            raise AssertionError(f"Checkpoint {self._path}: no value for {self._unmatched}")
        return self

    def assert_nontrivial_match(self):
        """Raises AssertionError when nothing but the save counter matched."""
        if not [k for k in self._matched if not k.startswith("save_counter/")]:
            raise AssertionError(f"Checkpoint {self._path}: nothing matched")
        return self

    def expect_partial(self):
        return self

    def run_restore_ops(self, session=None):
        """Assigns the checkpoint's values to the matched variables."""
        if self._saver is not None:
            self._saver.restore(_session(session), self._path)

    def initialize_or_restore(self, session=None):
        """Restores the matched variables and initializes the tracked ones the checkpoint lacks."""
        sess = _session(session)
        self.run_restore_ops(sess)
        if self._unmatched_vars:
            sess.run(variables_initializer(self._unmatched_vars))


class _InitializeStatus(_LoadStatus):
    """What `restore(None)` returns: initializes every tracked variable."""

    def __init__(self, variables):
        super().__init__(None, None, {}, [], [])
        self._unmatched_vars = variables

    def assert_consumed(self):
        raise AssertionError("No checkpoint was restored (save_path=None)")

    assert_existing_objects_matched = assert_nontrivial_match = assert_consumed


class Checkpoint:
    """Groups trackable objects for saving and restoring (tf.compat.v1.train.Checkpoint, graph mode).

    `save(file_prefix, session)` writes `file_prefix-N` (N the incremented `save_counter`) and
    records it in the directory's `checkpoint` state file, keeping every checkpoint; `write` writes
    exactly `file_prefix` and records nothing. `restore(path)` returns a status whose
    `run_restore_ops(session)` assigns the values (see the module docstring for the format)."""

    def __init__(self, root=None, **kwargs):
        if root is not None:
            kwargs["root"] = root
        for name, obj in kwargs.items():
            if not (_is_variable(obj) or isinstance(obj, Checkpoint) or hasattr(obj, "_get_variable_list")
                    or hasattr(obj, "get_slot_names") or callable(getattr(obj, "variables", None))):
                raise ValueError(f"Checkpoint: `{name}` is not trackable (a Variable, optimizer, Checkpoint "
                                 f"or object with variables()): {obj!r}")
        self._objects = dict(kwargs)
        self._save_counter = None
        self._counter_ops = None      # (is_initialized, increment), built once
        self._savers: dict = {}       # (graph, keys) -> Saver, so repeated saves add no ops

    def __getattr__(self, name):
        objects = self.__dict__.get("_objects", {})
        if name in objects:
            return objects[name]
        raise AttributeError(name)

    @property
    def save_counter(self) -> Variable:
        """The number of `save` calls so far, an int64 variable saved with the checkpoint."""
        if self._save_counter is None:
            self._save_counter = Variable(array_ops.zeros([], dtypes.int64), trainable=False,
                                          name="save_counter", collections=[])
        return self._save_counter

    # -- the variables under their object paths --------------------------------------------------------
    def _flatten(self, prefix="") -> dict:
        out: dict = {}
        optimizers = []
        for name, obj in self._objects.items():
            path = f"{prefix}{name}"
            if isinstance(obj, Checkpoint):
                out.update(obj._flatten(path + "/"))
            elif _is_variable(obj):
                out[f"{path}/{_VALUE}"] = obj
            elif hasattr(obj, "_get_variable_list"):
                for i, part in enumerate(obj._get_variable_list()):
                    out[f"{path}/part_{i}/{_VALUE}"] = part
            elif hasattr(obj, "get_slot_names"):
                optimizers.append((path, obj))
            else:
                for v in obj.variables():
                    out[f"{path}/{v.op.name}/{_VALUE}"] = v
        for path, opt in optimizers:
            var_keys = {id(v): k[: -len(_VALUE) - 1] for k, v in out.items()}
            for slot in opt.get_slot_names():
                for var, slot_var in opt._slots.get(slot, {}).items():
                    if id(var) in var_keys:
                        out[f"{var_keys[id(var)]}/.OPTIMIZER_SLOT/{path}/{slot}/{_VALUE}"] = slot_var
            for (n, g), v in sorted(opt._non_slot_dict.items(), key=lambda kv: kv[0][0]):
                if g is v.graph:
                    out[f"{path}/{n}/{_VALUE}"] = v
        if not prefix and self._save_counter is not None:
            out[f"save_counter/{_VALUE}"] = self._save_counter
        return out

    # -- saving ---------------------------------------------------------------------------------------------
    def write(self, file_prefix, session=None, options=None):
        """Writes the tracked variables to exactly `file_prefix`, recording nothing in the state
        file (tf.train.Checkpoint.write); returns the prefix."""
        sess = _session(session)
        self.save_counter  # noqa: B018 - created so that it is saved
        self._init_counter(sess)
        return self._saver_for(self._flatten()).save(sess, os.fspath(file_prefix), write_state=False)

    def _saver_for(self, var_dict: dict):
        key = (self.save_counter.graph, tuple(sorted((k, id(v)) for k, v in var_dict.items())))
        saver = self._savers.get(key)
        if saver is None:
            saver = self._savers[key] = saver_lib.Saver(var_dict, max_to_keep=None, sharded=False)
        return saver

    def save(self, file_prefix, session=None, options=None):
        """Increments `save_counter`, writes `file_prefix-<save_counter>` and records it as the latest
        checkpoint in its directory's state file (tf.compat.v1.train.Checkpoint.save); returns the path."""
        sess = _session(session)
        n = self._increment(sess)
        path = self.write(f"{os.fspath(file_prefix)}-{n}", sess)
        d = os.path.dirname(os.path.abspath(path))
        state = saver_lib.get_checkpoint_state(d)
        paths = list(state.all_model_checkpoint_paths) if state is not None else []
        paths = [p for p in paths if os.path.abspath(p) != os.path.abspath(path)] + [path]
        saver_lib.update_checkpoint_state(d, path, paths)
        return path

    def _init_counter(self, sess):
        from actorflow.graph.variables import is_variable_initialized
        c = self.save_counter
        if self._counter_ops is None:
            self._counter_ops = (is_variable_initialized(c), assign_add(c, 1))
        if not sess.run(self._counter_ops[0]):
            sess.run(c.initializer)

    def _increment(self, sess) -> int:
        self._init_counter(sess)
        return int(sess.run(self._counter_ops[1]))

    # -- restoring -------------------------------------------------------------------------------------------
    def restore(self, save_path, options=None):
        """Builds the ops restoring the tracked variables whose keys the checkpoint holds
        (tf.compat.v1.train.Checkpoint.restore); returns a status to run them with
        (`run_restore_ops(session)`, `initialize_or_restore(session)`) and to check the match
        (`assert_consumed()`, `assert_existing_objects_matched()`). `save_path=None` returns a status
        whose `initialize_or_restore` initializes every tracked variable."""
        self.save_counter  # noqa: B018
        tracked = self._flatten()
        if save_path is None:
            return _InitializeStatus(list(tracked.values()))
        save_path = os.fspath(save_path)
        keys = {name for name, _ in saver_lib.list_variables(save_path)}
        matched = {k: v for k, v in tracked.items() if k in keys}
        unmatched = sorted(k for k in tracked if k not in keys and not k.startswith("save_counter/"))
        unused = sorted(keys - set(tracked))
        saver = self._saver_for(matched) if matched else None
        status = _LoadStatus(saver, save_path, matched, unmatched, unused)
        status._unmatched_vars = [tracked[k] for k in tracked if k not in keys]
        return status


class CheckpointManager:
    """Keeps the last `max_to_keep` checkpoints of a Checkpoint in `directory`
    (tf.train.CheckpointManager, graph mode: `save` takes `session=` or uses the default session).

    Checkpoints are `directory/checkpoint_name-N`, N the `checkpoint_number` given to `save` or the
    checkpoint's incremented `save_counter`. Older ones are deleted beyond `max_to_keep` (None keeps
    all), except one every `keep_checkpoint_every_n_hours`. The `checkpoint` state file lists the
    kept ones; a new manager over the same directory picks them up, as in TF. `step_counter` and
    `checkpoint_interval` (and `save`'s `check_interval`) are accepted but not supported: every
    `save` writes."""

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None, init_fn=None):
        if checkpoint_interval is not None:
            raise NotImplementedError("CheckpointManager: checkpoint_interval is not supported")
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"CheckpointManager: expected a Checkpoint, got {type(checkpoint).__name__}")
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"CheckpointManager: max_to_keep must be positive or None, got {max_to_keep}")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._keep_hours = keep_checkpoint_every_n_hours
        self._name = checkpoint_name
        self._init_fn = init_fn
        state = saver_lib.get_checkpoint_state(self._directory)
        now = _now()
        self._last_preserved = now
        self._maybe: list[tuple[str, float]] = []
        self._latest = None
        if state is not None:
            times = list(getattr(state, "all_model_checkpoint_timestamps", []) or [])
            paths = list(state.all_model_checkpoint_paths)
            if len(times) != len(paths):
                times = [now] * len(paths)
            self._maybe = [(p, t) for p, t in zip(paths, times) if saver_lib.checkpoint_exists(p)]
            self._latest = state.model_checkpoint_path
            preserved = getattr(state, "last_preserved_timestamp", None)
            if preserved:
                self._last_preserved = preserved

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        return self._checkpoint

    @property
    def latest_checkpoint(self):
        """The newest checkpoint's prefix, or None."""
        return self._latest

    @property
    def checkpoints(self) -> list:
        """The kept checkpoints' prefixes, oldest first."""
        return [p for p, _ in self._maybe]

    def restore_or_initialize(self, session=None):
        """Restores the latest checkpoint, or runs `init_fn` (else initializes the tracked variables)
        when there is none; returns the restored path or None."""
        if self._latest is not None:
            self._checkpoint.restore(self._latest).initialize_or_restore(session)
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        else:
            self._checkpoint.restore(None).initialize_or_restore(session)
        return None

    def save(self, checkpoint_number=None, check_interval=True, options=None, session=None):
        """Writes a checkpoint, records it, deletes the ones beyond `max_to_keep`; returns its path."""
        sess = _session(session)
        ckpt = self._checkpoint
        n = ckpt._increment(sess)
        if checkpoint_number is not None:
            n = int(sess.run(checkpoint_number)) if isinstance(checkpoint_number, (Tensor, Variable)) \
                else int(checkpoint_number)
        path = ckpt.write(os.path.join(self._directory, f"{self._name}-{n}"), sess)
        now = _now()
        self._maybe = [(p, t) for p, t in self._maybe if os.path.abspath(p) != os.path.abspath(path)]
        self._maybe.append((path, now))
        self._latest = path
        self._sweep()
        saver_lib.update_checkpoint_state(self._directory, path, self.checkpoints,
                                          all_model_checkpoint_timestamps=[t for _, t in self._maybe],
                                          last_preserved_timestamp=self._last_preserved)
        return path

    def _sweep(self):
        if self._max_to_keep is None:
            return
        while len(self._maybe) > self._max_to_keep:
            p, t = self._maybe.pop(0)
            if self._keep_hours is not None and t - self._keep_hours * 3600 >= self._last_preserved:
                self._last_preserved = t
                continue
            saver_lib._delete_checkpoint(os.path.abspath(p))
