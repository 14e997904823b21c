"""The ``syncheck`` command line (click). One module per command; each is thin."""

from __future__ import annotations

from importlib import metadata

import click

from syncheck import __version__
from syncheck.cli.calibrate import calibrate, calibrations
from syncheck.cli.check import check
from syncheck.cli.common import CommandGroup, quiet_transformers
from syncheck.cli.lid import lid_reference
from syncheck.cli.report import report
from syncheck.cli.score import score
from syncheck.cli.serve import serve
from syncheck.cli.train import train
from syncheck.cli.verifier import verifier


def installed_version() -> str:
    """The installed distribution's version (pyproject's), or ``syncheck.__version__`` when syncheck is not
    installed."""
    try:
        return metadata.version("syncheck")
    except metadata.PackageNotFoundError:
        return __version__


@click.group(cls=CommandGroup)
@click.version_option(installed_version(), prog_name="syncheck", message="%(prog)s %(version)s")
def main() -> None:
    """Score RAG responses sentence by sentence for faithfulness to their context."""
    quiet_transformers()


for command in (score, serve, calibrate, calibrations, check, train, report, lid_reference, verifier):
    main.add_command(command)
