"""Command line entry point for `amd-isa`: the `disasm`, `asm` and `sqtt` subcommands."""

import argparse
import sys

from . import __version__
from .arch import arch_of, target_of
from .assembler import assemble
from .codeobject import CodeObject
from .errors import AmdIsaError, DecodeError
from .inst import decode_one
from .outputs import quiet_closed_stdout, read_input, report_internal_error, write_output
from .sqtt import add_sqtt_command


def disassemble_listing(code: bytes, arch: str, base: int = 0, labels: dict[int, str] | None = None) -> list[str]:
    """Lines of an objdump-like listing; undecodable dwords are shown as `.long` so the rest still prints."""
    lines, offset = [], 0
    while offset < len(code):
        if labels and base + offset in labels:
            lines.append(f"{labels[base + offset]}:")
        try:
            inst = decode_one(code, arch, offset)
            size, text = inst.size(), str(inst)
        except DecodeError as err:
            size = min(4, len(code) - offset)
            text = f".long {int.from_bytes(code[offset:offset + size], 'little'):#010x}  ; {err}"
        padded = code[offset:offset + size].ljust(_align4(size), b"\0")
        words = " ".join(f"{int.from_bytes(padded[i:i + 4], 'little'):08X}" for i in range(0, len(padded), 4))
        lines.append(f"  {text:<60} // {base + offset:012X}: {words}")
        offset += size
    return lines


def _align4(size: int) -> int:
    return (size + 3) // 4 * 4


def cmd_disasm(args: argparse.Namespace) -> int:
    """Disassemble a code object (its .text, with kernel labels) or, with --raw, a file of raw machine code."""
    blob = read_input(args.file)
    if args.raw or not blob.startswith(b"\x7fELF"):
        if not args.raw:
            raise AmdIsaError(f"{args.file} is not an ELF code object; pass --raw to disassemble it as raw machine code")
        arch = arch_of(args.arch or "gfx1100")
        for line in disassemble_listing(blob, arch):
            print(line)
        return 0
    co = CodeObject.from_bytes(blob)
    target = args.arch or co.target
    if not target:
        raise AmdIsaError("the code object names no known gfx target; pass --arch")
    labels = {sym.value: name for name, sym in co.symbols.items() if sym.section == ".text"}
    print(f"; {args.file}: {target_of(target)}, .text at {co.text_addr:#x}, {len(co.text)} bytes")
    for name, fields in co.kernels.items():
        print(f"; kernel {name}: " + ", ".join(f"{k}={v:#x}" for k, v in fields.items()))
    for line in disassemble_listing(co.text, arch_of(target), co.text_addr, labels):
        print(line)
    return 0


def cmd_asm(args: argparse.Namespace) -> int:
    """Assemble LLVM-syntax source into a code object with one kernel (or raw bytes with --raw)."""
    source = read_input(args.file).decode()
    target = target_of(args.arch)
    code = assemble(source, target)
    data = code if args.raw else CodeObject.from_code(code, target, args.kernel).to_bytes()
    write_output(args.output, data)
    where = "standard output" if args.output == "-" else args.output
    print(f"wrote {where} ({len(code)} bytes of code{'' if args.raw else f', kernel {args.kernel}'})", file=sys.stderr)
    return 0


def add_disasm_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `amd-isa disasm`."""
    p = subparsers.add_parser("disasm", help="disassemble a code object or raw machine code")
    p.add_argument("file", help="code object (ELF) or, with --raw, raw machine code; - reads standard input")
    p.add_argument("--arch", help="gfx target or family (default: from the code object; gfx1100 for --raw)")
    p.add_argument("--raw", action="store_true", help="treat FILE as raw machine code, not an ELF code object")
    p.set_defaults(func=cmd_disasm)


def add_asm_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `amd-isa asm`."""
    p = subparsers.add_parser("asm", help="assemble LLVM-syntax assembly")
    p.add_argument("file", help="assembly source (.s); - reads standard input")
    p.add_argument("--arch", required=True, help="gfx target, e.g. gfx1100, gfx1200, gfx90a, gfx942")
    p.add_argument("-o", "--output", required=True, help="output path; - writes standard output")
    p.add_argument("--raw", action="store_true", help="write raw machine code instead of a code object")
    p.add_argument("--kernel", default="kernel", help="kernel name in the code object (default: kernel)")
    p.set_defaults(func=cmd_asm)


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level parser and its subparsers (so further commands can be added with one call)."""
    parser = argparse.ArgumentParser(prog="amd-isa", description=sys.modules[__package__].__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_disasm_command(subparsers)
    add_asm_command(subparsers)
    add_sqtt_command(subparsers)
    return parser, subparsers


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes print `error: ...` and return 1."""
    parser, _ = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return args.func(args)
    except BrokenPipeError:  # (an OSError: caught first) the reader of our output is gone, as with `| head`
        quiet_closed_stdout()
        return 0
    except (AmdIsaError, OSError, UnicodeDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 -- a bug, not the input: one line, the traceback only with DEBUG=1
        return report_internal_error(err)


if __name__ == "__main__":
    sys.exit(main())
