"""af.contrib.framework: slim's arg_scope and the model-variable helpers of tf.contrib.framework (TF 1.15).

`arg_scope([f, g], k=v)` makes every call of `f` and `g` inside the block default `k` to `v`;
only functions decorated with `add_arg_scope` take part (every layer of af.contrib.layers is), and
arguments given at the call win. Scopes nest: an inner scope's values for a function override the
outer ones. `with arg_scope(...) as sc` yields the scope (a dict), which `arg_scope(sc)` re-enters.

Model variables are the variables a model is made of (weights, biases, batch-norm statistics),
kept in the MODEL_VARIABLES collection besides GLOBAL_VARIABLES, so that `get_model_variables`
and `get_variables_to_restore` can list them apart from optimizer slots and counters.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading

from actorflow.graph import nest  # noqa: F401  (tf.contrib.framework.nest)
from actorflow.graph.graph import GraphKeys, get_collection, get_default_graph
from actorflow.graph.ops.script_ops import py_func  # noqa: F401  (tf.contrib.framework.py_func)
from actorflow.graph.ops.sort_ops import sort  # noqa: F401  (tf.contrib.framework.sort)
from actorflow.graph.variable_scope import VariableScope, get_variable
from actorflow.train import Saver, init_from_checkpoint, list_variables, load_checkpoint, load_variable  # noqa: F401
from actorflow.train.training_util import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
)

log = logging.getLogger(__name__)

__all__ = ["arg_scope", "add_arg_scope", "has_arg_scope", "arg_scoped_arguments", "current_arg_scope",
           "model_variable", "variable", "local_variable", "global_variable", "add_model_variable",
           "get_variables", "get_model_variables", "get_trainable_variables", "get_local_variables",
           "get_variables_to_restore", "get_variables_by_name", "get_variables_by_suffix", "get_unique_variable",
           "get_variable_full_name", "assign_from_checkpoint", "assign_from_checkpoint_fn", "filter_variables", "get_global_step", "get_or_create_global_step",
           "create_global_step", "assert_global_step", "assign_from_values", "assign_from_values_fn", "nest",
           "list_variables", "load_variable", "load_checkpoint", "init_from_checkpoint", "get_name_scope", "sort",
           "py_func"]


# ---------------------------------------------------------------------------------------------
# arg_scope
# ---------------------------------------------------------------------------------------------

class _ArgScopeStack(threading.local):
    def __init__(self):
        self.stack: list[dict] = []


_ARG_SCOPES = _ArgScopeStack()


def _key(op) -> str:
    return getattr(op, "_key_op", str(op))


def current_arg_scope() -> dict:
    """The innermost arg scope: {function key: {argument: value}} (empty outside any)."""
    return _ARG_SCOPES.stack[-1] if _ARG_SCOPES.stack else {}


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs):
    """Default arguments for the decorated functions in `list_ops_or_scope`
    (tf.contrib.framework.arg_scope).

    `list_ops_or_scope` is a list or tuple of functions decorated with `add_arg_scope`, or a scope
    yielded by an earlier `arg_scope` (then no keyword arguments are allowed). Yields the new scope.
    """
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("When attempting to re-use a scope by suppling a dictionary, kwargs must be empty.")
        _ARG_SCOPES.stack.append(list_ops_or_scope)
        try:
            yield list_ops_or_scope
        finally:
            _ARG_SCOPES.stack.pop()
        return
    if not isinstance(list_ops_or_scope, (list, tuple)):
        raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope (i.e. dict), got "
                        f"{type(list_ops_or_scope).__name__}")
    current = {k: dict(v) for k, v in current_arg_scope().items()}
    for op in list_ops_or_scope:
        key = _key(op)
        if not has_arg_scope(op):
            raise ValueError(f"{key} is not decorated with @add_arg_scope")
        current.setdefault(key, {}).update(kwargs)
    _ARG_SCOPES.stack.append(current)
    try:
        yield current
    finally:
        _ARG_SCOPES.stack.pop()


_DECORATED: dict[str, list] = {}


def add_arg_scope(func):
    """Decorates `func` so that `arg_scope` can give it default arguments
    (tf.contrib.framework.add_arg_scope)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        scoped = current_arg_scope().get(key)
        if scoped:
            merged = dict(scoped)
            merged.update(kwargs)
            kwargs = merged
        return func(*args, **kwargs)

    key = _key(func)
    wrapper._key_op = key
    _DECORATED[key] = _positional_names(func)
    return wrapper


