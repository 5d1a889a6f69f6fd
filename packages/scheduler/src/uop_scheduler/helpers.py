"""Small utilities of tinygrad's public `helpers` that user programs and scripts import: `getenv`, `OSX`, `temp`,
`all_same`, `dedup`, `prod`, `mv_address`, and `GlobalCounters` (what the runtime ran since its `reset()`)."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import tempfile
from collections.abc import Iterable
from typing import Any, TypeVar

from hcq_runtime import counters
from uopir import prod

T = TypeVar("T")

OSX = platform.system() == "Darwin"


@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
    """The environment variable `key` converted to the type of `default` (read once per key and default)."""
    return type(default)(os.environ.get(key, default))


def temp(name: str, append_user: bool = False) -> str:
    """A path named `name` in the system's temporary directory (with the user's name appended when asked)."""
    if append_user:
        name = f"{name}.{os.environ.get('USER', 'user')}"
    return os.path.join(tempfile.gettempdir(), name)


def dedup(items: Iterable[T]) -> list[T]:
    """The items without repeats, each at its first position."""
    return list(dict.fromkeys(items))


def all_same(items: Iterable[T]) -> bool:
    """True when every item equals the first (and for no items)."""
    items = list(items)
    return all(x == items[0] for x in items)


def mv_address(mv: memoryview) -> int:
    """The address of a writable memoryview's first byte (for `Tensor.from_blob`)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(mv))


class _GlobalCounters:
    """tinygrad's `GlobalCounters`, read from `hcq_runtime.counters`: kernels launched (`kernel_count`), copies, and
    seconds spent in them (`time_sum_s`), their estimated ops and buffer bytes (`global_ops`, `global_mem`) since
    `reset()`, and the device memory in use (`mem_used`)."""

    @property
    def kernel_count(self) -> int:
        return counters.kernels

    @property
    def copy_count(self) -> int:
        return counters.copies

    @property
    def time_sum_s(self) -> float:
        return counters.seconds

    @property
    def global_ops(self) -> int:
        """Arithmetic ops of the kernels run since `reset()` (estimated per kernel, TinyJit replays included)."""
        return counters.ops

    @property
    def global_mem(self) -> int:
        """Bytes of the buffers those kernels touched (each buffer once per kernel)."""
        return counters.mem

    @property
    def mem_used(self) -> int:
        """Bytes of device memory buffers hold now (not reset by `reset()`)."""
        return counters.mem_used

    def reset(self) -> None:
        counters.reset()


GlobalCounters = _GlobalCounters()

__all__ = ["OSX", "GlobalCounters", "all_same", "dedup", "getenv", "prod", "temp"]
