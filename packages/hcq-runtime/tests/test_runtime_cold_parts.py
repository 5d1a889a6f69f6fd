"""What a process builds or asks besides its kernels: the linker probe (once, while the first objects compile), the
launcher, batch runner and precompiled header `prepare_cpu` builds in the background, and the compiler's version line
(kept in the compile cache)."""

import threading
import time

import numpy as np
import pytest
from hcq_runtime import Buffer, CCompiler, Device, prepare_cpu, runner_ready
from hcq_runtime import compiler as compiler_module
from hcq_runtime import cpu as cpu_module
from hcq_runtime import host as host_module

SCALE = """
#include <math.h>
void scale(void **bufs, const long long *vals, int core_id, int n_cores) {
  float *out = bufs[0];
  for (long long i = core_id; i < vals[0]; i += n_cores) out[i] = sqrtf((float)(i * i)) * (float)vals[1];
}
"""


class Float32:
    itemsize, fmt, name = 4, "f", "float"


@pytest.fixture
def fresh_probes(monkeypatch):
    """An empty probe table, as in a new process."""
    monkeypatch.setattr(compiler_module, "_probes", {})


def test_concurrent_first_compiles_share_one_linker_probe(fresh_probes, monkeypatch):
    calls = []
    real = compiler_module.probe_direct_linker

    def slow_probe(cc, flags):
        calls.append(cc)
        time.sleep(0.05)  # long enough for every thread to ask while it runs
        return real(cc, flags)

    monkeypatch.setattr(compiler_module, "probe_direct_linker", slow_probe)
    compiler = CCompiler(direct_link=True)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(compiler_module.direct_linker(compiler.cc, compiler.compile_flags)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(answers) == 4 and len(set(answers)) == 1


def test_a_failed_probe_raises_for_its_callers_and_runs_again_for_the_next(fresh_probes, monkeypatch):
    outcomes = [OSError("no ld today"), None]

    def probe(cc, flags):
        if isinstance(outcome := outcomes.pop(0), BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(compiler_module, "probe_direct_linker", probe)
    with pytest.raises(OSError, match="no ld today"):
        compiler_module.direct_linker("cc", ())
    assert compiler_module.direct_linker("cc", ()) is None and not outcomes


def test_a_probe_under_way_at_a_fork_is_started_again_in_the_child(fresh_probes):
    pending, done = compiler_module._Probe(), compiler_module._Probe()
    done._done.set()
    compiler_module._probes.update({("a", ()): pending, ("b", ()): done})
    compiler_module._after_fork_in_child()
    assert compiler_module._probes == {("b", ()): done}


@pytest.mark.parametrize("linker", ["probed", "refused"])
def test_a_kernel_compiled_while_the_linker_is_probed_links_either_way(linker, fresh_probes, monkeypatch):
    """The object is compiled before the probe's answer is read: `ld` links it when the probe said yes, the compiler
    driver when it said no (no usable system linker), and the program runs the same."""
    monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")
    if linker == "refused":
        monkeypatch.setattr(compiler_module, "probe_direct_linker", lambda cc, flags: None)
    compiler = CCompiler(direct_link=True)
    program = Device["CPU"].program("scale", compiler.compile(SCALE))
    out = Buffer("CPU", 64, Float32())
    program([out.address], [64, 3], n_cores=2)
    np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) * 3)


def test_prepare_cpu_builds_the_launcher_and_runner_once_in_the_background(monkeypatch):
    name = "CPU:6"  # a device no other test launches on
    monkeypatch.setattr(cpu_module.CPUDevice, "__init__", _with_cores(cpu_module.CPUDevice.__init__, 3))
    dev = Device[name]
    builds = []
    real = CCompiler.compile

    def counting(self, src):
        if src is cpu_module._LAUNCHER_SRC:
            builds.append(threading.current_thread().name)
            time.sleep(0.05)  # a launch asks for it while it builds
        return real(self, src)

    monkeypatch.setattr(CCompiler, "compile", counting)
    prepare_cpu(name)
    prepare_cpu(name)  # once per device
    program = dev.program("scale", dev.compiler.compile(SCALE))
    out = Buffer(name, 30, Float32())
    program([out.address], [30, 2], n_cores=3)  # waits for the launcher under way rather than building a second one
    np.testing.assert_array_equal(out.numpy(), np.arange(30, dtype=np.float32) * 2)
    host_module._runner_builds[name].join()
    assert builds == ["uop-prepare"] and runner_ready(name)


