"""cond, case and while_loop, built from Switch/Merge/Enter/Exit/NextIteration (tf.cond, tf.while_loop).

A control-flow context is active while a branch or loop body is being built. Every op created inside
is recorded as a member; an input from outside the context is routed in (through Switch for a cond
branch, through a constant Enter for a loop), and an op with no inputs gets a control dependency on
the context's pivot so that it runs once per iteration, or not at all on an untaken branch.
"""
from __future__ import annotations

import contextlib

from actorflow.graph import dtypes, nest
from actorflow.graph.graph import GraphKeys, Operation, Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.ops import control_flow_ops as cfo
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["cond", "case", "switch_case", "while_loop", "CondContext", "WhileContext", "context_of"]


def context_of(op: Operation):
    """The innermost cond/while context `op` was built in, or None."""
    return op.graph.__dict__.get("_cf_context_of", {}).get(op)


@contextlib.contextmanager
def _building_in(graph, ctx, clear_control=False):
    """Ops created inside are built in control-flow context `ctx` (None: no context hooks)."""
    st = graph._state()
    saved = st.context
    st.context = ctx
    try:
        if clear_control:
            with graph.control_dependencies(None):
                yield ctx
        else:
            yield ctx
    finally:
        st.context = saved


class _Context:
    def __init__(self, graph, outer):
        self.graph = graph
        self.outer = outer
        self.ops: set[Operation] = set()
        self.pivot: Tensor | None = None

    def _register(self, op: Operation) -> None:
        ctx = self
        while ctx is not None:
            ctx.ops.add(op)
            ctx = ctx.outer
        self.graph.__dict__.setdefault("_cf_context_of", {})[op] = self

    def contains(self, op: Operation) -> bool:
        return op in self.ops

    def entered(self):
        return _building_in(self.graph, self)

    def _outside(self):
        """Build in the outer context (for the ops that route values into this one)."""
        return _building_in(self.graph, self.outer, clear_control=True)

    def _raw(self):
        """Build structural ops without any context hook."""
        return _building_in(self.graph, None, clear_control=True)

    # Hooks called by Graph.create_op.
    def add_op_hook(self, graph, op_type, tensors, control):
        from actorflow.graph.op_def import get_op_def
        refs = get_op_def(op_type).ref_inputs
        # A reference input (a variable, a queue) is bound to its resource, not routed through the
        # context: the op updates the one resource from inside the loop or branch.
        new = [t if i in refs else self.capture(t) for i, t in enumerate(tensors)]
        control = [c for c in control if self.contains(c)]
        if self.pivot is not None and not control and all(i in refs for i in range(len(new))):
            control = [self.pivot.op]
        return control, new

    def post_op_hook(self, op):
        self._register(op)

    def capture(self, t: Tensor) -> Tensor:
        raise NotImplementedError


class CondContext(_Context):
    """The context of one branch of a cond: outside values enter through Switch(x, pred)[branch]."""

    def __init__(self, graph, outer, pred: Tensor, branch: int):
        super().__init__(graph, outer)
        self.pred = pred
        self.branch = branch
        self._switched: dict[Tensor, Tensor] = {}

    def capture(self, t: Tensor) -> Tensor:
        if self.contains(t.op):
            return t
        s = self._switched.get(t)
        if s is None:
            with self._outside():
                if self.outer is not None:
                    t = self.outer.capture(t)
                sw = cfo.Switch(t, self.pred, name="switch_" + ("t" if self.branch else "f"))
            self._register(sw[0].op)
            s = self._switched[t] = sw[self.branch]
        return s


