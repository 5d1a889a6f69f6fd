"""The interface of a device that runs programs it compiles itself."""

from __future__ import annotations

from typing import Any

from .allocator import Allocator
from .compiler import Compiler


class CompiledDevice:
    """A device with memory, a renderer (kernel AST → source), a compiler (source → binary) and a program loader.

    `run_linear` needs exactly this: `renderer` for `uopir.to_program`, `compiler.compile`, `program(name, binary)`
    returning an object with `launch(addresses, values, global_size, local_size)` (buffer addresses in the program's
    globals order, variable values in its vars order, the ProgramInfo launch dims), and `n_cores` for THREAD opts
    (1 when the device has none)."""

    name: str
    allocator: Allocator
    renderer: Any
    compiler: Compiler
    n_cores: int = 1

    def program(self, name: str, binary: bytes) -> Any:
        """Load `binary` and return its entry point `name` as a program with `launch(...)`."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until all work submitted to the device has finished."""
        raise NotImplementedError
