"""Command line entry point for `navi-flash`."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

from . import __version__, romless
from .devices import TRANSPORTS, DeviceContext, list_devices, open_transport
from .errors import DisabledCommandError, NaviFlashError, UsageError, VerifyError
from .ifwi import check_ifwi, stream_ifwi
from .progress import ProgressReporter, reporter_for
from .psp import GATED_ERROR, PspMailbox
from .rom_aperture import dump_aperture
from .sim import PspScript, SimCard
from .sim.card import STATE_FILE

DISABLED_REASON = ("firmware writes are disabled: a stock reflash through the PSP failed validation (status 0xC, write to SPI error); "
                   "use `navi-flash romless flash` for recovery")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Report argparse errors as UsageError so they print one `error:` line and exit 1."""
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def number(text: str) -> int:
    """An integer in any Python literal base (`0x1000`, `4096`, `0o10`)."""
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def read_input(path: str) -> bytes:
    """Read a user-supplied file, turning OS errors into a one-line UsageError."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def build_parser() -> argparse.ArgumentParser:
    """The full CLI grammar."""
    parser = _Parser(prog="navi-flash", description="Navi31 SPI-flash recovery over an ASM24 USB-PCIe bridge, native PCI, or a simulator.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--transport", choices=TRANSPORTS, default="auto", help="auto tries USB then PCI (default), sim needs --sim")
    parser.add_argument("--device", type=number, default=0, help="device index for the selected transport (see `list`)")
    parser.add_argument("--prescale", type=number, default=8, help="ROM_SW SCK prescaler 0..15 (default 8)")
    parser.add_argument("--sim", metavar="DIR", help="simulated card directory (from `sim create`)")
    parser.add_argument("--unbind", action="store_true", help="PCI: detach a bound kernel driver first")
    commands = parser.add_subparsers(dest="command", required=True)

    rom = commands.add_parser("romless", help="direct ROM_SW access while the PSP boot loader is stalled")
    rom_commands = rom.add_subparsers(dest="action", required=True)
    info = rom_commands.add_parser("info", help="read JEDEC id, status registers and SFDP")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    read = rom_commands.add_parser("read", help="read a flash range (hex to stdout, or -o FILE)")
    read.add_argument("address", type=number, help="byte address (decimal or 0x...)")
    read.add_argument("size", type=number, help="bytes to read (at least 1)")
    read.add_argument("-o", "--output", help="write the bytes to this file instead of printing hex")
    dump = rom_commands.add_parser("dump", help="dump the whole 2 MiB flash")
    dump.add_argument("output", help="file to write (checked before the chip is read)")
    verify = rom_commands.add_parser("verify", help="compare the whole flash with an image")
    verify.add_argument("image", help="2 MiB image to compare with")
    verify.add_argument("--json", action="store_true", help="print the result as one JSON object")
    flash = rom_commands.add_parser("flash", help="write an image: backup, skip identical sectors, erase/program, verify")
    flash.add_argument("image", help="2 MiB image to write")
    flash.add_argument("--start-sector", type=number, default=0, help="first 4 KiB sector to write (default 0)")
    flash.add_argument("--sector-count", type=number, help="sectors to write (default: to the end of the chip)")
    flash.add_argument("--clear-cmp", action="store_true", help="clear SR2.CMP if it protects the whole array")
    flash.add_argument("--force", action="store_true", help="rewrite sectors that already match")
    flash.add_argument("--dry-run", action="store_true", help="plan the write and write nothing (with -v: the plan per sector)")
    flash.add_argument("-v", "--verbose", action="store_true", help="also list the sectors left as they were (identical) or planned")
    backup = flash.add_mutually_exclusive_group()
    backup.add_argument("--backup", metavar="FILE", help="where to save the pre-write backup (default: timestamped file here)")
    backup.add_argument("--no-backup", action="store_true", help="skip the double-read backup")
    flash.add_argument("--json", action="store_true", help="print the report (with the per-sector plan) as one JSON object")
    flash.add_argument("--yes", action="store_true", help="confirm the write")

    fw = commands.add_parser("fw", help="PSP firmware mailbox and ROM aperture access")
    fw_commands = fw.add_subparsers(dest="action", required=True)
    fw_commands.add_parser("probe", help="query the PSP mailbox without writing")
    fw_dump = fw_commands.add_parser("dump", help="exact 2 MiB raw dump through ROM_INDEX/ROM_DATA")
    fw_dump.add_argument("output", help="file to write (checked before the aperture is read)")
    ifwi_all = fw_commands.add_parser("ifwi-all", help="stream requested IFWI items until firmware reports completion")
    ifwi_all.add_argument("image", help="IFWI image the firmware requests items from")
    ifwi_all.add_argument("--yes", action="store_true", help="confirm the update")
    stream = fw_commands.add_parser("stream", help="(disabled) stream one PSP ROM item")
    stream.add_argument("item_type", type=number, help="PSP directory item type")
    stream.add_argument("image", help="IFWI image")
    stream.add_argument("--yes", action="store_true", help="confirm")
    for name, text in (("ifwi-step", "(disabled) stream the next requested IFWI item"), ("live-flash", "(disabled) PSP v13 live update")):
        sub = fw_commands.add_parser(name, help=text)
        sub.add_argument("image", help="IFWI image")
        sub.add_argument("--yes", action="store_true", help="confirm")

    commands.add_parser("list", help="list devices on every transport")

    sim = commands.add_parser("sim", help="simulated cards")
    sim_commands = sim.add_subparsers(dest="action", required=True)
    create = sim_commands.add_parser("create", help="create a simulated card in DIR")
    create.add_argument("dir", help="folder to create the card in")
    create.add_argument("--image", help="initial 2 MiB flash contents (default: erased)")
    create.add_argument("--cmp", action="store_true", help="set SR2.CMP (whole array protected)")
    create.add_argument("--gated", action="store_true", help="gate the ROM_SW engine, as after a healthy boot")
    create.add_argument("--no-rx-lag", action="store_true", help="RX window shows the current transaction")
    create.add_argument("--aperture", choices=("raw", "mirrored", "unavailable"), default="raw", help="ROM_INDEX/ROM_DATA behaviour")
    create.add_argument("--psp-script", help="JSON file scripting the PSP mailbox answers")
    return parser


class Cli:
    """Runs one parsed command; output goes to `out`, progress to `progress`."""

    def __init__(self, args: argparse.Namespace, context: DeviceContext, out) -> None:
        self.args, self.context, self.out = args, context, out
        json_mode = getattr(args, "json", False)
        # --json output is for machines: no progress at all, only the result on stdout and errors on stderr.
        self.progress: ProgressReporter = ProgressReporter() if json_mode else reporter_for(out)

    def say(self, message: str) -> None:
        """Print one line of command output."""
        print(message, file=self.out, flush=True)

    def transport(self):
        """Open the transport selected by the global options."""
        self.context.unbind = self.args.unbind
        return open_transport(self.args.transport, self.args.device, self.args.sim, self.context)

    def run(self) -> int:
        """Dispatch to the `cmd_<command>_<action>` handler; return the exit status."""
        args = self.args
        handler = getattr(self, f"cmd_{args.command}_{getattr(args, 'action', '')}".rstrip("_").replace("-", "_"))
        return handler() or 0

    # -- romless ---------------------------------------------------------------------------------------------------------

    def cmd_romless_info(self) -> None:
        """`romless info`: JEDEC, status registers, SFDP."""
        with self.transport() as transport, romless.open_flash(transport, self.args.prescale) as flash:
            info = romless.read_info(flash)
        if self.args.json:
            self.say(json.dumps({"transport": transport.description, **info.__dict__}))
            return
        self.say(f"chip: {info.chip}, {info.size // 1024} KiB ({info.size // info.sector_size} sectors of {info.sector_size // 1024} KiB)")
        self.say(f"JEDEC capture: {info.jedec} (C8 60 15 detected)")
        self.say(f"SR1/SR2/SR3: {info.sr1:02x}/{info.sr2:02x}/{info.sr3:02x}  CMP={'set' if info.cmp else 'clear'}  BP={info.block_protect >> 2:#x}")
        self.say(f"SFDP capture: {info.sfdp}  signature_offset={info.sfdp_signature_offset}")

    def cmd_romless_read(self) -> None:
        """`romless read ADDR SIZE [-o FILE]`."""
        args = self.args
        if args.size < 1:
            raise UsageError(f"read SIZE must be at least 1 byte, got {args.size}")
        if args.output:
            romless.check_output_path(Path(args.output), "output")
        with self.transport() as transport, romless.open_flash(transport, args.prescale) as flash:
            data = flash.read(args.address, args.size)
        if args.output:
            romless.write_file_atomic(Path(args.output), data)
            self.say(f"wrote {len(data):#x} bytes to {args.output}")
        else:
            self.say(data.hex())

    def cmd_romless_dump(self) -> None:
        """`romless dump OUT`: the whole chip through ROM_SW."""
        romless.check_output_path(Path(self.args.output), "dump")
        with self.transport() as transport, romless.open_flash(transport, self.args.prescale) as flash:
            data = romless.read_range(flash, 0, flash.spec.size, self.progress, "dump")
        romless.write_file_atomic(Path(self.args.output), data)
        self.say(f"wrote {self.args.output} sha256={hashlib.sha256(data).hexdigest()}")

    def cmd_romless_verify(self) -> None:
        """`romless verify IMG`."""
        image = read_input(self.args.image)
        romless.check_image(image)
        with self.transport() as transport, romless.open_flash(transport, self.args.prescale) as flash:
            result = romless.verify_image(flash, image, self.progress)
        if self.args.json:
            self.say(json.dumps(result.__dict__))
        if not result.ok:
            raise VerifyError(f"verify mismatch at {result.mismatch:#x}: flash={result.flash_byte:02x} image={result.image_byte:02x}")
        if not self.args.json:
            self.say(f"verified {result.size:#x} bytes sha256={result.sha256}")

    def cmd_romless_flash(self) -> None:
        """`romless flash IMG ... --yes`."""
        args = self.args
        if not args.yes and not args.dry_run:
            raise UsageError("refusing to write without --yes (or use --dry-run to see the plan)")
        image = read_input(args.image)
        romless.check_image(image)
        romless.sector_range(args.start_sector, args.sector_count)
        backup = None
        if not args.no_backup and not args.dry_run:
            backup = _new_backup_path(args.backup)
        with self.transport() as transport:
            report = romless.romless_flash(transport, image, start_sector=args.start_sector, sector_count=args.sector_count, clear_cmp=args.clear_cmp,
                                           force=args.force, dry_run=args.dry_run, backup=backup, prescale=args.prescale, progress=self.progress,
                                           verbose=args.verbose)
        if args.json:
            self.say(json.dumps(report.to_json()))
            return
        last = report.start_sector + report.sector_count - 1
        if report.dry_run:
            actions = [entry["action"] for entry in report.plan]
            summary = ", ".join(f"{action} {actions.count(action)}" for action in ("erase+program", "erase", "program", "skip") if action in actions)
            self.say(f"dry run of sectors {report.start_sector}..{last}: {summary}; nothing written")
        else:
            self.say(f"flashed sectors {report.start_sector}..{last}: written {report.written_sectors}, skipped {report.skipped} identical, "
                     f"erased {report.erased}, programmed {report.programmed_pages} pages; verified")

    # -- fw ------------------------------------------------------------------------------------------------------------

    def cmd_fw_probe(self) -> None:
        """`fw probe`: PSP mailbox state."""
        with self.transport() as transport:
            result = PspMailbox(transport).probe()
        for name, (error, response) in result.items():
            self.say(f"{name}: error={error:#x} response={response:#x}")
        if result["transfer_type"][0] == GATED_ERROR:
            print("update commands gated: reset card and do not initialize a driver/SOS", file=sys.stderr)

    def cmd_fw_dump(self) -> None:
        """`fw dump OUT`: ROM_INDEX/ROM_DATA raw dump."""
        romless.check_output_path(Path(self.args.output), "dump")
        with self.transport() as transport:
            data = dump_aperture(transport, self.progress)
        romless.write_file_atomic(Path(self.args.output), data)
        self.say(f"dumped {len(data):#x} bytes sha256={hashlib.sha256(data).hexdigest()}")

    def cmd_fw_ifwi_all(self) -> None:
        """`fw ifwi-all IMG --yes`."""
        if not self.args.yes:
            raise UsageError("refusing to stream without --yes")
        image = read_input(self.args.image)
        check_ifwi(image)
        with self.transport() as transport:
            stream_ifwi(PspMailbox(transport, self.say), image, self.say, self.progress)

    def _disabled(self) -> None:
        if not self.args.yes:
            raise UsageError("refusing to stream without --yes")
        raise DisabledCommandError(DISABLED_REASON)

    cmd_fw_stream = cmd_fw_ifwi_step = cmd_fw_live_flash = _disabled

    # -- list and sim ------------------------------------------------------------------------------------------------------

    def cmd_list(self) -> None:
        """`list`: devices on every transport."""
        entries, notes = list_devices(self.context, Path(self.args.sim) if self.args.sim else None)
        for entry in entries:
            auto = f"auto {entry.auto_index}" if entry.auto_index is not None else ""
            self.say(f"{entry.transport:4} {entry.index:2}  {auto:7}  {entry.name}  {entry.detail}")
        for note in notes:
            self.say(note)
        if not entries:
            self.say("no devices found")

    def cmd_sim_create(self) -> None:
        """`sim create DIR ...`."""
        args = self.args
        directory = Path(args.dir)
        if (directory / STATE_FILE).exists():
            raise UsageError(f"{directory} already holds a simulated card; remove it or pick another directory")
        image = read_input(args.image) if args.image else None
        script = None
        if args.psp_script:
            try:
                script = PspScript.from_json(json.loads(read_input(args.psp_script)))
            except (ValueError, TypeError) as exc:
                raise UsageError(f"invalid PSP script {args.psp_script}: {exc}") from exc
        SimCard.create(directory, image, cmp=args.cmp, gated=args.gated, rx_lag=not args.no_rx_lag, aperture=args.aperture, psp_script=script)
        self.say(f"created simulated card in {directory}; use `navi-flash --transport sim --sim {directory} ...`")


def _one_line(exc: BaseException) -> str:
    notes = getattr(exc, "__notes__", [])
    return "; ".join([str(exc), *notes]).replace("\n", " ")


def _new_backup_path(requested: str | None) -> Path:
    """Where a flash saves its backup: `--backup FILE`, which must not exist (a backup is never replaced: rerunning an
    interrupted flash would overwrite the original contents with the half-written state), else a new timestamped
    name here. The folder is checked before the card is touched."""
    if requested is not None:
        path = Path(requested)
        romless.check_output_path(path, "backup")
        if path.exists():
            raise UsageError(f"backup file {path} exists and may hold the chip's original contents: it is never overwritten; "
                             "name a new file with --backup (or move that one away)")
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path = next(p for n in range(1000) if not (p := Path(f"navi-flash-backup-{stamp}{f'-{n}' if n else ''}.bin")).exists())
    romless.check_output_path(path, "backup")
    return path


def main(argv: list[str] | None = None, context: DeviceContext | None = None, out=None) -> int:
    """Run the CLI; return the exit status (0, or 1 after printing `error: ...` to stderr)."""
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(argv)
        return Cli(args, context or DeviceContext(), out).run()
    except NaviFlashError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
    except KeyboardInterrupt as exc:
        detail = f" ({'; '.join(exc.__notes__)})" if getattr(exc, "__notes__", None) else ""
        print(f"error: interrupted{detail}; rerun the command to resume (identical sectors are skipped; a --backup FILE "
              "made is kept, so name a new one or pass --no-backup)", file=sys.stderr)
    except BrokenPipeError:  # `navi-flash ... | head`: the reader is gone; what is left of the output goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 -- a bug, not the input (hardware state was restored on the way out)
        if os.environ.get("DEBUG", "0") not in ("", "0"):
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} -- please report it with the command that caused it "
              "(DEBUG=1 prints the traceback)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
