"""Building instructions from a mnemonic, operands in LLVM order and LLVM-named modifiers (used by the DSL and the assembler)."""

from functools import cache
from operator import itemgetter

from .arch import get_arch
from .errors import EncodeError
from .inst import ALWAYS_LITERAL, Inst, op_index, operand_info
from .operands import Reg
from .syntax import SYNTAX
from .syntax_common import TABLE_WIDTHS, Draft
from .syntax_memory import IMAGE_FORMATS

Mods = dict[str, object]


def build(arch_name: str, mnemonic: str, operands: list, modifiers: Mods) -> Inst:
    """Build an instruction from its mnemonic, operands in LLVM order and LLVM-named modifiers."""
    plan = _PLANS.get((arch_name, mnemonic))
    if plan is None:
        plan = _PLANS[(arch_name, mnemonic)] = _plan(arch_name, mnemonic)
    arch, fmt, opcode, info, variant, join, always_literal, layouts = plan
    draft = Draft(arch, fmt, opcode, mnemonic, info, None, None, variant)
    try:
        join(draft, list(operands), dict(modifiers))
    except (TypeError, ValueError, KeyError, IndexError) as err:
        if isinstance(err, EncodeError):
            raise
        raise EncodeError(f"{mnemonic}: bad operands or modifiers ({err})") from None
    layout = layouts.get(draft.variant)
    if layout is None:
        layout = layouts[draft.variant] = (*_layout(arch.key, fmt, draft.variant), _modifier_values(arch.key, fmt, opcode, draft.variant))
    defaults, limits, overflow, modifier_values = layout
    given = draft.fields
    fields = defaults.copy()
    fields.update(given)
    try:
        bad = overflow(fields)
    except TypeError:  # a field given as None: keeps its default (below)
        bad = True
    if bad or len(fields) != len(defaults):  # a name the layout's defaults do not have (an unknown field, the opcode)
        fields = _checked_fields(mnemonic, arch, fmt, defaults, limits, given)
    literal = draft.literal
    if literal is None and always_literal:
        literal = 0
    inst = Inst(arch, fmt, opcode, fields, literal, draft.variant)
    if fmt not in TABLE_WIDTHS:
        _check_register_counts(inst, mnemonic, operands, modifier_values)
    return inst


def _checked_fields(mnemonic: str, arch, fmt: str, defaults: dict[str, int], limits: dict[str, int], given: dict) -> dict[str, int]:
    """The fields of an instruction from its layout's defaults and the values `given` (None: the default), each
    checked against its field's width; the opcode fields are not taken from `given`."""
    fields = defaults.copy()
    for name, value in given.items():
        limit = limits.get(name)
        if limit is None:
            unknown = set(given) - set(limits)
            raise EncodeError(f"{mnemonic}: {arch.name} {fmt} has no field(s) {', '.join(sorted(unknown))}")
        if value is not None:
            if not 0 <= value < limit:
                raise EncodeError(f"{mnemonic}: value {value} of field {name} does not fit {limit.bit_length() - 1} bits")
            if name in fields:
                fields[name] = value
    return fields


def _check_register_counts(inst: Inst, mnemonic: str, operands: list, modifier_values=None) -> None:
    """Each register range must be as wide as the operand the instruction reads or writes there, as LLVM requires
    ("invalid operand for instruction"): `global_load_b128 v[1:2], ...` loads four registers. Outside the formats whose
    tables fix every width (`check_width`), widths follow from the modifiers (image dmask/d16/tfe, atomic returns,
    saddr, wave size), so the built instruction is read back as the disassembler reads it (its split) and every
    register operand compared with the one printed in its place; and one acc bit says whether all data and destination
    registers are AGPRs. `modifier_values`: `_modifier_values` of the instruction, when the caller has it."""
    if inst.fmt != "VINTERP":
        for given in operands:
            if type(given) is Reg and (given.neg or given.abs):  # LLVM: not a valid operand
                raise EncodeError(f"{mnemonic}: a {inst.fmt} instruction takes no neg/abs on its operands")
    expected = _printed_registers(inst, modifier_values)
    if len(expected) != len(operands):
        return
    position = 0
    for given, want in zip(operands, expected):
        position += 1
        if want is None or type(given) is not Reg:
            continue
        kind, count = want
        if given.kind == kind and given.count == count:
            continue
        if {given.kind, kind} == {"v", "a"}:
            raise EncodeError(f"{mnemonic}: invalid register class: data and dst should be all VGPR or AGPR, got {given} with "
                              f"{'AGPRs' if kind == 'a' else 'VGPRs'} elsewhere")
        if given.kind == kind and given.count != count and given.count not in _also_allowed(inst, position, count):
            plural = "s" if count > 1 else ""
            example = f"{kind}{given.index}" if count == 1 else f"{kind}[{given.index}:{given.index + count - 1}]"
            raise EncodeError(f"{mnemonic}: operand {position} takes {count} register{plural} here (such as {example}), got {given}")


