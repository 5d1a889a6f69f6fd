"""Benchmark output formatting and BENCHMARK_LOG records, on synthetic timings."""

from __future__ import annotations

import json
import math
import platform
import re

from llm_bench import TestResult, append_log, format_step_line, format_summary_table, log_records


def test_step_line_matches_the_seed_format():
    line = format_step_line(12_345_678, 2_469_135_600, 5_000_000_000, "a\nb")
    assert line == " 12.35 ms,  81.00 tok/s,  200.00 GB/s, 2469/5000 MB  --  a\\nb"


def test_rates_mean_and_std():
    tg = TestResult("tg2", 1, (10_000_000, 20_000_000))  # 100 and 50 tok/s
    assert math.isclose(tg.avg_ts, 75.0)
    assert math.isclose(tg.stddev_ts, math.sqrt(2 * 25.0**2))
    pp = TestResult("pp32", 32, (1_000_000_000,))
    assert pp.avg_ts == 32.0 and pp.stddev_ts == 0.0


def test_summary_table_columns():
    table = format_summary_table("tiny-llama F16", 3 * 2**20, 1_240_000_000, "numpy",
                                 [TestResult("pp32", 32, (1_000_000_000, 1_000_000_000)), TestResult("tg2", 1, (10_000_000, 20_000_000))])
    lines = table.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["model", "size", "params", "backend", "test", "t/s"]
    assert re.fullmatch(r"\|( -+:? \|)+", lines[1].replace("| -", "| -"))
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert cells == ["tiny-llama F16", "3.00 MiB", "1.24 B", "numpy", "tg2", "75.00 ± 35.36"]
    assert [c.strip() for c in lines[2].strip("|").split("|")][-1] == "32.00 ± 0.00"
    assert len({len(line) for line in lines}) == 1  # columns are aligned


def test_log_records_and_append(tmp_path):
    results = [TestResult("tg2", 1, (10_000_000, 20_000_000))]
    records = log_records("m", "llama", "Q8_0", "numpy", True, results, environ={"GITHUB_SHA": "abc123", "GITHUB_RUN_ID": "77"},
                          size_bytes=1234, params=567, now=86400.0)
    assert records == [{"model": "m", "arch": "llama", "quant": "Q8_0", "device": "numpy", "test": "tg2", "samples_ns": [10_000_000, 20_000_000],
                        "avg_ts": 75.0, "stddev_ts": records[0]["stddev_ts"], "warmup": True, "time": "1970-01-02T00:00:00Z",
                        "host": platform.node(), "size_bytes": 1234, "params": 567, "commit": "abc123", "run_id": "77"}]
    assert "commit" not in log_records("m", "llama", "Q8_0", "numpy", False, results, environ={})[0]
    path = tmp_path / "log.jsonl"
    append_log(path, records)
    append_log(path, records)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["commit"] == "abc123"
