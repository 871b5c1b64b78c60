"""replica_device_setter: put variables on parameter servers, everything else on the worker."""
from __future__ import annotations

from actorflow.graph.device_spec import DeviceSpec

__all__ = ["replica_device_setter", "GreedyLoadBalancingStrategy", "byte_size_load_fn"]

_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp", "MutableHashTable",
           "MutableHashTableV2", "MutableHashTableOfTensors", "MutableDenseHashTable", "FIFOQueueV2",
           "RandomShuffleQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2", "ConditionalAccumulator",
           "SparseConditionalAccumulator")


class _RoundRobinStrategy:
    def __init__(self, num_tasks):
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, op):
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


def byte_size_load_fn(op) -> int:
    """Bytes of the op's first output (its variable), for GreedyLoadBalancingStrategy."""
    if not op.outputs:
        return 0
    t = op.outputs[0]
    n = t.shape.num_elements()
    return (n or 0) * t.dtype.size


class GreedyLoadBalancingStrategy:
    """Places each PS op on the PS task with the least load so far (tf.contrib.training's strategy)."""

    def __init__(self, num_tasks, load_fn=byte_size_load_fn):
        self._loads = [0] * num_tasks
        self._load_fn = load_fn

    def __call__(self, op):
        task = min(range(len(self._loads)), key=lambda i: self._loads[i])
        self._loads[task] += self._load_fn(op)
        return task


class _DeviceSetter:
    def __init__(self, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge = merge_devices
        self._ps_ops = ps_ops
        self._strategy = ps_strategy

    def __call__(self, op) -> str:
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_strategy_applies(op):
            spec = DeviceSpec.from_string(self._ps_device)
            if spec.task is None and self._strategy is not None:
                spec = DeviceSpec(spec.job, spec.replica, self._strategy(op), spec.device_type, spec.device_index)
        else:
            spec = DeviceSpec.from_string(self._worker_device or "")
        if self._merge:
            return spec.merge_from(current).to_string()
        return (current if current.job is not None else spec).to_string()

    def _ps_strategy_applies(self, op) -> bool:
        return self._ps_device is not None and op.type in self._ps_ops


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker", merge_devices=True,
                          cluster=None, ps_ops=None, ps_strategy=None):
    """A device function for `af.device(...)`: variables (and other PS ops) go round-robin (or by
    `ps_strategy`) to the PS tasks, every other op to `worker_device` (tf.compat.v1.train.replica_device_setter).

    With `cluster` (a ClusterSpec or dict), `ps_tasks` is the number of tasks of its "ps" job.
    Returns None when there are no PS tasks (no constraint), as TF does.
    """
    if cluster is not None:
        from actorflow.cluster.spec import ClusterSpec
        cluster = ClusterSpec(cluster)
        ps_tasks = cluster.num_tasks("ps") if "ps" in cluster.jobs else 0
    if ps_tasks == 0:
        return None
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    return _DeviceSetter(ps_device, worker_device, merge_devices, tuple(ps_ops or _PS_OPS), ps_strategy)
