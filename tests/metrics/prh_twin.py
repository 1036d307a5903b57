"""An independent float64 twin of the Platonic Representation Hypothesis code's alignment metrics.

The PRH code (``metrics.py`` and ``measure_alignment.py`` of the public Platonic Representation
Hypothesis repository) computes its sample alignment metrics in torch; the functions here
re-derive each of its formulas and write them plainly in numpy, in float64 (float32 inputs are
converted to float64 first), for the tests of ``convention="prh"``
(``tests/metrics/test_metrics_prh_convention.py``).

The metric functions take the rows exactly as the PRH metric receives them: ``measure_alignment``
clips the features (:func:`clip_exact` or :func:`clip_sample_mean`) and L2-normalises every row of
every layer before it calls a metric; the metric functions here do neither (:func:`protocol` does
both). Notation: ``a`` (N x d_a) and ``b`` (N x d_b) hold the same N inputs in their rows,
``K = a aᵀ`` and ``L = b bᵀ`` are their inner-product matrices, ``1`` is the all-ones vector and
``H = I − 11ᵀ/N``.

Neighbours (every kNN function): ``N_a(i)`` is the list of the k rows j ≠ i of ``a`` with the
largest inner products ``K_ij``. The PRH code excludes the diagonal by filling it with a very
negative number (−1e8 for the kNN metrics, −inf for CKNNA) and sorts with torch, whose order among
equal values is unspecified; the twin excludes the diagonal outright and ranks the candidates by the
key (−K_ij, j), so among equal inner products the smaller index wins.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: The constant the PRH code adds to the square root in the denominator of every CKA variant and CKNNA.
EPS_DENOMINATOR = 1e-6
#: The constant the PRH SVCCA adds to each column's standard deviation before dividing by it.
EPS_STD = 1e-8


def _f64(x: Any) -> np.ndarray:
    """A float64 copy of x (numpy array, torch tensor or nested list)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.array(x, dtype=np.float64)


