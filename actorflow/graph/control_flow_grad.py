"""Gradients of cond and while_loop, following the paper (section 4.1) and TF 1.x's control_flow_grad.

The rules for the primitives: the gradient of Merge is a Switch of the gradient on the same
predicate; of Switch, a Merge of the branch gradients (zeros for the branch not taken); of Exit, an
Enter into the gradient loop; of NextIteration, the gradient itself; of Enter, an Exit of the
gradient loop (for a loop invariant, the sum over iterations); LoopCond has none.

`af.gradients` differentiates a while loop as one unit (`LoopUnit`): when the backward pass reaches
the loop's Exits, `GradientState.loop_gradients` builds a gradient loop that runs as many iterations
as the forward loop did, in reverse, and returns the gradients of the loop's Enter inputs. The body
of the gradient loop is built by the ops' own gradient functions, inside contexts that mirror the
forward ones (`GradCondContext`, `GradWhileContext`), so that gradient ops run per iteration and die
on untaken branches.

Forward values the gradient body needs are saved per iteration: the forward loop gets an iteration
index, each needed value is pushed into a step-local accumulator under the tuple of enclosing loop
indices, and the gradient loop pops it by the index of the forward iteration it replays. Keying by
index (not a stack, as in TF) keeps this correct when `parallel_iterations` lets iterations finish
out of order. The gradient loop's trip count is a forward loop variable whose update waits for the
pushes of its iteration, so the gradient loop starts only once every value has been saved.
"""
from __future__ import annotations

import contextlib
import heapq
import threading

from actorflow.graph import dtypes
from actorflow.graph.control_flow import CondContext, WhileContext, _Context, context_of
from actorflow.graph.graph import GraphKeys, Tensor
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.ops import accumulator_ops
from actorflow.graph.ops import control_flow_ops as cfo
from actorflow.graph.ops.constant import Identity, constant

__all__ = ["GradientState", "LoopUnit", "GradCondContext", "GradWhileContext", "while_loop_gradients"]

_local = threading.local()      # .state: the GradientState whose gradient functions are running


def _current() -> "GradientState | None":
    return getattr(_local, "state", None)


@contextlib.contextmanager
def _in_context(graph, ctx):
    """Builds ops in control-flow context `ctx` (None: the root frame)."""
    st = graph._state()
    saved = st.context
    st.context = ctx
    try:
        yield
    finally:
        st.context = saved


@contextlib.contextmanager
def _raw(graph):
    """Builds structural ops (Enter, Merge, Switch, ...) with no context hook and no control inputs."""
    with _in_context(graph, None), graph.control_dependencies(None):
        yield


def _while_of(ctx):
    """The innermost forward while context among `ctx` and its outer contexts."""
    while ctx is not None and not isinstance(ctx, WhileContext):
        ctx = ctx.outer
    return ctx


def _is_strict_ancestor(a, ctx) -> bool:
    """Whether context `a` (None: the root) encloses `ctx`."""
    c = ctx.outer if ctx is not None else None
    while c is not None:
        if c is a:
            return True
        c = c.outer
    return a is None and ctx is not None


def _depth(ctx) -> int:
    n = 0
    while ctx is not None:
        n += 1
        ctx = ctx.outer
    return n


def _dense(grad):
    if isinstance(grad, IndexedSlices):
        from actorflow.graph.ops import array_ops
        return array_ops.indexed_slices_to_dense(grad)
    return grad


def _sibling(c: CondContext) -> CondContext:
    """The other branch of the cond that `c` is a branch of (found through the shared pivot Switch)."""
    sw = c.pivot.op.inputs[0].op
    for consumer in sw.outputs[1 - c.branch]._consumers:
        other = context_of(consumer)
        if isinstance(other, CondContext) and other.pivot is not None and other.pivot.op is consumer:
            return other
    raise RuntimeError(f"cannot find the other branch of the cond with pivot '{c.pivot.name}'")


def _body_inputs(w: WhileContext) -> list:
    """The Identity that feeds each loop variable to the body (the forward `ids` of while_loop)."""
    ids = []
    for s in w.switches:
        for consumer in s[1]._consumers:
            if consumer.type == "Identity" and context_of(consumer) is w:
                ids.append(consumer.outputs[0])
                break
        else:
            raise RuntimeError(f"loop '{w.frame_name}': no body input for '{s[1].name}'")
    return ids


def _mark_gradient_loop_exit(op) -> None:
    op.graph.__dict__.setdefault("_cf_gradient_loop_exits", set()).add(op)


def _structural_ops(w: WhileContext) -> set:
    ops = {t.op for t in w.loop_enters} | {t.op for t in w.merges} | {s[0].op for s in w.switches}
    ops |= {t.op for t in w.next_iterations} | {t.op for t in w._entered.values()}
    if w.loop_cond is not None:
        ops.add(w.loop_cond.op)
    return ops


