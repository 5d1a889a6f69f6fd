"""`ruff check` over the whole workspace is part of the test command."""

import shutil
import subprocess
import sys
from pathlib import Path

from workspace import ROOT


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff is not installed: it is in the dev dependency group, run `uv sync`"
    result = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
