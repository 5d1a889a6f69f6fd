"""Small utilities of tinygrad's public `helpers` that user programs and scripts import: `getenv`, `OSX`, `temp`,
`all_same`, `prod`."""

from __future__ import annotations

import functools
import os
import platform
import tempfile
from collections.abc import Iterable
from typing import Any, TypeVar

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


def all_same(items: Iterable[T]) -> bool:
    """True when every item equals the first (and for no items)."""
    items = list(items)
    return all(x == items[0] for x in items)


__all__ = ["OSX", "all_same", "getenv", "prod", "temp"]
