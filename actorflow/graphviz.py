"""A graph as a Graphviz picture: `actorflow graph show FILE`.

Reads a GraphDef (binary `.pb` or text `.pbtxt`, as `af.train.write_graph` and TensorFlow write it),
a TensorFlow MetaGraphDef protobuf, or actorflow's own meta graph (`af.train.export_meta_graph`,
the `.meta` beside a checkpoint), and draws it with Graphviz's `dot`:

- ops are grouped by name scope into nested boxes (`layer/dense/MatMul` sits in `layer`, then `dense`);
- an op's fill colour is its device (a legend lists them); ops without a device are white;
- each control-flow frame (a while loop, from its Enter ops to its Exit ops) is a dashed box;
- data edges are solid, control dependencies dashed and grey.

Frames are found as TensorFlow's executor finds them (graph/control_flow.cc): an Enter op opens
the frame its `frame_name` names, below the frame of its input; an Exit op's consumers are back in
the parent frame; every other op is in the frame of its inputs.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["read_graph_def", "to_dot", "render", "add_parser", "frames_of"]

# Pastel fills, one per device in sorted order; then they repeat.
_PALETTE = ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d",
            "#9edae5", "#c7c7c7"]
_FRAME_COLOUR = "#d62728"


class GraphFileError(ValueError):
    """A file is not a graph this module can read; the message names the file."""


# -- reading -------------------------------------------------------------------------------------------------

def _graph_pb2():
    from actorflow import protos
    return protos.graph_pb2


def _valid(graph_def) -> bool:
    return len(graph_def.node) > 0 and all(n.name and n.op for n in graph_def.node)


def read_graph_def(path: str):
    """The GraphDef protobuf (TensorBoard's generated class) in `path`: a GraphDef in binary or text
    format, a MetaGraphDef protobuf (its graph_def), or an actorflow meta graph file. GraphFileError
    naming the file when it is none of them."""
    from google.protobuf import message, text_format

    from actorflow import protos
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise GraphFileError(f"{path}: no such file") from None
    except OSError as e:
        raise GraphFileError(f"{path}: cannot read it: {e.strerror or e}") from None
    GraphDef = _graph_pb2().GraphDef
    MetaGraphDef = protos.require("tensorboard.compat.proto.meta_graph_pb2").MetaGraphDef
    # actorflow's meta graphs are msgpack maps (a fixmap or map16/map32 first byte).
    if data[:1] and (0x80 <= data[0] <= 0x8f or data[0] in (0xde, 0xdf)):
        gd = _actorflow_meta_graph(path)
        if gd is not None:
            return gd
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.strip():
        for cls, pick in ((GraphDef, lambda m: m), (MetaGraphDef, lambda m: m.graph_def)):
            try:
                m = text_format.Parse(text, cls())
            except text_format.ParseError:
                continue
            if _valid(pick(m)):
                return pick(m)
    # Binary: a `.meta` is tried as a MetaGraphDef first, anything else as a GraphDef first.
    order = [(GraphDef, lambda m: m), (MetaGraphDef, lambda m: m.graph_def)]
    if path.endswith(".meta"):
        order.reverse()
    for cls, pick in order:
        try:
            m = cls.FromString(data)
        except (message.DecodeError, RuntimeError, ValueError):
            continue
        if _valid(pick(m)):
            return pick(m)
    raise GraphFileError(f"{path}: not a graph: expected a GraphDef (.pb or .pbtxt, as af.train.write_graph "
                         "writes), a MetaGraphDef, or an actorflow meta graph (af.train.export_meta_graph)")


def _actorflow_meta_graph(path: str):
    from actorflow import errors
    from actorflow.graph.graph import Graph
    from actorflow.train.meta_graph import _read_meta_graph_file, import_meta_graph_def
    try:
        mg = _read_meta_graph_file(path)
    except errors.OpError:
        return None
    g = Graph()
    with g.as_default():
        import_meta_graph_def(mg, g)
    return g.as_graph_def()


# -- frames and scopes ---------------------------------------------------------------------------------------

def _input_name(ref: str) -> tuple[str, bool]:
    """'^a' -> ('a', True); 'a:1' -> ('a', False)."""
    if ref.startswith("^"):
        return ref[1:], True
    return ref.rsplit(":", 1)[0] if ":" in ref else ref, False


def frames_of(graph_def) -> dict:
    """{op name: its frame}, a frame being a tuple of frame names from the outermost loop in (() for
    the root frame). Enter and Exit ops are in the frame they enter and leave."""
    nodes = {n.name: n for n in graph_def.node}
    consumers: dict = {name: [] for name in nodes}
    for n in graph_def.node:
        for ref in n.input:
            src, _ = _input_name(ref)
            if src in consumers:
                consumers[src].append(n.name)
    frame: dict = {}

    def out_frame(name):
        f = frame[name]
        return f[:-1] if nodes[name].op in ("Exit", "RefExit") and f else f

    def enter(name, f):
        n = nodes[name]
        if n.op in ("Enter", "RefEnter"):
            attr = n.attr.get("frame_name")
            label = attr.s.decode("utf-8", "replace") if attr is not None and attr.s else name
            f = f + (label,)
        frame[name] = f
        queue.append(name)

    queue: list = []
    for n in graph_def.node:
        if not any(_input_name(r)[0] in nodes for r in n.input):
            enter(n.name, ())
    # Breadth-first from the sources: a node takes the frame of the first input that reaches it, which
    # for a Merge is its Enter (its NextIteration input comes later, round the loop).
    i = 0
    while True:
        while i < len(queue):
            u = queue[i]
            i += 1
            for v in consumers[u]:
                if v not in frame:
                    enter(v, out_frame(u))
        rest = [n.name for n in graph_def.node if n.name not in frame]
        if not rest:
            break
        enter(rest[0], ())    # a cycle with no way in (malformed): drawn in the root frame
    return frame


def _scope(name: str) -> list:
    return name.split("/")[:-1]


# -- DOT -----------------------------------------------------------------------------------------------------

def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Cluster:
    __slots__ = ("key", "label", "kind", "children", "nodes")

    def __init__(self, key, label, kind):
        self.key, self.label, self.kind = key, label, kind
        self.children: dict = {}
        self.nodes: list = []


def device_colours(graph_def) -> dict:
    """{device string: fill colour} for the devices the graph's ops name, in sorted order."""
    devices = sorted({n.device for n in graph_def.node if n.device})
    return {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(devices)}


def to_dot(graph_def, title: str | None = None, rankdir: str = "TB") -> str:
    """The Graphviz DOT text of a GraphDef: name scopes as nested clusters, frames as dashed clusters,
    ops coloured by device, with a legend of the devices."""
    frames = frames_of(graph_def)
    colours = device_colours(graph_def)
    # Where each frame's box goes: inside the deepest name scope all its ops share (and inside its
    # parent frame's box).
    members: dict = {}
    for n in graph_def.node:
        f = frames[n.name]
        for k in range(1, len(f) + 1):
            members.setdefault(f[:k], []).append(_scope(n.name))
    pos: dict = {}
    for f in sorted(members, key=len):
        scopes = members[f]
        common = scopes[0]
        for s in scopes[1:]:
            k = 0
            while k < min(len(common), len(s)) and common[k] == s[k]:
                k += 1
            common = common[:k]
        pos[f] = max(len(common), pos.get(f[:-1], 0))
    root = _Cluster((), None, "root")
    for n in graph_def.node:
        scope, f = _scope(n.name), frames[n.name]
        path: list = []
        levels = [f[:k] for k in range(1, len(f) + 1)]
        for depth in range(len(scope) + 1):
            while levels and pos[levels[0]] == depth:
                path.append(("frame", levels.pop(0)))
            if depth < len(scope):
                path.append(("scope", scope[depth]))
        node = root
        for step in path:
            key = node.key + (step,)
            if step not in node.children:
                kind, what = step
                label = (f"while frame {what[-1]}" if kind == "frame" else what)
                node.children[step] = _Cluster(key, label, kind)
            node = node.children[step]
        node.nodes.append(n)
    lines = ["digraph G {", f"  rankdir={rankdir};", "  compound=true;",
             '  graph [fontname="Helvetica", fontsize=11, labeljust=l];',
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica", fontsize=10];',
             '  edge [color="#444444", arrowsize=0.6];']
    if title:
        lines.append(f"  label={_q(title)}; labelloc=t;")
    counter = [0]

    def emit(c: _Cluster, indent: str):
        for n in c.nodes:
            short = n.name.rsplit("/", 1)[-1]
            label = n.op if short == n.op else f"{n.op}\n{short}"
            fill = colours.get(n.device, "white")
            tip = f"{n.name} ({n.op})" + (f" on {n.device}" if n.device else "")
            shape = ', shape=diamond' if n.op in ("Switch", "RefSwitch", "Merge", "RefMerge", "LoopCond") else ""
            lines.append(f"{indent}{_q(n.name)} [label={_q(label)}, fillcolor={_q(fill)}, tooltip={_q(tip)}{shape}];")
        for child in c.children.values():
            counter[0] += 1
            lines.append(f"{indent}subgraph cluster_{counter[0]} {{")
            if child.kind == "frame":
                lines.append(f"{indent}  label={_q(child.label)}; style=\"dashed,rounded\"; color={_q(_FRAME_COLOUR)}; "
                             f"penwidth=1.6; fontcolor={_q(_FRAME_COLOUR)};")
            else:
                lines.append(f"{indent}  label={_q(child.label)}; style=\"rounded,filled\"; fillcolor=\"#f5f5f5\"; "
                             "color=\"#999999\";")
            emit(child, indent + "  ")
            lines.append(f"{indent}}}")
    emit(root, "  ")
    names = {n.name for n in graph_def.node}
    for n in graph_def.node:
        for ref in n.input:
            src, control = _input_name(ref)
            if src not in names:
                continue
            if control:
                lines.append(f"  {_q(src)} -> {_q(n.name)} [style=dashed, color=\"#999999\"];")
            else:
                port = ref.rsplit(":", 1)[1] if ":" in ref else ""
                extra = f", label={_q(':' + port)}, fontsize=8" if port and port != "0" else ""
                lines.append(f"  {_q(src)} -> {_q(n.name)} [{extra.lstrip(', ')}];".replace(" [];", ";"))
    if colours:
        lines.append("  subgraph cluster_legend {")
        lines.append('    label="devices"; style="rounded"; color="#999999";')
        prev = None
        for i, (d, c) in enumerate(colours.items()):
            lines.append(f"    legend_{i} [label={_q(d)}, fillcolor={_q(c)}, shape=box];")
            if prev is not None:
                lines.append(f"    {prev} -> legend_{i} [style=invis];")
            prev = f"legend_{i}"
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_text: str, out: str, fmt: str = "svg", timeout: float = 120.0) -> None:
    """Runs Graphviz's `dot` on `dot_text` and writes `out` in format `fmt` (svg, png, pdf).
    FileNotFoundError when `dot` is not installed; RuntimeError with dot's message when it fails."""
    exe = shutil.which("dot")
    if exe is None:
        raise FileNotFoundError("Graphviz's `dot` is not installed (Debian/Ubuntu: apt-get install graphviz; "
                                "macOS: brew install graphviz); `--format dot` writes the DOT text without it")
    try:
        r = subprocess.run([exe, f"-T{fmt}", "-o", out], input=dot_text.encode("utf-8"), capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"dot did not finish in {timeout:g} s (a very large graph?)") from None
    if r.returncode != 0:
        raise RuntimeError(f"dot failed ({r.returncode}): {r.stderr.decode(errors='replace').strip()}")


