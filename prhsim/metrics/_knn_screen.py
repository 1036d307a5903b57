"""Exact k-nearest neighbours by bfloat16 screening under a proven error bound (docs/theory.md §10).

:func:`screened_knn` returns the k-NN lists that the exact tiled search of
:mod:`prhsim.metrics._knn_search` defines: the k rows j ≠ i of largest inner product
v_ij, ranked by the key (−v_ij, j), v_ij computed in the compute dtype
(float32 or float64). Two steps:

1. Screen. Every inner product is formed once, in square tiles, at one of two
   widths (:func:`width`): "bf16", from the rows rounded to bfloat16 with float32
   accumulation (torch: AMX / AVX512-BF16 on CPUs, tensor cores on GPUs), or
   "float32", the float32 products (numpy's on CPUs without bf16 matrix units)
   truncated to bf16 by keeping their high 16 bits. Each row pools the entries
   at or above a threshold θ_i set from its running k-th largest screened value.
2. Re-rank. The pooled pairs' v_ij are formed in the compute dtype and the top
   k picked by the key. For the metrics, which need the sets only, pooled
   entries whose membership the bound already decides are not recomputed. A
   row whose pool outgrows ``4k + POOL_SLACK`` (masses of near-ties; copies
   of a row are folded into one before the screen) is returned as retired: the caller runs the exact tiled
   search for it (:func:`prhsim.metrics._knn_search._exact_rows`).

The bound. y_i are the rows the answer is defined on (the L2-normalised rows
for the metrics), w_i = 2^-e y_i with e chosen so |w| ≤ 2 (a power of two: no
rounding, no change of order; e = 0 for unit rows), w̃_i their bf16 copies,
ε_i = w̃_i − w_i (formed exactly), n_i ≥ ‖w_i‖, ρ_i ≥ ‖ε_i‖, M = max_j n_j,
R = max_j ρ_j, u_b = 2^-8 (bf16's unit roundoff). Assumed, as the hardware documents it: products of two
bf16 numbers are exact in float32 (8 + 8 ≤ 24 significand bits), the sum is
accumulated in float32 in any order, the result rounded to nearest bf16.

(a) inputs: Σ w̃_ik w̃_jk − Σ w_ik w_jk = ⟨ε_i, w_j⟩ + ⟨w_i, ε_j⟩ + ⟨ε_i, ε_j⟩,
    at most ρ_i n_j + n_i ρ_j + ρ_i ρ_j (Cauchy–Schwarz). A priori
    ρ_i ≤ (2^-8 + 2^-23) n_i (rounding to float32, then bf16); measured,
    ρ_i ≈ 0.43·2^-8·n_i (unit rows, d = 768), which halves the screening margin.
(b) accumulation of the d exact products in float32, any order:
    |s̃ − Σ w̃_ik w̃_jk| ≤ γ_d Σ|w̃_ik w̃_jk| ≤ γ_d (n_i + ρ_i)(n_j + ρ_j),
    γ_d = d·u_acc/(1 − d·u_acc) with u_acc = 2^-21, eight times fp32's 2^-24
    (room for accumulators that truncate or align to the largest exponent);
(c) the bf16 result ŝ: |ŝ − s̃| ≤ u_b|ŝ|;
(d) the re-rank: |2^-2e v_ij − ⟨w_i, w_j⟩| ≤ γ_d(u_c) n_i n_j (u_c: the compute
    dtype's unit roundoff);
(e) subnormal numbers and flush-to-zero add at most 2^-126 per entry, product
    and addition: τ = d·2^-118·max(1, 2^-2e) covers them.

So |ŝ_ij − 2^-2e v_ij| ≤ u_b|ŝ_ij| + E_i for every j, with
E_i = ρ_i M + n_i R + ρ_i R + γ_d (n_i + ρ_i)(M + R) + γ_d(u_c) n_i M + τ
(≈ 0.0041 for unit rows at d = 768; 0.0082 with the a-priori ρ).

The float32 width: w̃_i are the rows rounded to float32 (w itself for float32
rows: ρ_i = 0), step (b) covers the float32 products' own rounding (γ_d with
u_acc >= fp32's 2^-24), and (c) becomes |ŝ − s̃| <= 2^-7|ŝ| (U_TRUNCATE: the
dropped low half is below one bf16 unit in the last place of ŝ, toward zero);
f, g and the selection below take u = 2^-7 in place of u_b.

Selection. Let T_i be the k-th largest ŝ_ij over j ≠ i, or any lower bound of it
(the running value is one). f(s) = s − u_b|s| and g(s) = s + u_b|s| increase.
The k rows with ŝ_ij ≥ T_i have 2^-2e v_ij ≥ f(T_i) − E_i, so the k-th largest
v_ij is at least that; a row j of the answer has v_ij at least the k-th largest,
and 2^-2e v_ij ≤ g(ŝ_ij) + E_i. So every row of the answer has
ŝ_ij ≥ θ_i = g⁻¹(f(T_i) − 2E_i): the candidates {j : ŝ_ij ≥ θ_i} contain the
answer, and their top k under the key is the answer. Set-only: a candidate
with fewer than k others l whose interval [f(ŝ_il) − E_i, g(ŝ_il) + E_i]
reaches its own is in the answer; one with at least k others entirely above
it is out; only the rest are re-ranked. Margins are widened (2^-10 relative,
2^-40 absolute) for the float64 arithmetic on them, and θ is rounded down to
a bf16 value. bf16 values are compared as int16 keys (their bit patterns,
negative ones reflected), 2 bytes per entry.

The re-rank forms each pair's v_ij by one dot product of the gathered rows, the
same reduction for every pair, so equal rows tie exactly and the key's index
rule decides; v_ij can differ from the tiled path's value for the same pair in
the last bits (other kernels), as tiles of different sizes can among
themselves: the answers agree wherever that rounding does not decide an order.

Cost: half an N x N x d bf16 (or float32) product per search (tiles of about SCREEN_BLOCK
rows; on CPUs the next tile's product runs in a second thread while the
current one is scanned), one pass over each tile for the offers, and the
re-rank (gathered rows, about N·(k + band)·d multiply-adds, fewer for the
metrics). Memory: the y rows (a normalised copy for the metrics) and their
bf16 copy (float32: none for float32 rows), two B x B tiles, pools of O(N·k): O(N·(d + k) + B²), never N x N.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import numpy as np
from array_api_compat import array_namespace, device as array_device, is_jax_array, is_numpy_array, is_torch_array

from prhsim._budget import ensure_fits

#: Unit roundoff of bfloat16 (8 significand bits, round to nearest even).
U_BF16 = 2.0**-8
#: Relative error of a float32 truncated to bfloat16 (its high 16 bits: rounded toward zero).
U_TRUNCATE = 2.0**-7
#: The screen's width: "bf16" (bf16 rows and products), "float32" (float32 products, their keys the
#: high halves), or None: bf16 where the CPU has bf16 matrix units and on CUDA, float32 on other CPUs.
WIDTH: str | None = None
#: Unit roundoff assumed for the float32 accumulation of the bf16 products (8x fp32's).
U_ACC = 2.0**-21
#: Default tile side of the screen, about: the rows are cut into equal blocks of at most this many
#: (bf16 products run fastest near 2500-3500 rows; fewer tiles cost less selection overhead).
SCREEN_BLOCK = 3500
#: A pool may hold 4k + POOL_SLACK entries; a larger one sends its row to the exact search.
POOL_SLACK = 128
#: Automatic screening needs N at least this (below it the exact search is as fast, whatever d) ...
MIN_ROWS = 2048
#: ... and k at most N / MIN_RATIO (pools grow with k; at k = N/16 the screen still gains 1.4x).
MIN_RATIO = 32
#: Entries of one row block of a tile compared at once (its mask stays in cache).
SCAN_ELEMENTS = 2**19
#: Elements of one row block of the inputs converted at once (few, large torch calls).
PREPARE_ELEMENTS = 2**22
#: Elements of one gathered (rows x pool x d) block in the re-rank.
RERANK_ELEMENTS = 2**17
#: Form the next tile's product in a second thread while selecting from the current one (CPU).
PIPELINE = True
#: Run the two searches of mutual / cycle k-NN side by side on CPUs (numpy's passes release the GIL).
SIDE_BY_SIDE = True
#: Keep the pools in torch on CPUs too (numpy is faster there; tests run the GPU code on CPU with it).
WORK_IN_TORCH = False

# bf16 values as monotone int16 keys: the bit pattern, negative patterns with their magnitude bits flipped
KEY_NEG_INF = -32641  # -inf
KEY_POS_INF = 32640  # +inf
ACCEPT_ALL = -32640  # the key of the most negative finite bf16: every finite entry is at or above it
PAD = -32768  # a NaN key: below every value, marks empty pool slots
DEAD = 32767  # a NaN key: above every value, a threshold no entry reaches
RAW_NEG_INF = -128  # bit pattern of bf16 -inf read as an int16


# --------------------------------------------------------------------------------------
# when to screen
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _cpu_bf16_fast() -> bool:
    """Whether torch's CPU bf16 matrix product runs on bf16 hardware (AMX or AVX512-BF16)."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and bool(
            torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except (ImportError, AttributeError, RuntimeError):  # pragma: no cover - old or stripped torch
        return False


