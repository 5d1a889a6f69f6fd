"""A differential fuzzer for Tensor writes and views: random programs run on `Tensor` and on numpy side by side.

A program is a list of statements over names t0, t1, ...; each statement has a Tensor spelling and a numpy spelling
with the same meaning (numpy's views are the oracle for aliasing: a slice, transpose, flip, reshape that numpy can do
without a copy, detach and expand are views; arithmetic, reductions, clone and contiguous are values). Writes (`+=`,
`*=`, `assign`, `t[idx] = x`) go through any writable handle; with `calls`, values also come from calls (`@function`,
with arguments, with a tensor the body captures, or precompiled); realizes and reads happen at random points. At the end every live
handle must hold numpy's values.

`generate(seed)` makes one program from a seed, `generate_from(chooser)` from any source of choices (a `random.Random`,
or `HypothesisChooser` so hypothesis can shrink a failing program); `run(program)` executes it and returns the first
mismatch (None when all agree); `program.source()` is the Tensor spelling, ready to paste into a regression test.
Used by packages/scheduler/tests/test_sched_write_fuzz.py (hypothesis, the default suite) and
benchmarks/write_fuzz_soak.py (thousands of seeded programs).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

SHAPES = [(4,), (6,), (2, 3), (3, 4), (4, 4), (2, 2, 3)]


@dataclass
class Handle:
    name: str
    shape: tuple[int, ...]
    dtype: str
    writable: bool


@dataclass
class Program:
    seed: int
    dtype: str
    # (tensor statement, numpy statement); a None numpy statement means "same text"
    steps: list[tuple[str, str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def source(self) -> str:
        return "\n".join(t for t, _ in self.steps)


class Chooser(Protocol):
    """The random choices a program is made of (`random.Random` has them all)."""

    def randrange(self, start: int, stop: int | None = None) -> int: ...
    def randint(self, a: int, b: int) -> int: ...
    def choice(self, seq: Sequence[Any]) -> Any: ...
    def random(self) -> float: ...
    def shuffle(self, x: list[Any]) -> None: ...
    def sample(self, population: Sequence[Any], k: int) -> list[Any]: ...


class HypothesisChooser:
    """Choices drawn from hypothesis's `data`: a failing program shrinks toward the first option of every choice."""

    def __init__(self, data: Any):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def randrange(self, start: int, stop: int | None = None) -> int:
        lo, hi = (0, start) if stop is None else (start, stop)
        return self.data.draw(self.st.integers(lo, hi - 1))

    def randint(self, a: int, b: int) -> int:
        return self.data.draw(self.st.integers(a, b))

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.randrange(len(seq))]

    def random(self) -> float:
        return self.randrange(100) / 100

    def shuffle(self, x: list[Any]) -> None:
        x[:] = self.data.draw(self.st.permutations(x))

    def sample(self, population: Sequence[Any], k: int) -> list[Any]:
        return list(self.data.draw(self.st.permutations(list(population))))[:k]


