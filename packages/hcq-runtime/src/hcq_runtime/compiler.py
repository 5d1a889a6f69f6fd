"""Compilers turn rendered source into binaries; a content-keyed disk cache makes a second compile free.

The cache lives under `$UOP_CACHE_DIR` (default `$XDG_CACHE_HOME/uop`, else `~/.cache/uop`). Set
`DISABLE_COMPILER_CACHE=1` to bypass it. Entries are keyed by a hash of the source, the flags and the
compiler's own version line, so a compiler upgrade never serves a stale binary.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .errors import CompileError

try:  # CPython's built-in BLAKE2 (the same function as hashlib's): importing hashlib also maps OpenSSL, 3.6 MiB resident
    from _blake2 import blake2s
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import blake2s


def cache_dir() -> Path:
    """Where compiled programs are cached (created on first use)."""
    if explicit := os.environ.get("UOP_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "uop"


def cache_enabled() -> bool:
    return os.environ.get("DISABLE_COMPILER_CACHE", "0") in ("", "0")


def cache_entry(kind: str, key: bytes) -> Path:
    """Where the disk cache keeps the entry of `kind` (`compile`, `program`) for `key`."""
    digest = blake2s(key).hexdigest()
    return cache_dir() / kind / digest[:2] / digest


def write_cache_entry(path: Path, data: bytes) -> None:
    """Write an entry of the disk cache: written to a temporary file, then renamed, so a reader in another process never
    sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)


class Compiler:
    """Base compiler: `compile(src) -> bytes`, cached on disk by content.

    Subclasses implement `compile_uncached` and set `cache_key` to something that changes whenever the
    binary for the same source would (compiler version, flags, target)."""

    cache_key: str = ""
    #: how many times `compile_uncached` ran in this process (tests use it to prove the cache works)
    invocations: int = 0

    def compile_uncached(self, src: str) -> bytes:
        """Compile `src` to a binary; raise CompileError with the offending line on failure."""
        raise NotImplementedError

    def compile(self, src: str) -> bytes:
        """Compile `src`, serving the binary from the disk cache when an identical compile happened before."""
        if not cache_enabled():
            return self._count_and_compile(src)
        path = cache_entry("compile", f"{self.cache_key}\0{src}".encode())
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        binary = self._count_and_compile(src)
        write_cache_entry(path, binary)
        return binary

    def _count_and_compile(self, src: str) -> bytes:
        type(self).invocations += 1
        return self.compile_uncached(src)


@functools.cache
def find_c_compiler() -> str:
    """`$UOP_CC` when set (a name on PATH or a path), else the newest clang on PATH (it vectorizes GCC vector types better
    than GCC, and each release better than the last: clang-19 builds a small CNN's training kernels 17% faster than
    clang-15), else the system `cc`."""
    if chosen := os.environ.get("UOP_CC"):
        if found := shutil.which(chosen):
            return found
        raise CompileError(f"UOP_CC={chosen} is not an executable C compiler on PATH")
    if clangs := installed_clangs():
        return max(clangs, key=lambda path: (clangs[path], os.path.basename(path) == "clang"))
    for name in ("cc", "gcc"):
        if found := shutil.which(name):
            return found
    raise CompileError("no C compiler found: install clang or gcc (apt-get install clang)")


def installed_clangs() -> dict[str, int]:
    """Every clang on PATH (`clang` and `clang-N`, first in PATH order for each name) with its major version: N from the
    name, the unversioned `clang` from where it links to (Debian's `/usr/lib/llvm-N/bin/clang`) or else its `--version`
    line; a clang whose version cannot be read ranks oldest."""
    found: dict[str, str] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        directory = directory or "."
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if (name == "clang" or re.fullmatch(r"clang-\d+", name)) and name not in found:
                path = os.path.join(directory, name)
                if os.path.isfile(path) and os.access(path, os.X_OK):
                    found[name] = path
    versions = {}
    for name, path in found.items():
        if name != "clang":
            versions[path] = int(name.split("-")[1])
        elif match := re.search(r"/llvm-(\d+)/bin/", os.path.realpath(path)) or re.search(r"clang version (\d+)", compiler_version(path)):
            versions[path] = int(match.group(1))
        else:
            versions[path] = 0
    return versions


