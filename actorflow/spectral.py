"""The `af.spectral` namespace (tf.compat.v1.spectral, the TF 1.x name of tf.signal's transforms)."""
from actorflow.graph.ops.fft_ops import *  # noqa: F401,F403
from actorflow.graph.ops.fft_ops import __all__  # noqa: F401  (the namespace lists what it holds)
