"""The learner seam: experiments take any learner; the closed form is one of them, and a learned
representation is whitened, compared, reported and checked through the same code."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from prhsim.config import resolve_run_config
from prhsim.experiments import build, render_report, rotation_uniqueness, solve
from prhsim.learners import ClosedFormLearner, Representation
from prhsim.optima import FEATURE_LIMIT, FactorFeatures
from prhsim.worlds import Modality, bad, codebook, good, path, view_world


class RotatedClosedForm:
    """A stand-in for a trained encoder: the closed form, rotated, rescaled and shifted (not whitened)."""

    name = "rotated"

    def __call__(self, world, k, *, centred=True, rng=None):
        F = ClosedFormLearner()(world, k, centred=centred).features
        gen = np.random.default_rng(world.n)
        Q, _ = np.linalg.qr(gen.normal(size=(k, k)))
        A = Q @ np.diag(gen.uniform(0.5, 3.0, size=k))
        return Representation(self.name, F @ A + gen.normal(size=k), info={"steps": 0})


def _modalities(base):
    return [codebook(base.n, 2, name="a", rng=1), codebook(base.n, 3, name="b", rng=2)]


def test_the_default_learner_is_the_closed_form():
    base = path(9)
    out = rotation_uniqueness(base, _modalities(base), [good(), good()], 2)
    explicit = rotation_uniqueness(base, _modalities(base), [good(), good()], 2, learner=ClosedFormLearner())
    tables = rotation_uniqueness(base, _modalities(base), [good(), good()], 2, learner=ClosedFormLearner(tables=True))
    assert [o.factor is not None for o in explicit.modalities] == [True, True]  # the closed form works in factor space
    for o, e, t in zip(out.modalities, explicit.modalities, tables.modalities):
        assert o.representation.learner == e.learner == t.learner == "closed" and o.optimum is not None
        assert o.factor is not None and t.factor is None  # tables=True: the full table instead
        assert o.representation.factor is o.factor and np.shares_memory(t.representation.features, t.table)
        assert t.features is t.table  # the closed form is whitened already: compared as is
        np.testing.assert_allclose(o.features, t.features, atol=1e-13, rtol=0)
        np.testing.assert_array_equal(o.features, e.features)
        assert o.loss == pytest.approx(t.loss, abs=1e-12) and o.nuisance_free == t.nuisance_free
    assert out.pairs[0].comparison.rho_p < 1e-10 and tables.pairs[0].comparison.rho_p < 1e-10
    with pytest.raises(ValueError, match="tables=True applies to the default"):
        rotation_uniqueness(base, _modalities(base), [good(), good()], 2, learner=ClosedFormLearner(), tables=True)


@pytest.mark.parametrize("views, predicted", [((good(), good()), 0.0), ((bad(0.1), good()), None)])
def test_a_learned_representation_is_whitened_and_compared(views, predicted):
    base = path(9)
    closed = rotation_uniqueness(base, _modalities(base), list(views), 3)
    learned = rotation_uniqueness(base, _modalities(base), list(views), 3, learner=RotatedClosedForm())
    for c, l in zip(closed.modalities, learned.modalities):
        assert l.optimum is None and l.representation.info == {"steps": 0}
        p = l.world.p
        mean = p @ l.features
        cov = (l.features - mean).T @ (p[:, None] * (l.features - mean))
        np.testing.assert_allclose(mean, 0, atol=1e-10)
        np.testing.assert_allclose(cov, np.eye(3), atol=1e-10)
        assert l.unique == c.unique and l.nuisance_free == c.nuisance_free
        assert l.loss == pytest.approx(c.loss, abs=1e-10)  # the alignment loss is O(k)-invariant
    # an affine image of the closed form is the closed form up to rotation: the same rho_P
    assert learned.pairs[0].comparison.rho_p == pytest.approx(closed.pairs[0].comparison.rho_p, abs=1e-9)
    if predicted is not None:
        assert learned.pairs[0].comparison.rho_p < 1e-9


def test_a_learner_with_the_wrong_shape_is_refused():
    class Wrong:
        name = "wrong"

        def __call__(self, world, k, *, centred=True, rng=None):
            return Representation(self.name, np.zeros((world.n, k + 1)))

    base = path(9)
    with pytest.raises(ValueError, match=r"learner 'wrong' returned features of shape \(18, 3\), expected \(18, 2\)"):
        rotation_uniqueness(base, _modalities(base)[:1], [good()], 2, learner=Wrong())


def test_representation_validates_its_features():
    with pytest.raises(ValueError, match="learner 'x' produced features with NaN or inf"):
        Representation("x", np.array([[np.nan]]))
    with pytest.raises(ValueError, match="must be a table"):
        Representation("x", np.zeros(3))
    with pytest.raises(ValueError, match="2 tables must name their seeds"):
        Representation("x", np.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match=r"2 table\(s\) names 3 seed\(s\)"):
        Representation("x", np.zeros((2, 3, 1)), seeds=(0, 1, 2))
    with pytest.raises(ValueError, match=r"seed_info for 1"):
        Representation("x", np.zeros((2, 3, 1)), seeds=(0, 1), seed_info=[{}])
    with pytest.raises(ValueError, match="either as a table or in factor space"):
        Representation("x")
    rep = ClosedFormLearner()(view_world(path(9), codebook(9, 2, rng=1), good()), 2)
    with pytest.raises(ValueError, match="either as a table or in factor space"):
        Representation("x", rep.features, factor=rep.factor)
    with pytest.raises(AttributeError, match="cannot assign"):
        rep.learner = "y"


def test_a_factor_space_representation_materialises_its_table_once_and_refuses_huge_worlds():
    world = view_world(path(9), codebook(9, 2, rng=1), good())
    rep = ClosedFormLearner()(world, 2)
    assert rep.k == 2 and rep.factor is not None and "factor space" in repr(rep)
    table = rep.features
    assert table is rep.features and not table.flags.writeable
    np.testing.assert_allclose(table, ClosedFormLearner(tables=True)(world, 2).features, atol=1e-13, rtol=0)
    big = tuple(SimpleNamespace(n=n) for n in (FEATURE_LIMIT, 2))  # only the factor sizes are read
    huge = Representation("x", factor=FactorFeatures(rep.factor.tables, rep.factor.index, rep.factor.scales, big))
    with pytest.raises(ValueError, match="refusing to materialise"):
        huge.features


def test_the_run_reports_and_checks_a_learned_representation():
    config = resolve_run_config({}, {"figures": False}, ["world.kind=ring", "world.n=16", "k=2", "modalities=2"])
    result = solve(config, build(config), learner=RotatedClosedForm())
    assert [m.learner for m in result.modalities] == ["rotated", "rotated"]
    assert all(m.value is None and m.eigenvalues is None and m.gap is None for m in result.modalities)
    claims = {c.claim for c in result.checks}
    assert "Ky Fan: L(F*) = 2 sum(1 - mu)" not in claims and "nuisance-free k_Z (merge rule)" in claims
    assert not result.failures
    text = io.StringIO()
    render_report(result, Console(file=text, width=200))
    assert "n/a" in text.getvalue() and "all" in text.getvalue()


class Recorder:
    """Records the generator each modality's learner receives; returns the closed form plus noise."""

    name = "noisy"

    def __init__(self, noise: float = 0.0, collapsed: bool = False, constant: bool = False):
        self.noise, self.collapsed, self.constant, self.draws = noise, collapsed, constant, []

    def __call__(self, world, k, *, centred=True, rng=None):
        self.draws.append(int(rng.integers(2**62)))
        F = ClosedFormLearner()(world, k, centred=centred).features
        if self.constant:
            F = np.ones_like(F)
        F = F + self.noise * np.random.default_rng(world.n).normal(size=F.shape)
        return Representation(self.name, F, info={"collapsed": self.collapsed})


