"""The exception hierarchy of uopir: catch `UOpIRError` for any of them."""

from __future__ import annotations


class UOpIRError(Exception):
    """Base class of every uopir error."""


class DTypeError(UOpIRError, ValueError, AttributeError):
    """A dtype was built or converted in a way that has no meaning (vector of vectors, unknown name, ...); also an
    AttributeError, which tinygrad raises for an unknown dtype name."""


class RewriteError(UOpIRError, RuntimeError):
    """A rewrite rule failed or a rewrite did not converge; the message names the node and the rule."""


class GraphError(UOpIRError, ValueError):
    """A UOp was built with srcs/args that make no sense (shape mismatch, bad dtype, ...)."""


class CallError(UOpIRError, AssertionError):
    """A CALL was built wrongly (a non-opaque body, bad output positions). Also an AssertionError, as in tinygrad."""


class SpecError(UOpIRError, RuntimeError):
    """A graph failed `type_verify`: the message names the node and the failed rule."""


class SymbolicError(UOpIRError, ValueError):
    """Symbolic evaluation failed: an unbound variable, a division by zero."""