def available(x: Any) -> bool:
    """Whether the screen can run on x: a numpy array or a CPU / CUDA torch tensor, with torch installed."""
    if is_torch_array(x):
        return x.device.type in ("cpu", "cuda")
    if not is_numpy_array(x):
        return False
    try:
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return True


def width(x: Any) -> str:
    """The screen's width for data like x (:data:`WIDTH`; automatic: "bf16" on CUDA and on CPUs with bf16
    matrix units, "float32" on other CPUs)."""
    if WIDTH is not None:
        return WIDTH
    if is_torch_array(x) and x.device.type != "cpu":
        return "bf16"
    return "bf16" if _cpu_bf16_fast() else "float32"


def wanted(x: Any, k: int) -> bool:
    """The automatic choice: screen where it pays (N >= MIN_ROWS, k <= N/MIN_RATIO, CPUs; the width by :func:`width`).

    Not on CUDA: measured on an H200 (mutual 10-NN, N = 10^5, d = 768), the screen took 14.9 s
    in bf16 and 13.4 s in fp32 against 2.4 s for the exact tiles; ``screen=True`` still runs it.
    Imports torch only once the sizes qualify (``import prhsim.metrics`` stays light).
    """
    n, d = x.shape
    if n < MIN_ROWS or k * MIN_RATIO > n or d == 0 or is_jax_array(x):
        return False
    if is_torch_array(x) and x.device.type != "cpu":
        return False
    return available(x)


def side_by_side(x: Any) -> bool:
    """Whether two screened searches on data like x may run at once (CPU data; a GPU runs one at a time)."""
    return SIDE_BY_SIDE and not (is_torch_array(x) and x.device.type != "cpu")


