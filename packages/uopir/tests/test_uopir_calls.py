"""Calls: opaque bodies only, call_with_outputs argument order (the seed's TestArgOrder, adapted), program signatures."""

import pytest
from uopir import CallError, CallInfo, Ops, ParamArg, ProgramInfo, UOp, dtypes, type_verify


def buffer(n=3, dtype=dtypes.int, device="CPU"):
    return UOp.new_buffer(device, n, dtype).reshape((n,))


def body_stores(call):
    """{param slot: stored value} of a call_with_outputs body."""
    return {st.src[0].arg.slot: st.src[1] for st in call.src[0].src}


def test_call_requires_an_opaque_body():
    x = buffer()
    p = UOp.param(0, dtypes.int, (3,))
    with pytest.raises(CallError, match="call_with_outputs"):
        (p * 2).call(x)
    with pytest.raises(AssertionError):  # CallError is an AssertionError, as in tinygrad
        (p * 2).call(x)
    for body in (UOp.sink(p.store(p)), UOp.custom_function("memcpy")):
        call = body.call(x, name="k")
        assert call.op is Ops.CALL and isinstance(call.arg, CallInfo) and call.arg.name == "k" and call.dtype is dtypes.void
    ext = UOp.custom_function("rand").call(ret_dtype=dtypes.uint32)
    assert ext.dtype is dtypes.uint32 and ext.arg.dtype is dtypes.uint32


def test_intersperse_output_at_position_0():
    # the output is at position 0, the input (param slot 1) at position 1 in the call's args
    x = buffer()
    val = UOp.param(1, x.dtype, x.shape, "CPU").reshape(x.shape) * 2
    outs = UOp.call_with_outputs((val,), x, name="t", output_pos=(0,))
    assert len(outs) == 1 and outs[0].op is Ops.AFTER
    call = outs[0].src[1]
    assert call.op is Ops.CALL and call.arg.name == "t" and call.src[2] is x
    assert call.src[1].unsharded_base.is_unbound and call.has_unbound_outputs
    assert body_stores(call) == {0: val}
    assert call.unbound_outputs == (call.src[1].after(call),)
    type_verify(outs[0])


def test_outputs_arbitrary_order():
    x, y = buffer(), buffer()
    # args (out0, in0, out1, in1): outputs at positions 0 and 2, input params slotted at their final positions 1 and 3
    p1, p3 = UOp.param(1, x.dtype, x.shape, "CPU"), UOp.param(3, y.dtype, y.shape, "CPU")
    v0, v1 = p1 * 2, p3 + p1
    outs = UOp.call_with_outputs((v0, v1), x, y, output_pos=(0, 2))
    call = outs[0].src[1]
    assert outs[1].src[1] is call
    assert call.src[2] is x and call.src[4] is y
    assert call.src[1].unsharded_base.is_unbound and call.src[3].unsharded_base.is_unbound
    assert outs[0].src[0] is call.src[1] and outs[1].src[0] is call.src[3]
    assert body_stores(call) == {0: v0, 2: v1}
    # default: outputs after the inputs
    d = UOp.call_with_outputs((UOp.param(0, x.dtype, x.shape) + 1,), x)[0].src[1]
    assert d.src[1] is x and d.src[2].unsharded_base.is_unbound and body_stores(d).keys() == {1}


def test_output_pos_must_be_ascending_distinct_and_in_range():
    x = buffer()
    p1 = UOp.param(1, x.dtype, x.shape)
    for bad in ((1, 0), (0, 0), (0, 5), (0,)):
        with pytest.raises(AssertionError):
            UOp.call_with_outputs((p1 * 2, p1 + 1), x, output_pos=bad)


def test_output_pos_symbolic_shape():
    # symbolic output shapes resolve against the final arg slots, not the input order (PARAM(2) in the shape, output at 0)
    x = buffer(8, dtypes.float)
    sz = UOp.variable("sz", 1, 8)
    p1, p2 = UOp.param(1, x.dtype, x.shape, "CPU"), sz.param_like(2)
    value = p1.reshape(x.shape).shrink_to((p2,))
    bound = sz.bind(5)
    outs = UOp.call_with_outputs((value,), x, bound, output_pos=(0,))
    shp = outs[0].shape[0]
    assert isinstance(shp, UOp) and shp.op is not Ops.PARAM
    assert shp is bound
    assert outs[0].src[0].unsharded_base.arg.size == 8  # storage has the max size


def test_call_with_output_and_devices():
    x = buffer(4, dtypes.float, "CPU:1")
    out = (UOp.param(0, dtypes.float, (4,), "CPU:1") + 1.0).call_with_output(x)
    assert out.op is Ops.AFTER and out.device == "CPU:1" and out.shape == (4,)


def test_multi_device_outputs_get_per_shard_storage():
    devs = ("CPU:0", "CPU:1")
    p = UOp(Ops.PARAM, dtypes.float, (UOp.const(8), UOp.const(4)), ParamArg(0, dtypes.float, None, None, None, axis=0, device=devs))
    out = (p + 1.0).call_with_output(UOp.new_buffer(devs, 16, dtypes.float))
    base = out.src[0].unsharded_base
    assert base.arg.size == 16 and base.arg.device == devs  # 8x4 split in two along axis 0: 4x4 per shard
    assert out.src[0].op is Ops.UNSHARD and out.shape == (8, 4)


def test_program_signature_compacts_sparse_slots():
    # a kernel touching call args 0 and 2 (of 3) binds them as slots 0 and 1, then the variable as slot 2
    b0 = UOp.param(0, dtypes.float, (4,))
    b2 = UOp.param(2, dtypes.float, (4,))
    n = UOp.param(3, dtypes.weakint, (), vmin_vmax=(1, 4), name="n")
    sink = UOp.sink(b0.store(b2 + 1.0))
    linear = UOp(Ops.LINEAR, dtypes.void, (b0, b2, n, sink))
    prog = UOp(Ops.PROGRAM, dtypes.void, (sink, linear), ProgramInfo("E_4", globals=(0, 2), vars=(n,), outs=(0,), ins=(2,)))
    sig = prog.program_signature()
    assert [s[1] for s in sig] == [0, 1, 2] and sig[2][0] == "n" and sig[0][2] is dtypes.float


def test_open_ranges_cannot_leak_out_of_a_call():
    out = UOp.param(0, dtypes.float.ptr(8), ())
    r = UOp.range(8, 0)
    store = out.index(r).store(1.0)
    assert store.ranges == {r} and store.end(r).ranges == frozenset()
    with pytest.raises(CallError, match="leak"):
        UOp.sink(store).call(buffer(8, dtypes.float))
    UOp.sink(store.end(r)).call(buffer(8, dtypes.float))
