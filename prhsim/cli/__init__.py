"""The ``prhsim`` command line: a thin layer over :mod:`prhsim.experiments`.

Commands: ``prhsim run`` (solve, compare, check, write a run folder; ``--learner``
trains SGD learners beside the closed form), ``prhsim sweep NAME`` (bad-view,
kernel-mismatch, gap-sensitivity, restricted-encoder, metric-bridge, sigreg-weight, ntp-ca,
sample-efficiency: one experiment over a grid, one folder), ``prhsim prh`` (the PRH alignment
protocol on feature files), ``prhsim worlds`` (every world kind with its settings) and
``prhsim real`` (real caption and image data: ``export-synthetic``, ``features``, ``train``, ``eval``). Usage errors are one
line and exit 2; an unexpected exception is a bug and ends with its traceback
(exit 1); Ctrl-C exits 130.
"""

from __future__ import annotations

import click

from prhsim import __version__
from prhsim.cli._prh import prh
from prhsim.cli._real import real
from prhsim.cli._run import run
from prhsim.cli._sweep import sweep
from prhsim.cli._theorem_sweeps import add_theorem_sweeps
from prhsim.cli._worlds import worlds


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="prhsim")
def main() -> None:
    """prhsim: executable checks of the Platonic Representation Theorem for JEPAs."""


main.add_command(run)
main.add_command(prh)
add_theorem_sweeps(sweep)
main.add_command(sweep)
main.add_command(worlds)
main.add_command(real)