# --------------------------------------------------------------------------------------
# the bound
# --------------------------------------------------------------------------------------
def _gamma(n: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u): relative error bound of an n-term sum or inner product."""
    return math.inf if n * u >= 0.5 else n * u / (1.0 - n * u)


def screen_error(xp: Any, d: int, compute_bits: int, n: Any, rho: Any, e: int = 0) -> Any:
    """E_i (module docstring): |ŝ_ij − 2^-2e v_ij| ≤ u_b|ŝ_ij| + E_i, given n_i ≥ ‖w_i‖, ρ_i ≥ ‖w̃_i − w_i‖."""
    m, r = float(xp.max(n)), float(xp.max(rho))
    g_acc = _gamma(d, U_ACC)
    g_c = _gamma(d, 2.0**-24 if compute_bits <= 32 else 2.0**-53)
    tau = d * 2.0**-118 * max(1.0, 2.0 ** (-2 * e))
    return rho * m + n * r + rho * r + g_acc * (n + rho) * (m + r) + g_c * n * m + tau


@functools.lru_cache(maxsize=None)
def _bf16_values() -> np.ndarray:
    """float64 value of every key KEY_NEG_INF..KEY_POS_INF (nondecreasing: the keys are monotone)."""
    keys = np.arange(KEY_NEG_INF, KEY_POS_INF + 1, dtype=np.int32)
    raw = np.where(keys >= 0, keys, keys ^ 0x7FFF) & 0xFFFF
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _keys(xp: Any, raw: Any) -> Any:
    """Monotone int16 keys of bf16 bit patterns (the arithmetic shift is −1 exactly for negative patterns)."""
    return raw ^ ((raw >> 15) & 0x7FFF)


class _Table:
    """The keys' float64 values (:func:`_bf16_values`, in the work library) and the rounding ``u`` of the screened
    values: |ŝ − s̃| <= u|ŝ| (U_BF16 for bf16 products, U_TRUNCATE for truncated float32 ones)."""

    def __init__(self, values: Any, u: float) -> None:
        self.values, self.u = values, u


def _value(xp: Any, key: Any, table: _Table) -> Any:
    """float64 values of keys in KEY_NEG_INF..KEY_POS_INF."""
    return xp.take(table.values, xp.reshape(xp.astype(key, xp.int64), (-1,)) - KEY_NEG_INF).reshape(key.shape)


def _lowest_key(xp: Any, value: Any, strict: bool) -> Any:
    """The lowest key whose value is >= value (> value if strict), clipped to ACCEPT_ALL..DEAD (bit operations).

    The smallest float32 c >= value (> value if strict), then the smallest bf16 >= c:
    every bf16 is a float32, so that is the smallest bf16 >= value (> value).
    """
    value = xp.clip(value, -3.39e38, 3.39e38)  # beyond ±(bf16's largest finite 3.3895e38): the same keys
    c = xp.astype(value, xp.float32)
    up = xp.full_like(c, math.inf)
    c = xp.where((c <= value) if strict else (c < value), xp.nextafter(c, up), c)
    bits = _view(c, "int32")
    hi = bits >> 16
    hi = xp.where((bits >= 0) & ((bits & 0xFFFF) != 0), hi + 1, hi)  # positive: round the magnitude up
    key = _keys(xp, xp.astype(hi, xp.int16))
    if not strict:  # -0.0 (key -1) equals +0.0
        key = xp.where(key == 0, xp.full_like(key, -1), key)
    return xp.clip(key, ACCEPT_ALL, DEAD)


def _view(x: Any, dtype: str) -> Any:
    """x's bits as another dtype of the same width."""
    if is_numpy_array(x):
        return x.view(getattr(np, dtype))
    import torch

    return x.view(getattr(torch, dtype))


def _slack(xp: Any, margin: Any, v: Any) -> Any:
    return margin * (1.0 + 2.0**-10) + 2.0**-40 * (1.0 + xp.abs(v))


def _below(xp: Any, key: Any, margin: Any, table: Any) -> Any:
    """Keys θ(key) = lowest key with value >= g⁻¹(f(v) − margin), v the key's value: whatever may reach v."""
    v, u = _value(xp, key, table), table.u
    a = v - u * xp.abs(v) - _slack(xp, margin, v)
    return _lowest_key(xp, xp.where(a >= 0, a / (1.0 + u), a / (1.0 - u)), False)


def _above(xp: Any, key: Any, margin: Any, table: Any) -> Any:
    """Keys: lowest key with value > f⁻¹(g(v) + margin): entries surely above v."""
    v, u = _value(xp, key, table), table.u
    a = v + u * xp.abs(v) + _slack(xp, margin, v)
    return _lowest_key(xp, xp.where(a >= 0, a / (1.0 - u), a / (1.0 + u)), True)


def _thresholds(xp: Any, kth: Any, margin: Any, table: Any) -> Any:
    """θ_i keys from k-th keys (ACCEPT_ALL where a row holds fewer than k entries: kth = PAD)."""
    known = kth != PAD
    theta = _below(xp, xp.where(known, kth, xp.zeros_like(kth)), margin, table)
    return xp.where(known, theta, xp.full_like(theta, ACCEPT_ALL))


