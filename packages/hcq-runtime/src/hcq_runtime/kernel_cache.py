"""The compile cache: a CALL body (kernel SINK or PROGRAM) rendered for a device and compiled once.

A kernel SINK is lowered with `uopir.to_program` for the device's renderer and compiled by the device's compiler; a
PROGRAM is already lowered (one that carries a BINARY, such as a kernel assembled with amd-isa, is loaded as it is).
Both are cached in memory by the body's content key and device (and on disk by source, in the compiler).
`compile_calls` compiles a LINEAR's new kernels in parallel before any of them runs; `start_compiles` hands kernels to
the compile threads without waiting (a launch that wants one waits for it: each kernel compiles once).

`DEBUG=2` prints each compile with its time; `DEBUG=4` also prints each program's source when it is compiled.
"""

from __future__ import annotations

import functools
import os
import pickle
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uopir
from uopir import Ops, ProgramInfo, UOp, to_program

from .buffer import Buffer
from .buffer_registry import device_for_call, strip_after
from .compiler import blake2s, cache_enabled, cache_entry, write_cache_entry
from .debug import counters, debug_level
from .device import Device
from .errors import DeviceError


@dataclass
class CompiledKernel:
    info: ProgramInfo
    program: Any
    source: str = field(repr=False)


_kernels: dict[tuple[bytes, str], CompiledKernel] = {}


class _Pending:
    """A kernel handed to the compile threads: its program (rendered on the caller's thread: building UOps is not
    thread-safe), then its binary (None when the compile failed)."""

    __slots__ = ("body", "device", "program", "dev", "done", "binary")

    def __init__(self, body: UOp, device: str, program: UOp, dev: Any):
        self.body, self.device, self.program, self.dev = body, device, program, dev
        self.done = threading.Event()
        self.binary: bytes | None = None


# kernels being compiled, by the key of `_kernels`: a launch that wants one waits for it instead of compiling it again
_inflight: dict[tuple[bytes, str], _Pending] = {}
_jobs: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
_workers: list[threading.Thread] = []


def _compile_worker() -> None:
    while True:
        pending = _jobs.get()
        try:
            pending.binary = _binary(pending.program, pending.dev)
        except BaseException:  # noqa: BLE001, S110 - the launch compiles it again and raises the error in order
            pass
        finally:
            pending.done.set()


def _after_fork_in_child() -> None:
    # the compile threads do not exist in a forked child: what they had in hand never finishes there
    global _jobs
    _inflight.clear()
    _workers.clear()
    _jobs = queue.SimpleQueue()


os.register_at_fork(after_in_child=_after_fork_in_child)


def compile_body(body: UOp, device: str) -> CompiledKernel:
    """The compiled program for a kernel SINK or PROGRAM body on `device` (cached by content key; a kernel the compile
    threads have in hand is waited for)."""
    if (hit := _kernels.get(key := (body.key, device))) is not None:
        return hit
    if (pending := _inflight.get(key)) is not None and (done := _finish(key, pending)) is not None:
        return done
    program, dev = _program(body, device)
    return _load(body, device, program, _binary(program, dev))


def _program(body: UOp, device: str) -> tuple[UOp, Any]:
    dev = Device[device]
    if getattr(dev, "renderer", None) is None:
        raise DeviceError(f"{device} runs no kernels (it stores bytes): compute on a device such as CPU, then copy the result there")
    program = body if body.op is Ops.PROGRAM else _rendered(body, dev.renderer, dev.n_cores)
    if debug_level() >= 4:
        print(program.src[2].arg)
    return program, dev


