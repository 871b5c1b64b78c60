"""Running graph functions (graph/function.py) on the actor runtime.

A FunctionRunner turns a traced body into an Executable of its own, once, and runs one call per
set of arguments as a step of that executable: the arguments are its feeds, the body's outputs its
fetches. Calls run on the same runtime, actors and kernels as the session's steps, several at once
when the caller starts several (the executable keeps each call's messages apart by step)."""
from __future__ import annotations

import asyncio

import numpy as np

from actorflow import errors
from actorflow.actors.executable import Executable
from actorflow.scheduler.lower import LowerOptions, lower
from actorflow.scheduler.plan import make_plan

__all__ = ["FunctionRunner"]


class FunctionRunner:
    """Calls one GraphFunction on a runtime; `call(args)` returns an asyncio future of the flat
    outputs. Must be used on the runtime's loop."""

    def __init__(self, rt, container, fn):
        self.rt = rt
        self.fn = fn
        plan = make_plan(fn.graph, fn.inputs, fn.outputs, [])
        # Input pipelines run on the host, as TF's do: no GPU placement for function bodies.
        self.exe = Executable(rt, lower(plan, None, LowerOptions.from_config(None, auto_gpu=False)), container)
        self._dtypes = [t.dtype.np for t in fn.inputs]

    def call(self, args) -> asyncio.Future:
        fut = self.rt.loop.create_future()

        def done(results, error):
            if fut.done():                # the caller went away (the pipeline was closed)
                return
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(results)

        feeds = [a if type(a) is np.ndarray else np.asarray(a, dtype=dt) for a, dt in zip(args, self._dtypes)]
        try:
            self.exe.start(feeds, done)
        except errors.OpError as e:
            done(None, e)
        return fut
