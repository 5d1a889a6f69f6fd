"""`StringArray`: a long list of strings kept as one packed byte buffer (a GGUF vocabulary and its merges).

A 49k-token vocabulary and its 49k merges as Python lists are about 100k `str` objects, some 9 MB; as one UTF-8
buffer with an offset per string they take under 2 MB, and nothing is decoded until a string is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

# Strings are packed each followed by one NUL byte. No UTF-8 sequence spans an ASCII byte, so the packed buffer is valid
# UTF-8 exactly when every string is: one decode checks them all.
SEPARATOR = 0


def positions_within(lengths: np.ndarray) -> np.ndarray:
    """For spans of `lengths` laid end to end, each element's position inside its span (0, 1, ..., 0, 1, ...): with
    `np.repeat(starts, lengths)` it indexes every byte of every span in one gather."""
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


class StringArray(Sequence[str]):
    """An immutable sequence of strings packed into `blob` (UTF-8, each string followed by a NUL byte); string `i` is
    `blob[offsets[i] : offsets[i + 1] - 1]`. Compares equal to any sequence of the same strings."""

    __slots__ = ("blob", "offsets")

    def __init__(self, blob: bytes, offsets: np.ndarray):
        self.blob, self.offsets = blob, offsets

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> StringArray:
        """Pack `strings` (they must be `str`)."""
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum([len(b) + 1 for b in encoded], out=offsets[1:])
        return cls(b"".join(b + b"\0" for b in encoded), offsets)

    @classmethod
    def from_spans(cls, source: Any, starts: np.ndarray, lengths: np.ndarray) -> StringArray:
        """Pack the byte ranges [starts[i], starts[i] + lengths[i]) of `source` (a buffer), without checking the encoding."""
        lengths = np.asarray(lengths, np.int64)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths + 1, out=offsets[1:])
        src = np.frombuffer(source, np.uint8)
        packed = np.full(int(offsets[-1]), SEPARATOR, np.uint8)
        # one gather for every string's bytes: the destination index of each source byte, skipping the separators
        within = positions_within(lengths)
        packed[np.repeat(offsets[:-1], lengths) + within] = src[np.repeat(np.asarray(starts, np.int64), lengths) + within]
        return cls(packed.tobytes(), offsets)

    def invalid_utf8(self) -> int | None:
        """The index of the first string that is not valid UTF-8, or None."""
        try:
            self.blob.decode("utf-8")
        except UnicodeDecodeError as e:
            return int(np.searchsorted(self.offsets, e.start, side="right")) - 1
        return None

    def raw(self, i: int) -> bytes:
        """String `i` as its UTF-8 bytes."""
        return self.blob[self.offsets[i] : self.offsets[i + 1] - 1]

    def lengths(self) -> np.ndarray:
        """The byte length of every string."""
        return np.diff(self.offsets) - 1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"string index {i} out of range for {n} strings")
        return self.raw(i % n).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        text = self.blob.decode("utf-8", "surrogatepass")
        if text.isascii() or len(text) == len(self.blob):
            starts = self.offsets.tolist()
            return (text[a : b - 1] for a, b in zip(starts, starts[1:]))
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringArray):
            return self.blob == other.blob and np.array_equal(self.offsets, other.offsets)
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head = ", ".join(repr(self.raw(i).decode("utf-8", "replace")) for i in range(min(len(self), 4)))
        return f"StringArray([{head}{', ...' if len(self) > 4 else ''}], {len(self)} strings)"
