"""The kgsl interface: struct sizes and ioctl numbers against msm_kgsl.h, the mock driver's checks, the device's ioctl
sequence, and the Adreno 6xx-only rule."""

import ctypes
import os

import pytest
from hcq_runtime import Device
from hcq_runtime.qcom import KGSLError, MockKGSL, QCOMDevice, UnsupportedGPUError, kgsl

# sizeof each argument struct on a 64-bit kernel (msm_kgsl.h)
STRUCT_SIZES = {"DevInfo": 40, "GetProperty": 24, "WaitTimestamp": 12, "DrawctxtCreate": 8, "DrawctxtDestroy": 4, "ReadTimestamp": 12,
                "GPUObjAlloc": 48, "GPUObjFree": 32, "CommandObject": 32, "GPUCommand": 64}
# (direction: 1 write / 3 read-write, nr, struct) of each ioctl, as msm_kgsl.h declares it with KGSL_IOC_TYPE 0x09
IOCTLS = {"DEVICE_GETPROPERTY": (3, 0x02, 24), "DEVICE_WAITTIMESTAMP_CTXTID": (1, 0x07, 12), "DRAWCTXT_CREATE": (3, 0x13, 8),
          "DRAWCTXT_DESTROY": (1, 0x14, 4), "CMDSTREAM_READTIMESTAMP_CTXTID": (3, 0x16, 12), "SETPROPERTY": (1, 0x32, 24),
          "GPUOBJ_ALLOC": (3, 0x45, 48), "GPUOBJ_FREE": (1, 0x46, 32), "GPU_COMMAND": (3, 0x4A, 64)}


def test_struct_sizes_and_ioctl_numbers_match_the_header():
    assert {name: ctypes.sizeof(getattr(kgsl, name)) for name in STRUCT_SIZES} == STRUCT_SIZES
    for name, (direction, nr, size) in IOCTLS.items():
        assert kgsl.IOCTLS[name][0] == (direction << 30) | (size << 16) | (0x09 << 8) | nr, name
    assert kgsl.IOCTLS["GPU_COMMAND"][0] == 0xC040094A  # _IOWR(0x09, 0x4A, 64 bytes)


def test_device_open_runs_the_kgsl_sequence_and_refuses_7xx():
    mock = MockKGSL()
    dev = QCOMDevice("MOCKQCOM", mock)
    assert mock.calls[:3] == ["DEVICE_GETPROPERTY", "DRAWCTXT_CREATE", "SETPROPERTY"]
    assert set(mock.calls[3:]) == {"GPUOBJ_ALLOC"} and dev.ctx in mock.contexts
    assert dev.gpu_id == (6, 3, 0) and dev.renderer.arch == "a630"
    dev.close()
    assert mock.calls[-1] == "DRAWCTXT_DESTROY" and not mock.contexts
    # chip ids from 7.3 on are the a7xx generation: refused before any context is created
    for chip in (0x07030001, 0x43050A00):
        refused = MockKGSL(chip_id=chip)
        with pytest.raises(UnsupportedGPUError, match="Adreno 6xx only"):
            QCOMDevice("MOCKQCOM", refused)
        assert refused.calls == ["DEVICE_GETPROPERTY"] and not refused.contexts
    assert QCOMDevice("MOCKQCOM", MockKGSL(chip_id=0x06040001)).renderer.arch == "a640"


def test_the_mock_driver_refuses_what_the_kernel_would():
    mock = MockKGSL()
    with pytest.raises(KGSLError, match="unknown kgsl ioctl"):
        mock.ioctl(0xDEAD, kgsl.DrawctxtCreate())
    with pytest.raises(KGSLError, match="takes a DrawctxtCreate"):
        mock.ioctl(kgsl.IOCTLS["DRAWCTXT_CREATE"][0], kgsl.GPUObjFree())
    with pytest.raises(KGSLError, match="PREAMBLE"):
        kgsl.call(mock, "DRAWCTXT_CREATE", flags=0)
    with pytest.raises(KGSLError, match="USE_CPU_MAP"):
        kgsl.call(mock, "GPUOBJ_ALLOC", size=0x1000, flags=0, mmapsize=0x1000)
    with pytest.raises(KGSLError, match="whole pages"):
        kgsl.call(mock, "GPUOBJ_ALLOC", size=100, flags=kgsl.MEMFLAGS_USE_CPU_MAP, mmapsize=100)
    obj = kgsl.call(mock, "GPUOBJ_ALLOC", size=0x2000, flags=kgsl.MEMFLAGS_USE_CPU_MAP, mmapsize=0x2000)
    with pytest.raises(KGSLError, match="no GPU object"):
        mock.mmap(0x1000, (obj.id + 1) * kgsl.PAGE)
    mapping = mock.mmap(0x2000, obj.id * kgsl.PAGE)
    assert mapping.address % kgsl.PAGE == 0 and mock.bytes_at(mapping.address + 0x1FFC, 4).size == 4
    kgsl.call(mock, "GPUOBJ_FREE", id=obj.id)
    with pytest.raises(KGSLError, match="freed twice"):
        kgsl.call(mock, "GPUOBJ_FREE", id=obj.id)
    with pytest.raises(KGSLError, match="context 5 does not exist"):
        kgsl.call(mock, "GPU_COMMAND", context_id=5, numcmds=1, cmdsize=32)
    ctx = kgsl.call(mock, "DRAWCTXT_CREATE", flags=kgsl.CONTEXT_PREAMBLE).drawctxt_id
    with pytest.raises(KGSLError, match="IB command objects"):
        kgsl.call(mock, "GPU_COMMAND", context_id=ctx, numcmds=1, cmdsize=16)
    with pytest.raises(KGSLError, match="wait forever"):
        kgsl.call(mock, "DEVICE_WAITTIMESTAMP_CTXTID", context_id=ctx, timestamp=1, timeout=10)
    with pytest.raises(Exception, match="does not fit"):  # argument values are range-checked when packed
        kgsl.call(mock, "DRAWCTXT_CREATE", flags=1 << 32)


@pytest.mark.skipif(os.path.exists(kgsl.DEVICE_PATH), reason="this machine has an Adreno GPU")
def test_qcom_without_kgsl_says_to_use_the_mock():
    with pytest.raises(KGSLError, match="use MOCKQCOM"):
        Device["QCOM"]
