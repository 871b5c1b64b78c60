"""Graph functions: a Python function traced into a graph of its own (TF 1.x's Defun).

`trace(fn, types, shapes)` builds a new Graph with one Placeholder per flat argument, calls `fn` on
them (packed into the argument structure) and records the output tensors. The runtime runs the
body as a plan of its own on the same actors and kernels as any step, with the arguments as feeds
(actors/function.py). af.data's `map`, `filter`, `flat_map` and `interleave` bodies are traced this
way, so their ops get shape inference, error messages naming the op, and the same kernels.

A body may use tensors of the graph it is traced from (or of that graph's own outer graphs), as TF's
function graphs capture them:
- a value (a placeholder, a variable's read, any computed tensor) becomes one more placeholder of the
  body, listed in `captures`; the op that holds the function (a dataset op) takes the outer tensor as
  an input, so its value is the one it has when that op runs (an iterator's initialization);
- a constant is copied into the body, so its value stays known to shape inference;
- a resource (a variable's reference, a lookup table, a queue) is its creating op copied under the same
  name: the body's ops bind to the same resource in the session's container, as TF passes the handle.
"""
from __future__ import annotations

from actorflow.graph import nest
from actorflow.graph.graph import Graph, Tensor, get_default_graph, register_attr_type

__all__ = ["GraphFunction", "trace"]


class GraphFunction:
    """A traced function body: `graph`, its `inputs` (placeholders, flat) and `outputs` (tensors,
    flat, in `nest.flatten` order of `structure`, the nested outputs fn returned)."""

    __slots__ = ("name", "graph", "inputs", "outputs", "structure", "captures")

    def __init__(self, name, graph, inputs, outputs, structure, captures=()):
        self.name = name
        self.graph = graph
        self.inputs = tuple(inputs)          # the arguments' placeholders, then the captures'
        self.outputs = tuple(outputs)
        self.structure = structure
        self.captures = tuple(captures)      # the outer tensors the last len(captures) inputs stand for

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
    g._outer = outer
    flat_t, flat_s = nest.flatten(types), nest.flatten(shapes)
    captures: dict = {}                   # outer tensor -> its stand-in in g
    values: list = []                     # the outer tensors captured by value, in order

    def capture(t):
        if t in captures:
            return captures[t]
        if not _encloses(outer, t.graph):
            return None
        op = t.op
        with g.as_default(), g.control_dependencies(None), g.name_scope(None):
            if op.op_def.resource is not None and not op.inputs:
                if op.name in g._ops_by_name:
                    raise ValueError(f"function '{fname}' captures resource '{op.name}', a name its body uses")
                inner = g.create_op(op.type, [], dict(op.attrs), name=op.name + "/").outputs[t.value_index]
            elif op.type == "Const" and not op.inputs and not op.control_inputs:
                inner = g.create_op("Const", [], dict(op.attrs), name="captured_const").outputs[0]
            else:
                inner = placeholder(t.dtype, t.shape, name="captured")
                values.append(t)
        captures[t] = inner
        return inner

    g._capture = capture
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
                raise ValueError(f"function '{fname}' uses a tensor of another graph ({e}); a dataset function "
                                 "can use its arguments, Python values, the ops it creates and the tensors of "
                                 "the graph it is built in") from None
            raise
        if convert is not None:
            out = convert(out)
    g._capture = None
    leaves = nest.flatten(out)
    outputs = []
    for leaf in leaves:
        t = getattr(leaf, "_variant", leaf)
        if not isinstance(t, Tensor) or t.graph is not g:
            raise ValueError(f"function '{fname}' returned {leaf!r}, which is not a tensor of its own graph")
        outputs.append(t)
    return GraphFunction(fname, g, phs + [captures[t] for t in values], outputs, out, values)


def _encloses(outer, graph) -> bool:
    """Whether `graph` is `outer` or a graph `outer` is traced in (a function body's outer graphs)."""
    while outer is not None:
        if graph is outer:
            return True
        outer = outer.__dict__.get("_outer")
    return False
