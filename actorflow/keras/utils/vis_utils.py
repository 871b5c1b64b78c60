"""A Keras model as a Graphviz picture (tf.keras.utils.plot_model, model_to_dot; Keras 2's
keras.utils.vis_utils): one box per layer, "name: ClassName" (with show_shapes, its input and
output shapes too), arrows along the layer calls, drawn by Graphviz's `dot`."""
from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["plot_model", "model_to_dot"]

_NO_DOT = ("You must install pydot (`pip install pydot`) and install graphviz (see instructions at "
           "https://graphviz.gitlab.io/download/) for plot_model to work. (actorflow needs only Graphviz's "
           "`dot`: apt-get install graphviz)")


def _shape_text(shapes) -> str:
    def one(s):
        return str(tuple(s)) if isinstance(s, (tuple, list)) and not any(isinstance(d, (tuple, list)) for d in s) \
            else str(s)
    return one(shapes) if not (isinstance(shapes, list) and shapes and isinstance(shapes[0], (tuple, list))) \
        else "[" + ", ".join(one(s) for s in shapes) + "]"


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("{", "\\{").replace("}", "\\}") \
        .replace("|", "\\|").replace("<", "\\<").replace(">", "\\>")


class Dot:
    """The DOT text of a model's picture, with pydot's `to_string`, `create` and `write`."""

    def __init__(self, text: str):
        self.text = text

    def to_string(self) -> str:
        return self.text

    def create(self, prog="dot", format="svg") -> bytes:  # noqa: A002 - pydot's name
        """The picture in `format`, drawn by Graphviz's `prog` (ImportError when it is missing; a
        RuntimeError with its message when it fails or takes over a minute)."""
        exe = shutil.which(prog)
        if exe is None:
            raise ImportError(_NO_DOT)
        try:
            r = subprocess.run([exe, f"-T{format}"], input=self.text.encode("utf-8"), capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"plot_model: {prog} did not finish in 60 s") from None
        if r.returncode != 0:
            raise RuntimeError(f"plot_model: {prog} failed: {r.stderr.decode(errors='replace').strip()}")
        return r.stdout

    def write(self, path, format=None) -> None:  # noqa: A002
        fmt = format or os.path.splitext(path)[1][1:] or "png"
        data = self.text.encode("utf-8") if fmt in ("dot", "raw") else self.create(format=fmt)
        with open(path, "wb") as f:
            f.write(data)


def model_to_dot(model, show_shapes=False, show_layer_names=True, rankdir="TB", expand_nested=False, dpi=96,
                 subgraph=False) -> Dot:
    """The picture of `model` as DOT (tf.keras.utils.model_to_dot)."""
    from actorflow.keras.engine import InputLayer, keras_history
    from actorflow.keras.models import Sequential
    layers = list(model.layers)
    if isinstance(model, Sequential) and model.inputs:
        hist = keras_history(model.inputs[0])
        if hist is not None and isinstance(hist[0], InputLayer) and hist[0] not in layers:
            layers.insert(0, hist[0])
    ids = {id(layer): f"L{i}" for i, layer in enumerate(layers)}
    lines = [f"digraph {_esc(model.name)!r} {{".replace("'", '"'), f'  graph [rankdir={rankdir}, dpi={int(dpi)}];',
             '  node [shape=record, fontname="Helvetica"];']
    for layer in layers:
        cls = type(layer).__name__
        inner = getattr(layer, "layer", None)
        if inner is not None:          # a wrapper: Bidirectional(LSTM)
            cls = f"{cls}({type(inner).__name__})"
        label = f"{layer.name}: {cls}" if show_layer_names else cls
        if show_shapes:
            try:
                outs = _shape_text(layer.output_shape)
            except (AttributeError, ValueError):
                outs = "multiple"
            try:
                ins = outs if isinstance(layer, InputLayer) else _shape_text(layer.input_shape)
            except (AttributeError, ValueError):
                ins = "multiple"
            label = f"{{{_esc(label)}|{{input:|output:}}|{{{_esc(ins)}|{_esc(outs)}}}}}"
        else:
            label = _esc(label)
        lines.append(f'  {ids[id(layer)]} [label="{label}"];')
    edges = []
    for layer in layers:
        for node in getattr(layer, "_inbound_nodes", []):
            for t in node.input_tensors:
                hist = keras_history(t)
                if hist is not None and id(hist[0]) in ids and id(layer) in ids:
                    edge = (ids[id(hist[0])], ids[id(layer)])
                    if edge not in edges:
                        edges.append(edge)
    lines += [f"  {a} -> {b};" for a, b in edges]
    lines.append("}")
    return Dot("\n".join(lines) + "\n")


def plot_model(model, to_file="model.png", show_shapes=False, show_layer_names=True, rankdir="TB",
               expand_nested=False, dpi=96):
    """Draws `model` into `to_file` (its extension names the format: png, svg, pdf; dot for the DOT
    text) with Graphviz's `dot` (tf.keras.utils.plot_model); with IPython, returns a png, jpeg or gif as
    an image to display."""
    dot = model_to_dot(model, show_shapes=show_shapes, show_layer_names=show_layer_names, rankdir=rankdir,
                       expand_nested=expand_nested, dpi=dpi)
    dot.write(to_file)
    if os.path.splitext(to_file)[1].lower() not in (".png", ".jpg", ".jpeg", ".gif"):
        return None
    try:
        from IPython import display
    except ImportError:
        return None
    return display.Image(filename=to_file)
