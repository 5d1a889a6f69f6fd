"""A two-pass assembler for LLVM-syntax AMDGPU assembly: labels, branches, every format the tables describe."""

import re
from dataclasses import dataclass
from functools import cache

from .aliases import alias_table
from .arch import get_arch
from .availability import missing_on
from .builder import build
from .errors import AmdIsaError, AsmError, EncodeError
from .inst import Inst, op_index
from .operands import OFF, Reg, Special, Sym
from .symbols import asm_int, is_symbolic, parse_symbolic
from .syntax_common import with_mods
from .syntax_memory import EXPORT_TARGETS
from .syntax_vector import VopdJoin

_REG = re.compile(r"^(s|v|a|ttmp|acc)(\d+)$")
_RANGE = re.compile(r"^(s|v|a|ttmp|acc)\[(\d+)(?::(\d+))?\]$")
_HALF = re.compile(r"^v(\d+)\.([hl])$")
_LABEL = re.compile(r"^[A-Za-z_.$][\w.$]*$")
_ATTR = re.compile(r"^attr(\d+)\.([xyzw])$")
_NUMBER = re.compile(r"^-?(0x[0-9a-fA-F]+|0b[01]+|\d+)$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_EXPORT_TARGETS = {name: value for value, name in EXPORT_TARGETS.items()}
_ALIASES = {"scc": "src_scc", "vccz": "src_vccz", "execz": "src_execz", "lds_direct": "src_lds_direct", "shared_base": "src_shared_base",
            "shared_limit": "src_shared_limit", "private_base": "src_private_base", "private_limit": "src_private_limit",
            "pops_exiting_wave_id": "src_pops_exiting_wave_id"}


@dataclass(frozen=True)
class Label:
    """A branch target named in the source, resolved in the second pass."""

    name: str


@cache
def _separator(seps: str) -> re.Pattern:
    return re.compile(f"([{re.escape(seps)}])")


def _split_top(text: str, seps: str) -> list[str]:
    """Split on any of `seps` outside brackets, parentheses and |abs| bars."""
    if "(" not in text and "[" not in text and "|" not in text and ")" not in text and "]" not in text:
        if seps == ",":
            return [p for p in (p.strip() for p in text.split(",")) if p]
        return [p.strip() for p in _separator(seps).split(text)[::2] if p.strip()]
    if seps == ",":
        # brackets that close within each piece (`v[2:3], s[4:5]`, the common case) need no gluing
        pieces = text.split(",")
        if all(_closed(p) for p in pieces):
            return [p for p in (p.strip() for p in pieces) if p]
    # Split everywhere, then glue pieces back (with the separator they were cut at) while a bracket or bar is open:
    # the common case (`v[0:3], v[4:7]`) costs a few str.count calls instead of a loop over characters.
    pieces = _separator(seps).split(text)
    parts, cur, depth, bars = [], "", 0, 0
    for i in range(0, len(pieces), 2):
        piece = pieces[i]
        cur += piece
        if "[" in piece or "]" in piece or "(" in piece or ")" in piece or "|" in piece:
            depth += piece.count("(") + piece.count("[") - piece.count(")") - piece.count("]")
            bars ^= piece.count("|") & 1
        if depth == 0 and not bars or i + 1 >= len(pieces):
            parts.append(cur)
            cur = ""
        else:
            cur += pieces[i + 1]
    return [p.strip() for p in parts if p.strip()]


def _closed(piece: str) -> bool:
    """Whether every bracket, parenthesis and |abs| bar opened in `piece` closes in it."""
    if "[" not in piece and "(" not in piece and "|" not in piece and "]" not in piece and ")" not in piece:
        return True
    return (piece.count("[") == piece.count("]") and piece.count("(") == piece.count(")") and not piece.count("|") & 1
            and piece.find("]") >= piece.find("[") and piece.find(")") >= piece.find("("))


# Name -> operand tables per Arch object (the Arch objects are module-level singletons).
_SPECIALS: dict[int, dict[str, Special]] = {}


def _specials(arch) -> dict[str, Special]:
    if id(arch) not in _SPECIALS:
        names = {name: Special(name, code) for code, name in arch.special.items()}
        names.update({name: Special(name, code, 2) for code, name in arch.wide_special.items() if name not in names})
        names["off"] = OFF
        _SPECIALS[id(arch)] = names
    return _SPECIALS[id(arch)]


# Arch object id -> token -> parsed operand. Operand values are immutable (frozen dataclasses, numbers), so a token seen
# before, as most register names and constants of a program are, is not parsed again. Keyed by the Arch object (they
# are module-level singletons), not its family name: gfx90a spells hwreg names differently from gfx940.
_PARSED: dict[int, dict[str, object]] = {}
_PARSED_LIMIT = 1 << 16


def parse_operand(arch, token: str) -> object:
    """One operand token as a value: register, special register, number, symbolic immediate or label."""
    parsed = _PARSED.get(id(arch))
    if parsed is None:
        parsed = _PARSED[id(arch)] = {}
    value = parsed.get(token)
    if value is None:
        value = _parse_operand(arch, token)
        if len(parsed) >= _PARSED_LIMIT:
            parsed.clear()
        parsed[token] = value
    return list(value) if type(value) is list else value


def _parse_operand(arch, token: str) -> object:
    token = token.strip()
    low = token.lower()
    if low.startswith("-") and not _NUMBER.match(low) and not _FLOAT.match(low):
        inner = parse_operand(arch, token[1:])
        return _negate(inner, token)
    if low.startswith("|") and low.endswith("|") and len(low) > 2:
        return _absolute(parse_operand(arch, token[1:-1]), token)
    for fn in ("abs", "neg"):
        if low.startswith(fn + "(") and low.endswith(")"):
            inner = parse_operand(arch, token[len(fn) + 1:-1])
            return _absolute(inner, token) if fn == "abs" else _negate(inner, token)
    if low.startswith("[") and low.endswith("]"):
        return [parse_operand(arch, item) for item in _split_top(token[1:-1], ",")]
    if match := _REG.match(low):
        kind = "a" if match.group(1) == "acc" else match.group(1)
        _check_vector_index(kind, int(match.group(2)), token)
        return Reg(kind, int(match.group(2)))
    if match := _HALF.match(low):
        return Reg("v", int(match.group(1)), half=match.group(2))
    if match := _RANGE.match(low):
        kind = "a" if match.group(1) == "acc" else match.group(1)
        first = int(match.group(2))
        last = int(match.group(3)) if match.group(3) is not None else first
        if last < first:
            raise EncodeError(f"register range {token} ends before it starts")
        _check_vector_index(kind, last, token)
        return Reg(kind, first, last - first + 1)
    specials = _specials(arch)
    if low in specials or _ALIASES.get(low) in specials:
        special = specials.get(low) or specials[_ALIASES[low]]
        if special.code in arch.unavailable:
            raise EncodeError(f"{special.name} register not available on {arch.name}")
        return special
    if (match := re.match(r"^src_(\d+)$", low)) is not None:
        return Special(low, int(match.group(1)))  # a register code with no name on this target, as printed by scalar_operand
    if _NUMBER.match(low):
        return asm_int(low)
    if _FLOAT.match(low):
        return float(low)
    if match := _ATTR.match(low):
        return Sym(int(match.group(1)) << 2 | "xyzw".index(match.group(2)), low)
    if "(" in low or "uc_version_" in low:
        return Sym(parse_symbolic(arch, token), token)
    if low in _EXPORT_TARGETS:
        return Sym(_EXPORT_TARGETS[low], low)
    if _LABEL.match(token):
        return Label(token)
    raise EncodeError(f"cannot read operand {token!r}")


def _check_vector_index(kind: str, last: int, token: str) -> None:
    """A VGPR or AGPR operand ends at register 255 at most (LLVM: register index is out of range)."""
    if kind in ("v", "a") and last > 255:
        raise EncodeError(f"register index is out of range: {token} (there are 256 {'AGPRs' if kind == 'a' else 'VGPRs'}, {kind}0-{kind}255)")


def _negate(value: object, token: str) -> object:
    if isinstance(value, Reg | Special):
        return -value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return with_mods(value, True, False)
    if hasattr(value, "neg") and hasattr(value, "value"):
        return with_mods(value.value, not value.neg, value.abs)  # type: ignore[attr-defined]
    raise EncodeError(f"cannot negate {token!r}")


def _absolute(value: object, token: str) -> object:
    if isinstance(value, Reg | Special):
        return abs(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return with_mods(value, False, True)
    raise EncodeError(f"cannot take |{token}|")


_MODIFIERS: dict[str, tuple[str, object]] = {}


def parse_modifier(token: str) -> tuple[str, object]:
    """`glc` -> ("glc", True); `offset:16` -> ("offset", 16); `op_sel:[1,0]` -> ("op_sel", [1, 0])."""
    parsed = _MODIFIERS.get(token)
    if parsed is None:
        parsed = _parse_modifier(token)
        if len(_MODIFIERS) >= _PARSED_LIMIT:
            _MODIFIERS.clear()
        _MODIFIERS[token] = parsed
    key, value = parsed
    return key, list(value) if isinstance(value, list) else value


# single-bit modifiers LLVM also takes spelled `no<name>` (the bit explicitly clear: `noa16`, `nosc0`, `nont`)
_NEGATABLE = frozenset(("glc", "slc", "dlc", "gds", "tfe", "lwe", "unorm", "r128", "a16", "d16", "sc0", "sc1", "nt", "lds", "da", "nv"))


def _parse_modifier(token: str) -> tuple[str, object]:
    if ":" not in token:
        low = token.lower()
        if low.startswith("no") and low[2:] in _NEGATABLE:
            return low[2:], False
        return low, True
    key, value = token.split(":", 1)
    key, value = key.strip().lower(), value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = [item.strip() for item in value[1:-1].split(",") if item.strip()]
        if all(_NUMBER.match(item) for item in items):
            return key, [asm_int(item) for item in items]
        return key, value
    if _NUMBER.match(value.lower()):
        return key, asm_int(value)
    return key, value


def parse_instruction(arch_name: str, text: str) -> tuple[str, list, dict[str, object]]:
    """Split one instruction line into (mnemonic, operands, modifiers) without building it."""
    return _parse_line(get_arch(arch_name), text)


def _parse_line(arch, text: str) -> tuple[str, list, dict[str, object]]:
    if "::" not in text:
        return _parse_half(arch, text.strip())
    halves = [half.strip() for half in text.split("::")]
    mnemonic, operands, modifiers = _parse_half(arch, halves[0])
    for half in halves[1:]:
        y_name, y_ops, y_mods = _parse_half(arch, half)
        operands += [VopdJoin(y_name), *y_ops]
        modifiers.update(y_mods)
    return mnemonic, operands, modifiers


# Arch object id -> mnemonic -> the format its operands are read for ("" for a name the tables do not know)
_LINE_FORMATS: dict[int, dict[str, str]] = {}


def _parse_half(arch, text: str) -> tuple[str, list, dict[str, object]]:
    head, _, rest = text.partition(" ")
    mnemonic = head.strip().lower()
    rest = rest.strip()
    if not rest:
        return mnemonic, [], {}
    kinds = _LINE_FORMATS.get(id(arch))
    if kinds is None:
        kinds = _LINE_FORMATS[id(arch)] = {}
    fmt = kinds.get(mnemonic)
    if fmt is None:
        index = op_index(arch.key)
        entry = index.get(mnemonic) or index.get(mnemonic + "_e32")
        fmt = kinds[mnemonic] = entry[0] if entry is not None else ""
        if len(kinds) >= _PARSED_LIMIT:
            kinds.clear()
    if fmt == "SOPK" and "|" in rest:  # `UC_VERSION_GFX12 | UC_VERSION_W32_BIT`: one operand
        rest = re.sub(r"\s*\|\s*", "|", rest)
    if fmt == "SOPP":
        return mnemonic, [Sym(parse_symbolic(arch, rest), rest) if is_symbolic(rest) else parse_operand(arch, rest)], {}
    leading: list = []
    if fmt in ("EXP", "VEXPORT"):
        # The export target is separated from the sources by a space, not a comma: `exp mrt0 v1, off, off, off`.
        target, _, rest = rest.partition(" ")
        leading.append(parse_operand(arch, target))
    pieces, mods_tokens = _pieces(rest)
    # LLVM also takes modifiers between comma-separated operands (`s3, format:[BUF_FMT_8_UNORM] offset:4095`, gfx9's
    # `s[4:7], dfmt:15, nfmt:2, s1`): those pieces are modifiers wherever they stand
    if len(pieces) == 1 and _is_modifier(pieces[0]):
        mods_tokens.insert(0, pieces.pop())
    elif ":" in rest and _KEYED_AFTER_COMMA.search(rest) is not None:
        mods_tokens[:0] = [piece for piece in pieces if _is_modifier(piece)]
        pieces = [piece for piece in pieces if not _is_modifier(piece)]
    # parse_operand and parse_modifier inlined for the tokens seen before (most of a program's): their caches read here
    parsed = _PARSED.get(id(arch))
    if parsed is None:
        parsed = _PARSED[id(arch)] = {}
    operands = leading
    for piece in pieces:
        value = parsed.get(piece)
        if value is None or type(value) is list:  # a list is copied: the caller may change it
            value = parse_operand(arch, piece)
        operands.append(value)
    modifiers: dict[str, object] = {}
    for token in mods_tokens:
        known = _MODIFIERS.get(token)
        if known is None or type(known[1]) is list:
            known = parse_modifier(token)
        modifiers[known[0]] = known[1]
    if len(modifiers) != len(mods_tokens):  # LLVM: not a valid operand (a second th:, offset:, ... was: the last one won)
        seen: set[str] = set()
        for key, _ in map(parse_modifier, mods_tokens):
            if key in seen:
                raise EncodeError(f"modifier {key} is given twice")
            seen.add(key)
    return mnemonic, operands, modifiers


# a space or bracket inside brackets (an image's address list `[v1, v2]`), or a bracket left open: such lines are
# split at the top level; commas inside brackets (`op_sel:[0,1]`) are stood in for while splitting
_BRACKET_TROUBLE = re.compile(r"\[[^\]]*(?:[\s\[]|$)")
_BRACKETED_COMMAS = re.compile(r"\[[^\]]*,[^\]]*\]")


def _hide_commas(match: re.Match) -> str:
    return match.group(0).replace(",", "\0")


def _pieces(rest: str) -> tuple[list[str], list[str]]:
    """The comma-separated operand texts of an instruction, and the space-separated modifier texts after the last
    one. The usual line (no parentheses, |abs| bars, or spaces inside brackets) is split with str.split (twice as
    fast on a large source); others at the top level (`_split_top`)."""
    if "(" not in rest and "|" not in rest and ("[" not in rest and "]" not in rest
                                                or rest.count("[") == rest.count("]") and _BRACKET_TROUBLE.search(rest) is None):
        hidden = "[" in rest and "\0" not in rest and _BRACKETED_COMMAS.search(rest) is not None
        if hidden:
            rest = _BRACKETED_COMMAS.sub(_hide_commas, rest)
        pieces = rest.split(",")
        tail = pieces.pop().split()
        if tail:
            pieces = [piece.strip() for piece in pieces]
            pieces.append(tail[0])
            if "" not in pieces:
                mods = tail[1:]
                if hidden:
                    pieces = [piece.replace("\0", ",") for piece in pieces]
                    mods = [mod.replace("\0", ",") for mod in mods]
                return pieces, mods
        if hidden:
            rest = rest.replace("\0", ",")
    pieces = _split_top(rest, ",")
    last = pieces[-1]
    tail = _split_top(last, " \t") if " " in last or "\t" in last else [last]
    pieces[-1:] = tail[:1]
    return pieces, tail[1:]


FLAG_MODIFIERS = frozenset(("glc", "slc", "dlc", "gds", "offen", "idxen", "clamp", "tfe", "lwe", "unorm", "r128", "a16", "d16", "sc0", "sc1",
                            "nt", "lds", "nv", "done", "row_en"))


_KEYED = re.compile(r"[A-Za-z_]\w*:")
# a keyed modifier standing where an operand could, after a comma: one search per line before looking closer
_KEYED_AFTER_COMMA = re.compile(r",\s*[A-Za-z_]\w*:")


def _is_modifier(token: str) -> bool:
    if ":" not in token:
        low = token.lower()
        return low in FLAG_MODIFIERS or (low.startswith("no") and low[2:] in _NEGATABLE)
    return _KEYED.match(token) is not None and not _RANGE.match(token.lower())


@cache
def _candidates(arch_name: str, mnemonic: str) -> list[str]:
    """The table names `mnemonic` may stand for, in the order to try them; an alias LLVM accepts (aliases.py) stands
    for its canonical name, with the same encoding suffix."""
    names = _table_candidates(arch_name, mnemonic)
    if not names:
        base, suffix = _split_suffix(mnemonic)
        if (canonical := alias_table(arch_name).get(base)) is not None:
            names = _table_candidates(arch_name, canonical + suffix)
    return names


def _table_candidates(arch_name: str, mnemonic: str) -> list[str]:
    index = op_index(arch_name)
    base = mnemonic
    short_only = False
    for suffix in ("_e64_dpp", "_dpp", "_sdwa"):
        if base.endswith(suffix):
            base = base.removesuffix(suffix) + ("_e64" if suffix == "_e64_dpp" else "")
            short_only = suffix != "_e64_dpp"  # `_dpp`/`_sdwa` name the VOP1/VOP2/VOPC forms: no promotion to VOP3
            break
    # Like LLVM, an unsuffixed mnemonic takes the short encoding when its operands fit.
    names = [base + "_e32", base] if short_only else [base + "_e32", base, base + "_e64", base.removesuffix("_e64")]
    found = [name for name in dict.fromkeys(names) if name in index]
    if short_only and found and index[found[0]][0] not in ("VOP1", "VOP2", "VOPC"):
        return []  # a VOP3-only op: its DPP form is spelled _e64_dpp
    if base.endswith("_e64"):  # the suffix asks for the VOP3 encoding: an op without one (v_swap_b32) has no _e64 spelling
        found = [name for name in found if index[name][0] not in ("VOP1", "VOP2", "VOPC")]
    return found


_SUFFIXES = ("_e64_dpp", "_dpp", "_sdwa", "_e32", "_e64")


def _split_suffix(mnemonic: str) -> tuple[str, str]:
    """`v_cmp_tru_f16_e64_dpp` -> ("v_cmp_tru_f16", "_e64_dpp")."""
    for suffix in _SUFFIXES:
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)], suffix
    return mnemonic, ""


