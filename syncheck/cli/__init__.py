"""The ``syncheck`` command line (click). One module per command; each is thin."""

from __future__ import annotations

import click

from syncheck import __version__


@click.group()
@click.version_option(__version__, prog_name="syncheck")
def main() -> None:
    """Score RAG responses sentence by sentence for faithfulness to their context."""


from syncheck.cli.score import score  # noqa: E402
from syncheck.cli.lid import lid_reference  # noqa: E402

main.add_command(score)
main.add_command(lid_reference)
