"""The sample-ratio map: each cell recomputed from its definition (its world, its captions, its nested draws), the
closed forms' shares, the figure, and the settings' refusals."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from support import untimed

from prhsim.config import CaptionConfig, GridSceneWorld
from prhsim.experiments._caption_alignment import caption_target
from prhsim.experiments._caption_prediction import OneCaptionScorer, nested_scores, predicted_alignment
from prhsim.experiments.sweeps._sample_efficiency import closed_form_alignment, draw_records
from prhsim.experiments.sweeps._sample_ratio import SampleRatioSettings, sample_ratio_map
from prhsim.experiments.sweeps._sample_ratios import bootstrap_ratio
from prhsim.worlds import CaptionStyle, Records, SpanLaw, gridscene

WORLD = GridSceneWorld(size=2, objects=1, shapes=2, colours=2)
CAPTIONS = CaptionConfig(wording=["synonyms"])
BUDGETS = (20, 60, 200)


@pytest.fixture(scope="module")
def small_map():
    return sample_ratio_map(WORLD, CAPTIONS, x="dependence", x_values=(0.0, 0.6), y="omission", y_values=(0.0, 0.3),
                            budgets=BUDGETS, n_draws=3, k=4, min_span=5, closed_forms=True, rng=2)


def test_a_cell_is_its_world_its_captions_and_its_nested_draws(small_map):
    cell = next(c for c in small_map.cells if c.x == 0.6 and c.y == 0.3)
    scene = gridscene(2, 1, 2, 2, dependence=0.6)
    target = caption_target(scene, k=4, style=CaptionStyle(("synonyms",), omission=0.3),
                            rng=np.random.default_rng([2, 0]))
    rows = {}
    for t, task in enumerate(("good", "bad", "ntp")):
        scorer = OneCaptionScorer(target, task)
        values = np.empty((3, len(BUDGETS)))
        for d in range(3):
            full = draw_records(scene, target, task, BUDGETS[-1], "world", np.random.default_rng([2, t + 1, d]))
            values[d] = nested_scores(target, task, SpanLaw(5), 4, full, BUDGETS, scorer=scorer)
            if d == 0:  # the nested fit at a budget is the fit on the first N records (its moments to 1e-13)
                part = Records(full.states[:60], full.nuisance[:60], full.tokens[:60], full.pad)
                direct = predicted_alignment(target, task, SpanLaw(5), 4, part, scorer=scorer)
                assert abs(direct - values[d, 1]) <= 0.02
        rows[task] = values
        assert cell.curves[task] == pytest.approx(values.mean(axis=0), abs=1e-12)
        closed = closed_form_alignment(target, task, SpanLaw(5), "world").alignment
        assert cell.closed[task] == {"mutual_knn": closed.mutual_knn, "r1": closed.r1}
    for ratio in cell.ratios:
        again = bootstrap_ratio(list(BUDGETS), rows["good"], rows[ratio.task], floor=2 * target.knn_chance,
                                rng=np.random.default_rng([2, 7, ("good", "bad", "ntp").index(ratio.task)]))
        assert ratio.kind == again.estimate.kind and ratio.target == pytest.approx(again.estimate.target)
        assert ratio.ratio == (pytest.approx(again.estimate.ratio) if np.isfinite(again.estimate.ratio) else None)
    assert cell.share("bad") == pytest.approx(cell.closed["bad"]["mutual_knn"] / cell.closed["good"]["mutual_knn"])


def test_the_scorer_is_the_one_caption_knn_of_every_captions_rows():
    """OneCaptionScorer embeds one caption per state and takes the scale from the features' covariance: the same
    score as one_caption_knn on the representation of every caption."""
    from prhsim.experiments._caption_alignment import one_caption_knn
    from prhsim.experiments._caption_prediction import linear_fit

    scene = gridscene(2, 1, 2, 2, dependence=0.6)
    target = caption_target(scene, k=4, style=CaptionStyle(("word_synonyms",), redundancy=0.5), rng=1)
    for task in ("good", "bad", "ntp"):
        records = draw_records(scene, target, task, 50, "world", np.random.default_rng(3))
        opt = linear_fit(target, task, SpanLaw(5), 4, records=records)
        every = one_caption_knn(target, opt.captions(target.captions, target.law.pad))
        assert OneCaptionScorer(target, task)(opt) == every


def test_the_map_covers_its_grid_and_the_figure_draws_it(small_map):
    from prhsim.experiments.sweeps._sample_ratio_figure import RATIO, SHARE, sample_ratio_figure

    assert {(c.x, c.y) for c in small_map.cells} == {(a, b) for a in (0.0, 0.6) for b in (0.0, 0.3)}
    assert all({r.task for r in c.ratios} == {"bad", "ntp"} for c in small_map.cells)
    fig = sample_ratio_figure(small_map)
    gids = {a.get_gid() for ax in fig.axes for a in ax.images}
    assert {f"{RATIO}-ntp", f"{RATIO}-bad", f"{SHARE}-ntp", f"{SHARE}-bad"} <= gids


def test_learners_confirm_a_named_cell():
    pytest.importorskip("jax")
    result = sample_ratio_map(WORLD, CAPTIONS, x_values=(0.0, 0.5), y_values=(1.0,), budgets=(20, 60), n_draws=2, k=4,
                              min_span=5, closed_forms=False, confirm=[(0.5, 1.0)],
                              learner={"n_seeds": 1, "steps": 40, "batch_size": 32, "hidden": (8,)})
    confirmed = {(c.x, c.y): c.confirmed for c in result.cells}
    assert confirmed[0.0, 1.0] is None and {m.task for m in confirmed[0.5, 1.0]} == {"bad", "ntp"}


@pytest.mark.parametrize("sets,message", [
    ({"x": "omission", "y": "omission"}, "two different properties"),
    ({"x": "dependence", "x_values": [0.5, 1.0]}, "dependence must lie in"),
    ({"x_values": [0.1, 0.1]}, "holds 0.1 twice"),
])
def test_bad_settings_are_refused(sets, message):
    with pytest.raises(ValueError, match=message):
        SampleRatioSettings(**sets)
    with pytest.raises(ValueError, match="not on the grid"):
        sample_ratio_map(WORLD, CAPTIONS, x_values=(0.0,), y_values=(0.0,), confirm=[(0.5, 0.5)])


#: The registry's tiny setting (its smoke args), as settings.
SMALL = dict(x_values=[0.0, 0.5], y_values=[0.0, 1.0], budgets=[20, 60], n_draws=2, k=4, min_span=5,
             world=GridSceneWorld(size=2, objects=1))


def _learners(scene, *, style, rng, **settings):
    """A stand-in for the confirming learners' sample-efficiency sweep: ratios that name the point's world and
    captions and the seed, so a record reduced at the wrong point, or computed from other settings, shows."""
    ratio = 100 * scene.dependence + 10 * style.redundancy + rng + settings["steps"]
    return SimpleNamespace(ratios=[SimpleNamespace(task=t, target=0.5, ratio=ratio + i, kind="exact", low=None,
                                                   high=None, token_ratio=None) for i, t in enumerate(("bad", "ntp"))])


@pytest.mark.parametrize("extra", [{}, {"confirm": [[0.5, 1.0]], "seed": 3}], ids=["map", "confirmed"])
@pytest.mark.filterwarnings("ignore::prhsim.optima.TieWarning")  # k = 4 splits a tie at this tiny setting
def test_cells_in_any_order_reduce_to_the_library_map(extra, monkeypatch):
    """Each cell computed alone, in a shuffled order, reduces to the library's map; a confirmed point's learners
    (stood in for: test_learners_confirm_a_named_cell runs them) land at their point."""
    from prhsim.experiments.sweeps import _sample_ratio as sr

    monkeypatch.setattr(sr, "sample_efficiency", _learners)
    s = SampleRatioSettings(**SMALL, **extra)
    coordinates = sr.cells(s)
    assert [c["part"] for c in coordinates] == ["map"] * 4 + ["confirm"] * len(s.confirm)
    order = np.random.default_rng(0).permutation(len(coordinates))
    assert list(order) != sorted(order)
    found = {int(i): sr.cell(s, coordinates[i]) for i in order}
    assert all("seconds" in r for r in found.values())
    reduced = sr.reduce(s, [found[i] for i in range(len(coordinates))]).model_dump(mode="json")
    calls = []
    library = sr.run(s, lambda message, done=None, total=None: calls.append((done, total))).model_dump(mode="json")
    assert reduced.keys() == library.keys()
    for key in library:
        if key != "seconds":
            assert untimed(reduced[key]) == untimed(library[key]), key
    n = len(coordinates)
    assert calls == [(i, n) for i in range(n + 1)]
    confirmed = {(c["x"], c["y"]): c["confirmed"] for c in library["cells"]}  # the learners at the named point only
    assert {p for p, m in confirmed.items() if m is not None} == {tuple(c) for c in s.confirm}
    if s.confirm:  # dependence 0.5, redundancy 1, seed 3, 1000 steps
        assert [m["ratio"] for m in confirmed[0.5, 1.0]] == [50 + 10 + 3 + 1000, 50 + 10 + 3 + 1001]
