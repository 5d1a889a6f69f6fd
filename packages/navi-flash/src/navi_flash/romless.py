"""ROM_SW recovery operations: info, read, dump, verify and a resumable, verified flash with a safety net.

Each function takes an open `SpiFlash`; `romless_flash` opens the session itself so that write-disable and register
restore run on every exit path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import chips
from .chips import ChipSpec
from .errors import FlashTimeoutError, ImageError, NaviFlashError, ProtectionError, UsageError, VerifyError
from .progress import ProgressReporter
from .rom_sw import RomSwSession
from .spi_flash import SpiFlash
from .transport import Transport


@contextmanager
def open_flash(transport: Transport, prescale: int = 8, spec: ChipSpec = chips.GD25LQ16E, *, writing: bool = False) -> Iterator[SpiFlash]:
    """A checked `SpiFlash` inside a ROM_SW session; on exit write-disable (always when `writing`) and restore registers."""
    with RomSwSession(transport, prescale) as session:
        flash = SpiFlash(session, spec)
        flash.wrote = writing
        try:
            _settle(flash)
            flash.check_id()
            yield flash
        except BaseException as exc:
            _disable_quietly(flash, exc)
            raise
        if flash.wrote:
            flash.write_disable()


def _settle(flash: SpiFlash) -> None:
    """Let an erase or program left running by an interrupted earlier run finish: a BUSY chip ignores RDID and WRDI."""
    try:
        flash.wait_idle(3.0)
    except FlashTimeoutError:
        pass  # a missing or miswired chip also reads as BUSY; the JEDEC check that follows says what is wrong


def _disable_quietly(flash: SpiFlash, original: BaseException) -> None:
    if not flash.wrote:
        return
    try:
        _settle(flash)
        flash.write_disable()
    except NaviFlashError as cleanup:
        original.add_note(f"also failed to issue write-disable: {cleanup}")


@dataclass
class FlashInfo:
    """What `romless info` reports."""

    chip: str
    size: int
    sector_size: int
    jedec: str
    sr1: int
    sr2: int
    sr3: int
    cmp: bool
    block_protect: int
    sfdp: str
    sfdp_signature_offset: int


def read_info(flash: SpiFlash) -> FlashInfo:
    """Identify the chip and read its status registers and SFDP header."""
    sr1, sr2, sr3 = flash.status(), flash.status(chips.OP_RDSR2), flash.status(chips.OP_RDSR3)
    sfdp = flash.sfdp(24)
    spec = flash.spec
    return FlashInfo(chip=spec.name, size=spec.size, sector_size=spec.sector_size, jedec=flash.rdid().hex(), sr1=sr1, sr2=sr2, sr3=sr3,
                     cmp=bool(sr2 & flash.spec.sr2_cmp_bit),
                     block_protect=sr1 & flash.spec.sr1_bp_mask, sfdp=sfdp.hex(), sfdp_signature_offset=sfdp.find(b"SFDP"))


def read_range(flash: SpiFlash, address: int, size: int, progress: ProgressReporter | None = None, label: str = "read") -> bytes:
    """Read `size` bytes at `address`, sector by sector, reporting progress."""
    progress = progress or ProgressReporter()
    progress.start(label, size, flash.spec.sector_size)
    output = bytearray()
    try:
        while len(output) < size:
            chunk = min(flash.spec.sector_size - (address + len(output)) % flash.spec.sector_size, size - len(output))
            output += flash.read(address + len(output), chunk)
            progress.advance(chunk)
    finally:
        progress.finish()
    return bytes(output)


def check_image(image: bytes, spec: ChipSpec = chips.GD25LQ16E) -> None:
    """Raise ImageError unless `image` is exactly one chip."""
    if len(image) != spec.size:
        raise ImageError(f"image must be exactly {spec.size:#x} bytes, got {len(image):#x}; pass a full {spec.size >> 20} MiB dump")


def first_difference(got: bytes, wanted: bytes) -> int:
    """Index of the first differing byte (len of the shorter if one is a prefix)."""
    return next((i for i, (a, b) in enumerate(zip(got, wanted, strict=False)) if a != b), min(len(got), len(wanted)))


@dataclass
class VerifyResult:
    """Outcome of `verify`: `mismatch` is the first differing flash address, or None."""

    ok: bool
    size: int
    sha256: str
    mismatch: int | None = None
    flash_byte: int | None = None
    image_byte: int | None = None


def verify_image(flash: SpiFlash, image: bytes, progress: ProgressReporter | None = None, start: int = 0, end: int | None = None) -> VerifyResult:
    """Compare flash[start:end] with image[start:end]; stop at the first mismatching sector."""
    end = len(image) if end is None else end
    progress = progress or ProgressReporter()
    progress.start("verify", end - start, flash.spec.sector_size)
    digest = hashlib.sha256()
    try:
        for address in range(start, end, flash.spec.sector_size):
            size = min(flash.spec.sector_size, end - address)
            got, wanted = flash.read(address, size), image[address : address + size]
            digest.update(got)
            if got != wanted:
                index = first_difference(got, wanted)
                return VerifyResult(False, end - start, digest.hexdigest(), address + index, got[index], wanted[index])
            progress.advance(size)
    finally:
        progress.finish()
    return VerifyResult(True, end - start, digest.hexdigest())


def backup_flash(flash: SpiFlash, path: Path, progress: ProgressReporter | None = None) -> str:
    """Read the whole chip twice, require identical hashes, write `path` atomically; return the sha256."""
    first = read_range(flash, 0, flash.spec.size, progress, "backup (read 1/2)")
    second = read_range(flash, 0, flash.spec.size, progress, "backup (read 2/2)")
    digest = hashlib.sha256(first).hexdigest()
    if hashlib.sha256(second).hexdigest() != digest:
        where = first_difference(first, second)
        raise VerifyError(f"two backup reads differ at {where:#x}; the link is unreliable, try a higher --prescale before writing")
    write_file_atomic(path, first)
    return digest


def write_file_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file so no half-written output is left behind."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.partial")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


@dataclass
class SectorPlan:
    """What flashing one sector needs: `erase`, and the page offsets (within the sector) to program."""

    sector: int
    erase: bool
    pages: list[int]

    @property
    def action(self) -> str:
        """`skip`, `program`, `erase` or `erase+program`."""
        if not self.erase:
            return "program" if self.pages else "skip"
        return "erase+program" if self.pages else "erase"


def plan_sector(sector: int, current: bytes, wanted: bytes, page_size: int, force: bool = False) -> SectorPlan:
    """Decide the cheapest operations that turn `current` into `wanted` (NOR programming can only clear bits)."""
    if current == wanted and not force:
        return SectorPlan(sector, False, [])
    want = int.from_bytes(wanted, "big")
    erase = force or int.from_bytes(current, "big") & want != want
    blank = b"\xff" * page_size
    pages = []
    for offset in range(0, len(wanted), page_size):
        page = wanted[offset : offset + page_size]
        if page == blank:
            continue
        if erase or current[offset : offset + page_size] != page:
            pages.append(offset)
    return SectorPlan(sector, erase, pages)


@dataclass
class FlashReport:
    """Outcome of `romless flash` (also its --json form)."""

    start_sector: int
    sector_count: int
    dry_run: bool
    skipped: int = 0
    erased: int = 0
    programmed_pages: int = 0
    written_sectors: int = 0
    cleared_cmp: bool = False
    backup: str | None = None
    backup_sha256: str | None = None
    verified: bool = False
    plan: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """A JSON-safe dict."""
        return asdict(self)


def sector_range(start: int | None, count: int | None, spec: ChipSpec = chips.GD25LQ16E) -> tuple[int, int]:
    """Validate --start-sector/--sector-count; default is the rest of the chip from `start`."""
    total = spec.sector_count
    start = start or 0
    if not 0 <= start < total:
        raise UsageError(f"--start-sector {start} is outside the chip: it has sectors 0..{total - 1}")
    count = total - start if count is None else count
    if not 1 <= count <= total - start:
        raise UsageError(f"--sector-count {count} does not fit: from sector {start} the chip has {total - start} sector(s) left (1..{total - start})")
    return start, count


def check_output_path(path: Path, what: str) -> None:
    """Refuse an output path that cannot be written before anything is read from the card (a whole-chip read takes
    minutes over USB): its folder must exist and be writable, and the path must not be a folder."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"cannot write {what} {path}: it is a folder")
    if not folder.is_dir():
        raise UsageError(f"cannot write {what} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: folder {folder} is not writable")


