"""Every ```python example in the READMEs runs as written (in a scratch folder holding the files it opens): a README
that drifts from the code fails here (#25)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import ROOT

SHARED = ROOT.parent / "shared" / "data"


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for readme in [ROOT / "README.md", *sorted((ROOT / "packages").glob("*/README.md"))]:
        name = "top" if readme.parent == ROOT else readme.parent.name
        found += [(name, i, code) for i, code in enumerate(re.findall(r"```python\n(.*?)```", readme.read_text(), re.S))]
    return found


def _vector_add(cwd: Path) -> None:
    clang, lld = shutil.which("clang-15"), shutil.which("ld.lld-15")
    if not (clang and lld):
        pytest.skip("the example's vector_add.so is built with clang-15 and ld.lld-15")
    source = ROOT / "packages" / "amd-isa" / "tests" / "kernels" / "vector_add.cl"
    subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2", "-x", "cl", "-c", str(source), "-o",
                    str(cwd / "k.o")], check=True, capture_output=True)
    subprocess.run([lld, "-shared", str(cwd / "k.o"), "-o", str(cwd / "vector_add.so")], check=True, capture_output=True)


def _sqtt_capture(cwd: Path) -> None:
    run = SHARED / "sqtt" / "gfx1100" / "profile_gemm_run_1"
    if not (run / "se1_77.sqtt").is_file():
        pytest.skip("the shared SQTT captures are not present")
    for name in ("se1_77.sqtt", "prog_71.elf"):
        shutil.copy(run / name, cwd / name)


def _flash_images(cwd: Path) -> None:
    image = bytes(range(256)) * (0x200000 // 256)
    (cwd / "known-good.bin").write_bytes(image)
    (cwd / "new.bin").write_bytes(image[:0x3000] + bytes(0x1000) + image[0x4000:])


SETUP = {("amd-isa", 1): _vector_add, ("amd-isa", 2): _sqtt_capture, ("navi-flash", 0): _flash_images}


@pytest.mark.parametrize(("package", "index", "code"), _examples(), ids=lambda v: str(v)[:24] if isinstance(v, str) and "\n" in v else str(v))
def test_readme_example_runs(package, index, code, tmp_path):
    if (setup := SETUP.get((package, index))) is not None:
        setup(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{package} README example {index} failed:\n{done.stderr[-3000:]}"
