import os
import re

import numpy as np
import pytest
from hcq_runtime import Buffer, CCompiler, CompileError, Device

FILL = """
void fill(void **bufs, const long long *vals, int core_id, int n_cores) {
  int *out = bufs[0];
  for (long long i = core_id; i < vals[0]; i += n_cores) out[i] = (int)(i * vals[1]) + core_id * 1000;
}
"""


class Int32:
    itemsize, fmt, name = 4, "i", "int"


def test_program_gets_buffers_and_values():
    dev = Device["CPU"]
    out = Buffer("CPU", 10, Int32())
    dev.program("fill", dev.compiler.compile(FILL))([out.address], [10, 3])
    np.testing.assert_array_equal(out.numpy(), np.arange(10) * 3)


def test_thread_launch_runs_every_core_once():
    dev = Device["CPU"]
    out = Buffer("CPU", 12, Int32())
    dev.program("fill", dev.compiler.compile(FILL))([out.address], [12, 1], n_cores=4)
    expected = np.arange(12) + (np.arange(12) % 4) * 1000  # element i is written by core i % 4
    np.testing.assert_array_equal(out.numpy(), expected)


def test_second_compile_is_served_from_the_disk_cache():
    compiler = CCompiler()
    src = FILL + "\n// cache test\n"
    before = CCompiler.invocations
    first = compiler.compile(src)
    assert CCompiler.invocations == before + 1
    assert CCompiler().compile(src) == first  # a new compiler object, same cache
    assert CCompiler.invocations == before + 1
    compiler.compile(src + " ")
    assert CCompiler.invocations == before + 2


def test_disabling_the_cache_always_compiles(monkeypatch):
    monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")
    compiler, before = CCompiler(), CCompiler.invocations
    compiler.compile(FILL)
    compiler.compile(FILL)
    assert CCompiler.invocations == before + 2


def test_compile_error_names_the_offending_line():
    src = "void f(void **b, const long long *v, int c, int n) {\n  int x = 1;\n  x = y + 2;\n}\n"
    with pytest.raises(CompileError, match=r"line 3: .*y.* -- `x = y \+ 2;`"):
        CCompiler().compile(src)


def test_loading_two_programs_with_one_name_keeps_them_apart():
    dev = Device["CPU"]
    out = Buffer("CPU", 1, Int32())
    for value in (7, 9):
        src = f"void k(void **b, const long long *v, int c, int n) {{ *(int *)b[0] = {value}; }}"
        dev.program("k", dev.compiler.compile(src))([out.address])
        assert out.numpy()[0] == value


def test_thread_pool_survives_many_launches_of_different_widths():
    dev = Device["CPU:7"]
    program = dev.program("fill", dev.compiler.compile(FILL))
    out = Buffer("CPU:7", 60, Int32())
    for launch in range(120):
        cores = 2 + launch % 4
        program([out.address], [60, launch], n_cores=cores)
        expected = np.arange(60) * launch + (np.arange(60) % cores) * 1000
        np.testing.assert_array_equal(out.numpy(), expected)


def test_gcc_only_flags_are_never_given_to_clang():
    # CI's C compiler is clang-15, which rejects GCC-only options with "unknown argument"
    from hcq_runtime.compiler import compiler_version, gcc_only_flags
    assert gcc_only_flags("Debian clang version 15.0.6") == ()
    assert gcc_only_flags("Ubuntu clang version 19.1.1 (1ubuntu1)") == ()
    # GCC vectorizes with the cost model of -O3 (its -O2 model kept loops with an epilogue scalar); GCC 12 and later
    # also leave out AVX512-FP16 (a half select became a masked vmovsh binutils 2.40 refuses); older GCC does not
    # know that option. If-conversion is no flag: a kernel with a gated access turns it off itself (see
    # test_runtime_gcc_selects.py)
    assert gcc_only_flags("gcc (Debian 12.2.0-14+deb12u1) 12.2.0") == ("-fvect-cost-model=dynamic", "-mno-avx512fp16")
    assert gcc_only_flags("gcc (GCC) 13.2.1 20230801") == ("-fvect-cost-model=dynamic", "-mno-avx512fp16")
    assert gcc_only_flags("gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0") == ("-fvect-cost-model=dynamic",)
    compiler = CCompiler()
    assert set(gcc_only_flags(compiler_version(compiler.cc))) <= set(compiler.flags)
    assert compiler.compile("int f(void) { return 1; }\n")


