"""Collection rules for the whole tree: prhsim.real (its doctests, and tests/real/) needs torch, and is left out without it."""

import importlib.util


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # hidden by an import hook, or a broken entry in sys.modules
        return False


collect_ignore_glob = [] if _installed("torch") else ["prhsim/real/*", "tests/real/*"]
