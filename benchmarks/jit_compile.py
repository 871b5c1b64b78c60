"""Where a JIT kernel's compile time goes (issue 18: "a first step that compiles takes at most 3 s").

Builds a training step of benchmarks/train_step.py with `global_jit_level=ON_1` in a process of its
own with an empty JIT cache (a temporary AF_JIT_CACHE_DIR; numba's own cache as it is, unless
--fresh empties it too), runs its first step, and prints for each JIT kernel compiled: its CPU
seconds, the size of its generated source, and numba's time in its passes from numba's event API
(summed over the kernel and the helpers it compiles: nopython_type_inference is typing,
native_lowering is lowering with LLVM inside it, llvm is LLVM's optimization and code generation
alone); then every numba compile of the first step (the library kernels' too), nested ones
indented under the compile that needed them. Timings are CPU seconds of the compiling thread: on a
shared machine they do not depend on the load as wall time does, but compare two versions in the
same run, alternating.

    python benchmarks/jit_compile.py [--model mlp|convnet] [--fresh] [--source]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(model: str, show_source: bool) -> None:
    sys.path.insert(0, HERE)
    import train_step as ts

    import actorflow as af
    from actorflow.kernels.lazy_numba import import_numba
    from actorflow.scheduler.jit import compile as jc
    import_numba()                      # as actorflow imports it (its patches of numba first)
    from numba.core import event

    passes: dict = {}
    compiles: list = []                 # (depth, cpu seconds, what)

    class Listener(event.Listener):
        def __init__(self):
            self.stack: list = []

        def on_start(self, ev):
            self.stack.append((ev.kind, time.thread_time()))

        def on_end(self, ev):
            kind, c0 = self.stack.pop()
            dt = time.thread_time() - c0
            if kind == "numba:run_pass":
                name = ev.data["name"]
                passes[name] = passes.get(name, 0.0) + dt
            elif kind == "numba:llvm_lock":     # LLVM's optimization and code generation
                passes["llvm"] = passes.get("llvm", 0.0) + dt
            elif kind == "numba:compile":
                fn = ev.data["dispatcher"].py_func
                depth = sum(1 for k, _ in self.stack if k == "numba:compile")
                compiles.append((depth, dt, f"{fn.__module__}.{fn.__qualname__}"))
    listener = Listener()
    for kind in ("numba:compile", "numba:run_pass", "numba:llvm_lock"):
        event.register(kind, listener)

    kernels: list = []
    compile_one = jc.JitKernel._compile

    def timed(self):
        passes.clear()
        c0 = time.thread_time()
        compile_one(self)
        kernels.append((self.what or "kernel", time.thread_time() - c0, len(self.source), dict(passes)))
        if show_source:
            print(self.source)
    jc.JitKernel._compile = timed
    RC, OO = af.RewriterConfig, af.OptimizerOptions
    cfg = af.ConfigProto(graph_options=af.GraphOptions(rewrite_options=RC(),
                                                       optimizer_options=OO(global_jit_level=OO.ON_1)))
    prob = ts.make_problem(model)
    t0 = time.perf_counter()
    g, init, fetches, feed = ts.actorflow_graph(model, prob)
    sess = af.Session(graph=g, config=cfg)
    sess.run(init)
    sess.run(fetches, feed)
    first = time.perf_counter() - t0
    print(f"{model}: first step {first:.2f} s (graph build, initializer, compiles), load {os.getloadavg()[0]:.1f}")
    for what, cpu, size, ps in kernels:
        top = sorted(ps.items(), key=lambda kv: -kv[1])[:6]
        print(f"  JIT kernel {what}: {cpu:.3f} s CPU, source {size} chars; passes: "
              + ", ".join(f"{k} {v:.3f}" for k, v in top))
    print("  numba compiles of the first step (CPU s; nested ones indented):")
    for depth, dt, what in compiles:
        if dt >= 0.01:
            print(f"    {'  ' * depth}{dt:6.3f} {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    ap.add_argument("--fresh", action="store_true", help="numba's cache empty too (a fresh install)")
    ap.add_argument("--source", action="store_true", help="print each kernel's generated source")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.model, args.source)
        return
    with tempfile.TemporaryDirectory() as jit_dir, tempfile.TemporaryDirectory() as numba_dir:
        env = dict(os.environ, AF_JIT_CACHE_DIR=jit_dir)
        if args.fresh:
            env["NUMBA_CACHE_DIR"] = numba_dir
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", args.model]
        subprocess.run(cmd + (["--source"] if args.source else []), env=env, check=True)


if __name__ == "__main__":
    main()
