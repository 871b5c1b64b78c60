"""The `af.signal` namespace (tf.signal under TF 1.x): the discrete Fourier transforms of
graph/ops/fft_ops.py."""
from actorflow.graph.ops.fft_ops import *  # noqa: F401,F403
from actorflow.graph.ops.fft_ops import __all__  # noqa: F401  (the namespace lists what it holds)
