"""Locating the LLVM tools a test needs by release: a versioned name (`llvm-mc-15`), or the unversioned one only when its
--version says it is a release the test can use (a machine whose only llvm-mc is LLVM 14 must skip, not fail)."""

import re
import shutil
import subprocess


def llvm_release(path: str) -> int | None:
    """The major release of the LLVM tool at `path` (from its --version text), or None when it does not say."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"LLVM version (\d+)\.", proc.stdout + proc.stderr)
    return int(m.group(1)) if m else None


def find_llvm_tool(name: str, releases: tuple[int, ...]) -> tuple[str | None, str]:
    """(path, why-not) of LLVM tool `name` from one of `releases`, in that order of preference: `name-<release>`, else
    the unversioned `name` when its --version says it is one of them. The path is None when none is installed, and the
    second item then says what was found instead."""
    for release in releases:
        if (path := shutil.which(f"{name}-{release}")) is not None:
            return path, ""
    if (path := shutil.which(name)) is None:
        return None, f"no {name} is installed"
    release = llvm_release(path)
    if release in releases:
        return path, ""
    return None, f"{path} is from LLVM {release if release is not None else '(unknown release)'}"
