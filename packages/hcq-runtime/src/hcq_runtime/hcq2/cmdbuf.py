"""`CommandBuffer`: encoded command words plus the patches that fill in values known later.

A command stream is encoded once. Words whose value is not known at encode time are `Sym`s: the encoder leaves
zeros and records a `Patch` (byte offset, width, kind, what). LINK patches (addresses of buffers and programs the
commands own, device state) are written once when the stream is linked; RUNTIME patches (input addresses read from
an inputs table, variable values, timeline values) are written before every submit. Patching is a handful of
`struct.pack_into` calls: no re-encoding, no lookups beyond the values dict.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from .errors import PatchError


class PatchKind(Enum):
    """When a patch is written: once at link time, or on every run."""

    LINK = "link"
    RUNTIME = "runtime"


@dataclass(frozen=True)
class Sym:
    """A value known later: `(values[what] + add) >> shift`, written as a `width`-byte little-endian word.

    `what` names the value (`"prog:vector_add"`, `"buf:out"`, `"input:0"`, `"var:n"`, `"timeline"`); `kind` says
    whether it is a link-time or a run-time value."""

    what: str
    kind: PatchKind = PatchKind.RUNTIME
    width: int = 4
    shift: int = 0
    add: int = 0

    def wide(self) -> Sym:
        """The same value as a 64-bit word (two consecutive dwords)."""
        return replace(self, width=8)

    def __add__(self, other: int) -> Sym:
        return replace(self, add=self.add + other)

    def __rshift__(self, bits: int) -> Sym:
        return replace(self, shift=self.shift + bits)


def link(what: str, width: int = 4) -> Sym:
    """A link-time value."""
    return Sym(what, PatchKind.LINK, width)


def runtime(what: str, width: int = 4) -> Sym:
    """A run-time value."""
    return Sym(what, PatchKind.RUNTIME, width)


Word = int | Sym


def qword(value: int | Sym) -> list[Word]:
    """A 64-bit value as command words: two dwords (lo, hi), or one 8-byte symbolic word."""
    if isinstance(value, Sym):
        return [value.wide()]
    return [value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF]


def dwords(words: Iterable[Word]) -> int:
    """How many dwords `words` occupy."""
    return sum(w.width // 4 if isinstance(w, Sym) else 1 for w in words)


@dataclass(frozen=True)
class Patch:
    """One hole in a command buffer: `sym`'s value goes at byte `offset`."""

    offset: int
    sym: Sym

    @property
    def kind(self) -> PatchKind:
        return self.sym.kind

    @property
    def what(self) -> str:
        return self.sym.what


_FORMATS = {4: "<I", 8: "<Q"}


class CommandBuffer:
    """Command words as bytes, with the patches that complete them."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.patches: list[Patch] = []
        #: patches written since creation (the benchmark reports it per call)
        self.patches_written = 0

    def emit(self, words: Iterable[Word]) -> None:
        """Append command words; `Sym` words become zeros plus a patch."""
        for word in words:
            if isinstance(word, Sym):
                if word.width not in _FORMATS:
                    raise PatchError(f"a patch is 4 or 8 bytes wide, not {word.width}")
                self.patches.append(Patch(len(self.data), word))
                self.data += bytes(word.width)
            else:
                if not 0 <= word <= 0xFFFFFFFF:
                    raise PatchError(f"command word {word:#x} does not fit 32 bits")
                self.data += struct.pack("<I", word)

    def extend(self, other: CommandBuffer) -> None:
        """Append another command buffer with its patches."""
        base = len(self.data)
        self.data += other.data
        self.patches += [Patch(base + p.offset, p.sym) for p in other.patches]

    def __len__(self) -> int:
        return len(self.data)

    @property
    def words(self) -> list[int]:
        """The current dwords (patched or not)."""
        return list(struct.unpack(f"<{len(self.data) // 4}I", self.data))

    def names(self, kind: PatchKind) -> set[str]:
        """The names of the values patches of `kind` need."""
        return {p.what for p in self.patches if p.kind is kind}

    def patch(self, values: Mapping[str, int], kind: PatchKind = PatchKind.RUNTIME, into: Any = None) -> int:
        """Write every patch of `kind` from `values` (name -> value); return how many were written.

        `into` is where the words live when not in `self.data`: a writable buffer holding a copy of them (the GPU
        memory a bound command buffer was uploaded to). Missing names are an error: a command buffer with a hole left
        in it would send the GPU to address 0."""
        target = self.data if into is None else into
        count = 0
        if missing := self.names(kind) - values.keys():
            raise PatchError(f"no {kind.value} value for {', '.join(map(repr, sorted(missing)))}; pass every patched name in the values")
        for p in self.patches:
            if p.kind is not kind:
                continue
            value = (values[p.what] + p.sym.add) >> p.sym.shift
            if not 0 <= value < 1 << (8 * p.sym.width):
                raise PatchError(f"{p.what!r} = {value:#x} does not fit the {p.sym.width}-byte word at byte {p.offset}")
            struct.pack_into(_FORMATS[p.sym.width], target, p.offset, value)
            count += 1
        self.patches_written += count
        return count

    def link(self, values: Mapping[str, int], into: Any = None) -> int:
        """Write the link-time patches (once per linked stream)."""
        return self.patch(values, PatchKind.LINK, into)