# -- the command ---------------------------------------------------------------------------------------------

def _show(args) -> int:
    fmt = args.format
    out = args.out or (os.path.splitext(args.file)[0] if args.file.endswith((".pb", ".pbtxt", ".meta", ".txt"))
                       else args.file) + "." + fmt
    try:
        gd = read_graph_def(args.file)
    except GraphFileError as e:
        print(f"actorflow graph show: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"actorflow graph show: {e}", file=sys.stderr)
        return 2
    dot_text = to_dot(gd, title=args.title if args.title is not None else os.path.basename(args.file),
                      rankdir=args.rankdir)
    try:
        if fmt == "dot":
            with open(out, "w") as f:
                f.write(dot_text)
        else:
            render(dot_text, out, fmt)
    except (OSError, RuntimeError) as e:
        print(f"actorflow graph show: {e}", file=sys.stderr)
        return 1
    frames = {f for f in frames_of(gd).values() if f}
    print(f"wrote {out}: {len(gd.node)} ops, {len(device_colours(gd))} devices, {len(frames)} control-flow frames")
    return 0


def add_parser(sub) -> None:
    """Adds `graph show` to the `actorflow` command's subparsers."""
    from actorflow.console import HelpFormatter, subparser
    g = sub.add_parser("graph", help="pictures of graphs", formatter_class=HelpFormatter,
                       description="Pictures of graphs written by af.train.write_graph or export_meta_graph.")
    gsub = g.add_subparsers(dest="graph_cmd", required=True)
    s = subparser(gsub, "show", "render a graph file to SVG with Graphviz",
                  "Renders a GraphDef (.pb, .pbtxt: af.train.write_graph), a MetaGraphDef, or an actorflow meta "
                  "graph (af.train.export_meta_graph, a checkpoint's .meta) with Graphviz's dot: ops grouped by "
                  "name scope, coloured by device, control-flow frames boxed.")
    s.add_argument("file", help="the graph file")
    s.add_argument("-o", "--out", help="output file (default: FILE with the format's suffix)")
    s.add_argument("--format", choices=["svg", "png", "pdf", "dot"], default="svg",
                   help="output format; dot writes the Graphviz source and needs no Graphviz")
    s.add_argument("--rankdir", choices=["TB", "LR"], default="TB", help="layout direction: top-bottom or left-right")
    s.add_argument("--title", help="caption (default: the file's name; '' for none)")
    s.set_defaults(fn=_show)