def _loop_member_owner(op, kind: str):
    """The forward loop `op` is a structural `kind` ("merges"/"switches") of, or None."""
    w = context_of(op)
    if not isinstance(w, WhileContext):
        return None
    if kind == "merges":
        return w if any(m.op is op for m in w.merges) else None
    return w if any(s[0].op is op for s in w.switches) else None


def _add_loop_var(ctx, init: Tensor, step, with_exit: bool = True):
    """Adds a loop variable to the already built loop `ctx` (a forward or gradient while context).

    `init` must be usable in ctx's outer context; `step(value)` builds the next value inside the
    body. Returns (value in the body, next value, Exit or None).
    """
    g = ctx.graph
    with _raw(g):
        e = cfo.Enter(init, frame_name=ctx.frame_name, is_constant=False,
                      parallel_iterations=ctx.parallel_iterations, name="Enter")
        m = cfo.Merge(e, e, N=2, name="Merge")[0]
        s = cfo.Switch(m, ctx.loop_cond, name="Switch")
    for op in (e.op, m.op, s[0].op):
        ctx._register(op)
    with _in_context(g, ctx), g.control_dependencies(None):
        body = Identity(s[1], name="Identity")
        nxt = step(body)
    with _raw(g):
        n = cfo.NextIteration(nxt, name="NextIteration")
        m.op._update_input(1, n)
        x = cfo.Exit(s[0], name="Exit") if with_exit else None
    ctx._register(n.op)
    if x is not None:
        if ctx.outer is not None:
            ctx.outer._register(x.op)
        if isinstance(ctx, GradWhileContext):
            _mark_gradient_loop_exit(x.op)
    return body, nxt, x


# ---------------------------------------------------------------------------------------------
# Contexts that gradient ops are built in
# ---------------------------------------------------------------------------------------------

class _GradContext(_Context):
    """A gradient context: values from outside are routed in as in the forward contexts, and forward
    values are replaced by what the gradient state saved for them (`GradientState.saved_value`)."""

    def __init__(self, state: "GradientState", outer):
        super().__init__(state.graph, outer)
        self.state = state
        self._captured: dict = {}

    def capture(self, t: Tensor) -> Tensor:
        if self.contains(t.op):
            return t
        r = self._captured.get(t)
        if r is not None:
            return r
        if isinstance(context_of(t.op), _GradContext):
            r = self._route(self.outer.capture(t) if self.outer is not None else t)
        else:
            v, home = self.state.saved_value(t)
            if home is self:
                r = v
            elif _is_strict_ancestor(home, self):
                r = self._route(self.outer.capture(v) if self.outer is not None else v)
            else:
                raise ValueError(f"Gradient construction: the forward tensor '{t.name}' is used where it does not "
                                 "exist (a value from inside a cond branch or loop body used outside it)")
        self._captured[t] = r
        return r

    def _route(self, t: Tensor) -> Tensor:
        raise NotImplementedError


class GradCondContext(_GradContext):
    """Mirrors a forward cond branch: gradient ops here run only when the forward branch ran."""

    def __init__(self, state: "GradientState", forward: CondContext):
        outer = state.grad_context_for(forward.outer)
        super().__init__(state, outer)
        self.forward = forward
        self.branch = forward.branch
        state.grad_ctxs[forward] = self
        g = state.graph
        # The forward predicate as seen where this cond's gradient runs (saved per iteration in a loop).
        self.pred = state.value_in(outer, forward.pred)
        with _in_context(g, outer), g.control_dependencies(None):
            sw = cfo.Switch(self.pred, self.pred, name="grad_pivot")
        self._register(sw[0].op)
        with _in_context(g, self), g.control_dependencies(None):
            self.pivot = Identity(sw[self.branch], name="grad_pivot_" + ("t" if self.branch else "f"))

    def _route(self, t: Tensor) -> Tensor:
        g = self.graph
        with _in_context(g, self.outer), g.control_dependencies(None):
            sw = cfo.Switch(t, self.pred, name="grad_switch_" + ("t" if self.branch else "f"))
        self._register(sw[0].op)
        return sw[self.branch]


