"""`Context(DEBUG=2)`: set the stack's documented knobs for a block (or a decorated function), then restore them.

The knobs (`DEBUG`, `DEV`, `DISABLE_COMPILER_CACHE`, ...) are environment variables that the runtime reads when it
acts, so a context sets them in `os.environ` and puts the previous values back on exit. `TRAINING` also sets
`Tensor.training` (training-mode layers: BatchNorm statistics, Dropout) for the block; `DEFAULT_FLOAT` and
`DEFAULT_INT` (a dtype or its name) set `dtypes.default_float` and `dtypes.default_int`, the dtypes of Python floats
and ints in new tensors.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from uopir import DType, dtypes, to_dtype

from .errors import ArgumentError

# knob -> (the dtypes attribute it sets, the kind of dtype it takes)
_DEFAULT_DTYPES = {"DEFAULT_FLOAT": ("default_float", "float"), "DEFAULT_INT": ("default_int", "int")}


def dtype_knob(knob: str, value: Any, kind: str) -> DType:
    """The dtype a knob names (a DType, or a name such as "half" or "HALF"), which must be a strong `kind` ("float" or
    "int") dtype; an ArgumentError naming the knob otherwise."""
    try:
        dt = value if isinstance(value, DType) else to_dtype(str(value).lower())
    except (KeyError, ValueError, TypeError, AttributeError):
        raise ArgumentError(f"{knob}={value!r} is not a dtype") from None
    if not (dtypes.is_float if kind == "float" else dtypes.is_int)(dt) or dt in dtypes.weaks:
        raise ArgumentError(f"{knob} must be a {kind} dtype, got {dt}")
    return dt


class Context(contextlib.ContextDecorator):
    """Temporarily set knobs: `with Context(DEBUG=2): ...` or `@Context(DEV="CPU:1")`."""

    def __init__(self, **kwargs: Any):
        self.defaults = {k: dtype_knob(k, v, _DEFAULT_DTYPES[k][1]) for k, v in kwargs.items() if k in _DEFAULT_DTYPES}
        self.kwargs = {k: str(int(v) if isinstance(v, bool) else v) for k, v in kwargs.items() if k not in _DEFAULT_DTYPES}
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> Context:
        from .tensor import Tensor

        saved: dict[str, Any] = {k: os.environ.get(k) for k in self.kwargs}
        if "TRAINING" in self.kwargs:
            saved[_TRAINING_ATTR] = Tensor.training
            Tensor.training = self.kwargs["TRAINING"] not in ("", "0")
        for knob, dt in self.defaults.items():
            attr = _DEFAULT_DTYPES[knob][0]
            saved[knob] = (attr, getattr(type(dtypes), attr))
            setattr(type(dtypes), attr, dt)
        self._saved.append(saved)
        os.environ.update(self.kwargs)
        return self

    def __exit__(self, *exc: object) -> None:
        from .tensor import Tensor

        for k, v in self._saved.pop().items():
            if k == _TRAINING_ATTR:
                Tensor.training = v
            elif k in _DEFAULT_DTYPES:
                setattr(type(dtypes), *v)
            elif v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_TRAINING_ATTR = "Tensor.training"
