"""UOp: hash-consing, immutability, keys, walks, substitution, shapes, operators, printing and pyrender."""

import gc
import subprocess
import sys
import weakref

import pytest
import uopir
from hypothesis import given, settings
from hypothesis import strategies as st
from uopir import GraphError, GroupOp, Ops, UOp, dtypes, pretty_print, print_uops
from uopir.uop import UOpMeta


def test_hash_consing_returns_the_same_object():
    a = UOp.variable("a", 0, 9)
    assert UOp.variable("a", 0, 9) is a
    assert (a + 1) is (a + 1) and (a * 2 + 3) is (a * 2 + 3)
    assert UOp(Ops.CONST, dtypes.int32, (), 5) is UOp.const(5, dtypes.int32)
    assert UOp.const(5, dtypes.int32) is not UOp.const(5, dtypes.int64)
    # 0.0 and -0.0 compare equal but are different constants
    assert UOp.const(0.0, dtypes.float) is not UOp.const(-0.0, dtypes.float)
    assert UOp.const(float("nan"), dtypes.float) is UOp.const(float("nan"), dtypes.float)
    assert a.rtag("t") is not a and a.rtag("t") is a.rtag("t") and a.rtag("t").replace(tag=None) is a


def test_weak_cache_drops_dead_nodes():
    before = len(UOpMeta.cache)
    x = UOp.variable("weak_test", 0, 3)
    nodes = [x + i for i in range(100)]
    ref = weakref.ref(nodes[50])
    assert len(UOpMeta.cache) >= before + 100
    del nodes
    gc.collect()
    assert ref() is None
    assert len(UOpMeta.cache) <= before + 1  # only the variable is still alive
    assert all(r() is not None for r in UOpMeta.cache.values())


def test_immutable():
    x = UOp.variable("x", 0, 3)
    with pytest.raises(AttributeError):
        x.arg = ("y", 0, 3)
    with pytest.raises(GraphError):
        x.replace(bogus=1)
    assert x.replace(arg=("x", 0, 3)) is x


def test_key_is_stable_across_processes():
    code = "from uopir import UOp; x = UOp.variable('x', 0, 7); print(((x * 4 + 1) // 3).key.hex())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    x = UOp.variable("x", 0, 7)
    assert ((x * 4 + 1) // 3).key.hex() == out
    assert (x + 1).key != (x + 2).key and len(x.key) == 32


def test_toposort_order_and_enter_calls():
    a, b = UOp.variable("a", 0, 3), UOp.variable("b", 0, 3)
    s = (a + b) * a
    order = list(s.toposort())
    assert order[-1] is s and all(order.index(src) < order.index(u) for u in order for src in u.src)
    body = UOp.sink(UOp.param(0, dtypes.int, (4,)).store(UOp.const(1, dtypes.int)))
    buf = UOp.new_buffer("CPU", 4, dtypes.int)
    call = body.call(buf)
    assert body in call.toposort() and body not in call.toposort(enter_calls=False)
    assert buf in call.toposort(enter_calls=False)


def _post_order(node: UOp, gate, out: dict) -> None:
    """The reference walk: sources first, left to right, each node once, nothing below a gated-off node."""
    if node in out:
        return
    if gate is None or gate(node):
        for s in node.src:
            _post_order(s, gate, out)
    out.setdefault(node, None)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["+", "*", "max"]), st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=40),
       cut=st.integers(0, 6))
def test_toposort_is_the_post_order_walk_on_random_dags(ops, cut):
    # random DAGs with shared subexpressions (each new node reads two earlier ones), walked whole and with a gate
    nodes = [UOp.variable(f"v{i}", 0, 9) for i in range(3)]
    for op, i, j in ops:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        nodes.append(a + b if op == "+" else a * b if op == "*" else a.maximum(b))
    gate = (lambda n: hash(n) % 7 != cut) if cut else None
    expected: dict = {}
    _post_order(nodes[-1], gate, expected)
    assert list(nodes[-1].toposort(gate=gate)) == list(expected)


