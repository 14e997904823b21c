"""The ``syncheck`` command line (click). One module per command; each is thin."""

from __future__ import annotations

import click

from syncheck.build_info import __version__
from syncheck.cli.calibrate import calibrate, calibrations
from syncheck.cli.check import check
from syncheck.cli.common import CommandGroup, quiet_transformers
from syncheck.cli.lid import lid_reference
from syncheck.cli.models import models
from syncheck.cli.report import report
from syncheck.cli.score import score
from syncheck.cli.serve import serve
from syncheck.cli.train import train
from syncheck.cli.verifier import verifier


@click.group(cls=CommandGroup)
@click.version_option(__version__, prog_name="syncheck", message="%(prog)s %(version)s")
def main() -> None:
    """Score RAG responses sentence by sentence for faithfulness to their context."""
    quiet_transformers()


for command in (score, serve, calibrate, calibrations, check, train, report, lid_reference, verifier, models):
    main.add_command(command)
