"""Generate `amd_isa/tables/<arch>.py` (encodings, opcodes, operand info) from tinygrad's AMD ISA autogen files.

tinygrad derives those files from AMD's machine-readable ISA XML; we read them only as a source of facts
(bit ranges, opcode numbers, operand widths) and write plain data tables our own encoder/decoder reads.

Usage: python tools/gen_tables.py GIT_DIR   (GIT_DIR: a bare clone of github.com/tinygrad/tinygrad)
"""

import ast
import pprint
import subprocess
import sys
from pathlib import Path

ARCHS = ("rdna3", "rdna4", "cdna")
OUT = Path(__file__).resolve().parent.parent / "src" / "amd_isa" / "tables"
# Variant classes that add fields after the base dword(s); LIT and SDST variants are handled generically in code.
VARIANT_SUFFIXES = ("_DPP16", "_DPP8", "_SDWA", "_SDWA_SDST", "_MFMA")


def git_show(git_dir: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True, capture_output=True, text=True).stdout


def parse_enums(src: str) -> dict[str, dict[str, int]]:
    """{EnumClass: {CANONICAL_NAME: value}} plus aliases resolved under key '__alias__' of each class."""
    enums: dict[str, dict[str, int]] = {}
    for node in ast.parse(src).body:
        if not isinstance(node, ast.ClassDef):
            continue
        members: dict[str, int] = {}
        aliases: dict[str, int] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if isinstance(stmt.value, ast.Constant):
                    members[name] = stmt.value.value
                elif isinstance(stmt.value, ast.Name):
                    aliases[name] = members[stmt.value.id]
        enums[node.name] = members
        enums[node.name + "__alias__"] = aliases
    return enums


def _bits(call: ast.Call) -> tuple[int, int]:
    hi, lo = call.args[0], call.args[1]
    assert isinstance(hi, ast.Constant) and isinstance(lo, ast.Constant)
    return hi.value, lo.value


def parse_formats(src: str) -> dict[str, dict]:
    """{format: {"base": parent or None, "encoding": (hi, lo, value), "fields": {name: (hi, lo)}, "fixed": {...}, "ops": [names]}}."""
    formats: dict[str, dict] = {}
    for node in ast.parse(src).body:
        if not isinstance(node, ast.ClassDef):
            continue
        parent = node.bases[0].id if isinstance(node.bases[0], ast.Name) else None
        fmt: dict = {"base": None if parent == "Inst" else parent, "encoding": None, "fields": {}, "fixed": {}, "ops": None, "enum": None}
        for stmt in node.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue
            name = stmt.targets[0].id
            call = stmt.value
            kind = call.func.id
            hi, lo = _bits(call)
            if kind == "FixedBitField":
                value = call.args[2].value
                if name == "encoding":
                    fmt["encoding"] = (hi, lo, value)
                else:
                    fmt["fixed"][name] = (hi, lo, value)
                continue
            if kind == "EnumBitField":
                fmt["enum"] = call.args[2].id
                if len(call.args) > 3:
                    fmt["ops"] = sorted(elt.attr for elt in call.args[3].elts)
            default = None
            for kw in call.keywords:
                if kw.arg == "default":
                    default = kw.value.value if isinstance(kw.value, ast.Constant) else kw.value.id
            fmt["fields"][name] = (hi, lo) if default is None else (hi, lo, default)
        formats[node.name] = fmt
    return formats


def _attr_name(node: ast.AST) -> str:
    assert isinstance(node, ast.Attribute)
    return node.attr


def parse_operands(src: str) -> dict[tuple[str, str], dict[str, tuple[int, str, str]]]:
    """{(EnumClass, NAME): {field: (bits, optype, fmt)}}."""
    tree = ast.parse(src)
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "OPERANDS")
    out = {}
    for key, value in zip(table.keys, table.values, strict=True):
        enum_cls, name = key.value.id, key.attr
        fields = {}
        for fkey, fval in zip(value.keys, value.values, strict=True):
            fmt, bits, optype = fval.elts
            fields[fkey.value] = (bits.value, _attr_name(optype).removeprefix("OPR_"), _attr_name(fmt).removeprefix("FMT_").removeprefix("NUM_"))
        out[(enum_cls, name)] = fields
    return out