def test_find_below_returns_the_first_match_depth_first_and_honours_the_gate():
    a, b = UOp.variable("a", 0, 3), UOp.variable("b", 0, 3)
    s = (a + b) * (b * 2)
    assert s.find_below(lambda n: n.op is Ops.DEFINE_VAR) is a  # the first source's side first
    assert s.find_below(lambda n: n is s) is s  # the node itself counts
    assert s.find_below(lambda n: n.op is Ops.SIN) is None
    # a gate stops the walk below a node: b is only reachable through gated nodes here
    assert s.find_below(lambda n: n is b, gate=lambda n: n.op is not Ops.ADD and n.op is not Ops.MUL or n is s) is None
    # and agrees with a full walk on every node of the graph
    for n in s.toposort():
        assert (s.find_below(lambda x, n=n: x is n) is n) == (n in s.toposort())
    # a long chain is walked without recursion
    x = a
    for _ in range(5000):
        x = x + 1
    assert x.find_below(lambda n: n is a) is a


def test_deep_chain_walks_do_not_recurse():
    x = UOp.variable("deep", 0, 1)
    node = x
    for i in range(100_000):
        node = node + (i % 7)
    assert len(node.toposort()) > 100_000
    assert isinstance(node.key, bytes) and node.vmax == x.vmax + sum(i % 7 for i in range(100_000))
    assert node.shape == ()


def test_substitute_walk_and_calls():
    x, y = UOp.variable("x", 0, 3), UOp.variable("y", 0, 3)
    e = (x + 1) * x
    assert e.substitute({x: y}) is (y + 1) * y
    assert e.substitute({x + 1: y}) is y * x
    # bottom-up: the replacement is not rewritten again
    assert x.substitute({x: x + 1}) is x + 1
    p = UOp.param(0, dtypes.weakint, ())
    body = UOp.sink(p.store(x))
    call = body.call(x)
    assert call.substitute({x: y}).src == (body, y)
    assert call.substitute({x: y}, enter_calls=True).src[0] is UOp.sink(p.store(y))


def test_shapes_of_movement_ops_and_broadcasting():
    b = UOp.param(0, dtypes.float, (2, 3, 4))
    assert b.shape == (2, 3, 4) and b.ndim == 3
    assert b.reshape((6, 4)).shape == (6, 4)
    assert b.permute((2, 0, 1)).shape == (4, 2, 3)
    assert b.pad(((1, 1), (0, 0), (2, 0))).shape == (4, 3, 6)
    assert b.shrink(((0, 1), (1, 3), (0, 4))).shape == (1, 2, 4)
    assert b.flip((True, False, False)).shape == (2, 3, 4)
    assert b.reshape((2, 3, 1, 4)).expand((2, 3, 5, 4)).shape == (2, 3, 5, 4)
    c = UOp.param(1, dtypes.float, (3, 1))
    assert (b + c).shape == (2, 3, 4)  # numpy broadcasting
    assert b.r(Ops.ADD, (1,)).shape == (2, 1, 4)
    with pytest.raises(GraphError):
        b.reshape((5, 5))
    with pytest.raises(GraphError):
        b.expand((2, 3, 5))
    with pytest.raises(GraphError):  # ALU shapes are checked lazily, when the shape is first read
        _ = (b + UOp.param(2, dtypes.float, (5,))).shape
    with pytest.raises(GraphError):
        b.shrink(((0, 3), (0, 3), (0, 4)))
    with pytest.raises(GraphError):
        _ = UOp.sink().shape


def test_symbolic_shapes():
    n = UOp.variable("n", 1, 8)
    p = UOp.param(0, dtypes.float, (n, 4))
    assert p.shape[0] is n and p.shape[1] == 4
    assert p.pad(((1, 0), (0, 0))).shape[0] is (n + 1).simplify()
    assert p.shrink_to((n, 2)).shape == (n, 2)


