"""Fuzzing the checkpoint index parser and the restore path (issue 15).

The target writes a checkpoint index and a shard file, both drawn by hypothesis, into a scratch
checkpoint directory and runs every reader over them: `load_index` (with and without a key),
`verify_checkpoint`, `list_variables`, `read_tensors` of every listed tensor, and `latest_checkpoint`.
The properties:
- a reader either succeeds or raises `DataLossError`: no other exception (KeyError, TypeError,
  MemoryError, RecursionError, OverflowError, ...);
- `latest_checkpoint` never raises, and names the checkpoint exactly when `verify_checkpoint` passes;
- no run allocates more than a small bound plus a few times the shard file's size (tracemalloc);
- no run takes longer than a few seconds (a hang).

Inputs are drawn three ways: structured mutations of a real index (delete a key, replace a value by
arbitrary JSON, boundary integers, traversal strings, nudged offsets), with the checksum and, in the
keyed runs, the HMAC usually recomputed so that the mutation reaches the schema checks; byte-level
mutations of the serialized index; and random bytes. The shard file is the real one, truncated,
extended, or random.

    python fuzz/fuzz_checkpoint_index.py --minutes 10        # by hand: prints executions/s and totals
    python fuzz/fuzz_checkpoint_index.py --atheris           # libFuzzer-driven, where atheris installs

The test suite runs a bounded number of examples (tests/security/test_ckpt_fuzz.py).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import hmac
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import tracemalloc

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actorflow import checkpoint_format as ckpt_io
from actorflow import errors
from actorflow.train.saver import latest_checkpoint, list_variables

KEY = "fuzz-cluster-token"
# What one example may allocate beyond the shard file's size (JSON parsing, numpy, hashing buffers).
ALLOC_SLACK = 16 << 20
HANG_SECONDS = 10

_BOUNDARY_INTS = [-(2**63), -(2**31), -1, 0, 1, 7, 8, 255, 2**31 - 1, 2**32, 2**53 + 1, 2**62, 2**62 + 1,
                  2**63 - 1, 2**63, 2**64, 4 << 50, 10**30]
_NASTY_STRINGS = ["../outside/secret", "../../etc/passwd", "/etc/passwd", "..", ".", "", "a/b", "a\\b", "x\0y",
                  "float128", "object", "<f4", "F32", "complex64", "str", "__metadata__", "x" * 300,
                  "model.data-00000-of-00001", "model.index", "NaN", "\udc80", "ü"]

_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(_BOUNDARY_INTS),
                  st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=16), st.sampled_from(_NASTY_STRINGS))
_json = st.recursive(_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=8)


class Seed:
    """A real, small checkpoint (written by the library's own writer) that the mutations start from."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.dir = os.path.join(workdir, "ckpt")
        self.outside = os.path.join(workdir, "outside")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.outside, exist_ok=True)
        with open(os.path.join(self.outside, "secret"), "wb") as f:
            f.write(b"TOP-SECRET" * 1000)
        self.prefix = os.path.join(self.dir, "model")
        tensors = {"v": np.arange(12, dtype=np.float32).reshape(3, 4), "w": np.arange(5, dtype=np.int64),
                   "s": np.array(2.5), "e": np.zeros((0, 3), np.float32), "b": np.array([True, False])}
        entry = ckpt_io.write_shard(self.prefix, 0, 1, list(tensors), list(tensors.values()))
        self.doc = ckpt_io.write_index(self.prefix, [entry], global_step=1)
        self.shard_name = entry["file"]
        with open(os.path.join(self.dir, self.shard_name), "rb") as f:
            self.shard = f.read()
        self.paths = _paths(self.doc)


def _paths(doc, here=()):
    out = [here] if here else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k not in ("checksum", "hmac"):
                out += _paths(v, here + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, here + (i,))
    return out


def _body(doc) -> bytes:
    body = {k: v for k, v in doc.items() if k not in ("checksum", "hmac")}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _reseal(doc, key):
    # What a forger can do (the checksum), and what only a key holder can (the HMAC).
    if not isinstance(doc, dict):
        return
    try:
        doc["checksum"] = hashlib.sha256(_body(doc)).hexdigest()
        if key is not None:
            k = hmac.new(key.encode(), b"actorflow checkpoint index", hashlib.sha256).digest()
            doc["hmac"] = hmac.new(k, _body(doc), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):
        pass


def _apply(doc, path, op):
    parent = doc
    for k in path[:-1]:
        try:
            parent = parent[k]
        except (KeyError, IndexError, TypeError):
            return
    if not isinstance(parent, (dict, list)):
        return          # an earlier mutation replaced a container on the path by a string or number
    last = path[-1]
    try:
        old = parent[last]
    except (KeyError, IndexError, TypeError):
        return
    kind, arg = op
    if kind == "delete":
        del parent[last]
    elif kind == "set":
        parent[last] = arg
    elif kind == "nudge" and type(old) is int:
        parent[last] = old + arg
    elif kind == "add" and isinstance(old, dict):
        old[arg[0]] = arg[1]
    elif kind == "dup" and isinstance(old, list) and old:
        old.append(copy.deepcopy(old[0]))


