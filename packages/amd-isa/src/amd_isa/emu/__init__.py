"""A wave emulator for AMD GPU programs: RDNA3, RDNA4 and CDNA instruction semantics over numpy lanes (WMMA/SWMMAC and
MFMA/SMFMAC matrix cores, DPP/SDWA, buffer and image memory), whole kernels with workgroups, barriers, LDS and scratch.

`run_program` runs one wave over a list of instructions; `run_kernel` runs a code object's kernel over a grid with the
caller's `Memory`.
"""

from .address_space import Memory
from .dispatch import KernelRun, run_kernel
from .errors import EmulatorError, MemoryFaultError, UnsupportedInstructionError
from .run_loop import Program, run_program
from .wave_state import WaveState

__all__ = ["EmulatorError", "KernelRun", "Memory", "MemoryFaultError", "Program", "UnsupportedInstructionError",
           "WaveState", "run_kernel", "run_program"]
