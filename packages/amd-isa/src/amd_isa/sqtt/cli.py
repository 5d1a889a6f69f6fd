"""The `amd-isa sqtt` subcommand: print a thread trace, its instruction table, or write a timeline.

    amd-isa sqtt TRACE... [--elf CODE_OBJECT] [--arch gfx1100] [--all] [--insts] [--json] [--timeline out.json]

Tables are drawn with rich when it is installed, as plain aligned text otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..codeobject import CodeObject
from ..errors import AmdIsaError, CodeObjectError
from .decoder import check_stream, decode, stream_layout
from .errors import SqttDecodeError
from .mapping import map_insts
from .printing import INST_COLUMNS, format_inst_table, inst_rows, is_noise, packet_lines, packet_record
from .timeline import trace_events, write_timeline

try:
    from rich.console import Console
    from rich.table import Table
except ImportError:  # rich is optional: without it the tables are plain text
    Console = Table = None  # type: ignore[assignment,misc]


class _UsageError(Exception):
    """A mistake in the command line or its files, reported as `error: ...`."""


def add_sqtt_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register the `sqtt` subcommand on an argparse subparsers object; it runs `run_sqtt(args)` (set as `func`)."""
    parser = subparsers.add_parser(
        "sqtt", help="decode SQTT thread traces", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="raw SQTT byte stream of one shader engine (.sqtt)")
    parser.add_argument("--elf", metavar="CODE_OBJECT", help="code object of the traced kernel: map packets to its instructions")
    parser.add_argument("--arch", help="gfx target or family (gfx1100, gfx1200, gfx950, rdna3...); default: from the trace's header")
    parser.add_argument("--all", action="store_true", help="also show the noise packets (NOP, clock, REG, EVENT, ...)")
    parser.add_argument("--insts", action="store_true", help="print the instruction table (needs --elf)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--timeline", metavar="OUT_JSON", help="write a Chrome trace-event file of instruction issues (needs --elf)")
    parser.add_argument("--force", action="store_true",
                        help="decode a file that does not read as an SQTT trace (no leading LAYOUT_HEADER, a clock that runs backwards)")
    parser.set_defaults(func=run_sqtt)
    return parser


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise _UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None


def _load_code(path: str) -> CodeObject:
    try:
        return CodeObject.from_bytes(_read(path, "code object"))
    except CodeObjectError as e:
        raise _UsageError(f"--elf {path}: not a usable code object: {e}") from None


def run_sqtt(args: argparse.Namespace, out: Any = None) -> int:
    """Run the subcommand; prints `error: ...` to stderr and returns 1 on a user mistake, else returns 0."""
    out = out or sys.stdout
    try:
        _run(args, out)
    except (_UsageError, AmdIsaError) as e:  # SqttError is an AmdIsaError
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace, out: Any) -> None:
    if (args.insts or args.timeline) and not args.elf:
        raise _UsageError("--insts and --timeline need the kernel's code object: add --elf CODE_OBJECT")
    code = _load_code(args.elf) if args.elf else None
    events: list[dict[str, Any]] = []
    documents: list[dict[str, Any]] = []
    for pid, path in enumerate(args.traces):
        blob = _read(path, "trace")
        if not getattr(args, "force", False):
            try:
                check_stream(blob, args.arch)
            except SqttDecodeError as e:
                raise _UsageError(f"{path}: {e} (--force decodes it anyway)") from None
        target = args.arch or (code.target if code is not None and code.target else stream_layout(blob))
        items = list(map_insts(blob, code, target)) if code is not None else [(p, None) for p in decode(blob, args.arch)]
        if args.timeline:
            events += trace_events(items, target, pid=pid, process_name=Path(path).name)
        if args.json:
            documents.append(_json_document(path, items, args))
        elif args.insts:
            _print_insts(path, items, out)
        elif not args.timeline:
            _print_packets(path, items, args.all, out)
    if args.json:
        json.dump(documents, out, indent=1)
        out.write("\n")
    if args.timeline:
        try:
            write_timeline(args.timeline, events)
        except OSError as e:
            raise _UsageError(f"cannot write timeline {args.timeline}: {e.strerror or e}") from None
        print(f"wrote {sum(e['ph'] == 'X' for e in events)} instruction slices to {args.timeline}", file=sys.stderr)


def _json_document(path: str, items: list, args: argparse.Namespace) -> dict[str, Any]:
    if args.insts:
        return {"trace": path, "insts": [dict(zip(INST_COLUMNS, _row_values(r))) for r in inst_rows(items)]}
    return {"trace": path, "packets": [packet_record(p, info) for p, info in items if args.all or not is_noise(p)]}


def _row_values(row: Any) -> tuple:
    return (row.time, row.pc, row.inst, row.type, row.duration, row.stall)


def _print_insts(path: str, items: list, out: Any) -> None:
    rows = inst_rows(items)
    if Table is None:
        print(f"== {path}", file=out)
        print(format_inst_table(rows), file=out)
        return
    table = Table(*INST_COLUMNS, title=path)
    for row in rows:
        table.add_row(str(row.time), f"0x{row.pc:x}", row.inst, row.type, *("" if v is None else str(v) for v in (row.duration, row.stall)))
    Console(file=out, width=160).print(table)


def _print_packets(path: str, items: list, show_all: bool, out: Any) -> None:
    print(f"== {path}", file=out)
    for line in packet_lines(items, show_all):
        print(line, file=out)


def main(argv: list[str] | None = None) -> int:
    """Run `amd-isa sqtt` with `argv` (the arguments after `sqtt`) on a parser of its own; returns the exit code."""
    parser = argparse.ArgumentParser(prog="amd-isa")
    add_sqtt_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sqtt", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)

