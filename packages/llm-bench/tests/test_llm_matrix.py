"""Matrix files: parsing with excludes, the GitHub include list, and running cells through a fake command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from llm_bench import Cell, MatrixError, parse_matrix, read_matrix, run_cell
from llm_bench.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_seed_matrix_example():
    matrix = read_matrix(EXAMPLES / "matrix.toml")
    # 3 models x 3 devices minus the seed's three excludes
    want = {(m, d) for m in ("llama3.2:3b-f16", "qwen3.8:27b", "olmoe") for d in ("METAL", "AMD", "NV")}
    want -= {("qwen3.8:27b", "METAL"), ("olmoe", "AMD"), ("olmoe", "NV")}
    assert {(c.model, c.dev) for c in matrix.cells} == want and len(matrix.cells) == 6
    assert matrix.timeout_minutes == 15
    assert matrix.args == ("--benchmark", "--warmup")
    assert matrix.env == {"JITBEAM": "2", "IGNORE_BEAM_CACHE": "1"}


def test_github_matrix_output(capsys):
    assert main(["matrix", str(EXAMPLES / "matrix.toml"), "--github-matrix"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    assert {"model": "olmoe", "dev": "METAL"} in include and {"model": "olmoe", "dev": "AMD"} not in include
    assert len(include) == 6


@pytest.mark.parametrize(("text", "message"), [
    ("[matrix\n", "not valid TOML"),
    ("x = 1\n", "missing the \\[matrix\\] table"),
    ("[matrix]\nmodel = []\ndev = ['a']\n", "model must be a non-empty list"),
    ("[matrix]\nmodel = ['m']\ndev = ['a']\nexclude = [{ dev = 'b' }]\n", "exclude names dev 'b'"),
    ("[matrix]\nmodel = ['m']\ndev = ['a']\nos = ['x']\n", "unknown \\[matrix\\] key"),
    ("timeout-minutes = -1\n[matrix]\nmodel = ['m']\ndev = ['a']\n", "timeout-minutes must be a positive number"),
])
def test_bad_matrices(text, message):
    with pytest.raises(MatrixError, match=message):
        parse_matrix(text)


# a stand-in for llm-bench: records its arguments and BENCHMARK_LOG, then exits with the code the model name asks for
FAKE = """
import json, os, sys
args = sys.argv[1:]
out = os.environ["FAKE_OUT"]
with open(out, "a") as f:
    f.write(json.dumps({"args": args, "log": os.environ.get("BENCHMARK_LOG"), "beam": os.environ.get("JITBEAM")}) + "\\n")
model = args[args.index("-m") + 1]
if model == "hang":
    import threading
    threading.Event().wait()
sys.exit(3 if model == "broken" else 0)
"""


def test_run_cells_with_a_fake_command(tmp_path, monkeypatch):
    out = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_OUT", str(out))
    matrix = parse_matrix("[matrix]\nmodel = ['good', 'broken']\ndev = ['numpy']\n[run]\nargs = ['--benchmark', '5']\nenv = { JITBEAM = '2' }\n")
    program = [sys.executable, "-c", FAKE]
    results = [run_cell(cell, matrix, program, log_dir=tmp_path / "logs") for cell in matrix.cells]
    assert [r.status for r in results] == ["ok", "failed"]
    assert results[1].returncode == 3
    calls = [json.loads(line) for line in out.read_text().splitlines()]
    assert calls[0]["args"] == ["-m", "good", "--device", "numpy", "--benchmark", "5"]
    assert calls[0]["log"] == str(tmp_path / "logs" / "good.jsonl") and calls[0]["beam"] == "2"
    assert results[0].cell == Cell("good", "numpy")


def test_a_hanging_cell_times_out(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_OUT", str(tmp_path / "calls.jsonl"))
    matrix = parse_matrix("timeout-minutes = 0.01\n[matrix]\nmodel = ['hang']\ndev = ['numpy']\n")
    (result,) = [run_cell(cell, matrix, [sys.executable, "-c", FAKE]) for cell in matrix.cells]
    assert result.status == "timeout" and result.returncode is None


def test_matrix_command_runs_real_cells(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLM_BENCH_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "m.toml"
    spec.write_text("[matrix]\nmodel = ['tiny-llama']\ndev = ['numpy', 'CPU', 'TPU']\n[run]\nargs = ['--benchmark', '2']\n")
    assert main(["matrix", str(spec), "--log-dir", str(tmp_path / "logs")]) == 1  # the TPU cell fails: no such device
    summary = capsys.readouterr().out.splitlines()[-3:]
    assert summary[0].split()[:3] == ["tiny-llama", "numpy", "ok"]
    assert summary[1].split()[:3] == ["tiny-llama", "CPU", "ok"]
    assert summary[2].split()[:5] == ["tiny-llama", "TPU", "failed", summary[2].split()[3], "s"]
    records = [json.loads(line) for line in (tmp_path / "logs" / "tiny-llama.jsonl").read_text().splitlines()]
    assert [(r["device"], r["test"]) for r in records] == [("numpy", "tg2"), ("CPU", "tg2")]
    for line, record in zip(summary, records):  # (#25 item 6) each cell's t/s, from the records it logged
        assert line.endswith(f"tg2 {record['avg_ts']:,.2f} t/s")


def test_matrix_summary_has_speeds_without_a_log_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLM_BENCH_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "m.toml"
    spec.write_text("[matrix]\nmodel = ['tiny-llama']\ndev = ['numpy']\n[run]\nargs = ['--benchmark', '2', '--prefill', '4']\n")
    assert main(["matrix", str(spec)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert " pp4 " in last and " tg2 " in last and last.endswith(" t/s")
