"""Rotation uniqueness across modalities: the theorem and its failure under bad views (docs/theory.md §2, §4)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support import assert_close
from prhsim.experiments import merge_rule, predicted_rho, rotation_uniqueness
from prhsim.optima import top_eigenpairs
from prhsim.worlds import Modality, bad, codebook, good, gridscene, random_world


@pytest.fixture(scope="module")
def scene():
    return gridscene()


@pytest.fixture(scope="module")
def good_run(scene):
    return rotation_uniqueness(scene.world, scene.modalities(rng=0), [good()] * 3)


def test_good_views_of_one_pi_give_one_representation(good_run):
    assert good_run.k == 10 and good_run.base_gap > 0.08
    for m in good_run.modalities:
        assert m.optimum.unique and m.nuisance_free == 10
        assert_close(m.loss, m.optimum.value)
    for pair in good_run.pairs:
        assert pair.comparison.rho_p < 1e-8 and pair.comparison.s_theta < 1e-8
        assert pair.predicted_rho == 0.0
        assert_close(pair.comparison.correlations, np.ones(10), atol=1e-10)


def test_bad_views_give_the_predicted_misalignment(scene):
    """bad(0.1): k_Z = 7 (pixels, |N|=4), 3 (caption, |N|=8), 8 (symbolic, |N|=3) of k = 10."""
    out = rotation_uniqueness(scene.world, scene.modalities(rng=0), [good(), bad(0.1), bad(0.1)])
    kz = {m.name: (m.predicted.nuisance_free, m.nuisance_free) for m in out.modalities}
    assert kz == {"pixels": (10, 10), "caption": (3, 3), "symbolic": (8, 8)}
    rho = {(p.a, p.b): p.comparison.rho_p for p in out.pairs}
    assert_close(rho[("pixels", "caption")], np.sqrt(2 * 7 / 10), atol=1e-10)
    assert_close(rho[("pixels", "symbolic")], np.sqrt(2 * 2 / 10), atol=1e-10)
    assert_close(rho[("caption", "symbolic")], np.sqrt(2 * 7 / 10), atol=1e-10)
    for pair in out.pairs:
        assert_close(pair.comparison.rho_p, pair.predicted_rho, atol=1e-10)
    for m in out.modalities:
        assert_close(m.optimum.eigenvalues, m.predicted.values, atol=1e-12)


@given(seed=st.integers(0, 1000), eps=st.floats(0.05, 0.95), n_nuis=st.integers(2, 4))
@settings(max_examples=25)
def test_bad_against_good_matches_prediction_on_random_worlds(seed, eps, n_nuis):
    base = random_world(12, rng=seed, self_loop=2.0)  # self-loops: a PSD-leaning kernel with slow features
    mods = [codebook(base.n, 2, name="image", rng=seed), codebook(base.n, n_nuis, name="text", rng=seed + 1)]
    out = rotation_uniqueness(base, mods, [good(), bad(eps)], k=3)
    text = out.modalities[1]
    pair = out.pairs[0]
    assert_close(text.optimum.eigenvalues, text.predicted.values, atol=1e-10)
    if pair.predicted_rho is not None:
        assert text.nuisance_free == text.predicted.nuisance_free
        assert_close(pair.comparison.rho_p, pair.predicted_rho, atol=1e-8)
        assert_close(pair.predicted_rho, np.sqrt(2 * (3 - text.nuisance_free) / 3))


def test_merge_rule_by_hand():
    base = np.array([1.0, 0.9, 0.8, 0.5, 0.4])
    pred = merge_rule(base, bad(0.15), n_nuisance=3, k=3)  # nuisance copies at 0.85, 0.85, 0.765 ...
    assert_close(pred.values, [0.9, 0.85, 0.85, 0.8])
    assert pred.nuisance_free == 1
    assert merge_rule(base, good(), 3, 3).nuisance_free == 3
    tie = merge_rule(np.array([1.0, 0.8, 0.5, 0.4, 0.3]), bad(0.2), 2, 1)  # 0.8 (free) vs 0.8 (nuisance)
    assert tie.nuisance_free is None
    assert predicted_rho(4, 4, None) is None and predicted_rho(4, 2, 3) == pytest.approx(1.0)


def test_same_modal_spectrum_as_dense_eigh():
    base = random_world(6, rng=3)
    mods = [codebook(base.n, 3, rng=4)]
    out = rotation_uniqueness(base, mods, [bad(0.3)], k=4)
    modal = out.modalities[0].world
    lam = np.sort(np.linalg.eigvalsh(modal.kernel_matrix()))[::-1]
    assert_close(out.modalities[0].optimum.eigenvalues, lam[1:6])
    assert_close(top_eigenpairs(modal, 5, backend="dense").values, lam[1:6])


def test_non_injective_renderer_is_refused():
    base = random_world(5, rng=0)
    blind = Modality("blind", np.array([0.5, 0.5]), lambda z, n: np.stack([z], axis=1))  # ignores n
    with pytest.raises(ValueError, match="renderer of modality 'blind' is not injective"):
        rotation_uniqueness(base, [blind], [good()])


def test_input_validation():
    base = random_world(6, rng=0)
    m = codebook(6, 2, rng=0)
    with pytest.raises(ValueError, match="one view per modality"):
        rotation_uniqueness(base, [m], [good(), good()])
    with pytest.raises(ValueError, match="distinct"):
        rotation_uniqueness(base, [m, m], [good(), good()])


@pytest.mark.parametrize("values, message", [
    ([0.9, 0.8, 0.5, 0.4, 0.3], r"needs the uncentred spectrum of K_Z \(lambda_1 = 1.*got base_values\[0\] = 0\.9"),
    ([1.0, 0.5, 0.8, 0.4, 0.3], r"descending order; got base_values\[1\] = 0\.5 < base_values\[2\] = 0\.8"),
    ([1.0, 0.8, -np.inf, 0.4, 0.3], r"-inf padding only at the end; got base_values\[3\] = 0\.4"),
    ([1.0, 0.8, np.nan, 0.4, 0.3], r"finite eigenvalues.*got base_values\[2\] = nan"),
])
def test_merge_rule_refuses_anything_but_the_uncentred_spectrum(values, message):
    with pytest.raises(ValueError, match=message):
        merge_rule(np.array(values), bad(0.2), 2, 2)


def test_merge_rule_refuses_the_centred_spectrum_it_would_mispredict():
    base = random_world(10, rng=1, self_loop=2.0)
    centred = top_eigenpairs(base, 6, centred=True).values
    with pytest.raises(ValueError, match="uncentred spectrum of K_Z"):
        merge_rule(centred, bad(0.3), 3, 4)


def test_merge_rule_takes_the_world_itself_and_pads_short_spectra():
    base = random_world(5, rng=2)
    values = top_eigenpairs(base, 5, centred=False).values
    from_world = merge_rule(base, bad(0.3), 3, 4)
    by_hand = merge_rule(np.concatenate([values, [-np.inf]]), bad(0.3), 3, 4)  # k+2 = 6 > n = 5
    assert_close(from_world.values, by_hand.values, atol=0)
    assert from_world.nuisance_free == by_hand.nuisance_free


@given(seed=st.integers(0, 1000), eps=st.floats(0.05, 0.95))
@settings(max_examples=15)
def test_renderer_free_modalities_give_the_same_outcome(seed, eps):
    """Only q and the view enter the mathematics: dropping the renderers changes no number."""
    base = random_world(10, rng=seed, self_loop=2.0)
    coded = [codebook(base.n, 2, name="image", rng=seed), codebook(base.n, 3, name="text", rng=seed + 1)]
    free = [Modality(m.name, m.nuisance) for m in coded]
    a = rotation_uniqueness(base, coded, [good(), bad(eps)], k=3)
    b = rotation_uniqueness(base, free, [good(), bad(eps)], k=3)
    assert b.modalities[1].injectivity.exhaustive and b.modalities[1].injectivity.injective
    assert_close(b.pairs[0].comparison.rho_p, a.pairs[0].comparison.rho_p, atol=1e-12)
    for ma, mb in zip(a.modalities, b.modalities):
        assert_close(mb.optimum.eigenvalues, ma.optimum.eigenvalues, atol=0)
        assert mb.nuisance_free == ma.nuisance_free and mb.predicted.nuisance_free == ma.predicted.nuisance_free


def test_modalities_of_another_world_are_refused_before_any_work(scene):
    base = random_world(8, rng=0)
    with pytest.raises(ValueError, match=r"modality 'pixels' renders a world of 20,736 states, but the base world has 8"):
        rotation_uniqueness(base, scene.modalities(rng=0)[:1], [good()])
    with pytest.raises(ValueError, match=r"modality 'codebook' renders a world of 5 states, but the base world has 8"):
        rotation_uniqueness(base, [codebook(5, 2, rng=0)], [good()])
