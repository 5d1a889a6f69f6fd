"""Progress reporting: rich bars on a terminal, plain lines otherwise, nothing for library callers."""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn


class ProgressReporter:
    """Receives progress from long operations. The base class reports nothing."""

    def start(self, label: str, total_bytes: int, sector_size: int = 0x1000) -> None:
        """A new phase (`backup`, `dump`, `verify`, `flash`...) covering `total_bytes`."""

    def advance(self, nbytes: int) -> None:
        """`nbytes` more of the current phase are done."""

    def note(self, message: str) -> None:
        """A line worth keeping (a sector result, a decision)."""

    def finish(self) -> None:
        """The current phase ended (successfully or not)."""


class PlainProgress(ProgressReporter):
    """One line per 64 KiB and per note: readable in logs and pipes."""

    STEP = 0x10000

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.label, self.total, self.done, self.sector_size = "", 0, 0, 0x1000

    def start(self, label: str, total_bytes: int, sector_size: int = 0x1000) -> None:
        self.label, self.total, self.done, self.sector_size = label, total_bytes, 0, sector_size

    def advance(self, nbytes: int) -> None:
        before, self.done = self.done, self.done + nbytes
        if self.done // self.STEP != before // self.STEP or (self.done == self.total and before < self.total):
            sectors = f"{self.done // self.sector_size}/{self.total // self.sector_size} sectors"
            print(f"{self.label}: {self.done:#08x}/{self.total:#08x} bytes, {sectors}", file=self.stream, flush=True)

    def note(self, message: str) -> None:
        print(message, file=self.stream, flush=True)


class RichProgress(ProgressReporter):
    """A rich progress bar with bytes, sectors, rate and ETA."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=False)
        self.bar: Progress | None = None
        self.task = None
        self.sector_size = 0x1000
        self.total = 0

    def start(self, label: str, total_bytes: int, sector_size: int = 0x1000) -> None:
        self.finish()
        self.sector_size, self.total = sector_size, total_bytes
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True), TextColumn("{task.fields[sectors]}"),
                            TransferSpeedColumn(), TimeRemainingColumn(), console=self.console, transient=False)
        self.bar.start()
        self.task = self.bar.add_task(label, total=total_bytes, sectors=self._sectors(0))

    def _sectors(self, done: int) -> str:
        return f"{done // self.sector_size}/{self.total // self.sector_size} sectors"

    def advance(self, nbytes: int) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task, nbytes)
            done = int(self.bar.tasks[0].completed)
            self.bar.update(self.task, sectors=self._sectors(done))

    def note(self, message: str) -> None:
        if self.bar is not None:
            self.bar.console.print(message, highlight=False, markup=False)
        else:
            self.console.print(message, highlight=False, markup=False)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar, self.task = None, None


def reporter_for(stream: TextIO | None = None) -> ProgressReporter:
    """Rich bars when `stream` (default stdout) is a terminal, plain lines otherwise."""
    stream = stream or sys.stdout
    return RichProgress(Console(file=stream)) if stream.isatty() else PlainProgress(stream)
