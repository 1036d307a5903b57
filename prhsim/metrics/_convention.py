"""Which definition of a sample metric: prhsim's own, or the PRH code's (docs/prh.md, "Conventions").

``convention="prhsim"`` (the default) is the definition of docs/theory.md §10.
``convention="prh"`` is the value the public Platonic Representation Hypothesis code
computes for the metrics it has, on the rows it is given:

* CKA (linear, RBF, unbiased): ``HSIC(K, L)/(√(HSIC(K, K)·HSIC(L, L)) + 10⁻⁶)``, the
  biased HSIC ``tr(KHLH)`` or the unbiased one of Song et al.; RBF kernels with a fixed
  bandwidth σ = 1 (not a multiple of the median distance);
* CKNNA: the unbiased HSIC of the neighbour-masked, uncentred kernels (not the
  double-centred alignment of prhsim's definition), with the same 10⁻⁶;
* SVCCA: columns standardised (``(x − mean)/(std + 10⁻⁸)``, std with N − 1), the top 10
  left singular vectors of each side by an exact SVD (the PRH code draws them with a
  randomised SVD, whose value moves from seed to seed), the mean canonical correlation;
* the protocol's ``tensor`` clip: the order statistic ``sort(|x|)[⌊q·numel⌋]`` (0-based),
  not an interpolated quantile;
* mutual and cycle k-NN (and CKNNA's neighbours): ranked by the inner product of the rows
  as given, where prhsim ranks by cosine; the same lists on the L2-normalised rows the
  protocol scores.

Every metric computes in its input's precision (float32 stays float32, as in the PRH
code, which scores float32 features); the errors (a zero row for prhsim's cosine, a
constant side for CKA) stay prhsim's.
"""

from __future__ import annotations

from typing import Any, Literal

Convention = Literal["prhsim", "prh"]
#: The conventions, the default first.
CONVENTIONS: tuple[Convention, ...] = ("prhsim", "prh")
#: What the PRH code adds to every CKA-type denominator.
PRH_EPS = 1e-6
#: The PRH code's fixed RBF bandwidth σ.
PRH_RBF_SIGMA = 1.0
#: The PRH code's SVCCA directions per side, and the epsilon of its column standardisation.
PRH_CCA_DIM = 10
PRH_STD_EPS = 1e-8


def check_convention(convention: Any) -> Convention:
    """``convention`` if it names one of :data:`CONVENTIONS`; a one-line ValueError otherwise."""
    if not isinstance(convention, str) or convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(map(repr, CONVENTIONS))}, got {convention!r}")
    return convention  # type: ignore[return-value]
