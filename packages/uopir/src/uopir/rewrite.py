"""Pattern rewriting: `UPat` patterns, `PatternMatcher` rule tables and `graph_rewrite`.

This module never imports the UOp class: it only reads node fields (op, dtype, src, arg) and rebuilds nodes through
`node.replace(...)`, so the UOp module can use it without an import cycle.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from uopir.dtypes import DType
from uopir.errors import RewriteError
from uopir.ops import GroupOp, Ops

if TYPE_CHECKING:
    from uopir.uop import UOp


_ANY = object()  # sentinel: the arg is not constrained


class UPat:
    """A pattern over UOps.

    op: an Op or a collection of Ops (None: any op); dtype: a DType or collection (matches the dtype or its scalar);
    src: None (any srcs), a tuple (positional), a list (the srcs in any order), or a single UPat (every src matches it);
    arg: the required arg (omit for any); name: binds the matched node for the rule function; allow_any_len: a tuple
    src only constrains the first srcs; custom_early_reject: ops that must be among the node's srcs for a match.
    """

    __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "early_reject", "_srcs", "_src_kind", "_alternatives")

    def __init__(self, op: Ops | Iterable[Ops] | None = None, dtype: DType | Iterable[DType] | None = None,
                 src: UPat | tuple[UPat, ...] | list[UPat] | None = None, arg: Any = _ANY, name: str | None = None,
                 allow_any_len: bool = False, custom_early_reject: set[Ops] | None = None):
        self.op: frozenset[Ops] | None = None if op is None else frozenset((op,) if isinstance(op, Ops) else op)
        self.dtype: frozenset[DType] | None = None if dtype is None else frozenset((dtype,) if isinstance(dtype, DType) else dtype)
        self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
        self.src = src
        self._alternatives: tuple[UPat, ...] | None = None
        # _srcs: the alternative src tuples to try (a list src means every permutation)
        if src is None:
            self._src_kind, self._srcs = "any", ()
        elif isinstance(src, UPat):
            self._src_kind, self._srcs = "all", (src,)
        elif isinstance(src, list):
            self._src_kind = "perm"
            # identical orderings are tried once: (x, x) has one permutation worth checking
            seen: dict[tuple[int, ...], tuple[UPat, ...]] = {}
            for perm in itertools.permutations(src):
                seen.setdefault(tuple(id(p) for p in perm), tuple(perm))
            self._srcs = tuple(seen.values())
        else:
            self._src_kind, self._srcs = "tuple", (tuple(src),)
        if custom_early_reject is not None:
            self.early_reject = frozenset(custom_early_reject)
        elif self._src_kind in ("tuple", "perm", "all"):
            # a src pattern with exactly one op must find that op among the srcs: checked before any matching
            # (for an all-srcs pattern this also means a node without srcs never matches)
            pats = self._srcs if self._src_kind == "all" else self._srcs[0]
            self.early_reject = frozenset(next(iter(p.op)) for p in pats if p.op is not None and len(p.op) == 1)
        else:
            self.early_reject = frozenset()

    # ---- constructors ----
    @staticmethod
    def any(*pats: UPat) -> UPat:
        """A pattern that matches when any of `pats` matches."""
        ret = UPat()
        ret._alternatives = pats
        ret.early_reject = frozenset.intersection(*(p.early_reject for p in pats))
        ret.op = None if any(p.op is None for p in pats) else frozenset().union(*(p.op for p in pats))
        return ret

    @staticmethod
    def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        """Any node, bound to `name`."""
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        """A CONST node, bound to `name`."""
        return UPat(Ops.CONST, dtype=dtype, name=name)

    @staticmethod
    def const(dtype: DType | Iterable[DType] | None, value: Any) -> UPat:
        """A CONST with the given value."""
        return UPat(Ops.CONST, dtype=dtype, arg=value)

    def named(self, name: str) -> UPat:
        """A copy of this pattern that binds `name`."""
        ret = UPat(self.op, self.dtype, self.src, self.arg, name, self.allow_any_len, set(self.early_reject))
        ret._alternatives = self._alternatives
        return ret

    # ---- builders mirroring UOp's, for readable rule tables ----
    def alu(self, op: Ops, *src: UPat) -> UPat:
        """`op` applied to this pattern and `src` (any order when `op` is commutative)."""
        srcs = [self, *src]
        return UPat(op, src=srcs if op in GroupOp.Commutative else tuple(srcs))

    def cast(self, dtype: DType | Iterable[DType] | None = None, name: str | None = None) -> UPat:
        """A CAST of this pattern."""
        return UPat(Ops.CAST, dtype, (self,), name=name)

    def where(self, a: UPat, b: UPat) -> UPat:
        """WHERE(self, a, b)."""
        return UPat(Ops.WHERE, src=(self, a, b))

    def lt(self, other: UPat) -> UPat:
        """CMPLT(self, other)."""
        return self.alu(Ops.CMPLT, other)

    def ne(self, other: UPat) -> UPat:
        """CMPNE(self, other)."""
        return self.alu(Ops.CMPNE, other)

    def eq(self, other: UPat) -> UPat:
        """CMPEQ(self, other)."""
        return self.alu(Ops.CMPEQ, other)

    def maximum(self, other: UPat) -> UPat:
        """MAX(self, other)."""
        return self.alu(Ops.MAX, other)

    def __add__(self, other: UPat) -> UPat:
        return self.alu(Ops.ADD, other)

    def __mul__(self, other: UPat) -> UPat:
        return self.alu(Ops.MUL, other)

    def __floordiv__(self, other: UPat) -> UPat:
        return self.alu(Ops.FLOORDIV, other)

    def __mod__(self, other: UPat) -> UPat:
        return self.alu(Ops.FLOORMOD, other)

    def __and__(self, other: UPat) -> UPat:
        return self.alu(Ops.AND, other)

    def __or__(self, other: UPat) -> UPat:
        return self.alu(Ops.OR, other)

    def __xor__(self, other: UPat) -> UPat:
        return self.alu(Ops.XOR, other)

    def __repr__(self) -> str:
        ops = "None" if self.op is None else "{" + ", ".join(sorted(o.name for o in self.op)) + "}"
        parts = [ops] + ([f"name={self.name!r}"] if self.name else []) + ([f"arg={self.arg!r}"] if self.arg is not _ANY else [])
        if self.src is not None:
            parts.append(f"src={self.src!r}")
        return f"UPat({', '.join(parts)})"

    # ---- matching ----
    def match(self, uop: UOp, store: dict[str, Any]) -> list[dict[str, Any]]:
        """Every binding of this pattern's names that matches `uop`, extending `store` (empty: no match)."""
        if self._alternatives is not None:
            out: list[dict[str, Any]] = []
            for alt in self._alternatives:
                for m in alt.match(uop, store):
                    if self.name is not None:
                        if self.name in m and m[self.name] is not uop:
                            continue
                        m = {**m, self.name: uop}
                    out.append(m)
            return out
        if self.op is not None and uop.op not in self.op:
            return []
        if self.dtype is not None and uop.dtype not in self.dtype and uop.dtype.scalar() not in self.dtype:
            return []
        if self.arg is not _ANY and self.arg != uop.arg:
            return []
        if self.name is not None:
            bound = store.get(self.name)
            if bound is not None:
                if bound is not uop:
                    return []
            else:
                store = {**store, self.name: uop}
        kind = self._src_kind
        if kind == "any":
            return [store]
        src = uop.src
        if kind == "all":
            stores = [store]
            pat = self._srcs[0]
            for s in src:
                stores = [m for st in stores for m in pat.match(s, st)]
                if not stores:
                    return []
            return stores
        res: list[dict[str, Any]] = []
        for pats in self._srcs:
            if len(pats) != len(src) and not (self.allow_any_len and len(src) >= len(pats)):
                continue
            stores = [store]
            for p, s in zip(pats, src):
                stores = [m for st in stores for m in p.match(s, st)]
                if not stores:
                    break
            res.extend(stores)
        return res