def assemble_one(arch_name: str, text: str) -> Inst:
    """Assemble one instruction (no labels) into an Inst."""
    mnemonic, operands, modifiers = parse_instruction(arch_name, text)
    return _build_any(arch_name, mnemonic, operands, modifiers)


_SDWA_KEYS = ("dst_sel", "dst_unused", "src0_sel", "src1_sel")


def _build_any(arch_name: str, mnemonic: str, operands: list, modifiers: dict) -> Inst:
    if mnemonic.endswith("_sdwa") and not any(key in modifiers for key in _SDWA_KEYS):
        modifiers = {**modifiers, "src0_sel": "DWORD"}  # the suffix alone asks for the SDWA form, every select at its default
    names = _BUILDABLE.get((arch_name, mnemonic))
    if names is None:
        names = _buildable(arch_name, mnemonic)
        if len(_BUILDABLE) >= _PARSED_LIMIT:
            _BUILDABLE.clear()
        _BUILDABLE[(arch_name, mnemonic)] = names
    if type(names) is str:
        raise EncodeError(names)
    if len(names) == 1:
        return build(arch_name, names[0], operands, modifiers)
    errors: list[EncodeError] = []
    for name in names:
        try:
            return build(arch_name, name, operands, modifiers)
        except EncodeError as err:
            errors.append(err)
    # the short encoding's complaint ("use the _e64 form") is no help once the long one failed too: say why that did
    if len(errors) > 1 and "_e64 form" in str(errors[0]):
        raise errors[-1]
    raise errors[0]


