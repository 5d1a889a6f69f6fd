"""Exceptions raised by the SQTT decoder, encoder and instruction mapper: all are `amd_isa` errors."""

from ..errors import AmdIsaError, CodeObjectError


class SqttError(AmdIsaError):
    """Base class of every SQTT error."""


class SqttArchError(SqttError, ValueError):
    """An architecture or trace layout name that the SQTT code does not know."""


class SqttDecodeError(SqttError, ValueError):
    """A blob that cannot be read as an SQTT byte stream."""


class SqttEncodeError(SqttError, ValueError):
    """A packet list that cannot be written as a stream the decoder reads back unchanged."""


class SqttMapError(SqttError):
    """Trace packets that do not agree with the code object they are mapped onto."""


class SqttCodeObjectError(SqttMapError, CodeObjectError):
    """The code object given to the mapper cannot be read (catchable as either error)."""
