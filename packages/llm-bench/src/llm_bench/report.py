"""Benchmark output: the per-step line, the llama-bench style summary table, and BENCHMARK_LOG JSON lines."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LLMBenchError


@dataclass(frozen=True)
class TestResult:
    """Timings of one benchmark test: `ppN` (prefill of N tokens per sample) or `tgN` (N decode steps, one token each)."""

    __test__ = False  # not a pytest test class despite the name

    name: str
    tokens_per_sample: int
    samples_ns: tuple[int, ...]

    @property
    def rates(self) -> list[float]:
        """Tokens per second of each sample."""
        return [self.tokens_per_sample * 1e9 / ns for ns in self.samples_ns]

    @property
    def avg_ts(self) -> float:
        """Mean tokens per second over the samples (llama-bench's avg_ts)."""
        import statistics  # imported when reporting: it brings fractions and decimal, which start-up never needs

        return statistics.fmean(self.rates)

    @property
    def stddev_ts(self) -> float:
        """Sample standard deviation of tokens per second (0 for a single sample)."""
        import statistics

        return statistics.stdev(self.rates) if len(self.samples_ns) > 1 else 0.0


def format_step_line(elapsed_ns: int, moved_bytes: int, used_bytes: int, text: str) -> str:
    """The seed's per-step line: `ms, tok/s, GB/s, moved/used MB -- decoded text so far` (newlines shown as \\n)."""
    seconds = elapsed_ns * 1e-9
    return (f"{elapsed_ns * 1e-6:6.2f} ms, {1 / seconds:6.2f} tok/s, {moved_bytes / elapsed_ns:7.2f} GB/s,"
            f" {moved_bytes // 1_000_000}/{used_bytes // 1_000_000} MB  --  " + text.replace("\n", "\\n"))


def format_size(n_bytes: int) -> str:
    """Bytes in binary units, as llama-bench prints model sizes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.2f} {unit}"
    return f"{n_bytes} B"


def format_params(count: int) -> str:
    """A parameter count in B/M/K."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return str(count)


def format_summary_table(model: str, size_bytes: int, params: int, backend: str, results: Sequence[TestResult]) -> str:
    """A llama-bench style markdown table: model, size, params, backend, test, t/s (mean ± std)."""
    header = ("model", "size", "params", "backend", "test", "t/s")
    rows = [(model, format_size(size_bytes), format_params(params), backend, r.name, f"{r.avg_ts:.2f} ± {r.stddev_ts:.2f}") for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    right = {1, 2, 4, 5}

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = "| " + " | ".join(("-" * (w - 1) + ":") if i in right else "-" * w for i, w in enumerate(widths)) + " |"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


# environment variables CI sets that identify the build being measured
RUN_ID_VARIABLES = {"commit": ("GITHUB_SHA", "CI_COMMIT_SHA"), "run_id": ("GITHUB_RUN_ID", "CI_PIPELINE_ID")}


def log_records(model: str, arch: str, quant: str, device: str, warmup: bool, results: Iterable[TestResult],
                environ: Mapping[str, str] | None = None, size_bytes: int | None = None, params: int | None = None,
                now: float | None = None) -> list[dict[str, Any]]:
    """One BENCHMARK_LOG record per test: what ran (model, its size in bytes and parameter count when given), where
    (host, device), when (UTC time), the samples, and the commit and run ids from the environment when present."""
    environ = os.environ if environ is None else environ
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    about = {"time": when, "host": platform.node()}
    if size_bytes is not None:
        about["size_bytes"] = size_bytes
    if params is not None:
        about["params"] = params
    ids = {}
    for field, names in RUN_ID_VARIABLES.items():
        value = next((environ[n] for n in names if environ.get(n)), None)
        if value is not None:
            ids[field] = value
    return [{"model": model, "arch": arch, "quant": quant, "device": device, "test": r.name, "samples_ns": list(r.samples_ns),
             "avg_ts": r.avg_ts, "stddev_ts": r.stddev_ts, "warmup": warmup, **about, **ids} for r in results]


def append_log(path: str | Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Append records to a JSON-lines file (created if missing)."""
    try:
        with open(path, "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
    except OSError as e:
        raise LLMBenchError(f"cannot append to BENCHMARK_LOG file {path}: {e.strerror}") from None
