"""af.config: the process's devices and runtime settings (tf.config as tf.compat.v1 exposes it).

The devices are what actorflow sees: the CPU, and the CUDA GPUs CuPy finds. The settings are those
of TF 2's eager context, and they take effect as in TF: a Session made without a ConfigProto uses
`current_config()` (TF's `context.context().config`), which carries them:

- `threading.set_inter_op_parallelism_threads(n)`: the ConfigProto's field; n < 0 runs every kernel
  of a step where the step runs, never on the kernel pool (actors/session.py's ConfigProto).
- `threading.set_intra_op_parallelism_threads(n)`: the size of the process runtime's kernel pool
  (the threads that run one op's blocks); fixed once that runtime has started (RuntimeError).
- `optimizer.set_jit("autoclustering" | True | False)`: `global_jit_level` ON_1 (numba clusters and
  loops, compiled before the first step) or OFF (only `af.xla.experimental.jit_scope()` regions).
- `optimizer.set_experimental_options({...})`: the RewriterConfig switches of the graph passes
  (constant_folding, arithmetic_optimization, dependency_optimization, remapping,
  disable_model_pruning); options actorflow has no pass for are kept and reported.
- `set_visible_devices`: hidden GPUs are not used by placement (the ConfigProto's device_count);
  actorflow can hide GPUs from the end of the list only (GPU:1 of two, not GPU:0 alone).
- `set_soft_device_placement`: the ConfigProto's allow_soft_placement.
- `experimental.set_memory_growth`: recorded in gpu_options.allow_growth (CuPy's memory pool always
  grows on demand); a GPU logical device's `memory_limit` caps that GPU's CuPy memory pool.

`run_functions_eagerly` affects `tf.function`s only, which TF-1.x graph programs do not have: it is
recorded and reported, as TF does in graph mode. As in TF's graph mode, settings may change at any
time; they apply to sessions created afterwards.
"""
from __future__ import annotations

import collections
import threading as _threading

from actorflow.actors import dispatcher as _dispatcher
from actorflow.actors import session as _session
from actorflow.scheduler import devices as _devices

__all__ = ["LogicalDevice", "LogicalDeviceConfiguration", "PhysicalDevice", "experimental",
           "experimental_functions_run_eagerly", "experimental_run_functions_eagerly", "functions_run_eagerly",
           "get_logical_device_configuration", "get_soft_device_placement", "get_visible_devices",
           "list_logical_devices", "list_physical_devices", "optimizer", "run_functions_eagerly",
           "set_logical_device_configuration", "set_soft_device_placement", "set_visible_devices", "threading",
           "current_config"]

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
PhysicalDevice.__doc__ = "A device of this machine (tf.config.PhysicalDevice): name '/physical_device:GPU:0', type."
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])
LogicalDevice.__doc__ = "A device ops are placed on (tf.config.LogicalDevice): name '/device:CPU:0', type."


class LogicalDeviceConfiguration(collections.namedtuple(
        "LogicalDeviceConfiguration", ["memory_limit", "experimental_priority", "experimental_device_ordinal"])):
    """How one logical device is carved out of a physical one (tf.config.LogicalDeviceConfiguration):
    `memory_limit` in MB (required for a GPU), the others TF's experimental fields."""

    def __new__(cls, memory_limit=None, experimental_priority=None, experimental_device_ordinal=None):
        return super().__new__(cls, memory_limit, experimental_priority, experimental_device_ordinal)


_REWRITER_TOGGLES = ("layout_optimizer", "constant_folding", "shape_optimization", "remapping",
                     "arithmetic_optimization", "dependency_optimization", "loop_optimization",
                     "function_optimization", "debug_stripper", "scoped_allocator_optimization",
                     "pin_to_host_optimization", "implementation_selector", "auto_mixed_precision",
                     "use_plugin_optimizers", "auto_mixed_precision_onednn_bfloat16", "auto_mixed_precision_mkl")
_REWRITER_BOOLS = ("disable_model_pruning", "disable_meta_optimizer")


