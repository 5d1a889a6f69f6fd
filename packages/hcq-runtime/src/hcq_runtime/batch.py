"""Running and linking a LINEAR of CALLs: `run_linear` (eager) and `link_linear` (once, for replays).

Calls on queue devices (AMD, MOCKAMD) go through the hcq2 engine (`hcq_runtime.hcq2`): batched into one submit per
(device, queue), linked once, replayed with only run-time patches written. A LINEAR of CPU calls links into one native
batch program, the CPU side of the same design: `link_linear(linear, inputs)` compiles every kernel, then writes and
compiles one more C function that calls them in order. Addresses of the buffers the step owns (everything not in
`inputs`), kernel entry points and constant arguments are written into that function as literals once, at link time;
input buffer addresses and variable values are read from two small arrays the caller fills on every run. A replay is therefore
one ctypes call plus the kernels' own work: no per-kernel Python dispatch, no scheduling, no compiling.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from uopir import Ops, UOp

from .buffer import Buffer
from .cpu import CPUDevice
from .device import Device
from .errors import DeviceError
from .hcq2 import LinkedSteps, link_calls, run_calls, uses_queue_devices
from .realize import buffer_for, compile_body, compile_calls, device_for_call, strip_after

_ENTRY = "uop_batch"


class LinkedLinear:
    """A linked LINEAR: call it with the input buffers (in `inputs` order) and the variable values by name."""

    def __init__(self, source: str, fn: Any, keep: list[Any], n_inputs: int, variables: tuple[str, ...], n_kernels: int):
        self.source, self.fn, self._keep = source, fn, keep
        self.n_inputs, self.variables, self.n_kernels = n_inputs, variables, n_kernels
        self._addresses = (ctypes.c_void_p * max(n_inputs, 1))()
        self._values = (ctypes.c_longlong * max(len(variables), 1))()

    @property
    def owned_buffers(self) -> list[Buffer]:
        """The buffers whose addresses are baked into the program (kept alive as long as it is)."""
        return [x for x in self._keep if isinstance(x, Buffer)]

    def __call__(self, inputs: Sequence[Buffer], var_vals: dict[str, int] | None = None) -> None:
        if len(inputs) != self.n_inputs:
            raise DeviceError(f"this linked program takes {self.n_inputs} input buffers, got {len(inputs)}")
        for i, buf in enumerate(inputs):
            self._addresses[i] = buf.ensure_allocated().address
        values = var_vals or {}
        for i, name in enumerate(self.variables):
            if name not in values:
                raise DeviceError(f"variable {name} has no value: pass it in var_vals")
            self._values[i] = values[name]
        self.fn(self._addresses, self._values)


class _Linker:
    def __init__(self, inputs: Sequence[UOp]):
        self.input_index = {strip_after(u): i for i, u in enumerate(inputs)}
        self.variables: dict[str, int] = {}
        self.keep: list[Any] = []
        self.lines: list[str] = []

    def address(self, arg: UOp) -> str:
        arg = strip_after(arg)
        if arg in self.input_index:
            return f"ins[{self.input_index[arg]}]"
        buf = buffer_for(arg).ensure_allocated()
        if not isinstance(Device[buf.device], CPUDevice):
            raise DeviceError(f"a CPU batch cannot address a buffer on {buf.device}")
        self.keep.append(buf)  # owned: its address is baked in, so it must outlive the program
        return f"(void *){buf.address:#x}ull"

    def variable(self, name: str) -> str:
        return f"vars[{self.variables.setdefault(name, len(self.variables))}]"

    def value(self, arg: UOp) -> str:
        if arg.op is Ops.CONST:
            return f"{int(arg.arg)}ll"
        if arg.op in (Ops.BIND, Ops.DEFINE_VAR):
            return self.variable(arg.expr)
        raise DeviceError(f"a scalar call argument must be a CONST, BIND or variable, got {arg.op.name}")

    def add_call(self, call: UOp) -> None:
        call = strip_after(call)
        body, args = call.src[0], call.src[1:]
        if body.op is Ops.COPY:
            dest, src = buffer_for(strip_after(args[0])), buffer_for(strip_after(args[1]))
            self.lines.append(f"  __builtin_memcpy({self.address(args[0])}, {self.address(args[1])}, {min(dest.nbytes, src.nbytes)});")
            return
        if body.op not in (Ops.SINK, Ops.PROGRAM):
            raise DeviceError(f"cannot link a CALL whose body is {body.op.name}")
        device = device_for_call(args)
        if not isinstance(Device[device], CPUDevice):
            raise DeviceError(f"link_linear links CPU programs into one native call; a {device} kernel needs a queue device")
        kernel = compile_body(body, device)
        self.keep.append(kernel.program)
        info = kernel.info
        fn_address = ctypes.cast(kernel.program.fn, ctypes.c_void_p).value
        bufs = ", ".join(self.address(args[slot]) for slot in info.globals) or "0"
        vals = ", ".join((self.value(args[v.arg.slot]) if v.op is Ops.PARAM else self.variable(v.arg[0])) for v in info.vars) or "0"
        self.lines.append(f"  {{ void *b[] = {{{bufs}}}; long long v[] = {{{vals}}};  /* {info.function_name} */")
        cores = info.global_size[0]
        if cores > 1:
            launcher = ctypes.cast(Device[device].launcher, ctypes.c_void_p).value
            launch = f"((int (*)(void *, void **, const long long *, int)){launcher:#x}ull)"
            self.lines.append(f"    {launch}((void *){fn_address:#x}ull, b, v, {cores}); }}")
        else:
            self.lines.append(f"    ((void (*)(void **, const long long *, int, int)){fn_address:#x}ull)(b, v, 0, 1); }}")


def run_linear(linear: UOp, var_vals: dict[str, int] | None = None) -> None:
    """Run every CALL of `linear` in order: consecutive calls on queue devices as batches through the hcq2 engine, the
    rest one by one (see `hcq_runtime.realize` for the kinds of calls)."""
    if linear.op is not Ops.LINEAR:
        raise DeviceError(f"run_linear takes a LINEAR of CALLs, got {linear.op.name}")
    compile_calls(linear.src)
    run_calls(linear.src, var_vals)


def link_linear(linear: UOp, inputs: Sequence[UOp] = (), device: str = "CPU") -> LinkedLinear | LinkedSteps:
    """Link `linear` for replays: `linked(input_buffers, {"var": value})`.

    `inputs` are the BUFFER UOps whose storage changes between runs; every other buffer is owned by the linked program.
    A LINEAR touching queue devices links through the hcq2 engine (one submit per device and queue per replay); a LINEAR
    of CPU calls compiles into one native batch program."""
    if linear.op is not Ops.LINEAR:
        raise DeviceError(f"link_linear takes a LINEAR of CALLs, got {linear.op.name}")
    if uses_queue_devices(linear):
        return link_calls(linear, inputs)
    linker = _Linker(inputs)
    for call in linear.src:
        linker.add_call(call)
    source = (f"void {_ENTRY}(void **ins, const long long *vars) {{\n  (void)ins; (void)vars;\n" + "\n".join(linker.lines) + "\n}\n")
    dev = Device[device]
    program = dev.program(_ENTRY, dev.compiler.compile(source))
    program.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    linker.keep.append(program)
    return LinkedLinear(source, program.fn, linker.keep, len(inputs), tuple(linker.variables), len(linear.src))
