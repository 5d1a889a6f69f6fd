"""The host runner: kernels the host calls directly (CPU) and copies between memories the host reads (CPU, DISK).

Eager (`HostRunner.run`): each kernel is launched with its buffers' addresses and its variables' values, each copy
made through host memory. `DEBUG=2` prints each call with its time.

Linked (`HostRunner.link`): the calls become one native batch run, the CPU side of the hcq2 design. Linking compiles
every kernel and writes a table of steps (entry point, core count, where its buffer addresses and values start, or a
copy's size) with every buffer address and constant the step owns filled in once. A small native runner, compiled
once per device and the same for every batch, patches the input addresses and variable values into the table and
calls the steps in order. A replay is therefore one ctypes call plus the kernels' own work: no per-kernel Python
dispatch, and linking compiles nothing but kernels (a program with the addresses written in would be compiled at every
link). A batch linked while profiling is on (`PROFILE=1` or `DEBUG>=2`, as for queue batches) runs through the timed
entry of the same runner, which reads the monotonic clock after every step: `batch.profile()` returns the last run's
steps as `ProfileEvent`s, and `DEBUG>=2` prints each step's time after each run, as eager launches do.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from uopir import Ops, UOp

from .buffer import Buffer, check_copy
from .buffer_registry import buffer_for, device_for_call, strip_after
from .compiler import CCompiler, precompiled_header_flags
from .cpu import CPUDevice, load_shared_object
from .debug import counters, debug_level
from .device import Device
from .errors import DeviceError
from .hcq2.profile import ProfileEvent, profiling
from .kernel_cache import check_devices, compile_body
from .lanes import LANE_VARIABLE
from .runner import LinkedPart, Runner

_KERNEL, _COPY = 0, 1
_RUNNER_SRC = r"""
typedef void (*uop_kernel)(void **, const long long *, int, int);
typedef int (*uop_launch)(void *, void **, const long long *, int);
#include <time.h>
/* steps: n rows of (kind, entry, cores, first buffer slot, first value slot, extra); kind 0 runs a kernel on
   bufs + slot and vals + slot (on `cores` cores through the launcher at `extra` when more than one), kind 1 copies
   `extra` bytes from bufs[slot + 1] to bufs[slot]. Before the steps, the input addresses and variable values are
   patched in: bufs[in_patch[2i]] = ins[in_patch[2i + 1]], and likewise vals. */
