"""Building instructions from a mnemonic, operands in LLVM order and LLVM-named modifiers (used by the DSL and the assembler)."""

from functools import cache

from .arch import get_arch
from .errors import EncodeError
from .inst import ALWAYS_LITERAL, Inst, op_index, operand_info
from .syntax import SYNTAX
from .syntax_common import Draft

Mods = dict[str, object]


def build(arch_name: str, mnemonic: str, operands: list, modifiers: Mods) -> Inst:
    """Build an instruction from its mnemonic, operands in LLVM order and LLVM-named modifiers."""
    plan = _PLANS.get((arch_name, mnemonic))
    if plan is None:
        plan = _PLANS[(arch_name, mnemonic)] = _plan(arch_name, mnemonic)
    arch, fmt, opcode, info, variant, join, always_literal = plan
    draft = Draft(arch, fmt, opcode, mnemonic, info, variant=variant)
    try:
        join(draft, list(operands), dict(modifiers))
    except (TypeError, ValueError, KeyError, IndexError) as err:
        if isinstance(err, EncodeError):
            raise
        raise EncodeError(f"{mnemonic}: bad operands or modifiers ({err})") from None
    defaults, limits = _layout(arch.key, fmt, draft.variant)
    fields = dict(defaults)
    for name, value in draft.fields.items():
        limit = limits.get(name)
        if limit is None:
            unknown = set(draft.fields) - set(limits)
            raise EncodeError(f"{mnemonic}: {arch.name} {fmt} has no field(s) {', '.join(sorted(unknown))}")
        if value is not None:
            if not 0 <= value < limit:
                raise EncodeError(f"{mnemonic}: value {value} of field {name} does not fit {limit.bit_length() - 1} bits")
            if name in fields:
                fields[name] = value
    literal = draft.literal
    if literal is None and always_literal:
        literal = 0
    return Inst(arch, fmt, opcode, fields, literal, draft.variant)


# (target, mnemonic) -> what build needs from the tables: (Arch, format, opcode, operand info, base variant, join
# function, always carries a literal)
_PLANS: dict[tuple[str, str], tuple] = {}


def _plan(arch_name: str, mnemonic: str) -> tuple:
    arch = get_arch(arch_name)
    found = op_index(arch.key).get(mnemonic)
    if found is None:
        raise EncodeError(f"unknown {arch.name} instruction {mnemonic!r}")
    fmt, opcode = found
    if fmt not in SYNTAX:
        raise EncodeError(f"{mnemonic}: {fmt} instructions cannot be built yet")
    return (arch, fmt, opcode, operand_info(arch.key, fmt, opcode), _base_variant(arch.key, fmt, opcode), SYNTAX[fmt][1],
            _always_literal(mnemonic))


@cache
def _base_variant(arch_name: str, fmt: str, opcode: int) -> str:
    """"MFMA" for the opcodes whose encoding is the format's MFMA variant, else "" (DPP/SDWA are chosen by modifiers)."""
    mfma = get_arch(arch_name).formats.get(f"{fmt}_MFMA")
    return "MFMA" if mfma is not None and opcode in mfma.get("ops", ()) else ""


@cache
def _layout(arch_name: str, fmt: str, variant: str) -> tuple[dict[str, int], dict[str, int]]:
    """The fields a built instruction carries with their defaults (the opcode field aside), and 1 << width of every field."""
    arch = get_arch(arch_name)
    layout = arch.formats[f"{fmt}_{variant}" if variant else fmt]["fields"]
    defaults = {name: (arch.null_code if spec[2] == "NULL" else spec[2]) if len(spec) > 2 else 0
                for name, spec in layout.items() if name not in ("op", "opx")}
    return defaults, {name: 1 << (spec[0] - spec[1] + 1) for name, spec in layout.items()}


@cache
def _always_literal(mnemonic: str) -> bool:
    return any(part in mnemonic for part in ALWAYS_LITERAL)
