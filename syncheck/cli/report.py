"""``syncheck report``: a self-contained HTML page of scored rows."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("scored_path", metavar="SCORED.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="HTML file to write (self-contained: open it offline, mail it, attach it).")
@click.option("--input", "input_path", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The INPUT.jsonl that was scored: adds the context, the question and the text between sentences.")
@click.option("--labels", "labels_path", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSONL or CSV with id,label[,subset] (1 = faithful, 0 = hallucinated): adds ROC and calibration "
                   "plots.")
@click.option("--max-rows", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Rows drawn in the page (the plots use all rows).")
def report(
    scored_path: Path, output_path: Path, input_path: Path | None, labels_path: Path | None, max_rows: int
) -> None:
    """Write an HTML report of SCORED.jsonl (output of `syncheck score`).

    Sentences are coloured by their score (or, without an aggregator, by
    align_score); hover, focus or click one to see its features.
    """
    from syncheck.report import write_report

    try:
        write_report(scored_path, output_path, input_path, labels_path, max_rows=max_rows)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {output_path}", err=True)
