"""The llm-bench command end to end on the tiny models (numpy device), and its errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from llm_bench import MODELS, NumpyModel, Tokenizer, make_tiny, read_gguf, resolve_model
from llm_bench.cli import main

STEP_LINE = re.compile(r"^ *\d+\.\d\d ms, +\d+\.\d\d tok/s, +\d+\.\d\d GB/s, \d+/\d+ MB  --  .*$")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.getbasetemp() / "llm-cache"
    monkeypatch.setenv("LLM_BENCH_CACHE", str(folder))
    monkeypatch.delenv("BENCHMARK_LOG", raising=False)
    monkeypatch.delenv("DEV", raising=False)
    return folder


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen3", "tiny-olmoe"])
def test_benchmark_lines_table_and_log(model, tmp_path, monkeypatch, capsys):
    log = tmp_path / "bench.jsonl"
    monkeypatch.setenv("BENCHMARK_LOG", str(log))
    monkeypatch.setenv("GITHUB_SHA", "deadbeef")
    assert main(["-m", model, "--benchmark", "4", "--warmup", "--prefill", "8", "--device", "numpy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f'using model "{model}" with ') and out[0].endswith("on numpy")
    steps = [line for line in out if " tok/s, " in line]
    assert len(steps) == 4 and all(STEP_LINE.match(line) for line in steps)
    table = [line for line in out if line.startswith("|")]
    assert [c.strip() for c in table[0].strip("|").split("|")] == ["model", "size", "params", "backend", "test", "t/s"]
    assert [c.strip() for c in table[2].strip("|").split("|")][4] == "pp8"
    assert [c.strip() for c in table[3].strip("|").split("|")][4] == "tg4"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["test"] for r in records] == ["pp8", "tg4"]
    for r in records:
        assert set(r) == {"model", "arch", "quant", "device", "test", "samples_ns", "avg_ts", "stddev_ts", "warmup", "commit", "time", "host",
                          "size_bytes", "params"}
        assert r["size_bytes"] > 0 and r["params"] > 0 and r["time"].endswith("Z")
        assert r["model"] == model and r["device"] == "numpy" and r["warmup"] is True and r["commit"] == "deadbeef"
    assert len(records[1]["samples_ns"]) == 4 and len(records[0]["samples_ns"]) == 3


def test_json_output(capsys):
    assert main(["-m", "tiny-qwen3", "--benchmark", "2", "--json"]) == 0
    captured = capsys.readouterr()
    records = json.loads(captured.out)
    assert records[0]["arch"] == "qwen3" and records[0]["quant"] == "Q8_0" and records[0]["test"] == "tg2"
    assert " tok/s, " in captured.err


@pytest.mark.parametrize("activations", ["q8", "float"])
def test_generate_follows_the_activation_mode(capsys, cache, activations):
    # tiny-qwen3's matrices are Q8_0: "q8" rounds their activations (the CPU's integer kernels), "float" does not
    assert main(["-m", "tiny-qwen3", "--prompt", "The robot", "--max-tokens", "5", "--activations", activations]) == 0
    g = read_gguf(cache / "tiny-qwen3.gguf")
    tok, model = Tokenizer.from_metadata(g.metadata), NumpyModel(g, 64, activations=activations)
    seq = tok.encode("The robot")
    prompt_len = len(seq)
    for _ in range(5):
        model.reset()
        seq.append(int(np.argmax(model.forward(seq, 0)[-1])))
    assert capsys.readouterr().out == "The robot" + tok.decode(seq[prompt_len:]) + "\n"
    assert any(layer.int_dot for layer in model.layers) == (activations == "q8")


def test_unknown_activation_mode_is_a_model_error():
    from llm_bench.errors import ModelError

    with pytest.raises(ModelError, match="unknown activation mode 'int4'"):
        NumpyModel(read_gguf(resolve_model("tiny-llama")), 8, activations="int4")


def test_generate_text_is_the_greedy_continuation(capsys, cache):
    assert main(["-m", "tiny-llama", "--prompt", "The robot", "--max-tokens", "5"]) == 0
    g = read_gguf(cache / "tiny-llama.gguf")
    tok, model = Tokenizer.from_metadata(g.metadata), NumpyModel(g, 64)
    prompt = tok.encode("The robot", add_bos=True)
    seq = list(prompt)
    for _ in range(5):
        model.reset()
        seq.append(int(np.argmax(model.forward(seq, 0)[-1])))
    assert capsys.readouterr().out == "The robot" + tok.decode(seq[len(prompt) :]) + "\n"


def test_make_tiny_command(tmp_path, capsys):
    assert main(["make-tiny", "olmoe", str(tmp_path / "o.gguf")]) == 0
    assert (tmp_path / "o.gguf").read_bytes() == make_tiny("tiny-olmoe", tmp_path / "ref.gguf").read_bytes()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--device", "TPU"], "unknown device 'TPU'"),
    (["-m", "no-such-model"], "unknown model"),
    (["--benchmark", "0"], "--benchmark must be at least 1"),
    (["--benchmark", "600"], "512 is this model's own limit: shorten"),  # (#25 item 6: it said "raise --max-context")
    (["--benchmark", "600", "--max-context", "100"], "raise --max-context (the model allows up to 512)"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
])
def test_user_mistakes_print_one_error_line(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_unwritable_output(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["make-tiny", "llama", str(tmp_path / "file" / "x.gguf")]) == 1
    assert capsys.readouterr().err.startswith("error: cannot write")
    assert main(["-m", str(tmp_path), "--benchmark", "1"]) == 1
    assert "is not a file" in capsys.readouterr().err


def test_bad_gguf_file(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    good = make_tiny("llama", tmp_path / "good.gguf").read_bytes()
    bad.write_bytes(good[: len(good) // 2])
    assert main(["-m", str(bad), "--benchmark", "1"]) == 1
    assert "truncated" in capsys.readouterr().err


def test_module_entry_point(cache):
    done = subprocess.run([sys.executable, "-m", "llm_bench", "matrix", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "--github-matrix" in done.stdout


@pytest.mark.parametrize("argv", [["--benchmark", "x"], ["make-tiny", "gpt2", "o.gguf"], ["matrix"], ["--no-such-flag"]])
def test_usage_mistakes_exit_1(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1 and capsys.readouterr().err.startswith("error: ")


def test_known_model_is_downloaded_with_progress(tmp_path, monkeypatch, cache, capsys):
    source = make_tiny("qwen3", tmp_path / "Qwen3-0.6B-Q8_0.gguf")
    monkeypatch.setitem(MODELS, "qwen3:0.6b", source.as_uri())
    assert main(["-m", "qwen3:0.6b", "--benchmark", "1"]) == 0
    assert (cache / "Qwen3-0.6B-Q8_0.gguf").read_bytes() == source.read_bytes()
    assert "downloading file://" in capsys.readouterr().err


def _have(device: str) -> bool:
    from llm_bench.backends import device_status

    return device_status(device) is None


@pytest.mark.parametrize("device", ["AMD", "QCOM", "MOCKAMD:gfx9999"])
def test_a_device_not_available_here_is_one_error_line(device, cache):
    """(#25) a device this machine cannot open (no driver, a GPU model the mock does not emulate) is `error: device X is
    not available here: <why>` and exit 1, run as a user runs it (it was a 48-line traceback)."""
    if _have(device):
        pytest.skip(f"{device} is usable on this machine")
    done = subprocess.run([sys.executable, "-m", "llm_bench", "-m", "tiny-llama", "--device", device, "--benchmark", "1"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: device {device} is not available here: ") and done.stderr.count("\n") == 1, done.stderr


def test_devices_command_and_help_list_what_runs_here(cache):
    listed = subprocess.run([sys.executable, "-m", "llm_bench", "devices"], capture_output=True, text=True, check=False)
    assert listed.returncode == 0
    status = dict(line.split(None, 1) for line in listed.stdout.splitlines())
    assert status["CPU"] == "usable" and status["numpy"] == "usable"
    usable = [d for d, s in status.items() if s == "usable"]
    assert all(s.startswith("not available: ") for s in status.values() if s != "usable")
    helped = subprocess.run([sys.executable, "-m", "llm_bench", "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0
    text = " ".join(helped.stdout.split())
    assert f"usable here: {', '.join(usable)};" in text.replace("- ", "-")


def test_a_closed_pipe_ends_quietly(cache):
    proc = subprocess.Popen([sys.executable, "-m", "llm_bench", "devices"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written, as with `| head -0`
    _, err = proc.communicate()
    assert proc.returncode == 0 and err == b""


def test_an_unexpected_exception_is_an_internal_error_line(monkeypatch, capsys):
    """(#24 item 4) a bug is `internal error: ...` on one line and exit 1; the traceback only with DEBUG=1."""
    import llm_bench.cli as cli

    def broken(args):
        raise ZeroDivisionError("surprise")

    monkeypatch.setattr(cli, "run_model", broken)
    monkeypatch.delenv("DEBUG", raising=False)
    assert main(["-m", "tiny-llama"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: ZeroDivisionError: surprise") and err.count("\n") == 1
    monkeypatch.setenv("DEBUG", "1")
    assert main(["-m", "tiny-llama"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_start_up_imports_only_what_a_run_needs():
    # start-up memory (#26): networking, archives, entry-point scanning and statistics are imported by the commands
    # that use them, not by every run (urllib.request alone brings http, ssl and OpenSSL: about 5 MB)
    code = ("import sys; import llm_bench.cli, llm_bench.backends, llm_bench.tokenizer, llm_bench.gguf_reader; "
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    deferred = {"ssl", "urllib.request", "http.client", "email", "importlib.metadata", "tarfile", "zipfile", "statistics", "tomllib",
                "concurrent.futures"}
    assert loaded & deferred == set()
    assert {"llm_bench.cli", "uop_scheduler", "hcq_runtime"} <= loaded


def test_a_greedy_run_loads_no_hashlib_random_or_thread_pool(tmp_path):
    # memory (#26): hashlib maps OpenSSL (3.6 MiB resident; UOp keys and the compile cache use the built-in BLAKE2),
    # numpy.random costs 5-7 MiB and is needed only to sample at a temperature, concurrent.futures brings logging
    model = make_tiny("llama", tmp_path / "m.gguf")
    code = (f"import sys; from llm_bench.cli import main; rc = main(['-m', {str(model)!r}, '--max-tokens', '3']); "
            "print(rc, ' '.join(sorted(sys.modules)), file=sys.stderr)")
    env = {**os.environ, "DISABLE_COMPILER_CACHE": "1"}  # the first run compiles, in parallel threads
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stderr.splitlines()[-1].split()
    assert out[0] == "0"
    assert set(out) & {"hashlib", "_hashlib", "numpy.random", "concurrent.futures", "logging"} == set()
