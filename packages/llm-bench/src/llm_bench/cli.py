"""Command line entry point for `llm-bench`: benchmark or run a model, make a tiny model, run a benchmark matrix."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import __version__
from .backends import available_devices, device_status, get_backend, usable_devices
from .errors import LLMBenchError
from .gguf_reader import read_gguf
from .harness import quant_name, time_decode, time_prefill, warm_up
from .matrix import read_matrix, run_cell
from .model_api import ACTIVATION_MODES, LanguageModel
from .registry import DEFAULT_MODEL, download, model_names, resolve_model
from .report import append_log, format_summary_table, log_records
from .tiny_models import TINY_SPECS, make_tiny
from .tokenizer import Tokenizer

DEFAULT_STEPS = 20
DEFAULT_CONTEXT = 4096


class _Parser(argparse.ArgumentParser):
    """argparse, but usage mistakes exit 1 with one `error: ...` line like every other user mistake."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message} (see {self.prog} --help)\n")


def build_parser(probe_devices: bool = False) -> argparse.ArgumentParser:
    """The main parser: run or benchmark one model. `probe_devices` (for --help): list the devices that run here,
    opening each to find out."""
    devices = ", ".join(usable_devices() if probe_devices else available_devices())
    parser = _Parser(
        prog="llm-bench", description="Run or benchmark a GGUF LLM. Subcommands: make-tiny ARCH OUT.gguf, matrix FILE.toml, perplexity, "
        "devices.",
        epilog="env: BENCHMARK_LOG=PATH appends JSON lines per test; DEV sets the default device; LLM_BENCH_CACHE sets the model cache.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-m", "--model", default=DEFAULT_MODEL, help=f"a model name ({', '.join(model_names())}) or a GGUF path")
    parser.add_argument("--benchmark", nargs="?", type=int, const=DEFAULT_STEPS, metavar="N", help=f"time N decode steps (default {DEFAULT_STEPS})")
    parser.add_argument("--warmup", action="store_true", help="run untimed steps first")
    parser.add_argument("--device", default=os.environ.get("DEV", "CPU"), help=f"where to run (default $DEV or CPU; "
                        f"{'usable here' if probe_devices else 'known'}: {devices}; numpy is the reference; `llm-bench devices` "
                        "says why one is not usable)")
    parser.add_argument("--activations", choices=ACTIVATION_MODES, default="q8", help="q8 (default): round the activations of "
                        "Q4_0/Q4_1/Q8_0 matrices to 8 bits as llama.cpp does (integer kernels on the CPU); float: float32 products, "
                        "the mode in which every backend equals the numpy reference token for token")
    parser.add_argument("--max-context", type=int, default=DEFAULT_CONTEXT, help=f"KV cache length (default {DEFAULT_CONTEXT}, capped by the model)")
    parser.add_argument("--prompt", default=None, help="prompt text (default: just the BOS token when benchmarking, else 'The')")
    parser.add_argument("--prefill", type=int, default=0, metavar="N", help="also time the prefill of N prompt tokens (test ppN)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens to generate without --benchmark (default 64)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (default)")
    parser.add_argument("--seed", type=int, default=None, help="random seed for temperature sampling")
    parser.add_argument("--chat-template", action="store_true", help="wrap --prompt as a user message in the model's chat template")
    parser.add_argument("--chat", action="store_true", help="talk to the model: one user message per line, the conversation in its chat "
                        "template (needs uop-llm-bench[chat])")
    return parser


def build_make_tiny_parser() -> argparse.ArgumentParser:
    """`llm-bench make-tiny ARCH OUT.gguf`."""
    parser = _Parser(prog="llm-bench make-tiny", description="Write a built-in tiny model (deterministic) to a GGUF file.")
    choices = sorted({spec.config.arch for spec in TINY_SPECS.values()} | set(TINY_SPECS))
    parser.add_argument("arch", choices=choices, help="llama, qwen3 or olmoe (or tiny-llama, ...)")
    parser.add_argument("out", type=Path, help="output .gguf path")
    return parser


def build_matrix_parser() -> argparse.ArgumentParser:
    """`llm-bench matrix FILE.toml`."""
    parser = _Parser(prog="llm-bench matrix", description="Run a models x devices benchmark matrix, one subprocess per cell.")
    parser.add_argument("file", type=Path, help="matrix TOML (see examples/matrix.toml)")
    parser.add_argument("--github-matrix", action="store_true", help="print the cells as a GitHub Actions include list (JSON) and exit")
    parser.add_argument("--log-dir", type=Path, default=None, help="write each model's BENCHMARK_LOG JSON lines into this folder")
    return parser


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise LLMBenchError(f"{name} must be at least 1, got {value}")