def test_each_modality_gets_its_own_stream():
    base = path(9)
    recorder = Recorder()
    rotation_uniqueness(base, _modalities(base), [good(), good()], 2, learner=recorder, rng=7)
    again = Recorder()
    rotation_uniqueness(base, _modalities(base), [good(), good()], 2, learner=again, rng=7)
    assert len(set(recorder.draws)) == 2 and recorder.draws == again.draws


@pytest.mark.parametrize("learner", [Recorder(collapsed=True), Recorder(constant=True)])
def test_a_collapsed_representation_gets_no_prediction(learner):
    config = resolve_run_config({}, {"figures": False}, ["world.kind=ring", "world.n=16", "k=2", "modalities=2"])
    result = solve(config, build(config), learner=learner)
    assert all(m.collapsed for m in result.modalities)
    assert all(p.predicted_rho_p is None for p in result.pairs)
    assert not result.failures
    platonic = result.checks[0]
    assert platonic.verdict == "N/A" and "collapsed" in platonic.predicted


@pytest.mark.parametrize("noise, verdict", [(1e-3, "PASS"), (0.3, "FAIL")])
def test_learned_representations_are_checked_within_the_learned_tolerance(noise, verdict):
    config = resolve_run_config({}, {"figures": False}, ["world.kind=ring", "world.n=16", "k=2", "modalities=2"])
    result = solve(config, build(config), learner=Recorder(noise=noise))
    rho = next(c for c in result.checks if c.claim.startswith("rho_P"))
    assert result.checks[0].claim == "platonic: every rho_P < 0.05"
    assert rho.verdict == verdict, (rho, result.pairs)


