"""Running and linking a LINEAR of CALLs: `run_linear` (eager) and `link_linear` (once, for replays).

Calls on queue devices (AMD, MOCKAMD) go through the hcq2 engine (`hcq_runtime.hcq2`): batched into one submit per
(device, queue), linked once, replayed with only run-time patches written. A LINEAR of CPU calls links into one native
batch run, the CPU side of the same design: `link_linear(linear, inputs)` compiles every kernel and writes a table of
steps (entry point, core count, where its buffer addresses and values start, or a copy's size) with every buffer
address and constant the step owns filled in once, at link time. A small native runner, compiled once per device
and the same for every LINEAR, patches the input addresses and variable values into the table and calls the steps in
order. A replay is therefore one ctypes call plus the kernels' own work: no per-kernel Python dispatch, no scheduling,
and linking compiles nothing but kernels (a program with the addresses written in would be compiled at every link).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

from uopir import Ops, UOp

from .buffer import Buffer
from .cpu import CPUDevice, load_shared_object
from .device import Device
from .errors import DeviceError
from .hcq2 import LinkedSteps, link_calls, run_calls, uses_queue_devices
from .realize import buffer_for, check_devices, compile_body, compile_calls, device_for_call, strip_after

_KERNEL, _COPY = 0, 1
_RUNNER_SRC = r"""
typedef void (*uop_kernel)(void **, const long long *, int, int);
typedef int (*uop_launch)(void *, void **, const long long *, int);
/* steps: n rows of (kind, entry, cores, first buffer slot, first value slot, extra); kind 0 runs a kernel on
   bufs + slot and vals + slot (on `cores` cores through the launcher at `extra` when more than one), kind 1 copies
   `extra` bytes from bufs[slot + 1] to bufs[slot]. Before the steps, the input addresses and variable values are
   patched in: bufs[in_patch[2i]] = ins[in_patch[2i + 1]], and likewise vals. */
