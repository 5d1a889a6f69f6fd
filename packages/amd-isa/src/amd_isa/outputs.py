"""Files the `amd-isa` commands read and write: `-` is standard input / output, and a file is written atomically with
the mode a new file gets under the umask (a temporary file is made 0600, which would stay on the output)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def read_input(name: str) -> bytes:
    """The bytes of file `name`, or of standard input for `-`."""
    return sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()


def write_output(name: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to standard output for `-`; else to a temporary file beside `name`, renamed over it once complete,
    so a failure never leaves a half-written output."""
    if str(name) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    path = Path(name)
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def quiet_closed_stdout() -> None:
    """After a reader closed our standard output (`amd-isa ... | head`): send what is left to /dev/null, so neither
    the command nor Python's exit-time flush reports the broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def report_internal_error(err: BaseException) -> int:
    """A CLI's last resort for an exception that is a bug rather than bad input: `internal error: ...` on one line
    with what to report (the full traceback with DEBUG=1); the exit status 1."""
    if os.environ.get("DEBUG", "0") not in ("", "0"):
        import traceback  # noqa: PLC0415

        traceback.print_exception(err)
    print(f"internal error: {type(err).__name__}: {err} -- please report it with the command that caused it "
          "(DEBUG=1 prints the traceback)", file=sys.stderr)
    return 1
