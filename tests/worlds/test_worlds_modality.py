"""Modalities, injectivity and views (docs/theory.md §4)."""

import numpy as np
import pytest

from support import assert_close, dense
from prhsim.experiments import rotation_uniqueness
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
        # pixels and caption are declared by parts and decided from them; symbolic is rendered in full
        assert report.method == ("exhaustive" if m.name == "symbolic" else "parts")
        rendered = injectivity_check(m, small_scene.n, by_parts=False)
        assert rendered.method == "exhaustive" and rendered.injective


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
    assert not report.exhaustive and report.checked == 5_000 and report.injective and report.method == "sampled"


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


def test_renderer_free_modality_is_the_pair_itself():
    m = Modality("text", [0.2, 0.3, 0.5])
    assert m.renderer_free and m.n_states is None
    obs = m.render_states(np.arange(12))
    assert obs.tolist() == [[z, n] for z in range(4) for n in range(3)]
    report = injectivity_check(m, 10**9)  # nothing rendered, however large
    assert report.injective and report.exhaustive and report.checked == 3 * 10**9


def test_renderer_free_modality_gives_the_same_world_as_a_rendered_one():
    """The modal world depends only on q and the view (§4): the renderer plays no part in it."""
    base = random_world(6, rng=7)
    coded = codebook(base.n, 3, rng=2)
    free = Modality("free", coded.nuisance)
    a, b = view_world(base, free, bad(0.4)), view_world(base, coded, bad(0.4))
    assert_close(a.kernel_matrix(), b.kernel_matrix(), atol=0)
    assert_close(a.p, b.p, atol=0)


def test_renderer_returning_the_wrong_number_of_rows_is_a_shape_error():
    short = Modality("x", np.array([0.5, 0.5]), lambda z, n: np.stack([z, n], axis=1)[:5])
    with pytest.raises(ValueError, match=r"renderer of modality 'x' returned 5 rows for 8 states"):
        injectivity_check(short, 4)
    with pytest.raises(ValueError, match=r"renderer of modality 'x' returned 5 rows for 6 states"):
        short.render_states(np.arange(6))
    scalar = Modality("y", np.array([1.0]), lambda z, n: 3)
    with pytest.raises(ValueError, match=r"renderer of modality 'y' returned a scalar for 1 states"):
        injectivity_check(scalar, 4)


def test_codebook_refuses_states_outside_its_book():
    m = codebook(5, 2, rng=0)
    assert m.n_states == 5
    with pytest.raises(ValueError, match=r"codebook 'codebook' has 5 states; got z = 7"):
        m.render(np.array([1, 7]), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"has 2 nuisance values; got n = 2"):
        m.render(np.array([1]), np.array([2]))
    with pytest.raises(ValueError, match=r"has 5 states; got z = -1"):
        m.render(np.array([-1]), np.array([0]))
    with pytest.raises(ValueError, match="codebook n_nuisance must be an integer >= 1, got 0"):
        codebook(5, 0)


def test_modality_for_another_world_size_is_refused(small_scene):
    base = random_world(8, rng=0)
    with pytest.raises(ValueError, match=r"modality 'codebook' renders a world of 5 states, but the base world has 8$"):
        view_world(base, codebook(5, 2, rng=0), good())
    with pytest.raises(ValueError, match=r"modality 'codebook' renders a world of 5 states, but the base world has 8"):
        injectivity_check(codebook(5, 2, rng=0), 8)
    for m in small_scene.modalities(rng=0):
        assert m.n_states == small_scene.n
        with pytest.raises(ValueError, match=rf"modality '{m.name}' renders a world of {small_scene.n:,} states, "
                                             r"but the base world has 8"):
            view_world(base, m, good())
    assert view_world(small_scene.world, small_scene.modalities(rng=0)[0], good()).n == small_scene.n * 4


def test_gridscene_modalities_refuse_a_world_of_the_same_size_but_other_factors():
    scene = gridscene(2, 1, 2, 2)  # 16 states, factors (2, 2, 2, 2)
    for m in scene.modalities(rng=0):
        assert m.factor_sizes == (2, 2, 2, 2)
        with pytest.raises(ValueError, match=rf"modality '{m.name}' renders a product world of factors "
                                             r"\(2, 2, 2, 2\), but the base world has factors \(16,\)"):
            view_world(ring(16), m, good())
        with pytest.raises(ValueError, match="renders a product world of factors"):
            rotation_uniqueness(ring(16), [m], [good()], 2)
        assert view_world(scene.world, m, good()).n == 16 * m.n_nuisance


def test_modality_n_states_is_validated():
    with pytest.raises(ValueError, match=r"modality 'x': n_states must be an integer >= 1, got 0"):
        Modality("x", [1.0], n_states=0)


def test_gridscene_records_are_immutable(small_scene):
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        small_scene.size = 5
    assert isinstance(small_scene.move, tuple) and all(isinstance(m, tuple) for m in small_scene.move)
    for f in small_scene.world.factors:
        with pytest.raises(ValueError, match="read-only"):
            f.p[0] = 0.5
    with pytest.raises(ValueError, match="read-only"):
        small_scene.world.p[0] = 0.5
    m = small_scene.modalities(rng=0)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n_states = 3
    with pytest.raises(ValueError, match="read-only"):
        m.nuisance[0] = 0.5
