"""af.resource_loader: locating data files beside the code that uses them (tf.resource_loader).

Paths are relative to the calling module's directory (get_data_files_path, get_path_to_datafile)
or to the actorflow package (load_resource), as TF's are to the caller and to the tensorflow
package. Bazel runfiles are honoured as TF honours them: get_root_dir_with_all_resources climbs to
the directory under a `*.runfiles` one, else it is the caller's directory.
"""
from __future__ import annotations

import inspect
import os
import sys

__all__ = ["get_data_files_path", "get_path_to_datafile", "get_root_dir_with_all_resources", "load_resource",
           "readahead_file_path"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_dir(depth: int) -> str:
    return os.path.dirname(os.path.abspath(inspect.getfile(sys._getframe(depth + 1))))


def get_data_files_path() -> str:
    """The directory of the module that calls this (tf.resource_loader.get_data_files_path)."""
    return _caller_dir(1)


def get_path_to_datafile(path) -> str:
    """`path` joined to the calling module's directory (tf.resource_loader.get_path_to_datafile)."""
    return os.path.join(_caller_dir(1), path)


def get_root_dir_with_all_resources() -> str:
    """The directory right under the `*.runfiles` directory above the caller, else the caller's own
    directory (tf.resource_loader.get_root_dir_with_all_resources)."""
    script_dir = _caller_dir(1)
    directories = [script_dir]
    while True:
        candidate = directories[-1]
        if ".runfiles" in os.path.basename(candidate):
            return directories[-2] if len(directories) > 1 else script_dir
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return script_dir
        directories.append(parent)


def load_resource(path) -> bytes:
    """The bytes of the file at `path` relative to the actorflow package's root
    (tf.resource_loader.load_resource, relative to the tensorflow package there); an OSError
    naming the path when it is missing."""
    full = os.path.join(_PACKAGE_DIR, path)
    with open(full, "rb") as f:
        return f.read()


def readahead_file_path(path, readahead="128M"):
    """`path` unchanged (tf.resource_loader.readahead_file_path: TF's readahead is a no-op too)."""
    return path