def build(git_dir: str, arch: str) -> str:
    base = f"tinygrad/runtime/autogen/amd/{arch}"
    enums = parse_enums(git_show(git_dir, f"{base}/enum.py"))
    formats = parse_formats(git_show(git_dir, f"{base}/ins.py"))
    operands = parse_operands(git_show(git_dir, f"{base}/operands.py"))

    out_formats: dict[str, dict] = {}
    for name, fmt in formats.items():
        if fmt["base"] is None:
            enc = fmt["encoding"]
            hi_bit = max([enc[0]] + [f[0] for f in fmt["fields"].values()])
            out_formats[name] = {"size": (hi_bit // 32 + 1) * 4, "encoding": enc, "fields": fmt["fields"], "fixed": fmt["fixed"], "enum": fmt["enum"]}
        elif name.removeprefix(fmt["base"]) in VARIANT_SUFFIXES:
            parent = formats[fmt["base"]]
            # A variant reuses some base bits for other fields (MFMA's acc/abid sit on VOP3P's op_sel_hi bits): drop the base field.
            own = list(fmt["fields"].values())
            kept = {n: f for n, f in parent["fields"].items() if n in fmt["fields"] or not any(f[1] <= o[0] and o[1] <= f[0] for o in own)}
            fields = {**kept, **fmt["fields"]}
            hi_bit = max(f[0] for f in fields.values())
            entry = {"size": (hi_bit // 32 + 1) * 4, "fields": fields}
            if fmt["ops"] is not None and name.endswith("_MFMA"):
                entry["ops"] = sorted(enums[fmt["enum"]][op] for op in fmt["ops"])
            out_formats[name] = entry

    # gfx11 MIMG with NSA=1 carries one more dword holding the 2nd..5th address VGPRs (RDNA3 ISA, "MIMG-NSA");
    # tinygrad's tables skip NSA, so the variant is described here.
    if "MIMG" in out_formats and arch == "rdna3":
        nsa_fields = {**out_formats["MIMG"]["fields"], **{f"vaddr{i}": (63 + 8 * i, 56 + 8 * i) for i in range(1, 5)}}
        out_formats["MIMG_NSA"] = {"size": 12, "fields": nsa_fields}

    out_ops: dict[str, dict[int, tuple]] = {}
    # Operands the XML leaves out (the ISA document lists them): the subvector loop markers take an SGPR and a branch target.
    operand_fixes = {("SOPK", "S_SUBVECTOR_LOOP_BEGIN"): (("sdst", 32, "SDST", "B32"), ("simm16", 16, "LABEL", "I16")),
                     ("SOPK", "S_SUBVECTOR_LOOP_END"): (("sdst", 32, "SDST", "B32"), ("simm16", 16, "LABEL", "I16")),
                     # CDNA4's MFMA scale load reads two scale sources (the scaled MFMA pairs repeat them as scale_src0/1).
                     ("VOP3P", "V_MFMA_LD_SCALE_B32"): (("src0", 32, "SRC_SIMPLE", "B32"), ("src1", 32, "SRC_SIMPLE", "B32"))}
    for name, fmt in out_formats.items():
        enum_cls = fmt.get("enum")
        if enum_cls is None:
            continue
        members = enums[enum_cls]
        aliases = enums[enum_cls + "__alias__"]
        value_to_info: dict[int, dict] = {}
        for (cls, opname), info in operands.items():
            if cls != enum_cls:
                continue
            value = members.get(opname, aliases.get(opname))
            if value is not None:
                value_to_info[value] = info
        ops = {}
        for opname, value in members.items():
            info = dict(value_to_info.get(value, {}))
            # The XML names the first source of some promoted VOP1 ops "vsrc0"; in VOP3/VOP3P encodings it is the src0 field.
            if name in ("VOP3", "VOP3SD", "VOP3P") and "vsrc0" in info and "src0" not in info:
                info["src0"] = info.pop("vsrc0")
            entry = tuple(sorted((f, bits, optype, dfmt) for f, (bits, optype, dfmt) in info.items()))
            ops[value] = (opname.lower(), operand_fixes.get((name, opname), entry))
        out_ops[name] = dict(sorted(ops.items()))
    # Exports have no opcode field: one instruction per encoding (LLVM spells it `exp` on gfx11, `export` on gfx12).
    export_operands = tuple((f"vsrc{i}", 32, "VGPR", "B32") for i in range(4))
    for fmt_name, mnemonic in (("EXP", "exp"), ("VEXPORT", "export")):
        if fmt_name in out_formats and "op" not in out_formats[fmt_name]["fields"]:
            out_ops[fmt_name] = {0: (mnemonic, export_operands)}
    for fmt in out_formats.values():
        fmt.pop("enum", None)

    special = {key: dict(sorted(enums[key].items(), key=lambda kv: kv[1])) for key in ("HWREG", "MSG") if key in enums}
    lines = [
        f'"""{arch.upper()} encoding tables, generated by tools/gen_tables.py from tinygrad\'s AMD ISA autogen files. Do not edit."""',
        "",
        "# FORMATS: name -> size (bytes, without literal), encoding (hi, lo, value) identifying it, fields {name: (hi, lo[, default])},",
        "# fixed {name: (hi, lo, value)}; variant formats (_DPP16, _DPP8, _SDWA, _MFMA) list all fields of base plus extension.",
        "# OPS: format -> opcode -> (mnemonic, ((field, bits, operand type, data format), ...)).",
        "",
        "FORMATS = " + pprint.pformat(out_formats, width=140, sort_dicts=False),
        "",
        "OPS = " + pprint.pformat(out_ops, width=140, sort_dicts=False),
        "",
    ]
    for key, values in special.items():
        lines += [f"{key} = " + pprint.pformat({v: k for k, v in values.items()}, width=140), ""]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    for arch in ARCHS:
        (OUT / f"{arch}.py").write_text(build(sys.argv[1], arch))
        print(f"wrote {OUT / f'{arch}.py'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