Rule = tuple[UPat, Callable[..., Any]]


class PatternMatcher:
    """A list of (UPat, function) rules, indexed by op so only rules that can match a node are ever tried.

    A rule function receives the pattern's named nodes as keyword arguments (plus `ctx` if it declares it) and returns
    the replacement node, or None for "no match". Matchers combine with `+` (the left rules are tried first).
    """

    def __init__(self, rules: Sequence[Rule]):
        self.patterns: list[Rule] = list(rules)
        # op -> [(pattern, fn, early_reject, wants_ctx)], in rule order
        self.pdict: dict[Ops, list[tuple[UPat, Callable[..., Any], frozenset[Ops], bool]]] = {}
        for pat, fn in self.patterns:
            wants_ctx = "ctx" in inspect.signature(fn).parameters
            entry = (pat, fn, pat.early_reject, wants_ctx)
            for op in pat.op if pat.op is not None else Ops:
                self.pdict.setdefault(op, []).append(entry)

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.patterns + other.patterns)

    def __len__(self) -> int:
        return len(self.patterns)

    def rewrite(self, uop: UOp, ctx: Any = None) -> Any:
        """The first non-None result of a matching rule on `uop` (not its srcs), or None."""
        rules = self.pdict.get(uop.op)
        if not rules:
            return None
        src_ops: frozenset[Ops] | None = None
        for pat, fn, early_reject, wants_ctx in rules:
            if early_reject:
                if src_ops is None:
                    src_ops = frozenset(s.op for s in uop.src)
                if not early_reject <= src_ops:
                    continue
            for match in pat.match(uop, {}):
                try:
                    ret = fn(ctx=ctx, **match) if wants_ctx else fn(**match)
                except RewriteError:
                    raise
                except Exception as e:
                    raise RewriteError(f"rule for {pat!r} failed on {uop.op!r} ({type(e).__name__}: {e})") from e
                if ret is not None and ret is not uop:
                    return ret
        return None


