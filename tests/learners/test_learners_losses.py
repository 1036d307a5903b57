"""The learners' exact losses (prhsim.learners._exact_law, _losses) against independent routes from their definitions.

The factor-by-factor ``ΠX`` must equal the pair list's and the dense Π's; the exact
whitening loss must be the alignment loss of the p-whitened table computed through the
kernel operator (docs/theory.md §1.1); the exact SIGReg invariance must be a quarter of
the alignment loss. Checked on numpy, JAX and torch arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from support import assert_close
from prhsim.optima import alignment_loss
from prhsim.learners._exact_law import (
    FactorLaw,
    PairList,
    apply_factors,
    exact_law,
    exact_moments,
    exact_tables,
    pair_list,
)
from prhsim.learners._losses import make_loss
from prhsim.metrics import whiten
from prhsim.worlds import bad, gridscene, ring, view_world

SCENE = gridscene(2, objects=1)
#: A modal world whose nuisance factor is a bad view (not rank one), 2·2·3·3·8 = 288 states.
MODAL = view_world(SCENE.world, SCENE.modalities()[1], bad(0.3))


def lookup(params, states):
    return params["table"][states]


def test_the_cheaper_exact_law_is_chosen():
    assert isinstance(exact_law(MODAL, 3), FactorLaw)
    assert isinstance(exact_law(ring(16), 3), PairList)  # one factor: its stored pairs
    assert exact_law(MODAL, 3).shape == tuple(f.n for f in MODAL.factors)


def test_factors_apply_pi_as_the_dense_matrix_does():
    law = exact_law(MODAL, 3)
    X = np.random.default_rng(0).standard_normal((MODAL.n, 3))
    assert_close(apply_factors(X, law.shape, law.mats), MODAL.to_finite().Pi @ X, atol=1e-14)


@pytest.mark.parametrize("centred", [True, False])
def test_factor_and_pair_list_moments_agree(centred):
    E = np.random.default_rng(1).standard_normal((MODAL.n, 4))
    shared_pairs = {"p": MODAL.p, **exact_tables(pair_list(MODAL))}
    law = exact_law(MODAL, 4)
    shared_factors = {"p": MODAL.p, **exact_tables(law)}
    C1, A1 = exact_moments(E, shared_pairs, centred=centred)
    C2, A2 = exact_moments(E, shared_factors, centred=centred, factor_shape=law.shape)
    assert_close(C1, C2, atol=1e-13)
    assert_close(A1, A2, atol=1e-13)
    assert_close(A2, A2.T, atol=1e-13)  # π is symmetric


@pytest.mark.parametrize("library", ["numpy", "jax", "torch"])
@pytest.mark.parametrize("world", [MODAL, ring(12)], ids=["modal-factors", "ring-pairs"])
def test_exact_losses_equal_the_alignment_loss_of_the_table(world, library):
    """whiten: ``E_π‖f̃ − f̃'‖²`` of the p-whitened table (through K); sigreg's invariance: ``E_π‖f − f'‖²/4``."""
    k = 3
    F = np.random.default_rng(2).standard_normal((world.n, k)) + 0.3
    law = exact_law(world, k)
    shape = law.shape if isinstance(law, FactorLaw) else None
    shared = {"inputs": np.arange(world.n), "p": world.p, "lam": 0.0, "nominal_n": 1.0, **exact_tables(law)}
    params = {"table": F}
    convert = _converter(library)
    shared, params = convert(shared), convert(params)
    whiten_loss = make_loss("whiten", "exact", centred=True, convention="additive", apply=lookup,
                            factor_shape=shape)
    sigreg_loss = make_loss("sigreg", "exact", centred=True, convention="additive", apply=lookup,
                            factor_shape=shape)
    directions = convert({"dirs": np.eye(k)})
    assert_close(float(whiten_loss(params, {}, shared)), alignment_loss(world, whiten(F, world.p)))
    assert_close(float(sigreg_loss(params, directions, shared)), alignment_loss(world, F) / 4)


def _converter(library):
    if library == "numpy":
        return lambda tree: tree
    if library == "jax":
        jax = pytest.importorskip("jax")
        return lambda tree: jax.tree.map(jax.numpy.asarray, tree)
    torch = pytest.importorskip("torch")

    def to_torch(tree):
        if isinstance(tree, dict):
            return {key: to_torch(value) for key, value in tree.items()}
        if isinstance(tree, tuple):
            return tuple(to_torch(value) for value in tree)
        return torch.tensor(np.array(tree))
    return to_torch


def test_exact_sigreg_invariance_averaged_over_dims_is_lejepas():
    """``dims="mean"``: the invariance is E_π‖f − f'‖²/(4k), LeJEPA's code's per-coordinate mean."""
    k = 3
    F = np.random.default_rng(3).standard_normal((MODAL.n, k))
    law = exact_law(MODAL, k)
    shared = {"inputs": np.arange(MODAL.n), "p": MODAL.p, "lam": 0.0, "nominal_n": 1.0, **exact_tables(law)}
    loss = make_loss("sigreg", "exact", centred=True, convention="additive", apply=lookup, factor_shape=law.shape,
                     dims="mean")
    assert_close(float(loss({"table": F}, {"dirs": np.eye(k)}, shared)), alignment_loss(MODAL, F) / (4 * k))
    with pytest.raises(ValueError, match="unknown data mode or dims: 'exact', 'max'"):
        make_loss("sigreg", "exact", centred=True, convention="additive", apply=lookup, dims="max")
    with pytest.raises(ValueError, match="unknown SGD objective 'vicreg'; known: whiten, sigreg"):
        make_loss("vicreg", "exact", centred=True, convention="additive", apply=lookup)
