"""tf.xla (TF 1.x's contrib/compiler): `af.xla.experimental.jit_scope()` marks ops for the JIT."""
from actorflow.xla import experimental

__all__ = ["experimental"]
