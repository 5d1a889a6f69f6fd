"""One builder function per instruction, generated from the tables, for the arch modules (`rdna3`, `rdna4`, `cdna`)."""

from collections.abc import Callable

from .arch import get_arch
from .builder import build
from .inst import Inst
from .operands import Special


def make_builder(arch_name: str, mnemonic: str, fmt: str, opcode: int) -> Callable[..., Inst]:
    """A function building `mnemonic` from operands in LLVM order and modifiers as keyword arguments."""

    def builder(*operands: object, **modifiers: object) -> Inst:
        # the docstring is set per mnemonic below
        return build(arch_name, mnemonic, list(operands), modifiers)

    builder.__name__ = builder.__qualname__ = mnemonic
    builder.__doc__ = (f"Build `{mnemonic}` ({arch_name} {fmt}, opcode {opcode}). Operands go in LLVM order; modifiers are keywords "
                       f"named as in LLVM syntax (offset=16, glc=True, clamp=True, op_sel=[1, 0, 0]).")
    return builder


def make_builders(arch_name: str) -> dict[str, Callable[..., Inst]]:
    """mnemonic -> builder for every opcode of an architecture."""
    arch = get_arch(arch_name)
    builders = {}
    for fmt, ops in arch.ops.items():
        for opcode, (mnemonic, _) in ops.items():
            if mnemonic not in builders or mnemonic.startswith(fmt.lower().lstrip("v") + "_"):
                builders[mnemonic] = make_builder(arch.name, mnemonic, fmt, opcode)
    return builders


def make_specials(arch_name: str) -> dict[str, Special]:
    """UPPER_CASE constants for every named scalar operand of an architecture (VCC_LO, EXEC, M0, FLAT_SCRATCH_LO, ...)."""
    arch = get_arch(arch_name)
    out = {name.upper(): Special(name, code) for code, name in arch.special.items()}
    out.update({name.upper(): Special(name, code, 2) for code, name in arch.wide_special.items() if name.upper() not in out})
    return out