# fields no register width depends on, left out of `_printed_registers`' cache key (they take many values)
_OFFSET_FIELDS = frozenset(("offset", "offset0", "offset1", "ioffset"))
_PRINTED: dict[tuple, tuple] = {}


def _printed_registers(inst: Inst, modifier_values=None) -> tuple:
    """(kind, count) of each operand the disassembler prints for `inst` (None where it prints no register), remembered
    per opcode and modifier fields: register fields aside (whether saddr is used counts), nothing else moves a width.
    The key names the opcode by its `_modifier_values` function (one per target, format, opcode and variant)."""
    fields = inst.fields
    if modifier_values is None:
        modifier_values = _modifier_values(inst.arch.key, inst.fmt, inst.op, inst.variant)
    key = (modifier_values, fields.get("saddr") == inst.arch.null_code, modifier_values(fields))
    ret = _PRINTED.get(key)
    if ret is None:
        if len(_PRINTED) >= 1 << 16:  # many distinct modifier sets: start again rather than grow without bound
            _PRINTED.clear()
        ret = _PRINTED[key] = tuple((op.kind, op.count) if type(op) is Reg else None for op in SYNTAX[inst.fmt][0](inst)[1])
    return ret


@cache
def _modifier_values(arch_key: str, fmt: str, op: int, variant: str):
    """A function giving the values of a built instruction's fields (those of its layout, see `_layout`) that are
    neither operands nor offsets, as a tuple: `_printed_registers`' cache key, read with one itemgetter, not a loop."""
    info = operand_info(arch_key, fmt, op)
    kept = [name for name in _layout(arch_key, fmt, variant)[0] if name not in info and name not in _OFFSET_FIELDS]
    # a function object of its own for each opcode (cached here; `_printed_registers` keys its cache by its identity)
    if not kept:
        return lambda fields: ()
    if len(kept) == 1:
        return lambda fields, name=kept[0]: (fields[name],)
    return itemgetter(*kept)


def _also_allowed(inst: Inst, position: int, count: int) -> tuple[int, ...]:
    """Other widths LLVM takes for an image's operands: a non-NSA address of 5-7 VGPRs as 8 (written before LLVM had
    160/192/224-bit registers) and one of 13 or more as 16; any address on gfx9 (whose encoding has no address size);
    an r128 resource as 8 SGPRs (LLVM prints 8)."""
    if inst.fmt not in IMAGE_FORMATS:
        return ()
    if position == 2:
        if inst.arch.name == "cdna":
            return tuple(range(1, 17))
        return (8,) if 5 <= count <= 7 else (16,) if count > 12 else ()
    return (8,) if position == 3 and count == 4 and inst.fields.get("r128") else ()


# (target, mnemonic) -> what build needs from the tables: (Arch, format, opcode, operand info, base variant, join
# function, always carries a literal, variant -> `_layout` of the encoding)
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
            _always_literal(mnemonic), {})


@cache
def _base_variant(arch_name: str, fmt: str, opcode: int) -> str:
    """"MFMA" for the opcodes whose encoding is the format's MFMA variant, else "" (DPP/SDWA are chosen by modifiers)."""
    mfma = get_arch(arch_name).formats.get(f"{fmt}_MFMA")
    return "MFMA" if mfma is not None and opcode in mfma.get("ops", ()) else ""


@cache
def _layout(arch_name: str, fmt: str, variant: str) -> tuple[dict[str, int], dict[str, int], object]:
    """The fields a built instruction carries with their defaults (the opcode field aside), 1 << width of every field,
    and a function of a full set of fields that is nonzero when one of them does not fit its width (compiled from the
    layout: one expression of shifts, not a loop over the fields)."""
    arch = get_arch(arch_name)
    layout = arch.formats[f"{fmt}_{variant}" if variant else fmt]["fields"]
    defaults = {name: (arch.null_code if spec[2] == "NULL" else spec[2]) if len(spec) > 2 else 0
                for name, spec in layout.items() if name not in ("op", "opx")}
    terms = " | ".join(f"f[{name!r}] >> {layout[name][0] - layout[name][1] + 1}" for name in defaults) or "0"
    scope: dict = {}
    exec(compile(f"def overflow(f):\n    return {terms}\n", f"<amd_isa field check {arch_name} {fmt} {variant}>", "exec"), scope)  # noqa: S102
    return defaults, {name: 1 << (spec[0] - spec[1] + 1) for name, spec in layout.items()}, scope["overflow"]


@cache
def _always_literal(mnemonic: str) -> bool:
    return any(part in mnemonic for part in ALWAYS_LITERAL)
