"""``python -m prhsim``: the command line."""

from prhsim.cli import main

main(prog_name="prhsim")
