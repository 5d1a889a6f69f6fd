"""Rendered programs kept on disk (`kernel_cache._rendered`): a process renders a kernel it has rendered before (in any
process) only when uopir's code, the renderer's configuration or the core count changed."""

import copy

import pytest
from hcq_runtime import Device, kernel_cache
from uopir import UOp, dtypes, to_program


def _body(scale: float) -> UOp:
    out, x = UOp.param(0, dtypes.float32.ptr(64)), UOp.param(1, dtypes.float32.ptr(64))
    r = UOp.range(64, 0)
    return UOp.sink(out.index(r).store(x.index(r).load() * scale + 1.0).end(r))


@pytest.fixture
def renders(monkeypatch):
    """The bodies `to_program` renders while the test runs."""
    seen: list[UOp] = []
    monkeypatch.setattr(kernel_cache, "to_program", lambda body, *a, **kw: seen.append(body) or to_program(body, *a, **kw))
    return seen


def test_a_rendered_program_is_kept_and_reused(renders, tmp_path, monkeypatch):
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path))
    renderer, body = Device["CPU"].renderer, _body(2.75)
    first = kernel_cache._rendered(body, renderer, 2)
    assert renders == [body] and list((tmp_path / "program").rglob("*"))
    again = kernel_cache._rendered(body, renderer, 2)
    assert renders == [body] and again is first  # read back: the same (hash-consed) PROGRAM
    # another core count, another renderer configuration, other codegen sources: rendered again
    kernel_cache._rendered(body, renderer, 1)
    assert len(renders) == 2
    narrow = copy.copy(renderer)
    narrow.vector_width = renderer.vector_width // 2  # (another width on any host: an AVX2 host's is already 8)
    kernel_cache._rendered(body, narrow, 2)
    assert len(renders) == 3
    monkeypatch.setattr(kernel_cache, "_codegen_digest", lambda: b"other uopir sources")
    kernel_cache._rendered(body, renderer, 2)
    assert len(renders) == 4


def test_a_damaged_entry_is_rendered_again_and_replaced(renders, tmp_path, monkeypatch):
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path))
    renderer, body = Device["CPU"].renderer, _body(3.5)
    kernel_cache._rendered(body, renderer, 2)
    (entry,) = [p for p in (tmp_path / "program").rglob("*") if p.is_file()]
    entry.write_bytes(b"not a pickle")
    program = kernel_cache._rendered(body, renderer, 2)
    assert len(renders) == 2 and program.src[0] is body
    assert kernel_cache._rendered(body, renderer, 2) is program and len(renders) == 2


def test_nothing_is_kept_with_the_compile_cache_off(renders, tmp_path, monkeypatch):
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")
    kernel_cache._rendered(_body(4.25), Device["CPU"].renderer, 2)
    kernel_cache._rendered(_body(4.25), Device["CPU"].renderer, 2)
    assert len(renders) == 2 and not (tmp_path / "program").exists()


def test_a_renderer_from_outside_uopir_is_not_kept():
    class Outside(type(Device["CPU"].renderer)):
        pass

    assert kernel_cache._renderer_key(Device["CPU"].renderer) is not None
    assert kernel_cache._renderer_key(Outside()) is None


def test_a_graph_too_deep_to_pickle_is_rendered_and_not_kept(renders, tmp_path, monkeypatch):
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path))
    out, x = UOp.param(0, dtypes.float32.ptr(8)), UOp.param(1, dtypes.float32.ptr(8))
    r = UOp.range(8, 0)
    value = x.index(r).load()
    for i in range(1500):  # deeper than pickle's recursion allows
        value = value * 1.0001 + float(i % 7)
    program = kernel_cache._rendered(UOp.sink(out.index(r).store(value).end(r)), Device["CPU"].renderer, 1)
    assert program.src[2].arg and len(renders) == 1
    assert not [p for p in (tmp_path / "program").rglob("*") if p.is_file()]
