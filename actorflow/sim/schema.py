"""The typed schema of a scenario file (pydantic, strict): every key, its type, and one-line errors.

`check(doc, where)` validates a parsed TOML document before scenario.py reads it, so a typo'd key
(`stesp = 600`), a value of the wrong type (`steps = "600"`, `nothing_lost = 1`) or a table where a
number belongs is reported as one line naming the file, the key and the expected type:

    sims/x.toml: workload.steps: expected an integer, got "600" (a string)
    sims/x.toml: workload.stesp: unknown key; allowed: backup_workers, batch_size, ...

Strict: nothing is coerced ("600" is not 600); an integer is accepted where a number is expected.
The rules between keys (one of at/at_step/at_time_s, a task inside the cluster, ...) stay in
scenario.py, which runs after this.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

__all__ = ["check", "check_fault", "FAULT_MODELS"]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _task_refs(v):
    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        return v
    raise ValueError("expected a task name like \"worker:1\", one of \"workers\", \"ps\", \"all\", or a list of "
                     "task names")


def _sides(v):
    if isinstance(v, list) and len(v) == 2:
        for side in v:
            _task_refs(side)
        return v
    raise ValueError("expected two sides, e.g. [[\"worker:1\"], [\"ps:0\"]]")


TaskRefs = Annotated[Any, AfterValidator(_task_refs)]
Sides = Annotated[Any, AfterValidator(_sides)]


class Cluster(_Table):
    ps: int = 1
    workers: int = 2


class Workload(_Table):
    model: str = "digits_mlp"
    steps: int = 300
    mode: str = "async"
    backup_workers: int = 0
    batch_size: int = 32
    learning_rate: float = 0.1
    optimizer: str = "sgd"
    hidden: list[int] = [64]
    checkpoint_every: int | None = None
    max_wait_s: float = 60.0
    data_seed: int = 0


class Expect(_Table):
    final_accuracy_min: float | None = None
    final_loss_max: float | None = None
    max_steps_lost: int | None = None
    max_recovery_s: float | None = None
    wall_clock_max_s: float | None = None
    nothing_lost: bool | None = None
    min_recoveries: int | None = None
    max_recoveries: int | None = None
    max_startup_recoveries: int | None = None
    median_step_ms_max: float | None = None
    median_step_ms_min: float | None = None
    median_global_step_ms_max: float | None = None
    median_global_step_ms_min: float | None = None
    min_injected: int | None = None


class Delay(BaseModel):
    # The fields each distribution needs are checked in scenario.py; here, their types.
    model_config = ConfigDict(extra="forbid", strict=True)
    dist: str = "constant"
    ms: float | None = None
    low_ms: float | None = None
    high_ms: float | None = None
    mean_ms: float | None = None
    std_ms: float | None = None
    median_ms: float | None = None
    sigma: float | None = None
    scale_ms: float | None = None
    alpha: float | None = None


class _Fault(_Table):
    kind: str


class Kill(_Fault):
    task: str
    at: float | None = None
    at_step: int | None = None
    at_time_s: float | None = None
    restart_after_s: float | None = None
    signal: int | None = None
    power_loss: bool | None = None


class CrashDuringSave(_Fault):
    task: str
    save: int | None = None
    restart_after_s: float | None = None
    stage: str | None = None
    power_loss: bool | None = None


class Straggler(_Fault):
    tasks: TaskRefs
    delay: Delay | None = None
    slowdown: float | None = None
    probability: float | None = None
    from_step: int | None = None
    to_step: int | None = None


class Partition(_Fault):
    between: Sides
    at: float | None = None
    at_step: int | None = None
    at_time_s: float | None = None
    duration_s: float | None = None
    fail_after_s: float | None = None


def _windowed(name: str, **fields):
    """A fault model with the optional window keys (`from` and `until` are fractions of the steps;
    `from` is a Python keyword, hence the alias)."""
    from pydantic import Field, create_model
    common = {"peers": (TaskRefs, None), "from_": (float | None, Field(None, alias="from")),
              "until": (float | None, None), "from_step": (int | None, None), "until_step": (int | None, None)}
    return create_model(name, __base__=_Fault, **common, **fields)


Latency = _windowed("Latency", tasks=(TaskRefs, ...), delay=(Delay, ...))
Bandwidth = _windowed("Bandwidth", tasks=(TaskRefs, ...), mb_per_s=(float, ...))
Drop = _windowed("Drop", tasks=(TaskRefs, ...), per_step=(float | None, None), at_steps=(list[int] | None, None),
                 mode=(str | None, None), rto_ms=(float | None, None))

FAULT_MODELS = {"kill": Kill, "crash_during_save": CrashDuringSave, "straggler": Straggler, "partition": Partition,
                "latency": Latency, "bandwidth": Bandwidth, "drop": Drop}


class Body(_Table):
    name: str | None = None
    description: str = ""
    seed: int = 0
    known_issue: str = ""
    mode: Literal["real", "deterministic"] = "real"
    cluster: Cluster = Cluster()
    workload: Workload = Workload()
    faults: list[dict] = []
    expect: Expect = Expect()


class ScenarioFile(Body):
    short: Body | None = None


# -- errors as one line ---------------------------------------------------------------------------------------

_EXPECTED = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
             "string_type": "a string", "list_type": "a list", "dict_type": "a table", "model_type": "a table",
             "model_attributes_type": "a table", "int_from_float": "an integer", "finite_number": "a finite number"}


def _toml_type(v) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a table"
    return type(v).__name__


def _toml_repr(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{...}"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _model_at(model, loc):
    """The model class that holds the last key of `loc` (for listing the allowed keys)."""
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part) or next((f for f in model.model_fields.values() if f.alias == part), None)
        if field is None:
            return None
        ann = field.annotation
        nxt = None
        for t in (ann, *get_args(ann)):
            if isinstance(t, type) and issubclass(t, BaseModel):
                nxt = t
                break
            if get_origin(t) is list and get_args(t) and isinstance(get_args(t)[0], type) \
                    and issubclass(get_args(t)[0], BaseModel):
                nxt = get_args(t)[0]
                break
        model = nxt
    return model


def _key(loc, prefix: str) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + ("from" if part == "from_" else str(part))
    return out


def _one_line(e: ValidationError, model, where: str, prefix: str = "") -> str:
    errs = e.errors(include_url=False)
    first = errs[0]
    loc, typ = first["loc"], first["type"]
    key = _key(loc, prefix)
    if typ == "extra_forbidden":
        holder = _model_at(model, loc)
        allowed = sorted((f.alias or n) for n, f in holder.model_fields.items() if n != "kind") if holder else []
        msg = f"{key}: unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    elif typ == "missing":
        msg = f"{key}: missing (required)"
    elif typ in _EXPECTED:
        got = first.get("input")
        msg = f"{key}: expected {_EXPECTED[typ]}, got {_toml_repr(got)} ({_toml_type(got)})"
    elif typ == "value_error":
        got = first.get("input")
        msg = f"{key}: {str(first['msg']).removeprefix('Value error, ')}, got {_toml_repr(got)}"
    else:
        msg = f"{key}: {first['msg']}"
    if len(errs) > 1:
        msg += f" (and {len(errs) - 1} more error{'s' if len(errs) > 2 else ''})"
    return f"{where}: {msg}"


def check(doc: dict, where: str) -> None:
    """Checks a scenario document's keys and value types (its [short] table too); raises the
    scenario module's ScenarioError with one line naming `where`, the key and the expected type."""
    from actorflow.sim.scenario import ScenarioError
    try:
        ScenarioFile.model_validate(doc)
    except ValidationError as e:
        raise ScenarioError(_one_line(e, ScenarioFile, where)) from None


def check_fault(raw: dict, kind: str, prefix: str, where: str) -> None:
    """Checks one [[faults]] table's value types against its kind's model."""
    from actorflow.sim.scenario import ScenarioError
    model = FAULT_MODELS[kind]
    try:
        model.model_validate(raw)
    except ValidationError as e:
        raise ScenarioError(_one_line(e, model, where, prefix)) from None