# --------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------
class _Pool:
    """Candidates of one row block: keys and columns (rows x width, PAD-filled), counts, thresholds θ."""

    def __init__(self, xp: Any, rows: int, margin: Any, dev: Any) -> None:
        self.keys = xp.full((rows, 0), PAD, dtype=xp.int16, device=dev)
        self.cols = xp.zeros((rows, 0), dtype=xp.int32, device=dev)
        self.count = xp.zeros((rows,), dtype=xp.int64, device=dev)
        self.thr = xp.full((rows,), ACCEPT_ALL, dtype=xp.int16, device=dev)
        self.margin = margin


def _bincount(owner: Any, rows: int) -> Any:
    if is_numpy_array(owner):
        return np.bincount(owner, minlength=rows)
    import torch

    return torch.bincount(owner, minlength=rows)


def _kth_keys(xp: Any, keys: Any, k: int) -> Any:
    """Each row's k-th largest key (PAD where a row holds fewer than k)."""
    rows, width = keys.shape
    if width < k:
        return xp.full((rows,), PAD, dtype=xp.int16, device=array_device(keys))
    if is_numpy_array(keys):
        return np.partition(keys, width - k, axis=1)[:, width - k]
    import torch

    return torch.topk(keys.to(torch.int32), k, dim=1).values[:, k - 1].to(torch.int16)


def _place(xp: Any, rows: int, owner: Any, count: Any) -> tuple[Any, Any]:
    """(slot of each entry within its row after ``count`` used slots, entries per row); owners ascending."""
    add = xp.astype(_bincount(owner, rows), xp.int64)
    start = xp.cumulative_sum(add) - add
    n = owner.shape[0]
    pos = xp.take(count - start, owner) + xp.arange(n, dtype=xp.int64, device=array_device(owner))
    return pos, add


def _scatter(xp: Any, rows: int, width: int, owner: Any, pos: Any, key: Any, col: Any) -> tuple[Any, Any]:
    """New (rows, width) key and column arrays (PAD / 0 elsewhere) holding key[e], col[e] at (owner[e], pos[e])."""
    dev = array_device(key)
    keys = xp.full((rows * width,), PAD, dtype=xp.int16, device=dev)
    cols = xp.zeros((rows * width,), dtype=xp.int32, device=dev)
    at = owner * width + pos
    keys[at] = key
    cols[at] = xp.astype(col, xp.int32)
    return xp.reshape(keys, (rows, width)), xp.reshape(cols, (rows, width))


def _merge(xp: Any, pool: _Pool, offers: list[tuple[Any, Any, Any]], k: int, cap: int, table: Any) -> None:
    """Add offers (owner row, column, key) to a pool; raise θ to the new k-th; prune; retire overflowing rows."""
    rows = pool.count.shape[0]
    owner = xp.concat([o for o, _, _ in offers], axis=0)
    if owner.shape[0]:
        col = xp.concat([c for _, c, _ in offers], axis=0)
        key = xp.concat([v for _, _, v in offers], axis=0)
        if len(offers) > 1 or not bool(xp.all(owner[1:] >= owner[:-1])):
            narrow = xp.int16 if rows <= 32767 else xp.int32  # numpy sorts 16-bit keys by radix
            order = xp.argsort(xp.astype(owner, narrow), stable=True)
            owner, col, key = xp.take(owner, order), xp.take(col, order), xp.take(key, order)
        pos, add = _place(xp, rows, owner, pool.count)
        width = int(xp.max(pos)) + 1
        if width > pool.keys.shape[1]:
            dev = array_device(pool.keys)
            keys = xp.full((rows, width), PAD, dtype=xp.int16, device=dev)
            cols = xp.zeros((rows, width), dtype=xp.int32, device=dev)
            keys[:, :pool.keys.shape[1]] = pool.keys
            cols[:, :pool.cols.shape[1]] = pool.cols
            pool.keys, pool.cols = keys, cols
        width = pool.keys.shape[1]
        at = owner * width + pos
        xp.reshape(pool.keys, (-1,))[at] = key  # views of the contiguous pool arrays
        xp.reshape(pool.cols, (-1,))[at] = xp.astype(col, xp.int32)
        pool.count = pool.count + add
    pool.thr = xp.maximum(pool.thr, _thresholds(xp, _kth_keys(xp, pool.keys, k), pool.margin, table))
    keep = pool.keys >= pool.thr[:, None]
    count = xp.astype(xp.sum(keep, axis=1), xp.int64)
    over = count > cap
    if bool(xp.any(over)):
        pool.thr = xp.where(over, xp.full_like(pool.thr, DEAD), pool.thr)
        keep = keep & ~over[:, None]
        count = xp.where(over, xp.zeros_like(count), count)
    if int(xp.sum(count)) < int(xp.sum(pool.count)):  # compact the kept entries
        width = pool.keys.shape[1]
        flat = xp.nonzero(xp.reshape(keep, (-1,)))[0]
        owner = flat // width
        pos = _place(xp, rows, owner, xp.zeros_like(count))[0]
        size = int(xp.max(count)) if rows else 0
        pool.keys, pool.cols = _scatter(xp, rows, size, owner, pos, xp.take(xp.reshape(pool.keys, (-1,)), flat),
                                        xp.take(xp.reshape(pool.cols, (-1,)), flat))
    pool.count = count


Offers = list[tuple[Any, Any, Any]]


