"""`tensorflow.python.client.device_lib`: `list_local_devices()`, the devices of this process, each
with TF's DeviceAttributes fields (`name`, `device_type`, `memory_limit`, `physical_device_desc`)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["list_local_devices"]


@dataclass(frozen=True)
class DeviceAttributes:
    name: str
    device_type: str
    memory_limit: int
    physical_device_desc: str
    incarnation: int = 0
    locality: dict | None = None


def list_local_devices(session_config=None):
    """This process's devices: CPU:0, and GPU:i for each CUDA device CuPy sees."""
    from actorflow.scheduler.devices import local_devices
    return [DeviceAttributes(d.name, d.device_type, d.memory_limit_bytes, d.description)
            for d in local_devices()]
