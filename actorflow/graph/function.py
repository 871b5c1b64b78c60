"""Graph functions: a Python function traced into a graph of its own (TF 1.x's Defun).

`trace(fn, types, shapes)` builds a new Graph with one Placeholder per flat argument, calls `fn` on
them (packed into the argument structure) and records the output tensors. The runtime runs the
body as a plan of its own on the same actors and kernels as any step, with the arguments as feeds
(actors/function.py). af.data's `map`, `filter`, `flat_map` and `interleave` bodies are traced this
way, so their ops get shape inference, error messages naming the op, and the same kernels.
"""
from __future__ import annotations

from actorflow.graph import nest
from actorflow.graph.graph import Graph, Tensor, get_default_graph, register_attr_type

__all__ = ["GraphFunction", "trace"]


class GraphFunction:
    """A traced function body: `graph`, its `inputs` (placeholders, flat) and `outputs` (tensors,
    flat, in `nest.flatten` order of `structure`, the nested outputs fn returned)."""

    __slots__ = ("name", "graph", "inputs", "outputs", "structure")

    def __init__(self, name, graph, inputs, outputs, structure):
        self.name = name
        self.graph = graph
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.structure = structure

    def __repr__(self):
        return f"<GraphFunction {self.name}: {len(self.inputs)} inputs, {len(self.outputs)} outputs>"

    def _attr_payload(self):
        """How the function travels in a serialized graph (a meta graph, a cluster's partition)."""
        return "graph_function", [self.name, self.graph.to_msgpack(), [t.name for t in self.inputs],
                                  [t.name for t in self.outputs]]


def _decode(payload) -> GraphFunction:
    name, data, inputs, outputs = payload
    g = Graph.from_msgpack(data)
    # The nested output structure only matters while building the outer graph: the flat outputs stand in.
    outs = [g.get_tensor_by_name(n) for n in outputs]
    return GraphFunction(name, g, [g.get_tensor_by_name(n) for n in inputs], outs, tuple(outs))


register_attr_type("graph_function", _decode)


def trace(fn, types, shapes, name=None, unpack_tuple=True, convert=None) -> GraphFunction:
    """Traces `fn` on placeholders shaped like the nested structure `types`/`shapes`.

    A top-level tuple argument is passed as positional arguments (as TF's dataset functions do);
    anything else as one argument. `convert(outputs)` normalizes the returned structure to one
    whose leaves are Tensors (or objects with a `_variant` Tensor). The graph inherits the outer
    graph's seed, so random ops in the body are reproducible under `set_random_seed`.
    """
    from actorflow.graph.ops.constant import placeholder
    outer = get_default_graph()
    fname = name or getattr(fn, "__name__", "fn")
    g = Graph()
    g.seed = outer.seed
    flat_t, flat_s = nest.flatten(types), nest.flatten(shapes)
    with g.as_default():
        phs = [placeholder(t, s, name=f"arg{i}") for i, (t, s) in enumerate(zip(flat_t, flat_s))]
        args = nest.pack_sequence_as(types, phs)
        try:
            if unpack_tuple and type(args) is tuple:
                out = fn(*args)
            else:
                out = fn(args)
        except ValueError as e:
            if "must be from the same graph" in str(e):
                raise ValueError(f"function '{fname}' uses a tensor of the outer graph ({e}); a dataset "
                                 f"function can only use its arguments, Python values and ops it creates") from None
            raise
        if convert is not None:
            out = convert(out)
    leaves = nest.flatten(out)
    outputs = []
    for leaf in leaves:
        t = getattr(leaf, "_variant", leaf)
        if not isinstance(t, Tensor) or t.graph is not g:
            raise ValueError(f"function '{fname}' returned {leaf!r}, which is not a tensor of its own graph")
        outputs.append(t)
    return GraphFunction(fname, g, phs, outputs, out)