def check_protection(flash: SpiFlash, clear_cmp: bool) -> bool:
    """Refuse to write under BP/CMP protection; return whether CMP must be cleared first."""
    bp, cmp = flash.protection()
    if bp and cmp:
        raise ProtectionError(f"SR1 block-protect bits are set (BP field {bp >> 2:#x}) together with SR2.CMP; clearing CMP would only "
                              "swap the protected half, so navi-flash refuses to write")
    if bp:
        raise ProtectionError(f"SR1 block-protect bits are set (BP field {bp >> 2:#x}); navi-flash does not clear BP, so it refuses to write")
    if cmp and not clear_cmp:
        raise ProtectionError("SR2.CMP protects the whole array; rerun with --clear-cmp to clear it")
    return cmp


def flash_sectors(flash: SpiFlash, image: bytes, start: int, count: int, report: FlashReport, *, force: bool = False,
                  progress: ProgressReporter | None = None, verbose: bool = False) -> None:
    """Per sector: read, skip if identical, erase if needed, program non-blank pages, read back and verify at once.
    Written sectors are noted as they complete; skipped (and dry-run planned) ones only when `verbose`."""
    spec = flash.spec
    progress = progress or ProgressReporter()
    progress.start("dry run" if report.dry_run else "flash", count * spec.sector_size, spec.sector_size)
    try:
        for sector in range(start, start + count):
            address = sector * spec.sector_size
            wanted = image[address : address + spec.sector_size]
            plan = plan_sector(sector, flash.read(address, spec.sector_size), wanted, spec.page_size, force)
            report.plan.append({"sector": sector, "address": address, "action": plan.action, "pages": len(plan.pages)})
            if report.dry_run or plan.action == "skip":
                report.skipped += plan.action == "skip"
                if verbose:  # else the summary counts them: hundreds of identical-sector lines hid what changed
                    progress.note(f"{'plan' if report.dry_run else 'skip'} sector {sector:03d} @{address:#07x}: {plan.action}"
                                  + (f" ({len(plan.pages)} pages)" if plan.pages else ""))
                progress.advance(spec.sector_size)
                continue
            if plan.erase:
                flash.erase_sector(address)
                report.erased += 1
            for offset in plan.pages:
                flash.program_page(address + offset, wanted[offset : offset + spec.page_size])
                report.programmed_pages += 1
            got = flash.read(address, spec.sector_size)
            if got != wanted:
                index = first_difference(got, wanted)
                raise VerifyError(f"sector {sector} did not verify at {address + index:#x}: flash={got[index]:02x} image={wanted[index]:02x}; "
                                  "rerun it to retry (with a new --backup name, or --no-backup: the backup made is kept, never overwritten)")
            report.written_sectors += 1
            progress.note(f"OK sector {sector:03d}/{spec.sector_count - 1} @{address:#07x}: {plan.action}")
            progress.advance(spec.sector_size)
    finally:
        progress.finish()