class WhileContext(_Context):
    """The context of a while loop's condition and body: outside values enter as loop invariants."""

    def __init__(self, graph, outer, frame_name: str, parallel_iterations: int, back_prop: bool):
        super().__init__(graph, outer)
        self.frame_name = frame_name
        self.parallel_iterations = parallel_iterations
        self.back_prop = back_prop
        self._entered: dict[Tensor, Tensor] = {}
        self.loop_enters: list[Tensor] = []
        self.loop_exits: list[Tensor] = []
        self.merges: list[Tensor] = []
        self.switches: list = []
        self.next_iterations: list[Tensor] = []
        self.loop_cond: Tensor | None = None

    def capture(self, t: Tensor) -> Tensor:
        if self.contains(t.op):
            return t
        e = self._entered.get(t)
        if e is None and t.op.op_def.resource == "variable":
            # A variable read in the loop sees its value at each iteration, not at loop entry.
            from actorflow.graph.ops.state_ops import RefRead
            with _building_in(self.graph, None), \
                    self.graph.control_dependencies([self.pivot.op] if self.pivot is not None else []):
                e = RefRead(t, name=t.op.name.split("/")[-1] + "_read")
            self._register(e.op)
            self._entered[t] = e
            return e
        if e is None:
            with self._outside():
                src = self.outer.capture(t) if self.outer is not None else t
            with self._raw():
                e = cfo.Enter(src, frame_name=self.frame_name, is_constant=True,
                              parallel_iterations=self.parallel_iterations, name="Enter")
            self._register(e.op)
            self._entered[t] = e
        return e


def _pred_tensor(pred):
    p = convert_to_tensor(pred)
    if p.dtype.name != "bool":
        raise TypeError(f"cond predicate must be a bool tensor, got {p.dtype.name} ('{p.name}')")
    if p.shape.ndims not in (None, 0):
        raise ValueError(f"cond predicate must be a scalar, got shape {p.shape} ('{p.name}')")
    return p


