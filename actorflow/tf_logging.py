"""af.logging: TF-1.x's logging functions (tf.compat.v1.logging) over Python's logging.

They log to the "actorflow" logger, the parent of every library module's logger, so
`af.logging.set_verbosity(af.logging.INFO)` shows the library's INFO records too, as TF's does for
"tensorflow". As in TF, the first use adds a stderr handler to that logger when the root logger has
none (stdout in an interactive session, at INFO), so `af.logging.info(...)` is seen without
configuring logging; an application that configures the root logger keeps full control.

Differs from TF: `fatal` logs at FATAL (CRITICAL) without exiting, as TF's Python `fatal` does.
"""
from __future__ import annotations

import logging as _logging
import sys as _sys
import threading as _threading

__all__ = ["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "get_logger", "set_verbosity", "get_verbosity",
           "log", "debug", "info", "warn", "warning", "error", "fatal", "vlog", "log_every_n", "log_first_n",
           "log_if", "flush"]

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARN
WARNING = _logging.WARNING
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger = None
_logger_lock = _threading.Lock()
_log_counter_per_token: dict = {}


def get_logger() -> _logging.Logger:
    """The "actorflow" logger, given a stderr handler on first use when the root logger has none
    (tf.get_logger)."""
    global _logger
    if _logger is not None:
        return _logger
    with _logger_lock:
        if _logger is not None:
            return _logger
        logger = _logging.getLogger("actorflow")
        if not _logging.getLogger().handlers and not logger.handlers:
            interactive = hasattr(_sys, "ps1") or bool(_sys.flags.interactive)
            if interactive:
                logger.setLevel(INFO)
            handler = _logging.StreamHandler(_sys.stdout if interactive else _sys.stderr)
            handler.setFormatter(_logging.Formatter(_logging.BASIC_FORMAT, None))
            logger.addHandler(handler)
        _logger = logger
        return _logger


def set_verbosity(v) -> None:
    """Sets the threshold of the "actorflow" logger (tf.compat.v1.logging.set_verbosity)."""
    get_logger().setLevel(v)


def get_verbosity() -> int:
    """The effective threshold of the "actorflow" logger (tf.compat.v1.logging.get_verbosity)."""
    return get_logger().getEffectiveLevel()


# stacklevel=2 attributes each record to the caller's file and line, not to this module.
def log(level, msg, *args, **kwargs):
    """Logs `msg % args` at `level` (tf.compat.v1.logging.log)."""
    get_logger().log(level, msg, *args, stacklevel=2, **kwargs)


def debug(msg, *args, **kwargs):
    """Logs at DEBUG (tf.compat.v1.logging.debug)."""
    get_logger().debug(msg, *args, stacklevel=2, **kwargs)


def info(msg, *args, **kwargs):
    """Logs at INFO (tf.compat.v1.logging.info)."""
    get_logger().info(msg, *args, stacklevel=2, **kwargs)


def warning(msg, *args, **kwargs):
    """Logs at WARNING (tf.compat.v1.logging.warning)."""
    get_logger().warning(msg, *args, stacklevel=2, **kwargs)


def warn(msg, *args, **kwargs):
    """Logs at WARNING (tf.compat.v1.logging.warn, TF's old name)."""
    get_logger().warning(msg, *args, stacklevel=2, **kwargs)


def error(msg, *args, **kwargs):
    """Logs at ERROR (tf.compat.v1.logging.error)."""
    get_logger().error(msg, *args, stacklevel=2, **kwargs)


def fatal(msg, *args, **kwargs):
    """Logs at FATAL (tf.compat.v1.logging.fatal); does not exit, as TF's does not."""
    get_logger().critical(msg, *args, stacklevel=2, **kwargs)


def vlog(level, msg, *args, **kwargs):
    """Logs at the numeric `level` (tf.compat.v1.logging.vlog)."""
    get_logger().log(level, msg, *args, stacklevel=2, **kwargs)


def _caller_token():
    # The call site (file, line) two frames up: the caller of log_every_n / log_first_n.
    f = _sys._getframe(2)
    return f.f_code.co_filename, f.f_lineno


def _next_count(token) -> int:
    with _logger_lock:
        n = _log_counter_per_token.get(token, -1) + 1
        _log_counter_per_token[token] = n
        return n


def log_every_n(level, msg, n, *args):
    """Logs `msg % args` at `level` on the 1st, (n+1)th, (2n+1)th... call from the same source line
    (tf.compat.v1.logging.log_every_n)."""
    count = _next_count(_caller_token())
    if count % n == 0:
        get_logger().log(level, msg, *args, stacklevel=2)


def log_first_n(level, msg, n, *args):
    """Logs `msg % args` at `level` only on the first `n` calls from the same source line
    (tf.compat.v1.logging.log_first_n)."""
    count = _next_count(_caller_token())
    if count < n:
        get_logger().log(level, msg, *args, stacklevel=2)


def log_if(level, msg, condition, *args):
    """Logs `msg % args` at `level` when `condition` is true (tf.compat.v1.logging.log_if)."""
    if condition:
        get_logger().log(level, msg, *args, stacklevel=2)


def flush():
    """Flushes the handlers of the "actorflow" logger (tf.compat.v1.logging.flush)."""
    for h in get_logger().handlers:
        h.flush()
