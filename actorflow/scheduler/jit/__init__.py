"""A numba JIT for clusters of element-wise ops and whole while loops (TF's XLA auto-clustering).

- `spec`: what is compiled (structure, dtypes, ranks);
- `symbolic`: symbolic dimensions of a loop's values (an unknown batch size), and the shape ops
  they fold;
- `codegen`: the Python source of one numba function per spec;
- `flat`: the source of a loop whose every shape is static, over flat buffers (no arrays inside);
- `compile`: the on-disk cache and the kernel that runs the compiled function;
- `cluster`: the pass that finds clusters and loops and replaces them in a plan;
- `kernel`: the `_JitCluster`/`_JitLoop` ops and their CPU kernel.
"""
from actorflow.scheduler.jit.cluster import jit_pass

__all__ = ["jit_pass"]
