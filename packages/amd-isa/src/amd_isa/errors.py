"""Exception hierarchy of amd_isa: every error the package raises on bad input is an `AmdIsaError`."""


class AmdIsaError(Exception):
    """Base class of every amd_isa error."""


class UnknownArchError(AmdIsaError, ValueError):
    """An architecture or gfx target name this package does not know."""


class DecodeError(AmdIsaError):
    """Bytes that are not a valid instruction (unknown encoding or opcode, truncated data)."""


class EncodeError(AmdIsaError, ValueError):
    """An instruction that cannot be built: wrong operand count, kind or range, unknown modifier."""


class AsmError(AmdIsaError):
    """Assembly text that cannot be assembled; the message names the line and the problem."""


class CodeObjectError(AmdIsaError):
    """A file that is not a readable AMD HSA code object, or a code object that cannot be written."""