def _src_of(node: UOp, enter_calls: bool) -> tuple[UOp, ...]:
    # a CALL's body (src[0]) is its own scope: only visited when asked to enter calls
    return node.src if enter_calls or node.op is not Ops.CALL else node.src[1:]


def _rebuild(node: UOp, replace: dict[UOp, UOp], enter_calls: bool) -> UOp:
    src = node.src
    if not src:
        return node
    # a src with no entry is a node whose rewrite is in progress (it occurs inside its own replacement): kept as is
    if enter_calls or node.op is not Ops.CALL:
        new_src = tuple([replace.get(s, s) for s in src])
    else:
        new_src = (src[0], *[replace.get(s, s) for s in src[1:]])
    for a, b in zip(src, new_src):
        if a is not b:
            return node.replace(src=new_src)
    return node


_MAX_REWRITES = 1_000_000  # chained rewrites of a single node before we call it a non-terminating rule set


def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False, walk: bool = False,
                  enter_calls: bool = False, name: str | None = None) -> UOp:
    """Rewrite the graph under `sink` with `pm` until no rule applies; returns the new root.

    Top-down (default): a node's srcs are rewritten first, then the rebuilt node is rewritten, and any replacement is
    itself fully rewritten. bottom_up=True rewrites each node before looking at its srcs. walk=True applies rules once
    per node and does not rewrite their results again. enter_calls=True also rewrites the bodies of CALLs.
    A node that occurs inside its own replacement (x -> x+1) is left as is there, so such rules terminate.
    Iterative (an explicit stack), so graph depth is not limited by Python's recursion limit; memoized per node.
    """
    replace: dict[UOp, UOp] = {}
    in_progress: set[UOp] = set()
    # stack entries: (node, stage, pending): stage 0 = first visit, 1 = srcs done, 2 = waiting for a replacement
    stack: list[tuple[UOp, int, Any]] = [(sink, 0, None)]
    rewrite = pm.rewrite
    while stack:
        node, stage, pending = stack.pop()
        if stage == 0:
            if node in replace or node in in_progress:
                continue
            cur = node
            if bottom_up:
                for _ in range(_MAX_REWRITES):
                    if (r := rewrite(cur, ctx)) is None:
                        break
                    cur = r
                    if walk or cur in replace:
                        break
                else:
                    raise RewriteError(f"graph_rewrite{' ' + name if name else ''} did not converge on {node.op!r}")
                if cur is not node:
                    if cur in replace:
                        replace[node] = replace[cur]
                        continue
                    in_progress.add(node)
            stack.append((node, 1, cur))
            for s in reversed(_src_of(cur, enter_calls)):
                if s not in replace:
                    stack.append((s, 0, None))
        elif stage == 1:
            new = _rebuild(pending, replace, enter_calls)
            if bottom_up:
                if new is pending or walk:
                    replace[node] = new
                    replace.setdefault(new, new)
                    in_progress.discard(node)
                else:  # srcs changed: the rebuilt node may match rules now
                    in_progress.add(node)
                    stack.append((node, 2, new))
                    stack.append((new, 0, None))
                continue
            r = rewrite(new, ctx)
            if r is None:
                replace[node] = new
                replace.setdefault(new, new)
            elif walk:
                replace[node] = r
            elif r in replace:
                replace[node] = replace[r]
            else:
                in_progress.add(node)
                stack.append((node, 2, r))
                stack.append((r, 0, None))
        else:
            replace[node] = replace.get(pending, pending)
            in_progress.discard(node)
    return replace[sink]


def rewrite_fixed_point(node: UOp, pm: PatternMatcher, ctx: Any = None) -> UOp:
    """Apply `pm` to `node` itself (not its srcs) until no rule matches."""
    for _ in range(_MAX_REWRITES):
        if (r := pm.rewrite(node, ctx)) is None:
            return node
        node = r
    raise RewriteError(f"rewriting {node.op!r} did not converge")


def iter_matches(pat: UPat, nodes: Iterable[UOp]) -> Iterator[tuple[UOp, dict[str, Any]]]:
    """(node, bindings) for every node in `nodes` that `pat` matches."""
    for n in nodes:
        for m in pat.match(n, {}):
            yield n, m