def _pair(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = _f64(a), _f64(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must be (N, d) arrays of the same N, got {a.shape} and {b.shape}")
    return a, b


def neighbours(x: Any, k: int) -> np.ndarray:
    """(N, k) neighbour lists: row i lists the k indices j ≠ i ranked by (−⟨x_i, x_j⟩, j)."""
    x = _f64(x)
    n = x.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must lie in [1, N − 1] = [1, {n - 1}], got {k}")
    s = x @ x.T
    lists = np.empty((n, k), dtype=np.int64)
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        order = np.lexsort((others, -s[i, others]))  # primary key −⟨x_i, x_j⟩, then j
        lists[i] = others[order[:k]]
    return lists


def _masks(lists: np.ndarray) -> np.ndarray:
    """The N x N 0/1 matrix M with M_ij = 1 when j is in row i's list."""
    n = lists.shape[0]
    m = np.zeros((n, n))
    for i in range(n):
        m[i, lists[i]] = 1.0
    return m


def mutual_knn(a: Any, b: Any, k: int) -> float:
    """PRH ``mutual_knn``: ``(1/N) Σ_i |N_a(i) ∩ N_b(i)| / k``.

    The mean over rows of the fraction of row i's k neighbours in ``a`` that are also among its k
    neighbours in ``b`` (neighbours: module docstring).
    """
    a, b = _pair(a, b)
    na, nb = neighbours(a, k), neighbours(b, k)
    n = a.shape[0]
    return float(np.mean([len(set(na[i]) & set(nb[i])) / k for i in range(n)]))


def cycle_knn(a: Any, b: Any, k: int) -> float:
    """PRH ``cycle_knn``: ``(1/N) Σ_i 1[∃ j ∈ N_b(i) : i ∈ N_a(j)]``.

    The fraction of rows i for which some neighbour j of i in ``b`` (the metric's second argument)
    has i among its own neighbours in ``a`` (the first argument). Not symmetric in a and b.
    """
    a, b = _pair(a, b)
    na, nb = neighbours(a, k), neighbours(b, k)
    n = a.shape[0]
    hits = [any(i in set(na[j]) for j in nb[i]) for i in range(n)]
    return float(np.mean(hits))


def hsic_biased(K: np.ndarray, L: np.ndarray) -> float:
    """The PRH biased HSIC ``tr(K H L H)``, with no 1/(N − 1)² factor."""
    n = K.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    return float(np.trace(K @ H @ L @ H))


def hsic_unbiased(K: np.ndarray, L: np.ndarray) -> float:
    """The unbiased HSIC estimator (JMLR 13, 2012, Eq. 5) as the PRH code writes it, for any square K, L.

    With K̃, L̃ the matrices with zeroed diagonals and m = N:
    ``HSIC_u = [tr(K̃ L̃) + (1ᵀK̃1)(1ᵀL̃1)/((m − 1)(m − 2)) − 2/(m − 2) · 1ᵀK̃L̃1] / (m(m − 3))``.
    (The PRH code forms tr(K̃L̃) as the sum of the entries of K̃ ∘ L̃ᵀ, which is the same number also
    when the masked kernels of CKNNA make K̃ and L̃ non-symmetric.)
    """
    m = K.shape[0]
    Kt = K * (1.0 - np.eye(m))
    Lt = L * (1.0 - np.eye(m))
    ones = np.ones(m)
    trace = float(np.trace(Kt @ Lt))
    sums = float(ones @ Kt @ ones) * float(ones @ Lt @ ones) / ((m - 1) * (m - 2))
    cross = 2.0 * float(ones @ Kt @ Lt @ ones) / (m - 2)
    return (trace + sums - cross) / (m * (m - 3))


def _cka_ratio(kl: float, kk: float, ll: float) -> float:
    """``kl / (sqrt(kk · ll) + 1e-6)``: NaN (as in torch) when kk · ll < 0."""
    with np.errstate(invalid="ignore"):
        return float(kl / (np.sqrt(kk * ll) + EPS_DENOMINATOR))


def linear_cka(a: Any, b: Any) -> float:
    """PRH ``cka`` (kernel_metric="ip", unbiased=False): ``h(K, L) / (sqrt(h(K, K)·h(L, L)) + 1e-6)``.

    K = a aᵀ and L = b bᵀ from the raw (not column-centred) rows, h the biased HSIC
    ``tr(K H L H)`` of :func:`hsic_biased`; the epsilon is added to the square root.
    """
    a, b = _pair(a, b)
    K, L = a @ a.T, b @ b.T
    return _cka_ratio(hsic_biased(K, L), hsic_biased(K, K), hsic_biased(L, L))


def rbf_gram(x: np.ndarray, sigma: float) -> np.ndarray:
    """``K_ij = exp(−‖x_i − x_j‖² / (2 σ²))`` with the fixed bandwidth σ (no median heuristic)."""
    diff = x[:, None, :] - x[None, :, :]
    d2 = np.sum(diff * diff, axis=-1)
    return np.exp(-d2 / (2.0 * sigma**2))


def rbf_cka(a: Any, b: Any, sigma: float = 1.0) -> float:
    """PRH ``cka`` (kernel_metric="rbf", rbf_sigma=sigma, unbiased=False).

    ``h(K, L) / (sqrt(h(K, K)·h(L, L)) + 1e-6)`` with Gaussian kernels
    ``K_ij = exp(−‖a_i − a_j‖² / (2 sigma²))``, ``L_ij`` the same on b (sigma an absolute
    bandwidth, 1.0 by default), h the biased HSIC ``tr(K H L H)``.
    """
    a, b = _pair(a, b)
    K, L = rbf_gram(a, sigma), rbf_gram(b, sigma)
    return _cka_ratio(hsic_biased(K, L), hsic_biased(K, K), hsic_biased(L, L))


def unbiased_cka(a: Any, b: Any) -> float:
    """PRH ``unbiased_cka`` (``cka`` with unbiased=True): ``u(K, L) / (sqrt(u(K, K)·u(L, L)) + 1e-6)``.

    K = a aᵀ, L = b bᵀ from the raw rows, u the unbiased HSIC of :func:`hsic_unbiased` (Eq. 5 of the
    unbiased-HSIC estimator, divided by m(m − 3)); the epsilon is added to the square root, which on these small
    HSIC values moves the result visibly (about 1e-6 / sqrt(u(K,K)·u(L,L)) relative).
    """
    a, b = _pair(a, b)
    K, L = a @ a.T, b @ b.T
    return _cka_ratio(hsic_unbiased(K, L), hsic_unbiased(K, K), hsic_unbiased(L, L))


def cknna(a: Any, b: Any, k: int) -> float:
    """PRH ``cknna`` (defaults unbiased=True, distance_agnostic=False): ``s_KL / (sqrt(s_KK·s_LL) + 1e-6)``.

    K = a aᵀ, L = b bᵀ from the raw rows; M_K, M_L the N x N 0/1 matrices of the rows' top-k lists
    (``M_K[i, j] = 1`` when j ∈ N_a(i), diagonal excluded; not symmetric); ∘ the entrywise product and
    u the unbiased HSIC of :func:`hsic_unbiased`:

    * ``s_KL = u(M ∘ K, M ∘ L)`` with ``M = M_K ∘ M_L`` (pairs that are neighbours in both);
    * ``s_KK = u(M_K ∘ K, M_K ∘ K)`` (the PRH code computes it as similarity(K, K): the mask is
      ``M_K ∘ M_K = M_K``, a's own neighbour mask), and likewise ``s_LL = u(M_L ∘ L, M_L ∘ L)``.

    The PRH code requires k >= 2 (ValueError otherwise); k <= N − 1 here.
    """
    a, b = _pair(a, b)
    if k < 2:
        raise ValueError("CKNNA requires k >= 2")
    K, L = a @ a.T, b @ b.T
    MK, ML = _masks(neighbours(a, k)), _masks(neighbours(b, k))
    M = MK * ML
    s_kl = hsic_unbiased(M * K, M * L)
    s_kk = hsic_unbiased(MK * K, MK * K)
    s_ll = hsic_unbiased(ML * L, ML * L)
    return _cka_ratio(s_kl, s_kk, s_ll)


def standardise(x: np.ndarray) -> np.ndarray:
    """The PRH SVCCA preprocessing: ``c = x − mean_rows(x)``, then ``c / (std(c, ddof=1) + 1e-8)`` per column."""
    c = x - np.mean(x, axis=0)
    return c / (np.std(c, axis=0, ddof=1) + EPS_STD)


def canonical_correlations(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """All canonical correlations of the column spaces of x and y (after centring the columns).

    ``ρ = singular values of Q_xᵀ Q_y`` with Q_x, Q_y orthonormal bases (QR) of the centred x and y,
    in decreasing order; there are min(width of x, width of y) of them (both of full column rank).
    """
    qx, _ = np.linalg.qr(x - np.mean(x, axis=0))
    qy, _ = np.linalg.qr(y - np.mean(y, axis=0))
    return np.linalg.svd(qx.T @ qy, compute_uv=False)


def svcca(a: Any, b: Any, cca_dim: int = 10) -> float:
    """PRH ``svcca`` with an exact SVD: ``(1/c) Σ_{i=1..c} ρ_i(U_a, U_b)``, c = cca_dim.

    Each side is standardised (:func:`standardise`: centred, divided by its column standard deviation
    with ddof = 1, plus 1e-8), then U is its top-c left singular vectors (N x c; the PRH code takes them
    from the randomised ``torch.svd_lowrank(x, q=c)``, the twin from an exact SVD). The PRH code then
    fits sklearn's ``CCA(n_components=c)`` to (U_a, U_b) and averages the correlation coefficients of
    the c pairs of canonical variates it returns. With n_components equal to both widths, CCA returns
    every pair of canonical variates of the two c-dimensional column spaces, and the correlation of the
    i-th pair is the i-th canonical correlation ρ_i; CCA is invariant to an invertible linear map of
    either side's columns (sklearn's centring and scaling included), and U's columns are already
    centred (they lie in the span of the centred columns). So the PRH value is the mean of all c
    canonical correlations, ``(1/c) Σ_i σ_i(Q_aᵀ Q_b)`` (:func:`canonical_correlations`), written here
    as that direct CCA. Requires c <= min(N − 1, d) on both sides.
    """
    a, b = _pair(a, b)
    n = a.shape[0]
    if not 1 <= cca_dim <= min(n - 1, a.shape[1], b.shape[1]):
        raise ValueError(f"cca_dim must lie in [1, min(N − 1, d_a, d_b)], got {cca_dim} for shapes {a.shape}, {b.shape}")
    ua = np.linalg.svd(standardise(a), full_matrices=False)[0][:, :cca_dim]
    ub = np.linalg.svd(standardise(b), full_matrices=False)[0][:, :cca_dim]
    return float(np.mean(canonical_correlations(ua, ub)))


def clip_exact(x: Any, q: float) -> np.ndarray:
    """PRH ``remove_outliers(x, q, exact=True)``: ``clamp(x, −t, t)``, t an order statistic of |x|.

    t is the entry at 0-based index ``int(q · numel)`` of all |x| (the whole array flattened, whatever
    its shape) sorted in increasing order: no interpolation, and for q · numel >= numel − 1 it is the
    largest |x| (nothing is clipped). q == 1 returns x unchanged.
    """
    x = _f64(x)
    if q == 1:
        return x
    t = np.sort(np.abs(x).ravel())[int(q * x.size)]
    return np.clip(x, -t, t)


def linear_quantile(values: np.ndarray, q: float) -> float:
    """The q-quantile of a 1-D sample by linear interpolation between order statistics (torch/numpy default).

    With s sorted increasingly and h = q (n − 1): ``s[⌊h⌋] + (h − ⌊h⌋)(s[⌊h⌋ + 1] − s[⌊h⌋])``.
    """
    s = np.sort(values)
    h = q * (s.size - 1)
    lo = int(np.floor(h))
    hi = min(lo + 1, s.size - 1)
    return float(s[lo] + (h - lo) * (s[hi] - s[lo]))


def clip_sample_mean(x: Any, q: float) -> np.ndarray:
    """PRH ``remove_outliers(x, q, exact=False)``: ``clamp(x, −t, t)``, t a mean of per-slice quantiles.

    ``t = (1/N) Σ_n quantile_q(|x[n]|)``: for every slice x[n] along the first axis, the linear-
    interpolated q-quantile (:func:`linear_quantile`) of its |entries| (all of them, flattened), averaged
    over the N slices. q == 1 returns x unchanged.
    """
    x = _f64(x)
    if q == 1:
        return x
    t = np.mean([linear_quantile(np.abs(x[n]).ravel(), q) for n in range(x.shape[0])])
    return np.clip(x, -t, t)


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Torch's ``F.normalize(x, p=2, dim=-1)``: ``x_i / max(‖x_i‖, 1e-12)`` (a zero row stays zero)."""
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    return x / np.maximum(norm, 1e-12)


METRICS = {
    "mutual_knn": lambda a, b, k: mutual_knn(a, b, k),
    "cycle_knn": lambda a, b, k: cycle_knn(a, b, k),
    "cknna": lambda a, b, k: cknna(a, b, k),
    "linear_cka": lambda a, b, k: linear_cka(a, b),
    "unbiased_cka": lambda a, b, k: unbiased_cka(a, b),
    "rbf_cka": lambda a, b, k: rbf_cka(a, b),
    "svcca": lambda a, b, k: svcca(a, b),
}


class ProtocolResult(NamedTuple):
    """Result of :func:`protocol` (see its docstring for the orientation).

    Attributes:
        best: the PRH best score (0.0 when no layer pair scores above 0).
        layers: ``(layer of a, layer of b)`` of the best pair, or None when no pair scores above 0.
        prh_indices: the same pair as the PRH code stores it, ``(layer of b, layer of a)``, or None.
        table: float64 (L_a x L_b): ``table[i, j] = metric(b_j, a_i)``, the PRH score of a's layer i
            against b's layer j (b's layer is the metric's first argument).
    """

    best: float
    layers: tuple[int, int] | None
    prh_indices: tuple[int, int] | None
    table: np.ndarray


def _layers(feats: Any, q: float, clip: str) -> list[np.ndarray]:
    """The PRH ``prepare_features`` and per-layer L2 normalisation: a list of (N, D_l) float64 layers."""
    clip_fn = {"exact": clip_exact, "sample_mean": clip_sample_mean}
    if clip not in clip_fn:
        raise ValueError(f"clip must be 'exact' or 'sample_mean', got {clip!r}")
    if isinstance(feats, (list, tuple)):
        layers = [clip_fn[clip](layer, q) for layer in feats]  # each layer clipped on its own
    else:
        stack = clip_fn[clip](feats, q)  # the whole (N, L, D) tensor at once
        if stack.ndim != 3:
            raise ValueError(f"a stacked input must be (N, L, D), got shape {stack.shape}")
        layers = [stack[:, i, :] for i in range(stack.shape[1])]
    return [l2_normalise(layer) for layer in layers]


def protocol(feats_a: Any, feats_b: Any, metric: str, k: int = 10, clip: str = "exact",
             q: float = 0.95) -> ProtocolResult:
    """The PRH ``measure_alignment`` flow for one entry of its alignment table.

    Orientation. ``compute_alignment(x_feat_paths, y_feat_paths, ...)`` fills
    ``alignment_scores[i, j]`` for x model i and y model j by calling
    ``compute_score(y_feats, x_feats)``; ``compute_score`` loops over the layers of its first argument
    (outer, index i) and of its second (inner, index j) and calls ``metric(first[i], second[j])``. Here
    ``feats_a`` is the x model (the row of the PRH table) and ``feats_b`` the y model (its column), so
    the metric's FIRST argument is a layer of b and its second a layer of a, and the PRH code's stored
    ``alignment_indices`` pair is ``(layer of b, layer of a)`` (:attr:`ProtocolResult.prh_indices`;
    :attr:`ProtocolResult.layers` is the same pair as (layer of a, layer of b)).

    Steps:

    1. prepare each model (PRH ``prepare_features``): a stacked (N, L, D) array is clipped as one
       tensor (``clip="exact"``: :func:`clip_exact`, one threshold over all N·L·D entries — the
       ``Alignment`` class and ``precise=True``; ``clip="sample_mean"``: :func:`clip_sample_mean`,
       the quantile of each input's L·D entries averaged over the N inputs — ``precise=False``, the
       command line's default); a list of per-layer (N, D_l) arrays is clipped layer by layer (each
       layer's own threshold, over its N·D_l entries, or per input over its D_l entries);
    2. L2-normalise every row of every layer (:func:`l2_normalise`);
    3. for i over b's layers (outer) and j over a's layers (inner): ``s = metric(b_i, a_j)``;
    4. the best is the first pair in that loop order with a score strictly above the running best,
       which starts at 0: so ties go to the smaller b layer, then the smaller a layer, and when no
       score exceeds 0 the PRH code returns (0, None).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    A = _layers(feats_a, q, clip)
    B = _layers(feats_b, q, clip)
    if {x.shape[0] for x in A + B} != {A[0].shape[0]}:
        raise ValueError("every layer of both models must hold the same N inputs")
    table = np.empty((len(A), len(B)))
    best, pair = 0.0, None
    for i, b_layer in enumerate(B):
        for j, a_layer in enumerate(A):
            s = METRICS[metric](b_layer, a_layer, k)
            table[j, i] = s
            if s > best:
                best, pair = s, (i, j)
    layers = None if pair is None else (pair[1], pair[0])
    return ProtocolResult(float(best), layers, pair, table)