def _positional_names(func) -> list:
    code = func.__code__
    return list(code.co_varnames[:code.co_argcount])


def has_arg_scope(func) -> bool:
    """Whether `func` was decorated with `add_arg_scope`."""
    return _key(func) in _DECORATED


def arg_scoped_arguments(func) -> list:
    """The argument names of a decorated function (tf.contrib.framework.arg_scoped_arguments)."""
    if not has_arg_scope(func):
        raise ValueError(f"{_key(func)} is not decorated with @add_arg_scope")
    return list(_DECORATED[_key(func)])


# ---------------------------------------------------------------------------------------------
# Variables
# ---------------------------------------------------------------------------------------------

def _dedupe(items) -> list:
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


@add_arg_scope
def variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=True, collections=None,
             caching_device=None, device=None, partitioner=None, custom_getter=None, use_resource=None,
             synchronization=None, aggregation=None):
    """`get_variable` with `collections` defaulting to GLOBAL_VARIABLES and an optional device
    (tf.contrib.framework.variable)."""
    collections = _dedupe(list(collections if collections is not None else [GraphKeys.GLOBAL_VARIABLES]))
    g = get_default_graph()
    cm = g.device(device) if device is not None else contextlib.nullcontext()
    with cm:
        return get_variable(name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                            trainable=trainable, collections=collections, caching_device=caching_device,
                            partitioner=partitioner, custom_getter=custom_getter, use_resource=use_resource)


@add_arg_scope
def model_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=True,
                   collections=None, caching_device=None, device=None, partitioner=None, custom_getter=None,
                   use_resource=None, synchronization=None, aggregation=None):
    """A variable in GLOBAL_VARIABLES and MODEL_VARIABLES (and `collections`)
    (tf.contrib.framework.model_variable)."""
    collections = list(collections or []) + [GraphKeys.GLOBAL_VARIABLES, GraphKeys.MODEL_VARIABLES]
    return variable(name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                    trainable=trainable, collections=collections, caching_device=caching_device, device=device,
                    partitioner=partitioner, custom_getter=custom_getter, use_resource=use_resource)


