"""af.keras.callbacks: hooks into `Model.fit` (tf.keras.callbacks of TF 1.x): History,
EarlyStopping, ModelCheckpoint, LambdaCallback, LearningRateScheduler, ReduceLROnPlateau,
TerminateOnNaN, CSVLogger, ProgbarLogger and TensorBoard (epoch scalars through
af.summary.FileWriter).

ModelCheckpoint writes what `save_weights` or `Model.save` write (actorflow's formats; an `.h5`
path needs h5py).
"""
from __future__ import annotations

import csv
import logging
import math
import sys

import numpy as np

from actorflow.keras import backend as K

__all__ = ["Callback", "CallbackList", "History", "ProgbarLogger", "EarlyStopping", "ModelCheckpoint",
           "LambdaCallback", "LearningRateScheduler", "ReduceLROnPlateau", "TerminateOnNaN", "CSVLogger",
           "TensorBoard"]

logger = logging.getLogger(__name__)


class Callback:
    """Base class: override the on_* methods; `self.model` and `self.params` are set by fit."""

    def __init__(self):
        self.model = None
        self.params = {}
        self.validation_data = None

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    on_train_batch_begin = on_batch_begin
    on_train_batch_end = on_batch_end


class CallbackList:
    """Calls each callback in turn."""

    def __init__(self, callbacks=None):
        self.callbacks = list(callbacks or [])

    def __getattr__(self, name):
        if not name.startswith(("on_", "set_")):
            raise AttributeError(name)

        def call(*args, **kwargs):
            for c in self.callbacks:
                getattr(c, name)(*args, **kwargs)
        return call


class History(Callback):
    """Records the logs of every epoch: `history[name]` is a list with one value per epoch."""

    def on_train_begin(self, logs=None):
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class ProgbarLogger(Callback):
    """Writes one line per epoch to stdout (fit's `verbose`): the output Keras's `verbose` asks for."""

    def __init__(self, stream=None):
        super().__init__()
        self.stream = stream

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("verbose"):
            (self.stream or sys.stdout).write(f"Epoch {epoch + 1}/{self.params.get('epochs')}\n")

    def on_epoch_end(self, epoch, logs=None):
        if self.params.get("verbose"):
            body = " - ".join(f"{k}: {v:.4f}" for k, v in (logs or {}).items())
            (self.stream or sys.stdout).write(f"{self.params.get('samples')} samples - {body}\n")


def _monitor_op(mode, monitor):
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "max" or (mode == "auto" and ("acc" in monitor or monitor.startswith("fmeasure"))):
        return np.greater
    return np.less


