"""`Context(DEBUG=2)`: set the stack's documented knobs for a block (or a decorated function), then restore them.

The knobs (`DEBUG`, `DEV`, `DISABLE_COMPILER_CACHE`, ...) are environment variables that the runtime reads when it
acts, so a context sets them in `os.environ` and puts the previous values back on exit. `TRAINING` also sets
`Tensor.training` (training-mode layers: BatchNorm statistics, Dropout) for the block.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any


class Context(contextlib.ContextDecorator):
    """Temporarily set knobs: `with Context(DEBUG=2): ...` or `@Context(DEV="CPU:1")`."""

    def __init__(self, **kwargs: Any):
        self.kwargs = {k: str(int(v) if isinstance(v, bool) else v) for k, v in kwargs.items()}
        self._saved: list[dict[str, str | None]] = []

    def __enter__(self) -> Context:
        from .tensor import Tensor

        saved: dict[str, Any] = {k: os.environ.get(k) for k in self.kwargs}
        if "TRAINING" in self.kwargs:
            saved[_TRAINING_ATTR] = Tensor.training
            Tensor.training = self.kwargs["TRAINING"] not in ("", "0")
        self._saved.append(saved)
        os.environ.update(self.kwargs)
        return self

    def __exit__(self, *exc: object) -> None:
        from .tensor import Tensor

        for k, v in self._saved.pop().items():
            if k == _TRAINING_ATTR:
                Tensor.training = v
            elif v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_TRAINING_ATTR = "Tensor.training"