@functools.cache
def compiler_version(cc: str) -> str:
    """The first line of `cc --version` (`cc` itself when it prints nothing). With the compile cache on, the line is kept
    in it (`toolchain` entries) under the binary's resolved path, size, modification time and inode, so a process does
    not run the compiler to learn it (~25 ms of every start); an upgrade or a moved link names another binary."""
    identity = _binary_identity(cc) if cache_enabled() else None
    entry = cache_entry("toolchain", identity) if identity is not None else None
    if entry is not None:
        try:
            if (kept := entry.read_text()).strip():  # (an empty line would read as GCC's, whose flags clang refuses)
                return kept
        except (OSError, UnicodeDecodeError):
            pass
    result = subprocess.run([cc, "--version"], capture_output=True, text=True)
    line = result.stdout.splitlines()[0] if result.stdout else cc
    if entry is not None and result.returncode == 0 and line:
        try:
            write_cache_entry(entry, line.encode())
        except OSError:
            pass
    return line


def _binary_identity(cc: str) -> bytes | None:
    """What names the binary `cc` runs: its resolved path with its size, modification time and inode (None when it
    cannot be found)."""
    path = cc if os.sep in cc else shutil.which(cc)
    if path is None:
        return None
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"version\0{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode()


def gcc_only_flags(version_line: str) -> tuple[str, ...]:
    """Flags `CCompiler` adds when the C compiler is GCC (its `--version` line does not name clang): see `CCompiler`."""
    if "clang" in version_line.lower():
        return ()
    versions = re.findall(r"\b(\d+)\.\d+\.\d+\b", version_line)  # the last is the compiler's ("gcc (GCC) 13.2.1 20230801")
    # (the option exists from GCC 12, the first to emit AVX512-FP16)
    return ("-fvect-cost-model=dynamic", *(("-mno-avx512fp16",) if versions and int(versions[-1]) >= 12 else ()))


def source_line_error(src: str, stderr: str, filename: str) -> str:
    """The first compiler error, with the source line it points at."""
    lines = src.splitlines()
    for match in re.finditer(rf"{re.escape(filename)}:(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)", stderr):
        lineno = int(match.group(1))
        code = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else "?"
        return f"line {lineno}: {match.group(2).strip()} -- `{code}`"
    return stderr.strip().splitlines()[-1] if stderr.strip() else "unknown compiler failure"


#: the header a kernel source may read from a precompiled copy (`precompiled_header_flags`)
PCH_HEADER = "immintrin.h"
_PCH_INCLUDE = f"#include <{PCH_HEADER}>"
_pch_lock = threading.Lock()
_pch_flags: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}


def precompiled_header_flags(cc: str, compile_flags: tuple[str, ...]) -> tuple[str, ...]:
    """Flags that make `cc` read <immintrin.h> from a header precompiled for exactly these flags: clang's
    `-include-pch`, GCC's `-include` of a header beside its `.gch`. Under -march=native the header takes ~0.25 s to
    parse, more than compiling a hand-written intrinsics kernel itself (the LLM's integer-dot kernels: 0.45-0.55 s each
    with clang-15, ~0.2 s with the precompiled header). Built once per process and flags, kept in the compile cache
    (`cache_dir()/pch`) when the cache is on, else in a temporary folder for this process; () when it cannot be built
    (the header is then parsed as usual)."""
    key = (cc, compile_flags)
    with _pch_lock:
        if (flags := _pch_flags.get(key)) is None:
            flags = _pch_flags[key] = _build_pch(cc, compile_flags)
        return flags