class GradWhileContext(_GradContext):
    """The gradient loop of a forward while loop: iteration j replays forward iteration N-1-j."""

    def __init__(self, state: "GradientState", forward: WhileContext, frame_name: str):
        outer = state.grad_context_for(forward.outer)
        super().__init__(state, outer)
        self.forward = forward
        self.frame_name = frame_name
        self.parallel_iterations = forward.parallel_iterations
        self.loop_cond: Tensor | None = None
        self.index: Tensor | None = None     # the forward iteration this gradient iteration replays
        self.count: Tensor | None = None     # forward Exit: the trip count, once every value is saved
        self.sync = None                     # forward op whose control inputs delay `count`
        self.tokens: list = []               # forward pushes that `count` must wait for
        self.switch_merges: dict = {}        # forward loop Switch -> its gradient Merge (back edge open)
        self.finalized = False
        state.grad_ctxs[forward] = self

    def _route(self, t: Tensor) -> Tensor:
        with _raw(self.graph):
            e = cfo.Enter(t, frame_name=self.frame_name, is_constant=True,
                          parallel_iterations=self.parallel_iterations, name="Enter")
        self._register(e.op)
        return e


# ---------------------------------------------------------------------------------------------
# A while loop as one unit of the backward pass
# ---------------------------------------------------------------------------------------------

class LoopUnit:
    """A forward while loop seen by af.gradients as one op: its inputs are the inputs of the loop's
    Enters (loop variables first, then loop invariants), its outputs the loop's Exits."""

    __slots__ = ("loop", "state", "enters", "inputs", "outputs", "name", "type", "device", "_id",
                 "control_inputs")

    def __init__(self, state: "GradientState", loop: WhileContext):
        self.loop = loop
        self.state = state
        self.enters = tuple(e.op for e in loop.loop_enters) + tuple(e.op for e in loop._entered.values())
        self.inputs = tuple(op.inputs[0] for op in self.enters)
        self.outputs = tuple(loop.loop_exits)
        self.name = loop.frame_name
        self.type = "WhileLoop"
        self.device = ""
        self._id = max(x.op._id for x in loop.loop_exits)
        self.control_inputs = ()

    @property
    def op_def(self):
        return self

    @property
    def grad_fn(self):
        return lambda unit, *exit_grads: self.state.loop_gradients(unit, list(exit_grads))

    def __repr__(self):
        return f"<LoopUnit {self.name}>"


