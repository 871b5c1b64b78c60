"""Imports point down the layers (docs/STYLE: "a lower layer that needs something from above
exposes a hook that the upper layer installs").

Every module of the package is parsed (ast), and every `import` and `from ... import` in it,
function-level ones included, is checked against the table below: a unit (a subpackage, or a
top-level module) may import only the units it declares and, transitively, what they may import.

The main stack, lowest first:

    errors
    graph, kernels, transport      peers: none of the three imports another. Kernels compute on
                                   arrays and know nothing of graphs; the transport moves tensors.
    scheduler                      plans and their passes, on graphs; emit binds kernels to nodes
    actors                         the runtime: runs plans with kernels, sends over the transport
    cluster                        servers, the master, launchers; installs the sessions' remote backend
    train                          optimizers, Saver, MonitoredTrainingSession
    saved_model, serving           export and load; the model server
    actorflow (the package root)   the public TF-1.x API, which imports all of the above
    sim                            fault injection (installs each layer's hook), scenarios: drives the API
    graphviz, dashboard            `graph show`'s pictures; the live dashboard (a client of the tasks)
    cli                            the `actorflow` command

Beside it: base utilities under everything (protos, flags, tf_logging, gfile, app, tfio, clock (time and waits, which the
deterministic simulator replaces), console
(the CLI's tables and help formatter, shared by the subcommands of serving/ and sim/), and
checkpoint_format, the file format shared by the Saver and the checkpoint kernels); and graph
libraries that build ops on a graph and sit between graph and train (layers, losses, metrics, nn,
rnn, rnn_cell, math, distributions, random, image, strings, lookup, initializers, debugging, data, summary, xla). client (the
timeline) and compat import nothing; distribute re-exports the cluster's resolvers; contrib (tf.contrib's
layers, rnn, seq2seq and framework) is built on layers, nn and train, and re-exports estimator's TPUEstimator,
data's transformations and distribute's resolvers; keras (tf.keras of TF 1.x) on
layers, nn, losses, metrics and train, beside estimator.
"""
from __future__ import annotations

import ast
import pathlib

import actorflow

PACKAGE = pathlib.Path(actorflow.__file__).parent

# unit -> the units it may import directly (each may import what those may, transitively).
MAY_IMPORT: dict[str, set[str]] = {
    # base
    "errors": set(),
    "console": set(),
    "protos": set(),
    "flags": set(),
    "tf_logging": set(),
    "gfile": {"errors"},
    "clock": set(),
    "script_registry": set(),
    "tfrecord": {"errors", "gfile"},
    "example_proto": set(),
    "protowire": set(),
    "python_io": {"tfrecord"},
    "checkpoint_format": {"errors", "clock"},
    "app": {"flags"},
    "tfio": {"gfile", "python_io", "graph"},
    # the peers above errors
    "graph": {"errors", "protos", "script_registry"},
    "kernels": {"errors", "protos", "checkpoint_format", "script_registry", "example_proto", "protowire"},
    "transport": {"errors"},
    # the main stack
    "scheduler": {"graph", "kernels"},     # emit binds each node to its kernel factory
    "actors": {"scheduler", "kernels", "transport", "tfrecord"},
    "cluster": {"actors"},
    # graph libraries
    "initializers": {"graph"},
    "math": {"graph"},
    "linalg": {"graph"},
    "distributions": {"graph"},     # tf.distributions: Distribution classes over graph ops
    "signal": {"graph"},
    "spectral": {"graph"},
    "sparse": {"graph"},
    "random": {"graph", "random_generator"},
    "random_generator": {"graph"},     # tf.random.Generator: a state variable over the stateless samplers
    "image": {"graph"},
    "strings": {"graph"},
    "lookup": {"graph"},
    "debugging": {"graph"},
    "data": {"graph", "tfrecord"},
    "losses": {"graph"},
    "xla": {"graph"},
    "layers": {"graph"},
    "rnn_cell": {"graph"},
    "rnn": {"rnn_cell"},
    "metrics": {"losses"},
    "nn": {"rnn"},
    "summary": {"graph", "gfile"},
    # above the runtime
    "train": {"cluster", "summary", "checkpoint_format", "client"},  # client: ProfilerHook writes timelines
    "saved_model": {"train"},
    "serving": {"saved_model", "console"},
    "distribute": {"cluster"},
    "test": {"cluster"},
    "version": set(),
    "resource_loader": set(),
    "dtypes": {"graph"},
    "bitwise": {"graph"},
    "sets": {"graph"},
    "quantization": {"graph"},
    "manip": {"graph"},
    "queue": {"graph"},            # tf.test: TestCase's sessions, create_local_cluster's servers
    "client": set(),
    "compat": {"graph"},
    "profiler": {"graph", "protos"},   # tf.compat.v1.profiler: tfprof's model analyzer over a graph's GraphDef
    "config": {"actors"},              # tf.config: the devices and settings config-less sessions use
    "audio": {"graph"},                # tf.audio: DecodeWav / EncodeWav
    "sysconfig": {"scheduler", "version"},   # tf.sysconfig: build facts (the GPUs' compute capabilities)
    "python": {"<root>"},    # tensorflow.python.* by their private paths, over the whole of actorflow
    "contrib": {"train", "layers", "nn", "metrics", "distributions", "saved_model", "keras",
                "estimator", "data", "distribute",    # tf.contrib.tpu's TPUEstimator, contrib.data, cluster_resolver
                "xla", "signal", "random"},           # contrib.compiler.jit, contrib.signal, contrib.stateless
    "feature_column": {"lookup", "initializers"},  # columns build ops on a graph: lookups, embeddings
    "estimator": {"train", "metrics", "data", "feature_column", "layers", "nn", "saved_model"},  # tf.contrib's layers, rnn, seq2seq, framework over those
    # tf.keras of TF 1.x: layers over af.layers and rnn, models trained with train's Saver and sessions
    "keras": {"train", "layers", "nn", "losses", "metrics", "summary", "gfile",
              "feature_column"},    # DenseFeatures: feature columns as a Keras layer, as tf.keras has them
    "<root>": {"keras", "test", "resource_loader", "version", "dtypes", "bitwise", "sets", "quantization", "manip", "queue",
               "estimator", "feature_column", "contrib", "serving", "distribute", "client", "compat", "app", "tfio", "tf_logging", "nn", "layers", "xla",
               "metrics", "math", "linalg", "distributions", "signal", "spectral", "sparse", "random", "image", "python_io", "strings", "lookup", "initializers", "debugging", "data",
               "profiler", "config", "audio", "sysconfig"},
    "sim": {"<root>", "console"},
    "graphviz": {"<root>", "console"},
    "dashboard": {"<root>"},
    "cli": {"sim", "graphviz", "dashboard"},
}


