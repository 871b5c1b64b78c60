"""The placed graph as a picture: every task's registered partitions in one Graphviz graph.

Each task is a box (colour by task), each op a node labelled by its op type (its name in the
tooltip), each tensor edge an arrow; a _Send and the _Recv with the same key (the one edge that
crosses tasks) are joined by a bold arrow between the boxes. Graphs larger than `max_nodes` are
drawn by name scope: one node per (task, top-level scope), with the op count. `render_svg` runs
Graphviz's `dot` (a subprocess, bounded by a timeout); without `dot` there is no picture.
"""
from __future__ import annotations

import asyncio
import shutil

__all__ = ["to_dot", "render_svg", "dot_available"]

_PALETTE = ("#dbeafe", "#dcfce7", "#fef9c3", "#fae8ff", "#ffedd5", "#e0f2fe", "#f1f5f9", "#fee2e2")
_EDGE = ("#1d4ed8", "#15803d", "#a16207", "#a21caf", "#c2410c", "#0369a1", "#475569", "#b91c1c")


def _q(s) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _scope(name: str) -> str:
    return name.split("/", 1)[0]


def to_dot(graphs: dict, max_nodes: int = 160) -> str:
    """DOT text for {task: [partition {"nodes": [[name, op, inputs, control_inputs, (sendrecv)], ...]}]}."""
    total = sum(len(p["nodes"]) for parts in graphs.values() for p in parts)
    grouped = total > max_nodes
    lines = ["digraph placed {", '  graph [rankdir=LR, fontname="Helvetica", fontsize=11, compound=true, '
             'bgcolor="transparent", nodesep=0.15, ranksep=0.35];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=9, height=0.25, '
             'margin="0.06,0.02"];', '  edge [color="#64748b", arrowsize=0.5];']
    sends: dict = {}
    recvs: dict = {}
    for ti, (task, parts) in enumerate(sorted(graphs.items())):
        fill, line = _PALETTE[ti % len(_PALETTE)], _EDGE[ti % len(_EDGE)]
        lines.append(f"  subgraph {_q('cluster_' + task)} {{")
        lines.append(f'    label={_q(task)}; style="rounded"; color="{line}"; fontcolor="{line}";')
        edges = set()
        ids: dict = {}
        counts: dict = {}
        for part in parts:
            for node in part["nodes"]:
                name, op = node[0], node[1]
                if op == "Const":
                    continue                      # folded into consumers; they clutter the picture
                key = f"{task}|{_scope(name) if grouped else name}"
                ids[name] = key
                counts.setdefault(key, [0, op, name])[0] += 1
                if len(node) > 4 and node[4]:
                    (sends if op == "_Send" else recvs).setdefault(node[4]["key"], key)
            for part_node in part["nodes"]:
                dst = ids.get(part_node[0])
                if dst is None:
                    continue
                for src_name in list(part_node[2]) + list(part_node[3]):
                    src = ids.get(src_name)
                    if src is not None and src != dst:
                        edges.add((src, dst, src_name in part_node[3]))
        for key, (n, op, name) in counts.items():
            if grouped:
                label = f"{key.split('|', 1)[1]}\\n{n} op{'s' if n != 1 else ''}"
                tip = label.replace("\\n", " ")
            else:
                label, tip = op, f"{name} ({op})"
            shape = ', shape=cds' if op in ("_Send", "_Recv") and not grouped else ""
            lines.append(f'    {_q(key)} [label={_q(label)}, tooltip={_q(tip)}, fillcolor="{fill}", '
                         f'color="{line}"{shape}];')
        lines.append("  }")
        for src, dst, control in sorted(edges):
            lines.append(f"  {_q(src)} -> {_q(dst)}" + (' [style=dashed];' if control else ";"))
    for key, src in sorted(sends.items()):
        dst = recvs.get(key)
        if dst is not None:
            lines.append(f'  {_q(src)} -> {_q(dst)} [penwidth=2, color="#0f172a", tooltip={_q(key)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_available() -> bool:
    return shutil.which("dot") is not None


async def render_svg(dot_text: str, timeout: float = 20.0) -> str:
    """SVG of `dot_text` by Graphviz's `dot`; RuntimeError when it is missing, fails or times out."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz's `dot` is not installed (apt-get install graphviz): no graph picture")
    proc = await asyncio.create_subprocess_exec(exe, "-Tsvg", stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(dot_text.encode())
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"dot did not draw the graph within {timeout:g} s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed ({proc.returncode}): {err.decode(errors='replace')[:300]}")
    return out.decode()
