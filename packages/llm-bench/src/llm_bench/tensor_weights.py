"""Model weights on a uop_scheduler device: float matrices, or quantized ones kept as their raw GGML blocks.

A weight matrix (..., out, in) is stored in the layout the CPU matrix-vector kernel streams best, one accumulator per
output with the input index as the outer loop: float values transposed to (..., in, out), and quantized blocks
byte-transposed to (..., n_blocks, block_bytes, out), so for every input element the bytes of consecutive outputs
are adjacent (the same bytes as the file, reordered; never a float copy). Quantized matrices are dequantized inside
the graph of the matmul that reads them (`tensor_dequant`).

Q4_0, Q4_1 and Q8_0 matrices are multiplied with 8-bit quantized activations (`qdot`, as llama.cpp does): on a CPU
device by the integer-dot kernel, which reads each row's blocks regrouped eight at a time (`qdot.repack_rows`, the
file's bytes in another order, written into the device buffer by `qdot.repack_rows_into` on the device's cores);
elsewhere by the graph, which rounds the activations the same way before a float product, so every device computes
the numpy reference's values. 2-D float16 matrices on a CPU device keep the file's rows for the F16C kernel
(`qdot.f16_matmul`).

The matrix-vector kernel splits the outputs between the CPU cores. A 2-D matrix whose outputs split evenly is stored
as one block per core ((in, out / cores) values or (n_blocks, block_bytes, out / cores) bytes), so each core streams
one contiguous run of memory rather than a slice of every row (a 100M-parameter F16 decode step with its weights in
DRAM took 18.9 ms instead of 20.9 ms on 2 cores; the Q8_0 one 3.4 ms instead of 3.9 ms from the cache); the matmul reads
it through a view, so values and results are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from hcq_runtime import Buffer, CPUDevice, buffer_for
from uop_scheduler import Device, Tensor, dtypes

from .ggml_types import BLOCK_LAYOUTS, GGMLType
from .gguf_reader import GGUFTensor, release_pages_of
from .qdot import NOT_FUSED, Fused, f16_matmul, int_dot_weight, q8_roundtrip, qdot_matmul, repack_rows_into
from .tensor_dequant import GRAPH_QUANT_TYPES, dequantize_blocks

# The CPU codegen vectorizes a decoding matmul only while its per-core accumulator row is short enough to unroll: a
# 4608-row Q8_0 matrix-vector product ran 20x slower than a 2304-row one. Wider quantized matrices are split into even
# pieces of at most this many output rows, one matmul each.
QUANT_ROWS_PER_MATMUL = 2048
# The CPU heuristic vectorizes the output axis in pieces of up to 32 lanes, then gives each core an equal share of the
# pieces, and threads only kernels of at least 2**16 multiply-adds: the per-core blocks line up with those shares.
CORE_BLOCK_LANES = 32
CORE_BLOCK_MIN_WORK = 1 << 16
# int-dot matrices are copied to the device in pieces of about this many bytes
_UPLOAD_PIECE_BYTES = 1 << 19


@dataclass(frozen=True)
class DeviceMatrix:
    """One (..., out, in) weight matrix on the device: `data` holds float32/float16 values as (..., in, out) when
    `ggml_type` is None, else raw `ggml_type` blocks as (..., n_blocks, block_bytes, out); a 2-D matrix stored in
    `core_blocks` > 1 blocks has a leading block axis and out / core_blocks outputs per block. `int_dot`: multiplied
    with 8-bit activations (`qdot`). `rows_layout` (CPU devices): `data` holds one row per output, (out, n_blocks *
    block_bytes) bytes regrouped by `qdot.repack_rows` for int-dot types, or (out, in) float16 values for F16."""

    data: Tensor
    ggml_type: GGMLType | None
    core_blocks: int = 1
    int_dot: bool = False
    rows_layout: bool = False

    def transposed(self) -> Tensor:
        """The values as a lazy (..., in, out) Tensor (float32, or float16 for float16 storage)."""
        data = self.data
        if self.core_blocks > 1:  # (blocks, ..., width) -> (..., blocks * width): a view
            data = data.permute(*range(1, data.ndim - 1), 0, data.ndim - 1).reshape(*data.shape[1:-1], -1)
        if self.ggml_type is None:
            return data
        nd = data.ndim
        # (..., n_blocks, block_bytes, out) -> (..., out, n_blocks, block_bytes): a view, decoded to (..., out, in)
        blocks = data.permute(*range(nd - 3), nd - 1, nd - 3, nd - 2)
        return dequantize_blocks(blocks, self.ggml_type).transpose(-1, -2)

    def block(self, i: int) -> Tensor:
        """The values of per-core block `i` as a lazy (in, out / core_blocks) Tensor."""
        return DeviceMatrix(self.data[i], self.ggml_type).transposed()


@dataclass(frozen=True)
class Linear:
    """A linear layer x @ W.T whose W is one or more matrices stacked along the output axis (Q, K and V, or gate and
    up, fused into one matmul when they share a storage type, else one matmul each)."""

    parts: tuple[DeviceMatrix, ...]

    def __call__(self, x: Tensor, fused: Fused = NOT_FUSED) -> Tensor:
        """x (n, in) -> (n, out) float32, with what `fused` asks around the product (a norm or SwiGLU of x before it,
        a residual added after it: see `qdot.Fused`): inside the hand-written kernels when every part is one, else
        computed in the graph. The input is materialized first so its producer (a norm, the SwiGLU product) is
        computed once rather than inside every output's reduction. For the hand-written kernels that is realizing
        it: a value already in a buffer (the attention kernel's output) then stays where it is, where contiguous()
        would have copied it."""
        kernels = all(part.rows_layout for part in self.parts)
        # the kernels form their input per core, each all of it: for a prompt the graph's kernels split that work
        # between the cores instead (SmolLM2 F16 64-token prefill: 91 ms unfused, 97-103 ms with the input fused)
        if (fused.norm is not None or fused.swiglu) and (not kernels or x.shape[0] > FUSED_INPUT_MAX_TOKENS):
            x = rms_norm(x, fused.norm, fused.eps) if fused.norm is not None else x
            x = swiglu(x) if fused.swiglu else x
            fused = Fused(residual=fused.residual)
        if fused.residual is not None and (not kernels or len(self.parts) > 1):
            # several products are concatenated first: the residual is added to the whole row
            return self(x, Fused(fused.norm, fused.eps, fused.swiglu)) + fused.residual
        x = x.realize() if kernels else x.contiguous()
        rounded = q8_roundtrip(x) if any(part.int_dot and not part.rows_layout for part in self.parts) else None
        outs = []
        for part in self.parts:
            cores = getattr(Device[part.data.device], "n_cores", 1)
            if part.rows_layout and part.ggml_type is GGMLType.F16:
                outs.append(f16_matmul(x, part.data, cores, fused))
            elif part.rows_layout:
                assert part.ggml_type is not None
                outs.append(qdot_matmul(x, part.data, part.ggml_type, cores, fused))
            else:
                outs.append(_product(rounded if part.int_dot else x, part))
        if len(outs) == 1:
            return outs[0]
        # each product gets its own kernel: fused into the cat, every output element would run the products of all parts
        return outs[0].contiguous().cat(*[out.contiguous() for out in outs[1:]], dim=-1)

    @property
    def nbytes(self) -> int:
        return sum(part.data.nbytes() for part in self.parts)


#: the most tokens whose norm or SwiGLU input a matmul kernel forms itself (decoding steps; prompts use the graph)
FUSED_INPUT_MAX_TOKENS = 4


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * weight


def swiglu(x: Tensor) -> Tensor:
    """silu(gate) * up of x (n, 2k) = [gate | up]."""
    k = x.shape[-1] // 2
    return x[:, :k].silu() * x[:, k:]


def _product(x: Tensor, part: DeviceMatrix) -> Tensor:
    """x (n, in) @ the part's (in, out) values in float32."""
    if part.core_blocks > 1 and x.shape[0] > 1:
        # a prompt's matmul splits its tokens between the cores, not the outputs, and reads the blocked view through
        # index divisions that keep it from vectorizing: one product per block instead
        blocks = [x.matmul(part.block(i), dtype=dtypes.float32).contiguous() for i in range(part.core_blocks)]
        return blocks[0].cat(*blocks[1:], dim=-1)
    return x.matmul(part.transposed(), dtype=dtypes.float32)


def upload_matrices(tensors: Sequence[GGUFTensor], device: str, rows: Callable[[int, np.ndarray], np.ndarray] | None = None,
                    float32: bool = False, activations: str = "q8") -> tuple[DeviceMatrix, ...]:
    """Put weight matrices on `device`, joining neighbours with the same storage along the output axis.

    Unless `float32` is set, quantized tensors of a type the graph can decode keep their blocks and F16 stays float16;
    anything else becomes float32. Int-dot matrices (`qdot.int_dot_weight` in `activations` mode) keep one row of
    (regrouped) blocks per output on a CPU device, as do 2-D float16 matrices (`qdot.f16_matmul`); other quantized groups wider than
    QUANT_ROWS_PER_MATMUL rows are split. `rows(i, array)`, when given, reorders the output rows of tensor i (raw block
    rows or values).
    """
    cpu = isinstance(Device[device], CPUDevice)
    groups: list[tuple[GGMLType | None, np.dtype | None, list[np.ndarray]]] = []
    for i, tensor in enumerate(tensors):
        if tensor.ggml_type in GRAPH_QUANT_TYPES and not float32:
            kind, dtype, array = tensor.ggml_type, None, tensor.array()
        else:
            kind, dtype = None, np.dtype(np.float16 if tensor.ggml_type is GGMLType.F16 and not float32 else np.float32)
            array = tensor.dequantize().astype(dtype)
        if rows is not None:
            array = rows(i, array)
        if groups and groups[-1][0] == kind and groups[-1][1] == dtype:
            groups[-1][2].append(array)
        else:
            groups.append((kind, dtype, [array]))
    parts = []
    for kind, _, arrays in groups:
        shape = (sum(a.shape[0] for a in arrays), *arrays[0].shape[1:])
        int_dot = kind is not None and int_dot_weight(kind, _matrix_shape(kind, shape), activations)
        if int_dot and cpu:
            rows_of = _rows_on_device(arrays, device, dtypes.uint8, lambda view, piece, kind=kind: repack_rows_into(view, piece, kind))
            parts.append(DeviceMatrix(rows_of, kind, int_dot=True, rows_layout=True))
            continue
        if kind is None and cpu and arrays[0].dtype == np.float16 and arrays[0].ndim == 2:
            # float16 matrices: the F16C kernel over the file's rows
            parts.append(DeviceMatrix(_rows_on_device(arrays, device, dtypes.float16), GGMLType.F16, rows_layout=True))
            continue
        joined = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=-2)  # one tensor: no joined copy
        pieces = 1 if kind is None else -(-joined.shape[-2] // QUANT_ROWS_PER_MATMUL)
        for piece in np.array_split(joined, pieces, axis=-2):
            parts.append(replace(_device_matrix(kind, piece, device), int_dot=int_dot))
            release_pages_of(piece)  # a large tensor's file pages are held a piece at a time, not all at once
    return tuple(parts)


def _rows_on_device(arrays: Sequence[np.ndarray], device: str, dtype, write: Callable[[Buffer, np.ndarray], None] | None = None) -> Tensor:
    """The rows of `arrays` (each (rows, width): raw block bytes as uint8, or float16 values) stacked into one device
    tensor of `dtype`, copied a few hundred KiB at a time (each piece by `write(view, piece)` when given, which writes a
    same-size reordering of its rows into the buffer view) with the file pages under each piece let go once copied: a
    30 MB output matrix never holds its file pages and its device copy at once."""
    width = arrays[0].shape[1]
    out = Tensor.empty(sum(a.shape[0] for a in arrays), width, dtype=dtype, device=device).realize()
    buffer = buffer_for(out.uop.base)
    step = max(1, _UPLOAD_PIECE_BYTES // arrays[0][:1].nbytes)
    offset = 0
    for array in arrays:
        for start in range(0, array.shape[0], step):
            piece = array[start : start + step]
            view = buffer.view(piece.nbytes, dtypes.uint8, offset)
            if write is None:
                view.copyin(piece)
            else:
                write(view, piece)
            release_pages_of(piece)
            offset += piece.nbytes
    return out


def _matrix_shape(kind: GGMLType, raw_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element shape (..., out, in) of raw `kind` blocks of shape (..., out, row_bytes)."""
    layout = BLOCK_LAYOUTS[kind]
    return (*raw_shape[:-1], raw_shape[-1] // layout.block_bytes * layout.block_elems)


def core_blocks(shape: tuple[int, ...], device: str) -> int:
    """How many per-core blocks a matrix of `shape` (..., out, in) is stored in on `device` (1: unblocked): the
    most cores, up to the device's, that share its vector pieces of outputs evenly."""
    cores = getattr(Device[device], "n_cores", 1)
    if len(shape) != 2 or shape[0] * shape[1] < CORE_BLOCK_MIN_WORK:
        return 1
    return next(c for c in range(cores, 0, -1) if shape[0] % (c * CORE_BLOCK_LANES) == 0 or c == 1)


def _device_matrix(kind: GGMLType | None, array: np.ndarray, device: str) -> DeviceMatrix:
    """A (..., out, in) float array (`kind` None; its dtype is kept), or `kind` blocks as (..., out, row_bytes) uint8,
    on `device` in the streaming layout."""
    if kind is None:
        n_in, stored = array.shape[-1], np.swapaxes(array, -1, -2)
    else:
        layout = BLOCK_LAYOUTS[kind]
        n_in = array.shape[-1] // layout.block_bytes * layout.block_elems
        blocks = array.reshape(*array.shape[:-1], array.shape[-1] // layout.block_bytes, layout.block_bytes)
        nd = blocks.ndim
        # (..., out, n_blocks, block_bytes) -> (..., n_blocks, block_bytes, out)
        stored = blocks.transpose(*range(nd - 3), nd - 2, nd - 1, nd - 3)
    if (n_blocks := core_blocks((*array.shape[:-1], n_in), device)) > 1:
        # (..., out) -> (..., blocks, out / blocks) -> (blocks, ..., out / blocks)
        stored = stored.reshape(*stored.shape[:-1], n_blocks, -1)
        stored = np.moveaxis(stored, -2, 0)
    # the strided view goes in as it is: the device buffer is written from the mapped file without a host copy between
    return DeviceMatrix(Tensor(stored, device=device), kind, n_blocks)