def test_operator_promotion_and_dtypes():
    i8 = UOp.param(0, dtypes.int8, ())
    u8 = UOp.param(1, dtypes.uint8, ())
    f = UOp.param(2, dtypes.half, ())
    assert (i8 + u8).dtype is dtypes.int16 and (i8 + 1).dtype is dtypes.int8 and (f * 2).dtype is dtypes.half
    assert (i8 < 3).dtype is dtypes.bool and (i8 + 1.5).dtype is dtypes.weakfloat
    assert (i8 / 2).dtype is dtypes.float32 and (f / 2).dtype is dtypes.half
    assert (i8 - 1).op is Ops.ADD  # subtraction is canonicalized to ADD of a negation
    assert (i8 // 2).op is Ops.FLOORDIV and (i8 % 2).op is Ops.FLOORMOD and i8.cdiv(2).op is Ops.CDIV
    assert i8.cast(dtypes.float).op is Ops.CAST and i8.bitcast(dtypes.uint8).dtype is dtypes.uint8
    assert set(GroupOp.Binary) <= set(GroupOp.ALU) and Ops.WHERE in GroupOp.Ternary


def test_shrink_from_a_symbolic_start_has_the_slice_length():
    """A slice `(v, v + n)` at a bound variable (a write into a moving slice) is n long, as simplifying the difference
    gives; other symbolic bounds still simplify."""
    b = UOp.new_buffer("CPU", 640 * 16, dtypes.float32).reshape((640, 16))
    at = UOp.variable("start", 0, 576).bind(64)
    assert b.shrink(((at, at + 64), (0, 16))).shape == (64, 16)
    n = UOp.variable("n", 1, 8)
    assert b.shrink(((n, n * 2), (0, 16))).shape[0].simplify() is n.simplify()


def test_value_ranges():
    x = UOp.variable("x", -3, 5)
    assert (x * 2).vmin == -6 and (x * 2).vmax == 10
    assert (x * -2).vmin == -10 and (x // 2).vmin == -2 and (x % 4).vmax == 3
    r = UOp.range(10, 0)
    assert (r.vmin, r.vmax) == (0, 9)
    assert (UOp.param(0, dtypes.int8, ()) + 1).vmax == 127  # may wrap: the dtype's range


def test_printer_and_pyrender_roundtrip():
    x = UOp.variable("x", 0, 7)
    buf = UOp.new_buffer("CPU", 8, dtypes.float)
    g = UOp.sink(buf.index(x * 2 % 8).store(buf.index(x).load() + 1.0))
    text = pretty_print(g)
    assert text.count("DEFINE_VAR") == 1 and "x" in text  # shared nodes print once
    assert "STORE" in print_uops(list(g.toposort()))
    ns = vars(uopir).copy()
    exec(g.pyrender(), ns)
    assert ns["ast"] is g


def test_bool_of_uop():
    x = UOp.variable("x", 0, 5)
    assert bool(x < 10) and not bool(x < 0)
    with pytest.raises(GraphError):
        bool(x < 3)
    with pytest.raises(GraphError):
        bool(x)


def test_movement_shapes_match_numpy():
    np = pytest.importorskip("numpy")

    @settings(max_examples=150, derandomize=True, deadline=None)
    @given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), ops=st.lists(st.integers(0, 5), max_size=6), data=st.data())
    def check(shape, ops, data):
        arr = np.zeros(shape)
        u = UOp.param(0, dtypes.float, tuple(shape))
        for op in ops:
            nd = arr.ndim
            if op == 0:
                order = tuple(data.draw(st.permutations(range(nd))))
                arr, u = arr.transpose(order), u.permute(order)
            elif op == 1:
                pads = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(nd))
                arr, u = np.pad(arr, pads), u.pad(pads)
            elif op == 2:
                bounds = []
                for d in arr.shape:
                    b = data.draw(st.integers(0, d))
                    bounds.append((b, data.draw(st.integers(b, d))))
                arr, u = arr[tuple(slice(b, e) for b, e in bounds)], u.shrink(tuple(bounds))
            elif op == 3:
                arr, u = arr.reshape(-1), u.reshape((arr.size,))
            elif op == 4:
                flags = tuple(data.draw(st.booleans()) for _ in range(nd))
                arr, u = np.flip(arr, [i for i, f in enumerate(flags) if f]), u.flip(flags)
            else:
                new = tuple(data.draw(st.integers(1, 3)) if d == 1 else d for d in arr.shape)
                arr, u = np.broadcast_to(arr, new), u.expand(new)
            assert u.shape == arr.shape

    check()


