"""Rendering instructions as LLVM assembly text and as Python that rebuilds them."""

from .operands import Lit
from .syntax import split
from .syntax_vector import VopdJoin

Mods = dict[str, object]


def _lit_text(operand: Lit) -> str:
    return f"{operand.value & 0xFFFFFFFF:#x}"


# operand types not spelled by str()
_TEXT_OF = {Lit: _lit_text, float: repr}


def operand_text(operand: object) -> str:
    """LLVM spelling of one operand value."""
    fn = _TEXT_OF.get(type(operand))
    return fn(operand) if fn is not None else str(operand)


def modifier_text(key: str, value: object) -> str:
    """LLVM spelling of one modifier: `glc`, `offset:16`, `op_sel:[1,0]`."""
    if value is True:
        return key
    if isinstance(value, list | tuple):
        return f"{key}:[{','.join(str(int(x)) for x in value)}]"
    return f"{key}:{value}"


def render(mnemonic: str, operands: list, modifiers: Mods) -> str:
    """Assemble the text of an instruction from its split parts."""
    if mnemonic in ("exp", "export") or (mnemonic.startswith("v_dual_") and any(type(op) is VopdJoin for op in operands)):
        return _render_joined(mnemonic, operands, modifiers)
    text = f"{mnemonic} {', '.join([operand_text(op) for op in operands])}" if operands else mnemonic
    if modifiers:
        mods = [modifier_text(key, value) for key, value in modifiers.items() if value is not False]
        if mods:
            return f"{text} {' '.join(mods)}"
    return text


def _render_joined(mnemonic: str, operands: list, modifiers: Mods) -> str:
    """render for a VOPD pair (two mnemonics joined by ::) or an export (its target is followed by a space)."""
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
