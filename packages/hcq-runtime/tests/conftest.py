import numpy as np
import pytest


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path_factory, monkeypatch):
    """Every test compiles into its session's own cache, never the user's."""
    monkeypatch.setenv("UOP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "uop-cache"))


class Float32:
    """A dtype stand-in with the two attributes Buffer uses (the real ones come from uopir)."""

    itemsize, fmt, name = 4, "f", "float"


class BFloat16:
    itemsize, fmt, name = 2, None, "bfloat16"


@pytest.fixture
def f32():
    return Float32()


@pytest.fixture
def bf16():
    return BFloat16()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


class LinkedQueue:
    """A raw QCOM queue placed in device memory of its own with its link-time values written, through the hcq2 interface
    (`alloc_memory`, `link_state`): its IB (`ib_bytes`), then its data. `words(start, nbytes)` is a uint32 view to edit;
    `submit(values)` writes run-time values and submits the IB with `submit_commands`."""

    def __init__(self, dev, queue):
        from hcq_runtime.hcq2 import PatchKind  # noqa: PLC0415

        self.dev, (self.cmd, self.ib_bytes) = dev, queue.build()
        self.memory = dev.alloc_memory(len(self.cmd))
        self.view = self.memory.view[:len(self.cmd)]
        self.view[:] = np.frombuffer(bytes(self.cmd.data), np.uint8)
        dev.stack_need = max(dev.stack_need, queue.stack_bytes)
        values, self.refs = dev.link_state(self.cmd.names(PatchKind.LINK) - {"data"})
        self.cmd.link({"data": self.memory.va + self.ib_bytes, **values}, into=self.view)

    def words(self, start=0, nbytes=None):
        return self.view[start:self.ib_bytes if nbytes is None else start + nbytes].view(np.uint32)

    def submit(self, values=None):
        from hcq_runtime.hcq2 import COMPUTE  # noqa: PLC0415

        self.cmd.patch(values or {}, into=self.view)
        self.dev.submit_commands(COMPUTE, self.memory, 0, self.ib_bytes)


@pytest.fixture
def link_queue():
    return LinkedQueue
