"""The workspace layout and the CI script match what the README and DESIGN promise."""

import re

from workspace import PACKAGES, ROOT, import_name, members

EXPECTED = {
    "uopir": ("uopir", "uopir", set()),
    "scheduler": ("uop-scheduler", "uop_scheduler", {"uopir", "hcq-runtime", "numpy"}),
    "hcq-runtime": ("hcq-runtime", "hcq_runtime", {"uopir", "amd-isa"}),
    "amd-isa": ("amd-isa", "amd_isa", {"numpy"}),
    "navi-flash": ("navi-flash", "navi_flash", {"pyusb", "rich"}),
    "llm-bench": ("uop-llm-bench", "llm_bench", {"uop-scheduler", "hcq-runtime", "numpy", "rich"}),
}


def requirement_name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", quick, re.S)
    assert block, "README's Quick start has no sh code block"
    lines = [line for line in block.group(1).splitlines() if "pytest" in line]
    assert len(lines) == 1, f"expected one test line in the Quick start, found {lines}"
    return lines[0].strip()


def test_members_match_design_table():
    found = members()
    assert set(found) == set(EXPECTED)
    for folder, (dist, module, deps) in EXPECTED.items():
        project = found[folder]["project"]
        assert project["name"] == dist
        assert import_name(found[folder]) == module
        assert {requirement_name(r) for r in project.get("dependencies", [])} == deps
        assert project["requires-python"] == ">=3.11"
        src = PACKAGES / folder / "src" / module
        for required in ("__init__.py", "py.typed"):
            assert (src / required).is_file(), f"{src / required} is missing"
        assert (PACKAGES / folder / "README.md").is_file()
        assert (PACKAGES / folder / "tests").is_dir()


def test_one_version_and_pinned_workspace_dependencies():
    found = members()
    versions = {p["project"]["version"] for p in found.values()}
    assert len(versions) == 1, f"packages disagree on the version: {versions}"
    (version,) = versions
    dists = {p["project"]["name"] for p in found.values()}
    for pyproject in found.values():
        for req in pyproject["project"].get("dependencies", []):
            if requirement_name(req) in dists:
                assert req == f"{requirement_name(req)}=={version}", f"{req!r} must pin the workspace version"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    command = readme_test_command()
    assert command in ci.splitlines(), f"{command!r} from the README is not a line of .ci/run"


def test_the_suite_runs_with_fresh_buffers_poisoned():
    # the root conftest.py turns it on: reads of memory nothing wrote show up as NaN / 0xA5 in every test
    import os

    from hcq_runtime.buffer import poison_enabled

    assert os.environ.get("UOP_POISON") == "1" and poison_enabled()
