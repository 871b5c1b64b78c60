"""Telling host arrays from device (CuPy) arrays without importing CuPy.

Everything here is safe to call on a machine without CuPy: a device array can only exist when
CuPy is installed, and then its module is already imported.
"""
from __future__ import annotations

import sys

import numpy as np

__all__ = ["is_device_array", "to_host", "device_module"]


def is_device_array(v) -> bool:
    """True for a CuPy array (anything exposing the CUDA array interface that is not numpy's)."""
    return type(v) is not np.ndarray and hasattr(v, "__cuda_array_interface__")


def to_host(v):
    """`v` as a numpy value: device arrays are copied to the host (waiting for the GPU), the rest
    is returned unchanged."""
    if type(v) is np.ndarray or not hasattr(v, "__cuda_array_interface__"):
        return v
    return v.get()


def device_module():
    """The `cupy` module when it is already imported, else None."""
    return sys.modules.get("cupy")
