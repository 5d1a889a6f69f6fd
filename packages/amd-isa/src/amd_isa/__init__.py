"""AMD GPU instruction sets (RDNA3, RDNA4, CDNA): DSL, assembler, disassembler, code objects, emulator, SQTT."""

__version__ = "0.1.0"

__all__ = ["__version__"]
