"""uopir vs tinygrad 0.14: symbolic simplification of index math, and raw graph_rewrite throughput.

Run: uv run --frozen --with tinygrad==0.14.0 python benchmarks/uopir_rewrite.py
Without tinygrad installed the peer columns say "missing".

Both libraries build the same expressions through their own public API (operators on UOps, variables, ranges), in
the same process. Every repetition uses different shape constants, so neither library can answer from a cache of an
earlier repetition: each timing is of fresh work.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from importlib import metadata
from typing import Any

REPEATS = 7


# ---------------- the corpus: flattened index math of views ----------------


def strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


class View:
    """Source indices of a chain of movement ops, as expressions of the output indices (the usual view algebra)."""

    def __init__(self, idx: list[Any], valid: Any):
        self.idx, self.valid = idx, valid

    def flat(self, shape: tuple[int, ...]) -> Any:
        terms = [i * s for i, s in zip(self.idx, strides(shape))]
        ret = terms[0]
        for t in terms[1:]:
            ret = ret + t
        return ret


def unreshape(v: View, new_shape: tuple[int, ...], old_shape: tuple[int, ...]) -> View:
    flat = v.flat(new_shape)
    return View([(flat // s) % d for s, d in zip(strides(old_shape), old_shape)], v.valid)


def unpermute(v: View, order: tuple[int, ...]) -> View:
    idx = [None] * len(order)
    for i, p in enumerate(order):
        idx[p] = v.idx[i]
    return View(idx, v.valid)


def unpad(v: View, pads: tuple[tuple[int, int], ...], old_shape: tuple[int, ...]) -> View:
    valid = v.valid
    idx = []
    for i, (b, e), d in zip(v.idx, pads, old_shape):
        conds = ([i >= b] if b else []) + ([i < b + d] if e else [])
        for cond in conds:
            valid = cond if valid is None else valid & cond
        idx.append(i - b)
    return View(idx, valid)


def unshrink(v: View, begins: tuple[int, ...]) -> View:
    return View([i + b for i, b in zip(v.idx, begins)], v.valid)


def corpus(lib: Any, k: int) -> list[Any]:
    """The expressions to simplify; `k` shifts every shape so each repetition is new work."""
    rng, var = lib["range"], lib["variable"]
    out: list[Any] = []
    # permute + reshape chains (transpose of a split axis, the classic div/mod folding case)
    for a, b, c in ((4 + k, 8, 3), (2, 6 + k, 5), (3 + k, 4, 16)):
        r = [rng(d, i) for i, d in enumerate((b, a, c))]
        v = unpermute(View(r, None), (1, 0, 2))
        v = unreshape(v, (a, b, c), (a * b * c,))
        v = unreshape(View([v.idx[0] * 1], None), (a * b * c,), (a * b, c))
        out.append(v.flat((a * b, c)))
        # reshape (a*b, c) -> (a, b, c) -> flat
        r2 = [rng(d, 10 + i) for i, d in enumerate((a, b, c))]
        w = unreshape(View(r2, None), (a, b, c), (a * b, c))
        out.append(w.flat((a * b, c)))
    # pad + shrink: a padded image read through a shrink window
    for h, w_ in ((8 + k, 8), (16, 5 + k)):
        r = [rng(d, 20 + i) for i, d in enumerate((h, w_))]
        v = unshrink(View(r, None), (1, 1))
        v = unpad(v, ((1, 1), (1, 1)), (h, w_))
        out.append(v.flat((h, w_)))
        out.append(v.valid)
    # conv2d window: input (N, C, H, W), 3x3 kernel, stride s, padding 1
    for n_, c_, hh, ww, s in ((2, 3, 8 + k, 8 + k, 1), (1, 4, 16, 12 + k, 2)):
        oh, ow = (hh + 2 - 3) // s + 1, (ww + 2 - 3) // s + 1
        n, c, oy, ox, ky, kx = (rng(d, 30 + i) for i, d in enumerate((n_, c_, oh, ow, 3, 3)))
        iy, ix = oy * s + ky - 1, ox * s + kx - 1
        valid = (iy >= 0) & (iy < hh) & (ix >= 0) & (ix < ww)
        out.append(n * (c_ * hh * ww) + c * (hh * ww) + iy * ww + ix)
        out.append(valid)
        # the same window as tinygrad's pool does it: flatten (oy, ky) then split again
        flat_y = (oy * 3 + ky)
        out.append(((flat_y // 3) * s + flat_y % 3 - 1) * ww + ix)
    # a symbolic batch: the same flattening with a variable dim
    bs = var("bs", 1, 32 + k)
    r0, r1 = rng(bs, 40), rng(12, 41)
    out.append(((r0 * 12 + r1) // 4) * 4 + (r0 * 12 + r1) % 4)
    out.append(((r0 * 12 + r1) % 48) // 12 + r1 // 12)
    return out


# ---------------- libraries ----------------


def uopir_lib() -> dict[str, Any]:
    from uopir import Ops, PatternMatcher, UOp, UPat, graph_rewrite

    return {"name": "uopir", "range": lambda end, i: UOp.range(end, i), "variable": UOp.variable, "const": UOp.const,
            "simplify": lambda u: u.simplify(), "graph_rewrite": graph_rewrite, "PatternMatcher": PatternMatcher, "UPat": UPat, "Ops": Ops,
            "UOp": UOp}


def tinygrad_lib() -> dict[str, Any] | None:
    try:
        from tinygrad.uop.ops import Ops, PatternMatcher, UOp, UPat, graph_rewrite
    except ImportError:
        return None
    return {"name": f"tinygrad {metadata.version('tinygrad')}", "range": lambda end, i: UOp.range(end, i), "variable": UOp.variable,
            "const": UOp.const, "simplify": lambda u: u.simplify(), "graph_rewrite": graph_rewrite, "PatternMatcher": PatternMatcher,
            "UPat": UPat, "Ops": Ops, "UOp": UOp}


def count_nodes(exprs: list[Any]) -> int:
    seen: set[int] = set()
    for e in exprs:
        seen.update(id(n) for n in e.toposort())
    return len(seen)


def time_simplify(lib: dict[str, Any]) -> tuple[float, int, int, int]:
    """Median seconds to build and simplify the corpus; expressions, nodes before and nodes after simplifying."""
    times = []
    n_expr = n_nodes = n_after = 0
    for k in range(REPEATS):
        gc.collect()
        t0 = time.perf_counter()
        exprs = corpus(lib, k)
        results = [lib["simplify"](e) for e in exprs]
        times.append(time.perf_counter() - t0)
        n_expr, n_nodes = len(exprs), count_nodes(exprs)
        # quality: the size of each simplified expression on its own (shared nodes counted per expression)
        n_after = sum(len(r.toposort()) for r in results)
    return statistics.median(times), n_expr, n_nodes, n_after


def chain_graph(lib: dict[str, Any], n: int, k: int) -> Any:
    """A graph of about 2n distinct nodes: x_{i+1} = (x_i + c_i) * 1; half the MULs are rewritten away."""
    x = lib["variable"](f"v{k}", 0, 100)
    node = x
    one = lib["const"](1)
    for i in range(n):
        node = node + lib["const"](i + k * n)
        if i % 2 == 0:
            node = node * one
    return node


def time_rewrite(lib: dict[str, Any], n: int = 5000) -> float:
    """Median nodes/s of graph_rewrite with a one-rule matcher (x*1 -> x) over a 2n-node chain."""
    Ops, UPat, PM = lib["Ops"], lib["UPat"], lib["PatternMatcher"]
    pm = PM([(UPat(Ops.MUL, src=(UPat.var("x"), UPat(Ops.CONST, arg=1))), lambda x: x)])
    rates = []
    for k in range(REPEATS):
        g = chain_graph(lib, n, k)
        nodes = count_nodes([g])
        gc.collect()
        t0 = time.perf_counter()
        lib["graph_rewrite"](g, pm)
        rates.append(nodes / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> int:
    sys.setrecursionlimit(100_000)  # tinygrad's graph_rewrite may recurse on long chains
    ours = uopir_lib()
    peer = tinygrad_lib()
    ours_s, n_expr, n_nodes, ours_after = time_simplify(ours)
    peer_s, _, _, peer_after = time_simplify(peer) if peer else (None, 0, 0, None)
    ours_r = time_rewrite(ours)
    peer_r = time_rewrite(peer) if peer else None
    peer_name = peer["name"] if peer else "tinygrad==0.14.0 (missing)"

    print(f"corpus: {n_expr} index expressions, {n_nodes} nodes; median of {REPEATS} runs, each on fresh shapes")
    print(f"{'figure':40s} {'uopir':>14s} {peer_name:>18s} {'ratio':>8s}")
    sim_ratio = (peer_s / ours_s) if peer_s else None
    rw_ratio = (ours_r / peer_r) if peer_r else None
    print(f"{'simplify corpus (ms, lower is better)':40s} {ours_s * 1e3:14.2f} {peer_s * 1e3 if peer_s else float('nan'):18.2f} "
          f"{sim_ratio if sim_ratio else float('nan'):8.2f}x")
    print(f"{'graph_rewrite (nodes/s, higher better)':40s} {ours_r:14.0f} {peer_r if peer_r else float('nan'):18.0f} "
          f"{rw_ratio if rw_ratio else float('nan'):8.2f}x")
    print(f"{'simplified size (nodes, lower is better)':40s} {ours_after:14d} {peer_after if peer_after else float('nan'):18} "
          f"{(peer_after / ours_after) if peer_after else float('nan'):8.2f}x")
    print("ratio: how many times faster (or smaller) uopir's result is than the peer's")
    figures: list[tuple[str, float, str, float | None, float | None]] = [
        ("simplify_corpus_time", ours_s * 1e3, "ms", peer_s * 1e3 if peer_s else None, sim_ratio),
        ("graph_rewrite_throughput", ours_r, "nodes/s", peer_r, rw_ratio),
        ("simplified_size", float(ours_after), "nodes", None if peer_after is None else float(peer_after),
         None if not peer_after else peer_after / ours_after),
    ]
    for metric, value, unit, peer_value, ratio in figures:
        print(json.dumps({"bench": "uopir_rewrite", "metric": metric, "value": round(value, 3), "unit": unit,
                          "peer": peer_name, "peer_value": None if peer_value is None else round(peer_value, 3),
                          "ratio": None if ratio is None else round(ratio, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
