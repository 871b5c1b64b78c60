"""af.version: the version constants of tf.version, for actorflow.

`VERSION` is actorflow's own; the GraphDef versions are those actorflow writes and reads (its
GraphDefs say producer 27, which TensorFlow's and TensorBoard's importers accept); the build
constants describe a pure-Python package (no C++ compiler, no monolithic build)."""
import platform

VERSION = "0.1.0"
GIT_VERSION = f"v{VERSION}"
COMPILER_VERSION = f"{platform.python_implementation()} {platform.python_version()}"
CXX11_ABI_FLAG = 0
CXX_VERSION = 0
MONOLITHIC_BUILD = 0
GRAPH_DEF_VERSION = 27
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

__all__ = ["COMPILER_VERSION", "GIT_VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER", "VERSION"]