class GradientState:
    """The control-flow bookkeeping of one af.gradients call: which loops are units, the gradient
    context mirroring each forward context, and the forward values saved for the gradient loops."""

    def __init__(self, graph, fwd=None, xs=()):
        self.graph = graph
        self.base = graph._state().context   # where af.gradients was called (normally the root)
        self.fwd = fwd                       # ops downstream of xs (None: assume every input matters)
        self.xs = set(xs)
        self.exit_owner: dict = {}
        for w in graph.get_collection(GraphKeys.WHILE_CONTEXT):
            for x in w.loop_exits:
                self.exit_owner[x.op] = w
        self.exit_owner.update(graph.__dict__.get("_cf_grad_exits", {}))
        self.grad_ctxs: dict = {}            # forward context -> gradient context
        self.saved: dict = {}                # forward tensor -> (its value for gradients, context it lives in)
        self._units: dict = {}               # forward WhileContext -> LoopUnit
        self.units: set = set()

    # -- the hook used by af.gradients ----------------------------------------------------------
    @classmethod
    def for_gradients(cls, between, fwd, xs, ys):
        """The state for one af.gradients call, or None when no op between xs and ys is control flow."""
        if not any(op.op_def.control_flow is not None or context_of(op) is not None for op in between):
            return None
        st = cls(next(iter(between)).graph, fwd, xs)
        level = _while_of(st.base)
        for what, tensors in (("ys", ys), ("xs", xs)):
            for t in tensors:
                w = _while_of(context_of(t.op))
                if w is not None and w is not level:
                    raise ValueError(f"Cannot differentiate with {what} tensor '{t.name}' inside the body of while "
                                     f"loop '{w.frame_name}'; use a value that leaves the loop (an Exit)")
        gradient_exits = st.graph.__dict__.get("_cf_gradient_loop_exits", ())
        for op in between:
            if op in gradient_exits or isinstance(context_of(op), _GradContext):
                raise NotImplementedError(f"Gradients of gradients through control flow are not supported (op "
                                          f"'{op.name}' belongs to a gradient cond or loop)")
            if op.type in ("Enter", "Exit", "NextIteration") and st._forward_loop(op) is None:
                raise LookupError(f"Gradients through the hand-built loop op '{op.name}' ({op.type}) are not "
                                  "supported; build loops with af.while_loop to differentiate them")
        st.units = {st.unit_of(op) for op in between}
        return st

    def unit_of(self, op):
        """`op`, or the LoopUnit of the outermost while loop containing it (at af.gradients' level)."""
        return self._unit_at(op, _while_of(self.base))

    @contextlib.contextmanager
    def grad_context(self, op):
        """Builds the gradient of `op` (an Operation or LoopUnit) in the context mirroring its own."""
        prev = getattr(_local, "state", None)
        _local.state = self
        try:
            fctx = op.loop.outer if isinstance(op, LoopUnit) else context_of(op)
            gctx = self.grad_context_for(fctx)
            with _in_context(self.graph, gctx):
                yield gctx
        finally:
            _local.state = prev

    # -- contexts ----------------------------------------------------------------------------
    def grad_context_for(self, fctx):
        """The gradient context mirroring forward context `fctx` (created lazily for cond branches)."""
        if fctx is None or fctx is self.base or _is_strict_ancestor(fctx, self.base):
            return self.base
        if isinstance(fctx, _GradContext):
            raise NotImplementedError("Gradients of gradients through control flow are not supported")
        gc = self.grad_ctxs.get(fctx)
        if gc is not None:
            return gc
        if isinstance(fctx, CondContext):
            return GradCondContext(self, fctx)
        raise RuntimeError(f"The gradient of loop '{fctx.frame_name}' is needed but is not being built "
                           "(a value from inside a loop is used outside it)")

    def value_in(self, ctx, t: Tensor) -> Tensor:
        """`t` (forward or gradient tensor) as usable in gradient context `ctx`."""
        return t if ctx is None else ctx.capture(t)

    def _forward_loop(self, op):
        """The forward loop `op` is part of; a loop's Exits count as part of it."""
        w = self.exit_owner.get(op)
        return w if w is not None else _while_of(context_of(op))

    def _unit_at(self, op, level):
        w = self._forward_loop(op)
        prev = None
        while w is not None and w is not level:
            prev = w
            w = _while_of(w.outer)
        if w is not level or prev is None:
            return op
        u = self._units.get(prev)
        if u is None:
            u = self._units[prev] = LoopUnit(self, prev)
        return u

    def needs(self, t: Tensor) -> bool:
        """Whether a gradient for `t` can matter to the caller of af.gradients."""
        if self.fwd is None or t in self.xs or t.op in self.fwd:
            return True
        return _while_of(context_of(t.op)) is not None

    # -- forward values for the gradient -----------------------------------------------------
    def saved_value(self, t: Tensor):
        """(value, home): what gradient ops use for forward tensor `t`, and the gradient context where
        that value is live exactly when `t` was. Inside loops this saves `t` per iteration."""
        hit = self.saved.get(t)
        if hit is not None:
            return hit
        op = t.op
        fctx = context_of(op)
        w = _while_of(fctx)
        if w is None or w is _while_of(self.base):
            r = (t, self.grad_context_for(fctx))
        elif op.type == "Enter" and op.attrs.get("is_constant"):
            # A loop invariant: the same value every iteration, so use the value entering the loop.
            r = self.saved_value(op.inputs[0])
        elif (op.type == "Switch" and isinstance(fctx, CondContext) and op.inputs[1] is fctx.pred
              and t.value_index == fctx.branch):
            # A value captured into a cond branch: route the outer value in again instead of saving it.
            home = self.grad_context_for(fctx)
            r = (home.capture(op.inputs[0]), home)
        elif op.type == "Const":
            home = self.grad_context_for(fctx)
            with _in_context(self.graph, home), self.graph.control_dependencies(None):
                r = (constant(op.attrs["value"], dtype=t.dtype, name="saved_const"), home)
        else:
            home = self.grad_context_for(fctx)
            r = (self._save(t, fctx, w, home), home)
        self.saved[t] = r
        return r

    def _save(self, t: Tensor, fctx, w: WhileContext, home) -> Tensor:
        """Pushes `t` in the forward loop under its iteration index; pops it in the gradient loop."""
        gw = self.grad_ctxs.get(w)
        if not isinstance(gw, GradWhileContext) or gw.finalized:
            raise RuntimeError(f"internal: value '{t.name}' of loop '{w.frame_name}' is needed after its "
                               "gradient loop was built")
        loops = []
        c = fctx
        while c is not None:
            if isinstance(c, WhileContext):
                loops.append(c)
            c = c.outer
        loops.reverse()
        g = self.graph
        with g.name_scope(w.frame_name + "/saved/"):
            with _raw(g):
                handle = accumulator_ops.accumulator(tensor_name=t.name, name="acc")
            keys = [self._forward_index(lp) for lp in loops]
            with _in_context(g, fctx), g.control_dependencies(None):
                push = accumulator_ops.accumulator_push(handle, t, keys, name="push")
        gw.tokens.append(push)
        with _in_context(g, home), g.control_dependencies(None):
            return accumulator_ops.accumulator_pop(handle, [self.grad_ctxs[lp].index for lp in loops], t.dtype,
                                                   t.shape, name="saved")

    def _forward_index(self, w: WhileContext) -> Tensor:
        """The iteration number inside forward loop `w`'s body (a loop variable added once per loop)."""
        cache = self.graph.__dict__.setdefault("_cf_loop_index", {})
        idx = cache.get(w)
        if idx is None:
            g = self.graph
            from actorflow.graph.ops import math_ops
            with g.name_scope(w.frame_name + "/"):
                with _in_context(g, w.outer), g.control_dependencies(None):
                    zero = constant(0, dtype=dtypes.int32, name="index_init")
                idx, _, _ = _add_loop_var(w, zero, lambda i: math_ops.add(i, constant(1, dtype=dtypes.int32)),
                                          with_exit=False)
            cache[w] = idx
        return idx

    def _add_sync(self, gw: GradWhileContext) -> None:
        """Adds the forward loop's trip count, each update waiting for its iteration's pushes."""
        w = gw.forward
        g = self.graph
        from actorflow.graph.ops import math_ops
        with g.name_scope(w.frame_name + "/"):
            with _in_context(g, w.outer), g.control_dependencies(None):
                zero = constant(0, dtype=dtypes.int32, name="count_init")
            _, nxt, x = _add_loop_var(w, zero, lambda i: math_ops.add(i, constant(1, dtype=dtypes.int32)))
        g.__dict__.setdefault("_cf_grad_exits", {})[x.op] = w
        self.exit_owner[x.op] = w
        gw.count, gw.sync = x, nxt.op

    def _finalize(self, gw: GradWhileContext) -> None:
        """Makes the trip count wait for every push. Pushes inside a cond branch are gathered by a
        Merge of both branches' pivots, so that the untaken branch (dead) does not stop the count."""
        w = gw.forward
        g = self.graph
        with g.name_scope(w.frame_name + "/saved/"):
            self._gather_tokens(gw)
        gw.finalized = True

    def _gather_tokens(self, gw: GradWhileContext) -> None:
        w = gw.forward
        g = self.graph
        by_ctx: dict = {}
        for op in gw.tokens:
            by_ctx.setdefault(context_of(op), []).append(op)
        while True:
            conds = [c for c in by_ctx if c is not w]
            if not conds:
                break
            c = max(conds, key=_depth)
            sib = _sibling(c)
            branches = {c.branch: (c, by_ctx.pop(c)), sib.branch: (sib, by_ctx.pop(sib, []))}
            signals = []
            for b in (0, 1):
                ctx, toks = branches[b]
                with _in_context(g, ctx), g.control_dependencies(toks):
                    signals.append(Identity(ctx.pivot, name="saved"))
            with _raw(g):
                m = cfo.Merge(signals[0], signals[1], N=2, name="saved")[0]
            c.outer._register(m.op)
            by_ctx.setdefault(c.outer, []).append(m.op)
        for op in by_ctx.get(w, ()):
            gw.sync._add_control_input(op)

    # -- the gradient loop -------------------------------------------------------------------
    def loop_gradients(self, unit: LoopUnit, exit_grads: list) -> list:
        """Builds the gradient loop of `unit.loop`; returns the gradients of `unit.inputs`."""
        w = unit.loop
        g = self.graph
        n = len(w.loop_enters)
        res = [None] * len(unit.inputs)
        if not w.back_prop:
            return res
        exit_g = [None if gr is None else _dense(gr) for gr in exit_grads]
        ids = _body_inputs(w)
        outs = [nx.op.inputs[0] for nx in w.next_iterations]
        const_enters = unit.enters[n:]
        needed, reached = self._needed(w, ids, outs, exit_g)
        if not needed:
            return res
        g0 = self.grad_context_for(w.outer)
        from actorflow.graph.ops import array_ops, math_ops
        with g.name_scope("grad_loop") as scope:
            gw = GradWhileContext(self, w, scope.rstrip("/"))
            self._add_sync(gw)
            # The counter: r = N, N-1, ..., 1 while the body runs; the forward index is r - 1.
            count = self.value_in(g0, gw.count)
            with _raw(g):
                e = cfo.Enter(count, frame_name=gw.frame_name, is_constant=False,
                              parallel_iterations=gw.parallel_iterations, name="Enter")
                m = cfo.Merge(e, e, N=2, name="Merge")[0]
            gw._register(e.op)
            gw._register(m.op)
            gw.pivot = m
            with _in_context(g, gw), g.control_dependencies(None):
                more = math_ops.greater(m, constant(0, dtype=dtypes.int32))
            with _raw(g):
                lc = cfo.LoopCond(more, name="LoopCond")
                s = cfo.Switch(m, lc, name="Switch")
            gw._register(lc.op)
            gw._register(s[0].op)
            gw.loop_cond = lc
            with _in_context(g, gw), g.control_dependencies(None):
                r = Identity(s[1], name="Identity")
                gw.pivot = r
                gw.index = math_ops.subtract(r, constant(1, dtype=dtypes.int32), name="index")
            with _raw(g):
                nx = cfo.NextIteration(gw.index, name="NextIteration")
                m.op._update_input(1, nx)
            gw._register(nx.op)

            # One gradient loop variable per forward loop variable that carries a gradient.
            seeds: dict = {}
            to_enter = {}
            for k in needed:
                ge = exit_g[k]
                if ge is None:
                    with _in_context(g, g0):
                        ge = array_ops.zeros_like(w.loop_exits[k])
                gin = _exit_grad(w.loop_exits[k].op, ge)[0]
                gm = _switch_grad(w.switches[k][0].op, gin, None)[0]
                to_e, to_n = _merge_grad(w.merges[k].op, gm)
                seeds.setdefault(outs[k], []).append(_next_iteration_grad(w.next_iterations[k].op, to_n)[0])
                to_enter[k] = to_e

            invariants = [op for op in const_enters if op.outputs[0].dtype.is_differentiable and op in reached
                          and self.needs(op.inputs[0])]
            xs = [ids[k] for k in needed] + [op.outputs[0] for op in invariants]
            grads = self._backprop(w, seeds, xs)

            for k in needed:
                _switch_grad(w.switches[k][0].op, None, grads.get(ids[k]))      # closes the back edge
                gi = _enter_grad(w.loop_enters[k].op, to_enter[k])[0]
                if self.needs(unit.inputs[k]):
                    res[k] = gi
            for op in invariants:
                gc = grads.get(op.outputs[0])
                if gc is not None:
                    res[unit.enters.index(op)] = _enter_grad(op, gc)[0]
            self._finalize(gw)
        return res

    def _needed(self, w, ids, outs, exit_g):
        """Loop variables whose gradient must go around the loop (a fixpoint: a variable is needed if
        its Exit has a gradient or the body computes a needed variable from it), and the body inputs
        reached backward from the needed variables' next values."""
        stops = {x.op for x in ids} | {t.op for t in w._entered.values()}
        struct = _structural_ops(w)

        def reach(starts):
            seen, found = set(), set()
            stack = [t.op for t in starts]
            while stack:
                op = stack.pop()
                if op in seen:
                    continue
                seen.add(op)
                if op in stops:
                    found.add(op)
                elif op in w.ops and op not in struct:
                    stack.extend(t.op for t in op.inputs)
            return found

        floating = [k for k in range(len(ids)) if w.merges[k].dtype.is_differentiable]
        needed = {k for k in floating if exit_g[k] is not None}
        while True:
            found = reach([outs[k] for k in needed])
            more = {k for k in floating if ids[k].op in found}
            if more <= needed:
                return sorted(needed), found
            needed |= more

    def _backprop(self, w, seeds: dict, xs: list) -> dict:
        """Reverse-mode pass over loop `w`'s body, from gradients of its next values (`seeds`) to
        gradients of `xs` (body inputs and loop invariants); nested loops are units."""
        from actorflow.graph.gradients import aggregate_gradients
        g = self.graph
        nexts = {t.op for t in w.next_iterations}
        fwd = set()
        stack = [c for x in xs for c in x._consumers]
        while stack:
            op = stack.pop()
            if op in fwd or op in nexts or op not in w.ops:
                continue
            fwd.add(op)
            for t in op.outputs:
                stack.extend(t._consumers)
        between = set()
        stack = [t.op for t in seeds if t.op in fwd]
        while stack:
            op = stack.pop()
            if op in between:
                continue
            between.add(op)
            stack.extend(t.op for t in op.inputs if t.op in fwd)
        units = {self._unit_at(op, w) for op in between}
        pending = {u: 0 for u in units}
        for u in units:
            for t in u.inputs:
                p = self._unit_at(t.op, w)
                if p in pending:
                    pending[p] += 1
        grads = {t: list(lst) for t, lst in seeds.items()}
        ready = [(-u._id, u) for u in units if pending[u] == 0]
        heapq.heapify(ready)
        while ready:
            u = heapq.heappop(ready)[1]
            with self.grad_context(u):
                out_grads = []
                for t in u.outputs:
                    lst = grads.get(t)
                    if lst and len(lst) > 1:
                        lst[:] = [aggregate_gradients(lst)]
                    out_grads.append(lst[0] if lst else None)
                in_grads = None
                if any(gr is not None for gr in out_grads) and any(t.dtype.is_differentiable for t in u.inputs):
                    from actorflow.graph.gradients import gradient_function
                    fn = gradient_function(u)
                    if fn is None:
                        raise LookupError(f"No gradient defined for operation '{u.name}' (op type: {u.type})")
                    with g.name_scope(u.name + "_grad"):
                        in_grads = fn(u, *out_grads)
                    in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
                    if len(in_grads) != len(u.inputs):
                        raise ValueError(f"Gradient function for op '{u.name}' ({u.type}) returned {len(in_grads)} "
                                         f"gradients, expected {len(u.inputs)}")
            if in_grads is not None:
                for t, gr in zip(u.inputs, in_grads):
                    if gr is not None and t.dtype.is_differentiable:
                        grads.setdefault(t, []).append(gr)
            for t in u.inputs:
                p = self._unit_at(t.op, w)
                if p in pending:
                    pending[p] -= 1
                    if pending[p] == 0:
                        heapq.heappush(ready, (-p._id, p))
        result = {}
        with _in_context(g, self.grad_ctxs[w]):
            for x in xs:
                gx = aggregate_gradients(grads.get(x, []))
                # (one row of an invariant stays sparse: _enter_grad adds it in at its row)
                result[x] = None if gx is None else gx if _one_row(gx, x) else _dense(gx)
        return result