_op = st.one_of(st.tuples(st.just("delete"), st.none()), st.tuples(st.just("set"), _json),
                st.tuples(st.just("set"), st.sampled_from(_BOUNDARY_INTS)),
                st.tuples(st.just("set"), st.sampled_from(_NASTY_STRINGS)),
                st.tuples(st.just("nudge"), st.integers(-64, 64)),
                st.tuples(st.just("add"), st.tuples(st.text(max_size=8), _json)),
                st.tuples(st.just("dup"), st.none()))


@st.composite
def cases(draw, seed: Seed):
    """(index bytes, shard bytes, reader key)."""
    key = draw(st.sampled_from([None, KEY]))
    how = draw(st.sampled_from(["structured"] * 6 + ["bytes", "random"]))
    if how == "random":
        index = draw(st.binary(max_size=2048))
    else:
        doc = copy.deepcopy(seed.doc)
        doc.pop("hmac", None)
        for path, op in draw(st.lists(st.tuples(st.sampled_from(seed.paths), _op), min_size=1, max_size=4)):
            _apply(doc, path, op)
        if draw(st.integers(0, 9)) < 8:
            _reseal(doc, key if draw(st.booleans()) else None)
        try:
            index = json.dumps(doc, indent=1).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError):
            index = b"{}"
        if how == "bytes" and index:
            data = bytearray(index)
            for _ in range(draw(st.integers(1, 8))):
                pos = draw(st.integers(0, len(data) - 1)) if data else 0
                action = draw(st.sampled_from(["flip", "insert", "delete"]))
                if action == "flip" and data:
                    data[pos] ^= 1 << draw(st.integers(0, 7))
                elif action == "insert":
                    data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
                elif data:
                    del data[pos:pos + draw(st.integers(1, 8))]
            index = bytes(data)
    shard_how = draw(st.sampled_from(["seed"] * 5 + ["truncated", "extended", "random"]))
    shard = seed.shard
    if shard_how == "truncated":
        shard = shard[:draw(st.integers(0, max(0, len(shard) - 1)))]
    elif shard_how == "extended":
        shard = shard + draw(st.binary(min_size=1, max_size=64))
    elif shard_how == "random":
        shard = draw(st.binary(max_size=4096))
    return index, shard, key


class Stats:
    def __init__(self):
        self.runs = 0
        self.ok = 0
        self.refused = 0
        self.peak = 0
        self.slowest = 0.0


def check_one(seed: Seed, index: bytes, shard: bytes, key, stats: Stats | None = None,
              hang_seconds: float | None = HANG_SECONDS) -> None:
    """Runs every reader over one drawn checkpoint; raises AssertionError on a property violated
    (with `hang_seconds` None, no example is timed: the test suite asserts no timings)."""
    with open(seed.prefix + ".index", "wb") as f:
        f.write(index)
    with open(os.path.join(seed.dir, seed.shard_name), "wb") as f:
        f.write(shard)
    # A restore of the previous example's files must not be what this one sees.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(seed.dir, "checkpoint"))
    # Traced around the readers only: tracing hypothesis's own drawing would halve the rate.
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        _check_traced(seed, index, shard, key, stats, hang_seconds)
    finally:
        if started:
            tracemalloc.stop()


def _check_traced(seed, index, shard, key, stats, hang_seconds):
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    outcomes = {}

    def attempt(name, fn):
        try:
            outcomes[name] = fn()
            return outcomes[name]
        except errors.DataLossError as e:
            outcomes[name] = e
            return None
        except Exception as e:  # noqa: BLE001 - any other exception is the bug this harness hunts
            raise AssertionError(f"{name} raised {type(e).__name__}: {e!r} for index {index[:300]!r}") from e
    attempt("load_index", lambda: ckpt_io.load_index(seed.prefix))
    attempt("load_index(key)", lambda: ckpt_io.load_index(seed.prefix, KEY))
    verified = attempt("verify_checkpoint", lambda: ckpt_io.verify_checkpoint(seed.prefix, key))
    listed = attempt("list_variables", lambda: list_variables(seed.prefix, key=key))
    if listed:
        values = attempt("read_tensors", lambda: ckpt_io.read_tensors(seed.prefix, [n for n, _ in listed], key=key))
        if values is not None:
            for (name, shape), a in zip(listed, values):
                assert list(a.shape) == shape, f"tensor {name}: read shape {a.shape}, listed {shape}"
            assert sum(a.nbytes for a in values) <= len(shard), "read more bytes than the shard file holds"
    try:
        found = latest_checkpoint(seed.dir, key=key)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"latest_checkpoint raised {type(e).__name__}: {e!r} for index {index[:300]!r}") from e
    assert (found == seed.prefix) == isinstance(verified, dict), \
        f"latest_checkpoint gave {found!r} but verify_checkpoint gave {outcomes['verify_checkpoint']!r}"
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    assert peak <= ALLOC_SLACK + 4 * len(shard), f"allocated {peak} bytes for a {len(shard)}-byte shard"
    assert hang_seconds is None or elapsed < hang_seconds, f"one example took {elapsed:.1f} s"
    if stats is not None:
        stats.runs += 1
        stats.ok += isinstance(verified, dict)
        stats.refused += not isinstance(verified, dict)
        stats.peak = max(stats.peak, peak)
        stats.slowest = max(stats.slowest, elapsed)