def _build_pch(cc: str, compile_flags: tuple[str, ...]) -> tuple[str, ...]:
    version = compiler_version(cc)
    clang = "clang" in version.lower()
    if cache_enabled():
        folder = cache_dir() / "pch" / blake2s(f"{version}\0{' '.join(compile_flags)}\0{_PCH_INCLUDE}".encode()).hexdigest()[:24]
    else:
        folder = Path(tempfile.mkdtemp(prefix="uop-pch-"))
        atexit.register(shutil.rmtree, folder, True)
    header = folder / "uop_prelude.h"
    pch = folder / ("uop_prelude.h.pch" if clang else "uop_prelude.h.gch")
    flags = ("-include-pch", str(pch)) if clang else ("-include", str(header))
    if header.exists() and pch.exists():
        return flags
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # write-then-rename, as cache entries: another process never reads a half-written header or precompiled copy
        with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".h") as tmp:
            tmp.write(_PCH_INCLUDE + "\n")
        os.replace(tmp.name, header)
        built = folder / f"{pch.name}.{os.getpid()}.{threading.get_ident()}"
        result = subprocess.run([cc, *compile_flags, "-x", "c-header", str(header), "-o", str(built)], capture_output=True)
        if result.returncode != 0:
            built.unlink(missing_ok=True)
            return ()
        os.replace(built, pch)
    except OSError:
        return ()
    return flags