def while_loop_gradients(loop: WhileContext, exit_grads: list) -> list:
    """Gradients of a while loop's Enter inputs (loop variables' initial values, then the loop
    invariants, as in `LoopUnit(loop).inputs`) given the gradients of its Exits (None for none).

    The entry point af.gradients uses for a loop; no TF-1.x counterpart (TF interleaves this with
    its per-op traversal).
    """
    st = _current() or GradientState(loop.graph)
    unit = st._unit_at(loop.loop_exits[0].op, _while_of(loop.outer))
    with st.grad_context(unit):
        return st.loop_gradients(unit, list(exit_grads))


# ---------------------------------------------------------------------------------------------
# Gradient functions of the primitives
# ---------------------------------------------------------------------------------------------

def _loop_grad_context(op, owner) -> GradWhileContext:
    st = _current()
    gw = st.grad_ctxs.get(owner) if st is not None and owner is not None else None
    if not isinstance(gw, GradWhileContext):
        raise LookupError(f"The gradient of loop op '{op.name}' ({op.type}) is built by af.gradients for the whole "
                          "loop; loops built by hand from af.control_flow_ops cannot be differentiated")
    return gw


@cfo.Merge.gradient
def _merge_grad(op, grad, _index_grad=None):
    """Cond: a Switch of the gradient on the cond's predicate, one output per branch.
    Loop: a Switch on the gradient loop's predicate (to the Enter when the gradient loop ends, to
    the NextIteration while it runs)."""
    g = op.graph
    w = _loop_member_owner(op, "merges")
    grad = _dense(grad)
    if w is not None:
        gw = _loop_grad_context(op, w)
        with _raw(g):
            s = cfo.Switch(grad, gw.loop_cond, name="b_switch")
        gw._register(s[0].op)
        return [s[0], s[1]]
    st = _current()
    ctxs = [context_of(t.op) for t in op.inputs]
    if (st is not None and len(ctxs) == 2 and all(isinstance(c, CondContext) for c in ctxs)
            and ctxs[0].pred is ctxs[1].pred and {c.branch for c in ctxs} == {0, 1}):
        here = g._state().context
        pred = st.value_in(here, ctxs[0].pred)
        s = cfo.Switch(grad, pred, name="cond_grad")
        for c in ctxs:
            st.grad_context_for(c)._register(s[0].op)
        return [s[c.branch] for c in ctxs]
    # A Merge built by hand: input i was the one forwarded iff value_index == i.
    from actorflow.graph.ops import math_ops
    return [cfo.Switch(grad, math_ops.equal(op.outputs[1], constant(i, dtype=dtypes.int32)), name="merge_grad")[1]
            for i in range(len(op.inputs))]


