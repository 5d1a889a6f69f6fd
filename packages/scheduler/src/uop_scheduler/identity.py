"""`IdentitySet`: a set of objects held weakly and compared by identity. A `weakref.WeakSet` compares its members
with `==`, which `Tensor` overloads elementwise, so `discard` or `in` of a tensor that is in the set raised."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class _KeyedRef(weakref.ref):
    """A weak reference that remembers the id it was filed under (its callback runs after the object is gone)."""

    __slots__ = ("key",)


class IdentitySet(Generic[T]):
    __slots__ = ("_refs", "_forget", "__weakref__")

    def __init__(self, items: Iterable[T] = ()):
        self._refs: dict[int, weakref.ref] = {}
        refs = self._refs

        # one callback for every member (a closure per member cost about a third of adding one)
        def forget(ref: _KeyedRef, refs: dict[int, weakref.ref] = refs) -> None:
            if refs.get(ref.key) is ref:  # not a newer object that took the same id
                del refs[ref.key]

        self._forget = forget
        for x in items:
            self.add(x)

    def add(self, x: T) -> None:
        key, refs = id(x), self._refs
        if (old := refs.get(key)) is not None and old() is x:
            return
        ref = _KeyedRef(x, self._forget)
        ref.key = key
        refs[key] = ref

    def discard(self, x: T) -> None:
        if (ref := self._refs.get(id(x))) is not None and ref() is x:
            del self._refs[id(x)]

    def __contains__(self, x: object) -> bool:
        return (ref := self._refs.get(id(x))) is not None and ref() is x

    def __iter__(self) -> Iterator[T]:
        for ref in list(self._refs.values()):
            if (x := ref()) is not None:
                yield x

    def __len__(self) -> int:
        # every entry is a live member: a member's weak reference removes its entry as the member dies. (`list(s)` asks
        # the length first: counting by iteration made every list of all the live tensors walk them twice)
        return len(self._refs)

    def __bool__(self) -> bool:
        return bool(self._refs)  # as __len__: every entry is a live member (iterating copied them all first)
