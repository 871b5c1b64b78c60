"""Device names: `/job:ps/task:0/device:CPU:0` (tf.DeviceSpec)."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """A partial device name; unset fields are None (tf.DeviceSpec)."""
    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpec":
        if not spec:
            return cls()
        job = replica = task = dtype = dindex = None
        s = spec.strip()
        for part in [p for p in s.split("/") if p]:
            key, _, rest = part.partition(":")
            k = key.lower()
            if k == "job":
                job = rest
            elif k == "replica":
                replica = int(rest)
            elif k == "task":
                task = int(rest)
            elif k == "device":
                t, _, idx = rest.partition(":")
                dtype = t.upper()
                dindex = None if idx in ("", "*") else int(idx)
            elif k in ("cpu", "gpu"):
                dtype = k.upper()
                dindex = None if rest in ("", "*") else int(rest)
            else:
                raise ValueError(f"Malformed device specification '{spec}': unknown part '{part}'")
        return cls(job, replica, task, dtype, dindex)

    def merge_from(self, other: "DeviceSpec") -> "DeviceSpec":
        """Fields set in `other` override ours (inner `af.device` scopes refine outer ones)."""
        kw = {f: getattr(other, f) for f in ("job", "replica", "task", "device_type", "device_index")
              if getattr(other, f) is not None}
        return replace(self, **kw)

    def to_string(self) -> str:
        s = ""
        if self.job is not None:
            s += f"/job:{self.job}"
        if self.replica is not None:
            s += f"/replica:{self.replica}"
        if self.task is not None:
            s += f"/task:{self.task}"
        if self.device_type is not None:
            s += f"/device:{self.device_type}:{'*' if self.device_index is None else self.device_index}"
        return s

    def __str__(self):
        return self.to_string()


def merge_device(outer: str, inner: str) -> str:
    if not outer:
        return DeviceSpec.from_string(inner).to_string() if inner else ""
    return DeviceSpec.from_string(outer).merge_from(DeviceSpec.from_string(inner)).to_string()


class DeviceSpecV1:
    """tf.compat.v1.DeviceSpec: a partial device name whose fields can be set, merged and parsed in
    place (TF 1.x's mutable DeviceSpec; graph building uses the frozen DeviceSpec above). Accepted by
    af.device."""

    __slots__ = ("job", "replica", "task", "device_type", "device_index")

    def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
        self.job = None if job is None else str(job)
        self.replica = None if replica is None else int(replica)
        self.task = None if task is None else int(task)
        # TF upper-cases cpu and gpu, and keeps other device types as given.
        self.device_type = device_type.upper() if isinstance(device_type, str) and device_type.lower() in (
            "cpu", "gpu") else device_type
        self.device_index = None if device_index is None else int(device_index)

    def _fields(self):
        return (self.job, self.replica, self.task, self.device_type, self.device_index)

    def parse_from_string(self, spec: str) -> "DeviceSpecV1":
        """Replaces every field by those of `spec` ("/job:ps/task:0/device:CPU:0"); returns self."""
        d = DeviceSpec.from_string(spec)
        self.job, self.replica, self.task = d.job, d.replica, d.task
        self.device_type, self.device_index = d.device_type, d.device_index
        return self

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpecV1":
        return cls().parse_from_string(spec)

    def merge_from(self, dev) -> None:
        """Sets in place the fields that `dev` (a DeviceSpec) sets, as TF 1.x's merge_from does."""
        for f in self.__slots__:
            v = getattr(dev, f)
            if v is not None:
                setattr(self, f, v)

    def make_merged_spec(self, dev) -> "DeviceSpecV1":
        """A new DeviceSpec: this one with the fields that `dev` sets replaced."""
        out = self.replace()
        out.merge_from(dev)
        return out

    def replace(self, **kwargs) -> "DeviceSpecV1":
        fields = dict(zip(self.__slots__, self._fields()))
        fields.update(kwargs)
        return DeviceSpecV1(**fields)

    def to_string(self) -> str:
        """The full name of the set fields: "/job:ps/replica:0/task:1/device:GPU:*"."""
        return DeviceSpec(*self._fields()).to_string()

    def __eq__(self, other):
        return isinstance(other, (DeviceSpecV1, DeviceSpec)) and self.to_string() == other.to_string()

    def __hash__(self):
        return hash(self.to_string())

    def __repr__(self):
        return f"<DeviceSpec {self.to_string() or '(empty)'}>"