# (target, mnemonic) -> the table names to try (`_buildable`), or why there are none
_BUILDABLE: dict[tuple[str, str], tuple[str, ...] | str] = {}


def _buildable(arch_name: str, mnemonic: str) -> tuple[str, ...] | str:
    """The table names `mnemonic` may stand for on `arch_name`, in the order to try them; or, when there is none, the
    message saying why."""
    names = _candidates(arch_name, mnemonic)
    if not names:
        base, suffix = _split_suffix(mnemonic)
        if suffix in ("_dpp", "_sdwa") and _table_candidates(arch_name, base):
            return (f"{mnemonic}: {base} has no VOP1/VOP2/VOPC form; its DPP form is {base}_e64_dpp" if suffix == "_dpp"
                    else f"{mnemonic}: {base} has no VOP1/VOP2/VOPC form to take SDWA")
        if suffix == "_e64" and _candidates(arch_name, base):
            return f"{mnemonic}: e64 variant of this instruction is not supported ({base} has no VOP3 encoding)"
        return f"unknown {get_arch(arch_name).name} instruction {mnemonic!r}"
    if (missing := missing_on(arch_name)) and not missing.isdisjoint(names):
        names = [name for name in names if name not in missing]
        if not names:
            return f"{mnemonic} is not an instruction of {arch_name} (other {get_arch(arch_name).name} targets have it)"
    return tuple(names)