def make_test(seed: Seed, max_examples: int, stats: Stats | None = None, stop_at: float | None = None,
              alarm: bool = False, shrink: bool = True, hang_seconds: float | None = HANG_SECONDS,
              derandomize: bool = False):
    """The hypothesis test over `seed`: run it by calling it (no arguments). Past `stop_at`
    (time.monotonic) the remaining examples return at once; with `alarm`, an example running
    3 x HANG_SECONDS is interrupted by SIGALRM (a hang, reported as a failure); with `derandomize`,
    the examples are the same on every run (the test suite's bounded run: about 1 in 12 mutated
    indexes still verifies, so a random 60 all refused one run in ~100)."""
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate])
    @given(cases(seed))
    def fuzz_checkpoint_index(case):
        if stop_at is not None and time.monotonic() > stop_at:
            return
        if alarm:
            signal.alarm(HANG_SECONDS * 3)
        try:
            check_one(seed, *case, stats=stats, hang_seconds=hang_seconds)
        finally:
            if alarm:
                signal.alarm(0)
    return fuzz_checkpoint_index


@contextlib.contextmanager
def quiet():
    """The readers' skip warnings (one per refused example) off."""
    loggers = [logging.getLogger(n) for n in ("actorflow.train.saver", "actorflow.checkpoint_format")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _alarm(signum, frame):
    raise TimeoutError(f"an example ran longer than {HANG_SECONDS * 3} s: a hang")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0, help="how long to fuzz (default 1)")
    ap.add_argument("--chunk", type=int, default=500, help="examples per hypothesis run")
    ap.add_argument("--atheris", action="store_true", help="drive the same target with atheris (libFuzzer)")
    args, rest = ap.parse_known_args(argv)
    workdir = tempfile.mkdtemp(prefix="fuzz-ckpt-")
    try:
        seed = Seed(workdir)
        stats = Stats()
        if args.atheris:
            try:
                import atheris
            except ImportError:
                print("atheris is not installed here; run without --atheris (hypothesis)", file=sys.stderr)
                return 2
            test = make_test(seed, 1, stats)
            with quiet():
                atheris.Setup([sys.argv[0], *rest], test.hypothesis.fuzz_one_input)
                atheris.Fuzz()
            return 0
        signal.signal(signal.SIGALRM, _alarm)
        deadline = time.monotonic() + args.minutes * 60
        start = last = time.monotonic()
        chunks = 0
        with quiet():
            while time.monotonic() < deadline:
                # Each chunk is a fresh hypothesis run with its own random seed: a long run is many
                # short ones, never stopped inside an example.
                try:
                    make_test(seed, args.chunk, stats, stop_at=deadline, alarm=True)()
                except Exception:  # noqa: BLE001 - report the failing example and stop
                    traceback.print_exc()
                    print(f"FAILED after {stats.runs} executions", flush=True)
                    return 1
                chunks += 1
                now = time.monotonic()
                if now - last >= 10 or now >= deadline:
                    last = now
                    print(f"[{now - start:6.0f} s] {stats.runs} executions, {stats.runs / (now - start):.0f}/s; "
                          f"{stats.ok} valid, {stats.refused} refused with DataLossError; peak allocation "
                          f"{stats.peak / 2**20:.2f} MiB, slowest example {stats.slowest * 1000:.0f} ms",
                          flush=True)
        signal.alarm(0)
        total = time.monotonic() - start
        print(f"done: {stats.runs} executions in {total:.0f} s ({stats.runs / total:.0f}/s), {chunks} hypothesis runs; "
              f"{stats.ok} valid, {stats.refused} refused with DataLossError, 0 failures; peak allocation "
              f"{stats.peak / 2**20:.2f} MiB; slowest example {stats.slowest * 1000:.0f} ms")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