@cfo.Switch.gradient
def _switch_grad(op, grad_false, grad_true=None):
    """Cond: a Merge of the two branches' gradients, zeros standing in for a branch that computed
    none (so that exactly one Merge input is live). Loop: a Merge in the gradient loop; its first
    input is the gradient entering the gradient loop, its second (set when the body's gradient is
    known, the second time this is called) the gradient coming around from the next iteration."""
    g = op.graph
    w = _loop_member_owner(op, "switches")
    if w is not None:
        gw = _loop_grad_context(op, w)
        m = gw.switch_merges.pop(op, None)
        if m is None:
            with _raw(g):
                m = cfo.Merge(grad_false, grad_false, N=2, name="b_merge")[0]
            gw._register(m.op)
            m._shape = op.inputs[0].shape          # the forward loop variable's shape invariant
            gw.switch_merges[op] = m
            return [m, None]
        nxt = grad_true
        if nxt is None:
            from actorflow.graph.ops import array_ops
            with _in_context(g, gw), g.control_dependencies(None):
                nxt = array_ops.zeros_like(m)
        with _raw(g):
            n = cfo.NextIteration(_dense(nxt), name="b_next")
            m.op._update_input(1, n)
        gw._register(n.op)
        return [None, None]
    if grad_false is None and grad_true is None:
        return [None, None]
    st = _current()
    ctx = context_of(op)
    # A cond's capture Switch was built in the cond's outer context; its Merge belongs there too.
    build = ctx.outer if isinstance(ctx, CondContext) and op.inputs[1] is ctx.pred else ctx
    here = st.grad_context_for(build) if st is not None else g._state().context
    from actorflow.graph.ops import array_ops
    with _in_context(g, here):
        gs = [None if x is None else _dense(x) for x in (grad_false, grad_true)]
        for b in (0, 1):
            if gs[b] is None:
                zeros = array_ops.zeros_like(op.inputs[0])
                gs[b] = cfo.Switch(zeros, op.inputs[1], name="zeros")[b]
        merged = cfo.Merge(gs[0], gs[1], N=2, name="cond_grad")[0]
    return [merged, None]