@pytest.mark.parametrize("name", ["gcc", "clang-15", "clang-19", "clang-22", "clang"])
def test_every_installed_c_compiler_builds_a_kernel_with_our_flags(name, monkeypatch):
    import shutil

    from hcq_runtime import compiler as compiler_module
    if not (path := shutil.which(name)):
        pytest.skip(f"{name} is not installed")
    monkeypatch.setattr(compiler_module, "find_c_compiler", lambda: path)
    compiler = CCompiler()
    assert compiler.cc == path
    assert compiler.compile_uncached("float f(const float *restrict a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n")
    # a half select as the C renderer writes relu: GCC 12.2 with AVX512-FP16 made a masked vmovsh of it, which binutils
    # 2.40 refuses (gcc_only_flags leaves the extension out)
    assert compiler.compile_uncached("void relu(_Float16 *restrict o, const _Float16 *restrict a) {\n  for (long long i = 0; i < 3; i++) "
                                     "{ _Float16 v = a[i]; o[i] = (((_Float16)0.0f) < v) ? v : ((_Float16)0.0f); }\n}\n")


def test_uop_cc_chooses_the_c_compiler(monkeypatch):
    import shutil

    from hcq_runtime import compiler as compiler_module
    monkeypatch.setenv("UOP_CC", "no-such-cc-xyz")
    compiler_module.find_c_compiler.cache_clear()
    try:
        with pytest.raises(CompileError, match="UOP_CC=no-such-cc-xyz is not an executable C compiler on PATH"):
            compiler_module.find_c_compiler()
        if gcc := shutil.which("gcc"):
            monkeypatch.setenv("UOP_CC", "gcc")
            compiler_module.find_c_compiler.cache_clear()
            assert compiler_module.find_c_compiler() == gcc
    finally:
        monkeypatch.undo()
        compiler_module.find_c_compiler.cache_clear()



def _fake_compilers(directory, names: dict) -> None:
    """Executables in `directory`: each name a script printing its `--version` line, or a symlink to another name."""
    for name, what in names.items():
        path = directory / name
        if what.startswith("->"):
            os.symlink(directory / what[2:], path)
        else:
            path.write_text(f"#!/bin/sh\necho '{what}'\n")
            path.chmod(0o755)