def test_the_run_s_learner_choices_come_from_the_registry():
    """config's --learner choices are LEARNERS' names and "all"; "all" trains every SGD learner, in order."""
    from click.testing import CliRunner

    from prhsim.cli import main
    from prhsim.config import LEARNER_CHOICES, RunConfig
    from prhsim.learners import LEARNERS, SGD_OBJECTIVES

    assert LEARNER_CHOICES == (*LEARNERS, "all")
    assert SGD_OBJECTIVES == tuple(n for n, kind in LEARNERS.items() if kind.sgd) == ("whiten", "sigreg")
    assert RunConfig(learner="all").sgd_learners == list(SGD_OBJECTIVES)
    assert [RunConfig(learner=n).sgd_learners for n in LEARNERS] == [[], ["whiten"], ["sigreg"]]
    assert not LEARNERS["sigreg"].covered and LEARNERS["whiten"].covered
    help_text = CliRunner().invoke(main, ["run", "--help"]).output
    assert all(name in help_text for name in LEARNER_CHOICES)


def test_a_representation_pickles_and_copies_whole():
    import copy
    import pickle

    world = view_world(path(9), Modality("m", [0.25, 0.75]), good())  # renderer-free: the world pickles too
    reps = (ClosedFormLearner()(world, 2), ClosedFormLearner(tables=True)(world, 2))
    assert reps[0].factor is not None and reps[1].factor is None
    for rep in reps:
        rep.features  # materialised once: the copy keeps the table beside the factors
        for again in (pickle.loads(pickle.dumps(rep)), copy.deepcopy(rep)):
            assert again.learner == rep.learner and again.k == rep.k and (again.factor is None) == (rep.factor is None)
            np.testing.assert_array_equal(again.features, rep.features)
            assert not again.features.flags.writeable
            with pytest.raises(AttributeError, match="cannot assign"):
                again.learner = "x"


def test_a_run_with_tables_takes_a_learner_of_its_own():
    """solve() with training tables set and a learner given: the learner decides (no refusal of tables=True)."""
    config = resolve_run_config({}, {"figures": False}, ["world.kind=ring", "world.n=16", "k=2", "modalities=2",
                                                        "tables=true"])
    result = solve(config, build(config), learner=RotatedClosedForm())
    assert [m.learner for m in result.modalities] == ["rotated", "rotated"]


def test_an_sgd_learner_returns_one_table_per_seed():
    """The seed axis: seeds=(3, 5) gives two tables, the second that of a call with seed 5 alone (seeds train
    independently of how they are grouped), each seed's own info, and the whole training record."""
    pytest.importorskip("jax", reason="the SGD learner trains in JAX (the jax extra)")
    pytest.importorskip("optax", reason="the SGD learner trains with optax (the jax extra)")
    from prhsim.learners import SGDLearner, TrainConfig
    from prhsim.worlds import ring

    learner = SGDLearner(TrainConfig(steps=40, lr=0.1, log_every=20))
    rep = learner(ring(12), 2, seeds=(3, 5))
    assert rep.features.shape == (2, 12, 2) and rep.seeds == (3, 5) and rep.n_seeds == 2
    assert rep.result.seeds == (3, 5) and rep.info["steps"] == 40 and "seed" not in rep.info
    alone = learner(ring(12), 2, rng=5)
    np.testing.assert_allclose(rep.table(1), alone.table(0), rtol=0, atol=1e-5)  # float32 steps, vmapped or not
    second = rep.seed(1)
    assert second.seeds == (5,) and second.info["seed"] == 5 and second.info["steps"] == 40
    assert second.info["loss"] == rep.seed_info[1]["loss"] == pytest.approx(float(rep.result.loss[1, -1]))
    np.testing.assert_array_equal(second.features[0], rep.features[1])
    with pytest.raises(IndexError, match="seed index 2 out of range for 2"):
        rep.seed(2)


def test_rotation_uniqueness_refuses_several_seeds_from_one_call():
    class TwoSeeds:
        name = "two"

        def __call__(self, world, k, *, centred=True, rng=None, seeds=None):
            F = ClosedFormLearner(tables=True)(world, k, centred=centred).table()
            return Representation(self.name, np.stack([F, F]), seeds=(0, 1))

    base = path(9)
    with pytest.raises(ValueError, match="learner 'two' returned 2 seeds for one call without seeds"):
        rotation_uniqueness(base, _modalities(base)[:1], [good()], 2, learner=TwoSeeds())


def test_a_representation_shares_a_write_protected_table_and_copies_a_writable_one():
    frozen = np.arange(12.0).reshape(2, 3, 2)
    frozen.setflags(write=False)
    shared = Representation("x", frozen, seeds=(0, 1))
    assert np.shares_memory(shared.features, frozen)  # a training result's features are not held twice
    writable = np.arange(6.0).reshape(3, 2)
    copied = Representation("x", writable)
    assert not np.shares_memory(copied.features, writable) and writable.flags.writeable
    writable[0, 0] = 99.0
    assert copied.features[0, 0, 0] == 0.0
