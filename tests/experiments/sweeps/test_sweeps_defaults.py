"""One set of defaults per sweep: every library function on the experiments face defaults to what its command runs.

A keyword of a sweep's library function named as a setting of its ``Settings`` (``rng`` as ``seed``) has the setting's
default, so the library, the command and config.json agree on what a sweep runs when nothing is said.
"""

from __future__ import annotations

import inspect

import pytest

from prhsim.experiments.sweeps import SWEEPS

#: Keywords whose default means something else in the library, by function: what it is, and why it differs.
OTHER_MEANING = {
    ("bad_view_sweep", "modalities"): "None: the default world's modalities (the settings count them)",
    ("restricted_encoder", "views"): "None: good views (the settings name them)",
    ("sample_efficiency", "threads"): "how the work runs in one process, not what it computes",
    ("captioning_curve", "pair_free"): "the pair-free map itself (the settings name the estimator)",
    ("designed_world", "rng"): "the designed world's own draws, not the sweep's seed",
}


def _library_defaults():
    for name, sweep in SWEEPS.items():
        module, settings = sweep.module_object(), sweep.settings_model()()
        values = settings.model_dump()
        for export in sweep.exports:
            function = getattr(module, export)
            if not inspect.isfunction(function):
                continue
            for parameter in inspect.signature(function).parameters.values():
                key = "seed" if parameter.name == "rng" else parameter.name
                if parameter.default is not inspect.Parameter.empty and key in values:
                    yield pytest.param(export, parameter.name, parameter.default, values[key], id=f"{name}-{export}-{key}")


@pytest.mark.parametrize("function, keyword, library, settings",
                         [p for p in _library_defaults() if (p.values[0], p.values[1]) not in OTHER_MEANING])
def test_the_library_defaults_to_what_the_command_runs(function, keyword, library, settings):
    assert (list(library) if isinstance(library, tuple) else library) == settings, (function, keyword)


def test_every_exception_is_a_keyword_that_exists():
    found = {(p.values[0], p.values[1]) for p in _library_defaults()}
    assert set(OTHER_MEANING) <= found
