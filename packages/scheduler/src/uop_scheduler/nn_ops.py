"""Composite ops: matmul and friends, convolution and pooling (im2col by movement ops), normalization, attention.

Every op here is built from elementwise, reduce and movement ops, so the scheduler fuses it like any other graph:
a matmul is one kernel (a broadcast multiply fused into its sum), a convolution is pooling views plus one reduce.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from uopir import DType, Ops, UOp, dtypes, least_upper_dtype, shape_str, sum_acc_dtype, to_dtype

from .elementwise import broadcast_shape
from .errors import ArgumentError, ShapeError, TensorIndexError, TensorRuntimeError
from .fields import TensorFields
from .templates import templated
from .writes import apply_view

if TYPE_CHECKING:
    from .tensor import Tensor


def make_tuple(x: int | Sequence[int], n: int) -> tuple[int, ...]:
    """`x` repeated n times, or `x` itself when it is already a sequence."""
    return (x,) * n if isinstance(x, int) else tuple(x)


def _conv_padding(padding: int | Sequence[int], ndims: int) -> tuple[tuple[int, int], ...]:
    """Per spatial axis (before, after) from an int, one int per axis, or flat torch-style pairs (last axis first)."""
    if isinstance(padding, int):
        return ((padding, padding),) * ndims
    pad = tuple(padding)
    if len(pad) == ndims:
        return tuple((p, p) for p in pad)
    if len(pad) == 2 * ndims:
        return tuple(zip(pad[-2::-2], pad[::-2]))
    raise ShapeError(f"padding {pad} must be an int, {ndims} ints or {2 * ndims} ints")


def _resample_weights(n_in: int, n_out: int, mode: str, align_corners: bool) -> np.ndarray:
    """The (n_out, n_in) matrix of source weights of a 1-D resampling (see `interpolate`)."""
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        if mode != "linear":
            w[i, min(n_in - 1, ((2 * i + 1) * n_in) // (2 * n_out) if mode == "nearest-exact" else (i * n_in) // n_out)] = 1
            continue
        # the source coordinate num / den, clamped to [0, n_in - 1]
        num, den = (i * (n_in - 1), max(1, n_out - 1)) if align_corners else ((2 * i + 1) * n_in - n_out, 2 * n_out)
        num = min(max(num, 0), (n_in - 1) * den)
        lo, frac = divmod(num, den)
        w[i, lo] += 1 - frac / den
        if frac:
            w[i, lo + 1] += frac / den
    return w


@functools.lru_cache(maxsize=256)
def _resample_taps(n_in: int, n_out: int, mode: str, align_corners: bool) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """`_resample_weights` as taps, worked out once per signature: for each tap, every output's source index and its
    weight (read-only int32 and float64 arrays of n_out). A tap is one of a row's non-zero columns in order; a row with
    fewer has source 0 and a zero weight there."""
    w = _resample_weights(n_in, n_out, mode, align_corners)
    rows, cols = np.nonzero(w)  # (row-major: each row's columns in order)
    counts = np.bincount(rows, minlength=n_out)
    rank = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)  # each entry's position in its row
    taps = []
    for t in range(max(1, int(counts.max()))):
        index, weight = np.zeros(n_out, np.int32), np.zeros(n_out)
        at = rank == t
        index[rows[at]], weight[rows[at]] = cols[at], w[rows[at], cols[at]]
        index.flags.writeable = weight.flags.writeable = False
        taps.append((index, weight))
    return tuple(taps)


#: `_dot_plan`'s answer: the operands' reshaped shapes, the right operand's transposing permutation, the product's
#: broadcast shape and each operand's shape padded to it (after the permutation, for the right one)
_DotPlan = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@functools.lru_cache(maxsize=1024)
def _dot_plan(xshape: tuple[int, ...], wshape: tuple[int, ...]) -> _DotPlan:
    """The shapes `dot` views its fixed-shape operands through, worked out once per pair of shapes (a model's matmuls
    repeat a few): x reshaped to (..., 1, K) and w to (..., 1, K, N) and transposed, both broadcast to the product's
    shape (a BroadcastError for batch axes that do not broadcast)."""
    n1, n2 = len(xshape), len(wshape)
    axis_w, extra = -min(n2, 2), min(n1 - 1, n2 - 1, 1)
    xs, ws = (*xshape[0:-1], *[1] * extra, xshape[-1]), (*wshape[0:-2], *[1] * extra, *wshape[axis_w:])
    order = list(range(len(ws)))
    order[-1], order[axis_w] = order[axis_w], order[-1]
    w_permuted = tuple(ws[i] for i in order)
    shape = broadcast_shape(xs, w_permuted)
    return xs, ws, tuple(order), shape, (1,) * (len(shape) - len(xs)) + xs, (1,) * (len(shape) - len(ws)) + w_permuted


class NNMixin(TensorFields):
    """Composite ops of Tensor."""

    __slots__ = ()

    # ---- matrix products ----
    def dot(self: Tensor, w: Tensor, dtype: Any = None) -> Tensor:
        """Matrix product with numpy's broadcasting rules for batch axes and 1-D operands."""
        x: Tensor = self
        xshape, wshape = x.shape, w.shape
        n1, n2 = len(xshape), len(wshape)
        if n1 == 0 or n2 == 0:
            raise TensorRuntimeError(f"both tensors need to be at least 1D, got {n1}D and {n2}D")
        axis_w = -min(n2, 2)
        if xshape[-1] != wshape[axis_w]:
            raise TensorRuntimeError(f"cannot dot {xshape} and {wshape}")
        out_dt = least_upper_dtype(x.dtype, w.dtype) if dtype is None else to_dtype(dtype)
        if x.dtype is w.dtype and x.device == w.device and dtypes.is_float(out_dt) and out_dt not in (dtypes.float16, dtypes.bfloat16) \
                and all(type(d) is int for d in xshape) and all(type(d) is int for d in wshape):
            return x._dot_uops(w, _dot_plan(xshape, wshape), dtype, out_dt)
        extra = min(n1 - 1, n2 - 1, 1)
        xs, ws = (*xshape[0:-1], *[1] * extra, xshape[-1]), (*wshape[0:-2], *[1] * extra, *wshape[axis_w:])
        x, w = x.reshape(xs), w.reshape(ws).transpose(-1, axis_w)
        if out_dt in (dtypes.float16, dtypes.bfloat16):
            # products of half-precision inputs are formed in float32, where the sum accumulates anyway: more exact,
            # and it lets the kernel load half vectors and widen them instead of rounding every product to half
            acc = sum_acc_dtype(out_dt)
            return x.cast(acc).mul(w.cast(acc)).sum(-1).cast(out_dt)
        return x.mul(w).sum(-1, dtype=dtype).cast(out_dt)

    def _dot_uops(self: Tensor, w: Tensor, plan: _DotPlan, dtype: Any, out_dt: DType) -> Tensor:
        """`dot` of same-dtype float operands with fixed shapes (see `_dot_plan`), its operands' reshapes, transpose and
        broadcasts built as UOps: the graph of `dot`'s tensor ops node for node (a test compares them), without a
        tensor per view (they were 60% of an attention's graph building)."""
        xs, ws, order, shape, x_full, w_full = plan
        xu = self.uop.reshape(xs).reshape(x_full).expand(shape)
        wu = w.uop.reshape(ws).permute(order).reshape(w_full).expand(shape)
        product = UOp(Ops.MUL, self.dtype, (xu, wu))
        if dtype is None and sum_acc_dtype(out_dt) is out_dt is self.dtype:
            # the sum over the last axis and the reshape dropping it, as `sum(-1)` builds them (a reduce tensor and a
            # view tensor of it were a third of a matmul's graph building)
            return self._wrap(product.r(Ops.ADD, (len(shape) - 1,)).reshape(shape[:-1]))
        return self._wrap(product).sum(-1, dtype=dtype).cast(out_dt)

    def matmul(self: Tensor, x: Tensor, reverse: bool = False, dtype: Any = None) -> Tensor:
        """self @ x (x @ self when reverse)."""
        return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)

    def newton_schulz(self: Tensor, steps: int, params: tuple[float, ...], eps: float = 1.0e-7) -> Tensor:
        """Newton-Schulz iteration of the odd polynomial with coefficients `params` over each matrix of the last two axes:
        starting from the matrix over its Frobenius norm (+ eps), `steps` times G <- sum_i params[i] * (G G^T)^i G. A tall
        matrix is iterated transposed. Muon uses it to orthogonalize a step."""
        if self.ndim < 2:
            raise ShapeError(f"newton_schulz needs a tensor of two or more axes, got shape {self.shape}")
        if self.shape[-2] > self.shape[-1]:
            return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
        g = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
        for _ in range(steps):
            gram, term = g @ g.transpose(-2, -1), g
            out = params[0] * g
            for p in params[1:]:
                term = gram @ term
                out = out + p * term
            g = out
        return g

    def qr(self: Tensor) -> tuple[Tensor, Tensor]:
        """QR decomposition of each matrix of the last two axes by Householder reflections: Q (..., m, m) orthogonal
        and R (..., m, n) upper triangular with self = Q @ R. A column that is already zero below the diagonal is left
        as it is (no division by its zero norm)."""
        if self.ndim < 2:
            raise ShapeError(f"qr needs a tensor of two or more axes, got shape {self.shape}")
        from .tensor import Tensor

        *batch, m, n = self.shape
        r = self.contiguous()
        q = Tensor.eye(m, dtype=self.dtype, device=self.device).reshape(*[1] * len(batch), m, m).expand(*batch, m, m).contiguous()
        for j in range(min(m - 1, n)):
            x = r[..., j:, j]  # (..., m - j)
            norm = x.square().sum(-1, keepdim=True).sqrt()
            alpha = (x[..., :1] >= 0).where(-norm, norm)
            v = (x - alpha * Tensor.eye(m - j, dtype=self.dtype, device=self.device)[0]).pad(((0, 0),) * len(batch) + ((j, 0),))
            vnorm = v.square().sum(-1, keepdim=True)
            # H = I - 2 v v^T / (v^T v); nothing to reflect where v is zero
            scale = (vnorm > 0).where(2.0 / vnorm.maximum(1e-30), 0.0)
            r = (r - (scale * v).unsqueeze(-1) * (v.unsqueeze(-2) @ r)).contiguous()
            q = (q - (q @ v.unsqueeze(-1)) * (scale * v).unsqueeze(-2)).contiguous()
        return q, r

    def svd(self: Tensor, full_matrices: bool = True, sweeps: int = 10) -> tuple[Tensor, Tensor, Tensor]:
        """Singular value decomposition of each matrix of the last two axes by one-sided Jacobi rotations:
        (U, S, Vh) with self = U @ diag(S) @ Vh, S descending and non-negative. U is (..., m, m) and Vh (..., n, n)
        with `full_matrices`, else (..., m, k) and (..., k, n) for k = min(m, n). `sweeps` rounds over every column
        pair (float32 converges in a handful for small matrices)."""
        from .tensor import Tensor

        if self.ndim < 2:
            raise ShapeError(f"svd needs a tensor of two or more axes, got shape {self.shape}")
        *batch, m, n = self.shape
        if m < n:  # A^T = U' S Vh'  ->  A = Vh'^T S U'^T
            u, s, vh = self.transpose(-2, -1).svd(full_matrices, sweeps)
            return vh.transpose(-2, -1), s, u.transpose(-2, -1)
        dt, dev = self.dtype, self.device
        eye_n = Tensor.eye(n, dtype=dt, device=dev).contiguous()
        u = self.contiguous()
        v = eye_n.reshape(*[1] * len(batch), n, n).expand(*batch, n, n).contiguous()
        for _ in range(sweeps):
            for p in range(n - 1):
                for q in range(p + 1, n):
                    ep, eq = eye_n[p], eye_n[q]  # one-hot rows: every pair's kernels are the same kernels
                    up, uq = (u * ep).sum(-1), (u * eq).sum(-1)  # (..., m)
                    alpha, beta, gamma = up.square().sum(-1), uq.square().sum(-1), (up * uq).sum(-1)
                    rotate = gamma.abs() > 1e-30
                    zeta = (beta - alpha) / (2 * rotate.where(gamma, 1.0))
                    t = (zeta >= 0).where(1.0, -1.0) / (zeta.abs() + (1 + zeta.square()).sqrt())
                    c = rotate.where(1 / (1 + t.square()).sqrt(), 1.0).unsqueeze(-1)
                    sn = rotate.where(t / (1 + t.square()).sqrt(), 0.0).unsqueeze(-1)
                    vp, vq = (v * ep).sum(-1), (v * eq).sum(-1)
                    u = (u + ((c - 1) * up - sn * uq).unsqueeze(-1) * ep + (sn * up + (c - 1) * uq).unsqueeze(-1) * eq).contiguous()
                    v = (v + ((c - 1) * vp - sn * vq).unsqueeze(-1) * ep + (sn * vp + (c - 1) * vq).unsqueeze(-1) * eq).contiguous()
        sigma = u.square().sum(-2).sqrt()  # (..., n)
        order = sigma.argsort(-1, descending=True)
        s = sigma.gather(-1, order)
        cols = order.unsqueeze(-2).expand(*batch, m, n)
        u = (u / (sigma > 1e-30).where(sigma, 1.0).unsqueeze(-2)).gather(-1, cols)
        v = v.gather(-1, order.unsqueeze(-2).expand(*batch, n, n))
        if full_matrices and m > n:  # complete the columns to an orthonormal basis of R^m
            q, r = u.cat(Tensor.eye(m, dtype=dt, device=dev).reshape(*[1] * len(batch), m, m).expand(*batch, m, m), dim=-1).qr()
            signs = (r.diagonal(dim1=-2, dim2=-1)[..., :n] >= 0).where(1.0, -1.0)
            u = q * signs.cat(Tensor.ones(*batch, m - n, dtype=dt, device=dev), dim=-1).unsqueeze(-2)
        return u, s, v.transpose(-2, -1)

    def __matmul__(self: Tensor, x: Tensor) -> Tensor:
        return NotImplemented if hasattr(x, "shards") else self.matmul(x)

    def __rmatmul__(self: Tensor, x: Tensor) -> Tensor:
        return self.matmul(x, True)

    def sequential(self: Tensor, layers: Any) -> Tensor:
        """Apply each callable of `layers` in turn: `x.sequential([conv, Tensor.relu])` is `conv(x).relu()`."""
        out = self
        for layer in layers:
            out = layer(out)
        return out

    @templated
    def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None, dtype: Any = None) -> Tensor:
        """self @ weight + bias (an elementwise product for a 1-D weight)."""
        x = self.mul(weight) if weight.ndim == 1 else self.dot(weight, dtype=dtype)
        return x if bias is None else x.add(bias)

    @staticmethod
    @templated
    def einsum(formula: str, *operands: Any, dtype: Any = None) -> Tensor:
        """Einstein summation like "ij,jk->ik" or "bij,bjk" (implicit output: letters seen once, sorted).

        Each operand's axes are permuted to one shared letter order and broadcast-multiplied, then the letters absent
        from the output are summed. A letter repeated within one operand takes that operand's diagonal ("ii->i").
        `dtype` is the dtype of that sum (and of the result).
        """
        tensors = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
        spec = formula.replace(" ", "")
        lhs, arrow, out = spec.partition("->")
        inputs = lhs.split(",")
        if len(inputs) != len(tensors):
            raise ShapeError(f"einsum {formula!r} names {len(inputs)} operands but got {len(tensors)}")
        # "..." stands for the axes no letter names, right-aligned across operands (they broadcast together): each
        # becomes letters of its own, outside the formula's alphabet
        if any(sub.count("...") > 1 for sub in (*inputs, out)):
            raise TensorIndexError(f"einsum {formula!r}: an operand has more than one ellipsis")
        spans = [t.ndim - (len(sub) - 3) if "..." in sub else 0 for sub, t in zip(inputs, tensors)]
        if any(n < 0 for n in spans):
            raise ShapeError(f"einsum {formula!r} names more axes than {[t.shape for t in tensors]} have")
        ellipsis = "".join(chr(0x2460 + i) for i in range(max(spans, default=0)))
        inputs = [sub.replace("...", ellipsis[len(ellipsis) - n:]) for sub, n in zip(inputs, spans)]
        if not arrow:  # the implicit output: the ellipsis' axes, then the letters seen once, sorted
            named = "".join(inputs).translate({ord(c): None for c in ellipsis})
            out = ellipsis + "".join(sorted(c for c in set(named) if named.count(c) == 1))
        else:
            out = out.replace("...", ellipsis)
        for n, (sub, t) in enumerate(zip(inputs, tensors)):
            if len(sub) != t.ndim:
                raise ShapeError(f"einsum operand {sub!r} does not match shape {t.shape} (one letter per axis)")
            while len(set(sub)) != len(sub):
                c = next(c for c in sub if sub.count(c) > 1)
                p, q = sub.index(c), sub.index(c, sub.index(c) + 1)
                t, sub = t._diagonal(p, q), sub[:q] + sub[q + 1:]
            inputs[n], tensors[n] = sub, t
        sizes: dict[str, int] = {}
        for sub, t in zip(inputs, tensors):
            for c, d in zip(sub, t.shape):
                if sizes.setdefault(c, d) != d and d != 1 and sizes[c] != 1:
                    raise ShapeError(f"einsum letter {c!r} has sizes {sizes[c]} and {d} in {formula!r}")
                sizes[c] = max(sizes[c], d)
        letters = list(out) + sorted(set(sizes) - set(out))

        def align(t: Tensor, sub: str) -> Tensor:
            t = t.permute([sub.index(c) for c in letters if c in sub]) if t.ndim else t
            return t.reshape(tuple(t.shape[[c for c in letters if c in sub].index(c)] if c in sub else 1 for c in letters))

        prod = align(tensors[0], inputs[0])
        for t, sub in zip(tensors[1:], inputs[1:]):
            prod = prod.mul(align(t, sub))
        summed = tuple(range(len(out), len(letters)))
        ret = prod.sum(summed, dtype=dtype) if summed else prod.expand(tuple(sizes[c] for c in out))
        return ret if dtype is None else ret.cast(dtype)

    def _diagonal(self: Tensor, p: int, q: int) -> Tensor:
        """The diagonal of axes p < q (of equal size n), kept at axis p: element i reads [.., i, .., i, ..]."""
        n = self.shape[p]
        if self.shape[q] != n:
            raise ShapeError(f"a diagonal needs equal sizes, axes {p} and {q} of {self.shape} differ")
        rest = [a for a in range(self.ndim) if a not in (p, q)]
        x = self.permute(*rest, p, q).reshape(*[self.shape[a] for a in rest], n * n)
        # row-major (i, j) sits at i*n + j: pad to n*(n+1), view as (n, n+1) and keep column 0
        x = x.pad(((0, 0),) * len(rest) + ((0, n),)).reshape(*[self.shape[a] for a in rest], n, n + 1)[..., 0]
        return x.permute(*range(p), len(rest), *range(p, len(rest)))

    # ---- pooling and convolution ----
    def _pool(self: Tensor, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
        """Sliding windows over the last len(kernel) axes: (..., *out_spatial, *kernel). The same view steps as
        `permute`, `repeat`, `shrink` and `reshape` would record, built on the value alone and made one view tensor
        at the end (a tensor per step was half the graph-building time of a small CNN's forward pass)."""
        nk = len(kernel)
        if self.ndim < nk:
            raise ShapeError(f"can't pool {self.shape} with {kernel}")
        s_, d_ = make_tuple(stride, nk), make_tuple(dilation, nk)
        lead = self.ndim - nk
        y = _Steps(self)
        for j, (k, s, d) in enumerate(zip(kernel, s_, d_)):
            # axis lead+j holds the spatial dim; earlier spatial dims are already (out, k) pairs at the end
            axis = lead + j
            i = y.shape[axis]
            o = (i - d * (k - 1) - 1) // s + 1
            symbolic = isinstance(i, UOp)
            if symbolic and int(i.vmin) < d * (k - 1) + 1:  # (below that size there is no window at all)
                raise ShapeError(f"a window of kernel {kernel} with dilation {d_} does not fit the symbolic axis of "
                                 f"{shape_str(self.shape)} at its smallest size {int(i.vmin)}: give the Variable a larger minimum")
            if not symbolic and o <= 0:
                raise ShapeError(f"kernel {kernel} with dilation {d_} does not fit the spatial shape {self.shape[lead:]}")
            ndim = len(y.shape)
            y.add(Ops.PERMUTE, tuple([a for a in range(ndim) if a != axis] + [axis]))
            rest = ndim - 1
            if k <= s and d == 1 and not symbolic:  # (a symbolic size takes the repeat below, which holds for every size)
                # windows do not overlap: cut the axis into (o, s) rows and keep the first k of each (the pad is a new
                # value, as `pad` makes it, not a view)
                y = y.padded(((0, 0),) * rest + ((0, max(0, o * s - i)),))
                y.add(Ops.SHRINK, tuple((0, n) for n in y.shape[:-1]) + ((0, o * s),))
                y.add(Ops.RESHAPE, (*y.shape[:-1], o, s))
                y.add(Ops.SHRINK, tuple((0, n) for n in y.shape[:-1]) + ((0, k),))
                y.add(Ops.PERMUTE, tuple(list(range(axis)) + [rest] + list(range(axis, rest)) + [rest + 1]))
                continue
            if s > 1 + d * k:
                raise ShapeError(f"stride {s_} is larger than dilation*kernel+1 for kernel {kernel}: not supported")
            # overlapping windows: repeat the axis and view it as (k, i+d) rows, so row r starts at element r*d (a symbolic
            # size repeats as often as its smallest value needs: k*(i+d)/i only falls as i grows)
            reps = math.ceil(k * (int(i.vmin) + d) / int(i.vmin)) if symbolic else math.ceil(k * (i + d) / i)
            base = y.shape
            y.add(Ops.RESHAPE, tuple(v for n in base for v in (1, n)))
            y.add(Ops.RESHAPE, y.shape)  # `repeat` expands through `_broadcast_to`, which reshapes first
            y.add(Ops.EXPAND, tuple(v for r, n in zip((1,) * rest + (reps,), base) for v in (r, n)))
            y.add(Ops.RESHAPE, (*base[:-1], reps * base[-1]))
            y.add(Ops.SHRINK, tuple((0, n) for n in y.shape[:-1]) + ((0, k * (i + d)),))
            y.add(Ops.RESHAPE, (*y.shape[:-1], k, i + d))
            y.add(Ops.SHRINK, tuple((0, n) for n in y.shape[:-1]) + ((0, o * s),))
            y.add(Ops.RESHAPE, (*y.shape[:-1], o, s))
            y.add(Ops.SHRINK, tuple((0, n) for n in y.shape[:-1]) + ((0, 1),))
            y.add(Ops.RESHAPE, (*y.shape[:-2], o))
            # y is (rest..., k, o): o goes back to `axis`, k to the end
            y.add(Ops.PERMUTE, tuple(list(range(axis)) + [rest + 1] + list(range(axis, rest)) + [rest]))
        # each step put its window axis last, in spatial order: the result is (lead..., o1, o2, ..., k1, k2, ...)
        return y.tensor()

    @templated
    def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
               dilation: int | tuple[int, ...] = 1, padding: int | tuple[int, ...] = 0, dtype: Any = None) -> Tensor:
        """N-d convolution (cross-correlation) of (bs, cin, *spatial) with weight (cout, cin/groups, *kernel)."""
        x: Tensor = self
        (bs, cin_), (cout, cin), hw = x.shape[:2], weight.shape[:2], weight.shape[2:]
        if groups * cin != cin_ or len(x.shape) != len(weight.shape):
            raise TensorRuntimeError(f"Input Tensor shape {x.shape} does not match the shape of the weights {weight.shape}. "
                                     f"({groups * cin} vs. {cin_})")
        pads = _conv_padding(padding, len(hw))
        x = x.pad(((0, 0), (0, 0), *pads))
        if any(p != (0, 0) for p in pads) and _simd_device(x.device):
            # on a CPU the padded input gets a buffer of its own: read through the windows with the padding fused, every
            # load of the convolution is gated and its lane loop cannot be vector loads (8x32x32x32 by 64x3x3, padding
            # 1: 3.8 -> 1.4 ms plus a 0.13 ms copy). GPU kernels take the padding as gated loads in their tiles.
            x = x.contiguous()
        x = x._pool(hw, stride, dilation)
        oyx = x.shape[2:-len(hw)]
        rcout = cout // groups
        nsp = len(oyx)
        x = x.reshape(bs, groups, cin, 1, *oyx, *hw).expand(bs, groups, cin, rcout, *oyx, *hw)
        x = x.permute(0, 1, 3, *[4 + i for i in range(nsp)], 2, *[4 + nsp + i for i in range(len(hw))])
        w = weight.reshape(1, groups, rcout, *[1] * nsp, cin, *hw)
        ret = x.mul(w).sum([-1 - i for i in range(1 + len(hw))], keepdim=True, dtype=dtype).reshape(bs, cout, *oyx)
        ret = ret.cast(least_upper_dtype(self.dtype, weight.dtype) if dtype is None else to_dtype(dtype))
        return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(hw)))

    @templated
    def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
                         dilation: int | tuple[int, ...] = 1, padding: int | tuple[int, ...] = 0,
                         output_padding: int | tuple[int, ...] = 0) -> Tensor:
        """Transposed convolution, weight (cin, cout/groups, *kernel): a conv2d over the stride-dilated input."""
        x: Tensor = self
        hw = weight.shape[2:]
        nsp = len(hw)
        w = weight.unflatten(0, (groups, -1)).transpose(1, 2).flip(*range(3, weight.ndim + 1))
        s_, d_, p_, op_ = (make_tuple(v, nsp) for v in (stride, dilation, padding, output_padding))
        if any(s > 1 for s in s_):
            # insert s-1 zeros between input elements: (n) -> (n, 1) -> pad (n, s) -> (n*s) -> cut the trailing zeros
            x = x.reshape(*x.shape[:2], *[v for n in x.shape[2:] for v in (n, 1)])
            x = x.pad(((0, 0), (0, 0), *[p for s in s_ for p in ((0, 0), (0, s - 1))]))
            x = x.reshape(*x.shape[:2], *[n * s for n, s in zip(x.shape[2::2], s_)])
            x = x.shrink((None, None, *[(0, n - (s - 1)) for n, s in zip(x.shape[2:], s_)]))
        pads = tuple(((k - 1) * d - p, (k - 1) * d - p + o) for k, d, p, o in zip(hw, d_, p_, op_))
        x = x.pad(((0, 0), (0, 0), *[(max(b, 0), max(e, 0)) for b, e in pads]))
        x = x.shrink((None, None, *[(-min(b, 0), n + min(e, 0)) for (b, e), n in zip(pads, x.shape[2:])]))
        return x.conv2d(w.flatten(end_dim=1), bias=bias, groups=groups, dilation=d_)

    def _pool_args(self: Tensor, kernel_size: int | tuple[int, ...], stride: Any, padding: Any) -> tuple[tuple[int, ...], Any, Any]:
        k = make_tuple(kernel_size, 2)
        return k, k if stride is None else stride, _conv_padding(padding, len(k))

    def _pool_pads(self: Tensor, k: tuple[int, ...], s: Any, dilation: Any, pads: tuple, ceil_mode: bool) -> tuple:
        """Each spatial axis's (begin, end) padding, the end grown for ceil_mode so that a last partial window exists
        (unless it would start inside the end padding, as PyTorch)."""
        if not ceil_mode:
            return pads
        out = []
        for n, kk, ss, dd, (b, e) in zip(self.shape[-len(k):], k, make_tuple(s, len(k)), make_tuple(dilation, len(k)), pads):
            span = n + b + e - dd * (kk - 1) - 1
            o = -(-span // ss) + 1
            if (o - 1) * ss >= n + b:
                o -= 1
            out.append((b, e + max(0, (o - 1) * ss + dd * (kk - 1) + 1 - (n + b + e))))
        return tuple(out)

    @templated
    def avg_pool2d(self: Tensor, kernel_size: int | tuple[int, ...] = (2, 2), stride: Any = None, dilation: int | tuple[int, ...] = 1,
                   padding: int | tuple[int, ...] = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        """Average over windows of the last two axes; the divisor counts the padding when `count_include_pad`, never
        the part of a ceil_mode window past the padding."""
        k, s, pads = self._pool_args(kernel_size, stride, padding)
        full = self._pool_pads(k, s, dilation, pads, ceil_mode)
        axes = tuple(range(-len(k), 0))
        lead = ((0, 0),) * (self.ndim - len(k))
        windows = self.pad((*lead, *full))._pool(k, s, dilation)
        if count_include_pad and not ceil_mode:
            return windows.mean(axes)
        counted = self.ones_like()
        if count_include_pad:  # the padding counts, the ceil_mode extension does not
            counted = counted.pad((*lead, *pads), value=1.0)
            full = tuple((0, fe - e) for (_, fe), (_, e) in zip(full, pads))
        counts = counted.pad((*lead, *full))._pool(k, s, dilation).sum(axes)
        return windows.sum(axes).div(counts)

    @templated
    def max_pool2d(self: Tensor, kernel_size: int | tuple[int, ...] = (2, 2), stride: Any = None, dilation: int | tuple[int, ...] = 1,
                   padding: int | tuple[int, ...] = 0, ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Max over windows of the last len(kernel_size) axes (padding counts as -inf). With `return_indices`, also the
        position of each max within the flattened unpadded spatial axes (int32; the first one on ties)."""
        k, s, pads = self._pool_args(kernel_size, stride, padding)
        pads = self._pool_pads(k, s, dilation, pads, ceil_mode)
        lead = ((0, 0),) * (self.ndim - len(k))
        axes = tuple(range(-len(k), 0))
        x = self
        if any(b or e for b, e in pads):
            inside = self.ones_like(dtype=dtypes.bool).pad((*lead, *pads))
            x = inside.where(self.pad((*lead, *pads)), self._lowest())
        windows = x._pool(k, s, dilation)
        pooled = windows.max(axes)
        if not return_indices:
            return pooled
        # each spatial position counts down from its size so the max over a window's hits is the first position
        spatial = self.shape[-len(k):]
        size = math.prod(spatial)
        countdown = type(self).arange(size, 0, -1, dtype=dtypes.int32, device=self.device).reshape(spatial)
        positions = countdown.pad(pads)._pool(k, s, dilation)
        hits = windows == pooled.reshape(*pooled.shape, *(1,) * len(k))
        return pooled, hits.where(positions, 0).max(axes).mul(-1).add(size)

    def max_unpool2d(self: Tensor, indices: Tensor, kernel_size: int | tuple[int, ...] = (2, 2), stride: Any = None,
                     dilation: int | tuple[int, ...] = 1, padding: int | tuple[int, ...] = 0, output_size: Any = None) -> Tensor:
        """The partial inverse of `max_pool2d(..., return_indices=True)`: each pooled value goes back to the flat
        spatial position in `indices`, zeros elsewhere (any number of spatial axes; `output_size` overrides the size
        the pooling arguments give)."""
        if self.ndim < 3 or indices.shape != self.shape:
            raise ShapeError(f"max_unpool2d needs (bs, c, *spatial) values and indices of the same shape, got {self.shape} and {indices.shape}")
        bs, c, *spatial = self.shape
        if output_size is None:
            k, s, pads = self._pool_args(make_tuple(kernel_size, len(spatial)), stride, padding)
            out = tuple((i - 1) * st - (b + e) + dd * (kk - 1) + 1
                        for i, kk, st, dd, (b, e) in zip(spatial, k, make_tuple(s, len(k)), make_tuple(dilation, len(k)), pads))
        else:
            out = tuple(output_size)[-len(spatial):]
        size = math.prod(out)
        hit = indices.reshape(bs, c, -1, 1).eq(type(self).arange(size, device=self.device))
        ret = hit.where(self.reshape(bs, c, -1, 1), self._const(0, self.dtype, ())).sum(2).cast(self.dtype)
        return ret.reshape(bs, c, *out)

    def interpolate(self: Tensor, size: tuple[int, ...], mode: str = "linear", align_corners: bool = False) -> Tensor:
        """Resample the last len(size) axes to `size`: "linear" (bi/trilinear for 2 / 3 axes; half-pixel centers
        unless `align_corners`), "nearest" (source floor(i * in / out)) or "nearest-exact" (floor((i + 0.5) * in / out)).
        Source positions are computed exactly in integers on the host; the result keeps self's dtype (rounded to the
        nearest value for ints)."""
        if not isinstance(size, (tuple, list)) or not 0 < len(size) <= self.ndim or not all(isinstance(n, int) and n > 0 for n in size):
            raise ShapeError(f"interpolate size {size!r} must be 1..{self.ndim} positive ints for shape {self.shape}")
        if mode not in ("linear", "nearest", "nearest-exact"):
            raise ArgumentError(f"interpolate mode {mode!r} must be 'linear', 'nearest' or 'nearest-exact'")
        if align_corners and mode != "linear":
            raise ArgumentError("interpolate align_corners can only be set with mode 'linear'")
        x: Tensor = self
        wdtype = least_upper_dtype(self.dtype, dtypes.float32)
        for axis, out in zip(range(self.ndim - len(size), self.ndim), size):
            # each output reads its one or two sources: a read of each by index and a weighted sum, instead of a sum over
            # every source with the weights as a mask (in * out work per axis: 2x upsampling of 64x64 images was 10x PyTorch)
            src = x.transpose(axis, -1)
            total: Tensor | None = None
            for cols, w in _resample_taps(self.shape[axis], out, mode, align_corners):
                weight = type(self)(w, device=self.device, dtype=wdtype)
                picked = src[..., type(self)(cols, device=self.device)]
                # (a zero weight's source is not multiplied in: inf * 0 would make a NaN of an output it does not touch)
                term = weight.ne(0).where(picked.mul(weight), 0)
                total = term if total is None else total.add(term)
            assert total is not None
            x = total.transpose(axis, -1)
        # an int result is the nearest int (a cast alone truncated: an image's pixels came out up to 1 too dark)
        return (x if dtypes.is_float(self.dtype) else x.round()).cast(self.dtype)

    # ---- normalization and friends ----
    @templated
    def layernorm(self: Tensor, axis: int | tuple[int, ...] = -1, eps: float = 1e-5) -> Tensor:
        """(self - mean) / sqrt(var + eps) over `axis` (no affine part)."""
        y = self.sub(self.mean(axis, keepdim=True))
        return y.mul(y.mul(y).mean(axis, keepdim=True).add(eps).rsqrt())

    @templated
    def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """(self - mean) * invstd * weight + bias, with the statistics laid along `axis`."""
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(self._resolve_dim(a) for a in axes)
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        x = self.sub(mean.reshape(shape))
        if weight is not None:
            x = x.mul(weight.reshape(shape))
        ret = x.mul(invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return ret.add(bias.reshape(shape)) if bias is not None else ret

    def dropout(self: Tensor, p: float = 0.5) -> Tensor:
        """Zero elements with probability p and scale the rest by 1/(1-p), only when Tensor.training is set."""
        if not type(self).training or p == 0:
            return self
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        keep = type(self).rand(*self.shape, device=self.device) >= p
        return keep.where(self.mul(1 / (1 - p)) if p < 1 else self.mul(0), 0).cast(self.dtype)

    def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
        """Int tensor -> (..., num_classes) of 0/1 (num_classes from the max value when -1)."""
        if not dtypes.is_int(self.dtype):
            raise TensorRuntimeError(f"expect integer dtype, getting self.dtype={self.dtype}")
        if num_classes == -1:
            num_classes = int(self.max().item()) + 1
        return self._one_hot(num_classes)

    @templated
    def _one_hot(self: Tensor, num_classes: int) -> Tensor:
        hot = self.unsqueeze(-1) == type(self).arange(num_classes, device=self.device)
        return hot.where(1, 0).cast(self.dtype)

    @templated
    def _tri(self: Tensor, diagonal: int, upper: bool) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"triu/tril needs at least 2 dims, got shape {self.shape}")
        r, c = self.shape[-2:]
        arange = type(self).arange
        rows, cols = arange(r, device=self.device).reshape(r, 1), arange(c, device=self.device).reshape(1, c)
        keep = (cols - rows >= diagonal) if upper else (cols - rows <= diagonal)
        return keep.where(self, self._const(0, self.dtype, ()))

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """Keep the elements on and above the `diagonal`-th diagonal."""
        return self._tri(diagonal, True)

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """Keep the elements on and below the `diagonal`-th diagonal."""
        return self._tri(diagonal, False)

    @templated
    def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                     is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
        """softmax(self @ key^T / sqrt(d) + mask) @ value (a bool mask keeps where True). With `enable_gqa`, key and
        value have fewer heads (axis -3) than the query, and each of theirs serves a group of query heads."""
        if enable_gqa:
            key = key.repeat_interleave(self.shape[-3] // key.shape[-3], dim=-3)
            value = value.repeat_interleave(self.shape[-3] // value.shape[-3], dim=-3)
        qk = self.matmul(key.transpose(-2, -1)).div(math.sqrt(self.shape[-1]))
        if is_causal:
            keep = type(self).ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril()
            attn_mask = keep if attn_mask is None else keep.bitwise_and(attn_mask)
        if attn_mask is not None:
            qk = attn_mask.where(qk, -math.inf) if attn_mask.dtype is dtypes.bool else qk.add(attn_mask)
        return qk.softmax(-1).dropout(dropout_p).matmul(value)


def _simd_device(device: Any) -> bool:
    """Whether `device` runs kernels as CPU loops over SIMD lanes (its renderer has no GPU launch dims)."""
    if not isinstance(device, str):
        return False
    from hcq_runtime import Device

    renderer = getattr(Device[device], "renderer", None)
    return renderer is not None and not renderer.global_dims


class _Steps:
    """View steps on a tensor's value, applied to the UOp alone, and the view tensor they make (`tensor()`)."""

    def __init__(self, t: Tensor):
        self.t, self.u, self.steps = t, t.uop, []

    @property
    def shape(self) -> tuple:
        return self.u.shape

    def add(self, op: Ops, arg: Any) -> None:
        self.steps.append((op, arg))
        self.u = apply_view(self.u, (op, arg))

    def tensor(self) -> Tensor:
        return self.t._view_steps(self.u, tuple(self.steps)) if self.steps else self.t

    def padded(self, pairs: tuple) -> _Steps:
        """Steps on the zero-padded value (a new tensor, as `pad` makes it)."""
        t = self.tensor()
        return _Steps(t._wrap(t.uop.pad(pairs)))