def _closure() -> dict[str, set[str]]:
    below: dict[str, set[str]] = {}

    def visit(unit, path):
        if unit in below:
            return below[unit]
        assert unit not in path, f"the layer table has a cycle: {' -> '.join(path + [unit])}"
        out = set()
        for dep in MAY_IMPORT[unit]:
            out |= {dep} | visit(dep, path + [unit])
        below[unit] = out
        return out

    for u in MAY_IMPORT:
        visit(u, [])
    return below


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    """The unit of a module: its subpackage or top-level module under actorflow ("<root>" for the
    package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def _is_unit(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _imports(path: pathlib.Path):
    return _imports_in(path.read_text(), _module_name(path), path.name == "__init__.py", str(path))


def _imports_in(source: str, module: str, is_package: bool, filename="<string>"):
    """(line, imported module) of every import in `source` (the module `module`), function-level
    ones too. `from actorflow import x` imports the unit x when x is a subpackage or module, else
    the package root."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "actorflow":
                for a in node.names:
                    yield node.lineno, f"actorflow.{a.name}" if _is_unit(a.name) else "actorflow"
            else:
                yield node.lineno, target


def test_the_layer_table_is_a_dag_and_names_every_unit():
    below = _closure()
    for unit, deps in below.items():
        assert unit not in deps
    units = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists() or p.is_dir() and any(p.glob("*.py")))
             or (p.suffix == ".py" and p.stem != "__init__")}
    units.discard("__pycache__")
    missing = sorted(units - set(MAY_IMPORT))
    assert not missing, f"place these in the layer table of tests/test_layering.py: {missing}"


def test_imports_point_down_the_layers():
    below = _closure()
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src_unit = _unit(_module_name(path))
        for line, target in _imports(path):
            if target != "actorflow" and not target.startswith("actorflow."):
                continue
            dst_unit = _unit(target)
            if dst_unit == src_unit or dst_unit in below[src_unit]:
                continue
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} "
                       f"({src_unit} may not import {dst_unit})")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_the_checker_sees_function_level_and_relative_imports():
    src = ("import numpy\n"
           "from actorflow import errors, Session\n"
           "def f():\n"
           "    from actorflow.cluster import master\n"
           "    from ...actors import session\n"
           "    from . import frames\n")
    found = list(_imports_in(src, "actorflow.graph.ops.array_ops", False))
    assert found == [(1, "numpy"), (2, "actorflow.errors"), (2, "actorflow"), (4, "actorflow.cluster"),
                     (5, "actorflow.actors"), (6, "actorflow.graph.ops")]
    below = _closure()
    assert "cluster" not in below["graph"] and "actors" not in below["graph"]
    assert "kernels" not in below["graph"] and "graph" not in below["kernels"]
    assert "graph" not in below["transport"] and "sim" not in below["transport"]
