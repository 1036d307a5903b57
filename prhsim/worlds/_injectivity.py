"""The injectivity check: is (z, n) ↦ g_m(z, n) injective on Z x N_m? (docs/theory.md §0)

The theorem needs g_m injective in (z, n) (§0): an encoder of the observation
can then be any function of (z, n). :func:`injectivity_check` decides it one of
three ways, and says which in :class:`InjectivityReport`:

* **renderer-free**: a modality without a renderer observes (z, n) itself,
  injective by construction; nothing is rendered;
* **by parts**, when the modality declares its renderer as
  :class:`~prhsim.worlds._modality.Parts`: injectivity then follows from the
  renders of the parts alone, ``Σ_o |Z_{S_o}|·|N|`` small renders instead of
  ``|Z|·|N|`` observations (the proof is in ``Parts``, the decision in
  :mod:`prhsim.worlds._injectivity_parts`);
* **generically** otherwise, or when the parts do not decide: it renders every
  (z, n) (above ``limit`` states, :data:`FULL_CHECK_LIMIT` by default, a uniform
  sample of ``limit`` states) in chunks, hashes each observation to a 64-bit key, sorts the keys and compares
  the observations of every key shared by two states exactly
  (:mod:`prhsim.worlds._equal_renders`), so that a hash collision can never be
  reported as a collision of observations. Memory: about 32 bytes per state
  checked and two chunks of renders (:func:`_ensure_check_fits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from prhsim._budget import FLOAT, ensure_fits
from prhsim._rng import RngLike, check_rng
from prhsim.worlds._equal_renders import CHUNK, exact_pairs
from prhsim.worlds._injectivity_parts import decide_by_parts
from prhsim.worlds._modality import Modality

#: Above this many (z, n) states the generic injectivity check hashes a random sample.
FULL_CHECK_LIMIT = 400_000


@dataclass(frozen=True)
class InjectivityReport:
    """What :func:`injectivity_check` found.

    Attributes:
        modality: the modality's name.
        checked: how many (z, n) states the verdict covers: the states rendered by the
            generic check, or all of Z x N_m (unrendered) when decided by parts or for a
            renderer-free modality.
        exhaustive: True when the verdict covers every state of Z x N_m (every method but "sampled").
        collisions: up to ``max_report`` pairs ``((z, n), (z', n'))`` with equal observations
            (each pair checked by rendering both states).
        method: how it was decided: "exhaustive" (every state rendered and compared), "parts"
            (from the renders of the declared parts, :class:`~prhsim.worlds._modality.Parts`),
            "sampled" (a random sample rendered and compared) or "renderer-free" (injective by
            construction). Default: "exhaustive" or "sampled", following ``exhaustive``.
    """

    modality: str
    checked: int
    exhaustive: bool
    collisions: tuple[tuple[tuple[int, int], tuple[int, int]], ...]
    method: str | None = None

    METHODS: ClassVar[tuple[str, ...]] = ("exhaustive", "parts", "sampled", "renderer-free")

    def __post_init__(self) -> None:
        method = self.method
        if method is None:
            method = "exhaustive" if self.exhaustive else "sampled"
        if method not in self.METHODS:
            raise ValueError(f"injectivity report: method must be one of {self.METHODS}, got {method!r}")
        if (method == "sampled") == bool(self.exhaustive):
            raise ValueError(f"injectivity report: method {method!r} contradicts exhaustive={self.exhaustive}")
        object.__setattr__(self, "method", method)

    @property
    def injective(self) -> bool:
        return not self.collisions

    def raise_if_not_injective(self) -> None:
        if self.collisions:
            (z, n), (z2, n2) = self.collisions[0]
            raise ValueError(
                f"renderer of modality {self.modality!r} is not injective: (z={z}, n={n}) and "
                f"(z={z2}, n={n2}) render the same observation ({len(self.collisions)} colliding pair(s) reported)"
            )


def _ensure_check_fits(modality: Modality, total: int, checked: int, decimals: int | None) -> None:
    """Guard the generic check: per state checked, its index, key, sort order and sorted key (4 x 8 bytes);
    up to two chunks of renders with their rounded copies and uint64 words; the sample."""
    first = modality.render_states(np.zeros(1, dtype=np.int64))
    row_bytes = first.size * (FLOAT if decimals is not None else first.itemsize)
    word_bytes = 8 * max(1, -(-row_bytes // 8))
    sampling = FLOAT * min(total, 50 * checked) if checked < total else 0  # numpy's choice may shuffle an arange
    what = f"the injectivity check of modality {modality.name!r} ({checked:,} observations of {row_bytes:,} bytes)"
    chunk = min(CHUNK, checked)
    ensure_fits(checked * 4.0 * FLOAT + sampling + 2.0 * chunk * (first.nbytes + row_bytes + word_bytes + FLOAT),
                what, "lower limit (the number of states checked)")


def injectivity_check(
    modality: Modality,
    n_states: int,
    *,
    decimals: int | None = None,
    limit: int = FULL_CHECK_LIMIT,
    max_report: int = 10,
    rng: RngLike = None,
    by_parts: bool = True,
) -> InjectivityReport:
    """Decide whether (z, n) ↦ observation is injective on Z x N_m, and report colliding pairs.

    Observations are compared exactly (byte for byte), or after rounding to
    ``decimals`` when given (a conservative check for float renderers; -0.0 counts as 0.0).

    * A renderer-free modality is injective by construction: nothing is rendered
      (``method="renderer-free"``).
    * A modality declared by :class:`~prhsim.worlds._modality.Parts` is decided from the renders of its parts
      (``method="parts"``, every state covered) whenever the structure decides it, which
      it always does for gridscene; ``by_parts=False`` skips this.
    * Otherwise every (z, n) is rendered, in chunks, and hashed to a 64-bit key; states
      sharing a key are rendered again and compared exactly, so a hash collision is
      never reported (``method="exhaustive"``). Above ``limit`` states a uniform
      sample of ``limit`` states is checked instead (``method="sampled"``,
      ``exhaustive=False``). Memory: about 32 bytes per state checked and two chunks
      of renders, never all renders at once.

    Collisions are reported as pairs ``((z, n), (z', n'))``: from the generic check, each
    state paired with the smallest state rendering alike, the first ``max_report`` pairs
    in order; from the parts, up to ``max_report`` witnesses, each confirmed by rendering.

    Raises:
        ValueError: if the modality renders another number of base states, or its
            renderer returns another number of rows than states.
    """
    modality.check_base(n_states)
    if int(max_report) != max_report or max_report < 1:
        raise ValueError(f"max_report must be an integer >= 1, got {max_report}")
    total = n_states * modality.n_nuisance
    if modality.renderer_free:
        return InjectivityReport(modality.name, int(total), True, (), method="renderer-free")
    if by_parts and modality.parts is not None:
        collisions = decide_by_parts(modality, decimals, int(max_report))
        if collisions is not None:  # every state covered, none rendered but the witnesses
            return InjectivityReport(modality.name, int(total), True, collisions, method="parts")
    checked = min(total, limit)
    _ensure_check_fits(modality, total, checked, decimals)
    if total <= limit:
        states = np.arange(total, dtype=np.int64)
        exhaustive = True
    else:
        states = np.sort(check_rng(rng).choice(total, size=limit, replace=False))
        exhaustive = False
    firsts, others = exact_pairs(modality.render_states, states, decimals)
    nn = modality.n_nuisance
    collisions = tuple(((int(a // nn), int(a % nn)), (int(b // nn), int(b % nn)))
                       for a, b in zip(firsts[:max_report], others[:max_report]))
    return InjectivityReport(modality.name, int(states.size), exhaustive, collisions)