def romless_flash(transport: Transport, image: bytes, *, start_sector: int | None = None, sector_count: int | None = None,
                  clear_cmp: bool = False, force: bool = False, dry_run: bool = False, backup: Path | None = None,
                  prescale: int = 8, progress: ProgressReporter | None = None, verbose: bool = False) -> FlashReport:
    """The whole `romless flash`: checks, backup, CMP handling, per-sector flash and a final verify of the written range."""
    check_image(image)
    start, count = sector_range(start_sector, sector_count)
    report = FlashReport(start, count, dry_run)
    progress = progress or ProgressReporter()
    with open_flash(transport, prescale, writing=not dry_run) as flash:
        needs_clear = check_protection(flash, clear_cmp)
        if backup is not None and not dry_run:
            report.backup_sha256 = backup_flash(flash, backup, progress)
            report.backup = str(backup)
            progress.note(f"backup written to {backup} sha256={report.backup_sha256}")
        if needs_clear and not dry_run:
            report.cleared_cmp = flash.clear_cmp()
            progress.note("cleared SR2.CMP")
        flash_sectors(flash, image, start, count, report, force=force, progress=progress, verbose=verbose)
        if not dry_run:
            end = (start + count) * flash.spec.sector_size
            result = verify_image(flash, image, progress, start * flash.spec.sector_size, end)
            if not result.ok:
                raise VerifyError(f"final verify failed at {result.mismatch:#x}: flash={result.flash_byte:02x} image={result.image_byte:02x}; "
                                  "rerun it to retry (a --backup FILE made is kept: name a new one, or pass --no-backup)")
            report.verified = True
    return report
