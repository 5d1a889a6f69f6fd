"""Exceptions raised by uop_scheduler.

Each class also derives from the builtin exception tinygrad raises in the same situation, so code written against
tinygrad's Tensor (`except ValueError`, `except IndexError`, ...) keeps working.
"""

from __future__ import annotations


class SchedulerError(Exception):
    """Base class of every uop_scheduler error."""


class ShapeError(SchedulerError, ValueError, RuntimeError):
    """A shape does not fit the operation (bad reshape, bad expand, bad padding, bad axis). A ValueError as tinygrad
    raises for most of these, and a RuntimeError as torch (and tinygrad for a kernel larger than its input, or gather's
    and scatter's index shapes) raises."""


class BroadcastError(SchedulerError, IndexError, ValueError):
    """Operand shapes cannot be broadcast together (tinygrad raises IndexError here)."""


class TensorIndexError(SchedulerError, IndexError):
    """An index or axis is out of range, or an indexing form is not supported."""


class TensorTypeError(SchedulerError, TypeError):
    """A value of the wrong Python type was passed (e.g. indexing with a float, bool() of a tensor)."""


class TensorRuntimeError(SchedulerError, RuntimeError):
    """An operation cannot run as asked: bad dtype for the op, mismatched devices, un-multipliable shapes."""


class DTypeOverflowError(SchedulerError, OverflowError):
    """Values asked for in a dtype that cannot hold them (an int8 arange past 127)."""


class ArgumentError(SchedulerError, ValueError):
    """An argument is outside the values an op accepts (a reduction name, a mode, a probability, a sample count)."""


class JitError(SchedulerError, RuntimeError):
    """A TinyJit was called in a way its capture cannot serve (changed inputs, unsupported return values, a host read
    inside the captured step)."""


class TensorWriteError(SchedulerError, RuntimeError):
    """Writes that cannot be put in an order giving every read its version. The scheduler copies an old version
    whenever a reader cannot run before the write that replaces it, so this marks a scheduler bug, never a wrong
    value."""


class GradientError(SchedulerError, RuntimeError, AssertionError):
    """A gradient that cannot be taken: a non-float or constant target, or a non-scalar output without `gradient=`
    (a RuntimeError, and an AssertionError where tinygrad asserts)."""