def test_prepare_cpu_with_header_precompiles_immintrin(monkeypatch):
    asked = []
    monkeypatch.setattr(host_module, "precompiled_header_flags", lambda cc, flags: asked.append((cc, flags)) or ())
    name = "CPU:7"
    prepare_cpu(name, header=True)
    host_module._runner_builds[(name, "header")].join()
    compiler = Device[name].compiler
    assert asked == [(compiler.cc, compiler.compile_flags)]


def _with_cores(init, cores):
    def patched(self, name):
        init(self, name)
        self.n_cores = cores

    return patched


def _fake_compiler(path, version: str, log):
    path.write_text(f"#!/bin/sh\necho run >> {log}\necho '{version}'\n")
    path.chmod(0o755)


def test_the_compiler_version_is_kept_in_the_cache_until_the_binary_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DISABLE_COMPILER_CACHE", raising=False)
    cc, log = tmp_path / "fakecc", tmp_path / "runs"
    _fake_compiler(cc, "fake clang version 1.0", log)
    version = compiler_module.compiler_version
    monkeypatch.setattr(compiler_module, "compiler_version", version)  # its per-process memo is cleared below
    version.cache_clear()
    assert version(str(cc)) == "fake clang version 1.0"
    version.cache_clear()  # a new process: the line comes from the cache, the compiler does not run
    assert version(str(cc)) == "fake clang version 1.0" and log.read_text().count("run") == 1
    _fake_compiler(cc, "fake clang version 22.1", log)  # an upgrade rewrites the binary
    version.cache_clear()
    assert version(str(cc)) == "fake clang version 22.1" and log.read_text().count("run") == 2
    compiler_module.cache_entry("toolchain", compiler_module._binary_identity(str(cc))).write_text("")  # damaged: asked again
    version.cache_clear()
    assert version(str(cc)) == "fake clang version 22.1" and log.read_text().count("run") == 3
    monkeypatch.setenv("DISABLE_COMPILER_CACHE", "1")  # the cache off: asked every process
    version.cache_clear()
    assert version(str(cc)) == "fake clang version 22.1" and log.read_text().count("run") == 4
    version.cache_clear()


def test_a_fork_while_the_launcher_builds_leaves_the_child_free_to_launch(monkeypatch):
    """A child forked while the background build holds the launcher's lock (its thread does not exist in the child)
    builds the launcher itself instead of waiting forever."""
    import os
    import signal

    name = "CPU:5"
    monkeypatch.setattr(cpu_module.CPUDevice, "__init__", _with_cores(cpu_module.CPUDevice.__init__, 2))
    dev = Device[name]
    building, release = threading.Event(), threading.Event()
    real = CCompiler.compile

    def slow(self, src):
        if src is cpu_module._LAUNCHER_SRC and threading.current_thread().name == "uop-prepare":
            building.set()
            release.wait(10)
        return real(self, src)

    monkeypatch.setattr(CCompiler, "compile", slow)
    program = dev.program("scale", dev.compiler.compile(SCALE))
    prepare_cpu(name)
    assert building.wait(10)  # the build holds the lock now
    pid = os.fork()
    if pid == 0:  # the child: launch on two cores, then leave without running the parent's cleanup
        code = 1
        try:
            out = Buffer(name, 16, Float32())
            program([out.address], [16, 5], n_cores=2)
            code = 0 if np.array_equal(out.numpy(), np.arange(16, dtype=np.float32) * 5) else 2
        finally:
            os._exit(code)
    release.set()
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child waited for a launcher build that no thread runs")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    host_module._runner_builds[name].join()


def test_a_fork_while_the_runner_builds_gives_the_child_free_locks(monkeypatch):
    # (the handler itself, run as in a child: forking while a real runner build holds the lock is the test above's case)
    held = host_module._runners_lock
    monkeypatch.setattr(host_module, "_runners_lock", held)  # (the module's locks and builds come back after the test)
    monkeypatch.setattr(host_module, "_builds_lock", host_module._builds_lock)
    monkeypatch.setattr(host_module, "_runner_builds", {"CPU:9": threading.Thread(target=lambda: None)})
    with held:  # a build in the parent holds it at the fork
        host_module._after_fork_in_child()
        assert host_module._runners_lock is not held and host_module._runners_lock.acquire(blocking=False)
        host_module._runners_lock.release()
        assert host_module._runner_builds == {}
