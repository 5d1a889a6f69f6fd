"""The uop_scheduler Tensor backend against the numpy reference (the oracle): logits, jitted vs eager decoding, the CLI."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hcq_runtime import buffer_for, call_buffers
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_bench import ModelError, NumpyModel, TensorModel, Tokenizer, make_tiny, read_gguf, resolve_model
from llm_bench.cli import main

STEP_LINE = re.compile(r"^ *\d+\.\d\d ms, +\d+\.\d\d tok/s, +\d+\.\d\d GB/s, \d+/\d+ MB  --  .*$")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.getbasetemp() / "llm-cache"
    monkeypatch.setenv("LLM_BENCH_CACHE", str(folder))
    monkeypatch.delenv("BENCHMARK_LOG", raising=False)
    monkeypatch.delenv("DEV", raising=False)
    return folder


def _gguf(name: str):
    return read_gguf(resolve_model(name))


@pytest.mark.parametrize(("name", "device"), [("tiny-llama", "CPU"), ("tiny-qwen3", "CPU"), ("tiny-olmoe", "CPU"), ("tiny-llama", "CPU:1")])
def test_logits_match_the_numpy_reference(name, device):
    gguf = _gguf(name)
    ref, model = NumpyModel(gguf, 24), TensorModel(gguf, 24, device=device)
    prompt = [1, 17, 42, 5, 99]
    np.testing.assert_allclose(model.forward(prompt, 0), ref.forward(prompt, 0), rtol=1e-4, atol=1e-4)
    pos = len(prompt)
    for token in (3, 250, 7):
        np.testing.assert_allclose(model.forward([token], pos), ref.forward([token], pos), rtol=1e-4, atol=1e-4)
        pos += 1
    # the later steps replayed the captured graph rather than tracing again
    assert model._step_fn.cnt == 3


@pytest.fixture(scope="module")
def olmoe_pair(tmp_path_factory):
    gguf = read_gguf(make_tiny("tiny-olmoe", tmp_path_factory.mktemp("olmoe") / "tiny-olmoe.gguf"))
    return NumpyModel(gguf, 12), TensorModel(gguf, 12)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(prompt=st.lists(st.integers(0, 255), min_size=1, max_size=6), start=st.integers(0, 5))
def test_any_prompt_at_any_position_matches_the_reference(olmoe_pair, prompt, start):
    # the mixture of experts picks experts per token, so different tokens exercise different top-k selections
    ref, model = olmoe_pair
    ref.reset()
    model.reset()
    prefix = [1] * start
    if prefix:
        ref.forward(prefix, 0)
        model.forward(prefix, 0)
    np.testing.assert_allclose(model.forward(prompt, start), ref.forward(prompt, start), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_sizes_follow_the_stored_types(name):
    gguf = _gguf(name)
    ref, model = NumpyModel(gguf, 16), TensorModel(gguf, 16)
    assert model.param_count == ref.param_count
    assert model.cache_bytes == ref.cache_bytes

    def device_bytes(name: str) -> int:
        # F16 matrices stay float16 on the device, quantized ones keep their blocks; everything else is float32
        t = gguf.tensors[name]
        if t.ggml_type.name.startswith("Q"):
            return t.nbytes
        return t.n_elements * (2 if t.ggml_type.name == "F16" and len(t.shape) == 2 else 4)

    embd = gguf.tensors["token_embd.weight"]
    tied = "output.weight" not in gguf.tensors
    # the embedding table is looked up on the host from the file; a tied output projection also puts it on the device
    want = embd.nbytes + sum(device_bytes(n) for n in gguf.tensors if n != "token_embd.weight")
    assert model.weight_bytes == want + (device_bytes("token_embd.weight") if tied else 0)


def test_batched_prefill_matches_token_by_token():
    gguf = _gguf("tiny-qwen3")
    batched, single = TensorModel(gguf, 24), TensorModel(gguf, 24)
    prompt, more = [1, 17, 42, 5, 99, 3, 250], [7, 8, 9]
    # a whole prompt in one forward, then a second batch at an offset, against one token at a time
    want = np.stack([single.forward([t], pos)[0] for pos, t in enumerate(prompt + more)])
    got = np.concatenate([batched.forward(prompt, 0), batched.forward(more, len(prompt))])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and the caches the batches wrote serve the decode steps after them
    want_next = single.forward([11], 10)
    np.testing.assert_allclose(batched.forward([11], 10), want_next, rtol=1e-4, atol=1e-4)
    # the same prompt again after a reset: captured on the second run, replayed on the third, into fresh caches
    for _ in range(2):
        batched.reset()
        np.testing.assert_allclose(batched.forward(prompt, 0), want[: len(prompt)], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(batched.forward(more, len(prompt)), want[len(prompt) :], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(batched.forward([11], 10), want_next, rtol=1e-4, atol=1e-4)
    assert batched._prefill_fns[8].cnt == 3


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-olmoe"])
def test_last_only_gives_the_last_row_of_the_full_logits(name, tmp_path):
    # generation and ppN multiply the output matrix by the last prompt token alone: its row is the full forward's last
    # row, bit for bit on the Tensor backend (one captured graph per padded length; the row is a bound variable)
    gguf = read_gguf(make_tiny(name, tmp_path / f"{name}.gguf")) if name == "tiny-olmoe" else _gguf(name)
    ref, model = NumpyModel(gguf, 24), TensorModel(gguf, 24)
    for prompt in ([1, 17, 42, 5, 99], [1, 17, 42, 5, 99, 3, 250], [1, 17, 42, 5, 99, 3], [1, 17]):
        model.reset()
        full = model.forward(prompt, 0)
        model.reset()
        last = model.forward(prompt, 0, last_only=True)
        assert full.shape[0] == len(prompt)
        assert last.shape == (1, full.shape[1])
        np.testing.assert_array_equal(last, full[-1:])
        ref.reset()
        np.testing.assert_allclose(ref.forward(prompt, 0, last_only=True), full[-1:], rtol=1e-4, atol=1e-4)
    # prompts of 5, 6 and 7 tokens share the padded length 8: one capture, replayed with the row index bound
    assert model._prefill_fns[(8, "last")].cnt == 3
    # and the caches it wrote serve the next token
    ref.reset()
    ref.forward([1, 17], 0)
    np.testing.assert_allclose(model.forward([9], 2), ref.forward([9], 2), rtol=1e-4, atol=1e-4)


def test_a_padded_prompt_then_decoding_to_the_end_of_the_context():
    gguf = _gguf("tiny-llama")
    ref, model = NumpyModel(gguf, 20), TensorModel(gguf, 20)
    # 11 tokens run padded to 16: the padding writes rows 11-15, which each later token overwrites before reading
    prompt = [1] + list(range(20, 30))
    np.testing.assert_allclose(model.forward(prompt, 0), ref.forward(prompt, 0), rtol=1e-4, atol=1e-4)
    for pos, token in zip(range(11, 17), (5, 6, 7, 8, 9, 10)):
        np.testing.assert_allclose(model.forward([token], pos), ref.forward([token], pos), rtol=1e-4, atol=1e-4)
    # 3 tokens at 17 would be padded past the context: they run unpadded
    np.testing.assert_allclose(model.forward([4, 5, 6], 17), ref.forward([4, 5, 6], 17), rtol=1e-4, atol=1e-4)


def test_jitted_decoding_gives_the_eager_tokens():
    gguf = _gguf("tiny-qwen3")
    jitted, eager = TensorModel(gguf, 8), TensorModel(gguf, 8, jit=False)
    prompt = [1, 30]
    want = [t for _, t in zip(range(4), eager.generate(prompt))]
    assert [t for _, t in zip(range(4), jitted.generate(prompt))] == want
    # and the same again after a reset: the capture survives a new cache
    assert [t for _, t in zip(range(4), jitted.generate(prompt))] == want


def test_temperature_sampling_matches_the_reference():
    gguf = _gguf("tiny-llama")
    ref, model = NumpyModel(gguf, 16), TensorModel(gguf, 16)
    draw = [t for _, t in zip(range(6), ref.generate([1, 9], temperature=0.8, seed=3))]
    assert [t for _, t in zip(range(6), model.generate([1, 9], temperature=0.8, seed=3))] == draw


def test_decoding_fills_the_whole_context():
    model = TensorModel(_gguf("tiny-llama"), 4)
    assert len(list(model.generate([1, 2]))) == 3
    with pytest.raises(ModelError, match="context of 4"):
        model.forward([1], 4)
    with pytest.raises(ModelError, match="token ids must be in"):
        model.forward([10**6], 0)


def test_cli_benchmark_on_cpu(capsys):
    assert main(["-m", "tiny-llama", "--benchmark", "3", "--warmup", "--prefill", "4", "--device", "CPU", "--max-context", "64"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('using model "tiny-llama" with ') and out[0].endswith("on CPU")
    assert all(STEP_LINE.match(line) for line in out[1:4]), out[1:4]
    table = [line for line in out if line.startswith("| tiny-llama")]
    assert [row.split("|")[4].strip() for row in table] == ["CPU", "CPU"]
    assert [row.split("|")[5].strip() for row in table] == ["pp4", "tg3"]


def test_cpu_is_the_default_device(capsys):
    assert main(["-m", "tiny-llama", "--prompt", "The robot", "--max-tokens", "3", "--max-context", "32"]) == 0
    gguf = _gguf("tiny-llama")
    tok, ref = Tokenizer.from_metadata(gguf.metadata), NumpyModel(gguf, 32)
    prompt = tok.encode("The robot", add_bos=True)
    tokens = [t for _, t in zip(range(3), ref.generate(prompt))]
    captured = capsys.readouterr()
    assert "on CPU" in captured.err
    assert captured.out == "The robot" + tok.decode(tokens) + "\n"


@pytest.mark.parametrize("prompt", [[1], [1, 9, 4]])
def test_after_warmup_every_timed_step_is_a_replay(prompt):
    """(#25 item 6) `--warmup` must leave nothing one-time for the first timed step (it was 7-40x the others): after
    warm_up, no timed decode step schedules a kernel, compiles or captures; each replays the captured step."""
    from hcq_runtime import counters
    from llm_bench.harness import time_decode, warm_up

    gguf = _gguf("tiny-llama")
    model, tokenizer = TensorModel(gguf, 64), Tokenizer.from_metadata(gguf.metadata)
    warm_up(model, prompt)
    kernels, compiles = counters.kernels, counters.compiles
    result = time_decode(model, tokenizer, prompt, 4, lambda line: None)
    assert len(result.samples_ns) == 4
    assert (counters.kernels, counters.compiles) == (kernels, compiles)


def _resident_kb_of_mapping(address: int) -> int | None:
    """Resident kB of the mapping holding `address` (None without /proc)."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Rss:":
            return int(line.split()[1])
    return None


def test_embedding_lookups_leave_no_file_pages_resident():
    # the weights live in device buffers after loading; each token's embedding row is read from the mapped file, and
    # those pages (with the neighbours the OS maps in with them) are let go again (#26): a long run must not make the
    # table resident a second time
    gguf = read_gguf(resolve_model("tiny-llama"))
    model = TensorModel(gguf, 8)
    table = model.token_embd.array()
    if _resident_kb_of_mapping(table.ctypes.data) is None:
        pytest.skip("no /proc/self/smaps here")
    ids = np.arange(model.config.vocab_size)
    rows = np.concatenate([model._embed(ids[i : i + 7]) for i in range(0, len(ids), 7)])
    assert _resident_kb_of_mapping(table.ctypes.data) == 0
    np.testing.assert_allclose(rows, NumpyModel(gguf, 8).token_embd[ids], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3"])
def test_a_captured_step_computes_no_value_twice(name):
    # the hand-written matmul kernels realize their inputs on their own; the attention's residual sum, left lazy
    # between those realizes, was computed for the norm and again for the layer's last add: the same call twice
    model = TensorModel(_gguf(name), 16)
    model.forward([1, 2, 3], 0, last_only=True)
    model.forward([4], 3)
    for fn in (model._step_fn, model._prefill_fns[(4, "last")]):
        # a call that repeats an earlier one (same kernel, same memory) while nothing rewrote what it reads recomputes
        # a value that was already there (with the capture's shared memory, equal keys are legitimate otherwise)
        last_write: dict[int, int] = {}
        seen: dict[tuple, int] = {}
        for i, call in enumerate(fn.captured.linear.src):
            reads, writes = (tuple(id(buffer_for(b)) for b in group) for group in call_buffers(call))
            key = (call.src[0], reads, writes)
            if key in seen:
                assert any(last_write.get(r, -1) > seen[key] for r in reads), f"call {i} recomputes call {seen[key]}"
            seen[key] = i
            last_write.update((w, i) for w in writes)
