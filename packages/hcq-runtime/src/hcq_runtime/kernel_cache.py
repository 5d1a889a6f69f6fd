"""The compile cache: a CALL body (kernel SINK or PROGRAM) rendered for a device and compiled once.

A kernel SINK is lowered with `uopir.to_program` for the device's renderer and compiled by the device's compiler; a
PROGRAM is already lowered (one that carries a BINARY, such as a kernel assembled with amd-isa, is loaded as it is).
Both are cached in memory by the body's content key and device (and on disk by source, in the compiler).
`compile_calls` compiles a LINEAR's new kernels in parallel before any of them runs.

`DEBUG=2` prints each compile with its time; `DEBUG=4` also prints each program's source when it is compiled.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uopir import Ops, ProgramInfo, UOp, to_program

from .buffer import Buffer
from .buffer_registry import device_for_call, strip_after
from .debug import counters, debug_level
from .device import Device
from .errors import DeviceError


@dataclass
class CompiledKernel:
    info: ProgramInfo
    program: Any
    source: str = field(repr=False)


_kernels: dict[tuple[bytes, str], CompiledKernel] = {}


def compile_body(body: UOp, device: str) -> CompiledKernel:
    """The compiled program for a kernel SINK or PROGRAM body on `device` (cached by content key)."""
    if (hit := _kernels.get((body.key, device))) is not None:
        return hit
    program, dev = _program(body, device)
    return _load(body, device, program, _binary(program, dev))


def _program(body: UOp, device: str) -> tuple[UOp, Any]:
    dev = Device[device]
    if getattr(dev, "renderer", None) is None:
        raise DeviceError(f"{device} runs no kernels (it stores bytes): compute on a device such as CPU, then copy the result there")
    program = body if body.op is Ops.PROGRAM else to_program(body, dev.renderer, n_cores=dev.n_cores)
    if debug_level() >= 4:
        print(program.src[2].arg)
    return program, dev


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


def compile_calls(calls: Sequence[UOp]) -> None:
    """Compile the kernels of `calls` not compiled yet before any of them runs: their sources are rendered in turn and
    compiled by the C/LLVM compiler in parallel, one process per core (a model's first step has dozens; compiled one
    at a time on first launch, the compiler's start-up and optimizer dominate a cold start). A kernel that fails here
    is left for its launch, which reports the error in order."""
    todo: dict[tuple[bytes, str], tuple[UOp, str]] = {}
    for call in calls:
        call = strip_after(call)
        if call.op is not Ops.CALL or call.src[0].op not in (Ops.SINK, Ops.PROGRAM):
            continue
        try:
            device = device_for_call(call.src[1:])
        except DeviceError:
            continue
        if (key := (call.src[0].key, device)) not in _kernels and key not in todo:
            todo[key] = (call.src[0], device)
    if len(todo) < 2 or (os.cpu_count() or 1) < 2:
        return
    programs = []
    for body, device in todo.values():
        try:
            programs.append((body, device, *_program(body, device)))
        except Exception:  # noqa: BLE001 - reported again, in order, when the call runs
            continue

    def build(item: tuple) -> tuple | None:
        body, device, program, dev = item
        try:
            return body, device, program, _binary(program, dev)
        except Exception:  # noqa: BLE001
            return None

    # plain threads taking the next program in turn (concurrent.futures would also load logging: 1 MiB resident)
    built: list[tuple | None] = [None] * len(programs)
    jobs, lock = iter(range(len(programs))), threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(jobs, None)
            if i is None:
                return
            built[i] = build(programs[i])

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(os.cpu_count() or 1, len(programs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for item in built:
        if item is not None:
            _load(*item)


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
