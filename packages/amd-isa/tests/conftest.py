"""Shared fixtures of the amd-isa tests: locating LLVM 15 and LLVM 19 tools and running llvm-mc on a whole corpus at once."""

import re
import subprocess
from dataclasses import dataclass

import pytest
from llvm_tools import find_llvm_tool


def llvm_tool(name: str) -> str:
    """Path of an LLVM 15 tool (`name-15`, or `name` when it is LLVM 15), or skip the test when it is not installed."""
    path, why = find_llvm_tool(name, (15,))
    if path is None:
        pytest.skip(f"{name}-15 is needed: {why} (apt-get install llvm-15)")
    return path


def llvm_mc_18_plus() -> str:
    """Path of llvm-mc from LLVM 19 (else another release from 18 on, which also knows gfx12), or skip the test."""
    path, why = find_llvm_tool("llvm-mc", (19, 20, 21, 22, 18))
    if path is None:
        pytest.skip(f"llvm-mc-19 is needed: {why} (apt-get install llvm-19)")
    return path


@dataclass
class McResult:
    """llvm-mc's verdict on each input line: (text, bytes) when it assembled it, None when it rejected it."""

    lines: list[tuple[str, bytes] | None]

    @property
    def accepted(self) -> int:
        return sum(entry is not None for entry in self.lines)


class LlvmMc:
    """llvm-mc driven in batches: one process per corpus. `options` are passed on (e.g. -mattr=+real-true16)."""

    def __init__(self, path: str, options: tuple[str, ...] = ()):
        self.path = path
        self.options = options

    def assemble(self, lines: list[str], mcpu: str) -> McResult:
        """Assemble every line; rejected lines map to None."""
        return _assemble([self.path, *self.options], lines, mcpu)

    def disassemble(self, blobs: list[bytes], mcpu: str) -> list[str]:
        """LLVM's text for each instruction blob."""
        return _disassemble([self.path, *self.options], blobs, mcpu)


@pytest.fixture(scope="session")
def llvm_mc() -> LlvmMc:
    """llvm-mc-15, or a skip when LLVM 15 is not installed."""
    return LlvmMc(llvm_tool("llvm-mc"))


@pytest.fixture(scope="session")
def llvm_mc19() -> LlvmMc:
    """llvm-mc-19 (the first release that knows gfx12 and gfx942), or a skip when it is not installed."""
    return LlvmMc(llvm_mc_18_plus())


@pytest.fixture(scope="session")
def llvm_mc19_true16() -> LlvmMc:
    """llvm-mc-19 in real-true16 mode, where 16-bit operands are spelled as register halves (v1.h, v2.l)."""
    return LlvmMc(llvm_mc_18_plus(), ("-mattr=+real-true16",))


def _assemble(mc: list[str], lines: list[str], mcpu: str) -> McResult:
    proc = subprocess.run([*mc, "-arch=amdgcn", f"-mcpu={mcpu}", "-show-encoding"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=False)
    rejected = {int(m.group(1)) - 1 for m in re.finditer(r"<stdin>:(\d+):\d+: error", proc.stderr)}
    encoded = iter(line for line in proc.stdout.splitlines() if "encoding:" in line)
    out: list[tuple[str, bytes] | None] = []
    for index in range(len(lines)):
        if index in rejected:
            out.append(None)
            continue
        text, enc = next(encoded).split("; encoding:")
        out.append((" ".join(text.split()), bytes(int(x, 16) for x in enc.strip(" []").split(","))))
    return McResult(out)


def _disassemble(mc: list[str], blobs: list[bytes], mcpu: str) -> list[str]:
    src = "\n".join(",".join(f"{b:#04x}" for b in blob) for blob in blobs) + "\n"
    proc = subprocess.run([*mc, "-arch=amdgcn", f"-mcpu={mcpu}", "-disassemble"], input=src, capture_output=True, text=True, check=False)
    return [" ".join(line.split()) for line in proc.stdout.splitlines() if line.strip() and not line.strip().startswith(".")]