#: `CCompiler`'s flags unless given others (the CPU device's, but for `cpu.NARROW_FLAGS`)
C_FLAGS = ("-O2", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno", "-ffp-contract=off")


class CCompiler(Compiler):
    """Compiles C source into a shared object with the system C compiler.

    GCC only (`gcc_only_flags`), -fvect-cost-model=dynamic: GCC 12's -O2 vectorizes only loops its "very cheap" model
    accepts (no epilogue, no runtime check), so the loops clang vectorizes at -O2 stayed scalar; with the model -O3 uses, a
    small CNN's max-pool gradient kernel (26-wide rows, a select per element) 139 -> 24 us (clang: 64). A kernel with a
    gated access asks GCC itself not to if-convert its loops (`uopir.renderer.cstyle.GCC_KEEP_BRANCHES`: a miscompile of
    GCC 12.2; test_sched_reduce.py has the case). -mno-avx512fp16 (GCC 12 and later): on a CPU with AVX512-FP16, GCC 12.2
    writes a half select as a masked `vmovsh` that binutils 2.40 refuses ("unsupported masking"), so `relu` of a half
    tensor failed to compile; half values are then converted to float for arithmetic (F16C), as on CPUs without it."""

    def __init__(self, flags: tuple[str, ...] = C_FLAGS, direct_link: bool = False, cc: str | None = None):
        """`cc`: the compiler to run (a path or a name on PATH); by default `find_c_compiler`'s choice."""
        if cc is not None and (found := shutil.which(cc)) is None:
            raise CompileError(f"{cc} is not an executable C compiler on PATH")
        self.cc, self.direct_link = found if cc is not None else find_c_compiler(), direct_link
        self.flags = ("-shared", "-fPIC", "-std=gnu11", "-pthread", *flags, *gcc_only_flags(compiler_version(self.cc)), "-lm")
        # the key names the flags, not how the object is linked: both ways give the same program
        self.cache_key = f"c\0{compiler_version(self.cc)}\0{' '.join(self.flags)}"
        self.compile_flags = tuple(f for f in self.flags if f not in ("-shared", "-lm"))

    def compile_uncached(self, src: str) -> bytes:
        """Compile to an object, then link it with the system linker directly when it works here (`direct_linker`):
        the compiler driver's own link step costs ~50 ms per kernel, about half of compiling a small one. The first
        compile of a process compiles its object while the linker is probed (`start_linker_probe`), and links once the
        probe has answered (by the driver when it said no)."""
        with tempfile.TemporaryDirectory(prefix="uop-cc-") as tmp:
            source, obj, output = Path(tmp) / "kernel.c", Path(tmp) / "kernel.o", Path(tmp) / "kernel.so"
            source.write_text(src)
            probe = start_linker_probe(self.cc, self.compile_flags) if self.direct_link else None
            pch = precompiled_header_flags(self.cc, self.compile_flags) if _PCH_INCLUDE in src else ()
            if probe is None:
                command = [self.cc, *self.flags, "-o", str(output), str(source)]
            else:
                command = [self.cc, *self.compile_flags, "-c", "-o", str(obj), str(source)]
            result = subprocess.run([*command[:1], *pch, *command[1:]], capture_output=True, text=True)
            if result.returncode != 0 and pch:  # a precompiled header the compiler refuses (changed since): without it
                result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise CompileError(f"C compile failed at {source_line_error(src, result.stderr, str(source))}")
            if probe is not None:
                if (linker := probe.result()) is not None:
                    ld, shared, runtime = linker
                    link = [ld, shared, "-o", str(output), str(obj), runtime, "-lm", "-lc"]
                else:  # no system linker that links these objects: the driver links the object, with its own libraries
                    link = [self.cc, *self.flags, "-o", str(output), str(obj)]
                linked = subprocess.run(link, capture_output=True, text=True)
                if linked.returncode != 0:
                    raise CompileError(f"linking a compiled kernel failed: {linked.stderr.strip() or linked.returncode}")
            return output.read_bytes()


# the math library, and a conversion the compiler leaves to its runtime library (double -> half: __truncdfhf2)
_PROBE_SRC = "#include <math.h>\nfloat uop_probe(float x) { return expf(x) + sqrtf(x) + (float)(_Float16)(double)x; }\n"


class _Probe:
    """The answer of one linker probe, set once by the thread running it (concurrent.futures would also load logging)."""

    __slots__ = ("_done", "_value", "_error")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: tuple[str, str, str] | None = None
        self._error: BaseException | None = None

    def result(self) -> tuple[str, str, str] | None:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


_probes: dict[tuple[str, tuple[str, ...]], _Probe] = {}
_probes_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # a probe under way in the parent has no thread in a forked child: it is started again there when asked
    for key in [k for k, probe in _probes.items() if not probe._done.is_set()]:
        del _probes[key]


os.register_at_fork(after_in_child=_after_fork_in_child)


def start_linker_probe(cc: str, compile_flags: tuple[str, ...]) -> _Probe:
    """The probe behind `direct_linker` for `cc` and these flags, started in a thread of its own by the first caller of
    a process (the callers that follow share it: each kernel compile thread's first compile probed on its own, three
    probes of ~70 ms at a cold start), so a first compile builds its object meanwhile. A probe that raised is run again
    by the next caller."""
    key = (cc, compile_flags)
    with _probes_lock:
        if (probe := _probes.get(key)) is not None:
            return probe
        probe = _probes[key] = _Probe()

    def run() -> None:
        try:
            probe._value = probe_direct_linker(cc, compile_flags)
        except BaseException as e:  # noqa: BLE001 - handed to the callers waiting for the answer
            probe._error = e
            with _probes_lock:
                _probes.pop(key, None)
        finally:
            probe._done.set()

    threading.Thread(target=run, daemon=True, name="uop-ld-probe").start()
    return probe


def direct_linker(cc: str, compile_flags: tuple[str, ...]) -> tuple[str, str, str] | None:
    """(`ld`, `-shared`, the compiler's runtime library) when `ld` links an object `cc` compiled into a shared object
    that loads and runs here, else None (the compiler driver links instead); probed once per process
    (`probe_direct_linker`), a probe under way waited for."""
    return start_linker_probe(cc, compile_flags).result()


def probe_direct_linker(cc: str, compile_flags: tuple[str, ...]) -> tuple[str, str, str] | None:
    """`direct_linker`'s probe, run now: the math and runtime libraries must resolve and the probe's result be right."""
    ld = shutil.which("ld")
    if ld is None:
        return None
    # the compiler's runtime library (libgcc, or clang's builtins), which the driver links for conversions and
    # arithmetic it does not inline
    runtime = subprocess.run([cc, "-print-libgcc-file-name"], capture_output=True, text=True).stdout.strip()
    if not runtime or not os.path.exists(runtime):
        return None

    with tempfile.TemporaryDirectory(prefix="uop-ld-") as tmp:
        source, obj, output = Path(tmp) / "probe.c", Path(tmp) / "probe.o", Path(tmp) / "probe.so"
        source.write_text(_PROBE_SRC)
        link = (ld, "-shared", runtime)
        steps = ([cc, *compile_flags, "-c", "-o", str(obj), str(source)], [*link[:2], "-o", str(output), str(obj), runtime, "-lm", "-lc"])
        if any(subprocess.run(step, capture_output=True).returncode != 0 for step in steps):
            return None
        try:
            fn = ctypes.CDLL(str(output)).uop_probe
        except OSError:
            return None
        fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
        return link if abs(fn(4.0) - (54.598150 + 2.0 + 4.0)) < 1e-3 else None


#: LLVM releases tried in order for an AMD target: the oldest that knows the target builds its kernels (clang-15 knows
#: gfx11 and gfx90a/gfx940; gfx942 and gfx12 need a newer one, gfx950 LLVM 20: Debian 12's security updates carry clang-22)
AMD_LLVM_VERSIONS = ("15", "16", "17", "18", "19", "20", "21", "22")


@functools.cache
def _targets(clang: str, arch: str) -> bool:
    """True when `clang` can build OpenCL C for `arch` (an empty translation unit compiles)."""
    probe = subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-x", "cl", "-c", "-", "-o", os.devnull],
                           input="", capture_output=True, text=True)
    return probe.returncode == 0


