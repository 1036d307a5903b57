"""``python -m prhsim``: the command line."""

from prhsim.cli import entry

entry()
