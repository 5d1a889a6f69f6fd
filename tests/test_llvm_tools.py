"""The LLVM tool locator takes an unversioned tool only at a release the test can use (the fresh-machine case: LLVM 14's
llvm-mc alone on PATH must make the LLVM 15 tests skip, not fail)."""

import stat
from pathlib import Path

import pytest
from llvm_tools import find_llvm_tool, llvm_release


def fake_tool(folder: Path, name: str, version_text: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{version_text}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bin_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_unversioned_tool_of_another_release_is_refused(bin_dir):
    fake_tool(bin_dir, "llvm-mc", "Debian LLVM version 14.0.6\n  Optimized build.")
    path, why = find_llvm_tool("llvm-mc", (15,))
    assert path is None
    assert "LLVM 14" in why


def test_unversioned_tool_of_the_right_release_is_taken(bin_dir):
    tool = fake_tool(bin_dir, "llvm-mc", "Ubuntu LLVM version 15.0.7")
    assert find_llvm_tool("llvm-mc", (15,)) == (str(tool), "")
    assert llvm_release(str(tool)) == 15


def test_versioned_name_is_preferred_in_the_order_given(bin_dir):
    fake_tool(bin_dir, "llvm-mc", "LLVM version 19.1.0")
    v18 = fake_tool(bin_dir, "llvm-mc-18", "LLVM version 18.1.0")
    assert find_llvm_tool("llvm-mc", (19, 18)) == (str(v18), "")  # every versioned name before the unversioned one
    assert find_llvm_tool("llvm-mc", (19,)) == (str(bin_dir / "llvm-mc"), "")


def test_missing_and_silent_tools(bin_dir):
    assert find_llvm_tool("llvm-mc", (15,)) == (None, "no llvm-mc is installed")
    fake_tool(bin_dir, "llvm-mc", "something else")
    path, why = find_llvm_tool("llvm-mc", (15,))
    assert path is None and "unknown release" in why