def amd_toolchain(arch: str) -> tuple[str, str]:
    """(clang, ld.lld) of the oldest installed LLVM (`AMD_LLVM_VERSIONS`, then the unversioned tools) that targets
    `arch`; CompileError naming what to install when none does."""
    candidates = [(f"clang-{v}", f"ld.lld-{v}") for v in AMD_LLVM_VERSIONS] + [("clang", "ld.lld")]
    found = [(c, lld) for name, lld_name in candidates if (c := shutil.which(name)) and (lld := shutil.which(lld_name))]
    if not found:
        raise CompileError("compiling for AMD needs clang and ld.lld with the AMDGPU target: apt-get install clang-15 lld-15")
    for clang, lld in found:
        if _targets(clang, arch):
            return clang, lld
    tried = ", ".join(Path(c).name for c, _ in found)
    raise CompileError(f"no installed clang targets {arch} (tried {tried}); gfx12 and gfx942 need LLVM 18+ "
                       "(apt-get install clang-19 lld-19), gfx950 LLVM 20+ (apt-get install clang-22 lld-22)")


class AMDCompiler(Compiler):
    """OpenCL C → an AMD HSA code object, with clang + ld.lld (amdgcn, no device libraries; see `amd_toolchain`)."""

    def __init__(self, arch: str = "gfx1100"):
        self.arch = arch
        self.clang, self.lld = amd_toolchain(arch)
        # no FMA contraction: a*b+c rounds twice, as on the CPU and in numpy (a MULACC node asks for a fused one)
        self.flags = ("-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-O2", "-ffp-contract=off", "-x", "cl", "-cl-std=CL2.0")
        self.cache_key = f"amd\0{compiler_version(self.clang)}\0{' '.join(self.flags)}"

    def compile_uncached(self, src: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="uop-amd-") as tmp:
            source, obj, lib = Path(tmp) / "kernel.cl", Path(tmp) / "kernel.o", Path(tmp) / "kernel.hsaco"
            source.write_text(src)
            result = subprocess.run([self.clang, *self.flags, "-c", str(source), "-o", str(obj)], capture_output=True, text=True)
            if result.returncode != 0:
                raise CompileError(f"OpenCL compile for {self.arch} failed at {source_line_error(src, result.stderr, str(source))}")
            result = subprocess.run([self.lld, "-shared", str(obj), "-o", str(lib)], capture_output=True, text=True)
            if result.returncode != 0:
                raise CompileError(f"linking the {self.arch} code object failed: {result.stderr.strip()}")
            return lib.read_bytes()
