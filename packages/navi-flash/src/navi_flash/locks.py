"""Advisory lock files so that two tools never drive one card at the same time."""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from pathlib import Path

from .errors import DeviceLockedError, TransportError


class DeviceLock:
    """An exclusive, non-blocking `flock` on `<lock_dir>/navi-flash-<device>.lock`, released by `release()` or process exit."""

    def __init__(self, device: str, lock_dir: Path | str | None = None) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
        self.path = Path(lock_dir or tempfile.gettempdir()) / f"navi-flash-{safe}.lock"
        try:
            self.fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise TransportError(f"cannot open lock file {self.path}: {exc.strerror}; check permissions of {self.path.parent}") from exc
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            self.fd = None
            raise DeviceLockedError(f"{device} is in use by another process (lock {self.path}); `lsof {self.path}` shows which") from exc

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self.fd is not None

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
