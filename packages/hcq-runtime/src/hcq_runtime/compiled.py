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

    @property
    def graph(self) -> Any:
        """What a TinyJit replay of this device's kernels runs as, under tinygrad's name for it: the class of a linked
        program that runs every captured call in one native call (`link_linear`), or None when replays go call by
        call. CPU devices link (`LinkedLinear`); devices that run the hcq2 queue engine link their steps (`LinkedSteps`)."""
        from .batch import LinkedLinear  # noqa: PLC0415 (batch imports the device classes)
        from .cpu import CPUDevice  # noqa: PLC0415
        from .hcq2 import LinkedSteps  # noqa: PLC0415
        from .hcq2.hwqueue import QueueDevice  # noqa: PLC0415

        if isinstance(self, CPUDevice):
            return LinkedLinear
        return LinkedSteps if isinstance(self, QueueDevice) else None

    def program(self, name: str, binary: bytes) -> Any:
        """Load `binary` and return its entry point `name` as a program with `launch(...)`."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until all work submitted to the device has finished."""
        raise NotImplementedError