@functools.cache
def _codegen_digest() -> bytes:
    """A hash of uopir's own sources: a rendered program kept on disk is used only by the code that rendered it."""
    h = blake2s()
    root = Path(uopir.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.digest()


def _renderer_key(renderer: Any) -> str | None:
    """The renderer's whole configuration (the attributes of its classes and its own) as text that is the same in every
    process (sets sorted); None for a renderer whose code is not uopir's own (its sources are not in the key) or whose
    configuration prints differently from one process to the next (an object's address)."""
    classes = [c for c in type(renderer).__mro__ if c is not object]
    if any(not c.__module__.startswith("uopir.") for c in classes):
        return None
    fields: dict[str, Any] = {}
    for c in reversed(classes):
        fields.update({k: v for k, v in vars(c).items() if not k.startswith("__") and not callable(v)
                       and not isinstance(v, (property, staticmethod, classmethod, functools.cached_property))})
    fields.update(vars(renderer))
    parts = [f"{type(renderer).__module__}.{type(renderer).__qualname__}"]
    for name in sorted(fields):
        value = fields[name]
        parts.append(f"{name}={sorted(map(repr, value)) if isinstance(value, (set, frozenset)) else repr(value)}")
    text = "\n".join(parts)
    return None if " at 0x" in text else text


def _rendered(body: UOp, renderer: Any, n_cores: int) -> UOp:
    """`to_program(body, renderer, n_cores=n_cores)`, kept on disk beside the compiled binaries for kernels of CPU
    renderers: every process rendered each kernel again to find its source in the compile cache (0.16 s of an LLM's
    1.1 s warm start). Keyed by the body's content key, the renderer's configuration, the core count and uopir's
    sources; an entry that does not load, or is not a PROGRAM of this very body, is rendered again."""
    if renderer.global_dims or not cache_enabled() or (config := _renderer_key(renderer)) is None:
        return to_program(body, renderer, n_cores=n_cores)
    path = cache_entry("program", body.key + _codegen_digest() + f"\0{config}\0{n_cores}".encode())
    try:
        program = pickle.loads(path.read_bytes())
        if isinstance(program, UOp) and program.op is Ops.PROGRAM and program.src[0] is body:
            return program
    except Exception:  # noqa: BLE001, S110 - none yet, or a damaged entry: rendered again (and replaced)
        pass
    program = to_program(body, renderer, n_cores=n_cores)
    try:
        write_cache_entry(path, pickle.dumps(program))
    except Exception:  # noqa: BLE001, S110 - not kept (a chain of thousands of ops is too deep for pickle), or no disk room
        pass
    return program


def _binary(program: UOp, dev: Any) -> bytes:
    if len(program.src) > 3 and program.src[3].op is Ops.BINARY:  # already built (e.g. assembled with amd-isa)
        return program.src[3].arg
    start = time.perf_counter()
    binary = dev.compiler.compile(program.src[2].arg)
    counters.compiles += 1
    if debug_level() >= 2:  # compiles run in parallel: each line is that compile's own wall time (a cache hit: ~0)
        print(f"*** compile {program.arg.function_name:<32s} {(time.perf_counter() - start) * 1e3:10.1f} ms")
    return binary


def _load(body: UOp, device: str, program: UOp, binary: bytes) -> CompiledKernel:
    info = program.arg
    compiled = _kernels[(body.key, device)] = CompiledKernel(info, Device[device].program(info.function_name, binary), program.src[2].arg)
    return compiled


def _finish(key: tuple[bytes, str], pending: _Pending) -> CompiledKernel | None:
    """Wait for a kernel the compile threads have in hand and load it; None when its compile failed (the launch then
    compiles it again, which raises the error where the kernel runs)."""
    pending.done.wait()
    if _inflight.get(key) is pending:
        del _inflight[key]
    if (hit := _kernels.get(key)) is not None:
        return hit
    if pending.binary is None:
        return None
    try:
        return _load(pending.body, pending.device, pending.program, pending.binary)
    except Exception:  # noqa: BLE001 - reported again, in order, when the call runs
        return None


def start_compiles(calls: Sequence[UOp], least: int = 1) -> list[tuple[tuple[bytes, str], _Pending]]:
    """Hand the kernels of `calls` that are neither compiled nor being compiled to the compile threads (one per core),
    their sources rendered here, in turn, and return every kernel of `calls` the threads have in hand. Nothing is
    started when fewer than `least` kernels are new or the machine has one core (each compiles at its launch)."""
    todo: dict[tuple[bytes, str], tuple[UOp, str]] = {}
    waiting: dict[tuple[bytes, str], _Pending] = {}
    for call in calls:
        call = strip_after(call)
        if call.op is not Ops.CALL or call.src[0].op not in (Ops.SINK, Ops.PROGRAM):
            continue
        try:
            device = device_for_call(call.src[1:])
        except DeviceError:
            continue
        if (key := (call.src[0].key, device)) in _kernels or key in todo:
            continue
        if (pending := _inflight.get(key)) is not None:
            waiting[key] = pending
        else:
            todo[key] = (call.src[0], device)
    if (cores := os.cpu_count() or 1) < 2 or len(todo) < least:
        return list(waiting.items())
    for key, (body, device) in todo.items():
        try:
            program, dev = _program(body, device)
        except Exception:  # noqa: BLE001 - reported again, in order, when the call runs
            continue
        if len(program.src) > 3 and program.src[3].op is Ops.BINARY:  # nothing to compile
            continue
        waiting[key] = _inflight[key] = pending = _Pending(body, device, program, dev)
        _jobs.put(pending)
    # plain threads (concurrent.futures would also load logging: 1 MiB resident), started once, waiting for work
    while len(_workers) < min(cores, len(_inflight)):
        _workers.append(thread := threading.Thread(target=_compile_worker, daemon=True, name="uop-compile"))
        thread.start()
    return list(waiting.items())


def compile_calls(calls: Sequence[UOp]) -> None:
    """Compile the kernels of `calls` not compiled yet before any of them runs: their sources are rendered in turn and
    compiled by the C/LLVM compiler in parallel, one process per core (a model's first step has dozens; compiled one
    at a time on first launch, the compiler's start-up and optimizer dominate a cold start). Kernels already handed to
    the compile threads (`start_compiles`) are waited for. A kernel that fails here is left for its launch, which
    reports the error in order."""
    for key, pending in start_compiles(calls, least=2):
        _finish(key, pending)


def check_devices(info: ProgramInfo, device: str, buffers: Sequence[Buffer]) -> None:
    """Raise unless every buffer a kernel addresses lives on the device it runs on."""
    if strangers := sorted({b.device for b in buffers} - {device}):
        raise DeviceError(f"kernel {info.function_name} runs on {device} but reads or writes buffers on {', '.join(strangers)}: "
                          "a program can only address its own device's memory; copy the data first")


def call_buffers(call: UOp) -> tuple[list[UOp], list[UOp]]:
    """The buffer arguments a CALL reads and the ones it writes (a kernel's by its compiled `ProgramInfo`; a copy reads
    its source and writes its destination)."""
    call = strip_after(call)
    body, args = call.src[0], call.src[1:]
    if body.op is Ops.COPY:
        return [strip_after(args[1])], [strip_after(args[0])]
    info = compile_body(body, device_for_call(args)).info
    return [strip_after(args[slot]) for slot in info.ins], [strip_after(args[slot]) for slot in info.outs]
