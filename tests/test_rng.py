"""prhsim._rng: the seed argument, and the one table of random-stream tags that every stochastic module reads."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import prhsim._rng as rng_table
from prhsim._rng import check_rng

PACKAGE = Path(rng_table.__file__).parent


def test_a_seed_an_int_or_none_gives_a_generator_and_anything_else_is_refused():
    assert check_rng(None).integers(1000) == np.random.default_rng(0).integers(1000)
    gen = np.random.default_rng(5)
    assert check_rng(gen) is gen
    with pytest.raises(ValueError, match="rng must be an int seed or a numpy Generator, got str"):
        check_rng("0")


def test_the_tags_of_one_namespace_are_distinct_but_for_the_documented_one():
    run = {"SGD_PAIRS": rng_table.SGD_PAIRS, "RENDER_STANDARDISE": rng_table.RENDER_STANDARDISE,
           "TEXT_PAIRS": rng_table.TEXT_PAIRS}
    assert len(set(run.values())) == len(run)
    assert rng_table.RUN_PAIR_METRICS == rng_table.RENDER_STANDARDISE  # the one shared value, documented in _rng
    real = [rng_table.REAL_ORDER, rng_table.REAL_SHUFFLE, rng_table.REAL_VIEWS, rng_table.REAL_DROPOUT]
    assert len(set(real)) == 4
    calibration = [rng_table.CALIBRATION_NULL, rng_table.CALIBRATION_VIEWS, rng_table.CALIBRATION_WIDTH,
                   rng_table.CALIBRATION_DEPTH]
    assert len(set(calibration)) == 4
    captions = [rng_table.CAPTION_TARGET, *(rng_table.CAPTION_RECORDS + t for t in range(3)), rng_table.CAPTION_CHECK]
    assert len(set(captions)) == 5
    assert rng_table.CAPTIONING_DECODER != rng_table.CAPTIONING_SEED


def test_no_module_writes_a_stream_tag_as_a_literal():
    """Every ``default_rng([...])`` and ``SeedSequence([...])`` of the package names its tag from the table: a
    literal integer in a seed list is a tag nobody can see colliding."""
    literal = re.compile(r"(?:default_rng|SeedSequence)\(\[[^\]]*?\b\d+\b")
    found = [f"{path.relative_to(PACKAGE.parent)}:{i}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "_rng.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if literal.search(line)]
    assert found == []
