"""Symbolic sizes: `Variable("i", 1, 10).bind(3)` as a slice bound gives a tensor whose shape holds the bound variable.

Such a tensor is scheduled and compiled once for every value of its variables (the plan and the kernels see the
unbound variable; the values are passed when the kernels run), and its buffers are sized for the variable's maximum.
"""

from __future__ import annotations

from typing import Any

from uopir import Ops, UOp, to_dtype

from .errors import ArgumentError
from .schedule import OFFSET_VAR


def Variable(name: str, min_val: int, max_val: int, dtype: Any = None) -> UOp:  # noqa: N802 -- tinygrad's name
    """A symbolic int in [min_val, max_val] (of `dtype`, an int dtype; weakly typed by default); `.bind(value)` fixes
    its value for one use. Names starting with `slice_at` are reserved: they mark where a written slice starts
    (`schedule.OFFSET_VAR`), which realize and TinyJit treat apart from other variables."""
    if isinstance(name, str) and name.startswith(OFFSET_VAR):
        raise ArgumentError(f"Variable name {name!r} is reserved (names starting with {OFFSET_VAR!r} mark written slices' offsets): choose another")
    return UOp.variable(name, min_val, max_val) if dtype is None else UOp.variable(name, min_val, max_val, to_dtype(dtype))


def concrete(d: Any) -> int:
    """The value of a dim: an int, or a symbolic dim evaluated at its variables' bound values."""
    if isinstance(d, int):
        return d
    values = {b: b.src[1] for b in d.toposort() if b.op is Ops.BIND}
    ret = d.substitute(values).simplify() if values else d.simplify()
    if ret.op is not Ops.CONST:
        raise ValueError(f"the dim {d} has an unbound variable: bind it (Variable(...).bind(value)) to get a size")
    return int(ret.arg)


def unbound_shape(shape: tuple) -> tuple:
    """`shape` with its bound variables as plain variables (equal for every value: a JIT signature)."""
    return tuple(d if isinstance(d, int) else d.substitute({b: b.src[0] for b in d.toposort() if b.op is Ops.BIND}) for d in shape)


def bound_values(shape: tuple) -> dict[str, int]:
    """The values of the bound variables in `shape`, by name."""
    return {b.src[0].arg[0]: int(b.src[1].arg) for d in shape if not isinstance(d, int) for b in d.toposort() if b.op is Ops.BIND}


def bind_shape(shape: tuple, var_vals: dict[str, int]) -> tuple:
    """An unbound `shape` with its variables bound to `var_vals`."""
    if not var_vals:
        return shape
    return tuple(d if isinstance(d, int) else d.substitute({v: v.bind(var_vals[v.arg[0]]) for v in d.toposort() if v.op is Ops.DEFINE_VAR})
                 for d in shape)