class _Context:
    """The settings (TF's eager context's fields that tf.config writes)."""

    def __init__(self):
        self.lock = _threading.Lock()
        self.physical: list[PhysicalDevice] | None = None
        self.visible: list[PhysicalDevice] | None = None
        self.virtual: dict[PhysicalDevice, list] = {}
        self.growth: dict[PhysicalDevice, bool] = {}
        self.inter_op: int | None = None
        self.intra_op: int | None = None
        self.jit: bool | None = None
        self.soft_placement: bool | None = None
        self.optimizer: dict = {}
        self.run_eagerly = False

    def devices(self) -> list[PhysicalDevice]:
        if self.physical is None:
            found = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
            found += [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(_devices.gpu_count())]
            self.physical = found
            self.visible = list(found)
            self.growth = {d: False for d in found if d.device_type == "GPU"}
        return self.physical


_ctx = _Context()


def _check(dev) -> PhysicalDevice:
    if dev not in _ctx.devices():
        raise ValueError(f"Unrecognized device: {dev!r}")
    return dev


# -- devices ---------------------------------------------------------------------------------------

def list_physical_devices(device_type=None):
    """This machine's devices (tf.config.list_physical_devices): CPU:0, and GPU:i for each CUDA
    device CuPy sees; `device_type` ('CPU', 'GPU') filters them."""
    devs = _ctx.devices()
    return [d for d in devs if device_type is None or d.device_type == device_type]


def get_visible_devices(device_type=None):
    """The physical devices sessions may use (tf.config.get_visible_devices)."""
    _ctx.devices()
    return [d for d in _ctx.visible if device_type is None or d.device_type == device_type]


def set_visible_devices(devices, device_type=None):
    """Makes only `devices` (of `device_type`, when given) visible to sessions created afterwards
    (tf.config.set_visible_devices). The CPU cannot be hidden; GPUs can be hidden from the end only."""
    if not isinstance(devices, list):
        devices = [devices]
    for d in devices:
        _check(d)
        if device_type is not None and d.device_type != device_type:
            raise ValueError(f"Unrecognized device: {d!r}")
    with _ctx.lock:
        keep = [d for d in _ctx.visible if device_type is not None and d.device_type != device_type]
        visible = keep + [d for d in devices if d not in keep]
        if not any(d.device_type == "CPU" for d in visible):
            raise ValueError("set_visible_devices: the CPU cannot be hidden (actorflow runs host ops on it); "
                             f"visible would be {visible}")
        gpus = [d for d in list_physical_devices("GPU") if d in visible]
        if gpus != list_physical_devices("GPU")[:len(gpus)]:
            raise ValueError(f"set_visible_devices: actorflow can hide GPUs from the end of the list only; "
                             f"{[d.name for d in gpus]} leaves a gap")
        _ctx.visible = visible


def _logical() -> list[LogicalDevice]:
    out, counts = [], collections.Counter()
    for d in get_visible_devices():
        for _ in _ctx.virtual.get(d) or [None]:
            out.append(LogicalDevice(f"/device:{d.device_type}:{counts[d.device_type]}", d.device_type))
            counts[d.device_type] += 1
    return out


def list_logical_devices(device_type=None):
    """The devices ops can be placed on (tf.config.list_logical_devices): one per visible physical
    device, or one per LogicalDeviceConfiguration set on it."""
    return [d for d in _logical() if device_type is None or d.device_type == device_type]


def get_logical_device_configuration(device):
    """The LogicalDeviceConfigurations set on physical `device`, or None."""
    return _ctx.virtual.get(_check(device))


def set_logical_device_configuration(device, logical_devices):
    """Splits physical `device` into logical ones (tf.config.set_logical_device_configuration): several
    CPUs (they share actorflow's one kernel pool), or one GPU whose `memory_limit` (MB) caps CuPy's
    memory pool on it (actorflow cannot split a GPU into several)."""
    _check(device)
    logical_devices = list(logical_devices)
    if device.device_type == "CPU":
        for v in logical_devices:
            if v.memory_limit is not None:
                raise ValueError("Setting memory limit on CPU virtual devices is currently not supported")
            if v.experimental_priority is not None:
                raise ValueError("Setting experimental_priority on CPU virtual  devices is currently not supported")
            if v.experimental_device_ordinal is not None:
                raise ValueError("Setting experimental_device_ordinal on CPU virtual  devices is currently not "
                                 "supported")
    elif device.device_type == "GPU":
        for v in logical_devices:
            if v.memory_limit is None:
                raise ValueError("Setting memory limit is required for GPU virtual devices")
        if len(logical_devices) > 1:
            raise ValueError(f"set_logical_device_configuration: actorflow runs one logical device per GPU, "
                             f"not {len(logical_devices)} on {device.name}")
        index = int(device.name.rsplit(":", 1)[1])
        import cupy
        with cupy.cuda.Device(index):
            cupy.get_default_memory_pool().set_limit(size=int(logical_devices[0].memory_limit) * 2 ** 20)
    else:
        raise ValueError(f"Virtual devices are not supported for {device.device_type}")
    with _ctx.lock:
        _ctx.virtual[device] = logical_devices