def test_pickle_roundtrip_is_hash_consed():
    import pickle

    x = UOp.variable("x", 0, 7)
    buf = UOp.new_buffer("CPU", 8, dtypes.half)
    g = UOp.sink(buf.index(x).store((buf.index(x).load() * 2.0).cast(dtypes.float.vec(1))))
    assert pickle.loads(pickle.dumps(g)) is g
    assert pickle.loads(pickle.dumps(dtypes.half.ptr(8))) is dtypes.half.ptr(8)


def test_tinygrads_kernel_writing_forms():
    from uopir import KernelInfo
    from uopir.codegen.kernel import kernel_form, kernel_stores

    a, out = UOp.param(0, dtypes.float32.ptr(8)), UOp.param(1, dtypes.float32.ptr(8))
    assert a.flatten() is a and a.numel() == 8
    i = UOp.range(a.numel(), 0)
    assert a[i].dtype == dtypes.float32  # an element, read where it is used as a value
    st = out[i].store(a[i] * 2)
    # sink as a method and as a static constructor build the same node
    assert st.end(i).sink(arg=KernelInfo("k")) is UOp.sink(st.end(i), arg=KernelInfo("k"))
    assert UOp.sink().src == ()
    body = kernel_form(UOp.group(st, out[i + 0].store(1.0)).end(i).sink())
    stores = kernel_stores(body)
    assert len(stores) == 2 and all(s.src[0].op is Ops.INDEX and s.src[0].dtype == out.dtype for s in stores)
    loads = [n for n in body.toposort() if n.op is Ops.LOAD]
    assert len(loads) == 1 and loads[0].src[0].dtype == a.dtype
    assert kernel_form(body) is body  # already in pointer form
    with pytest.raises(GraphError, match="only a pointer"):
        UOp.const(1.0)[0]


def test_elementwise_nodes_take_their_sources_shape_as_inference_gives_it():
    from uopir.shapes import infer_shape

    a = UOp.new_buffer("CPU", 12, dtypes.float32).reshape((3, 4))
    b = UOp.new_buffer("CPU", 12, dtypes.float32).reshape((3, 4))
    row = UOp.new_buffer("CPU", 4, dtypes.float32).reshape((1, 4))
    n = UOp.variable("n", 1, 8)
    sym = UOp.new_buffer("CPU", 8, dtypes.float32).reshape((8,)).shrink(((0, n),))
    cases = [(Ops.ADD, a, b), (Ops.CMPLT, a, b), (Ops.WHERE, a.ne(0.0), a, b), (Ops.SQRT, a), (Ops.MUL, a, row),  # broadcast: inferred
             (Ops.MUL, sym, sym), (Ops.CAST, a)]
    for op, *srcs in cases:
        dtype = dtypes.int32 if op is Ops.CAST else None
        node = UOp.elementwise(op, dtype, *srcs)
        assert node.shape == infer_shape(UOp(op, node.dtype, tuple(srcs))) == infer_shape(node)
    assert UOp.elementwise(Ops.MUL, None, a, row).shape == (3, 4)
    fresh = UOp(Ops.MUL, dtypes.float32, (a, b))  # a source not shaped yet: left to inference
    assert UOp.elementwise(Ops.ADD, None, fresh, a).shape == (3, 4)
    # not an elementwise op: made as UOp() makes it
    assert UOp.elementwise(Ops.BITCAST, dtypes.float16, a).shape == (3, 8)


def test_ops_enum_behaves_as_an_enum():
    """Ops' class attribute reads skip the enum metaclass's hook (see ops._OpsType); everything an enum offers still works."""
    import copy
    import pickle

    from uopir import Ops

    assert Ops(Ops.ADD.value) is Ops.ADD and Ops["ADD"] is Ops.ADD and Ops.ADD.name == "ADD"
    assert list(Ops)[0] is Ops.SPECIAL and len(Ops) == len(Ops.__members__) and Ops.ADD in set(Ops)
    assert pickle.loads(pickle.dumps(Ops.MUL)) is Ops.MUL and copy.deepcopy(Ops.MUL) is Ops.MUL
    assert isinstance(Ops.ADD, Ops) and isinstance(Ops.ADD, int) and repr(Ops.ADD) == "Ops.ADD"
    with pytest.raises(ValueError, match="not a valid Ops"):
        Ops(10**6)
    with pytest.raises(KeyError):
        Ops["NOT_AN_OP"]
    with pytest.raises(AttributeError):
        _ = Ops.NOT_AN_OP