def _download_with_progress(url: str, dest: Path) -> Path:
    """Download a model, showing a progress bar on stderr."""
    from rich.console import Console  # rich is imported when used: every run of the CLI would pay ~0.1 s for it
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    console = Console(stderr=True)
    print(f"downloading {url}", file=sys.stderr, flush=True)
    with Progress(BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("download", total=None)
        return download(url, dest, progress=lambda done, total: progress.update(task, completed=done, total=total))


def run_model(args: argparse.Namespace) -> int:
    """Load the model and benchmark it or generate text."""
    _positive("--benchmark", args.benchmark)
    _positive("--max-context", args.max_context)
    _positive("--max-tokens", args.max_tokens)
    if args.prefill < 0:
        raise LLMBenchError(f"--prefill must be >= 0, got {args.prefill}")
    if args.temperature < 0:
        raise LLMBenchError(f"--temperature must be >= 0, got {args.temperature}")
    backend = get_backend(args.device)
    path = resolve_model(args.model, fetch=_download_with_progress)
    gguf = read_gguf(path)
    tokenizer = Tokenizer.from_metadata(gguf.metadata)
    model = backend.load(gguf, args.max_context, activations=args.activations)
    name = gguf.metadata.get("general.name") or args.model
    arch, quant = model.config.arch, quant_name(gguf)
    print(f'using model "{name}" with {gguf.data_bytes:,} bytes and {model.param_count:,} params, '
          f"max context {model.max_context} on {backend.name}", file=sys.stdout if args.benchmark is not None and not args.json else sys.stderr)
    if args.chat:
        return _chat(model, tokenizer, gguf.metadata, args)
    prompt_text = args.prompt if args.prompt is not None else ("" if args.benchmark is not None else "The")
    if args.chat_template:
        prompt_text = _chat_prompt(tokenizer, gguf.metadata, [{"role": "user", "content": prompt_text}])
    # BOS as the model asks (`add_bos_token`): SmolLM2's BOS id is <|im_start|>, which it does not want in front
    prompt = tokenizer.encode(prompt_text)
    if not prompt:
        # an empty prompt still needs one token to start from: BOS when the model has one
        prompt = [tokenizer.bos_id if tokenizer.bos_id is not None else 0]
    if args.benchmark is None:
        _generate(model, tokenizer, prompt, args)
        return 0
    if args.warmup:
        warm_up(model, prompt)
    results = []
    if args.prefill:
        results.append(time_prefill(model, prompt, args.prefill))
    emit = (lambda line: print(line, file=sys.stderr)) if args.json else print
    results.append(time_decode(model, tokenizer, prompt, args.benchmark, emit))
    records = log_records(name, arch, quant, backend.name, args.warmup, results, size_bytes=gguf.data_bytes, params=model.param_count)
    if log_path := os.environ.get("BENCHMARK_LOG"):
        append_log(log_path, records)
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        print()
        print(format_summary_table(f"{name} {quant}", gguf.data_bytes, model.param_count, backend.name, results))
    return 0


def _generate(model: LanguageModel, tokenizer: Tokenizer, prompt: list[int], args: argparse.Namespace, echo: bool = True) -> str:
    """Stream the continuation of the prompt until EOS, --max-tokens or a full context; returns the continuation."""
    if echo:
        sys.stdout.write(tokenizer.decode(prompt, skip_special=True))
    # tokens can end inside a UTF-8 character: decode incrementally so each character prints once, whole
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pieces = []
    for _, token in zip(range(args.max_tokens), model.generate(prompt, args.temperature, args.seed)):
        if tokenizer.is_end(token):
            break
        pieces.append(decoder.decode(tokenizer.token_bytes(token)))
        sys.stdout.write(pieces[-1])
        sys.stdout.flush()
    pieces.append(decoder.decode(b"", final=True))
    sys.stdout.write(pieces[-1] + "\n")
    return "".join(pieces)


def _chat_prompt(tokenizer: Tokenizer, metadata: dict, messages: list[dict[str, str]]) -> str:
    from .chat import model_template, render_chat

    def token(tid: int | None) -> str:
        return tokenizer.decode([tid]) if tid is not None else ""

    return render_chat(model_template(metadata), messages, bos_token=token(tokenizer.bos_id), eos_token=token(tokenizer.eos_id))


def _chat(model: LanguageModel, tokenizer: Tokenizer, metadata: dict, args: argparse.Namespace) -> int:
    """One user message per line (an empty line or end of input ends the chat); each answer continues the whole
    conversation rendered by the model's chat template."""
    from rich.console import Console
    from rich.prompt import Prompt

    _chat_prompt(tokenizer, metadata, [])  # a missing template or jinja2 is reported before the first question
    console = Console()
    messages: list[dict[str, str]] = []
    while True:
        try:
            question = Prompt.ask("[bold]you[/bold]", console=console, default="", show_default=False)
        except EOFError:
            question = ""
        if not question.strip():
            return 0
        messages.append({"role": "user", "content": question})
        prompt = tokenizer.encode(_chat_prompt(tokenizer, metadata, messages))
        console.print("[bold]model[/bold]: ", end="")
        messages.append({"role": "assistant", "content": _generate(model, tokenizer, prompt, args, echo=False)})


def devices_command(argv: Sequence[str]) -> int:
    """`llm-bench devices`: every known device and whether it runs models here (else why not)."""
    _Parser(prog="llm-bench devices", description="List the devices llm-bench knows and whether each can run here.").parse_args(argv)
    for device in available_devices():
        reason = device_status(device)
        print(f"{device:10} {'usable' if reason is None else 'not available: ' + reason}")
    return 0


def make_tiny_command(argv: Sequence[str]) -> int:
    """`llm-bench make-tiny ARCH OUT.gguf`."""
    args = build_make_tiny_parser().parse_args(argv)
    path = make_tiny(args.arch, args.out)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


def perplexity_command(argv: Sequence[str]) -> int:
    """`llm-bench perplexity -m MODEL -f TEXT [--ctx N] [--device D] [--json]`: llama-perplexity's measure."""
    from .perplexity import perplexity

    ap = argparse.ArgumentParser(prog="llm-bench perplexity", description="Perplexity of a text file, chunked and scored as "
                                 "llama.cpp's llama-perplexity does (each chunk of --ctx tokens scored on its second half).")
    ap.add_argument("-m", "--model", required=True, help="a model name or a GGUF path")
    ap.add_argument("-f", "--file", required=True, help="a UTF-8 text file")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk (default 512, llama-perplexity's -c)")
    ap.add_argument("--chunks", type=int, default=None, help="score only the first N chunks (llama-perplexity's --chunks)")
    ap.add_argument("--device", default=os.environ.get("DEV", "CPU"), help="where to run (default $DEV or CPU; numpy is the reference)")
    ap.add_argument("--activations", choices=ACTIVATION_MODES, default="q8", help="q8 (default, as llama.cpp) or float; see llm-bench --help")
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of the running figures")
    args = ap.parse_args(argv)
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LLMBenchError(f"cannot read {args.file}: {e}") from None
    path = resolve_model(args.model, fetch=_download_with_progress)
    gguf = read_gguf(path)
    tokenizer = Tokenizer.from_metadata(gguf.metadata)
    model = get_backend(args.device).load(gguf, max(args.ctx, 4), activations=args.activations)

    def progress(i: int, n: int, ppl: float) -> None:
        if not args.json:
            print(f"[{i}/{n}] {ppl:.4f}", flush=True)

    result = perplexity(model, tokenizer, text, args.ctx, args.chunks, progress)
    if args.json:
        print(json.dumps({"model": str(args.model), "ctx": args.ctx, "chunks": result.chunks, "scored_tokens": result.scored_tokens,
                          "ppl": round(result.ppl, 6), "device": args.device}))
    else:
        print(f"Final estimate: PPL = {result.ppl:.4f} ({result.chunks} chunks of {args.ctx} tokens, {result.scored_tokens} tokens scored)")
    return 0


def matrix_command(argv: Sequence[str]) -> int:
    """`llm-bench matrix FILE.toml [--github-matrix] [--log-dir DIR]`: exit 1 if any cell failed or timed out."""
    args = build_matrix_parser().parse_args(argv)
    matrix = read_matrix(args.file)
    if args.github_matrix:
        print(json.dumps(matrix.github_include()))
        return 0
    results = []
    for cell in matrix.cells:
        print(f"=== {cell.model} on {cell.dev} (timeout {matrix.timeout_minutes:g} min)", flush=True)
        results.append(run_cell(cell, matrix, log_dir=args.log_dir))
    print()
    width = max(len(r.cell.model) for r in results) if results else 5
    for r in results:
        speeds = "  ".join(f"{test} {ts:,.2f} t/s" for test, ts in r.speeds.items())
        detail = f"exit {r.returncode}" if r.status == "failed" else speeds
        print(f"{r.cell.model:<{width}}  {r.cell.dev:<8} {r.status:<8} {r.seconds:8.1f} s  {detail}".rstrip())
    return 0 if all(r.status == "ok" for r in results) else 1


def _fixed_mmap_threshold() -> None:
    """glibc raises its mmap threshold whenever a large block is freed, so the large numpy temporaries that come later
    (the tokenizer's tables, weight conversion at load) are carved from the heap and leave holes it never returns.
    Fixed at glibc's initial 128 KiB, every block that large is a mapping of its own, given back when freed: SmolLM2
    Q4_1's peak RSS 152.5 -> 144.3 MB. Elsewhere (no glibc) this does nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: user mistakes print `error: ...` to stderr and exit 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "make-tiny":
            return make_tiny_command(argv[1:])
        if argv and argv[0] == "matrix":
            return matrix_command(argv[1:])
        if argv and argv[0] == "perplexity":
            return perplexity_command(argv[1:])
        if argv and argv[0] == "devices":
            return devices_command(argv[1:])
        return run_model(build_parser(probe_devices=bool({"-h", "--help"} & set(argv))).parse_args(argv))
    except LLMBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader of our output is gone (`llm-bench ... | head`): the rest goes nowhere, quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 -- a bug, not the input: one line, the traceback only with DEBUG=1
        if os.environ.get("DEBUG", "0") not in ("", "0"):
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e} -- please report it with the command that caused it "
              "(DEBUG=1 prints the traceback)", file=sys.stderr)
        return 1


def entry() -> int:
    """The `llm-bench` command: `main` in a process of its own, with the allocator set for it (see
    `_fixed_mmap_threshold`; a process that only calls `main`, a test suite say, keeps glibc's defaults)."""
    _fixed_mmap_threshold()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
