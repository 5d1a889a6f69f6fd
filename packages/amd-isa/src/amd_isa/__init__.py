"""AMD GPU instruction sets (RDNA3, RDNA4, CDNA): DSL, assembler, disassembler, code objects, emulator, SQTT."""

from . import cdna, emu, rdna3, rdna4, sqtt
from .arch import ARCHS, TARGETS, arch_of
from .assembler import assemble, assemble_insts, assemble_one
from .codeobject import CodeObject, KernelDescriptor, Symbol
from .errors import AmdIsaError, AsmError, CodeObjectError, DecodeError, EncodeError, UnknownArchError
from .inst import PRINTED_BUT_REFUSED, Inst, decode, decode_one, iter_decode
from .instruction_samples import sample_corpus
from .operands import Lit, Reg, RegFile, Special, Sym

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "ARCHS",
    "TARGETS",
    "arch_of",
    "Inst",
    "decode",
    "decode_one",
    "iter_decode",
    "PRINTED_BUT_REFUSED",
    "assemble",
    "assemble_insts",
    "assemble_one",
    "CodeObject",
    "KernelDescriptor",
    "Symbol",
    "sample_corpus",
    "emu",
    "sqtt",
    "cdna",
    "rdna3",
    "rdna4",
    "Reg",
    "RegFile",
    "Special",
    "Sym",
    "Lit",
    "AmdIsaError",
    "DecodeError",
    "EncodeError",
    "AsmError",
    "CodeObjectError",
    "UnknownArchError",
]