def get_soft_device_placement():
    """Whether sessions fall back to another device when an op cannot run on the one asked for."""
    return bool(_ctx.soft_placement)


def set_soft_device_placement(enabled):
    """Sets allow_soft_placement for sessions created afterwards (tf.config.set_soft_device_placement)."""
    _ctx.soft_placement = bool(enabled)


# -- tf.function (none in graph programs) ----------------------------------------------------------

def run_functions_eagerly(run_eagerly):
    """Records whether tf.functions run eagerly (tf.config.run_functions_eagerly). actorflow builds
    graphs only and has no tf.function, so, as in TF's graph mode, nothing else changes."""
    _ctx.run_eagerly = bool(run_eagerly)


def functions_run_eagerly():
    """What run_functions_eagerly set (False by default)."""
    return _ctx.run_eagerly


experimental_run_functions_eagerly = run_functions_eagerly
experimental_functions_run_eagerly = functions_run_eagerly


# -- the ConfigProto sessions get ------------------------------------------------------------------

def current_config() -> _session.ConfigProto:
    """The ConfigProto a Session created without one uses: the settings made through af.config
    (TF's context.context().config); an untouched af.config gives ConfigProto()'s defaults."""
    c = _ctx
    jit = _session.OptimizerOptions.DEFAULT if c.jit is None else (
        _session.OptimizerOptions.ON_1 if c.jit else _session.OptimizerOptions.OFF)
    switches = {}
    for k, v in c.optimizer.items():
        if k in _REWRITER_TOGGLES:
            switches[k] = _session.RewriterConfig.ON if v else _session.RewriterConfig.OFF
        elif k in _REWRITER_BOOLS or k == "min_graph_nodes":
            switches[k] = v
    remapping = switches.pop("remapping", 0)
    graph_options = _session.GraphOptions(rewrite_options=_session.RewriterConfig(remapping, **switches),
                                          optimizer_options=_session.OptimizerOptions(global_jit_level=jit))
    device_count = {}
    if c.physical is not None:
        gpus = [d for d in c.visible if d.device_type == "GPU"]
        if len(gpus) != len(list_physical_devices("GPU")):
            device_count["GPU"] = len(gpus)
        cpus = len(list_logical_devices("CPU"))
        if cpus != 1:
            device_count["CPU"] = cpus
    gpu_options = _session.GPUOptions(allow_growth=any(c.growth.values()))
    return _session.ConfigProto(allow_soft_placement=bool(c.soft_placement),
                                inter_op_parallelism_threads=c.inter_op or 0,
                                intra_op_parallelism_threads=c.intra_op or 0,
                                device_count=device_count, gpu_options=gpu_options, graph_options=graph_options)


_session._default_config = current_config


# -- the namespaces ----------------------------------------------------------------------------------

class _Namespace:
    """A sub-namespace of af.config (threading, optimizer, experimental)."""

    def __init__(self, name, **fns):
        self.__name__ = f"actorflow.config.{name}"
        self.__all__ = sorted(fns)
        self.__dict__.update(fns)

    def __repr__(self):
        return f"<namespace {self.__name__}>"


def _get_inter():
    """The inter-op thread setting (0: the runtime's choice)."""
    return _ctx.inter_op or 0


def _set_inter(num_threads):
    """Sets inter_op_parallelism_threads of sessions created afterwards; < 0 runs their kernels
    where their steps run, never on the kernel pool."""
    _ctx.inter_op = int(num_threads)


def _get_intra():
    """The intra-op thread setting (0: one per core)."""
    return _ctx.intra_op or 0


def _set_intra(num_threads):
    """Sizes the kernel pool (the threads one op's blocks run on); RuntimeError once the runtime has
    started with another size."""
    n = int(num_threads)
    if n == (_ctx.intra_op or 0):
        return
    _dispatcher.set_default_threads(n if n > 0 else None)
    _ctx.intra_op = n


