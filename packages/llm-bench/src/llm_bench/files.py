"""Files that appear whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def written_atomically(dest: Path) -> Iterator[BinaryIO]:
    """A binary file to write `dest`'s contents into: it is a temporary file beside `dest` (its folder created), renamed
    to `dest` when the block ends normally and removed when the block raises (the error propagates), so a reader never
    sees a half-written `dest`. The file gets the permissions the umask gives a new file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it 0600; a new file gets what the umask leaves
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
