"""``syncheck calibrate``: fit and register an aggregator for one model; ``syncheck calibrations``: list them."""

from __future__ import annotations

from pathlib import Path

import click

from syncheck.cli.common import device_option, dtype_option, model_option, preset_option


@click.command()
@preset_option
@model_option
@click.option("--data", "data_paths", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labelled records (JSONL): RAGTruth's format (hallucination 'labels' spans become sentence labels) "
                   "or syncheck records with 'label' 0|1, 'sentence_labels' [1, 0, ...] or 'spans'. Repeat it to "
                   "pool several files (record ids unique over all of them; folds grouped by source document).")
@click.option("-o", "--output", "output_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory to write the aggregator to. Default: <cache>/calibrations/<model>-<fingerprint>.")
@click.option("--kind", type=click.Choice(["xgb", "lr", "mlp"]), default="xgb", show_default=True,
              help="xgb: the default recipe (boosted trees); lr: logistic regression; mlp: one hidden layer of 100.")
@click.option("--generations", default=0, show_default=True, type=click.IntRange(min=0),
              help="Tune FOD's thresholds on this many of the model's own answers to the data's questions "
                   "(0: on the held-out scores of the labelled sentences).")
@click.option("--judge", default=None,
              help="Alignment backend that labels the --generations answers' sentences (lexical, embedding, "
                   "llm-judge[:MODEL], nli:ID; default: --alignment).")
@click.option("--alignment", default="lexical", show_default=True, help="Backend of the align_score feature.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Read at most this many labelled records.")
@device_option
@dtype_option
@click.option(
    "--batch-size", default=2, show_default=True, type=click.IntRange(min=1), help="Records per forward pass."
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the folds, probes and trees.")
@click.option("--no-register", is_flag=True, help="Write the aggregator but do not register it for the model.")
def calibrate(model, data_paths, output_dir, kind, generations, judge, alignment, limit, device, dtype, batch_size,
              seed, no_register):
    """Fit an aggregator for --model on labelled data, print a held-out report, tune FOD, and register it.

    After it, `syncheck score --model M`, `fod generate --model M`, Scorer(M) and FODGenerator(M) use the
    calibrated aggregator with no flag (matched by the model's fingerprint: config and weights). Scored rows are
    kept in the output directory, so an interrupted run resumes. The report ends with the response verdict against
    the best trivial baseline per task: where it does not beat it by 0.05, it says so.
    """
    from syncheck.calibration.calibrate import calibrate as run

    try:
        result = run(model, list(data_paths), output=output_dir, kind=kind, device=device, dtype=dtype,
                     alignment=alignment, generations=generations, judge=judge, limit=limit, batch_size=batch_size,
                     seed=seed, register=not no_register)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(result.summary())


@click.command()
def calibrations():
    """List the aggregators `syncheck calibrate` registered, newest last."""
    from syncheck.calibration.registry import calibrations_dir, list_calibrations

    entries = list_calibrations()
    if not entries:
        click.echo(f"no calibrations registered (in {calibrations_dir()}); run `syncheck calibrate --model M --data "
                   "FILE`")
        return
    for e in entries:
        state = "" if e["exists"] else "  (directory missing: not used)"
        click.echo(f"{e['model']}  fingerprint {e['fingerprint']}  {e['created']}  {e['path']}{state}")