def _branch_outputs(ctx: CondContext, result):
    """Makes every output of a branch a tensor inside the branch (constants and outside values too)."""
    from actorflow.graph.ops.constant import Identity
    flat = nest.flatten(result)
    out = []
    with ctx.entered():
        for x in flat:
            if isinstance(x, Operation):
                with ctx.graph.control_dependencies([x]):
                    x = Identity(ctx.capture(ctx.pivot), name="control")
                out.append(x)
                continue
            if not isinstance(x, Tensor):
                x = convert_to_tensor(x)
            if not ctx.contains(x.op):
                x = Identity(ctx.capture(x))
            out.append(x)
    return out


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """Runs `true_fn()` or `false_fn()` depending on `pred`, inside the dataflow graph (tf.cond).

    Both branches are built; at run time only the taken one runs, the other receives dead tensors.
    The two branches must return the same structure of tensors with matching dtypes.
    """
    true_fn = true_fn or fn1
    false_fn = false_fn or fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callable")
    g = get_default_graph()
    outer = g._state().context
    with g.name_scope(name or "cond"):
        p = _pred_tensor(pred)
        if outer is not None:
            p = outer.capture(p)
        with _building_in(g, None, clear_control=True):
            p_f, p_t = cfo.Switch(p, p, name="Switch")
        if outer is not None:
            outer._register(p_t.op)
        results = []
        for branch, fn, piv in ((1, true_fn, p_t), (0, false_fn, p_f)):
            ctx = CondContext(g, outer, p, branch)
            from actorflow.graph.ops.constant import Identity
            with ctx.entered():
                ctx._register(piv.op)
                pivot = Identity(piv, name="switch_" + ("t" if branch else "f"))
                ctx.pivot = pivot
                res = fn()
            if res is None:
                raise ValueError("cond: a branch returned None; return a tensor, an op, or a structure of them")
            results.append((res, _branch_outputs(ctx, res)))
        (res_t, flat_t), (res_f, flat_f) = results
        try:
            nest.assert_same_structure(res_t, res_f)
        except ValueError as e:
            raise ValueError(f"cond: true_fn and false_fn must return the same structure: {e}") from None
        merged = []
        for a, b in zip(flat_t, flat_f):
            if a.dtype is not b.dtype:
                raise TypeError(f"cond: branches return different dtypes: {a.dtype.name} ('{a.name}') and "
                                f"{b.dtype.name} ('{b.name}')")
            with _building_in(g, None, clear_control=True):
                m = cfo.Merge(b, a, N=2, name="Merge")[0]
            if outer is not None:
                outer._register(m.op)
            merged.append(m)
        g.add_to_collection(GraphKeys.COND_CONTEXT, merged[0].op if merged else None)
        out = nest.pack_sequence_as(res_t, [m if not isinstance(x, Operation) else m.op
                                            for m, x in zip(merged, nest.flatten(res_t))])
        return out


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The first branch whose predicate is true, else `default` (tf.case), as nested conds.

    Differs from TF: `exclusive=True` is accepted but not checked at run time."""
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    pairs = list(pred_fn_pairs)
    if not pairs:
        if default is None:
            raise ValueError("case: no branches and no default")
        return default()
    if default is None:
        default = pairs[-1][1]
        pairs = pairs[:-1]
        if not pairs:
            return default()
    g = get_default_graph()
    with g.name_scope(name):
        def build(i):
            if i == len(pairs):
                return default()
            p, fn = pairs[i]
            return cond(p, fn, lambda: build(i + 1))
        return build(0)


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """Runs branch `branch_index` of `branch_fns` (tf.switch_case): a list of callables, or (int,
    callable) pairs or a dict keyed 0..n-1. An index out of range runs `default`, or the last branch
    when there is none, as in TF. Built as a case over ``branch_index == i`` (TF builds one Case op)."""
    if isinstance(branch_fns, dict):
        items = sorted(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)) and branch_fns and all(isinstance(b, (list, tuple)) for b in branch_fns):
        items = sorted((int(k), fn) for k, fn in branch_fns)
    else:
        items = list(enumerate(branch_fns))
    if not items:
        raise ValueError("switch_case: branch_fns must not be empty")
    if [k for k, _ in items] != list(range(len(items))):
        raise ValueError(f"switch_case: branch_fns keys must be 0..{len(items) - 1}, got {[k for k, _ in items]}")
    for k, fn in items:
        if not callable(fn):
            raise TypeError(f"switch_case: branch {k} is not callable: {fn!r}")
    from actorflow.graph.ops import math_ops
    g = get_default_graph()
    with g.name_scope(name):
        index = convert_to_tensor(branch_index, name="branch_index")
        if index.dtype is not dtypes.int32 or index.shape.ndims not in (None, 0):
            raise TypeError(f"switch_case: branch_index must be an int32 scalar, got {index.dtype.name} of shape "
                            f"{index.shape}")
        if default is None:
            default = items[-1][1]
            items = items[:-1]
        pairs = [(math_ops.equal(index, k), fn) for k, fn in items]
        return case(pairs, default=default, exclusive=True, name="case")


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,
               swap_memory=False, name=None, maximum_iterations=None, return_same_structure=False):
    """Repeats `body` while `cond` holds, as a dataflow loop (tf.while_loop).

    Up to `parallel_iterations` iterations run at once. `loop_vars` may be any nested structure of
    tensors; `maximum_iterations` bounds the trip count. Returns the final loop variables in the same
    structure (a single tensor when there is one loop variable, as in TF 1.x).
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callable")
    if parallel_iterations < 1:
        raise ValueError("while_loop: parallel_iterations must be a positive integer")
    g = get_default_graph()
    outer = g._state().context
    with g.name_scope(name or "while") as scope:
        frame_name = scope.rstrip("/")
        structure = loop_vars
        # TensorArrays travel as their flow tensors; the body and the result get them back wrapped.
        templates = nest.flatten(loop_vars)
        unwrap = [v._as_loop_var() if hasattr(v, "_as_loop_var") else v for v in templates]
        if shape_invariants is not None:
            shape_invariants = [TensorShape([]) if hasattr(t, "_as_loop_var") else s
                                for t, s in zip(templates, nest.flatten(shape_invariants))]
        flat = [convert_to_tensor(v) if not isinstance(v, Tensor) else v for v in unwrap]
        if not flat:
            raise ValueError("while_loop: no loop variables")
        counter = None
        if maximum_iterations is not None:
            from actorflow.graph.ops import math_ops
            mi = convert_to_tensor(maximum_iterations)
            if mi.dtype.name not in ("int32", "int64"):
                raise TypeError("while_loop: maximum_iterations must be an int32 or int64 scalar")
            counter = convert_to_tensor(0, dtype=mi.dtype)
            flat = [counter] + flat
        invariants = None
        if shape_invariants is not None:
            invariants = [as_shape(s) for s in nest.flatten(shape_invariants)]
            if counter is not None:
                invariants = [counter.shape] + invariants
            if len(invariants) != len(flat):
                raise ValueError("while_loop: shape_invariants must match loop_vars")
        ctx = WhileContext(g, outer, frame_name, parallel_iterations, back_prop)
        if outer is not None:
            flat = [outer.capture(v) for v in flat]
        with ctx._raw():
            enters = [cfo.Enter(v, frame_name=frame_name, is_constant=False,
                                parallel_iterations=parallel_iterations, name="Enter") for v in flat]
            merges = [cfo.Merge(e, e, N=2, name="Merge")[0] for e in enters]
        for e, m in zip(enters, merges):
            ctx._register(e.op)
            ctx._register(m.op)
        if invariants is not None:
            for m, inv in zip(merges, invariants):
                if not inv.is_compatible_with(m.shape):
                    raise ValueError(f"while_loop: shape invariant {inv} is not compatible with the initial "
                                     f"value's shape {m.shape} ('{m.name}')")
                m._shape = inv
        ctx.loop_enters, ctx.merges = enters, merges
        user_merges = merges[1:] if counter is not None else merges
        ctx.pivot = merges[0]

        def wrap(tensors):
            return [t._from_loop_var(x) if hasattr(t, "_as_loop_var") else x for t, x in zip(templates, tensors)]
        with ctx.entered():
            packed = nest.pack_sequence_as(structure, wrap(user_merges))
            c = cond(*packed) if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields") \
                else cond(packed)
            c = ctx.capture(convert_to_tensor(c))
            if counter is not None:
                from actorflow.graph.ops import math_ops
                c = math_ops.logical_and(c, math_ops.less(merges[0], ctx.capture(mi)))
        with ctx._raw():
            lc = cfo.LoopCond(c, name="LoopCond")
            switches = [cfo.Switch(m, lc, name="Switch") for m in merges]
        ctx._register(lc.op)
        for s in switches:
            ctx._register(s[0].op)
        ctx.loop_cond = lc
        ctx.switches = switches
        from actorflow.graph.ops.constant import Identity
        with ctx.entered():
            ids = [Identity(s[1], name="Identity") for s in switches]
            ctx.pivot = ids[0]
            body_in = ids[1:] if counter is not None else ids
            packed = nest.pack_sequence_as(structure, wrap(body_in))
            out = body(*packed) if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields") \
                else body(packed)
            if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields") \
                    and len(nest.flatten(structure)) == 1 and not isinstance(out, (list, tuple)):
                out = [out]
            try:
                flat_out = [x._as_loop_var() if hasattr(x, "_as_loop_var") else x for x in nest.flatten(out)]
                if len(flat_out) != len(body_in):
                    raise ValueError(f"body returned {len(flat_out)} values for {len(body_in)} loop variables")
            except ValueError as e:
                raise ValueError(f"while_loop: {e}") from None
            flat_out = [ctx.capture(convert_to_tensor(x, dtype=v.dtype) if not isinstance(x, Tensor) else x)
                        for x, v in zip(flat_out, body_in)]
            if counter is not None:
                from actorflow.graph.ops import math_ops
                flat_out = [math_ops.add(ids[0], ctx.capture(convert_to_tensor(1, dtype=mi.dtype)))] + flat_out
        for m, x in zip(merges, flat_out):
            if x.dtype is not m.dtype:
                raise TypeError(f"while_loop: body changed the dtype of loop variable '{m.name}' from "
                                f"{m.dtype.name} to {x.dtype.name}")
            if not m.shape.is_compatible_with(x.shape) or (
                    m.shape.dims is not None and x.shape.dims is not None and m.shape.dims != x.shape.dims
                    and not all(a is None or a == b for a, b in zip(m.shape.dims, x.shape.dims))):
                raise ValueError(f"The shape for {m.name} is not an invariant for the loop. It enters the loop "
                                 f"with shape {m.shape}, but has shape {x.shape} after one iteration. Provide "
                                 "shape invariants using the shape_invariants argument of while_loop.")
        with ctx._raw():
            nexts = [cfo.NextIteration(x, name="NextIteration") for x in flat_out]
            for m, n in zip(merges, nexts):
                m.op._update_input(1, n)
            exits = [cfo.Exit(s[0], name="Exit") for s in switches]
        for n in nexts:
            ctx._register(n.op)
        if outer is not None:
            for x in exits:
                outer._register(x.op)
        ctx.next_iterations, ctx.loop_exits = nexts, exits
        g.add_to_collection(GraphKeys.WHILE_CONTEXT, ctx)
        result = wrap(exits[1:] if counter is not None else exits)
        packed = nest.pack_sequence_as(structure, result)
        if not return_same_structure and isinstance(packed, (list, tuple)) and len(result) == 1 \
                and not hasattr(packed, "_fields"):
            return packed[0]
        return packed
