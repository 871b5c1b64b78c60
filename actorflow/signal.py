"""The `af.signal` namespace (tf.signal under TF 1.x): the discrete Fourier transforms of
graph/ops/fft_ops.py, and framing, windows and the STFT of graph/ops/signal_ops.py."""
from actorflow.graph.ops.fft_ops import *  # noqa: F401,F403
from actorflow.graph.ops.fft_ops import __all__ as _fft_all
from actorflow.graph.ops.signal_ops import *  # noqa: F401,F403
from actorflow.graph.ops.signal_ops import __all__ as _signal_all

__all__ = list(_fft_all) + list(_signal_all)
