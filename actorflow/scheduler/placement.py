"""Placement: a device for every op of a plan (the paper's section 3.2.1).

Constraints come first: explicit `af.device` strings, colocation groups (`af.colocate_with`, the
`_class` attribute), ops with reference inputs colocated with their variables, and each while loop
kept whole on one task. Ops left unconstrained are placed greedily in topological order by a cost
model: the task that already holds the most bytes of the op's inputs (the fewest bytes to move),
the session's default task when there is no such task.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.graph.device_spec import DeviceSpec

__all__ = ["place", "assign_devices"]


class _UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        p = self.parent.setdefault(x, x)
        while p is not self.parent.get(p, p):
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


def _bytes(t) -> int:
    n = t.shape.num_elements()
    return (n if n is not None else 1024) * t.dtype.size


def _colocation_groups(ops, loops: bool) -> _UnionFind:
    """Union-find over `ops`: `_class` colocation, ops with reference inputs with their variables,
    and (with `loops`) every op of an outermost while loop together."""
    from actorflow.graph.control_flow import WhileContext, context_of
    op_set = set(ops)
    by_name = {op.name: op for op in ops}
    uf = _UnionFind()
    for op in ops:
        uf.find(op)
        for cls in op.attrs.get("_class", ()):
            if isinstance(cls, str) and cls.startswith("loc:@"):
                other = by_name.get(cls[5:])
                if other is not None:
                    uf.union(other, op)
        for i in op.op_def.ref_inputs:
            src = op.inputs[i].op
            if src in op_set:
                uf.union(src, op)
        if not loops:
            continue
        ctx = context_of(op)
        outer_while = None
        while ctx is not None:
            if isinstance(ctx, WhileContext):
                outer_while = ctx
            ctx = ctx.outer
        if outer_while is not None:
            uf.union(outer_while, op)
    return uf


def place(ops, default: DeviceSpec, tasks: set[tuple[str, int]]) -> dict:
    """Returns {op: DeviceSpec with job and task set}. `tasks` are the cluster's (job, index) pairs."""
    uf = _colocation_groups(ops, loops=True)
    # Merge the explicit constraints of each group; a resource op's own device wins.
    constraint: dict = {}
    for op in ops:
        if not op.device:
            continue
        root = uf.find(op)
        spec = DeviceSpec.from_string(op.device)
        cur = constraint.get(root)
        if cur is None or op.op_def.resource is not None:
            constraint[root] = spec if cur is None or op.op_def.resource is None else spec
    placed: dict = {}
    group_choice: dict = {}
    for op in ops:
        root = uf.find(op)
        spec = group_choice.get(root)
        if spec is None:
            c = constraint.get(root, DeviceSpec())
            if c.job is None or c.task is None:
                job, task = _greedy(op, placed, default, c)
                c = DeviceSpec(job, c.replica, task, c.device_type, c.device_index)
            # The device within the task is left to the task itself (assign_devices), unless given.
            spec = DeviceSpec(c.job, None, c.task, c.device_type,
                              c.device_index if c.device_index is not None or c.device_type is None else 0)
            if (spec.job, spec.task) not in tasks:
                raise errors.InvalidArgumentError(
                    op.name, op, f"Cannot assign a device for operation '{op.name}': it is placed on "
                    f"'{spec.to_string()}', which is not a task of the cluster ({sorted(tasks)})")
            group_choice[root] = spec
        placed[op] = spec
    return placed


def _greedy(op, placed, default, constraint):
    weights: dict = {}
    for t in op.inputs:
        d = placed.get(t.op)
        if d is None or t.op.op_def.actor == "const":
            continue
        if constraint.job is not None and d.job != constraint.job:
            continue
        key = (d.job, d.task)
        weights[key] = weights.get(key, 0) + _bytes(t)
    if weights:
        return max(weights.items(), key=lambda kv: kv[1])[0]
    job = constraint.job or default.job
    task = constraint.task if constraint.task is not None else (default.task if job == default.job else 0)
    return job, task


