"""Benchmark matrices: models x devices with excludes, read from TOML, run cell by cell with a timeout."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MatrixError


@dataclass(frozen=True)
class Cell:
    """One (model, device) run."""

    model: str
    dev: str


@dataclass(frozen=True)
class Matrix:
    """A parsed matrix file: the cells to run, the per-cell timeout, and extra arguments/environment for each run."""

    cells: tuple[Cell, ...]
    timeout_minutes: float
    args: tuple[str, ...] = ("--benchmark", "--warmup")
    env: Mapping[str, str] = field(default_factory=dict)

    def github_include(self) -> dict[str, list[dict[str, str]]]:
        """The cells as a GitHub Actions `strategy.matrix` value (`{"include": [...]}`) for fanning out across runners."""
        return {"include": [{"model": c.model, "dev": c.dev} for c in self.cells]}


def _string_list(table: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise MatrixError(f"{where}: [matrix] {key} must be a non-empty list of strings")
    return value


def parse_matrix(text: str, where: str = "matrix") -> Matrix:
    """Parse matrix TOML: `timeout-minutes`, `[matrix]` with `model`, `dev` and optional `exclude` list, optional `[run]`."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"{where}: not valid TOML: {e}") from None
    table = doc.get("matrix")
    if not isinstance(table, dict):
        raise MatrixError(f"{where}: missing the [matrix] table with model and dev lists")
    unknown = set(table) - {"model", "dev", "exclude"}
    if unknown:
        raise MatrixError(f"{where}: unknown [matrix] key(s) {', '.join(sorted(unknown))}; allowed: model, dev, exclude")
    models, devs = _string_list(table, "model", where), _string_list(table, "dev", where)
    excludes = table.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) and e and set(e) <= {"model", "dev"} for e in excludes):
        raise MatrixError(f"{where}: [matrix] exclude must be a list of tables with model and/or dev keys")
    for rule in excludes:
        for key, value in rule.items():
            if value not in (models if key == "model" else devs):
                raise MatrixError(f"{where}: exclude names {key} {value!r}, which is not in the matrix")

    def excluded(cell: Cell) -> bool:
        return any(all(getattr(cell, k) == v for k, v in rule.items()) for rule in excludes)

    # GitHub orders jobs by the first matrix key: models outermost, as the seed's workflow lists them
    cells = tuple(c for c in (Cell(m, d) for m, d in itertools.product(models, devs)) if not excluded(c))
    timeout = doc.get("timeout-minutes", 15)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise MatrixError(f"{where}: timeout-minutes must be a positive number, got {timeout!r}")
    run = doc.get("run", {})
    args = run.get("args", ["--benchmark", "--warmup"])
    env = run.get("env", {})
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise MatrixError(f"{where}: [run] args must be a list of strings")
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise MatrixError(f"{where}: [run] env must be a table of strings")
    return Matrix(cells, float(timeout), tuple(args), dict(env))


def read_matrix(path: str | Path) -> Matrix:
    """Parse a matrix file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise MatrixError(f"cannot read matrix file {path}: {e.strerror}") from None
    return parse_matrix(text, str(path))


@dataclass(frozen=True)
class CellResult:
    """How one cell's run ended: status is "ok", "failed" (with the exit code) or "timeout"."""

    cell: Cell
    status: str
    returncode: int | None
    seconds: float
    speeds: dict[str, float] = field(default_factory=dict)  # test (tg64, pp512, ...) -> mean tokens/s, from its log records


def log_name(model: str) -> str:
    """The BENCHMARK_LOG file name of a model, as the seed's workflow derives it (dots dropped: llama3.2 -> llama32)."""
    return model.replace(".", "").replace(":", "_").replace("/", "_") + ".jsonl"


def cell_command(cell: Cell, matrix: Matrix, program: Sequence[str] | None = None) -> list[str]:
    """The command that benchmarks one cell: `llm-bench -m MODEL --device DEV` plus the matrix's run arguments."""
    program = list(program) if program is not None else [sys.executable, "-m", "llm_bench"]
    return [*program, "-m", cell.model, "--device", cell.dev, *matrix.args]


def run_cell(cell: Cell, matrix: Matrix, program: Sequence[str] | None = None, log_dir: Path | None = None) -> CellResult:
    """Run one cell as a subprocess with the matrix timeout; its output goes straight to ours."""
    env = {**os.environ, **matrix.env}
    with tempfile.TemporaryDirectory(prefix="llm-bench-cell-") as tmp:
        # the cell's records (its t/s for the summary) are the lines it appends to its BENCHMARK_LOG
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            log = log_dir / log_name(cell.model)
        else:
            log = Path(tmp) / "cell.jsonl"
        env["BENCHMARK_LOG"] = str(log)
        before = log.stat().st_size if log.exists() else 0
        start = time.monotonic()
        try:
            done = subprocess.run(cell_command(cell, matrix, program), env=env, timeout=matrix.timeout_minutes * 60, check=False)
        except subprocess.TimeoutExpired:
            return CellResult(cell, "timeout", None, time.monotonic() - start)
        except OSError as e:
            raise MatrixError(f"cannot start the benchmark command: {e.strerror}") from None
        seconds = time.monotonic() - start
        speeds = _speeds(log, before)
    status = "ok" if done.returncode == 0 else "failed"
    return CellResult(cell, status, done.returncode, seconds, speeds)


def _speeds(log: Path, offset: int) -> dict[str, float]:
    """test -> avg_ts of the records appended to `log` after byte `offset` (unreadable lines are skipped)."""
    speeds: dict[str, float] = {}
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return speeds
    for line in lines:
        try:
            record = json.loads(line)
            speeds[str(record["test"])] = float(record["avg_ts"])
        except (ValueError, KeyError, TypeError):
            continue
    return speeds