class _Gen:
    def __init__(self, chooser: Chooser, seed: int, n_ops: int, calls: bool = False):
        self.r = chooser
        self.n_ops = n_ops
        self.calls = calls
        self.jits: dict[tuple[int, ...], str] = {}
        self.dtype = self.r.choice(["float32", "float32", "int32"])
        self.prog = Program(seed, self.dtype)
        self.handles: list[Handle] = []

    # ---- helpers ----
    def emit(self, tcode: str, ncode: str | None = None) -> None:
        self.prog.steps.append((tcode, tcode if ncode is None else ncode))

    def new_name(self, shape: tuple[int, ...], writable: bool) -> str:
        name = f"t{len(self.handles)}"
        self.handles.append(Handle(name, shape, self.dtype, writable))
        self.prog.names.append(name)
        return name

    def pick(self, writable: bool = False, shape: tuple[int, ...] | None = None, axes: bool = False) -> Handle | None:
        cands = [h for h in self.handles if (h.writable or not writable) and (shape is None or h.shape == shape) and (h.shape or not axes)]
        return self.r.choice(cands) if cands else None

    def scalar(self) -> str:
        v = self.r.randint(-3, 5)
        return f"{v}.0" if self.dtype == "float32" else str(v)

    def array_literal(self, shape: tuple[int, ...]) -> str:
        n = int(np.prod(shape))
        vals = [self.r.randint(-4, 9) for _ in range(n)]
        return f"np.array({vals}, np.{self.dtype}).reshape({shape})"

    # ---- statements ----
    def op_new(self) -> None:
        shape = self.r.choice(SHAPES)
        kind = self.r.randrange(5)
        lit = self.array_literal(shape)
        name = self.new_name(shape, True)
        if kind == 0:
            self.emit(f"{name} = Tensor({lit})", f"{name} = {lit}.copy()")
        elif kind == 1:
            self.emit(f"{name} = Tensor({lit}).contiguous()", f"{name} = {lit}.copy()")
        elif kind == 2:
            c = self.scalar()
            self.emit(f"{name} = Tensor.full({shape}, {c}, dtype=dtypes.{self.dtype})", f"{name} = np.full({shape}, {c}, np.{self.dtype})")
        elif kind == 3:
            self.emit(f"{name} = Tensor({lit}) * 1", f"{name} = {lit} * 1")
        else:
            self.emit(f"{name} = Tensor({lit}).realize()", f"{name} = {lit}.copy()")

    def op_value(self) -> None:
        h = self.pick(axes=True)
        if h is None:
            return self.op_new()
        kind = self.r.randrange(8)
        if kind <= 2:
            other = self.pick(shape=h.shape) if self.r.random() < 0.6 else None
            o = other.name if other is not None else self.scalar()
            sym = self.r.choice(["+", "-", "*"])
            name = self.new_name(h.shape, True)
            self.emit(f"{name} = {h.name} {sym} {o}")
        elif kind == 3:
            other = self.pick(shape=h.shape)
            o = other.name if other is not None else self.scalar()
            name = self.new_name(h.shape, True)
            if other is not None:
                self.emit(f"{name} = {h.name}.maximum({o})", f"{name} = np.maximum({h.name}, {o})")
            else:
                self.emit(f"{name} = {h.name}.maximum({o})", f"{name} = np.maximum({h.name}, np.{self.dtype}({o}))")
        elif kind == 4:
            axis = self.r.randrange(len(h.shape))
            red = self.r.choice(["sum", "max"]) if h.shape[axis] else "sum"
            shape = tuple(1 if i == axis else s for i, s in enumerate(h.shape))
            name = self.new_name(shape, True)
            self.emit(f"{name} = {h.name}.{red}({axis}, keepdim=True)", f"{name} = {h.name}.{red}({axis}, keepdims=True)")
        elif kind == 5:
            name = self.new_name(h.shape, True)
            self.emit(f"{name} = {h.name}.clone()", f"{name} = {h.name}.copy()")
        elif kind == 6:
            name = self.new_name(h.shape, True)
            self.emit(f"{name} = {h.name}.contiguous()", f"{name} = {h.name}.copy()")
        else:  # pad: a new value (numpy's pad copies), written to on its own
            pads = tuple((self.r.randrange(3), self.r.randrange(3)) for _ in h.shape)
            name = self.new_name(tuple(s + a + b for s, (a, b) in zip(h.shape, pads)), True)
            self.emit(f"{name} = {h.name}.pad({pads})", f"{name} = np.pad({h.name}, {pads})")

    def _slice_of(self, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        if not shape:
            return "...", shape
        parts, out = [], []
        for s in shape:
            k = self.r.randrange(6)
            if k == 0 and s:
                i = self.r.randrange(-s, s)
                parts.append(str(i))
                continue
            if k == 1:
                parts.append(":")
                out.append(s)
                continue
            step = self.r.choice([1, 1, 2, -1, -2, 3])
            a, b = self.r.randrange(0, s + 1), self.r.randrange(0, s + 1)
            sl = slice(a, b, step)
            parts.append(f"{a}:{b}:{step}")
            out.append(len(range(*sl.indices(s))))
        if self.r.random() < 0.2:
            parts.insert(self.r.randrange(len(parts) + 1), "None")
            # where None lands among the kept axes: recompute from the parts
            out = []
            it = iter(shape)
            for p in parts:
                if p == "None":
                    out.append(1)
                    continue
                s = next(it)
                if p == ":":
                    out.append(s)
                elif ":" in p:
                    a, b, st = (int(x) for x in p.split(":"))
                    out.append(len(range(*slice(a, b, st).indices(s))))
        if self.r.random() < 0.15 and "None" not in parts:
            return "...", shape
        return ", ".join(parts), tuple(out)

    def op_view(self) -> None:
        h = self.pick(axes=True)
        if h is None:
            return self.op_new()
        kind = self.r.randrange(7)
        if kind <= 2:
            idx, shape = self._slice_of(h.shape)
            name = self.new_name(shape, h.writable)
            # (numpy: an Ellipsis makes even an all-int index a 0-d view instead of a scalar copy)
            self.emit(f"{name} = {h.name}[{idx}]", f"{name} = {h.name}[{idx}]" if idx == "..." else f"{name} = {h.name}[{idx}, ...]")
        elif kind == 3:
            n = int(np.prod(h.shape))
            opts = [s for s in SHAPES + [(n,), h.shape, (1, n)] if int(np.prod(s)) == n]
            shape = self.r.choice(opts)
            name = self.new_name(shape, h.writable)
            # numpy reshapes a non-contiguous view by copying: only a view when it can share the memory
            self.emit(f"{name} = {h.name}.reshape({shape})", f"{name} = _np_reshape_view({h.name}, {shape})")
        elif kind == 4:
            perm = list(range(len(h.shape)))
            self.r.shuffle(perm)
            shape = tuple(h.shape[p] for p in perm)
            name = self.new_name(shape, h.writable)
            self.emit(f"{name} = {h.name}.permute({tuple(perm)})", f"{name} = {h.name}.transpose({tuple(perm)})")
        elif kind == 5:
            axis = self.r.randrange(len(h.shape))
            name = self.new_name(h.shape, h.writable)
            self.emit(f"{name} = {h.name}.flip({axis})", f"{name} = np.flip({h.name}, {axis})")
        else:
            if self.r.random() < 0.5:
                name = self.new_name(h.shape, h.writable)
                self.emit(f"{name} = {h.name}.detach()", f"{name} = {h.name}[...]")
            else:
                shape = (2, *h.shape)
                name = self.new_name(shape, False)
                self.emit(f"{name} = {h.name}.unsqueeze(0).expand({shape})", f"{name} = np.broadcast_to({h.name}[None], {shape})")

    def op_write(self) -> None:
        h = self.pick(writable=True)
        if h is None:
            return self.op_new()
        kind = self.r.randrange(6)
        if kind == 0:
            other = self.pick(shape=h.shape)
            o = other.name if other is not None else self.scalar()
            self.emit(f"{h.name} += {o}")
        elif kind == 1:
            self.emit(f"{h.name} *= {self.scalar()}")
        elif kind == 2:
            other = self.pick(shape=h.shape)
            expr = f"{other.name} * 2" if other is not None else f"{h.name} + {self.scalar()}"
            if self.r.random() < 0.3 and h.shape:
                expr = f"{h.name}.flip({self.r.randrange(len(h.shape))}) + 1"
                nexpr = f"np.flip({h.name}, {expr.split('(')[1].split(')')[0]}) + 1"
            else:
                nexpr = expr
            self.emit(f"{h.name}.assign({expr})", f"{h.name}[...] = {nexpr}")
        elif kind == 3:
            idx, shape = self._slice_of(h.shape)
            self.emit(f"{h.name}[{idx}] = {self.scalar()}")
        elif kind == 4:
            idx, shape = self._slice_of(h.shape)
            other = self.pick(shape=shape)
            if other is None or other.name == h.name:
                self.emit(f"{h.name}[{idx}] = {self.scalar()}")
            else:
                self.emit(f"{h.name}[{idx}] = {other.name}")
        else:
            if not h.shape or h.shape[0] == 0:
                self.emit(f"{h.name}[...] = {self.scalar()}")
            elif h.shape[0] >= 2:
                # the positions as numpy accepts them: a list, a tuple or a list inside the index tuple, or on axis 1
                last = h.shape[0] - 1
                forms = [f"[[0, {last}]]", f"[((0, {last}),)]", f"[([{last}, 0],)]"]
                if len(h.shape) >= 2 and h.shape[1] >= 2:
                    forms.append(f"[:, [{h.shape[1] - 1}, 0]]")
                self.emit(f"{h.name}{self.r.choice(forms)} = {self.scalar()}")
            else:
                self.emit(f"{h.name}[0] = {self.scalar()}")

    def op_call(self) -> None:
        """A value computed by a call (`@function`): from its arguments, from an argument and a tensor the body captures
        (`allow_implicit`: the schedule must read what the inlined body reads), or in a kernel of its own (precompiled).
        Not of 0-d handles: numpy's arithmetic on 0-d arrays gives scalars, which the program could not write to."""
        h = self.pick(axes=True)
        if h is None:
            return self.op_new()
        other = self.pick(shape=h.shape)
        o = other.name if other is not None else self.scalar()
        sym = self.r.choice(["+", "-", "*"])
        kind = self.r.randrange(3)
        name = self.new_name(h.shape, True)
        if kind == 0:
            self.emit(f"{name} = function(lambda a, b: a {sym} b)({h.name}, {h.name if other is None else o})",
                      f"{name} = {h.name} {sym} {h.name if other is None else o}")
        elif kind == 1:
            self.emit(f"{name} = function(allow_implicit=True)(lambda a: a {sym} {o})({h.name})", f"{name} = {h.name} {sym} {o}")
        else:
            c = self.scalar()
            self.emit(f"{name} = function(precompile=True)(lambda a: a * 2 {sym} {c})({h.name})", f"{name} = {h.name} * 2 {sym} {c}")

    def op_jit(self) -> None:
        """A value computed by a TinyJit function, one per shape, called again at later statements: its first calls
        run eagerly and capture, the later ones replay the captured kernels over the new inputs."""
        h = self.pick(axes=True)
        if h is None or not all(h.shape):  # an empty tensor runs no kernels: nothing to capture (TinyJit refuses)
            return self.op_new()
        others = [o for o in self.handles if o.shape == h.shape and o is not h]
        if not others:
            return self.op_new()
        other = self.r.choice(others)
        jit = self.jits.get(h.shape)
        if jit is None:
            jit = self.jits[h.shape] = f"j{len(self.jits)}"
            self.emit(f"{jit} = TinyJit(lambda a, b: a * 2 - b)", f"{jit} = None")
        name = self.new_name(h.shape, True)
        # clones: two inputs in one buffer are refused (duplicate inputs), and each call's inputs are fresh buffers
        self.emit(f"{name} = {jit}({h.name}.clone(), {other.name}.clone())", f"{name} = {h.name} * 2 - {other.name}")

    def op_realize(self) -> None:
        if not self.handles:
            return
        kind = self.r.randrange(4)
        h = self.r.choice(self.handles)
        if kind == 0:
            self.emit(f"{h.name}.realize()", "pass")
        elif kind == 1:
            hs = self.r.sample(self.handles, min(len(self.handles), 2))
            self.emit(f"Tensor.realize({', '.join(x.name for x in hs)})", "pass")
        elif kind == 2:
            self.emit(f"_check({h.name!r})", f"_check({h.name!r})")
        else:
            self.emit("Tensor.ones(2).realize()", "pass")

    def generate(self) -> Program:
        self.op_new()
        ops = [self.op_new, self.op_value, self.op_value, self.op_view, self.op_view, self.op_view, self.op_write, self.op_write,
               self.op_write, self.op_realize, *([self.op_call, self.op_jit, self.op_jit] if self.calls else [])]
        for _ in range(self.n_ops):
            self.r.choice(ops)()
        return self.prog


def generate(seed: int, n_ops: int = 14, calls: bool = False) -> Program:
    """One random program (deterministic in `seed`); `calls`: values also come from `@function` calls (the suite's
    programs have them; the soak script's `--calls`)."""
    return _Gen(random.Random(seed), seed, n_ops, calls).generate()


def generate_from(chooser: Chooser, n_ops: int = 14, calls: bool = False) -> Program:
    """One program made of `chooser`'s choices (its seed is reported as -1)."""
    return _Gen(chooser, -1, n_ops, calls).generate()


def _np_reshape_view(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`a` reshaped as a view (numpy refuses when the strides do not allow it: then the program uses a copy on both
    sides, see `run`)."""
    return np.reshape(a, shape, copy=False)  # (a ValueError when it would copy; setting `.shape` is deprecated in NumPy 2.5)


class _NotAView(Exception):
    pass


@dataclass
class Mismatch:
    program: Program
    name: str
    where: str
    got: object
    want: object

    def __str__(self) -> str:
        return (f"seed {self.program.seed}: {self.name} differs ({self.where}): got {self.got!r} want {self.want!r}\n"
                f"program:\n{self.program.source()}")


def run(program: Program) -> Mismatch | None:
    """Execute `program` on Tensor and numpy; the first difference, or None."""
    from uop_scheduler import JitError, Tensor, TinyJit, function
    from uopir import dtypes

    tenv: dict = {"Tensor": Tensor, "np": np, "dtypes": dtypes, "function": function, "TinyJit": TinyJit}
    nenv: dict = {"np": np, "_np_reshape_view": _np_reshape_view}
    found: list[Mismatch] = []

    def compare(name: str, where: str) -> None:
        if found:
            return
        got, want = tenv[name].numpy(), np.asarray(nenv[name])
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            found.append(Mismatch(program, name, where, got.tolist(), want.tolist()))

    tenv["_check"] = lambda name: compare(name, "mid-program read")
    nenv["_check"] = lambda name: None
    for tcode, ncode in program.steps:
        try:
            exec(ncode, nenv)
        except (AttributeError, ValueError, IndexError) as e:
            if any(text in str(e) for text in ("ncompatible shape", "without copying", "avoid creating a copy", "read-only")):
                break  # a reshape numpy can only do as a copy, or a write into a broadcast: the program stops (both sides)
            # numpy refuses the statement (an empty reduction, say): Tensor must refuse it too, then the program stops
            try:
                exec(tcode, tenv)
            except Exception:
                break
            return Mismatch(program, "-", f"numpy raised {type(e).__name__} ({e}) but Tensor ran {tcode!r}", None, None)
        try:
            exec(tcode, tenv)
        except JitError as e:
            if "duplicate inputs" in str(e):
                break  # two arguments that are one buffer (clones of equal graphs are one node): TinyJit refuses, as documented
            raise
        if found:
            return found[0]
    for name in program.names:
        if name in tenv and name in nenv:
            compare(name, "at the end")
    return found[0] if found else None


def _fails(program: Program) -> str | None:
    """How `program` fails (a mismatch or a crash of the Tensor side, as one line), or None when it passes or is not
    a valid program (a statement names a removed tensor)."""
    try:
        found = run(program)
    except NameError:
        return None
    except Exception as e:
        return f"crash {type(e).__name__}"
    return None if found is None else f"mismatch {found.name if found.name != '-' else found.where}"


def minimize(program: Program) -> Program:
    """A shorter program that fails the same way (statements removed one at a time while it still does)."""
    want = _fails(program)
    if want is None:
        return program
    steps = list(program.steps)
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(steps))):
            trial = Program(program.seed, program.dtype, steps[:i] + steps[i + 1:], program.names)
            if _fails(trial) == want:
                steps, changed = trial.steps, True
    return Program(program.seed, program.dtype, steps, program.names)