@cfo.Exit.gradient
def _exit_grad(op, grad):
    """An Enter of the gradient into the gradient loop."""
    st = _current()
    gw = _loop_grad_context(op, st.exit_owner.get(op) if st is not None else None)
    v = st.value_in(gw.outer, _dense(grad))
    with _raw(op.graph):
        e = cfo.Enter(v, frame_name=gw.frame_name, is_constant=False,
                      parallel_iterations=gw.parallel_iterations, name="b_enter")
    gw._register(e.op)
    return [e]


@cfo.NextIteration.gradient
def _next_iteration_grad(op, grad):
    """The gradient itself: the gradient loop's own back edge carries it to the next iteration."""
    return [grad]


@cfo.Enter.gradient
def _enter_grad(op, grad):
    """An Exit of the gradient loop; for a loop invariant, the sum of its gradient over iterations."""
    g = op.graph
    w = context_of(op)
    gw = _loop_grad_context(op, w if isinstance(w, WhileContext) else None)
    if not op.attrs.get("is_constant"):
        with _raw(g):
            x = cfo.Exit(grad, name="b_exit")
        if gw.outer is not None:
            gw.outer._register(x.op)
        _mark_gradient_loop_exit(x.op)
        return [x]
    from actorflow.graph.ops import array_ops, math_ops
    if _one_row(grad, op.inputs[0]):
        # One row an iteration (dynamic_rnn's read of a time step, an embedding row): added into the
        # accumulator at that row, not as a dense tensor of the invariant's whole shape made and
        # summed every iteration (which made the gradient loop's cost grow with the square of its
        # length). Adding zeros elsewhere changes nothing, so the sum is the same, bit for bit.
        from actorflow.graph.ops import scatter_nd_ops
        # (the index's reshape is built in the update, inside the gradient loop, as the values are)
        update = lambda acc: scatter_nd_ops.TensorScatterAdd(  # noqa: E731
            acc, array_ops.reshape(grad.indices, [1, 1]), grad.values)
    elif op.inputs[0].dtype is dtypes.variant:
        update = lambda acc: math_ops.add_n([acc, grad])  # noqa: E731  (tensor lists add as lists)
    else:
        grad = _dense(grad)
        update = lambda acc: math_ops.add(acc, grad)  # noqa: E731
    with _in_context(g, gw.outer), g.control_dependencies(None):
        zeros = array_ops.zeros_like(op.inputs[0])
    _, _, total = _add_loop_var(gw, zeros, update, with_exit=True)
    return [total]


def _one_row(grad, invariant) -> bool:
    """Whether `grad` is an IndexedSlices of one row of `invariant` (a float dtype; one index, and
    values of one row whose other dimensions agree with the invariant's where both are known: a
    batch of unknown size, dynamic_rnn's usual input, is one row all the same)."""
    if not isinstance(grad, IndexedSlices):
        return False
    ind, vals = grad.indices, grad.values
    if not (ind.shape.is_fully_defined() and ind.shape.num_elements() == 1 and invariant.dtype.is_floating):
        return False
    if vals.shape.ndims is None or invariant.shape.ndims is None or vals.shape.ndims != invariant.shape.ndims:
        return False
    first, rest = vals.shape.as_list()[0], vals.shape.as_list()[1:]
    return first == 1 and all(a is None or b is None or a == b
                              for a, b in zip(rest, invariant.shape.as_list()[1:]))


@cfo.LoopCond.gradient
def _loop_cond_grad(op, grad):
    return [None]
