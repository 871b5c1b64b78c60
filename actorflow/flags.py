"""af.flags and af.app.flags: command-line flags (tf.compat.v1.flags), built on absl-py.

Everything of `absl.flags` is here (DEFINE_string, DEFINE_integer, DEFINE_float, DEFINE_boolean /
DEFINE_bool, DEFINE_list, DEFINE_enum, DEFINE_multi_string, mark_flag_as_required, ...), as in TF.
Two TF-1.x behaviours on top of absl:
- `FLAGS` parses `sys.argv` the first time a flag's value is read, tolerating flags it does not
  know (absl alone raises UnparsedFlagAccessError), so scripts that read FLAGS without `af.app.run`
  work as they did under TF.
- the DEFINE functions accept TF's old keyword names `flag_name`, `default_value` and `docstring`.
- `FLAGS._parse_flags()`, which TF 1.0-1.4 programs call (TF 1.5+ dropped it), parses `sys.argv`.
- as TF 1.0-1.4's flags (argparse) did: a default that is a numpy scalar (``np.power(2, 7)``) is
  taken as the Python number it holds (absl raises IllegalFlagValueError), and a program may define
  a flag that absl.logging defines (``log_dir``, of the same type): the program's replaces it (absl
  raises DuplicateFlagError; absl.logging reads the flag by name and gets the program's value).
"""
from __future__ import annotations

import functools as _functools
import logging as _logging
import sys as _sys

from absl import flags as _absl_flags
from absl.flags import *  # noqa: F401,F403

_log = _logging.getLogger(__name__)

# Flags defined through these wrappers belong to the caller's module, not to this one (for --help).
_absl_flags.disclaim_key_flags()

_RENAMED_ARGUMENTS = {"flag_name": "name", "default_value": "default", "docstring": "help"}


class _FlagValuesWrapper:
    """absl's FLAGS that parses `sys.argv` (unknown flags tolerated) on first access of a value,
    as TF 1.x's tf.flags.FLAGS does."""

    def __init__(self, flag_values):
        self.__dict__["__wrapped"] = flag_values

    def __getattribute__(self, name):
        if name in ("__dict__", "_parse_flags"):
            return super().__getattribute__(name)
        return self.__dict__["__wrapped"].__getattribute__(name)

    def _parse_flags(self, args=None):
        """TF <= 1.4's FLAGS._parse_flags(): parses `args` (default sys.argv), tolerating unknown
        flags, and returns the arguments left over (the program name first). absl and TF 1.5+ lack
        it; programs of TF 1.0-1.4 call it before reading FLAGS."""
        wrapped = self.__dict__["__wrapped"]
        return wrapped(list(_sys.argv if args is None else args), known_only=True)

    def __getattr__(self, name):
        wrapped = self.__dict__["__wrapped"]
        if not wrapped.is_parsed():
            wrapped(_sys.argv, known_only=True)
        return wrapped.__getattr__(name)

    def __setattr__(self, name, value):
        return self.__dict__["__wrapped"].__setattr__(name, value)

    def __delattr__(self, name):
        return self.__dict__["__wrapped"].__delattr__(name)

    def __dir__(self):
        return self.__dict__["__wrapped"].__dir__()

    def __getitem__(self, name):
        return self.__dict__["__wrapped"].__getitem__(name)

    def __setitem__(self, name, flag):
        return self.__dict__["__wrapped"].__setitem__(name, flag)

    def __len__(self):
        return self.__dict__["__wrapped"].__len__()

    def __iter__(self):
        return self.__dict__["__wrapped"].__iter__()

    def __contains__(self, name):
        return self.__dict__["__wrapped"].__contains__(name)

    def __str__(self):
        return self.__dict__["__wrapped"].__str__()

    def __call__(self, *args, **kwargs):
        return self.__dict__["__wrapped"].__call__(*args, **kwargs)


def _unwrap(flag_values):
    return flag_values.__dict__["__wrapped"] if isinstance(flag_values, _FlagValuesWrapper) else flag_values


