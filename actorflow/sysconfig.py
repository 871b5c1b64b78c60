"""af.sysconfig: how actorflow is built (tf.compat.v1.sysconfig).

actorflow has no C++ library: its kernels are numpy, numba and CuPy code, and a compiled kernel of
your own is a CPython extension over numpy arrays, registered with
`actorflow.kernels.registry.register_kernel`. So the include directories and flags here are those
that build such an extension (Python's and numpy's headers), the "library" directory is the
package's, and the build info says what actually runs the kernels: numba's LLVM, and CUDA through
CuPy when it is installed.
"""
from __future__ import annotations

import collections
import os
import sysconfig as _py

__all__ = ["CXX11_ABI_FLAG", "CXX_VERSION", "MONOLITHIC_BUILD", "get_build_info", "get_compile_flags",
           "get_include", "get_lib", "get_link_flags"]

from actorflow.version import CXX11_ABI_FLAG, CXX_VERSION, MONOLITHIC_BUILD  # noqa: E402


def get_include() -> str:
    """The header directory a compiled kernel needs: numpy's (arrays are the kernels' currency)."""
    import numpy
    return numpy.get_include()


def get_lib() -> str:
    """The directory of the actorflow package (there is no shared library to link)."""
    return os.path.dirname(os.path.abspath(__file__))


def get_compile_flags() -> list[str]:
    """Flags to compile a CPython extension kernel: Python's and numpy's headers, the C++ ABI."""
    return [f"-I{_py.get_paths()['include']}", f"-I{get_include()}",
            f"-D_GLIBCXX_USE_CXX11_ABI={CXX11_ABI_FLAG}", "--std=c++17"]


def get_link_flags() -> list[str]:
    """Flags to link such an extension: Python's library directory, and libpython when this Python
    is a shared build."""
    flags = [f"-L{_py.get_config_var('LIBDIR')}"]
    if _py.get_config_var("Py_ENABLE_SHARED"):
        flags.append(f"-lpython{_py.get_config_var('LDVERSION') or _py.get_python_version()}")
    return flags


def get_build_info() -> collections.OrderedDict:
    """What runs the kernels (tf.sysconfig.get_build_info's keys): `cpu_compiler` (numba's LLVM),
    `is_cuda_build` (CuPy importable), and with CUDA `cuda_version`, `cudnn_version` and the
    `cuda_compute_capabilities` of this machine's GPUs; ROCm and TensorRT are never used."""
    import llvmlite.binding as llvm
    info = collections.OrderedDict(cpu_compiler="llvm " + ".".join(map(str, llvm.llvm_version_info)))
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        v = cupy.cuda.runtime.runtimeGetVersion()
        info["cuda_version"] = f"{v // 1000}.{v % 1000 // 10}"
        try:
            info["cudnn_version"] = str(cupy.cuda.cudnn.getVersion() // 10000 or cupy.cuda.cudnn.getVersion())
        except Exception:  # noqa: BLE001 - CuPy built without cuDNN
            pass
        from actorflow.scheduler.devices import gpu_count
        caps = set()
        for i in range(gpu_count()):
            p = cupy.cuda.runtime.getDeviceProperties(i)
            caps.add(f"sm_{p['major']}{p['minor']}")
        info["cuda_compute_capabilities"] = sorted(caps)
    info["is_cuda_build"] = cupy is not None
    info["is_rocm_build"] = False
    info["is_tensorrt_build"] = False
    return collections.OrderedDict(sorted(info.items()))
