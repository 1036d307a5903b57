"""Collection rules for the whole tree: prhsim.real's doctests need torch, and are left out without it."""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("torch") else ["prhsim/real/*"]
