"""RunConfig: where and how often an Estimator checkpoints, logs and summarizes (tf.estimator.RunConfig)."""
from __future__ import annotations

import copy

__all__ = ["RunConfig"]

_DEFAULT_SAVE_SECS = 600


class RunConfig:
    """An Estimator's run settings (tf.estimator.RunConfig, TF 1.15's defaults).

    Checkpoints every 600 seconds unless `save_checkpoints_steps` or `save_checkpoints_secs` says
    otherwise (not both); summaries every 100 steps, loss and steps/sec logged every 100 steps; five
    checkpoints kept. The distribution fields of TF are accepted and kept; training here is local
    (one chief), so `is_chief` is True and there are no replicas.
    """

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100, save_checkpoints_steps=None,
                 save_checkpoints_secs=None, session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100, train_distribute=None,
                 device_fn=None, protocol=None, eval_distribute=None, experimental_distribute=None,
                 experimental_max_worker_delay_secs=None, session_creation_timeout_secs=7200):
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError("Can not provide both save_checkpoints_steps and save_checkpoints_secs.")
        if save_checkpoints_steps is None and save_checkpoints_secs is None:
            save_checkpoints_secs = _DEFAULT_SAVE_SECS
        for name, v in (("save_summary_steps", save_summary_steps), ("save_checkpoints_steps", save_checkpoints_steps),
                        ("save_checkpoints_secs", save_checkpoints_secs), ("keep_checkpoint_max", keep_checkpoint_max),
                        ("log_step_count_steps", log_step_count_steps)):
            if v is not None and v < 0:
                raise ValueError(f"{name} should be >= 0, given: {v}")
        if tf_random_seed is not None and not isinstance(tf_random_seed, int):
            raise TypeError(f"tf_random_seed must be an int, given: {tf_random_seed!r}")
        self._model_dir = model_dir
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._eval_distribute = eval_distribute
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs

    model_dir = property(lambda self: self._model_dir)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    device_fn = property(lambda self: self._device_fn)
    protocol = property(lambda self: self._protocol)
    session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
    cluster_spec = property(lambda self: None)
    master = property(lambda self: "")
    evaluation_master = property(lambda self: "")
    is_chief = property(lambda self: True)
    task_type = property(lambda self: "worker")
    task_id = property(lambda self: 0)
    num_ps_replicas = property(lambda self: 0)
    num_worker_replicas = property(lambda self: 1)
    global_id_in_cluster = property(lambda self: 0)
    service = property(lambda self: None)

    _REPLACEABLE = ("model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
                    "save_checkpoints_secs", "session_config", "keep_checkpoint_max", "keep_checkpoint_every_n_hours",
                    "log_step_count_steps", "train_distribute", "device_fn", "protocol", "eval_distribute",
                    "experimental_distribute", "experimental_max_worker_delay_secs", "session_creation_timeout_secs")

    def replace(self, **kwargs):
        """A copy with the given fields replaced (RunConfig.replace); an unknown field is a ValueError."""
        for k in kwargs:
            if k not in self._REPLACEABLE:
                raise ValueError(f"{k} property is not in the set of replaceable properties: {list(self._REPLACEABLE)}")
        new = copy.copy(self)
        for k, v in kwargs.items():
            setattr(new, "_" + k, v)
        if new._save_checkpoints_steps is not None and new._save_checkpoints_secs is not None:
            if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs:
                new._save_checkpoints_secs = None
            elif "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs:
                new._save_checkpoints_steps = None
            else:
                raise ValueError("Can not provide both save_checkpoints_steps and save_checkpoints_secs.")
        return new

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, '_' + k)!r}" for k in self._REPLACEABLE[:9])
        return f"RunConfig({fields})"
