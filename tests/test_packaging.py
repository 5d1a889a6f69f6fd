"""Every wheel builds, installs alone into a fresh virtual environment, imports, and its console scripts answer --help."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from workspace import ROOT, import_name, members

WORKSPACE_DISTS = {p["project"]["name"] for p in members().values()}


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="session")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    run("uv", "build", "--all-packages", "--wheel", "--out-dir", out, cwd=ROOT)
    found = {}
    for wheel in out.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            name = next(line.split(":", 1)[1].strip() for line in zf.read(meta).decode().splitlines() if line.startswith("Name:"))
        found[name] = wheel
    return found


def install_alone(wheel: Path, wheel_dir: Path, venv: Path) -> Path:
    run("uv", "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    # workspace dependencies come from the freshly built wheels, third-party ones from the registry; uv's cache keys a
    # find-links wheel by its path, and pytest reuses temporary paths across runs, so workspace wheels are never cached
    refresh = [arg for dist in sorted(WORKSPACE_DISTS) for arg in ("--refresh-package", dist)]
    run("uv", "pip", "install", "--quiet", "--python", python, *refresh, "--find-links", wheel_dir, wheel)
    return python


def entry_points(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        if not names:
            return []
        text = zf.read(names[0]).decode()
    section, scripts = None, []
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "console_scripts" and "=" in line:
            scripts.append(line.split("=", 1)[0].strip())
    return scripts


INSTALLED = """
import json, re
from importlib import metadata
dists = {d.metadata["Name"].lower(): d for d in metadata.distributions()}
def closure(name, seen):
    if name in seen: return
    seen.add(name)
    for req in dists[name].requires or []:
        if "extra ==" in req: continue
        closure(re.split(r"[<>=!~;\\[ (]", req, maxsplit=1)[0].lower(), seen)
rich = set(); closure("rich", rich)
direct = [re.split(r"[<>=!~;\\[ (]", r, maxsplit=1)[0].lower() for r in dists["navi-flash"].requires or []]
print(json.dumps({"installed": sorted(dists), "rich_closure": sorted(rich), "direct": direct}))
"""


@pytest.mark.parametrize("folder", sorted(members()))
def test_wheel_installs_alone_and_imports(folder, wheels, tmp_path):
    pyproject = members()[folder]
    dist = pyproject["project"]["name"]
    assert dist in wheels, f"no wheel built for {dist}"
    python = install_alone(wheels[dist], next(iter(wheels.values())).parent, tmp_path / "venv")
    module = import_name(pyproject)
    assert run(python, "-c", f"import {module}; print({module}.__version__)").strip() == pyproject["project"]["version"]
    for script in entry_points(wheels[dist]):
        assert "usage:" in run(tmp_path / "venv" / "bin" / script, "--help")
    if dist == "navi-flash":
        facts = json.loads(run(python, "-c", INSTALLED))
        assert set(facts["direct"]) == {"pyusb", "rich"}
        assert set(facts["installed"]) == {"navi-flash", "pyusb"} | set(facts["rich_closure"])
        assert not set(facts["installed"]) & (WORKSPACE_DISTS - {"navi-flash"})


def _plain_pip() -> list[str] | None:
    """A `python -m pip` (>= 22.3, for --python) outside uv: the interpreter this venv was made from, else python3."""
    import shutil

    for python in (getattr(sys, "_base_executable", None), shutil.which("python3")):
        if not python:
            continue
        done = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True)
        version = done.stdout.split()[1] if done.returncode == 0 and len(done.stdout.split()) > 1 else ""
        if version and tuple(int(x) for x in version.split(".")[:2] if x.isdigit()) >= (22, 3):
            return [python, "-m", "pip"]
    return None


@pytest.fixture(scope="session")
def pip_installed(tmp_path_factory) -> dict[str, Path]:
    """The README's way from a checkout, with plain pip: `pip wheel --no-deps -w dist packages/*`, then for each
    package an empty venv and `pip install --find-links dist NAME` (run two at a time). Dist name -> its python."""
    import concurrent.futures

    pip = _plain_pip()
    if pip is None:
        pytest.skip("no pip >= 22.3 outside uv to run the README's install commands with")
    root = tmp_path_factory.mktemp("pip")
    dist = root / "dist"
    run(*pip, "wheel", "--quiet", "--no-deps", "-w", dist, *(ROOT / "packages" / folder for folder in sorted(members())))

    def install(name: str) -> Path:
        venv = root / name
        run(pip[0], "-m", "venv", "--without-pip", venv)
        run(*pip, "--python", venv / "bin" / "python", "install", "--quiet", "--find-links", dist, name)
        return venv / "bin" / "python"

    names = sorted(WORKSPACE_DISTS)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(install, names)))


@pytest.mark.parametrize("folder", sorted(members()))
def test_the_readme_install_from_a_checkout_works_with_plain_pip(folder, pip_installed):
    """(#25 item 1) `pip install packages/scheduler` failed (its uopir==0.1.0 is on no index): the documented way is
    wheels of every package into one folder, then `pip install --find-links` it; each package installs so into an empty
    venv and imports."""
    pyproject = members()[folder]
    python = pip_installed[pyproject["project"]["name"]]
    module = import_name(pyproject)
    assert run(python, "-c", f"import {module}; print({module}.__version__)").strip() == pyproject["project"]["version"]
    text = (ROOT / "packages" / folder / "README.md").read_text()
    assert "pip wheel --no-deps -w dist packages/*" in text and f"pip install --find-links dist {pyproject['project']['name']}" in text
