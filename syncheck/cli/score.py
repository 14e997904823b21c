"""``syncheck score``: per-sentence features for every record of a JSONL file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from tqdm import tqdm

from syncheck.cli.common import count_lines, device_option, dtype_option, model_option, read_records


@click.command()
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output JSONL (one row per input line, same order). Default: standard output.")
@model_option
@device_option
@dtype_option
@click.option("--batch-size", default=4, show_default=True, type=click.IntRange(min=1), help="Records per forward pass.")
@click.option("--max-length", default=None, type=click.IntRange(min=16), help="Cap on prompt+response tokens (default: model window).")
@click.option("--alignment", default="lexical", show_default=True, type=click.Choice(["lexical", "none"]),
              help="Backend of the align_score feature.")
@click.option("--no-lid", is_flag=True, help="Skip the lid_layer_<L> features.")
@click.option("--no-kl", is_flag=True, help="Skip the without-context pass (no KL features).")
@click.option("--show", is_flag=True, help="Also print a per-sentence table to standard output.")
def score(input_path, output_path, model, device, dtype, batch_size, max_length, alignment, no_lid, no_kl, show):
    """Compute SynCheck's per-sentence features for INPUT.jsonl.

    Each input line: {"id": ..., "context": "..." or ["chunk", ...],
    "question": "..." (optional), "response": "..."}.
    """
    from syncheck.scorer import Scorer

    total = count_lines(input_path)
    click.echo(f"loading model {model} ...", err=True)
    scorer = Scorer(
        model,
        device=device,
        dtype=dtype,
        alignment=None if alignment == "none" else alignment,
        lid=None if no_lid else "auto",
        kl=not no_kl,
        max_length=max_length,
        batch_size=batch_size,
    )
    out = open(output_path, "w", encoding="utf-8") if output_path else sys.stdout
    failed = 0
    try:
        with tqdm(total=total, unit="row", desc="scoring", file=sys.stderr, disable=None) as bar:
            for result in scorer.score_records(read_records(input_path)):
                row = result.to_json()
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                failed += row["error"] is not None
                if show:
                    _show(row)
                bar.update(1)
    finally:
        if output_path:
            out.close()
    click.echo(f"{total} rows, {failed} with errors" + (f"; wrote {output_path}" if output_path else ""), err=True)


def _show(row: dict) -> None:
    click.echo(f"\n== {row['id']}" + (f"  ERROR: {row['error']}" if row["error"] else ""))
    for w in row["warnings"]:
        click.echo(f"   warning: {w}")
    for s in row["sentences"]:
        f = s["features"]
        cols = "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in f.items())
        lead = f"[{s['score']:.2f}] " if "score" in s else ""
        click.echo(f"  - {lead}{s['text'][:90]}\n      {cols}")