@pytest.mark.parametrize(("names", "expected"), [
    # the newest versioned clang wins over older ones whatever the PATH order
    ({"clang-15": "Debian clang version 15.0.6", "clang-19": "Debian clang version 19.1.4", "gcc": "gcc (Debian 12.2.0) 12.2.0"}, "clang-19"),
    # an unversioned clang ranks by the version it reports, and wins a tie with the versioned name of the same release
    ({"clang": "clang version 20.1.0", "clang-19": "Debian clang version 19.1.4"}, "clang"),
    ({"clang": "clang version 14.0.0", "clang-19": "Debian clang version 19.1.4"}, "clang-19"),
    ({"clang-19": "Debian clang version 19.1.4", "clang": "->clang-19"}, "clang"),
    # no clang: the system cc, then gcc
    ({"cc": "cc (Debian 12.2.0) 12.2.0", "gcc": "gcc (Debian 12.2.0) 12.2.0"}, "cc"),
    ({"gcc": "gcc (Debian 12.2.0) 12.2.0", "clang-tidy-19": "not a compiler"}, "gcc"),
])
def test_the_default_c_compiler_is_the_newest_clang(names, expected, tmp_path, monkeypatch):
    from hcq_runtime import compiler as compiler_module
    _fake_compilers(tmp_path, names)
    monkeypatch.delenv("UOP_CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    compiler_module.find_c_compiler.cache_clear()
    try:
        assert compiler_module.find_c_compiler() == str(tmp_path / expected)
    finally:
        monkeypatch.undo()
        compiler_module.find_c_compiler.cache_clear()


def test_no_c_compiler_is_a_clear_error(tmp_path, monkeypatch):
    from hcq_runtime import compiler as compiler_module
    monkeypatch.delenv("UOP_CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    compiler_module.find_c_compiler.cache_clear()
    try:
        with pytest.raises(CompileError, match="no C compiler found"):
            compiler_module.find_c_compiler()
    finally:
        monkeypatch.undo()
        compiler_module.find_c_compiler.cache_clear()

HALF = """
float to_half_and_back(double x) { return (float)(_Float16)x; }
void halves(void **bufs, const long long *vals, int core_id, int n_cores) {
  double *in = bufs[0]; float *out = bufs[1];
  for (long long i = 0; i < vals[0]; i++) out[i] = to_half_and_back(in[i]) + sqrtf(fabsf((float)in[i])) * 0.0f;
}
"""


@pytest.mark.parametrize("name", ["gcc", "clang-15", "clang-19", "clang-22", "clang"])
def test_kernels_linked_directly_with_ld_resolve_runtime_and_math_calls(name, monkeypatch):
    """CPU kernels are linked by `ld` itself (the driver's link step cost ~50 ms each): a conversion the compiler
    leaves to its runtime library (double -> half: __truncdfhf2) and libm calls resolve, as with the driver."""
    import shutil

    from hcq_runtime import compiler as compiler_module
    if not (path := shutil.which(name)):
        pytest.skip(f"{name} is not installed")
    monkeypatch.setattr(compiler_module, "find_c_compiler", lambda: path)
    compiler = CCompiler(direct_link=True)
    if compiler_module.direct_linker(compiler.cc, compiler.compile_flags) is None:
        pytest.skip(f"no system ld that links {name}'s objects here")
    dev = Device["CPU"]
    src = "#include <math.h>\n" + HALF
    program = dev.program("halves", compiler.compile_uncached(src))
    values = np.array([1.0, 1 / 3, 65504.0, 1e-8, -2.5], np.float64)
    inp, out = Buffer("CPU", 5, Float64()).copyin(values), Buffer("CPU", 5, Float32())
    program([inp.address, out.address], [5])
    np.testing.assert_array_equal(out.numpy(), values.astype(np.float16).astype(np.float32))


def test_without_a_usable_ld_the_driver_links(monkeypatch):
    from hcq_runtime import compiler as compiler_module

    monkeypatch.setattr(compiler_module.shutil, "which", lambda name: None)
    assert compiler_module.probe_direct_linker("cc", ()) is None


class Float64:
    itemsize, fmt, name = 8, "d", "double"


class Float32:
    itemsize, fmt, name = 4, "f", "float"


def test_debug_2_prints_each_kernel_compile_with_its_time(monkeypatch, capsys):
    from hcq_runtime import buffer_for, run_linear
    from kernel_asts import call, linear, scale_add
    from uopir import UOp, dtypes

    monkeypatch.setenv("DEBUG", "2")
    monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")
    n = 4099  # a size no other test uses: the kernel is new to this process
    out, a, b = (UOp.new_buffer("CPU", n, dtypes.float32) for _ in range(3))
    buffer_for(a).copyin(np.arange(n, dtype=np.float32))
    buffer_for(b).copyin(np.ones(n, dtype=np.float32))
    run_linear(linear(call(scale_add(n, 3.0), out, a, b)))
    printed = capsys.readouterr().out
    assert re.search(r"\*\*\* compile \w+ +\d+\.\d ms", printed), printed
    np.testing.assert_array_equal(buffer_for(out).numpy(), np.arange(n, dtype=np.float32) * 3 + 1)


def _mapping_of(address: int) -> dict[str, str] | None:
    """The /proc/self/smaps fields of the mapping holding `address` (None without /proc)."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    fields: dict[str, str] | None = None
    for line in lines:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            if fields is not None:
                return fields
            lo, hi = (int(x, 16) for x in head.split("-"))
            fields = {} if lo <= address < hi else None
        elif fields is not None:
            fields[head.rstrip(":")] = line.split(":", 1)[1].strip()
    return fields


def test_a_large_buffer_costs_only_the_pages_written(monkeypatch):
    # a KV cache is written a few rows at a time: a buffer of 4 MiB and more must not be advised to use 2 MiB
    # transparent huge pages (numpy advises them for its own large arrays; then one written byte can make 2 MiB
    # resident, when the kernel has a huge page to give), so one written byte makes one page resident
    monkeypatch.setenv("UOP_POISON", "0")  # the poison pattern would write every page
    buf = Buffer("CPU", (4 << 20) + 5, Int32())  # 16 MiB and a size no earlier test freed into the allocator's cache
    huge = 2 << 20
    at = -buf.address % huge + huge  # a huge page boundary inside the buffer: where a huge page could be placed
    Device["CPU"].allocator.host_view(buf.opaque, buf.nbytes)[at] = 1
    mapping = _mapping_of(buf.address + at)
    if mapping is None or "VmFlags" not in mapping:
        pytest.skip("no /proc/self/smaps here")
    assert "hg" not in mapping["VmFlags"].split()  # no MADV_HUGEPAGE
    assert int(mapping["Rss"].split()[0]) <= 256
    assert buf.numpy().view(np.uint8)[at] == 1


def test_c_program_names_what_it_writes_and_runs_on_every_core():
    import numpy as np
    from hcq_runtime import DeviceError, c_program, compile_body

    source = """
void halves(void **bufs, const long long *vals, int core_id, int n_cores) {
  (void)vals;
  float *out = (float *)bufs[0]; const float *x = (const float *)bufs[1];
  for (int i = core_id; i < 64; i += n_cores) out[i] = x[i] * 0.5f;
}
"""
    program = c_program("halves", source, n_buffers=2, outs=(0,), n_cores=2)
    assert (program.arg.outs, program.arg.ins, program.arg.global_size) == ((0,), (1,), (2, 1, 1))
    kernel = compile_body(program, "CPU")
    x, out = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    kernel.program([out.ctypes.data, x.ctypes.data], [], n_cores=2)
    np.testing.assert_array_equal(out, x * 0.5)
    with pytest.raises(DeviceError, match="cannot write buffers"):
        c_program("k", source, n_buffers=2, outs=(2,))


INTRINSICS = """
#include <stdint.h>
#include <immintrin.h>
void scale(void **bufs, const long long *vals, int core_id, int n_cores) {
  float *out = bufs[0];
  long long i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= vals[0]; i += 8) _mm256_storeu_ps(out + i, _mm256_set1_ps((float)(i / 8 + 1)));
#endif
  for (; i < vals[0]; i++) out[i] = (float)(i / 8 + 1);
}
"""


@pytest.mark.parametrize("name", ["gcc", "clang-15", "clang-19"])
@pytest.mark.parametrize("cache", [True, False])
def test_intrinsics_kernels_read_a_precompiled_immintrin_and_survive_a_broken_one(name, cache, monkeypatch):
    import shutil

    from hcq_runtime import compiler as compiler_module
    if not (path := shutil.which(name)):
        pytest.skip(f"{name} is not installed")
    monkeypatch.setattr(compiler_module, "_pch_flags", {})
    if not cache:
        monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")
    compiler, dev = CCompiler(cc=path), Device["CPU"]
    flags = compiler_module.precompiled_header_flags(compiler.cc, compiler.compile_flags)
    assert flags and os.path.exists(flags[1])
    for _ in range(2):  # the second time the precompiled header is broken: compiled without it
        out = Buffer("CPU", 21, Float32())
        dev.program("scale", compiler.compile_uncached(INTRINSICS))([out.address], [21])
        np.testing.assert_array_equal(out.numpy(), np.arange(21) // 8 + 1)
        pch = flags[1] if flags[0] == "-include-pch" else f"{flags[1]}.gch"  # clang's, or GCC's beside the header
        with open(pch, "wb") as f:
            f.write(b"not a precompiled header")


def test_spin_time_comes_from_the_environment_and_bad_values_are_refused(monkeypatch):
    from hcq_runtime.cpu import DEFAULT_SPIN_US, spin_microseconds
    from hcq_runtime.errors import DeviceError

    monkeypatch.delenv("UOP_CPU_SPIN_US", raising=False)
    assert spin_microseconds() == DEFAULT_SPIN_US
    monkeypatch.setenv("UOP_CPU_SPIN_US", " 250 ")
    assert spin_microseconds() == 250
    for bad in ("fast", "-5", "1.5"):
        monkeypatch.setenv("UOP_CPU_SPIN_US", bad)
        with pytest.raises(DeviceError, match="UOP_CPU_SPIN_US"):
            spin_microseconds()


def test_threads_that_sleep_at_once_are_woken_for_every_launch(monkeypatch):
    # no spinning: every launch after a pause finds the workers asleep on the condition variable
    import time

    monkeypatch.setenv("UOP_CPU_SPIN_US", "0")
    dev = Device["CPU:9"]
    program = dev.program("fill", dev.compiler.compile(FILL))
    out = Buffer("CPU:9", 40, Int32())
    for launch in range(20):
        time.sleep(0.001)
        program([out.address], [40, launch], n_cores=3)
        np.testing.assert_array_equal(out.numpy(), np.arange(40) * launch + (np.arange(40) % 3) * 1000)


def test_a_wake_hint_before_launches_keeps_every_launch_correct(monkeypatch):
    # expect_work wakes sleeping launch threads ahead of a launch; with no spinning they sleep again at once, so the
    # hints land on workers asleep, waking, spinning and running, in every order with the launches
    import time

    monkeypatch.setenv("UOP_CPU_SPIN_US", "0")
    dev = Device["CPU:8"]
    dev.expect_work()  # no launcher yet: nothing to wake
    assert "_launcher" not in dev.__dict__
    program = dev.program("fill", dev.compiler.compile(FILL))
    out = Buffer("CPU:8", 40, Int32())
    for launch in range(30):
        for _ in range(launch % 3):
            dev.expect_work()
        if launch % 2:
            time.sleep(0.0005)
        program([out.address], [40, launch], n_cores=3)
        np.testing.assert_array_equal(out.numpy(), np.arange(40) * launch + (np.arange(40) % 3) * 1000)


def test_a_narrowed_vector_width_renders_and_compiles_as_without_avx512(monkeypatch):
    """UOP_CPU_VECTOR_WIDTH=8 on an AVX-512 host: 8-lane vectors and no AVX-512 instructions, the code paths of an AVX2
    machine (a test assumed the host's width was never 8, and would have failed there); a wrong value is refused."""
    from hcq_runtime import cpu
    from hcq_runtime.errors import DeviceError

    def fresh(value: str | None):
        if value is None:
            monkeypatch.delenv("UOP_CPU_VECTOR_WIDTH", raising=False)
        else:
            monkeypatch.setenv("UOP_CPU_VECTOR_WIDTH", value)
        cpu.host_vector_width.cache_clear()
        cpu.narrowed_vector_width.cache_clear()

    try:
        fresh(None)
        assert cpu.narrowed_vector_width() is None and cpu.host_vector_width() == cpu._cpuinfo_vector_width()
        fresh("16")  # never wider than the host
        assert cpu.host_vector_width() == cpu._cpuinfo_vector_width()
        for bad in ("4", "wide", "32"):
            fresh(bad)
            with pytest.raises(DeviceError, match="UOP_CPU_VECTOR_WIDTH"):
                cpu.narrowed_vector_width()
        if cpu._cpuinfo_vector_width() < 16:
            pytest.skip("this host has no AVX-512: there is nothing narrower to emulate")
        fresh("8")
        dev = cpu.CPUDevice("CPU:narrow-test")
        assert dev.renderer.vector_width == 8 and "-mno-avx512f" in dev.compiler.flags
        assert not any(f.startswith("-mprefer-vector-width=512") for f in dev.compiler.flags)
        program = dev.program("fill", dev.compiler.compile(FILL))
        out = Buffer("CPU", 40, Int32())
        program([out.address], [40, 3], n_cores=3)
        np.testing.assert_array_equal(out.numpy(), np.arange(40) * 3 + (np.arange(40) % 3) * 1000)
    finally:
        fresh(None)
