"""The ``fod`` command line."""

from __future__ import annotations

import click

from fod import __version__


@click.group()
@click.version_option(__version__, prog_name="fod")
def main() -> None:
    """Faithfulness-oriented decoding of local LLMs."""


@main.command()
def generate() -> None:
    """Generate an answer with FOD (not available yet: it lands with the live monitor)."""
    raise click.ClickException("`fod generate` is not implemented yet: it arrives with the live monitor (issue 5)")
