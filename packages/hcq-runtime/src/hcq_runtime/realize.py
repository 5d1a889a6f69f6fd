"""Running single CALLs on the devices their buffers live on (`run_call`; `batch.run_linear` runs a LINEAR of them).

A CALL's body is one of:
- a kernel SINK: lowered with `uopir.to_program` for the device's renderer, compiled by the device's compiler (both
  cached: in memory by the body's content key, on disk by source), and launched with the call's buffers and
  variable values;
- a PROGRAM: already lowered; its source is compiled and launched the same way (a PROGRAM that carries a BINARY,
  such as a kernel assembled with amd-isa, is launched as it is);
- COPY: copies the second argument's buffer into the first's, across devices through the host.
Arguments are BUFFER UOps (their storage comes from `buffer_for`), bound variables (BIND), or constants.

`DEBUG=2` prints each call with its time; `DEBUG=4` also prints each program's source when it is compiled.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uopir import Ops, ProgramInfo, UOp, to_program

from .buffer import Buffer
from .device import Device
from .errors import DeviceError

_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()


def strip_after(uop: UOp) -> UOp:
    """The node under any AFTERs (an AFTER is a later version of the same buffer or call)."""
    while uop.op is Ops.AFTER:
        uop = uop.src[0]
    return uop


def buffer_for(uop: UOp) -> Buffer:
    """The storage of a BUFFER UOp (allocated lazily, freed when the UOp is); AFTERs on it are looked through."""
    uop = strip_after(uop)
    if uop.op is not Ops.BUFFER:
        raise DeviceError(f"a call argument must be a BUFFER, got {uop.op.name}")
    if (buf := _buffers.get(uop)) is None:
        arg = uop.arg
        if not isinstance(arg.device, str):
            raise DeviceError(f"BUFFER {arg.slot} has no single device ({arg.device!r}); give it one before running")
        buf = _buffers[uop] = Buffer(arg.device, arg.size, arg.dtype)
    return buf


def bind_buffer(uop: UOp, buf: Buffer) -> None:
    """Make `buf` the storage of the BUFFER UOp `uop` (for inputs that already live somewhere)."""
    if uop.op is not Ops.BUFFER:
        raise DeviceError(f"only BUFFER UOps have storage, got {uop.op.name}")
    _buffers[uop] = buf


@dataclass
class Counters:
    """What `run_linear` did since the last `reset()`: kernels launched, copies, seconds spent, compiles."""

    kernels: int = 0
    copies: int = 0
    seconds: float = 0.0
    compiles: int = 0

    def reset(self) -> None:
        self.kernels, self.copies, self.seconds, self.compiles = 0, 0, 0.0, 0


counters = Counters()


def debug_level() -> int:
    return int(os.environ.get("DEBUG", "0") or 0)


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


def _value(arg: UOp, var_vals: dict[str, int]) -> int:
    if arg.op is Ops.CONST:
        return int(arg.arg)
    if arg.op is Ops.BIND:
        return int(arg.src[1].arg) if arg.src[1].op is Ops.CONST else var_vals[arg.expr]
    if arg.op is Ops.DEFINE_VAR:
        if arg.expr not in var_vals:
            raise DeviceError(f"variable {arg.expr} has no value: bind it or pass it in var_vals")
        return var_vals[arg.expr]
    raise DeviceError(f"a scalar call argument must be a CONST, BIND or variable, got {arg.op.name}")


def _variable_value(var: UOp, args: tuple[UOp, ...], var_vals: dict[str, int]) -> int:
    if var.op is Ops.PARAM:  # a scalar formal argument: its value is the call's argument at that slot
        return _value(args[var.arg.slot], var_vals)
    name = var.arg[0]
    if name in var_vals:
        return var_vals[name]
    for a in args:
        if a.op is Ops.BIND and a.expr == name:
            return _value(a, var_vals)
    raise DeviceError(f"variable {name} has no value: bind it or pass it in var_vals")




def run_call(call: UOp, var_vals: dict[str, int]) -> None:
    call = strip_after(call)
    if call.op is not Ops.CALL:
        raise DeviceError(f"a LINEAR holds CALLs, got {call.op.name}")
    body, args = call.src[0], call.src[1:]
    start = time.perf_counter()
    if body.op is Ops.COPY:
        dest, src = buffer_for(args[0]), buffer_for(args[1])
        dest.copyin(src.as_bytes())
        counters.copies += 1
        label = f"copy {src.nbytes} bytes {src.device} -> {dest.device}"
    elif body.op in (Ops.SINK, Ops.PROGRAM):
        device = device_for_call(args)
        kernel = compile_body(body, device)
        info = kernel.info
        buffers = [buffer_for(args[slot]) for slot in info.globals]
        check_devices(info, device, buffers)
        addresses = [b.ensure_allocated().address for b in buffers]
        values = [_variable_value(v, args, var_vals) for v in info.vars]
        start = time.perf_counter()  # the launch alone: compiling (first use) is not the kernel's time
        kernel.program.launch(addresses, values, info.global_size, info.local_size)
        counters.kernels += 1
        label = info.function_name
    else:
        raise DeviceError(f"cannot run a CALL whose body is {body.op.name}: expected a kernel SINK, PROGRAM or COPY")
    elapsed = time.perf_counter() - start
    counters.seconds += elapsed
    if debug_level() >= 2:
        print(f"*** {label:<40s} {elapsed * 1e6:10.1f} us")


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


def device_for_call(args: tuple[UOp, ...]) -> str:
    """Where a call runs: the device of its first buffer argument (the default device when it has none)."""
    for a in args:
        if strip_after(a).op is Ops.BUFFER:
            return buffer_for(a).device
    return Device.DEFAULT

