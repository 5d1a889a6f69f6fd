"""Facts about the workspace shared by the root tests: members, distributions, import names."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"


def members() -> dict[str, dict]:
    """Folder name -> parsed pyproject of every workspace member."""
    return {p.parent.name: tomllib.loads(p.read_text()) for p in sorted(PACKAGES.glob("*/pyproject.toml"))}


def import_name(pyproject: dict) -> str:
    backend = pyproject.get("tool", {}).get("uv", {}).get("build-backend", {})
    return backend.get("module-name", pyproject["project"]["name"].replace("-", "_"))
