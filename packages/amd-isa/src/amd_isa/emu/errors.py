"""Errors of the wave emulator; all are `AmdIsaError`s so callers can catch the package's base class."""

from ..errors import AmdIsaError


class EmulatorError(AmdIsaError):
    """A program the emulator cannot run: bad input, a fault, or a missing feature."""


class UnsupportedInstructionError(EmulatorError):
    """An instruction (or operand form) the emulator has no semantics for; the message names it and its PC."""


class MemoryFaultError(EmulatorError):
    """A load or store outside every mapped memory region (or outside a wave's scratch)."""


def unsupported(inst, pc: int, what: str = "") -> UnsupportedInstructionError:
    """The error for an instruction the emulator cannot run."""
    detail = f" ({what})" if what else ""
    return UnsupportedInstructionError(f"unsupported instruction {inst.mnemonic} at pc {pc:#x}{detail}: {inst}")
