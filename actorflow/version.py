"""af.version: the version constants of tf.version, for actorflow.

`VERSION` (also `af.__version__`) is the TensorFlow API actorflow follows, TF 1.x's last, 1.15: TF-1.x
programs that test `tf.__version__` to pick an API (`tf.summary.FileWriter` or the pre-0.12
`tf.train.SummaryWriter`, `tf.unstack` or `tf.unpack`) then take their TF-1.x branch. Actorflow's own
release is `ACTORFLOW_VERSION` (the distribution's version, `actorflow --version`). The GraphDef versions are those actorflow writes and reads (its
GraphDefs say producer 27, which TensorFlow's and TensorBoard's importers accept); the build
constants describe a pure-Python package (no C++ compiler, no monolithic build)."""
import platform

ACTORFLOW_VERSION = "0.1.0"
VERSION = "1.15.0"
GIT_VERSION = f"v{ACTORFLOW_VERSION}"
COMPILER_VERSION = f"{platform.python_implementation()} {platform.python_version()}"
CXX11_ABI_FLAG = 0
CXX_VERSION = 0
MONOLITHIC_BUILD = 0
GRAPH_DEF_VERSION = 27
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

__all__ = ["ACTORFLOW_VERSION", "COMPILER_VERSION", "GIT_VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER", "VERSION"]