def _wrap_define_function(original_function):
    """TF's wrapper: accepts the old keyword names and a wrapped FLAGS as flag_values."""
    @_functools.wraps(original_function)
    def wrapper(*args, **kwargs):
        renamed = False
        for old_name, new_name in _RENAMED_ARGUMENTS.items():
            if old_name in kwargs:
                renamed = True
                kwargs[new_name] = kwargs.pop(old_name)
        if renamed:
            _log.warning("Use of the keyword argument names (flag_name, default_value, docstring) is deprecated, "
                         "please use (name, default, help) instead.")
        if "flag_values" in kwargs:
            kwargs["flag_values"] = _unwrap(kwargs["flag_values"])
        args = list(args)
        if len(args) > 1:
            args[1] = _python_scalar(args[1])
        elif "default" in kwargs:
            kwargs["default"] = _python_scalar(kwargs["default"])
        name = args[0] if args else kwargs.get("name")
        if isinstance(name, str):
            _yield_absl_logging_flag(name, original_function, kwargs.get("flag_values", _absl_flags.FLAGS))
        return original_function(*args, **kwargs)
    return wrapper


_DEFINE_TYPES = {"DEFINE_string": "string", "DEFINE_integer": "int", "DEFINE_float": "float",
                 "DEFINE_boolean": "bool", "DEFINE_bool": "bool"}


def _python_scalar(value):
    """A numpy scalar as the Python number (or bool) it holds; anything else as it is."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value


def _yield_absl_logging_flag(name, define, flag_values):
    """Removes absl.logging's flag `name` when the program defines one of the same type (TF <= 1.4
    had no absl.logging flags: its programs define ``log_dir`` freely)."""
    fv = _unwrap(flag_values)
    if name not in fv or fv.find_module_defining_flag(name) != "absl.logging":
        return
    kind = _DEFINE_TYPES.get(getattr(define, "__name__", ""))
    if kind is None or fv[name].flag_type() != kind:
        return
    _log.warning("flag --%s: the program's definition replaces absl.logging's", name)
    delattr(fv, name)


DEFINE = _wrap_define_function(_absl_flags.DEFINE)
DEFINE_flag = _wrap_define_function(_absl_flags.DEFINE_flag)
DEFINE_string = _wrap_define_function(_absl_flags.DEFINE_string)
DEFINE_boolean = _wrap_define_function(_absl_flags.DEFINE_boolean)
DEFINE_bool = DEFINE_boolean
DEFINE_float = _wrap_define_function(_absl_flags.DEFINE_float)
DEFINE_integer = _wrap_define_function(_absl_flags.DEFINE_integer)
DEFINE_enum = _wrap_define_function(_absl_flags.DEFINE_enum)
DEFINE_enum_class = _wrap_define_function(_absl_flags.DEFINE_enum_class)
DEFINE_list = _wrap_define_function(_absl_flags.DEFINE_list)
DEFINE_spaceseplist = _wrap_define_function(_absl_flags.DEFINE_spaceseplist)
DEFINE_multi = _wrap_define_function(_absl_flags.DEFINE_multi)
DEFINE_multi_string = _wrap_define_function(_absl_flags.DEFINE_multi_string)
DEFINE_multi_integer = _wrap_define_function(_absl_flags.DEFINE_multi_integer)
DEFINE_multi_float = _wrap_define_function(_absl_flags.DEFINE_multi_float)
DEFINE_multi_enum = _wrap_define_function(_absl_flags.DEFINE_multi_enum)
DEFINE_multi_enum_class = _wrap_define_function(_absl_flags.DEFINE_multi_enum_class)
DEFINE_alias = _wrap_define_function(_absl_flags.DEFINE_alias)
register_validator = _wrap_define_function(_absl_flags.register_validator)
validator = _wrap_define_function(_absl_flags.validator)
register_multi_flags_validator = _wrap_define_function(_absl_flags.register_multi_flags_validator)
multi_flags_validator = _wrap_define_function(_absl_flags.multi_flags_validator)
mark_flag_as_required = _wrap_define_function(_absl_flags.mark_flag_as_required)
mark_flags_as_required = _wrap_define_function(_absl_flags.mark_flags_as_required)
mark_flags_as_mutual_exclusive = _wrap_define_function(_absl_flags.mark_flags_as_mutual_exclusive)
mark_bool_flags_as_mutual_exclusive = _wrap_define_function(_absl_flags.mark_bool_flags_as_mutual_exclusive)
declare_key_flag = _wrap_define_function(_absl_flags.declare_key_flag)
adopt_module_key_flags = _wrap_define_function(_absl_flags.adopt_module_key_flags)

FLAGS = _FlagValuesWrapper(_absl_flags.FLAGS)