def local_variable(initial_value, validate_shape=True, name=None, use_resource=None):
    """A non-trainable variable in LOCAL_VARIABLES (tf.contrib.framework.local_variable)."""
    from actorflow.graph.variables import Variable
    return Variable(initial_value, trainable=False, collections=[GraphKeys.LOCAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def global_variable(initial_value, validate_shape=True, name=None, use_resource=None):
    """A non-trainable variable in GLOBAL_VARIABLES (tf.contrib.framework.global_variable)."""
    from actorflow.graph.variables import Variable
    return Variable(initial_value, trainable=False, collections=[GraphKeys.GLOBAL_VARIABLES],
                    validate_shape=validate_shape, name=name)


def add_model_variable(var) -> None:
    """Adds `var` to MODEL_VARIABLES unless it is there (tf.contrib.framework.add_model_variable)."""
    if var not in get_collection(GraphKeys.MODEL_VARIABLES):
        get_default_graph().add_to_collection(GraphKeys.MODEL_VARIABLES, var)


def get_variables(scope=None, suffix=None, collection=GraphKeys.GLOBAL_VARIABLES) -> list:
    """The variables of `collection` whose names start with `scope` (a regex, or a VariableScope)
    and end with `suffix` (tf.contrib.framework.get_variables)."""
    if isinstance(scope, VariableScope):
        scope = scope.name
    if suffix is not None:
        if ":" not in suffix:
            suffix += ":"
        scope = (scope or "") + ".*" + suffix
    return get_collection(collection, scope)


def get_model_variables(scope=None, suffix=None) -> list:
    """The model variables under `scope` (tf.contrib.framework.get_model_variables)."""
    return get_variables(scope, suffix, GraphKeys.MODEL_VARIABLES)


def get_local_variables(scope=None, suffix=None) -> list:
    """The local variables under `scope` (tf.contrib.framework.get_local_variables)."""
    return get_variables(scope, suffix, GraphKeys.LOCAL_VARIABLES)


def get_trainable_variables(scope=None, suffix=None) -> list:
    """The trainable variables under `scope` (tf.contrib.framework.get_trainable_variables)."""
    return get_variables(scope, suffix, GraphKeys.TRAINABLE_VARIABLES)


def get_variables_to_restore(include=None, exclude=None) -> list:
    """The global variables under the scopes in `include` (all when None), less those under the
    scopes in `exclude` (tf.contrib.framework.get_variables_to_restore)."""
    if include is None:
        wanted = get_variables()
    else:
        if not isinstance(include, (list, tuple)):
            raise TypeError("include is provided but is not a list or a tuple.")
        wanted = []
        for scope in include:
            wanted += get_variables(scope)
    dropped = []
    if exclude is not None:
        if not isinstance(exclude, (list, tuple)):
            raise TypeError("exclude is provided but is not a list or a tuple.")
        for scope in exclude:
            dropped += get_variables(scope)
    return [v for v in wanted if not any(v is d for d in dropped)]


def get_variables_by_suffix(suffix, scope=None) -> list:
    """The global variables whose names end with `suffix` (tf.contrib.framework.get_variables_by_suffix)."""
    return get_variables(scope=scope, suffix=suffix)


def get_variables_by_name(given_name, scope=None) -> list:
    """The global variables named `given_name` in any scope (tf.contrib.framework.get_variables_by_name)."""
    suffix = "/" + given_name + ":|^" + given_name + ":"
    return get_variables(scope=scope, suffix=suffix)


def get_unique_variable(var_op_name):
    """The one global variable named `var_op_name`; ValueError if none or several
    (tf.contrib.framework.get_unique_variable)."""
    candidates = get_variables(scope=var_op_name)
    if not candidates:
        raise ValueError(f"Couldn't find variable {var_op_name}")
    for candidate in candidates:
        if candidate.op.name == var_op_name:
            return candidate
    raise ValueError(f"Variable {var_op_name} does not uniquely identify a variable")


def get_variable_full_name(var) -> str:
    """The variable's name without ':0' (its partitioned variable's name for a shard)
    (tf.contrib.framework.get_variable_full_name)."""
    info = getattr(var, "_save_slice_info", None)
    if info is not None:
        return info.full_name
    return var.op.name


def assign_from_checkpoint_fn(model_path, var_list, ignore_missing_vars=False, reshape_variables=False):
    """A function `fn(session)` that restores `var_list` (a list, or a dict of checkpoint names to
    variables) from the checkpoint `model_path` with a Saver (tf.contrib.framework.assign_from_checkpoint_fn).

    With `ignore_missing_vars`, variables the checkpoint lacks are left out (and logged). Returns
    None when nothing is left to restore, as TF does.
    """
    if not var_list:
        raise ValueError("var_list cannot be empty")
    if ignore_missing_vars:
        from actorflow.train import NewCheckpointReader
        reader = NewCheckpointReader(model_path)
        if isinstance(var_list, dict):
            items = var_list
        else:
            items = {get_variable_full_name(v): v for v in var_list}
        kept = {}
        for name, v in items.items():
            if reader.has_tensor(name):
                kept[name] = v
            else:
                log.warning("Variable %s missing in checkpoint %s", name, model_path)
        var_list = kept
    if not var_list:
        log.warning("No Variables to restore")
        return None
    saver = Saver(var_list, reshape=reshape_variables)

    def callback(session):
        saver.restore(session, model_path)
    return callback


def assign_from_values(var_names_to_values):
    """(assign op, feed dict) setting each named global variable to its numpy value through a
    placeholder (tf.contrib.framework.assign_from_values)."""
    import numpy as np

    from actorflow.graph.ops.constant import group, placeholder
    feed, assigns = {}, []
    for var_name, value in var_names_to_values.items():
        found = get_collection(GraphKeys.GLOBAL_VARIABLES, var_name)
        if not found:
            raise ValueError(f"Variable {var_name} wasn't found")
        if len(found) > 1:
            exact = [v for v in found if v.op.name == var_name]
            if not exact:
                raise ValueError(f"Variable {var_name} doesn't uniquely identify a variable")
            found = exact
        var = found[0]
        ph = placeholder(dtype=var.dtype.base_dtype, shape=var.get_shape(), name="placeholder/" + var.op.name)
        assigns.append(var.assign(ph))
        feed[ph] = np.asarray(value).reshape(var.get_shape().as_list())
    return group(*assigns), feed


def get_name_scope():
    """The current name scope of the default graph, without its trailing '/' (tf.contrib.framework.get_name_scope)."""
    return get_default_graph().get_name_scope()


def assign_from_checkpoint(model_path, var_list, ignore_missing_vars=False):
    """(assign op, feed dict) that set `var_list` (a list, or a dict of checkpoint names to variables)
    to their values in the checkpoint `model_path` through placeholders
    (tf.contrib.framework.assign_from_checkpoint). A variable the checkpoint lacks is a ValueError
    naming it, or with `ignore_missing_vars` is left out; a value of another size is a ValueError."""
    import numpy as np

    from actorflow.graph.ops.constant import group, placeholder
    from actorflow.train import NewCheckpointReader
    reader = NewCheckpointReader(model_path)
    items = var_list.items() if isinstance(var_list, dict) else [(get_variable_full_name(v), v) for v in var_list]
    feed, assigns = {}, []
    for ckpt_name, var in items:
        if isinstance(var, (list, tuple)):
            raise NotImplementedError(f"assign_from_checkpoint: '{ckpt_name}' maps to a partitioned variable; "
                                      "use assign_from_checkpoint_fn")
        if not reader.has_tensor(ckpt_name):
            if ignore_missing_vars:
                log.warning("Variable %s missing in checkpoint %s", ckpt_name, model_path)
                continue
            raise ValueError(f"Checkpoint is missing variable [{ckpt_name}] ({model_path})")
        value = np.asarray(reader.get_tensor(ckpt_name))
        shape = var.get_shape().as_list()
        if value.size != int(np.prod(shape)):
            raise ValueError(f"Total size of new array must be unchanged for {ckpt_name} lh_shape: "
                             f"[{list(value.shape)}], rh_shape: [{shape}]")
        ph = placeholder(dtype=var.dtype.base_dtype, shape=var.get_shape(), name="placeholder/" + var.op.name)
        assigns.append(var.assign(ph))
        feed[ph] = value.reshape(shape)
    return group(*assigns), feed


def filter_variables(var_list, include_patterns=None, exclude_patterns=None, reg_search=True):
    """The variables of `var_list` whose names match one of `include_patterns` (all when None) and
    none of `exclude_patterns`, by re.search (re.match when `reg_search` is False)
    (tf.contrib.framework.filter_variables)."""
    import re
    find = re.search if reg_search else re.match
    kept = list(var_list) if include_patterns is None else \
        [v for v in var_list if any(find(p, v.name) for p in include_patterns)]
    if exclude_patterns is None:
        return kept
    return [v for v in kept if not any(find(p, v.name) for p in exclude_patterns)]


def assign_from_values_fn(var_names_to_values):
    """A function `fn(session)` running assign_from_values' op (tf.contrib.framework.assign_from_values_fn)."""
    op, feed = assign_from_values(var_names_to_values)

    def callback(session):
        return session.run(op, feed)
    return callback
