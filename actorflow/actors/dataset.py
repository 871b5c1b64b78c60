"""Iterators over datasets: the iterator resource and the pipeline stages it runs.

An IteratorResource is owned by its runtime and, like a queue, serves its operations one at a time
on the runtime's loop: MakeIterator builds a pipeline from a DatasetSpec (kernels/cpu/dataset.py),
IteratorGetNext takes elements from it in request order. An element is a tuple of its flat
components (numpy values).

A pipeline is a tree of stages, one per dataset in the definition. Stages whose work needs no
waiting (slices, shuffle, batch, repeat, ...) over such stages are *synchronous*: `pull()` returns
the next element (or END) at once, and an IteratorGetNext over a synchronous pipeline, or over a
prefetch buffer that holds an element, completes inline, without a task. Stages that wait (map,
filter, flat_map and interleave run their function as a step of its own on this runtime; prefetch
waits for its producer) are asynchronous: `await next()`.

Memory is bounded everywhere: a prefetch stage of N holds at most N elements and pulls from its
input only when it has room; a parallel map of P has at most P calls in flight; shuffle holds its
buffer size. Tasks (a prefetch producer, the resource's server) are owned by the pipeline's
context and cancelled when the iterator is restarted or its session closes.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import threading

import numpy as np

from actorflow import errors, tfrecord
from actorflow.actors.function import FunctionRunner
from actorflow.actors.resource import register_resource
from actorflow.kernels.cpu import philox
from actorflow.kernels.cpu.dataset import DatasetSpec, OptionalValue

__all__ = ["IteratorResource", "END"]

log = logging.getLogger(__name__)


class _End:
    __slots__ = ()

    def __repr__(self):
        return "END"


END = _End()            # the end of a dataset
_NOT_READY = object()   # try_now: the element needs waiting for


def _op_error(spec, e: BaseException, what: str = "") -> errors.OpError:
    """`e`, raised while producing an element of dataset `spec`, as an OpError naming its op."""
    where = f"dataset op '{spec.name}' ({spec.kind}){what}"
    if isinstance(e, errors.OpError):
        cls = type(e)
        return cls(e.node_def, None, f"{e.message}\n\t in {where}")
    return errors.InvalidArgumentError(spec.name, None, f"{type(e).__name__}: {e}\n\t in {where}")


class _BoundRunner:
    """A FunctionRunner with its function's captured values appended to every call's arguments."""
    __slots__ = ("runner", "fn", "extra")

    def __init__(self, runner, extra):
        self.runner, self.fn, self.extra = runner, runner.fn, extra

    def call(self, args):
        return self.runner.call(tuple(args) + self.extra if self.extra else args)


class _Context:
    """What one run of an iterator shares: the runtime, the resource container, one function
    runner per function, state that outlives a stage's re-creation by `repeat` (shuffle seeds,
    caches), and the tasks it owns."""

    def __init__(self, rt, container):
        self.rt = rt
        self.loop = rt.loop
        self.container = container
        self.runners: dict = {}
        self.state: dict = {}
        self.tasks: set = set()
        self.closed = False

    def runner(self, spec, name) -> "_BoundRunner":
        """The runner of dataset `spec`'s function attribute `name`, its calls given the values the
        function captured (the last of the spec's arguments, function by function: data/dataset.py)."""
        fn = spec.attrs[name]
        r = self.runners.get(id(fn))
        if r is None:
            r = self.runners[id(fn)] = FunctionRunner(self.rt, self.container, fn)
        extra = ()
        captured = spec.attrs.get("captured") or ()
        start = len(spec.args) - sum(n for _, n in captured)
        for k, n in captured:
            if k == name:
                extra = tuple(spec.args[start:start + n])
            start += n
        return _BoundRunner(r, extra)

    def spawn(self, coro) -> asyncio.Task:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def close(self) -> None:
        self.closed = True
        for t in list(self.tasks):
            t.cancel()
        self.tasks.clear()


# -- stages ---------------------------------------------------------------------------------------

class Stage:
    """One dataset in a running pipeline. Synchronous stages implement `pull`; asynchronous ones
    `next`. `try_now` returns an element if one is at hand without waiting, else _NOT_READY."""

    sync = True
    # Arrays whose rows are this stage's elements, when every element is one (from_tensor_slices,
    # and shuffles of it): then `pull_index()` gives the next row's index, and a batch gathers its
    # rows with one fancy index per component instead of stacking one view per element.
    rows = None

    def __init__(self, spec):
        self.spec = spec

    def pull(self):
        raise NotImplementedError

    async def next(self):
        return self.pull()

    def try_now(self):
        return self.pull() if self.sync else _NOT_READY

    def fail(self, e, what=""):
        return _op_error(self.spec, e, what)


class _Tensors(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.done = False

    def pull(self):
        if self.done:
            return END
        self.done = True
        return tuple(self.spec.args)


class _Slices(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        args = spec.args
        sizes = {np.shape(a)[0] if np.ndim(a) else None for a in args}
        if None in sizes:
            raise errors.InvalidArgumentError(spec.name, None, f"from_tensor_slices: every component needs a "
                                                               f"leading dimension (dataset op '{spec.name}')")
        if len(sizes) > 1:
            raise errors.InvalidArgumentError(
                spec.name, None, f"from_tensor_slices: dimension 0 differs between components: "
                                 f"{[np.shape(a)[0] for a in args]} (dataset op '{spec.name}')")
        self.args = self.rows = tuple(np.asarray(a) for a in args)
        self.n = sizes.pop() if sizes else 0
        self.i = 0

    def pull_index(self):
        i = self.i
        if i >= self.n:
            return END
        self.i = i + 1
        return i

    def pull(self):
        i = self.i
        if i >= self.n:
            return END
        self.i = i + 1
        return tuple([a[i] for a in self.args])


class _Range(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        start, stop, step = (int(a) for a in spec.args)
        if step == 0:
            raise errors.InvalidArgumentError(spec.name, None, f"range: step must not be 0 (dataset op '{spec.name}')")
        self.it = iter(range(start, stop, step))

    def pull(self):
        for v in self.it:
            return (np.int64(v),)
        return END


def _flatten_as(structure, value, where):
    """The leaves of `value` following `structure` (tuples and dicts are structure; everything
    else, lists included, is one component, as TF's from_generator reads them)."""
    if isinstance(structure, dict):
        if not isinstance(value, dict) or set(value) != set(structure):
            raise ValueError(f"{where}: expected a dict with keys {sorted(structure)}, got {value!r:.200}")
        return [x for k in sorted(structure) for x in _flatten_as(structure[k], value[k], where)]
    if isinstance(structure, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(structure):
            raise ValueError(f"{where}: expected a tuple of {len(structure)} components, got {value!r:.200}")
        return [x for s, v in zip(structure, value) for x in _flatten_as(s, v, where)]
    return [value]


class _Generator(Stage):
    """Calls the Python generator where its consumer pulls: on the runtime's loop, or on a data
    thread behind `prefetch` (TF runs it in a py_func, also under the GIL). A generator that
    blocks (reads files, waits on I/O) belongs behind `prefetch`, which keeps it off the loop."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        g = spec.attrs["generator"]
        self.structure = g.structure
        self.types = spec.attrs["output_types"]
        self.shapes = spec.attrs["output_shapes"]
        try:
            self.it = iter(g.fn(*[a[()] if np.ndim(a) == 0 else a for a in spec.args]))
        except Exception as e:  # noqa: BLE001
            raise self.fail(e, " calling the generator") from None

    def pull(self):
        try:
            v = next(self.it)
        except StopIteration:
            return END
        except Exception as e:  # noqa: BLE001
            raise self.fail(e, " in the generator") from None
        try:
            leaves = _flatten_as(self.structure, v, "from_generator")
            out = []
            for i, (x, dt, shape) in enumerate(zip(leaves, self.types, self.shapes)):
                a = _as_string(x) if dt.kind == "O" else np.asarray(x, dtype=dt)
                if shape is not None and (a.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, a.shape))):
                    raise ValueError(f"component {i} of the generator's element has shape {list(a.shape)}, "
                                     f"expected {[None if s < 0 else s for s in shape]}")
                out.append(a)
        except (ValueError, TypeError, OverflowError) as e:
            raise self.fail(e, " checking the generator's element") from None
        return tuple(out)


def _as_string(x):
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, bytes):
        return x
    return np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(np.asarray(x, dtype=object))


def _file_list(spec) -> list:
    """A file reader's file names: its `filenames` attribute, or its first argument, a string
    tensor (a reader made in a dataset function: `list_files(...).interleave(TFRecordDataset)`)."""
    names = spec.attrs.get("filenames")
    if names:
        return list(names)
    return [f.decode() if isinstance(f, bytes) else str(f) for f in np.asarray(spec.args[0]).reshape(-1)]


class _TextLines(Stage):
    """Lines of text files, one string element each, without the line ending (TextLineDataset).
    Reads through a buffered file, so most elements cost no system call."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.files = _file_list(spec)
        self.f = None

    def pull(self):
        while True:
            if self.f is None:
                if not self.files:
                    return END
                path = self.files.pop(0)
                try:
                    self.f = open(path, "rb")  # noqa: SIM115 - closed at its end or by close()
                except OSError as e:
                    raise errors.NotFoundError(self.spec.name, None, f"{path}: {e.strerror} (dataset op "
                                                                     f"'{self.spec.name}')") from None
            line = self.f.readline()
            if line:
                if line.endswith(b"\n"):
                    line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                return (line,)
            self.f.close()
            self.f = None

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None


class _Files(Stage):
    """Records of a list of files, one file after another: `open_file(path)` gives an object whose
    next() returns a record (bytes) or None at the file's end, and close()."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.files = _file_list(spec)
        self.r = None

    def pull(self):
        while True:
            if self.r is None:
                if not self.files:
                    return END
                self.r = self.open_file(self.files.pop(0))
            rec = self.r.next()
            if rec is not None:
                return (rec,)
            self.r.close()
            self.r = None

    def close(self):
        if self.r is not None:
            self.r.close()
            self.r = None


class _TFRecords(_Files):
    """The records of TFRecord files (TFRecordDataset), CRCs checked (actorflow/tfrecord.py)."""

    def open_file(self, path):
        return tfrecord.RecordReader(path, self.spec.attrs.get("compression_type") or None, self.spec.name)


class _FixedRecords(_Files):
    """Fixed-length records of files after a header and before a footer (FixedLengthRecordDataset)."""

    def open_file(self, path):
        a = self.spec.attrs
        return _FixedLengthReader(path, int(a["record_bytes"]), int(a.get("header_bytes", 0)),
                                  int(a.get("footer_bytes", 0)), self.spec.name)


class _FixedLengthReader:
    def __init__(self, path, record_bytes, header_bytes, footer_bytes, op):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise errors.NotFoundError(op, None, f"{path}: {e.strerror} (dataset op '{op}')") from None
        body = len(data) - header_bytes - footer_bytes
        if body < 0 or body % record_bytes:
            raise errors.DataLossError(op, None, f"{path}: {len(data)} bytes is not a header of {header_bytes}, "
                                                 f"whole records of {record_bytes} and a footer of {footer_bytes} "
                                                 f"(dataset op '{op}')")
        self.data, self.pos, self.end, self.n = data, header_bytes, header_bytes + body, record_bytes

    def next(self):
        if self.pos >= self.end:
            return None
        rec = self.data[self.pos:self.pos + self.n]
        self.pos += self.n
        return rec

    def close(self):
        self.data = b""


class _Repeat(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.ctx = ctx
        self.count = int(spec.args[0])
        self.epoch = 0
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync
        self.seen = False           # the current epoch produced an element

    def _advance(self) -> bool:
        """The current epoch ended: starts the next, or returns False when done."""
        self.epoch += 1
        # An empty epoch ends an infinite repeat instead of spinning forever (as TF does).
        if (self.count >= 0 and self.epoch >= self.count) or not self.seen:
            return False
        _close(self.up)
        self.up = build(self.spec.inputs[0], self.ctx)
        self.seen = False
        return True

    def pull(self):
        if self.count == 0:
            return END
        while True:
            e = self.up.pull()
            if e is not END:
                self.seen = True
                return e
            if not self._advance():
                return END

    async def next(self):
        if self.sync:
            return self.pull()
        if self.count == 0:
            return END
        while True:
            e = await self.up.next()
            if e is not END:
                self.seen = True
                return e
            if not self._advance():
                return END

    def close(self):
        _close(self.up)


class _Take(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.left = int(spec.args[0])
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync

    def pull(self):
        if self.left == 0:
            return END
        e = self.up.pull()
        if e is not END:
            self.left -= 1
        return e

    async def next(self):
        if self.left == 0:
            return END
        e = await self.up.next()
        if e is not END:
            self.left -= 1
        return e

    def close(self):
        _close(self.up)


class _Skip(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.left = int(spec.args[0])
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync

    def pull(self):
        while self.left != 0:
            if self.up.pull() is END:
                self.left = 0
                return END
            self.left -= 1
        return self.up.pull()

    async def next(self):
        while self.left != 0:
            if await self.up.next() is END:
                self.left = 0
                return END
            self.left -= 1
        return await self.up.next()

    def close(self):
        _close(self.up)


class _Shuffle(Stage):
    """TF's shuffle buffer, in TF's order: fill it to `buffer_size`, then each output is the element
    at a uniformly random position of the buffer's window, whose place the window's first element
    takes (a ring of `buffer_size` slots, as TF's ShuffleDatasetOp). The positions come from TF's
    Philox stream for the epoch's seeds: with `reshuffle_each_iteration` a seed generator on the
    op's (seed, seed2) gives each epoch two words; without it every epoch uses (seed, seed2)."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.size = int(spec.args[0])
        if self.size <= 0:
            raise errors.InvalidArgumentError(spec.name, None, f"shuffle: buffer_size must be greater than zero, "
                                                               f"got {self.size} (dataset op '{spec.name}')")
        # The seed generator lives in the iterator's context: `repeat` rebuilds this stage every
        # epoch, and each epoch takes the generator's next seeds (or the same ones again).
        gen = ctx.state.get(id(spec))
        if gen is None:
            seed, seed2 = int(spec.args[1]), int(spec.args[2])
            if seed == 0 and seed2 == 0:
                seed, seed2 = secrets.randbits(64), secrets.randbits(64)
            if spec.attrs.get("reshuffle_each_iteration", True):
                words = philox.PhiloxWords(seed, seed2)
                gen = ctx.state[id(spec)] = lambda: (words(), words())
            else:
                gen = ctx.state[id(spec)] = lambda: (seed, seed2)
        self.random = philox.PhiloxWords(*gen())
        self.buf: list = []          # slot p % size holds window position p
        self.start = self.end = 0    # the window: positions [start, end)
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync
        self.rows = self.up.rows if self.sync else None      # then the buffer holds row indices
        self.up_done = False

    def _put(self, e):
        p = self.end % self.size
        if p == len(self.buf):
            self.buf.append(e)
        else:
            self.buf[p] = e
        self.end += 1

    def _pick(self):
        n = self.end - self.start
        if not n:
            return END
        buf, size = self.buf, self.size
        first = self.start % size
        j = (self.start + self.random() % n) % size
        e = buf[j]
        buf[j] = buf[first]
        buf[first] = None
        self.start += 1
        return e

    def pull_index(self):
        size, up = self.size, self.up
        while not self.up_done and self.end - self.start < size:
            i = up.pull_index()
            if i is END:
                self.up_done = True
                break
            self._put(i)
        return self._pick()

    def pull(self):
        rows = self.rows
        if rows is not None:
            i = self.pull_index()
            return END if i is END else tuple([a[i] for a in rows])
        size, up = self.size, self.up
        while not self.up_done and self.end - self.start < size:
            e = up.pull()
            if e is END:
                self.up_done = True
                break
            self._put(e)
        return self._pick()

    async def next(self):
        if self.sync:
            return self.pull()
        while not self.up_done and self.end - self.start < self.size:
            e = await self.up.next()
            if e is END:
                self.up_done = True
                break
            self._put(e)
        return self._pick()

    def close(self):
        _close(self.up)


def _stack(parts, dt, index, spec):
    if dt.kind == "O":
        out = np.empty((len(parts),) + np.shape(parts[0]), dtype=object)
        for j, p in enumerate(parts):
            # A scalar string may come as a 0-d object array (a function's output): store its bytes.
            out[j] = p[()] if type(p) is np.ndarray and p.ndim == 0 else p
        return out
    try:
        return np.stack(parts).astype(dt, copy=False)
    except ValueError:
        first = np.shape(parts[0])
        k = next(j for j, p in enumerate(parts) if np.shape(p) != first)
        raise errors.InvalidArgumentError(
            spec.name, None, f"Cannot batch tensors with different shapes in component {index}. First element had "
                             f"shape {list(first)} and element {k} had shape {list(np.shape(parts[k]))}. "
                             f"(dataset op '{spec.name}'; padded_batch pads them)") from None


class _Batch(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.n = int(spec.args[0])
        if self.n <= 0:
            raise errors.InvalidArgumentError(spec.name, None, f"batch_size must be greater than zero, got "
                                                               f"{self.n} (dataset op '{spec.name}')")
        self.drop = bool(spec.args[1])
        self.dtypes = spec.attrs["output_types"]
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync
        self.up_done = False

    def _finish(self, elems):
        if not elems or (self.drop and len(elems) < self.n):
            return END
        return tuple([self._combine([e[i] for e in elems], dt, i) for i, dt in enumerate(self.dtypes)])

    def _combine(self, parts, dt, i):
        return _stack(parts, dt, i, self.spec)

    def pull(self):
        if self.up_done:
            return END
        rows = self.up.rows
        if rows is not None and type(self) is _Batch:
            return self._gather(rows)
        elems = []
        pull = self.up.pull
        for _ in range(self.n):
            e = pull()
            if e is END:
                self.up_done = True
                break
            elems.append(e)
        return self._finish(elems)

    def _gather(self, rows):
        idx = []
        pull_index = self.up.pull_index
        for _ in range(self.n):
            i = pull_index()
            if i is END:
                self.up_done = True
                break
            idx.append(i)
        if not idx or (self.drop and len(idx) < self.n):
            return END
        sel = np.array(idx, dtype=np.intp)
        return tuple([a[sel] for a in rows])

    async def next(self):
        if self.sync:
            return self.pull()
        if self.up_done:
            return END
        elems = []
        for _ in range(self.n):
            e = await self.up.next()
            if e is END:
                self.up_done = True
                break
            elems.append(e)
        return self._finish(elems)

    def close(self):
        _close(self.up)


class _PaddedBatch(_Batch):
    """Batches elements padded to `padded_shapes` (-1: the batch's largest) with `padding_values`."""

    def __init__(self, spec, ctx):
        n = len(spec.attrs["output_types"])
        rest = spec.args[2:]
        self.padded = [tuple(int(d) for d in np.asarray(s).reshape(-1)) for s in rest[:n]]
        self.values = rest[n:2 * n]
        super().__init__(spec, ctx)

    def _combine(self, parts, dt, i):
        want = self.padded[i]
        shapes = [np.shape(p) for p in parts]
        rank = len(want)
        for s in shapes:
            if len(s) != rank:
                raise errors.InvalidArgumentError(
                    self.spec.name, None, f"padded_batch: component {i} has rank {len(s)}, padded_shapes "
                                          f"gives rank {rank} (dataset op '{self.spec.name}')")
        target = []
        for d, w in enumerate(want):
            m = max(s[d] for s in shapes)
            if w >= 0 and m > w:
                raise errors.InvalidArgumentError(
                    self.spec.name, None, f"padded_batch: component {i} has dimension {d} of size {m}, larger "
                                          f"than the padded size {w} (dataset op '{self.spec.name}')")
            target.append(w if w >= 0 else m)
        out = np.full([len(parts)] + target, self.values[i], dtype=dt)
        for j, p in enumerate(parts):
            out[(j,) + tuple(slice(0, s) for s in np.shape(p))] = p
        return out


class _Cache(Stage):
    """Records the first complete pass over its input in memory and replays it afterwards (when
    `repeat` rebuilds it)."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        st = ctx.state.setdefault(id(spec), {"done": None})
        self.st = st
        if st["done"] is not None:
            self.replay = iter(st["done"])
            self.up = None
        else:
            self.replay = None
            self.rec: list = []
            self.up = build(spec.inputs[0], ctx)
            self.sync = self.up.sync

    def _record(self, e):
        if e is END:
            self.st["done"] = self.rec
        else:
            self.rec.append(e)
        return e

    def pull(self):
        if self.replay is not None:
            return next(self.replay, END)
        return self._record(self.up.pull())

    async def next(self):
        if self.replay is not None:
            return next(self.replay, END)
        return self._record(await self.up.next())

    def close(self):
        _close(self.up)


class _Zip(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.ups = [build(s, ctx) for s in spec.inputs]
        self.sync = all(u.sync for u in self.ups)

    def pull(self):
        out = []
        for u in self.ups:
            e = u.pull()
            if e is END:
                return END
            out.extend(e)
        return tuple(out)

    async def next(self):
        out = []
        for u in self.ups:
            e = await u.next()
            if e is END:
                return END
            out.extend(e)
        return tuple(out)

    def close(self):
        for u in self.ups:
            _close(u)


class _Concatenate(Stage):
    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.ups = [build(s, ctx) for s in spec.inputs]
        self.sync = all(u.sync for u in self.ups)
        self.i = 0

    def pull(self):
        while self.i < len(self.ups):
            e = self.ups[self.i].pull()
            if e is not END:
                return e
            self.i += 1
        return END

    async def next(self):
        while self.i < len(self.ups):
            e = await self.ups[self.i].next()
            if e is not END:
                return e
            self.i += 1
        return END

    def close(self):
        for u in self.ups:
            _close(u)


class _Map(Stage):
    """Runs the traced function on each element; with `num_parallel_calls` P > 1, keeps up to P
    calls in flight (they run concurrently with each other and with the steps on this runtime) and
    returns their results in input order."""

    sync = False

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.runner = ctx.runner(spec, "f")
        p = int(spec.args[0]) if spec.args else 1
        self.parallel = (os.cpu_count() or 2) if p < 0 else max(1, p)
        self.inflight: collections.deque = collections.deque()
        self.up = build(spec.inputs[0], ctx)
        self.up_done = False

    async def _result(self, fut):
        try:
            return tuple(await fut)
        except errors.OpError as e:
            raise self.fail(e, f" running its function '{self.runner.fn.name}'") from None

    async def next(self):
        if self.parallel == 1:
            e = await self.up.next()
            if e is END:
                return END
            return await self._result(self.runner.call(e))
        inflight = self.inflight
        while not self.up_done and len(inflight) < self.parallel:
            e = await self.up.next()
            if e is END:
                self.up_done = True
                break
            inflight.append(self.runner.call(e))
        if not inflight:
            return END
        return await self._result(inflight.popleft())

    def close(self):
        for f in self.inflight:
            f.cancel()
        self.inflight.clear()
        _close(self.up)


class _Filter(Stage):
    sync = False

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.runner = ctx.runner(spec, "predicate")
        self.up = build(spec.inputs[0], ctx)

    async def next(self):
        while True:
            e = await self.up.next()
            if e is END:
                return END
            try:
                (keep,) = await self.runner.call(e)
            except errors.OpError as err:
                raise self.fail(err, f" running its predicate '{self.runner.fn.name}'") from None
            if bool(keep):
                return e

    def close(self):
        _close(self.up)


class _FlatMap(Stage):
    sync = False

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.ctx = ctx
        self.runner = ctx.runner(spec, "f")
        self.up = build(spec.inputs[0], ctx)
        self.inner = None

    async def _open(self, e):
        try:
            (sub,) = await self.runner.call(e)
        except errors.OpError as err:
            raise self.fail(err, f" running its function '{self.runner.fn.name}'") from None
        return build(sub, self.ctx)

    async def next(self):
        while True:
            if self.inner is None:
                e = await self.up.next()
                if e is END:
                    return END
                self.inner = await self._open(e)
            e = await self.inner.next()
            if e is not END:
                return e
            _close(self.inner)
            self.inner = None

    def close(self):
        _close(self.inner)
        _close(self.up)


class _Interleave(_FlatMap):
    """Cycles through `cycle_length` slots, `block_length` elements from each in turn; an empty slot
    opens the dataset of the next input element when the cycle reaches it, an exhausted one is
    emptied and the cycle moves on (TF's InterleaveDataset, step for step)."""

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.cycle = max(1, int(spec.args[0]))
        self.block = max(1, int(spec.args[1]))
        self.slots: list = [None] * self.cycle
        self.index = 0              # the slot in turn
        self.taken = 0              # elements taken from it in this turn
        self.open = 0
        self.up_done = False

    def _advance(self):
        self.taken = 0
        self.index = (self.index + 1) % self.cycle

    async def next(self):
        while not self.up_done or self.open:
            slot = self.slots[self.index]
            if slot is not None:
                e = await slot.next()
                if e is not END:
                    self.taken += 1
                    if self.taken == self.block:
                        self._advance()
                    return e
                _close(slot)
                self.slots[self.index] = None
                self.open -= 1
                self._advance()
            elif not self.up_done:
                e = await self.up.next()
                if e is END:
                    self.up_done = True
                else:
                    self.slots[self.index] = await self._open(e)
                    self.open += 1
            else:
                self._advance()
        return END

    def close(self):
        for s in self.slots:
            _close(s)
        self.slots = [None] * self.cycle
        _close(self.up)


class _Error:
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


class _Prefetch(Stage):
    """A producer fills a buffer of at most `buffer_size` elements from the input, pulling only
    when there is room, while the consumer takes from it: input work overlaps the steps that
    consume it, with back-pressure.

    A synchronous input (slices, a generator, text files, their shuffles and batches) is pulled
    by a thread of its own, so that its work, a blocking generator included, runs beside the
    loop instead of stalling it; the consumer takes a ready element under a lock, with no hop
    through the loop. An asynchronous input (a map, a filter) is pulled by a task on the loop,
    since its functions run there anyway. Both start on the first request, as TF's do."""

    sync = False

    def __init__(self, spec, ctx):
        super().__init__(spec)
        n = int(spec.args[0])
        self.n = n if n > 0 else _AUTOTUNE_BUFFER
        self.ctx = ctx
        self.up = build(spec.inputs[0], ctx)
        self.buf: collections.deque = collections.deque()
        self.cond = threading.Condition()      # guards buf, avail and stopped against the thread
        self.producer = None                   # the thread or task, once started
        self.stopped = False
        self.finished = False                  # END was handed out
        self.room = None                       # the task waits on this future while the buffer is full
        self.avail = None                      # the consumer waits on this future while it is empty

    def _start(self) -> None:
        if self.up.sync:
            self.producer = threading.Thread(target=self._produce_sync, daemon=True,
                                             name=f"actorflow-prefetch-{self.spec.name}")
            self.producer.start()
        else:
            self.producer = self.ctx.spawn(self._produce())

    def _pull_sync(self):
        try:
            return self.up.pull()
        except errors.OpError as err:
            return _Error(err)
        except Exception as err:  # noqa: BLE001 - a pipeline bug fails the element, not the runtime
            log.exception("prefetch of %s failed", self.spec.name)
            return _Error(_op_error(self.spec, err))

    def _produce_sync(self) -> None:
        try:
            self._fill()
        finally:
            if self.stopped:
                _close(self.up)

    def _fill(self) -> None:
        buf, cond, loop = self.buf, self.cond, self.ctx.loop
        while True:
            with cond:
                while len(buf) >= self.n and not self.stopped:
                    cond.wait()
                if self.stopped:
                    return
            e = self._pull_sync()
            with cond:
                if self.stopped:
                    return
                buf.append(e)
                wake = self.avail is not None
            if wake:
                try:
                    loop.call_soon_threadsafe(self._wake)
                except RuntimeError:          # the loop is closed: nobody will consume
                    return
            if e is END:
                return

    async def _produce(self) -> None:
        up, buf, loop = self.up, self.buf, self.ctx.loop
        while True:
            while len(buf) >= self.n:
                self.room = loop.create_future()
                await self.room
            try:
                e = await up.next()
            except errors.OpError as err:
                e = _Error(err)
            except Exception as err:  # noqa: BLE001 - a pipeline bug fails the element, not the loop
                log.exception("prefetch of %s failed", self.spec.name)
                e = _Error(_op_error(self.spec, err))
            with self.cond:
                buf.append(e)
            self._wake()
            if e is END:
                return

    def _wake(self) -> None:
        a = self.avail
        if a is not None and not a.done():
            a.set_result(None)

    def _take(self):
        """The next element (raising a failed one's error), or _NOT_READY; with `cond` held, and
        then a waiting consumer's future set up."""
        if self.finished:
            return END
        buf = self.buf
        if not buf:
            if self.producer is None:
                self._start()
            return _NOT_READY
        e = buf.popleft()
        self.cond.notify()
        r = self.room
        if r is not None and not r.done():
            r.set_result(None)
        if e is END:
            self.finished = True
        elif type(e) is _Error:
            raise e.error
        return e

    def try_now(self):
        with self.cond:
            return self._take()

    async def next(self):
        while True:
            with self.cond:
                e = self._take()
                if e is _NOT_READY:
                    # Set up under the lock, so the producer's next append sees it and wakes us.
                    self.avail = self.ctx.loop.create_future()
            if e is not _NOT_READY:
                return e
            try:
                await self.avail
            finally:
                with self.cond:
                    self.avail = None

    def close(self):
        with self.cond:
            self.stopped = True
            self.buf.clear()
            self.cond.notify_all()
        p = self.producer
        if isinstance(p, threading.Thread) and p.is_alive():
            # The thread may be inside `up.pull()` (a blocked generator): it owns the input until
            # it returns, then sees `stopped` and closes the input itself.
            return
        if p is not None and not isinstance(p, threading.Thread):
            p.cancel()
        _close(self.up)


_AUTOTUNE_BUFFER = 4     # prefetch(AUTOTUNE): a fixed, bounded buffer


def _close(stage) -> None:
    if stage is not None:
        c = getattr(stage, "close", None)
        if c is not None:
            c()


# -- stages of the TF-1.x breadth methods (unbatch, shard, window, scan, ...) ----------------------

class _OneUp(Stage):
    """A stage over one input whose `step(e)` maps an input element to an output element, None
    (skip it) or END; synchronous when its input is, unless it runs a function."""

    uses_functions = False

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.ctx = ctx
        self.up = build(spec.inputs[0], ctx)
        self.sync = self.up.sync and not self.uses_functions
        self.done = False

    def pull(self):
        while not self.done:
            e = self.up.pull()
            out = self.step(e)
            if out is not None:
                if out is END:
                    self.done = True
                return out
        return END

    async def next(self):
        if self.sync:
            return self.pull()
        while not self.done:
            e = await self.up.next()
            out = await self.astep(e)
            if out is not None:
                if out is END:
                    self.done = True
                return out
        return END

    async def astep(self, e):
        return self.step(e)

    async def call(self, name, args):
        runners = self.__dict__.setdefault("_bound", {})       # this stage's function runners, by attr
        runner = runners.get(name)
        if runner is None:
            runner = runners[name] = self.ctx.runner(self.spec, name)
        try:
            return tuple(await runner.call(args))
        except errors.OpError as err:
            raise self.fail(err, f" running its function '{runner.fn.name}'") from None

    def close(self):
        _close(self.up)


class _Unbatch(_OneUp):
    """Each input element's rows, one element each (UnbatchDataset)."""

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.cur = None
        self.i = self.n = 0

    def pull(self):
        while self.i >= self.n:
            e = self.up.pull()
            if e is END:
                return END
            self._load(e)
        return self._row()

    async def next(self):
        if self.sync:
            return self.pull()
        while self.i >= self.n:
            e = await self.up.next()
            if e is END:
                return END
            self._load(e)
        return self._row()

    def _load(self, e):
        sizes = [np.shape(c)[0] if np.ndim(c) else None for c in e]
        if None in sizes:
            raise errors.InvalidArgumentError(self.spec.name, None, f"unbatch: every component of an element needs a "
                                                                    f"leading dimension (dataset op '{self.spec.name}')")
        if len(set(sizes)) > 1:
            raise errors.InvalidArgumentError(
                self.spec.name, None, f"Input element must have the same batch size in each component. Component 0 "
                                      f"had size {sizes[0]} but component {next(i for i, s in enumerate(sizes) if s != sizes[0])}"
                                      f" had size {next(s for s in sizes if s != sizes[0])}. (dataset op "
                                      f"'{self.spec.name}')")
        self.cur, self.i, self.n = e, 0, sizes[0] if sizes else 0

    def _row(self):
        i = self.i
        self.i = i + 1
        return tuple([c[i] for c in self.cur])


class _Shard(_OneUp):
    """Every `num_shards`-th element from the `index`-th (ShardDataset)."""

    def __init__(self, spec, ctx):
        n, index = int(spec.args[0]), int(spec.args[1])
        if n <= 0:
            raise errors.InvalidArgumentError(spec.name, None, f"Number of shards must be greater than zero "
                                                               f"(currently num_shards = {n}) (dataset op '{spec.name}')")
        if not 0 <= index < n:
            raise errors.InvalidArgumentError(spec.name, None, f"Index must be between 0 and {n - 1} (currently "
                                                               f"index = {index}) (dataset op '{spec.name}')")
        super().__init__(spec, ctx)
        self.n, self.index, self.pos = n, index, 0

    def step(self, e):
        if e is END:
            return END
        p = self.pos
        self.pos = p + 1
        return e if p % self.n == self.index else None


class _Elements(Stage):
    """A list of elements held in memory: a window's component, a group_by_window group
    (ElementsDataset, made by the runtime only)."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.it = iter(spec.args[0])

    def pull(self):
        return next(self.it, END)


def _elements_spec(name, elements):
    return DatasetSpec("ElementsDataset", name, (), (elements,), {})


class _Window(_OneUp):
    """Windows of `size` elements `stride` apart, a window starting every `shift` elements; each
    output element holds one dataset per component (WindowDataset, TF's buffer step for step)."""

    def __init__(self, spec, ctx):
        size, shift, stride = (int(a) for a in spec.args[:3])
        for what, v in (("size", size), ("shift", shift), ("stride", stride)):
            if v <= 0:
                raise errors.InvalidArgumentError(spec.name, None, f"Window {what} must be greater than zero, but "
                                                                   f"got {v}. (dataset op '{spec.name}')")
        super().__init__(spec, ctx)
        self.size, self.shift, self.stride = size, shift, stride
        self.drop = bool(spec.args[3])
        self.target = (size - 1) * stride + 1
        self.buf: collections.deque = collections.deque()
        self.up_done = False
        self.skip = 0

    def _window(self):
        buf = self.buf
        if not buf or (self.drop and len(buf) < self.target):
            return END
        elems = list(buf)[:self.target:self.stride]
        if self.shift >= len(buf):
            self.skip = self.shift - len(buf)
            buf.clear()
        else:
            for _ in range(self.shift):
                buf.popleft()
        n = len(self.spec.attrs["output_types"])
        return tuple(_elements_spec(self.spec.name, [(e[i],) for e in elems]) for i in range(n))

    def _take(self, e):
        """Takes an input element; True when the buffer needs no more."""
        if e is END:
            self.up_done = True
            return True
        if self.skip:
            self.skip -= 1
            return False
        self.buf.append(e)
        return len(self.buf) >= self.target

    def pull(self):
        while not self.up_done and (self.skip or len(self.buf) < self.target):
            if self._take(self.up.pull()):
                break
        return self._window()

    async def next(self):
        if self.sync:
            return self.pull()
        while not self.up_done and (self.skip or len(self.buf) < self.target):
            if self._take(await self.up.next()):
                break
        return self._window()


class _Scan(_OneUp):
    """Carries a state through the elements: `f(state, element)` gives the new state and the
    output element (ScanDataset); with `final_only` the only output is the last state (reduce)."""

    uses_functions = True

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.n_state = int(spec.attrs["n_state"])
        self.state = tuple(spec.args[:self.n_state])
        self.final = bool(spec.attrs.get("final_only", False))
        self.up_ended = False

    async def astep(self, e):
        if e is END:
            if self.final:
                self.final = False
                self.up_ended = True
                return self.state
            return END
        out = await self.call("f", (*self.state, *e))
        self.state = out[:self.n_state]
        return None if self.final else out[self.n_state:]

    async def next(self):
        if self.up_ended:
            return END
        return await super().next()


class _TakeWhile(_OneUp):
    """Elements while `predicate` holds; the first that fails it ends the dataset (TakeWhileDataset)."""

    uses_functions = True

    async def astep(self, e):
        if e is END:
            return END
        (keep,) = await self.call("predicate", e)
        return e if bool(keep) else END


class _Unique(_OneUp):
    """Each distinct element once, at its first occurrence (UniqueDataset)."""

    def __init__(self, spec, ctx):
        if len(spec.attrs["output_types"]) != 1:
            raise errors.InvalidArgumentError(spec.name, None, f"UniqueDataset only supports inputs with a single "
                                                               f"component. (dataset op '{spec.name}')")
        super().__init__(spec, ctx)
        self.seen: set = set()

    def step(self, e):
        if e is END:
            return END
        v = e[0]
        if isinstance(v, bytes):
            key = v
        else:
            a = np.asarray(v)
            key = (a.shape, tuple(a.ravel().tolist()) if a.dtype == object else a.tobytes())
        if key in self.seen:
            return None
        self.seen.add(key)
        return e


class _IgnoreErrors(_OneUp):
    """Drops the elements whose production failed (IgnoreErrorsDataset)."""

    def pull(self):
        while True:
            try:
                return self.up.pull()
            except errors.OpError as e:
                self._log(e)

    async def next(self):
        while True:
            try:
                return await self.up.next()
            except errors.OpError as e:
                self._log(e)

    def _log(self, e):
        if self.spec.attrs.get("log_warning", False):
            log.warning("ignore_errors (dataset op '%s') dropped an element: %s", self.spec.name, e.message)


class _AssertCardinality(_OneUp):
    """Its input, failing when it has other than `expected` elements (AssertCardinalityDataset)."""

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.expected = int(spec.args[0])
        self.count = 0

    def step(self, e):
        n = self.expected
        if e is END:
            if n >= 0 and self.count < n:
                self.done = True            # once: a later pull (ignore_errors) sees the end
                raise errors.FailedPreconditionError(
                    self.spec.name, None, f"Input dataset was expected to contain {_elements(n)} but contained only "
                                          f"{_elements(self.count)}. (dataset op '{self.spec.name}')")
            return END
        self.count += 1
        if n >= 0 and self.count > n:
            raise errors.FailedPreconditionError(
                self.spec.name, None, f"Input dataset was expected to contain {_elements(n)} but contained at least "
                                      f"{_elements(self.count)}. (dataset op '{self.spec.name}')")
        return e


def _elements(n):
    return f"{n} element" + ("" if n == 1 else "s")


def _seed_source(ctx, spec, seed, seed2, rerandomize):
    """The (seed, seed2) of each epoch of `spec`, as TF's seed generators give them: the op's seeds
    every time, or with `rerandomize` two words of a Philox stream on them per epoch. Lives in the
    iterator's context, since `repeat` rebuilds the stage every epoch."""
    gen = ctx.state.get(id(spec))
    if gen is None:
        if seed == 0 and seed2 == 0:
            seed, seed2 = secrets.randbits(64), secrets.randbits(64)
        if rerandomize:
            words = philox.PhiloxWords(seed, seed2)
            gen = ctx.state[id(spec)] = lambda: (words(), words())
        else:
            gen = ctx.state[id(spec)] = lambda: (seed, seed2)
    return gen()


class _Random(Stage):
    """int64 elements, each one word of TF's Philox stream for the op's seeds (RandomDataset)."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        s = _seed_source(ctx, spec, int(spec.args[0]), int(spec.args[1]),
                         spec.attrs.get("rerandomize_each_iteration", False))
        self.words = philox.PhiloxWords(*s)

    def pull(self):
        return (np.int64(self.words()),)


class _DirectedInterleave(Stage):
    """Elements of the data inputs in the order the selector input's indices give
    (DirectedInterleaveDataset: choose_from_datasets and sample_from_datasets)."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        self.selector = build(spec.inputs[0], ctx)
        self.ups = [build(s, ctx) for s in spec.inputs[1:]]
        self.live = [True] * len(self.ups)
        self.n_live = len(self.ups)
        self.stop = bool(spec.attrs.get("stop_on_empty_dataset", False))
        self.sync = self.selector.sync and all(u.sync for u in self.ups)

    def _index(self, s):
        i = int(s[0])
        if not 0 <= i < len(self.ups):
            raise errors.InvalidArgumentError(self.spec.name, None, f"Selector index out of range: {i} >= "
                                                                    f"{len(self.ups)} (dataset op '{self.spec.name}')")
        return i

    def _ended(self, i):
        self.live[i] = False
        self.n_live -= 1
        return self.stop or self.n_live == 0

    def pull(self):
        while self.n_live:
            s = self.selector.pull()
            if s is END:
                return END
            i = self._index(s)
            if not self.live[i]:
                continue
            e = self.ups[i].pull()
            if e is not END:
                return e
            if self._ended(i):
                return END
        return END

    async def next(self):
        if self.sync:
            return self.pull()
        while self.n_live:
            s = await self.selector.next()
            if s is END:
                return END
            i = self._index(s)
            if not self.live[i]:
                continue
            e = await self.ups[i].next()
            if e is not END:
                return e
            if self._ended(i):
                return END
        return END

    def close(self):
        _close(self.selector)
        for u in self.ups:
            _close(u)


class _GroupByWindow(_OneUp):
    """Groups elements by `key_func`; a group of its key's window size, and at the input's end every
    group left (in key order, as TF's std::map), goes through `reduce_func(key, group dataset)`
    whose dataset's elements are the output (GroupByWindowDataset)."""

    uses_functions = True

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.groups: dict = {}
        self.sizes: dict = {}
        self.cur = None
        self.up_done = False

    async def _key(self, e):
        (k,) = await self.call("key_func", e)
        if np.ndim(k) != 0:
            raise self.fail(ValueError(f"key_func must return a scalar int64, got shape {list(np.shape(k))}"))
        return int(k)

    async def _flush(self, key):
        elems = self.groups.pop(key)
        (sub,) = await self.call("reduce_func", (np.int64(key), _elements_spec(self.spec.name, elems)))
        self.cur = build(sub[()] if isinstance(sub, np.ndarray) else sub, self.ctx)

    async def next(self):
        while True:
            if self.cur is not None:
                e = await self.cur.next()
                if e is not END:
                    return e
                _close(self.cur)
                self.cur = None
            while not self.up_done:
                e = await self.up.next()
                if e is END:
                    self.up_done = True
                    break
                k = await self._key(e)
                if k not in self.sizes:
                    (w,) = await self.call("window_size_func", (np.int64(k),))
                    if int(w) <= 0:
                        raise self.fail(ValueError(f"Window size must be greater than zero, but got {int(w)}."))
                    self.sizes[k] = int(w)
                g = self.groups.setdefault(k, [])
                g.append(e)
                if len(g) == self.sizes[k]:
                    await self._flush(k)
                    break
            if self.cur is None:
                if not self.groups:
                    return END
                await self._flush(min(self.groups))

    def close(self):
        _close(self.cur)
        super().close()


class _GroupByReducer(_OneUp):
    """Reduces each key's elements (`key_func`) with a Reducer: `init_func(key)`, then
    `reduce_func(state, element)` per element, and at the input's end one
    `finalize_func(state)` output per key, in key order (GroupByReducerDataset)."""

    uses_functions = True

    def __init__(self, spec, ctx):
        super().__init__(spec, ctx)
        self.states: dict = {}
        self.out = None

    async def next(self):
        if self.out is None:
            while True:
                e = await self.up.next()
                if e is END:
                    break
                (k,) = await self.call("key_func", e)
                k = int(k)
                st = self.states.get(k)
                if st is None:
                    st = await self.call("init_func", (np.int64(k),))
                self.states[k] = await self.call("reduce_func", (*st, *e))
            self.out = iter([self.states[k] for k in sorted(self.states)])      # TF's std::map order
        for st in self.out:
            return await self.call("finalize_func", st)
        return END


class _Csv(Stage):
    """Records of CSV files (CsvDataset): RFC 4180 fields (quoted when `use_quote_delim`, a doubled
    quote inside a quoted field being one quote), each column parsed to its default's dtype; an
    empty field or `na_value` takes the column's default, and a column without one (an empty
    default) must be present. Only `select_cols` are kept, when given."""

    def __init__(self, spec, ctx):
        super().__init__(spec)
        a = spec.attrs
        self.files = [f.decode() if isinstance(f, bytes) else str(f) for f in np.asarray(spec.args[0]).reshape(-1)]
        self.defaults = [np.asarray(d).reshape(-1) for d in spec.args[1:]]
        self.types = [np.dtype(t) for t in a["output_types"]]
        self.select = list(a.get("select_cols", ()))
        self.exclude = set(a.get("exclude_cols", ()))
        self.header = bool(a.get("header", False))
        self.delim = a.get("field_delim", ",")
        self.quote = bool(a.get("use_quote_delim", True))
        self.na = a.get("na_value", "")
        self.compression = a.get("compression_type", "")
        self.reader = self.f = None
        self.path = None
        self.record = 0

    def _open(self, path):
        import csv
        import io
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed at its end or by close()
        except OSError as e:
            raise errors.NotFoundError(self.spec.name, None, f"{path}: {e.strerror} (dataset op "
                                                             f"'{self.spec.name}')") from None
        # latin-1 maps each byte to one character and back: fields come out as the file's bytes.
        if self.compression:
            # The decompressing readers give read(n) only: the file is decompressed into memory.
            r, chunks = tfrecord.open_for_read(raw, self.compression), []
            try:
                while chunk := r.read(1 << 20):
                    chunks.append(chunk)
            finally:
                r.close()
            raw = io.BytesIO(b"".join(chunks))
        self.f = io.TextIOWrapper(raw, encoding="latin-1", newline="")
        kw = {"delimiter": self.delim, "strict": True}
        kw.update({"quotechar": '"', "doublequote": True} if self.quote else {"quoting": csv.QUOTE_NONE})
        self.reader = csv.reader(self.f, **kw)
        self.path, self.record = path, 0
        if self.header:
            next(self.reader, None)

    def _fail(self, msg):
        return errors.InvalidArgumentError(self.spec.name, None, f"{msg} (file {self.path}; dataset op "
                                                                 f"'{self.spec.name}')")

    def pull(self):
        import csv
        while True:
            if self.reader is None:
                if not self.files:
                    return END
                self._open(self.files.pop(0))
            try:
                row = next(self.reader, None)
            except csv.Error as e:
                raise self._fail(f"malformed CSV in record {self.record}: {e}") from None
            if row is None:
                self.close()
                continue
            r = self.record
            self.record += 1
            return self._parse(row, r)

    def _columns(self, row, r):
        n = len(self.defaults)
        if self.select:
            if self.select[-1] >= len(row):
                raise self._fail(f"Expect {self.select[-1] + 1} fields but have {len(row)} in record {r}")
            return [row[c] for c in self.select]
        if self.exclude:
            row = [v for c, v in enumerate(row) if c not in self.exclude]
        if len(row) != n:
            raise self._fail(f"Expect {n} fields but have {len(row)} in record {r}")
        return row

    def _parse(self, row, r):
        out = []
        for i, (field, default, dt) in enumerate(zip(self._columns(row, r), self.defaults, self.types)):
            if field == "" or field == self.na:
                if default.size == 0:
                    raise self._fail(f"Field {i} is required but missing in record {r}!")
                out.append(default[0])
                continue
            if dt.kind == "O":
                out.append(field.encode("latin-1"))
                continue
            try:
                v = int(field) if dt.kind == "i" else float(field)
                if "_" in field:
                    raise ValueError(field)
                out.append(np.asarray(v).astype(dt) if dt.kind == "f" else dt.type(v))
            except (ValueError, OverflowError):
                raise self._fail(f"Field {i} in record {r} is not a valid {_dtype_name(dt)}: {field}") from None
        return tuple(out)

    def close(self):
        if self.f is not None:
            self.f.close()
        self.f = self.reader = None


def _dtype_name(dt):
    return {"int32": "int32", "int64": "int64", "float32": "float", "float64": "double"}.get(dt.name, dt.name)


class _Sql(Stage):
    """The rows of an SQL query, one tuple of scalars each (SqlDataset; the sqlite driver, as TF's
    only one): each column converted to its output type."""

    def __init__(self, spec, ctx):
        import sqlite3
        super().__init__(spec)
        driver, source, query = (_scalar_str(a) for a in spec.args[:3])
        if driver != "sqlite":
            raise errors.InvalidArgumentError(spec.name, None, f"The database type, {driver}, is not supported by "
                                                               f"SqlDataset. The set of supported databases is: "
                                                               f"{{'sqlite'}}. (dataset op '{spec.name}')")
        self.types = [np.dtype(t) for t in spec.attrs["output_types"]]
        try:
            self.db = sqlite3.connect(f"file:{source}?mode=ro", uri=True, check_same_thread=False)
            self.cursor = self.db.execute(query)
        except sqlite3.Error as e:
            raise errors.InvalidArgumentError(spec.name, None, f"SQLite error: {e} (query {query!r} on {source}; "
                                                               f"dataset op '{spec.name}')") from None
        n = len(self.cursor.description or ())
        if n != len(self.types):
            self.close()
            raise errors.InvalidArgumentError(spec.name, None, f"The number of columns in query ({n}) must match "
                                                               f"the number of elements in output_types "
                                                               f"({len(self.types)}). (dataset op '{spec.name}')")

    def pull(self):
        if self.cursor is None:
            return END
        row = self.cursor.fetchone()
        if row is None:
            self.close()
            return END
        out = []
        for i, (v, dt) in enumerate(zip(row, self.types)):
            if dt.kind == "O":
                out.append(v if isinstance(v, bytes) else str("" if v is None else v).encode())
            elif dt.kind == "b":
                out.append(np.bool_(bool(v)))
            else:
                try:
                    out.append(dt.type(0 if v is None else v))
                except (TypeError, ValueError, OverflowError):
                    raise errors.InvalidArgumentError(
                        self.spec.name, None, f"column {i} value {v!r} is not a valid {dt.name} (dataset op "
                                              f"'{self.spec.name}')") from None
        return tuple(out)

    def close(self):
        if self.cursor is not None:
            self.cursor.close()
            self.db.close()
        self.cursor = None


_STAGES = {
    "TensorDataset": _Tensors, "TensorSliceDataset": _Slices, "RangeDataset": _Range,
    "GeneratorDataset": _Generator, "TextLineDataset": _TextLines, "MapDataset": _Map,
    "ParallelMapDataset": _Map, "FilterDataset": _Filter, "FlatMapDataset": _FlatMap,
    "InterleaveDataset": _Interleave, "BatchDataset": _Batch, "PaddedBatchDataset": _PaddedBatch,
    "ShuffleDataset": _Shuffle, "RepeatDataset": _Repeat, "TakeDataset": _Take, "SkipDataset": _Skip,
    "PrefetchDataset": _Prefetch, "CacheDataset": _Cache, "ZipDataset": _Zip, "ConcatenateDataset": _Concatenate,
    "TFRecordDataset": _TFRecords, "FixedLengthRecordDataset": _FixedRecords,
    "UnbatchDataset": _Unbatch, "ShardDataset": _Shard, "WindowDataset": _Window, "ElementsDataset": _Elements,
    "ScanDataset": _Scan, "TakeWhileDataset": _TakeWhile, "UniqueDataset": _Unique,
    "IgnoreErrorsDataset": _IgnoreErrors, "AssertCardinalityDataset": _AssertCardinality, "RandomDataset": _Random,
    "DirectedInterleaveDataset": _DirectedInterleave, "GroupByWindowDataset": _GroupByWindow,
    "GroupByReducerDataset": _GroupByReducer, "CsvDataset": _Csv, "SqlDataset": _Sql,
}


def build(spec, ctx) -> Stage:
    """The running stage (with its inputs) of the dataset `spec`."""
    if isinstance(spec, np.ndarray) and spec.ndim == 0:     # fed through a function's placeholder
        spec = spec[()]
    cls = _STAGES.get(getattr(spec, "kind", None))
    if cls is None:
        raise errors.InvalidArgumentError(None, None, f"not a dataset: {spec!r:.100}")
    return cls(spec, ctx)


# -- the resource ---------------------------------------------------------------------------------

class IteratorResource:
    """An iterator's state: its pipeline (None until initialized) and the waiting IteratorGetNext
    operations, served in order."""

    def __init__(self, name: str, attrs: dict):
        self.name = name
        self.pipeline = None
        self.ctx = None
        self.waiters: collections.deque = collections.deque()
        self.server = None              # the task serving waiters that need waiting for
        self.whole: set = set()         # the contexts of running DatasetToSingleElement/DatasetToTFRecord ops

    def run(self, op_type: str, attrs: dict, args, done, step) -> None:
        if op_type == "MakeIterator":
            self._start(args[0], step)
            done(None, None)
            if self.waiters and self.server is None:
                self._serve_now()           # get_next calls that were waiting take from the new run
            return
        if op_type in ("DatasetToSingleElement", "DatasetToTFRecord"):
            self._run_whole(op_type, attrs, args, done, step)
            return
        if op_type == "IteratorGetNextAsOptional":
            done = _as_optional(done)
        elif op_type != "IteratorGetNext":
            raise errors.UnimplementedError(None, None, f"iterator '{self.name}' cannot run {op_type}")
        if self.pipeline is None and args:
            self._start(args[0], step)          # a one-shot iterator starts on its first use
        if self.pipeline is None:
            raise errors.FailedPreconditionError(
                None, None, f"GetNext() failed because the iterator '{self.name}' has not been initialized. Ensure "
                            f"that you have run the initializer operation for this iterator before getting the "
                            f"next element.")
        self.waiters.append((step, done))
        if self.server is None:
            self._serve_now()

    def _start(self, spec, step) -> None:
        self.release()
        exe = step.executable
        ctx = _Context(exe.rt, exe.container)
        try:
            self.pipeline = build(spec, ctx)
        except BaseException:
            ctx.close()
            raise
        self.ctx = ctx

    def _run_whole(self, op_type, attrs, args, done, step) -> None:
        """Runs a pipeline of its own over the dataset `args[0]` to its end, for an op that consumes
        a whole dataset: get_single_element (its one element) or TFRecordWriter.write (its records
        written to `args[1]`). Each run starts afresh, as TF's do, so several may run at once."""
        exe = step.executable
        ctx = _Context(exe.rt, exe.container)
        try:
            pipeline = build(args[0], ctx)
        except BaseException:
            ctx.close()
            raise
        self.whole.add(ctx)
        op = attrs.get("op_name") or op_type

        async def run():
            try:
                if op_type == "DatasetToSingleElement":
                    first = await pipeline.next()
                    if first is END:
                        raise errors.InvalidArgumentError(op, None, f"Dataset was empty. (op '{op}')")
                    if await pipeline.next() is not END:
                        raise errors.InvalidArgumentError(op, None, f"Dataset had more than one element. (op '{op}')")
                    result = first[0] if len(first) == 1 else first
                else:
                    path = _scalar_str(args[1])
                    f = tfrecord.open_for_write(path, _scalar_str(args[2]))
                    try:
                        while (e := await pipeline.next()) is not END:
                            f.write(tfrecord.encode_record(_scalar_bytes(e[0])))
                    finally:
                        f.close()
                    result = None
            except errors.OpError as err:
                done(None, err)
            except Exception as err:  # noqa: BLE001 - a pipeline bug fails the step, not the loop
                log.exception("%s failed", op)
                done(None, errors.InternalError(op, None, f"{op}: {type(err).__name__}: {err}"))
            else:
                done(result, None)
            finally:
                self.whole.discard(ctx)
                _close(pipeline)
                ctx.tasks.discard(asyncio.current_task())
                ctx.close()
        ctx.spawn(run())

    def _serve_now(self) -> None:
        """Serves waiters inline while elements are at hand; leaves the rest to a task."""
        waiters = self.waiters
        while waiters:
            step, done = waiters[0]
            if step.error is not None:
                waiters.popleft()
                continue
            try:
                e = self.pipeline.try_now()
            except errors.OpError as err:
                waiters.popleft()
                done(None, err)
                continue
            if e is _NOT_READY:
                self.server = self.ctx.spawn(self._serve())
                return
            waiters.popleft()
            _deliver(done, e)

    async def _serve(self):
        waiters = self.waiters
        try:
            while waiters:
                step, done = waiters[0]
                if step.error is not None:
                    waiters.popleft()
                    continue
                try:
                    e = await self.pipeline.next()
                except errors.OpError as err:
                    e = _Error(err)
                except Exception as err:  # noqa: BLE001 - a pipeline bug fails the step, not the loop
                    log.exception("iterator %s failed", self.name)
                    e = _Error(errors.InternalError(None, None, f"iterator '{self.name}': {type(err).__name__}: {err}"))
                if waiters and waiters[0][0] is step:
                    waiters.popleft()
                if type(e) is _Error:
                    done(None, e.error)
                else:
                    _deliver(done, e)
        finally:
            self.server = None

    def release(self) -> None:
        """Stops the pipeline: cancels its tasks, closes its files (restart, or the session's close
        from another thread: then on the loop, soon)."""
        ctx, pipeline, whole = self.ctx, self.pipeline, list(self.whole)
        self.pipeline = self.ctx = self.server = None
        self.whole.clear()
        if ctx is None and not whole:
            return

        def stop():
            for c in whole:
                c.close()
            if ctx is not None:
                ctx.close()
                _close(pipeline)
        try:
            on_loop = asyncio.get_running_loop() is ctx.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            stop()
        else:
            try:
                ctx.loop.call_soon_threadsafe(stop)
            except RuntimeError:          # the loop is closed: nothing runs any more
                pass


def _scalar_str(v) -> str:
    v = _scalar_bytes(v)
    return v.decode() if isinstance(v, bytes) else str(v)


def _scalar_bytes(v):
    if isinstance(v, np.ndarray):
        v = v[()] if v.ndim == 0 else v
    if isinstance(v, np.ndarray):
        raise errors.InvalidArgumentError(None, None, f"expected a scalar string, got shape {list(v.shape)}")
    return v


def _as_optional(done):
    """`done` for IteratorGetNextAsOptional: the element, or the end, as an Optional."""
    def deliver(value, error):
        if isinstance(error, errors.OutOfRangeError):
            done(OptionalValue(None), None)
        elif error is not None:
            done(None, error)
        else:
            done(OptionalValue(value if isinstance(value, tuple) else (value,)), None)
    return deliver


def _deliver(done, e) -> None:
    if e is END:
        done(None, errors.OutOfRangeError(None, None, "End of sequence"))
    else:
        done(e[0] if len(e) == 1 else e, None)


register_resource("IteratorV2", lambda name, attrs: IteratorResource(name, attrs))
register_resource("OneShotIterator", lambda name, attrs: IteratorResource(name, attrs))
