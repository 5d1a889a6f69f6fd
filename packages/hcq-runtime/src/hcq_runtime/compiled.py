"""The interface of a device that runs programs it compiles itself."""

from __future__ import annotations

from typing import Any

from .allocator import Allocator
from .compiler import Compiler


class CompiledDevice:
    """A device with memory, a renderer (kernel AST → source), a compiler (source → binary) and a program loader.

    The host runner (`hcq_runtime.host`) needs exactly this: `renderer` for `uopir.to_program`, `compiler.compile`, `program(name, binary)`
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
        program that replays every captured call without Python per call (`link_linear` -> `Linked`), or None when
        replays go call by call. CPU devices link into a native batch run, devices with hardware queues into command
        batches."""
        from .cpu import CPUDevice  # noqa: PLC0415 (the runners import the device classes)
        from .hcq2.hwqueue import QueueDevice  # noqa: PLC0415
        from .runner import Linked  # noqa: PLC0415

        return Linked if isinstance(self, (CPUDevice, QueueDevice)) else None

    def expect_work(self) -> None:
        """A hint that kernels will launch soon (a realize has started); a device with threads or queues to wake may
        prepare them. Nothing by default."""

    def program(self, name: str, binary: bytes) -> Any:
        """Load `binary` and return its entry point `name` as a program with `launch(...)`."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until all work submitted to the device has finished."""
        raise NotImplementedError