def test_uop_fields_and_inferred_dtypes():
    """Nodes made without a dtype take the one `_infer_dtype` gives: the first source's for ALU and movement ops."""
    from uopir import Ops, UOp, dtypes

    a = UOp.const(1.5, dtypes.float32).reshape((1,)).expand((4,))
    b = UOp(Ops.ADD, None, (a, a))
    assert b.dtype is dtypes.float32 and b.op is Ops.ADD and b.src == (a, a) and b.arg is None and b.tag is None
    assert UOp(Ops.CMPLT, None, (a, a)).dtype is dtypes.bool
    assert UOp(Ops.WHERE, None, (UOp(Ops.CMPLT, None, (a, a)), a, a)).dtype is dtypes.float32
    assert UOp(Ops.SINK, None, (b,)).dtype is dtypes.void and UOp(Ops.CONST, None, (), 2).dtype is dtypes.weakint
    assert UOp(Ops.ADD, None, (a, a)) is b  # hash-consed
    assert UOp(Ops.CONST, dtypes.float32, (), 0.0) is not UOp(Ops.CONST, dtypes.float32, (), -0.0)  # keyed by the bits


def test_buffer_arg_fast_constructor_matches_the_dataclass():
    """`ParamArg.of_buffer` (what new buffers use) builds the same arg as the dataclass constructor, frozen as it is."""
    import dataclasses

    from uopir import dtypes
    from uopir.args import ParamArg

    fast, slow = ParamArg.of_buffer(7, dtypes.float32, 16384, "CPU"), ParamArg(7, dtypes.float32, 16384, device="CPU")
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow) and dataclasses.asdict(fast) == dataclasses.asdict(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.size = 3  # type: ignore[misc]


def test_assume_shape_gives_a_shape_only_to_a_node_without_one():
    a = UOp.new_buffer("CPU", 12, dtypes.float32).reshape((3, 4))
    fresh = UOp(Ops.MUL, dtypes.float32, (a, a))  # made directly: no shape until asked (or given)
    assert fresh.assume_shape((3, 4)) is fresh and fresh.shape == (3, 4)
    shaped = a.reshape((4, 3))
    assert shaped.assume_shape((12,)).shape == (4, 3)  # a node that has one keeps it


def test_a_shape_given_to_the_constructor_goes_to_a_node_without_one():
    a = UOp.new_buffer("CPU", 12, dtypes.float32).reshape((3, 4))
    made = UOp(Ops.ADD, dtypes.float32, (a, a), None, None, (3, 4))  # new: shaped as given, nothing inferred
    assert made._shape == (3, 4) and made is UOp(Ops.ADD, dtypes.float32, (a, a))
    bare = UOp(Ops.SUB, dtypes.float32, (a, a))  # existing without a shape: takes it
    assert UOp(Ops.SUB, dtypes.float32, (a, a), None, None, (3, 4)) is bare and bare._shape == (3, 4)
    assert UOp(Ops.ADD, dtypes.float32, (a, a), None, None, (12,)).shape == (3, 4)  # one with a shape keeps it


def test_a_value_whose_first_sources_are_constants_has_the_device_it_reads():
    # a pad with a value is WHERE(pad of a constant mask, padded x, value): the chain of first sources ends in constants,
    # and the value had no device (Tensor.contiguous then searched the whole graph for a buffer at every step)
    x = UOp.new_buffer("CPU", 4, dtypes.float).reshape((4,))
    mask = UOp.const(True, dtypes.bool).reshape((1,)).expand((4,)).pad(((0, 2),))
    padded = mask.where(x.pad(((0, 2),)), UOp.const(5.0, dtypes.float).reshape((1,)).expand((6,)))
    assert padded.device == "CPU"
    assert (padded + 1.0).device == "CPU"  # (found again through the node that remembers it)
    constant = mask.where(UOp.const(1.0, dtypes.float).reshape((1,)).expand((6,)), UOp.const(5.0, dtypes.float).reshape((1,)).expand((6,)))
    assert constant.device is None
