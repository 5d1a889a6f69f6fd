"""Rendering instructions as LLVM assembly text and as Python that rebuilds them."""

from .operands import Lit
from .syntax import split
from .syntax_vector import VopdJoin

Mods = dict[str, object]


def operand_text(operand: object) -> str:
    """LLVM spelling of one operand value."""
    if isinstance(operand, Lit):
        return f"{operand.value & 0xFFFFFFFF:#x}"
    if isinstance(operand, float):
        return repr(operand)
    return str(operand)


def modifier_text(key: str, value: object) -> str:
    """LLVM spelling of one modifier: `glc`, `offset:16`, `op_sel:[1,0]`."""
    if value is True:
        return key
    if isinstance(value, list | tuple):
        return f"{key}:[{','.join(str(int(x)) for x in value)}]"
    return f"{key}:{value}"


def render(mnemonic: str, operands: list, modifiers: Mods) -> str:
    """Assemble the text of an instruction from its split parts."""
    parts: list[list[str]] = [[]]
    names = [mnemonic]
    for operand in operands:
        if isinstance(operand, VopdJoin):
            names.append(str(operand))
            parts.append([])
        else:
            parts[-1].append(operand_text(operand))
    if names[0] in ("exp", "export") and parts[0]:
        parts[0][:2] = [f"{parts[0][0]} {parts[0][1]}"]  # the export target is followed by a space, not a comma
    halves = [name + (" " + ", ".join(ops) if ops else "") for name, ops in zip(names, parts, strict=True)]
    text = " :: ".join(halves)
    mods = [modifier_text(key, value) for key, value in modifiers.items() if value is not False]
    return text + (" " + " ".join(mods) if mods else "")


def format_inst(inst) -> str:
    """LLVM assembly of an instruction."""
    return render(*split(inst))


def repr_inst(inst) -> str:
    """Python source that rebuilds the instruction with the arch module's builders."""
    _, operands, modifiers = split(inst)
    args = [repr(str(op)) if isinstance(op, str) else repr(op) for op in operands]
    args += [f"{key}={value!r}" for key, value in modifiers.items()]
    # The builder is named by the table mnemonic, which names the encoding too (v_nop_e32 vs v_nop_e64).
    return f"{inst.arch.ops[inst.fmt][inst.op][0]}({', '.join(args)})"
