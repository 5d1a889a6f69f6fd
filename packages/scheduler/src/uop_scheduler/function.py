"""`@function`: trace a Python function of Tensors once per input signature into a call.

The first call with a new signature (shapes, dtypes, devices of the tensor arguments) runs the function on PARAM
placeholders; the traced values become the body of `UOp.call_with_outputs`, and every call passes its tensors as the
arguments. An argument the function assigns to is written back: its new value is one more output of the call, assigned
to the caller's tensor. A precompiled function's outputs are computed in kernels of their own; otherwise the body fuses into its
consumers like any expression. Gradients flow through the body, or through `grad_fxn` when given.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from uopir import Ops, UOp, dtypes

from .errors import SchedulerError
from .multi import ShardedTensor
from .tensor import Tensor
from .writes import all_tensors, pending, rebind_views, storage_of

# a trace whose body returned values over several devices: calls with that signature run the function as written
_SHARDS = object()


class _Sharded(Exception):
    """Raised by a trace whose function returned a ShardedTensor."""


ReturnType = TypeVar("ReturnType")


class FunctionError(SchedulerError, RuntimeError):
    """A traced function reads buffers it was not given (implicit buffers) or returns something other than tensors."""


class _Function(Generic[ReturnType]):
    def __init__(self, fn: Callable[..., ReturnType], precompile: bool, precompile_backward: bool, allow_implicit: bool,
                 grad_fxn: Callable | None):
        self.fn, self.precompile, self.precompile_backward = fn, precompile, precompile_backward
        self.allow_implicit, self.grad_fxn = allow_implicit, grad_fxn
        # signature -> (body values, returns a tuple, written arguments, lifted implicit tensors (weak), their shapes)
        self.traces: dict[tuple, tuple] = {}
        functools.update_wrapper(self, fn)
        # the call's name: the function's qualified name (`Foo.__call__` for a method), a callable instance's class
        qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        self.name = qualname.rsplit("<locals>.", 1)[-1]

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A method: the instance is bound as the first argument (not a traced tensor); the tensors it holds as
        attributes are its state, which the method may read without `allow_implicit`."""
        return self if obj is None else functools.partial(self.__call__, obj)

    def _is_method_of(self, args: tuple) -> bool:
        """Whether the call is this function as a method of its first argument's class (see `__get__`)."""
        return bool(args) and type(args[0]).__dict__.get(getattr(self.fn, "__name__", "")) is self

    @staticmethod
    def _state_tensors(obj: Any) -> list[Tensor]:
        """The tensors an instance holds as attributes (directly, or in lists, tuples and dicts), each once, in order."""
        found: dict[int, Tensor] = {}
        stack = list(reversed(getattr(obj, "__dict__", {}).values()))
        while stack:
            v = stack.pop()
            if isinstance(v, Tensor) and not hasattr(v, "shards"):
                found.setdefault(id(v), v)
            elif isinstance(v, (list, tuple)):
                stack.extend(reversed(v))
            elif isinstance(v, dict):
                stack.extend(reversed(v.values()))
        return list(found.values())

    def _state_of(self, args: tuple, tensors: list[Tensor]) -> list[Tensor]:
        """A method's state passed as arguments after the explicit ones: the instance's tensors that are not views of
        another tensor (a view reads its root's value, and a write through it writes the root) nor explicit arguments."""
        if not self._is_method_of(args):
            return []
        given = {id(t) for t in tensors}
        return [t for t in self._state_tensors(args[0]) if t._root is None and id(t) not in given]

    def _state_buffers(self, args: tuple) -> set[UOp]:
        """The buffers a method's instance holds (views of its state read them directly: not implicit inputs)."""
        if not self._is_method_of(args):
            return set()
        return {n for v in self._state_tensors(args[0]) for n in v.uop.toposort() if n.op is Ops.BUFFER}

    def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
        # over several devices (a sharded argument, or a body that shards): the function runs as written, its
        # operations building the per-device graphs and their gradients directly
        if any(isinstance(a, ShardedTensor) for a in (*args, *kwargs.values())):
            return self.fn(*args, **kwargs)
        names = list(kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        # a method's state is passed as arguments after the explicit ones: its current values are read at each call,
        # and what the method writes to it is written back like a written argument
        n_explicit = len(tensors)
        tensors += self._state_of(args, tensors)
        signature = (tuple((t.shape, t.dtype, t.device) for t in tensors), tuple(names), n_explicit,
                     tuple(None if isinstance(a, Tensor) else a for a in (*args, *kwargs.values())))
        trace = self.traces.get(signature)
        if trace is _SHARDS:
            return self.fn(*args, **kwargs)
        lifted = [ref() for ref in trace[3]] if trace is not None else []
        if trace is None or any(t is None or t.shape != shape for t, shape in zip(lifted, trace[4])):
            try:
                trace = self.traces[signature] = self._trace(args, kwargs, tensors, n_explicit)
            except _Sharded:
                self.traces[signature] = _SHARDS
                return self.fn(*args, **kwargs)
            lifted = [ref() for ref in trace[3]]
        values, is_tuple, written = trace[:3]
        outs = UOp.call_with_outputs(values, *(t.uop for t in tensors), *(t.uop for t in lifted), grad_fxn=self.grad_fxn,
                                     name=self.name, precompile=self.precompile, precompile_backward=self.precompile_backward)
        device = tensors[0].device if tensors else None
        rets = tuple(Tensor(o, device=device) for o in outs[:len(outs) - len(written)])
        for i, o in zip(written, outs[len(outs) - len(written):]):
            tensors[i].assign(Tensor(o, device=tensors[i].device))
        return rets if is_tuple else rets[0]  # type: ignore[return-value]

    def _trace(self, args: tuple, kwargs: dict, tensors: list[Tensor], n_explicit: int) -> tuple:
        params = [Tensor(UOp.param(i, t.dtype, t.shape, t.device), device=t.device) for i, t in enumerate(tensors[:n_explicit])]
        it = iter(params)
        p_args = [next(it) if isinstance(a, Tensor) else a for a in args]
        p_kwargs = {k: next(it) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        # the state tensors themselves stand for their PARAMs while the body runs (the method reaches them through
        # its instance), and get their own values back after
        state = tensors[n_explicit:]
        saved = [(t.uop, t._graph, t._borrowed) for t in state]
        for i, t in enumerate(state, n_explicit):
            t.uop, t._graph, t._borrowed = UOp.param(i, t.dtype, t.shape, t.device), None, False
        params += state
        initial = [p.uop for p in params]
        before = {id(t): (t, t.uop) for t in list(all_tensors)}
        was_pending = set(map(id, pending))
        try:
            ret = self.fn(*p_args, **p_kwargs)
            # the values returned now: a view of the state is rebound to the state's own value below
            ret_values = [r.uop if isinstance(r, Tensor) and not hasattr(r, "shards") else None for r in (ret if isinstance(ret, tuple) else (ret,))]
        finally:
            try:  # the state and its views are written back as outputs: not writes to undo
                own = {id(v) for t in state for v in (t, *(t._views or ()))}
                _undo_state_writes({k: v for k, v in before.items() if k not in own}, was_pending, set(initial) | {p.uop for p in params}, self.name)
            finally:
                final = [p.uop for p in params]  # the new values: the state's are taken before it gets its own back
                written = tuple(i for i, (u, u0) in enumerate(zip(final, initial)) if u is not u0)
                for p in params:  # a placeholder's new value is an output of the call, not a write to run
                    pending.pop(p, None)
                for t, (uop, graph, borrowed) in zip(state, saved):
                    t.uop, t._graph, t._borrowed = uop, graph, borrowed
                    if t._views:
                        rebind_views(t)
        is_tuple = isinstance(ret, tuple)
        rets = ret if is_tuple else (ret,)
        if any(isinstance(r, ShardedTensor) for r in rets):
            raise _Sharded
        if not rets or not all(isinstance(r, Tensor) for r in rets):
            raise FunctionError(f"function {self.name} must return a Tensor or a tuple of Tensors, got {type(ret).__name__}")
        values = tuple(ret_values) + tuple(final[i] for i in written)
        placeholders = set(initial) | set(final)
        # closed-over values not computed yet (a tensor with a pending write, a contiguous() not realized) are inputs
        # computed before the call, as tinygrad takes them; only buffers read as they are count as implicit
        values, pending_inputs = _lift_pending(values, len(tensors), placeholders)
        if not self.allow_implicit:
            held = self._state_buffers(args)
            implicit = sorted({n for n in UOp.sink(*values).toposort() if n.op is Ops.BUFFER and not n.is_unbound and n not in held},
                              key=lambda b: b.arg.slot)
            if implicit:
                listed = "; ".join(f"{i}: dtype={b.dtype}, size={b.arg.size}, device={b.arg.device}" for i, b in enumerate(implicit))
                raise FunctionError(f"function {self.name} has {len(implicit)} implicit buffer(s), but allow_implicit=False: {listed}")
        values, lifted = _lift_implicit(values, len(tensors) + len(pending_inputs), placeholders)
        lifted = pending_inputs + lifted
        return values, is_tuple, written, tuple(weakref.ref(t) for t in lifted), tuple(t.shape for t in lifted)


def _undo_state_writes(before: dict[int, tuple[Tensor, UOp]], was_pending: set[int], params: set[UOp], name: str) -> None:
    """A traced body that wrote a tensor it was not given (an instance's state, a closed-over tensor): put that tensor
    back as it was and raise FunctionError. Left in place, a write of the arguments' values would hold the trace's
    placeholders and fail at the next realize, and any other would happen once, at the trace, and never on later
    calls; pass such state as an argument (its writes become outputs of the call)."""
    changed = []
    for t, old in before.values():
        # a placeholder of an enclosing trace (its value holds PARAMs) is that trace's argument, not state
        if t.uop is old or any(n.op is Ops.PARAM for n in old.toposort()):
            continue
        # a write (a new pending version), or any new value holding the trace's placeholders
        if (id(t) not in was_pending and t in pending) or any(n.op is Ops.PARAM and n in params for n in t.uop.toposort()):
            changed.append(t)
            t.uop = old
            if id(t) not in was_pending:
                pending.pop(t, None)
            if t._views:
                rebind_views(t)
    if changed:
        listed = "; ".join(f"shape={t.shape}, dtype={t.dtype}" for t in changed)
        raise FunctionError(f"function {name} wrote {len(changed)} tensor(s) it was not given ({listed}): writes inside a "
                            "function go to its arguments; pass the state as an argument")


def _lift_pending(values: tuple[UOp, ...], n_args: int, params: set[UOp]) -> tuple[tuple[UOp, ...], list[Tensor]]:
    """The live tensors the traced body reads whose value is still to be computed from buffers (no PARAM in it, not a
    plain view of a buffer) become extra arguments of the call: every call passes their current value."""
    nodes = set(UOp.sink(*values).toposort())
    found: dict[UOp, Tensor] = {}
    for t in list(all_tensors):
        u = t.uop
        if u in nodes and u not in params and u not in found and ((st := storage_of(u)) is None or st.op is not Ops.BUFFER):
            graph = u.toposort(enter_calls=False)  # (a call's body has PARAMs of its own: they are no placeholders)
            if any(n.op is Ops.BUFFER for n in graph) and not any(n.op is Ops.PARAM or n in params for n in graph):
                found[u] = t
    return _lift(values, n_args, found)


def _lift_implicit(values: tuple[UOp, ...], n_args: int, params: set[UOp]) -> tuple[tuple[UOp, ...], list[Tensor]]:
    """The floating-point tensors in a buffer that the traced body reads without being given them (a closed-over
    weight, an instance's state) become extra arguments of the call: the body reads a PARAM in their place and every
    call passes their current value, so gradients reach them and a new value of theirs is seen without tracing again."""
    nodes = UOp.sink(*values).toposort()
    found = {t.uop: t for t in list(all_tensors) if t.uop in nodes and t.uop not in params and dtypes.is_float(t.dtype)
             and t.requires_grad is not False and (s := storage_of(t.uop)) is not None and s.op is Ops.BUFFER}
    return _lift(values, n_args, found)


def _lift(values: tuple[UOp, ...], n_args: int, found: dict[UOp, Tensor]) -> tuple[tuple[UOp, ...], list[Tensor]]:
    """`values` reading a PARAM (slots from `n_args` on) in place of each found tensor's value, and those tensors in
    slot order. A value read through another found one (a reshape of a closed-over weight) is reached through that one."""
    inner = {n for u in found for n in u.toposort() if n is not u}
    lifted = [t for u, t in found.items() if u not in inner]
    if not lifted:
        return values, []
    stand_ins = {t.uop: UOp.param(n_args + i, t.dtype, t.shape, t.device) for i, t in enumerate(lifted)}
    return UOp.sink(*values).substitute(stand_ins).src, lifted


def function(fn: Callable[..., ReturnType] | None = None, *, precompile: bool = False, precompile_backward: bool = False,
             allow_implicit: bool = False, grad_fxn: Callable | None = None) -> Any:
    """Decorate a function of Tensors: `@function` or `@function(precompile=True, allow_implicit=True)`."""
    if fn is None:
        return lambda f: _Function(f, precompile, precompile_backward, allow_implicit, grad_fxn)
    return _Function(fn, precompile, precompile_backward, allow_implicit, grad_fxn)