static inline void uop_step(const long long *s, void **bufs, long long *vals) {
  void **b = bufs + s[3];
  if (s[0] == 1) { __builtin_memcpy(b[0], b[1], (unsigned long)s[5]); return; }
  if (s[2] > 1) ((uop_launch)s[5])((void *)s[1], b, vals + s[4], (int)s[2]);
  else ((uop_kernel)s[1])(b, vals + s[4], 0, 1);
}
static void uop_patch(void **bufs, long long *vals, const long long *in_patch, long long n_in, void **ins,
                      const long long *var_patch, long long n_var, const long long *vars) {
  for (long long i = 0; i < n_in; i++) bufs[in_patch[2 * i]] = ins[in_patch[2 * i + 1]];
  for (long long i = 0; i < n_var; i++) vals[var_patch[2 * i]] = vars[var_patch[2 * i + 1]];
}
void uop_batch_run(const long long *steps, long long n, void **bufs, long long *vals, const long long *in_patch, long long n_in,
                   void **ins, const long long *var_patch, long long n_var, const long long *vars) {
  uop_patch(bufs, vals, in_patch, n_in, ins, var_patch, n_var, vars);
  for (long long i = 0; i < n; i++) uop_step(steps + 6 * i, bufs, vals);
}
/* The same run, writing the monotonic clock (ns) before the first step to stamps[0] and after step i to stamps[i + 1]. */
void uop_batch_run_timed(const long long *steps, long long n, void **bufs, long long *vals, const long long *in_patch,
                         long long n_in, void **ins, const long long *var_patch, long long n_var, const long long *vars,
                         long long *stamps) {
  struct timespec t;
  uop_patch(bufs, vals, in_patch, n_in, ins, var_patch, n_var, vars);
  clock_gettime(CLOCK_MONOTONIC, &t);
  stamps[0] = t.tv_sec * 1000000000LL + t.tv_nsec;
  for (long long i = 0; i < n; i++) {
    uop_step(steps + 6 * i, bufs, vals);
    clock_gettime(CLOCK_MONOTONIC, &t);
    stamps[i + 1] = t.tv_sec * 1000000000LL + t.tv_nsec;
  }
}
"""


_runners: dict[str, Any] = {}
_runners_lock = threading.Lock()  # held while a runner compiles: `_runner` callers wait for a build under way
_runner_builds: dict[str | tuple[str, str], threading.Thread] = {}  # prepare_cpu's builds: a device's parts, its header
_builds_lock = threading.Lock()  # only for starting builds: `runner_ready` never waits for a compile


def _runner(device: str, timed: bool = False) -> Any:
    """The batch runner for a CPU device (compiled once; its source never changes, so the compile cache keeps it), or
    its timed entry. Waits for a build `runner_ready` started."""
    with _runners_lock:
        if (lib := _runners.get(device)) is None:
            lib = load_shared_object(Device[device].compiler.compile(_RUNNER_SRC))
            args = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
            lib.uop_batch_run.argtypes, lib.uop_batch_run_timed.argtypes = args, [*args, ctypes.c_void_p]
            lib.uop_batch_run.restype = lib.uop_batch_run_timed.restype = None
            _runners[device] = lib
    return lib.uop_batch_run_timed if timed else lib.uop_batch_run


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
    prepare_cpu(device)
    return False


def prepare_cpu(device: str = "CPU", header: bool = False) -> None:
    """Start building, in the background and once per device, what a CPU device's kernels need besides themselves: the
    launcher of multi-core kernels and the batch runner of linked programs (`runner_ready`), and with `header` the
    precompiled <immintrin.h> hand-written intrinsics kernels include. In a cold process (compile cache off or empty)
    each was built where it was first needed: the launcher at the first multi-core launch, after the first realize's
    kernels had compiled (~70 ms on the caller's thread). With the compile cache on, each build is a cache read. Errors
    are left to the use that needs the part (it builds it again and reports them)."""
    builds = {device: (_build_parts, "uop-prepare"), **({(device, "header"): (_build_header, "uop-pch")} if header else {})}
    started = []
    with _builds_lock:
        for key, (fn, name) in builds.items():
            if key not in _runner_builds:
                _runner_builds[key] = thread = threading.Thread(target=fn, args=(device,), daemon=True, name=name)
                started.append(thread)
    for thread in started:
        thread.start()


def _build_parts(device: str) -> None:
    try:
        # (the linker probe starts with the first compile, not here: a process whose parts and kernels are all in the
        # compile cache compiles nothing and needs no probe)
        if isinstance(dev := Device[device], CPUDevice) and dev.n_cores > 1:
            dev.launcher  # noqa: B018 - built now, so the first multi-core launch finds it
        _runner(device)
    except Exception:  # noqa: BLE001, S110 - a later use builds the part again and reports the error
        pass


def _build_header(device: str) -> None:
    try:
        if isinstance(compiler := getattr(Device[device], "compiler", None), CCompiler):
            precompiled_header_flags(compiler.cc, compiler.compile_flags)
    except Exception:  # noqa: BLE001, S110 - the first kernel that includes the header builds it again, or parses it
        pass


def _after_fork_in_child() -> None:
    # a build under way in the parent has no thread in a forked child, and may hold the runners' lock there: the child
    # gets a free lock and starts the builds it needs again
    global _runners_lock, _builds_lock
    _runners_lock, _builds_lock = threading.Lock(), threading.Lock()
    _runner_builds.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _array(ctype: Any, values: Sequence[int]) -> Any:
    return (ctype * max(len(values), 1))(*values)


def _value(arg: UOp, var_vals: Mapping[str, int]) -> int:
    if arg.op is Ops.CONST:
        return int(arg.arg)
    if arg.op is Ops.BIND:
        return int(arg.src[1].arg) if arg.src[1].op is Ops.CONST else var_vals[arg.expr]
    if arg.op is Ops.DEFINE_VAR:
        if arg.expr not in var_vals:
            raise DeviceError(f"variable {arg.expr} is unbound (no value): bind it or pass it in var_vals")
        return var_vals[arg.expr]
    raise DeviceError(f"a scalar call argument must be a CONST, BIND or variable, got {arg.op.name}")


def _variable_value(var: UOp, args: tuple[UOp, ...], var_vals: Mapping[str, int]) -> int:
    if var.op is Ops.PARAM:  # a scalar formal argument: its value is the call's argument at that slot
        return _value(args[var.arg.slot], var_vals)
    name = var.arg[0]
    if name in var_vals:
        return var_vals[name]
    for a in args:
        if a.op is Ops.BIND and a.expr == name:
            return _value(a, var_vals)
    raise DeviceError(f"variable {name} is unbound (no value): bind it or pass it in var_vals")


def _call_parts(call: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    call = strip_after(call)
    if call.op is not Ops.CALL:
        raise DeviceError(f"a LINEAR holds CALLs, got {call.op.name}")
    body = call.src[0]
    if body.op not in (Ops.COPY, Ops.SINK, Ops.PROGRAM):
        raise DeviceError(f"cannot run a CALL whose body is {body.op.name}: expected a kernel SINK, PROGRAM or COPY")
    return body, call.src[1:]


class HostRunner(Runner):
    """Runs host kernels and host copies (see the module docstring)."""

    host = True

    def run(self, calls: Sequence[UOp], var_vals: Mapping[str, int]) -> None:
        for call in calls:
            self.run_call(call, var_vals)

    def run_call(self, call: UOp, var_vals: Mapping[str, int]) -> None:
        """Run one CALL: launch its kernel, or make its copy."""
        body, args = _call_parts(call)
        start = time.perf_counter()
        if body.op is Ops.COPY:
            dest, src = buffer_for(args[0]), buffer_for(args[1])
            dest.copy_from(src)
            counters.copies += 1
            label = f"copy {src.nbytes} bytes {src.device} -> {dest.device}"
        else:
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
            counters.ops += info.ops
            counters.mem += info.mem
            label = info.function_name
        elapsed = time.perf_counter() - start
        counters.seconds += elapsed
        if debug_level() >= 2:
            per_s = 1e-9 / max(elapsed, 1e-9)
            rates = "" if body.op is Ops.COPY else f"  {info.ops * per_s:8.2f} GFLOP/s {info.mem * per_s:8.2f} GB/s"
            print(f"*** {label:<40s} {elapsed * 1e6:10.1f} us{rates}")

    def link(self, calls: Sequence[UOp], inputs: Sequence[UOp]) -> HostBatch:
        linker = _Linker(inputs)
        for call in calls:
            linker.add_call(call)
        return HostBatch(linker)


HOST_RUNNER = HostRunner()


class HostBatch(LinkedPart):
    """Host calls linked into one native batch run (see the module docstring)."""

    def __init__(self, linker: _Linker):
        self.variables = tuple(linker.variables)
        self.n_kernels, self.n_copies = linker.n_steps - linker.n_copies, linker.n_copies
        self.n_ops, self.n_mem = linker.n_ops, linker.n_mem
        self._used = tuple(linker.used)  # the replay inputs this batch addresses, in its inputs-table order
        self._keep = linker.keep
        #: whether runs record each step's time (profiling was on when the batch was linked); see `profile`
        self.profiled = profiling() and linker.n_steps > 0
        self._labels = tuple(linker.labels)
        self._device = linker.device or "CPU"
        self._fn = _runner(linker.device, self.profiled) if linker.n_steps else None
        self._stamps = (ctypes.c_longlong * (linker.n_steps + 1))() if self.profiled else None
        self._timed = False  # whether `_stamps` holds a run's times
        self._steps = _array(ctypes.c_longlong, linker.steps)
        self._bufs = _array(ctypes.c_void_p, linker.bufs)
        self._vals = _array(ctypes.c_longlong, linker.vals)
        self._in_patch = _array(ctypes.c_longlong, [x for pair in linker.in_patch for x in pair])
        self._var_patch = _array(ctypes.c_longlong, [x for pair in linker.var_patch for x in pair])
        self._counts = (linker.n_steps, len(linker.in_patch), len(linker.var_patch))
        self._addresses = (ctypes.c_void_p * max(len(self._used), 1))()
        self._values = (ctypes.c_longlong * max(len(self.variables), 1))()

    @property
    def owned_buffers(self) -> list[Buffer]:
        return [x for x in self._keep if isinstance(x, Buffer)]

    @property
    def refs(self) -> list[Any]:
        return list(self._keep)

    def __call__(self, inputs: Sequence[Buffer], var_vals: Mapping[str, int]) -> None:
        addresses = self._addresses
        for i, index in enumerate(self._used):
            addresses[i] = inputs[index].address  # (allocated on first use, then remembered on the buffer)
        for i, name in enumerate(self.variables):
            if name not in var_vals:
                raise DeviceError(f"variable {name} is unbound (no value): pass it in var_vals")
            self._values[i] = var_vals[name]
        n_steps, n_in, n_var = self._counts
        if self._fn is None:
            return
        if self._stamps is None:
            self._fn(self._steps, n_steps, self._bufs, self._vals, self._in_patch, n_in, addresses, self._var_patch, n_var,
                     self._values)
            return
        self._fn(self._steps, n_steps, self._bufs, self._vals, self._in_patch, n_in, addresses, self._var_patch, n_var,
                 self._values, self._stamps)
        self._timed = True
        if debug_level() >= 2:
            for event in self.profile():
                print(f"*** {event.name:<40s} {event.duration_us:10.1f} us (linked)")

    def profile(self) -> list[ProfileEvent]:
        """The steps of the last run with their times (host clock, microseconds); empty unless the batch is `profiled`
        and has run."""
        if self._stamps is None or not self._timed:
            return []
        stamps = self._stamps
        return [ProfileEvent(self._device, name, stamps[i] / 1e3, stamps[i + 1] / 1e3) for i, name in enumerate(self._labels)]


class _Linker:
    """Builds the step table: buffer slots (owned addresses, or patched from an input), value slots (constants, or
    patched from a variable) and one row per call."""

    def __init__(self, inputs: Sequence[UOp]):
        self.input_index = {strip_after(u): i for i, u in enumerate(inputs)}
        self.used: dict[int, int] = {}  # replay input index -> its entry in this batch's inputs table
        self.variables: dict[str, int] = {}
        self.keep: list[Any] = []
        self.steps: list[int] = []
        self.bufs: list[int] = []
        self.vals: list[int] = []
        self.in_patch: list[tuple[int, int]] = []  # (buffer slot, inputs-table entry)
        self.var_patch: list[tuple[int, int]] = []  # (value slot, variable index)
        self.n_steps = 0
        self.n_copies = 0
        self.n_ops = self.n_mem = 0  # the kernels' estimates (ProgramInfo.ops / mem)
        self.labels: list[str] = []  # each step's name (a kernel's function, or the copy's size)
        self.device: str | None = None  # the CPU device whose native runner runs the batch

    def address(self, arg: UOp) -> Buffer:
        """Append the buffer slot for `arg`; return its storage."""
        arg = strip_after(arg)
        buf = buffer_for(arg)
        if not isinstance(dev := Device[buf.device], CPUDevice):
            raise DeviceError(f"a CPU batch cannot address a buffer on {buf.device}")
        self.device = self.device or dev.name
        if arg in self.input_index:
            index = self.used.setdefault(self.input_index[arg], len(self.used))
            self.in_patch.append((len(self.bufs), index))
            self.bufs.append(0)
            return buf
        buf.ensure_allocated()
        self.keep.append(buf)  # owned: its address is baked in, so it must outlive the program
        self.bufs.append(buf.address)
        return buf

    def variable(self, name: str) -> None:
        """Append a value slot patched from variable `name` at every run."""
        self.var_patch.append((len(self.vals), self.variables.setdefault(name, len(self.variables))))
        self.vals.append(0)

    def value(self, arg: UOp) -> None:
        if arg.op is Ops.CONST:
            self.vals.append(int(arg.arg))
        elif arg.op is Ops.BIND and arg.expr == LANE_VARIABLE:  # a lane's index is a constant of its call
            self.vals.append(int(arg.src[1].arg))
        elif arg.op in (Ops.BIND, Ops.DEFINE_VAR):
            self.variable(arg.expr)
        else:
            raise DeviceError(f"a scalar call argument must be a CONST, BIND or variable, got {arg.op.name}")

    def add_call(self, call: UOp) -> None:
        body, args = _call_parts(call)
        first_buf, first_val = len(self.bufs), len(self.vals)
        if body.op is Ops.COPY:
            dest, src = self.address(args[0]), self.address(args[1])
            check_copy(dest, src)
            self.steps += [_COPY, 0, 1, first_buf, first_val, dest.nbytes]
            self.labels.append(f"copy {dest.nbytes} bytes")
            self.n_steps += 1
            self.n_copies += 1
            return
        device = device_for_call(args)
        if not isinstance(Device[device], CPUDevice):
            raise DeviceError(f"link_linear links CPU programs into one native call; {device} kernels run call by call")
        kernel = compile_body(body, device)
        self.keep.append(kernel.program)
        info = kernel.info
        check_devices(info, device, [buffer_for(args[slot]) for slot in info.globals])
        for slot in info.globals:
            self.address(args[slot])
        for v in info.vars:
            if v.op is Ops.PARAM:
                self.value(args[v.arg.slot])
            elif (lane := next((a for a in args if a.op is Ops.BIND and a.expr == v.arg[0] == LANE_VARIABLE), None)) is not None:
                self.value(lane)
            else:
                self.variable(v.arg[0])
        self.device = self.device or device
        cores = info.global_size[0]
        launcher = (ctypes.cast(Device[device].launcher, ctypes.c_void_p).value or 0) if cores > 1 else 0
        self.steps += [_KERNEL, ctypes.cast(kernel.program.fn, ctypes.c_void_p).value or 0, max(cores, 1), first_buf, first_val, launcher]
        self.labels.append(info.function_name)
        self.n_steps += 1
        self.n_ops += info.ops
        self.n_mem += info.mem
