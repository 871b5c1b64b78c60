"""tf.xla.experimental: `jit_scope`, marking the ops built inside it for compilation."""
from __future__ import annotations

import contextlib

from actorflow.graph.graph import get_default_graph

__all__ = ["jit_scope", "compile"]


@contextlib.contextmanager
def jit_scope(compile_ops=True, separate_compiled_gradients=False):
    """Ops created inside get the attribute ``_XlaCompile`` (tf.xla.experimental.jit_scope): the
    JIT pass compiles them (clusters of element-wise ops, whole while loops) even when the
    session's ``global_jit_level`` is OFF; ``compile_ops=False`` keeps them out of the JIT even
    when it is ON. `compile_ops` may be a callable ``node_def -> bool``, as in TF.
    `separate_compiled_gradients` is accepted and ignored (gradients built inside the scope are
    marked too)."""
    g = get_default_graph()
    start = len(g._ops)
    try:
        yield
    finally:
        for op in g._ops[start:]:
            if "_XlaCompile" in op.attrs:
                continue                        # an inner scope decided
            mark = compile_ops(op.node_def) if callable(compile_ops) else compile_ops
            op.attrs["_XlaCompile"] = bool(mark)


def compile(fn=None, *, jit_compile=True):  # noqa: A001 - TF's name (tf.xla.experimental.compile)
    """Decorator marking every op `fn` builds for the JIT, as `jit_scope()` does around its body
    (the graph-mode counterpart of ``tf.function(jit_compile=True)``). Unlike TF's
    `xla.experimental.compile`, it returns `fn`'s own outputs: the ops run as one compiled
    cluster (or loop) where they are compilable, and as usual elsewhere."""
    def wrap(f):
        import functools

        @functools.wraps(f)
        def run(*args, **kwargs):
            with jit_scope(compile_ops=jit_compile):
                return f(*args, **kwargs)
        return run
    return wrap if fn is None else wrap(fn)