def assemble(text: str, arch: str) -> bytes:
    """Assemble LLVM-syntax source (one instruction per line, `label:` lines, `;`/`//` comments) into machine code.

    Directives (lines starting with `.`) are ignored. Branch operands may be labels or signed dword offsets.
    Raises AsmError naming the line and the problem.
    """
    return b"".join([inst.to_bytes() for inst in assemble_insts(text, arch)])


_COMMENT = re.compile(r";|//")
_LINE_LABEL = re.compile(r"^([A-Za-z_.$][\w.$]*):(?!\S)\s*")


def _label_first(line: str) -> bool:
    """Whether `line` may start with a label: its first colon comes before any space (`offset:16` in an instruction's
    modifiers does not)."""
    space = line.find(" ")
    return space < 0 or line.index(":") < space


def assemble_insts(text: str, arch: str) -> list[Inst]:
    """Like `assemble`, but returns the instructions.

    Works in passes over the whole text (lines and labels, then parsing every line, then building every
    instruction, then branch targets) rather than line by line: each pass keeps one part of the assembler hot, which
    measured ~20% faster on a large source. Errors are still reported for the first bad line."""
    labels: dict[str, int] = {}
    lines: list[tuple[int, str]] = []  # (line number, instruction text)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = (_COMMENT.split(raw, maxsplit=1)[0] if ";" in raw or "//" in raw else raw).strip()
        while ":" in line and _label_first(line) and (match := _LINE_LABEL.match(line)) is not None:
            labels[match.group(1)] = len(lines)  # for now: the index of the instruction the label stands before
            line = line[match.end():]
        if not line or line.startswith("."):
            continue
        lines.append((lineno, line))
    parsed: list = []
    arch_object = get_arch(arch)
    for _, line in lines:
        try:
            parsed.append(_parse_line(arch_object, line))
        except AmdIsaError as err:
            parsed.append(err)
    insts: list[Inst] = []
    targets: list[str | None] = []
    for (lineno, line), item in zip(lines, parsed):
        try:
            if isinstance(item, AmdIsaError):
                raise item
            mnemonic, operands, modifiers = item
            target = None
            if operands and type(operands[-1]) is Label:
                target = operands[-1].name
                operands[-1] = 0
            insts.append(_build_any(arch, mnemonic, operands, modifiers))
        except AmdIsaError as err:
            raise AsmError(f"line {lineno}: {err} in `{line}`") from None
        targets.append(target)
    if not any(targets):
        return insts
    offsets = [0] * (len(insts) + 1)  # byte offset of each instruction, and of the end
    for i, inst in enumerate(insts):
        offsets[i + 1] = offsets[i] + inst.size()
    labels = {name: offsets[index] for name, index in labels.items()}
    for (lineno, line), where, inst, target in zip(lines, offsets, insts, targets):
        if target is not None:
            if target not in labels:
                raise AsmError(f"line {lineno}: undefined label {target!r} in `{line}`")
            delta = labels[target] - (where + 4)
            if delta % 4 or not -0x8000 <= delta // 4 <= 0x7FFF:
                raise AsmError(f"line {lineno}: branch to {target!r} is out of range or misaligned")
            inst.fields["simm16"] = (delta // 4) & 0xFFFF
    return insts
