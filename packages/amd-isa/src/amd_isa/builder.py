"""Building instructions from a mnemonic, operands in LLVM order and LLVM-named modifiers (used by the DSL and the assembler)."""

from .arch import get_arch
from .errors import EncodeError
from .inst import ALWAYS_LITERAL, Inst, op_index, operand_info
from .syntax import SYNTAX
from .syntax_common import Draft

Mods = dict[str, object]


def build(arch_name: str, mnemonic: str, operands: list, modifiers: Mods) -> Inst:
    """Build an instruction from its mnemonic, operands in LLVM order and LLVM-named modifiers."""
    arch = get_arch(arch_name)
    found = op_index(arch.name).get(mnemonic)
    if found is None:
        raise EncodeError(f"unknown {arch.name} instruction {mnemonic!r}")
    fmt, opcode = found
    if fmt not in SYNTAX:
        raise EncodeError(f"{mnemonic}: {fmt} instructions cannot be built yet")
    info = operand_info(arch.name, fmt, opcode)
    mfma = arch.formats.get(f"{fmt}_MFMA")
    variant = "MFMA" if mfma is not None and opcode in mfma.get("ops", ()) else ""
    draft = Draft(arch, fmt, opcode, mnemonic, info, variant=variant)
    try:
        SYNTAX[fmt][1](draft, list(operands), dict(modifiers))
    except (TypeError, ValueError, KeyError, IndexError) as err:
        if isinstance(err, EncodeError):
            raise
        raise EncodeError(f"{mnemonic}: bad operands or modifiers ({err})") from None
    layout = arch.formats[f"{fmt}_{draft.variant}" if draft.variant else fmt]["fields"]
    fields = {}
    for name, spec in layout.items():
        if name in ("op", "opx"):
            continue
        value = draft.fields.get(name)
        if value is None:
            value = (arch.null_code if spec[2] == "NULL" else spec[2]) if len(spec) > 2 else 0
        width = spec[0] - spec[1] + 1
        if not 0 <= value < (1 << width):
            raise EncodeError(f"{mnemonic}: value {value} of field {name} does not fit {width} bits")
        fields[name] = value
    unknown = set(draft.fields) - set(layout)
    if unknown:
        raise EncodeError(f"{mnemonic}: {arch.name} {fmt} has no field(s) {', '.join(sorted(unknown))}")
    literal = draft.literal
    if literal is None and any(part in mnemonic for part in ALWAYS_LITERAL):
        literal = 0
    return Inst(arch, fmt, opcode, fields, literal, draft.variant)