class EarlyStopping(Callback):
    """Stops training when `monitor` has not improved by `min_delta` for `patience` epochs
    (tf.keras.callbacks.EarlyStopping); `restore_best_weights` puts the best epoch's weights back."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False):
        super().__init__()
        self.monitor, self.patience, self.verbose, self.baseline = monitor, int(patience), verbose, baseline
        self.restore_best_weights = restore_best_weights
        self.monitor_op = _monitor_op(mode, monitor)
        self.min_delta = abs(min_delta) if self.monitor_op is np.greater else -abs(min_delta)
        self.stopped_epoch = 0

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = np.inf if self.monitor_op is np.less else -np.inf

    def on_epoch_end(self, epoch, logs=None):
        current = (logs or {}).get(self.monitor)
        if current is None:
            logger.warning("Early stopping conditioned on metric `%s` which is not available. Available metrics "
                           "are: %s", self.monitor, ",".join(logs or {}))
            return
        if self.monitor_op(current - self.min_delta, self.best):
            self.best = current
            self.wait = 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = epoch
                self.model.stop_training = True
                if self.restore_best_weights and self.best_weights is not None:
                    self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose:
            logger.info("Epoch %05d: early stopping", self.stopped_epoch + 1)


class ModelCheckpoint(Callback):
    """Saves the model's weights after every `period` epochs to `filepath`, which may hold
    `{epoch:02d}` and the logs' names (`{val_loss:.2f}`); with `save_best_only`, only when
    `monitor` improved (tf.keras.callbacks.ModelCheckpoint): the weights with `save_weights_only`,
    else the model (`Model.save`'s directory)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", period=1, save_freq="epoch"):
        super().__init__()
        self.filepath, self.monitor, self.verbose = filepath, monitor, verbose
        self.save_best_only, self.save_weights_only, self.period = save_best_only, save_weights_only, int(period)
        self.monitor_op = _monitor_op(mode, monitor)
        self.best = np.inf if self.monitor_op is np.less else -np.inf
        self.epochs_since_last_save = 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.epochs_since_last_save += 1
        if self.epochs_since_last_save < self.period:
            return
        self.epochs_since_last_save = 0
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                logger.warning("Can save best model only with %s available, skipping.", self.monitor)
                return
            if not self.monitor_op(current, self.best):
                return
            self.best = current
        if self.save_weights_only:
            self.model.save_weights(path, overwrite=True)
        else:
            self.model.save(path, overwrite=True)


class LambdaCallback(Callback):
    """A callback from functions: on_epoch_begin(epoch, logs), on_epoch_end(epoch, logs),
    on_batch_begin(batch, logs), on_batch_end(batch, logs), on_train_begin(logs), on_train_end(logs)."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None, on_batch_end=None,
                 on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        for name, fn in (("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                         ("on_batch_begin", on_batch_begin), ("on_batch_end", on_batch_end),
                         ("on_train_begin", on_train_begin), ("on_train_end", on_train_end)):
            if fn is not None:
                setattr(self, name, fn)
        for name, fn in kwargs.items():
            setattr(self, name, fn)


class LearningRateScheduler(Callback):
    """Sets the optimizer's `lr` at the start of each epoch to `schedule(epoch)` or
    `schedule(epoch, lr)` (tf.keras.callbacks.LearningRateScheduler)."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        opt = self.model.optimizer
        if type(opt).__name__ == "TFOptimizer":
            raise ValueError('Optimizer must have a "lr" attribute: an af.train optimizer in a Keras model has '
                             'none; use keras.optimizers')
        try:
            lr = self.schedule(epoch, float(K.get_value(opt.lr)))
        except TypeError:
            lr = self.schedule(epoch)
        if not isinstance(lr, (float, np.floating, int)):
            raise ValueError('The output of the "schedule" function should be float.')
        K.set_value(opt.lr, lr)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(K.get_value(self.model.optimizer.lr))


class ReduceLROnPlateau(Callback):
    """Multiplies `lr` by `factor` when `monitor` has not improved for `patience` epochs
    (tf.keras.callbacks.ReduceLROnPlateau)."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0, **kwargs):
        super().__init__()
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0.")
        self.monitor, self.factor, self.patience, self.min_delta = monitor, factor, patience, min_delta
        self.cooldown, self.min_lr = cooldown, min_lr
        self.monitor_op = _monitor_op(mode, monitor)

    def on_train_begin(self, logs=None):
        self.wait = self.cooldown_counter = 0
        self.best = np.inf if self.monitor_op is np.less else -np.inf

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        logs["lr"] = float(K.get_value(self.model.optimizer.lr))
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        improved = (current < self.best - self.min_delta) if self.monitor_op is np.less else \
            (current > self.best + self.min_delta)
        if improved:
            self.best, self.wait = current, 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = float(K.get_value(self.model.optimizer.lr))
                if old > self.min_lr:
                    K.set_value(self.model.optimizer.lr, max(old * self.factor, self.min_lr))
                    self.cooldown_counter, self.wait = self.cooldown, 0


class TerminateOnNaN(Callback):
    """Stops training when a batch's loss is NaN or infinite."""

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and (math.isnan(loss) or math.isinf(loss)):
            logger.warning("Batch %d: Invalid loss, terminating training", batch)
            self.model.stop_training = True


class CSVLogger(Callback):
    """Writes each epoch's logs as a CSV row to `filename`."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = filename, separator, append
        self._file = self._writer = None

    def on_train_begin(self, logs=None):
        self._file = open(self.filename, "a" if self.append else "w", newline="")  # noqa: SIM115
        self._writer = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch"] + sorted(logs), delimiter=self.sep)
            if not self.append:
                self._writer.writeheader()
        self._writer.writerow({"epoch": epoch, **logs})
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


class TensorBoard(Callback):
    """Writes each epoch's logs as scalar summaries to an event file in `log_dir` through
    af.summary.FileWriter (tf.keras.callbacks.TensorBoard; histograms, images and embeddings
    are not written). `write_graph` adds the graph."""

    def __init__(self, log_dir="./logs", histogram_freq=0, batch_size=32, write_graph=True, write_grads=False,
                 write_images=False, update_freq="epoch", **kwargs):
        super().__init__()
        self.log_dir, self.write_graph, self.update_freq = log_dir, write_graph, update_freq
        self.writer = None

    def on_train_begin(self, logs=None):
        from actorflow.summary import FileWriter
        graph = K.get_session().graph if self.write_graph else None
        self.writer = FileWriter(self.log_dir, graph=graph)

    def on_epoch_end(self, epoch, logs=None):
        from actorflow import summary
        values = [summary.Summary.Value(tag=k, simple_value=float(v)) for k, v in (logs or {}).items()
                  if k not in ("batch", "size")]
        self.writer.add_summary(summary.Summary(value=values), epoch)
        self.writer.flush()

    def on_train_end(self, logs=None):
        if self.writer is not None:
            self.writer.close()
