"""Modalities, injectivity and views (THEORY §4)."""

import numpy as np
import pytest

from conftest import assert_close, dense
from prhsim.worlds import (
    Modality,
    ProductWorld,
    bad,
    caption_vocabulary,
    codebook,
    good,
    gridscene,
    injectivity_check,
    random_world,
    ring,
    same_sample,
    view_world,
)


@pytest.fixture(scope="module")
def small_scene():
    return gridscene(size=3, objects=2, shapes=2, colours=2)


def test_gridscene_modalities_are_injective_exhaustively(small_scene):
    for m in small_scene.modalities(rng=0):
        report = injectivity_check(m, small_scene.n)
        assert report.exhaustive and report.checked == small_scene.n * m.n_nuisance
        assert report.injective, (m.name, report.collisions)


def test_gridscene_default_size_and_decode():
    scene = gridscene()
    assert scene.n == 20736 and scene.world.shape == (4, 4, 3, 3) * 2
    attrs = scene.decode(np.array([scene.n - 1]))
    assert attrs["col"].tolist() == [[3, 3]] and attrs["shape"].tolist() == [[2, 2]]


def test_caption_reads_as_its_template(small_scene):
    cap = small_scene.modalities(rng=0)[1]
    vocab = caption_vocabulary(small_scene)
    tokens = cap.render(np.array([0]), np.array([0]))[0]
    words = [vocab[t] for t in tokens]
    assert words[:9] == ["alpha", "red", "square", "at", "row", "zero", "column", "zero", ";"]
    reversed_order = [vocab[t] for t in cap.render(np.array([0]), np.array([2]))[0]]
    assert reversed_order[0] == "beta"


def test_non_injective_renderer_is_reported_and_raises():
    def render(z, n):  # ignores the nuisance: (z, 0) and (z, 1) collide
        return np.stack([z, z], axis=1)

    m = Modality("lossy", np.array([0.5, 0.5]), render)
    report = injectivity_check(m, 4)
    assert not report.injective
    assert report.collisions[0] == ((0, 0), (0, 1))
    with pytest.raises(ValueError, match="not injective.*z=0, n=0"):
        report.raise_if_not_injective()


def test_injectivity_samples_huge_spaces():
    m = codebook(10_000, 3, rng=0)
    report = injectivity_check(m, 10_000, limit=5_000)
    assert not report.exhaustive and report.checked == 5_000 and report.injective


def test_modality_rejects_bad_nuisance_law():
    with pytest.raises(ValueError, match="nuisance law"):
        Modality("x", np.array([0.5, 0.6]), lambda z, n: z)


def test_good_view_kernel_is_B_KZ_Bt():
    base = random_world(6, rng=0)
    m = codebook(base.n, 3, rng=1)
    w = view_world(base, m, good())
    q = m.nuisance
    B = np.zeros((base.n * q.size, base.n))
    for z in range(base.n):
        B[z * q.size:(z + 1) * q.size, z] = np.sqrt(q)
    assert_close(B.T @ B, np.eye(base.n))
    assert_close(w.kernel_matrix(), B @ dense(base.kernel_matrix()) @ B.T)
    assert_close(w.p, np.kron(base.p, q))


def test_bad_view_kernel_spectrum_is_product():
    base = random_world(5, rng=2)
    m = codebook(base.n, 4, rng=3)
    eps = 0.3
    w = view_world(base, m, bad(eps))
    lam = np.linalg.eigvalsh(dense(base.kernel_matrix()))
    expected = np.sort(np.concatenate([lam, np.repeat((1 - eps) * lam, 3)]))
    assert_close(np.sort(np.linalg.eigvalsh(w.kernel_matrix())), expected)
    assert isinstance(w, ProductWorld) and w.n == 20


def test_views_validate_eps():
    with pytest.raises(ValueError, match="eps"):
        bad(0.0)
    with pytest.raises(ValueError, match="eps"):
        bad(1.5)


def test_same_sample_mixture_keeps_eigenvectors():
    """(x, x) w.p. 1-eps is not a bad view: K' = (1-eps) I + eps K, same eigenvectors, gaps x eps."""
    base = random_world(8, rng=4)
    mixed = same_sample(base, 0.25)
    K, K2 = dense(base.kernel_matrix()), dense(mixed.kernel_matrix())
    assert_close(K2, 0.75 * np.eye(8) + 0.25 * K)
    vals, vecs = np.linalg.eigh(K)
    assert_close(K2 @ vecs, vecs * (0.75 + 0.25 * vals))
    sparse_mixed = same_sample(ring(600), 0.5)
    assert sparse_mixed.is_sparse


def test_modality_without_nuisance_gives_the_base_spectrum():
    base = random_world(7, rng=5)
    w = view_world(base, codebook(base.n, 1, rng=0), bad(0.5))
    assert w.shape == (7, 1)
    assert_close(np.sort(np.linalg.eigvalsh(w.kernel_matrix())), np.sort(np.linalg.eigvalsh(base.kernel_matrix())))
