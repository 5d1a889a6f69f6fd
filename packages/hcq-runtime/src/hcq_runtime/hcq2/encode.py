"""Encoding a batch of enqueueable calls into one command buffer per (device, queue).

Calls are classified (`enqueue_target`): programs go to their device's COMPUTE queue, copies between two buffers of
one queue device to its COPY queue. The batch is first described structurally (`describe`): buffers become names by
first appearance ("buf:3" for buffers the batch owns, "input:1" for buffers that change between runs), so a batch over
new buffers of the same shapes has the same key and reuses the encoding; only a new kernel or a new shape encodes
again. Encoding then walks the calls in order:

- every queue starts by waiting for the device's previous work (`timeline - 1`);
- a call that conflicts with earlier work on another queue of its device (byte ranges, `DepsTracker`) waits for the
  point that queue signals after that work: one wait per other queue, none within a queue;
- each device's last queue ends the batch with a fence: it waits for the other queues' last points and signals the
  device timeline.
Timeline values are run-time patches (`timeline:<device>` + point), signal addresses and program addresses link-time
patches, buffer addresses link-time ("buf:N") or run-time from the inputs table ("input:N").

A profiled batch (`profile.profiling()` when described, part of the key) also writes a timestamp before each command
(unless the previous command's end stamp directly precedes it) and after it, into 8-byte slots of its queue's timestamp
area ("stamps", a link-time address); `EncodedQueue.timed` says which slots time which command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uopir import Ops, UOp

from ..buffer import Buffer
from ..buffer_registry import buffer_for, device_for_call, strip_after
from ..device import Device
from ..kernel_cache import compile_body
from ..lanes import LANE_VARIABLE
from .cmdbuf import CommandBuffer, Sym, Word, link, runtime
from .deps import DepsTracker
from .errors import HCQError
from .hwqueue import COMPUTE, COPY, HWQueue, QueueDevice
from .profile import Timed, profiling


def queue_device(name: str) -> QueueDevice | None:
    """The device called `name` when the hcq2 engine drives it (it has hardware queues), else None."""
    dev = Device[name]
    return dev if isinstance(dev, QueueDevice) else None


def enqueue_target(call: UOp) -> tuple[str, str] | None:
    """(device, queue kind) a call is enqueued on, or None when it runs on the host (CPU kernels, host copies)."""
    call = strip_after(call)
    body, args = call.src[0], call.src[1:]
    if body.op in (Ops.SINK, Ops.PROGRAM):
        device = device_for_call(args)
        return (device, COMPUTE) if queue_device(device) is not None else None
    if body.op is Ops.COPY and len(args) == 2:
        dst, src = buffer_for(args[0]), buffer_for(args[1])
        dev = queue_device(dst.device)
        if dev is not None and dst.device == src.device and dev.has_copy_queue:
            return dst.device, COPY
    return None


@dataclass(frozen=True)
class BufferArg:
    """A buffer argument: its patch name, which base allocation it lives in (for aliasing), offset and size in bytes."""

    name: str
    base: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class ValueArg:
    """A scalar argument: a constant `value` (for a lane's `_device_num`, also named by `variable`), or a `variable`
    read at run time."""

    value: int | None = None
    variable: str | None = None


@dataclass
class Described:
    """A batch described structurally: `key` for the encode cache, the calls with their arguments, the buffers the
    batch owns (in "buf:N" order), the values of bound variables, and whether it records timestamps."""

    key: tuple
    calls: list[tuple[UOp, str, str, tuple[BufferArg | ValueArg, ...]]]
    owned: list[Buffer]
    bound: dict[str, int]
    profile: bool = False


def describe(calls: Sequence[UOp], inputs: Mapping[UOp, int], profile: bool | None = None) -> Described:
    """Name the buffers and values of `calls` (all enqueueable); buffers in `inputs` are read from the inputs table.
    `profile` (default: `profiling()`) makes the batch record device timestamps."""
    profile = profiling() if profile is None else profile
    owned: list[Buffer] = []
    owned_slot: dict[UOp, int] = {}
    bases: dict[int, int] = {}
    bound: dict[str, int] = {}
    described = []
    for call in calls:
        target = enqueue_target(call)
        if target is None:
            raise HCQError(f"a {strip_after(call).src[0].op.name} call cannot be enqueued on a queue device")
        call = strip_after(call)
        args: list[BufferArg | ValueArg] = []
        for arg in call.src[1:]:
            node = strip_after(arg)
            if node.op is Ops.BUFFER:
                buf = buffer_for(node)
                if node in inputs:
                    name = f"input:{inputs[node]}"
                else:
                    if node not in owned_slot:
                        owned_slot[node] = len(owned)
                        owned.append(buf.ensure_allocated())
                    name = f"buf:{owned_slot[node]}"
                args.append(BufferArg(name, bases.setdefault(id(buf.base), len(bases)), buf.offset, buf.nbytes))
            elif node.op is Ops.CONST:
                args.append(ValueArg(value=int(node.arg)))
            elif node.op is Ops.BIND and node.expr == LANE_VARIABLE and node.src[1].op is Ops.CONST:
                args.append(ValueArg(value=int(node.src[1].arg), variable=LANE_VARIABLE))
            elif node.op in (Ops.BIND, Ops.DEFINE_VAR):
                if node.op is Ops.BIND and node.src[1].op is Ops.CONST:
                    bound[node.expr] = int(node.src[1].arg)
                args.append(ValueArg(variable=node.expr))
            else:
                raise HCQError(f"a call argument must be a BUFFER, CONST, BIND or variable, got {node.op.name}")
        described.append((call.src[0], *target, tuple(args)))
    key = (profile, *((body.key, device, kind, args) for body, device, kind, args in described))
    return Described(key, described, owned, bound, profile)


@dataclass
class EncodedQueue:
    """The commands of one (device, queue) of a batch, the data (kernel arguments) they address as "data", and for a
    profiled batch its `stamps` timestamp slots (8 bytes each, addressed as "stamps") and the commands they time."""

    device: str
    kind: str
    cmds: CommandBuffer
    data: CommandBuffer
    stamps: int = 0
    timed: list[Timed] = field(default_factory=list)


@dataclass
class EncodedBatch:
    """A batch encoded once: its queues in submit order, the programs their commands address ("prog:N"), the timeline
    points each device's run takes, the run-time variables its commands read, and the devices its queues are on (by
    name: the registry's, unless the batch was encoded for a device object of its own)."""

    queues: list[EncodedQueue]
    programs: list[Any]
    points: dict[str, int]
    variables: tuple[str, ...]
    n_kernels: int = 0
    n_copies: int = 0
    devices: dict[str, Any] = field(default_factory=dict)
    n_ops: int = 0  # the kernels' estimated ops and buffer bytes (ProgramInfo.ops / mem)
    n_mem: int = 0


_MASK64 = (1 << 64) - 1


def _buffer_word(arg: BufferArg) -> Sym:
    return runtime(arg.name, 8) if arg.name.startswith("input:") else link(arg.name, 8)


def _value_word(arg: BufferArg | ValueArg) -> Word:
    if isinstance(arg, BufferArg):
        raise HCQError(f"a kernel variable was given the buffer {arg.name}")
    if arg.value is not None:
        return arg.value & ((1 << 64) - 1)
    return runtime(f"var:{arg.variable}", 8)


def _variable_word(name: str, args: Sequence[BufferArg | ValueArg]) -> Word:
    """A kernel's variable: the constant a call binds it to (a lane's `_device_num`), else a run-time value."""
    for arg in args:
        if isinstance(arg, ValueArg) and arg.variable == name and arg.value is not None:
            return arg.value & ((1 << 64) - 1)
    return runtime(f"var:{name}", 8)


@dataclass
class _Encoder:
    """The queues of a batch being encoded, and its timeline points: `points` numbers each device's signals in order,
    `tail` is the point a queue signalled after its last command (None once more commands follow), `waited` the
    highest point each queue already waits for on each other queue."""

    encoded: EncodedBatch
    hw: dict[tuple[str, str], tuple[HWQueue, CommandBuffer]] = field(default_factory=dict)
    points: dict[str, int] = field(default_factory=dict)  # device -> next point
    tail: dict[tuple[str, str], int | None] = field(default_factory=dict)  # queue -> point signalled after its last command
    waited: dict[tuple[tuple[str, str], tuple[str, str]], int] = field(default_factory=dict)
    stamps: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # queue -> (slots used, command bytes after the last)

    def queue(self, device: str, kind: str) -> HWQueue:
        if (device, kind) not in self.hw:
            hw = self.encoded.devices.setdefault(device, Device[device]).hw_queue(kind)
            hw.wait(link("signal:timeline", 8), runtime(f"timeline:{device}") + -1)  # the device's earlier work is done
            self.hw[(device, kind)] = (hw, CommandBuffer())
            self.tail[(device, kind)] = None
        return self.hw[(device, kind)][0]

    def stamp(self, queue: tuple[str, str], reuse: bool = False) -> int:
        """A timestamp slot written at this point of `queue`: with `reuse`, the last one when no command followed it."""
        hw = self.hw[queue][0]
        used, at = self.stamps.get(queue, (0, -1))
        if reuse and at == len(hw.cmd):
            return used - 1
        hw.timestamp(link("stamps", 8) + 8 * used)
        self.stamps[queue] = (used + 1, len(hw.cmd))
        return used

    def wait_for(self, queue: tuple[str, str], other: tuple[str, str], point: int) -> None:
        if self.waited.get((queue, other), -1) >= point:
            return
        self.hw[queue][0].wait(link(f"signal:{other[1]}", 8), runtime(f"timeline:{queue[0]}") + point)
        self.waited[(queue, other)] = point

    def signal(self, queue: tuple[str, str]) -> int:
        device = queue[0]
        point = self.points.get(device, 0)
        self.points[device] = point + 1
        self.hw[queue][0].signal(link(f"signal:{queue[1]}", 8), runtime(f"timeline:{device}") + point)
        self.tail[queue] = point
        return point

    def fence(self) -> None:
        for device in dict.fromkeys(device for device, _ in self.hw):
            queues = [q for q in self.hw if q[0] == device]
            last = next((q for q in queues if q[1] == COMPUTE), queues[0])
            for other in queues:
                if other != last:
                    point = self.tail[other]
                    self.wait_for(last, other, self.signal(other) if point is None else point)
            point = self.points.get(device, 0)
            self.hw[last][0].signal(link("signal:timeline", 8), runtime(f"timeline:{device}") + point)
            self.encoded.points[device] = point + 1


def encode(described: Described) -> EncodedBatch:
    """Encode a described batch (see the module docstring)."""
    programs: list[Any] = []
    program_slot: dict[int, int] = {}
    tracker = DepsTracker()
    steps = []
    producers: set[int] = set()
    for index, (body, device, kind, args) in enumerate(described.calls):
        kernel = compile_body(body, device) if kind == COMPUTE else None
        if kernel is not None:
            outs = kernel.info.outs  # without the written set, every buffer counts as written
            accesses = [(args[slot], slot in outs or not outs) for slot in kernel.info.globals]
        else:
            accesses = [(args[0], True), (args[1], False)]
        waits: dict[Any, int] = {}
        for arg, write in accesses:
            assert isinstance(arg, BufferArg)
            for other, point in tracker.access((device, arg.base), arg.offset, arg.offset + arg.nbytes, write, (device, kind), index).items():
                waits[other] = max(waits.get(other, -1), point)
        producers.update(waits.values())
        steps.append((kernel, waits))
    encoded = EncodedBatch([], programs, {}, ())
    enc = _Encoder(encoded)
    call_point: dict[int, int] = {}
    variables: dict[str, None] = {}
    timed: dict[tuple[str, str], list[Timed]] = {}
    for index, ((_body, device, kind, args), (kernel, waits)) in enumerate(zip(described.calls, steps, strict=True)):
        hw = enc.queue(device, kind)
        for other, producer in waits.items():
            enc.wait_for((device, kind), other, call_point[producer])
        start = enc.stamp((device, kind), reuse=True) if described.profile else 0
        if kernel is not None:
            info = kernel.info
            slot = program_slot.setdefault(id(kernel.program), len(programs))
            if slot == len(programs):
                programs.append(kernel.program)
            values = [_value_word(args[v.arg.slot]) if v.op is Ops.PARAM else _variable_word(v.arg[0], args) for v in info.vars]
            variables.update((w.what[4:], None) for w in values if isinstance(w, Sym))
            addresses = [_buffer_word(args[s]) for s in info.globals]  # type: ignore[arg-type]
            encoded.devices[device].encode_kernel(hw, enc.hw[(device, kind)][1], kernel.program, link(f"prog:{slot}", 8), addresses, values,
                                         tuple(info.global_size), tuple(info.local_size))
            encoded.n_kernels += 1
            encoded.n_ops += info.ops
            encoded.n_mem += info.mem
            name = info.function_name
        else:
            dst, src = args[0], args[1]
            assert isinstance(dst, BufferArg) and isinstance(src, BufferArg)
            hw.copy(_buffer_word(dst), _buffer_word(src), min(dst.nbytes, src.nbytes))
            encoded.n_copies += 1
            name = f"copy {min(dst.nbytes, src.nbytes)} bytes"
        if described.profile:
            timed.setdefault((device, kind), []).append(Timed(name, start, enc.stamp((device, kind))))
        enc.tail[(device, kind)] = None
        if index in producers:
            call_point[index] = enc.signal((device, kind))
    enc.fence()
    encoded.queues = [EncodedQueue(*q, hw.cmd, data, enc.stamps.get(q, (0, 0))[0], timed.get(q, [])) for q, (hw, data) in enc.hw.items()]
    encoded.variables = tuple(variables)
    return encoded


def encode_launch(dev: QueueDevice, program: Any, addresses: Sequence[int], values: Sequence[int], global_size: tuple[int, int, int],
                  local_size: tuple[int, int, int]) -> EncodedBatch:
    """One kernel over raw device addresses on `dev` as a batch of one call: the same waits, fence and argument layout
    as any encoded batch (a program's eager `launch` runs it)."""
    encoded = EncodedBatch([], [program], {}, (), n_kernels=1, devices={dev.name: dev})
    enc = _Encoder(encoded)
    device = dev.name
    hw = enc.queue(device, COMPUTE)
    data = enc.hw[(device, COMPUTE)][1]
    dev.encode_kernel(hw, data, program, link("prog:0", 8), [a & _MASK64 for a in addresses], [v & _MASK64 for v in values],
                                 tuple(global_size), tuple(local_size))
    enc.fence()
    encoded.queues = [EncodedQueue(device, COMPUTE, hw.cmd, data)]
    return encoded