threading = _Namespace("threading", get_inter_op_parallelism_threads=_get_inter,
                       set_inter_op_parallelism_threads=_set_inter, get_intra_op_parallelism_threads=_get_intra,
                       set_intra_op_parallelism_threads=_set_intra)


def _get_jit():
    """'autoclustering' when JIT compilation is on for sessions created without a config, else ''."""
    return "autoclustering" if _ctx.jit else ""


def _set_jit(enabled):
    """'autoclustering' (or True): global_jit_level ON_1; False: OFF."""
    _ctx.jit = enabled in (True, "autoclustering")


def _get_options():
    """The optimizer switches set (TF's names), with disable_model_pruning and disable_meta_optimizer."""
    out = {}
    for k in _REWRITER_TOGGLES:
        if k in _ctx.optimizer:
            out[k] = bool(_ctx.optimizer[k])
        if k == "debug_stripper":
            out["disable_model_pruning"] = bool(_ctx.optimizer.get("disable_model_pruning", False))
        if k == "use_plugin_optimizers":
            out["disable_meta_optimizer"] = bool(_ctx.optimizer.get("disable_meta_optimizer", False))
    if _ctx.optimizer.get("min_graph_nodes"):
        out["min_graph_nodes"] = int(_ctx.optimizer["min_graph_nodes"])
    return out


def _set_options(options):
    """Sets optimizer switches ({'constant_folding': False, ...}, TF's names) for sessions created
    afterwards."""
    if not isinstance(options, dict):
        raise TypeError(f"set_experimental_options takes a dict, got {type(options).__name__}")
    _ctx.optimizer.update(options)


optimizer = _Namespace("optimizer", get_jit=_get_jit, set_jit=_set_jit, get_experimental_options=_get_options,
                       set_experimental_options=_set_options)


def _get_memory_growth(device):
    """Whether memory growth is set on GPU `device`."""
    _check(device)
    if device not in _ctx.growth:
        raise KeyError(device)
    return _ctx.growth[device]


def _set_memory_growth(device, enable):
    """Sets memory growth on GPU `device` (gpu_options.allow_growth of sessions created afterwards)."""
    _check(device)
    if device in _ctx.virtual:
        raise ValueError("Cannot set memory growth on device when virtual devices configured")
    if device.device_type != "GPU":
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    _ctx.growth[device] = bool(enable)


def _device_index(device):
    name = device if isinstance(device, str) else getattr(device, "name", "")
    kind, _, index = name.rpartition(":")
    kind = kind.rsplit(":", 1)[-1].rsplit("/", 1)[-1].upper()
    if kind not in ("CPU", "GPU") or not index.isdigit():
        raise ValueError(f"Unrecognized device: {device!r}")
    return kind, int(index)


def _get_memory_info(device):
    """{'current', 'peak'} bytes in use on `device` ('GPU:0'): CuPy's memory pool for a GPU (peak:
    the pool's total), zeros for the CPU (actorflow does not track host allocations)."""
    kind, index = _device_index(device)
    if kind == "CPU":
        if index != 0:
            raise ValueError(f"Unrecognized device: {device!r}")
        return {"current": 0, "peak": 0}
    if index >= _devices.gpu_count():
        raise ValueError(f"Unrecognized device: {device!r}")
    import cupy
    with cupy.cuda.Device(index):
        pool = cupy.get_default_memory_pool()
        return {"current": int(pool.used_bytes()), "peak": int(pool.total_bytes())}


def _get_device_details(device):
    """{'device_name', 'compute_capability'} of a GPU (from CUDA); {} for the CPU."""
    if not isinstance(device, PhysicalDevice):
        raise ValueError(f"device must be a tf.config.PhysicalDevice, but got: {device}")
    _check(device)
    if device.device_type != "GPU":
        return {}
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(int(device.name.rsplit(":", 1)[1]))
    name = props.get("name", b"")
    return {"device_name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": (int(props["major"]), int(props["minor"]))}


experimental = _Namespace(
    "experimental", list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
    get_visible_devices=get_visible_devices, set_visible_devices=set_visible_devices,
    get_memory_growth=_get_memory_growth, set_memory_growth=_set_memory_growth,
    get_memory_info=_get_memory_info, get_device_details=_get_device_details,
    VirtualDeviceConfiguration=LogicalDeviceConfiguration,
    get_virtual_device_configuration=get_logical_device_configuration,
    set_virtual_device_configuration=set_logical_device_configuration)