# -- devices within one process --------------------------------------------------------------------

def _numeric(t) -> bool:
    d = t.dtype
    return d.is_floating or d.is_integer or d.is_bool


def _floating(t) -> bool:
    return t.dtype.is_floating


def assign_devices(ops, n_gpu: int, soft: bool, gpu_kernel, metadata_only=lambda op_type: False,
                   auto_gpu: bool = True) -> dict | None:
    """Chooses a device of this process for every op: {op: "CPU" or "GPU:i"}, or None when every op
    runs on the CPU (no GPU, and none asked for).

    Explicit device types come first. An op asking for a GPU this process lacks, or for a GPU it
    has no kernel for, falls back to the CPU with `soft` (allow_soft_placement) and otherwise fails
    naming the op. Unconstrained ops go to GPU:0 when there is one, the op has a GPU kernel
    (`gpu_kernel(op_type)`), and it touches floating-point data; integer and boolean work (shapes,
    loop counters, predicates) stays on the host, as TF keeps int32 in host memory. Ops colocated
    (variables and the ops updating them, `colocate_with`) share one device. Placeholders, control
    ops and ops that read only their inputs' shapes (`metadata_only(op_type)`) stay on the host
    whatever their device scope says: they compute nothing a GPU could do. With `auto_gpu` off,
    only ops placed on a GPU explicitly go there.
    """
    from actorflow import errors
    explicit = False
    for op in ops:
        if op.device and "GPU" in op.device.upper():
            explicit = True
            break
    if (n_gpu == 0 or not auto_gpu) and not explicit:
        return None
    uf = _colocation_groups(ops, loops=False)
    groups: dict = {}
    for op in ops:
        groups.setdefault(uf.find(op), []).append(op)

    def host(op) -> bool:
        where = op.op_def.placement
        if where == "pass_through" and op.outputs and not _numeric(op.outputs[0]):
            return True                  # a handle or string passing through a loop or branch
        return where == "host" or metadata_only(op.type)

    def capable(op) -> bool:
        return host(op) or op.op_def.placement == "pass_through" or gpu_kernel(op.type)

    def wants_gpu(op) -> bool:
        # A variable or a constant (no inputs) by the dtype of its value.
        return any(_floating(t) for t in op.outputs) or any(_floating(t) for t in op.inputs)

    out: dict = {}
    for members in groups.values():
        spec = None
        for op in members:
            if op.device:
                s = DeviceSpec.from_string(op.device)
                if s.device_type is not None and (spec is None or op.op_def.resource is not None):
                    spec = s
        if spec is not None and spec.device_type == "GPU":
            idx = spec.device_index or 0
            lacking = next((op for op in members if not capable(op)), None) if idx < n_gpu else None
            if idx < n_gpu and lacking is None:
                dev = f"GPU:{idx}"
            elif soft:
                dev = "CPU"
            else:
                op = lacking if idx < n_gpu else members[0]
                why = (f"no supported kernel for GPU devices is available for op type {op.type}" if idx < n_gpu
                       else f"this process has {n_gpu} GPU(s)")
                raise errors.InvalidArgumentError(
                    op.name, op, f"Cannot assign a device for operation '{op.name}': Could not satisfy explicit "
                    f"device specification '{op.device or spec.to_string()}' because {why}. Use "
                    "ConfigProto(allow_soft_placement=True) to fall back to the CPU.")
        elif spec is not None or n_gpu == 0 or not auto_gpu:
            dev = "CPU"
        else:
            anchor = next((op for op in members if op.op_def.resource is not None), None)
            prefer = wants_gpu(anchor) if anchor is not None else any(wants_gpu(op) for op in members if not host(op))
            dev = "GPU:0" if prefer and all(capable(op) for op in members) else "CPU"
        for op in members:
            out[op] = "CPU" if host(op) else dev
    if all(d == "CPU" for d in out.values()):
        return None
    return out