def _scan(xp: Any, keys: Any, threshold: Any) -> Any:
    """Flat indices of the tile's entries >= threshold (an int, or one per row), ascending.

    numpy: in row blocks whose mask stays in cache (about 1.5x faster than one pass).
    """
    rows, width = keys.shape
    per_row = not isinstance(threshold, int)
    if not is_numpy_array(keys):
        return xp.nonzero(xp.reshape(keys >= (threshold[:, None] if per_row else threshold), (-1,)))[0]
    step = max(1, SCAN_ELEMENTS // max(1, width))
    mask = np.empty((min(step, rows), width), dtype=bool)
    found = [np.zeros(0, dtype=np.int64)]
    for r0 in range(0, rows, step):
        part = keys[r0:r0 + step]
        m = mask[:part.shape[0]]
        np.greater_equal(part, threshold[r0:r0 + step, None] if per_row else threshold, out=m)
        found.append(np.flatnonzero(m) + r0 * width)
    return np.concatenate(found)


def _offers(xp: Any, keys: Any, thr_r: Any, thr_c: Any | None, i0: int, j0: int) -> tuple[Offers, Offers]:
    """Entries of a key tile at or above their owner's θ: lists of (owner, global column, key), rows', columns'.

    Tile rows are rows i0.. (owners in the row direction, thresholds thr_r),
    tile columns rows j0.. (owners in the column direction, thr_c; None: rows only).
    One pass finds the entries at or above a low quantile of all thresholds; the
    few rows or columns whose threshold lies below it are scanned on their own.
    """
    rows, width = keys.shape
    if thr_c is None:  # rows only: compare with each row's own threshold
        flat = _scan(xp, keys, thr_r)
        return [(flat // width, flat % width + j0, xp.take(xp.reshape(keys, (-1,)), flat))], []
    both = xp.concat([thr_r, thr_c], axis=0)
    lo = int(xp.sort(both)[both.shape[0] // 64])
    flat = _scan(xp, keys, lo)
    key = xp.take(xp.reshape(keys, (-1,)), flat)
    r, c = flat // width, flat % width
    tr = xp.take(thr_r, r)
    sel = xp.nonzero((key >= tr) & (tr >= lo))[0]
    out = [(xp.take(r, sel), xp.take(c, sel) + j0, xp.take(key, sel))]
    low = xp.nonzero(thr_r < lo)[0]
    if low.shape[0]:
        part = xp.take(keys, low, axis=0)
        f = xp.nonzero(xp.reshape(part >= xp.take(thr_r, low)[:, None], (-1,)))[0]
        out.append((xp.take(low, f // width), f % width + j0, xp.take(xp.reshape(part, (-1,)), f)))
    tc = xp.take(thr_c, c)
    sel = xp.nonzero((key >= tc) & (tc >= lo))[0]
    out_c = [(xp.take(c, sel), xp.take(r, sel) + i0, xp.take(key, sel))]
    low = xp.nonzero(thr_c < lo)[0]
    if low.shape[0]:
        part = xp.take(keys, low, axis=1)
        f = xp.nonzero(xp.reshape(part >= xp.take(thr_c, low)[None, :], (-1,)))[0]
        out_c.append((xp.take(low, f % low.shape[0]), f // low.shape[0] + i0, xp.take(xp.reshape(part, (-1,)), f)))
    return out, out_c


def _group_kth(xp: Any, raw: Any, k: int) -> Any:
    """A lower bound of each row's k-th largest key: the k-th largest key among one entry per column group.

    The entries (each group's largest bit pattern) lie in distinct columns, so at
    least k entries of the row are at or above the k-th largest of them.
    """
    rows, width = raw.shape
    groups = min(width, max(16 * k, 64))
    size = width // groups
    if groups < k or size == 0:
        return xp.full((rows,), PAD, dtype=xp.int16, device=array_device(raw))
    reps = xp.asarray(raw[:, :groups], copy=True)
    for s in range(1, size):  # column groups {g, g + groups, g + 2·groups, ...}: contiguous slices
        if is_numpy_array(reps):
            np.maximum(reps, raw[:, s * groups:(s + 1) * groups], out=reps)
        else:
            reps = xp.maximum(reps, raw[:, s * groups:(s + 1) * groups])
    return _kth_keys(xp, _keys(xp, reps), k)


# --------------------------------------------------------------------------------------
# re-rank
# --------------------------------------------------------------------------------------
def _dots(xp: Any, y: Any, i0: int, cols: Any, count: Any) -> Any:
    """(rows, width) values ⟨y_{i0+r}, y_{cols[r, s]}⟩ for s < count[r] (others arbitrary), rows batched by count.

    One dot product per pair from gathered rows (numpy ``vecdot``; torch:
    products and a sum along d), the same reduction whatever the pair's position:
    a batched matrix-vector product sums a batch's last rows in another order,
    so equal rows would differ in the last bit instead of tying.
    """
    rows, width = cols.shape
    d = y.shape[1]
    out = xp.zeros((rows, width), dtype=y.dtype, device=array_device(y))
    order = xp.argsort(count, stable=True)
    size = [int(v) for v in xp.take(count, order)]
    r0 = next((r for r, s in enumerate(size) if s), rows)  # rows without entries need nothing
    while r0 < rows:
        r1 = min(rows, r0 + max(1, RERANK_ELEMENTS // (size[r0] * d)))
        while r1 - r0 > 1 and (r1 - r0) * size[r1 - 1] * d > 2 * RERANK_ELEMENTS:
            r1 = r0 + (r1 - r0) // 2
        w = size[r1 - 1]
        sel = order[r0:r1]
        c = xp.reshape(xp.astype(xp.take(cols, sel, axis=0)[:, :w], xp.int64), (-1,))
        g = xp.reshape(xp.take(y, c, axis=0), (r1 - r0, w, d))
        q = xp.take(y, sel + i0, axis=0)[:, None, :]
        out[sel, :w] = np.vecdot(g, q) if is_numpy_array(y) else xp.sum(g * q, axis=2)
        r0 = r1
    return out


def _finish(xp: Any, y: Any, i0: int, pool: _Pool, k: int, idt: Any, ordered: bool,
            table: Any) -> tuple[Any, Any]:
    """Each pooled row's top k under (−v_ij, j): all candidates re-ranked (ordered) or only the undecided ones.

    Unordered, with K_k, K_k+1 a row's k-th and (k+1)-th largest keys: fewer than k
    others can reach entry j iff the lowest key that may reach it lies above K_k+1
    (j is in); at least k others lie surely above j iff K_k is at or above the
    lowest key surely above it (j is out). Rows of a retired pool come back empty.
    """
    n = y.shape[0]
    rows, width = pool.keys.shape
    dev = array_device(y)
    if width == 0:
        return (xp.full((rows, k), -math.inf, dtype=y.dtype, device=dev), xp.full((rows, k), n, dtype=idt, device=dev))
    slot = xp.arange(width, dtype=xp.int64, device=dev)[None, :] < pool.count[:, None]
    if ordered:
        v = _dots(xp, y, i0, xp.where(slot, pool.cols, xp.zeros_like(pool.cols)), pool.count)
        v = xp.where(slot, v, xp.full_like(v, -math.inf))
        idx = xp.where(slot, xp.astype(pool.cols, idt), xp.full_like(pool.cols, n, dtype=idt))
        v, idx = _pad(xp, v, idx, k, n)
        order = xp.argsort(idx, axis=1, stable=True)  # by index, then stably by value: the key (−v, j)
        v, idx = xp.take_along_axis(v, order, axis=1), xp.take_along_axis(idx, order, axis=1)
        order = xp.argsort(-v, axis=1, stable=True)[:, :k]
        return xp.take_along_axis(v, order, axis=1), xp.take_along_axis(idx, order, axis=1)
    keys = pool.keys
    if width > k:
        part = np.partition(keys, (width - k - 1, width - k), axis=1) if is_numpy_array(keys) else xp.sort(keys, axis=1)
        kth, after = part[:, width - k], part[:, width - k - 1]
    else:
        kth, after = _kth_keys(xp, keys, k), xp.full((rows,), PAD, dtype=xp.int16, device=dev)
    flat = xp.nonzero(xp.reshape(slot, (-1,)))[0]  # the pooled entries, by row
    owner = flat // width
    col = xp.astype(xp.take(xp.reshape(pool.cols, (-1,)), flat), xp.int64)
    key = xp.take(xp.reshape(keys, (-1,)), flat)
    margin = xp.take(pool.margin, owner)  # 2 E_i: lo_j = f(s_j) - E_i, hi_l = g(s_l) + E_i
    sure = _below(xp, key, margin, table) > xp.take(after, owner)
    open_ = ~sure & (_above(xp, key, margin, table) > xp.take(kth, owner))
    idx = xp.full((rows, k), n, dtype=idt, device=dev)
    zero = xp.zeros((rows,), dtype=xp.int64, device=dev)
    pos, first = _place(xp, rows, owner[sure], zero)  # the sure entries first, in any order
    idx[owner[sure], pos] = xp.astype(col[sure], idt)
    owner, col = owner[open_], col[open_]
    if owner.shape[0]:  # the undecided: by (row, column), re-ranked, the best k − (sure ones) of each row
        order = xp.argsort(owner * n + col)
        owner, col = xp.take(owner, order), xp.take(col, order)
        pos, count = _place(xp, rows, owner, zero)
        cols = xp.zeros((rows, int(xp.max(count))), dtype=xp.int32, device=dev)
        cols[owner, pos] = xp.astype(col, xp.int32)
        v = xp.full((rows, cols.shape[1]), -math.inf, dtype=y.dtype, device=dev)
        v[owner, pos] = _dots(xp, y, i0, cols, count)[owner, pos]
        rank = xp.argsort(-v, axis=1, stable=True)  # equal values: the smaller column first
        slots = xp.arange(cols.shape[1], dtype=xp.int64, device=dev)[None, :]
        r, s = xp.nonzero(slots < xp.minimum(k - first, count)[:, None])
        idx[r, xp.take(first, r) + s] = xp.astype(cols[r, rank[r, s]], idt)
    return None, idx


def _pad(xp: Any, vals: Any, idx: Any, k: int, n: int) -> tuple[Any, Any]:
    """vals, idx widened to k columns with (−inf, N) where narrower (only retired rows are then short)."""
    rows, width = vals.shape
    if width >= k:
        return vals, idx
    dev = array_device(vals)
    return (xp.concat([vals, xp.full((rows, k - width), -math.inf, dtype=vals.dtype, device=dev)], axis=1),
            xp.concat([idx, xp.full((rows, k - width), n, dtype=idx.dtype, device=dev)], axis=1))


# --------------------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------------------
def _prepare(xp: Any, x: Any, scale: Any, torch: Any, width: str = "bf16") -> tuple[Any, Any, Any, Any, int]:
    """``(y, z, n, rho, e)``: rows y (xp), the copy z = w̃ of w = 2^-e y in the screen's width (torch: bf16, or
    float32, then w itself where w is float32), n_i ≥ ‖w_i‖, ρ_i ≥ ‖w̃_i − w_i‖.

    y = x, or the unit rows (x_i / m_i) / r_i (IEEE division: the values :func:`._knn_ties.unit_rows`
    forms). A few large torch operations (its thread pool costs per call, much more on a busy machine).
    """
    n, d = x.shape
    step = max(1, PREPARE_ELEMENTS // d)
    chunks = [(r0, min(n, r0 + step)) for r0 in range(0, n, step)]
    xt = torch.from_numpy(x) if is_numpy_array(x) else x
    if scale is None:
        y, yt = x, xt
        top = max((float(torch.max(torch.abs(xt[r0:r1]))) for r0, r1 in chunks), default=0.0)
        mant, e = math.frexp(top)
        e = e - 1 if mant == 0.5 else e
        e = e if e > 1 or e < -20 else 0  # |2^-e x| <= 2, scaled only where x is very large or very small
    else:
        m, r = (torch.from_numpy(v) if is_numpy_array(v) else v for v in scale)
        y = xp.empty(x.shape, dtype=x.dtype, device=array_device(x))
        yt = torch.from_numpy(y) if is_numpy_array(y) else y
        torch.div(xt, m, out=yt)
        yt.div_(r)
        e = 0  # unit rows: |y| <= 1 + 2^-20
    copy = width == "bf16" or yt.dtype != torch.float32 or e != 0
    z = torch.empty((n, d), dtype=torch.bfloat16 if width == "bf16" else torch.float32, device=yt.device) \
        if copy else yt
    norm, err = [], []
    for r0, r1 in chunks:
        w = yt[r0:r1]
        w = w * 2.0**-e if e else w  # exact
        if copy:  # to nearest even (twice for f64 to bf16)
            z[r0:r1].copy_(w if w.dtype == torch.float32 or width == "float32" else w.to(torch.float32))
        if scale is None:
            norm.append(torch.linalg.vector_norm(w, dim=1))
        err.append(torch.linalg.vector_norm(z[r0:r1].to(w.dtype) - w, dim=1) if copy  # the difference is exact
                   else torch.zeros(r1 - r0, dtype=w.dtype, device=w.device))
    u = 2.0**-24 if yt.dtype == torch.float32 else 2.0**-53
    grow = 1.0 + _gamma(d + 2, u)  # rounding of a norm: the sum of squares and the square root

    def bound(parts: list[Any]) -> Any:
        b = torch.cat(parts).to(torch.float64) * grow + d * 2.0**-60  # + squares lost to underflow
        return b.numpy() if is_numpy_array(y) else b

    if scale is None:
        norms = bound(norm)
    else:  # ‖v/r‖, v = x/m, r = fl(√fl(Σv²)): at most (1 + u)/((1 − u)·√(1 − γ_d)) (three roundings)
        unit = (1.0 + u) / ((1.0 - u) * math.sqrt(1.0 - _gamma(d, u))) * (1.0 + 2.0**-40)
        norms = xp.full((n,), unit, dtype=xp.float64, device=array_device(y))
    return y, z, norms, bound(err), e


def bf16_products(zi: Any, zj: Any) -> Any:
    """ŝ = zi zjᵀ for bf16 torch tensors: float32 accumulation, the result rounded to bf16 (steps (b), (c))."""
    return zi @ zj.T


#: Index of a float32's high 16 bits among its two int16 halves (the byte order of this machine).
_HIGH = 1 if sys.byteorder == "little" else 0


def truncated_products(zi: Any, zj: Any) -> Any:
    """The bf16 bit patterns (int16) of zi zjᵀ for float32 rows (numpy or torch): each float32 product truncated to
    its high 16 bits, a bf16 value rounded toward zero (|ŝ − s̃| <= 2^-7|ŝ|: step (c) of the float32 width)."""
    s = zi @ zj.T
    if is_numpy_array(s):
        return np.ascontiguousarray(s.view(np.int16)[:, _HIGH::2])
    import torch

    return s.view(torch.int16)[:, _HIGH::2].contiguous()


def _products(product: Any, jobs: list[tuple[int, int]], ahead: bool) -> Any:
    """Yield (job, product(job)) in order; with ``ahead`` (CPU) the next product is formed in a second
    thread while the caller selects from this one (torch's product and numpy's passes release the GIL)."""
    if not (ahead and PIPELINE) or len(jobs) < 2:
        for job in jobs:
            yield job, product(job)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as runner:
        pending = runner.submit(product, jobs[0])
        for t, job in enumerate(jobs):
            result = pending.result()
            if t + 1 < len(jobs):
                pending = runner.submit(product, jobs[t + 1])
            yield job, result
            del result


def _to_work(x: Any) -> Any:
    """The array the pools and the re-rank run on: numpy for CPU data (unless WORK_IN_TORCH), torch on GPUs."""
    if is_torch_array(x) and x.device.type == "cpu" and not WORK_IN_TORCH:
        return x.numpy()
    return x


def screened_knn(x: Any, k: int, block: int | None = None, scale: Any = None,
                 ordered: bool = True) -> tuple[Any, Any, Any]:
    """``(values, indices, retired)``: every row's k nearest rows j ≠ i by the bf16 screen and a re-rank.

    x: (N, d) numpy array or torch tensor (CPU or CUDA), float32 or float64,
    finite, d >= 1; ``scale`` = (m, r) from :func:`._knn_search.row_scale` for cosine
    neighbours (rows y_i = (x_i/m_i)/r_i as the exact path forms them), None
    for x's own rows; ``block``: tile side (default: equal blocks of at most
    SCREEN_BLOCK). With ``ordered`` the lists are sorted by (−v_ij, j) and the
    values v_ij returned, as :func:`._knn_search.knn_search` does; otherwise the sets only (in
    an unspecified order) and values None. ``retired``: the rows (ascending)
    whose pools overflowed, or all rows where the bound does not apply; their
    entries are left unfilled (index N) for the exact search. Arrays are of x's
    library and device.
    """
    import torch

    back = is_torch_array(x) and x.device.type == "cpu" and not WORK_IN_TORCH
    xw = _to_work(x)
    scale = None if scale is None else tuple(_to_work(v) for v in scale)
    xp = array_namespace(xw)
    n, d = xw.shape
    bits = xp.finfo(xw.dtype).bits
    idt = xp.arange(1, device=array_device(xw)).dtype
    side = -(-n // -(-n // SCREEN_BLOCK)) if block is None else min(block, n)  # equal blocks by default
    cap = 4 * k + POOL_SLACK
    wide = width(xw) == "float32"
    ensure_fits((0 if scale is None else n * d * bits / 8) + (4.0 if wide else 2.0) * n * d
                + 16.0 * side * side
                + 24.0 * n * min(n, cap), f"the bf16 screen for k-nearest neighbours (N = {n}, d = {d}, "
                f"tiles of {side})", "lower block")
    vals, idx, retired = _screen(xp, torch, xw, scale, k, side, cap, bits, idt, ordered, wide)
    if back:
        vals = None if vals is None else torch.from_numpy(vals)
        idx, retired = torch.from_numpy(idx), torch.from_numpy(retired)
    return vals, idx, retired


def _screen(xp: Any, torch: Any, x: Any, scale: Any, k: int, side: int, cap: int, bits: int, idt: Any,
            ordered: bool, wide: bool) -> tuple[Any, Any, Any]:
    """The tiles and the re-rank (see :func:`screened_knn`); ``wide``: at the float32 width (:func:`width`)."""
    n, d = x.shape
    dev = array_device(x)
    y, z, norms, rho, e = _prepare(xp, x, scale, torch, "float32" if wide else "bf16")
    if not -60 <= e <= 60:  # outside the bound's range (τ): every row to the exact search
        return (xp.full((n, k), -math.inf, dtype=x.dtype, device=dev) if ordered else None,
                xp.full((n, k), n, dtype=idt, device=dev), xp.arange(n, dtype=idt, device=dev))
    margin = 2.0 * screen_error(xp, d, bits, norms, rho, e)
    del norms, rho
    table = _Table(_bf16_values() if is_numpy_array(y) else torch.as_tensor(_bf16_values(), device=y.device),
                   U_TRUNCATE if wide else U_BF16)
    on_cpu = z.device.type == "cpu"
    if wide and is_numpy_array(y):
        z = z.numpy()  # numpy's float32 product (as fast as torch's or faster on CPUs)

    starts = list(range(0, n, side))
    jobs = [(i0, i0) for i0 in starts] + [(i0, j0) for a, i0 in enumerate(starts) for j0 in starts[a + 1:]]

    def product(job: tuple[int, int]) -> Any:
        """The job's tile as int16 bf16 bit patterns, in the work library."""
        i0, j0 = job
        if wide:
            return truncated_products(z[i0:i0 + side], z[j0:j0 + side])
        raw = bf16_products(z[i0:i0 + side], z[j0:j0 + side]).view(torch.int16)
        return raw.numpy() if is_numpy_array(y) else raw

    restore = None
    if not on_cpu:  # keep cuBLAS from reducing partial sums in bf16
        restore = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    pool_of = {i0: b for b, i0 in enumerate(starts)}
    pools: list[_Pool] = []
    try:
        for (i0, j0), raw in _products(product, jobs, on_cpu):
            if i0 == j0:  # a diagonal tile: the row's own entry is -inf; first thresholds from column groups
                if is_numpy_array(raw):
                    np.fill_diagonal(raw, RAW_NEG_INF)
                else:
                    raw.fill_diagonal_(RAW_NEG_INF)
                pool = _Pool(xp, raw.shape[0], margin[i0:i0 + raw.shape[0]], dev)
                pool.thr = _thresholds(xp, _group_kth(xp, raw, k), pool.margin, table)
                keys = raw if int(xp.min(pool.thr)) >= 0 else _keys(xp, raw)  # at θ >= +0 bits compare as keys
                _merge(xp, pool, _offers(xp, keys, pool.thr, None, i0, i0)[0], k, cap, table)
                pools.append(pool)
            else:
                pi, pj = pools[pool_of[i0]], pools[pool_of[j0]]
                keys = raw if min(int(xp.min(pi.thr)), int(xp.min(pj.thr))) >= 0 else _keys(xp, raw)
                by_row, by_col = _offers(xp, keys, pi.thr, pj.thr, i0, j0)
                del raw, keys
                _merge(xp, pi, by_row, k, cap, table)
                _merge(xp, pj, by_col, k, cap, table)
    finally:
        if restore is not None:
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = restore
    del z

    vals, idx, exact = [], [], []
    for i0, pool in zip(starts, pools):
        v, j = _finish(xp, y, i0, pool, k, idt, ordered, table)
        vals.append(v)
        idx.append(j)
        exact.append(xp.nonzero(pool.count < k)[0] + i0)  # retired rows hold no entries
    vals = xp.concat(vals, axis=0) if ordered else None
    return vals, xp.concat(idx, axis=0), xp.astype(xp.concat(exact, axis=0), idt)
