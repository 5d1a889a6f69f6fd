"""`Submitter`: the run-time half of a linked batch as one native function, generated as C and compiled at link.

    int64_t submit(const uint64_t *v, const uint64_t *k, int64_t start, int64_t *detail)

`v` is the values vector of a run (the inputs table, the variables, one timeline base per device); `k` holds the
batch's link constants (host addresses of its command memory, of the rings, pointers and doorbells, the kgsl file
and context, the ioctl function). The function writes every run-time patch (`(v[i] + add) >> shift` as a 32- or
64-bit word), then performs each part's submit with the C its device emits (`QueueDevice.submit_code`): ring writes
and a doorbell store on AMD, an ioctl through a function pointer on QCOM. Since every address comes from `k`, the
source depends only on the batch's shape, and same-shaped batches share one compiled function (cached by source in
the process, and on disk by the host C compiler's cache).

It returns DONE, or stops early: PATCH_RANGE (`detail[0]` = the patch whose value does not fit 32 bits; nothing was
submitted), NO_ROOM (`detail[0]` = the part whose ring is full; earlier parts were submitted, the caller makes room
and calls again from that part), FAILED (`detail[0]` = the part, `detail[1]` = errno).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler import CCompiler
from ..cpu import load_shared_object
from .cmdbuf import Patch
from .errors import HCQError, PatchError

DONE, PATCH_RANGE, NO_ROOM, FAILED = 0, 1, 2, 3
_MASK64 = (1 << 64) - 1
_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)
_PRELUDE = """#include <stdint.h>
#include <errno.h>
#define DONE 0
#define PATCH_RANGE 1
#define NO_ROOM 2
#define FAILED 3
#define PUT32(base, offset, x) (*(volatile uint32_t *)(uintptr_t)((base) + (offset)) = (uint32_t)(x))
"""
_OPEN = """
int64_t submit(const uint64_t *v, const uint64_t *k, int64_t start, int64_t *detail) {
  uint64_t x;
"""


class SubmitCode:
    """The C of one submitter under construction: devices add the statements of their parts' submits.

    `const(value)` places a link constant in `k` and returns the C expression reading it; `stop(status)` is the
    statement that ends the call at the current part with `status` (NO_ROOM or FAILED); `keep(obj)` keeps host
    objects the code addresses (prebuilt packets, ioctl requests) alive as long as the submitter; `helper(name, source)`
    defines a C function the statements call (once, before `submit`)."""

    def __init__(self) -> None:
        self.consts: list[int] = []
        self.lines: list[str] = []
        self.refs: list[Any] = []
        self.helpers: dict[str, str] = {}
        self.part = 0

    def helper(self, name: str, source: str) -> None:
        self.helpers.setdefault(name, source)

    def const(self, value: int) -> str:
        self.consts.append(value & _MASK64)
        return f"k[{len(self.consts) - 1}]"

    def pointer(self, address: int, ctype: str) -> str:
        """A `volatile ctype *` expression for the host address `address` (a link constant)."""
        return f"((volatile {ctype} *)(uintptr_t){self.const(address)})"

    def stop(self, status: str) -> str:
        return f"{{ detail[0] = {self.part}; return {status}; }}"

    def keep(self, obj: Any) -> None:
        self.refs.append(obj)

    def emit(self, *lines: str) -> None:
        self.lines += [f"    {line}" for line in lines]


@dataclass(frozen=True)
class PartSpec:
    """One submit of a batch: `kind` commands of `device` at byte `offset` of `memory`, `nbytes` long."""

    device: Any
    kind: str
    memory: Any
    offset: int
    nbytes: int


@functools.cache
def _compiler() -> CCompiler:
    return CCompiler()


@functools.cache
def _compile(source: str) -> Any:
    """The `submit` function of `source` (compiled once per source; the library stays loaded with the cache)."""
    lib = load_shared_object(_compiler().compile(source))
    return _PROTOTYPE(ctypes.cast(lib.submit, ctypes.c_void_p).value), lib


class Submitter:
    """A linked batch's run-time patches and submits as one native call: `submitter(values)` (a uint64 vector).

    `patches` are (host base address, patch) pairs of every run-time word; `sources` maps a patch's value name to its
    index in the values vector."""

    def __init__(self, patches: Sequence[tuple[int, Patch]], parts: Sequence[PartSpec], sources: Mapping[str, int]):
        if unknown := sorted({p.what for _, p in patches} - sources.keys()):
            raise PatchError(f"no run-time source for {', '.join(map(repr, unknown))}: link the commands with every input and variable")
        self.patches, self.parts, self.sources = list(patches), list(parts), sources
        code = SubmitCode()
        code.lines.append("  if (start == 0) {")
        bases: dict[int, str] = {}
        for i, (base, patch) in enumerate(self.patches):
            if base not in bases:
                bases[base] = code.const(base)
            code.emit(*_patch_lines(i, bases[base], patch, sources[patch.what]))
        code.lines += ["    __atomic_thread_fence(__ATOMIC_SEQ_CST);", "  }"]
        for code.part, part in enumerate(self.parts):
            code.lines.append(f"  if (start <= {code.part}) {{  /* {type(part.device).__name__} {part.kind} */")
            part.device.submit_code(part.kind, part.memory, part.offset, part.nbytes, code)
            code.lines.append("  }")
        self.source = _PRELUDE + "".join(code.helpers.values()) + _OPEN + "\n".join(code.lines) + "\n  return DONE;\n}\n"
        self.fn, self._lib = _compile(self.source)
        self.consts = np.array(code.consts or [0], np.uint64)
        self.refs = code.refs
        self._detail = (ctypes.c_int64 * 2)()
        #: parts the last call submitted
        self.submitted = 0
        self._consts_address = self.consts.ctypes.data

    def __call__(self, values: np.ndarray) -> int:
        """Write the run-time patches from `values` and submit every part; return how many patches were written."""
        address, start = values.ctypes.data, 0
        self.submitted = 0
        while (status := self.fn(address, self._consts_address, start, self._detail)) != DONE:
            index, error = self._detail
            if status == PATCH_RANGE:
                raise PatchError(self._range_message(index, values))
            self.submitted = index
            part = self.parts[index]
            if status == NO_ROOM:
                part.device.make_room(part.kind)
                start = index
            elif status == FAILED:
                raise part.device.submit_error(part.kind, error)
            else:
                raise HCQError(f"the compiled submitter returned the unknown status {status}")
        self.submitted = len(self.parts)
        return len(self.patches)

    def _range_message(self, index: int, values: np.ndarray) -> str:
        patch = self.patches[index][1]
        value = ((int(values[self.sources[patch.what]]) + patch.sym.add) & _MASK64) >> patch.sym.shift
        return f"{patch.what!r} = {value:#x} does not fit the 32-bit command word at byte {patch.offset}"


def _patch_lines(index: int, base: str, patch: Patch, source: int) -> list[str]:
    sym = patch.sym
    value = f"v[{source}]" if not sym.add else f"(v[{source}] + {sym.add & _MASK64:#x}ull)"
    value = f"x = {value}{f' >> {sym.shift}' if sym.shift else ''};"
    if sym.width == 4:
        return [value, f"if (x >> 32) {{ detail[0] = {index}; return PATCH_RANGE; }}", f"PUT32({base}, {patch.offset}, x);"]
    return [value, f"PUT32({base}, {patch.offset}, x);", f"PUT32({base}, {patch.offset + 4}, x >> 32);"]