void uop_batch_run(const long long *steps, long long n, void **bufs, long long *vals, const long long *in_patch, long long n_in,
                   void **ins, const long long *var_patch, long long n_var, const long long *vars) {
  for (long long i = 0; i < n_in; i++) bufs[in_patch[2 * i]] = ins[in_patch[2 * i + 1]];
  for (long long i = 0; i < n_var; i++) vals[var_patch[2 * i]] = vars[var_patch[2 * i + 1]];
  for (long long i = 0; i < n; i++) {
    const long long *s = steps + 6 * i;
    void **b = bufs + s[3];
    if (s[0] == 1) { __builtin_memcpy(b[0], b[1], (unsigned long)s[5]); continue; }
    if (s[2] > 1) ((uop_launch)s[5])((void *)s[1], b, vals + s[4], (int)s[2]);
    else ((uop_kernel)s[1])(b, vals + s[4], 0, 1);
  }
}
"""


_runners: dict[str, Any] = {}
_runners_lock = threading.Lock()  # held while a runner compiles: `_runner` callers wait for a build under way
_runner_builds: dict[str, threading.Thread] = {}
_builds_lock = threading.Lock()  # only for starting builds: `runner_ready` never waits for a compile


def _runner(device: str) -> Any:
    """The batch runner for a CPU device (compiled once; its source never changes, so the compile cache keeps it).
    Waits for a build `runner_ready` started."""
    with _runners_lock:
        if (fn := _runners.get(device)) is None:
            fn = load_shared_object(Device[device].compiler.compile(_RUNNER_SRC)).uop_batch_run
            fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
            fn.restype = None
            _runners[device] = fn
    return fn


def runner_ready(device: str = "CPU", wait: bool = False) -> bool:
    """Whether the batch runner linked CPU programs need is built for `device`; if not, its build starts in the
    background (once), so a caller that can wait for a later chance (an eager plan's next run) never pauses for the
    compile (~70-150 ms with the compile cache off). `wait`: build it now (False if it cannot be built)."""
    if device in _runners:
        return True
    if wait:
        try:
            _runner(device)
        except Exception:  # noqa: BLE001 - no C compiler: nothing links, everything runs call by call
            return False
        return True
    with _builds_lock:
        if device not in _runner_builds:
            def build() -> None:
                try:
                    _runner(device)
                except Exception:  # noqa: BLE001 - a later _runner call builds it again and reports the error
                    pass

            _runner_builds[device] = thread = threading.Thread(target=build, daemon=True)
            thread.start()
    return False


def _array(ctype: Any, values: Sequence[int]) -> Any:
    return (ctype * max(len(values), 1))(*values)


class LinkedLinear:
    """A linked LINEAR: call it with the input buffers (in `inputs` order) and the variable values by name."""

    def __init__(self, linker: _Linker, device: str):
        self.n_inputs, self.variables = len(linker.input_index), tuple(linker.variables)
        self.n_kernels, self.n_copies = linker.n_steps - linker.n_copies, linker.n_copies
        self._keep = linker.keep
        self._fn = _runner(device)
        self._steps = _array(ctypes.c_longlong, linker.steps)
        self._bufs = _array(ctypes.c_void_p, linker.bufs)
        self._vals = _array(ctypes.c_longlong, linker.vals)
        self._in_patch = _array(ctypes.c_longlong, [x for pair in linker.in_patch for x in pair])
        self._var_patch = _array(ctypes.c_longlong, [x for pair in linker.var_patch for x in pair])
        self._counts = (linker.n_steps, len(linker.in_patch), len(linker.var_patch))
        self._addresses = (ctypes.c_void_p * max(self.n_inputs, 1))()
        self._values = (ctypes.c_longlong * max(len(self.variables), 1))()

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
        n_steps, n_in, n_var = self._counts
        self._fn(self._steps, n_steps, self._bufs, self._vals, self._in_patch, n_in, self._addresses, self._var_patch, n_var,
                 self._values)


class _Linker:
    """Builds the step table: buffer slots (owned addresses, or patched from an input), value slots (constants, or
    patched from a variable) and one row per call."""

    def __init__(self, inputs: Sequence[UOp]):
        self.input_index = {strip_after(u): i for i, u in enumerate(inputs)}
        self.variables: dict[str, int] = {}
        self.keep: list[Any] = []
        self.steps: list[int] = []
        self.bufs: list[int] = []
        self.vals: list[int] = []
        self.in_patch: list[tuple[int, int]] = []  # (buffer slot, input index)
        self.var_patch: list[tuple[int, int]] = []  # (value slot, variable index)
        self.n_steps = 0
        self.n_copies = 0

    def address(self, arg: UOp) -> None:
        """Append the buffer slot for `arg`."""
        arg = strip_after(arg)
        if arg.op is Ops.BUFFER and not (isinstance(device := arg.arg.device, str) and isinstance(Device[device], CPUDevice)):
            raise DeviceError(f"a CPU batch cannot address a buffer on {arg.arg.device}")
        if arg in self.input_index:
            self.in_patch.append((len(self.bufs), self.input_index[arg]))
            self.bufs.append(0)
            return
        buf = buffer_for(arg).ensure_allocated()
        self.keep.append(buf)  # owned: its address is baked in, so it must outlive the program
        self.bufs.append(buf.address)

    def variable(self, name: str) -> None:
        """Append a value slot patched from variable `name` at every run."""
        self.var_patch.append((len(self.vals), self.variables.setdefault(name, len(self.variables))))
        self.vals.append(0)

    def value(self, arg: UOp) -> None:
        if arg.op is Ops.CONST:
            self.vals.append(int(arg.arg))
        elif arg.op in (Ops.BIND, Ops.DEFINE_VAR):
            self.variable(arg.expr)
        else:
            raise DeviceError(f"a scalar call argument must be a CONST, BIND or variable, got {arg.op.name}")

    def add_call(self, call: UOp) -> None:
        call = strip_after(call)
        body, args = call.src[0], call.src[1:]
        first_buf, first_val = len(self.bufs), len(self.vals)
        if body.op is Ops.COPY:
            dest, src = buffer_for(strip_after(args[0])), buffer_for(strip_after(args[1]))
            self.address(args[0])
            self.address(args[1])
            self.steps += [_COPY, 0, 1, first_buf, first_val, min(dest.nbytes, src.nbytes)]
            self.n_steps += 1
            self.n_copies += 1
            return
        if body.op not in (Ops.SINK, Ops.PROGRAM):
            raise DeviceError(f"cannot link a CALL whose body is {body.op.name}")
        device = device_for_call(args)
        if not isinstance(Device[device], CPUDevice):
            raise DeviceError(f"link_linear links CPU programs into one native call; a {device} kernel needs a queue device")
        kernel = compile_body(body, device)
        self.keep.append(kernel.program)
        info = kernel.info
        check_devices(info, device, [buffer_for(args[slot]) for slot in info.globals])
        for slot in info.globals:
            self.address(args[slot])
        for v in info.vars:
            if v.op is Ops.PARAM:
                self.value(args[v.arg.slot])
            else:
                self.variable(v.arg[0])
        cores = info.global_size[0]
        launcher = (ctypes.cast(Device[device].launcher, ctypes.c_void_p).value or 0) if cores > 1 else 0
        self.steps += [_KERNEL, ctypes.cast(kernel.program.fn, ctypes.c_void_p).value or 0, max(cores, 1), first_buf, first_val, launcher]
        self.n_steps += 1


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
    return LinkedLinear(linker, device)
