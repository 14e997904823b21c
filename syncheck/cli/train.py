"""``syncheck train``: fit an aggregator (LR / XGBoost / MLP) on scored rows and labels.

Labels (1 = faithful, 0 = unfaithful, read by :func:`syncheck.calibration.labels.parse_label`)
come from ``--labels LABELS.jsonl`` or, without it, from fields of the SCORED
rows themselves. Either way a row holds

- ``{"id": ..., "label": 0 | 1}``: a response-level label, given to every
  sentence of that response (exact for one-sentence responses; for longer
  ones a weak label: an unfaithful response may hold faithful sentences), or
- ``{"id": ..., "sentence_labels": [1, 0, ...]}``: one label per scored
  sentence of that response, in order (the count must match the scored row).

Rows of SCORED with an ``error``, and rows without a label, are skipped (and counted).

``--tune-decoding`` (for SCORED rows that are the monitored model's own
answers, e.g. written by ``fod generate --method greedy``): also choose FOD's
``tau1``/``tau2`` for this aggregator from out-of-fold scores (5 folds grouped
by each row's ``record`` field, else its ``id``) and store them in meta.json;
``fod`` then uses them when not given thresholds.

``--probe hidden_probe`` (SCORED from ``syncheck score --vectors``; ``lookback_lens``
also needs ``--lookback``): fit a linear probe on each sentence's vector and
stack it under the aggregator (:mod:`syncheck.aggregators.stacked`: the
aggregator learns from the probe's out-of-fold scores, 5 folds grouped by
``record`` / ``id``); the probe is saved beside the aggregator.

The fitting, the thresholds and the writing are :mod:`syncheck.calibration.training`'s, the one training path
``syncheck calibrate`` also takes; this command reads the rows and labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from features.registry import FEATURES, is_probe_output
from syncheck.aggregators.io import KINDS
from syncheck.jsonl import JSONLineError, read_jsonl


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for _, row in read_jsonl(path):
        if isinstance(row, JSONLineError):
            raise click.ClickException(f"{path} {row}; fix or drop that line")
        rows.append(row)
    return rows


def _labels_of(row: dict[str, Any], n_sentences: int, where: str) -> list[int] | None:
    """One label per scored sentence from a row's ``sentence_labels`` or ``label`` (read by
    :func:`syncheck.calibration.labels.parse_label`); ``None`` when the row has neither.

    Raises:
        LabelError: a label the rule refuses, or a ``sentence_labels`` count other than ``n_sentences``.
    """
    from syncheck.calibration.labels import LabelError, parse_label, parse_label_list

    if row.get("sentence_labels") is not None:
        labels = list(parse_label_list(row["sentence_labels"], where))
        if len(labels) != n_sentences:
            raise LabelError(
                f"{where}: sentence_labels has {len(labels)} labels but the scored row has {n_sentences} sentences; "
                "give one label per scored sentence (see its 'sentences')")
        return labels
    if row.get("label") is not None:
        return [parse_label(row["label"], where)] * n_sentences
    return None


@click.command()
@click.argument("scored_path", metavar="SCORED.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--labels", "labels_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help='JSONL of {"id":..., "label": 0|1} or {"id":..., "sentence_labels": [...]}. '
                   "Default: 'label' / 'sentence_labels' fields of the SCORED rows.")
@click.option("--kind", type=click.Choice(sorted(KINDS)), default="mlp", show_default=True,
              help="lr: logistic regression; xgb: XGBoost; mlp: one hidden layer of 100 (SynCheck's best).")
@click.option("-o", "--output", "output_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write the aggregator to (meta.json + weights).")
@click.option(
    "--features", default=None, help="Comma-separated features to use (default: every feature all rows have)."
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the validation split, the out-of-fold "
                                                                     "folds and the model.")
@click.option("--model", "scored_model", default="smollm2-135m", show_default=True,
              help="The model SCORED was produced with (recorded in meta.json; scoring with another model warns).")
@click.option("--alignment", default="lexical", show_default=True,
              help="The align_score backend SCORED was produced with (recorded in meta.json).")
@click.option("--align-with-question", is_flag=True,
              help="SCORED was produced with `syncheck score --align-with-question` (recorded in meta.json).")
@click.option("--description", default=None, help="Free-text description of the training data, kept in meta.json.")
@click.option("--probe", "probes", multiple=True, type=click.Choice([f.name for f in FEATURES if f.probe]),
              help="Stack a linear probe on the sentences' vectors under the aggregator (SCORED from "
                   "`syncheck score --vectors`; lookback_lens also needs --lookback). Repeatable.")
@click.option("--tune-decoding", is_flag=True,
              help="SCORED holds the model's own answers: also tune FOD's tau1/tau2 for this aggregator on "
                   "out-of-fold scores (grouped by 'record' or 'id') and store them in meta.json.")
def train(scored_path, labels_path, kind, output_dir, features, seed, scored_model, alignment, align_with_question,
          description, probes, tune_decoding):
    """Train an aggregator on the per-sentence features of SCORED.jsonl (the output of `syncheck score`)."""
    import numpy as np

    from syncheck.calibration import training as fit
    from syncheck.probes import PROBE_INPUTS
    from syncheck.results import decode_vectors

    scored = _read_jsonl(scored_path)
    label_rows = {str(r.get("id")): r for r in _read_jsonl(labels_path)} if labels_path else None

    sent_feats: list[dict[str, float]] = []
    sent_vecs: list[dict[str, Any]] = []
    vector_layers: list[int] | None = None
    y: list[int] = []
    groups: list[str] = []
    skipped_error = skipped_unlabelled = used = 0
    for row in scored:
        rid = str(row.get("id"))
        if row.get("error") is not None or not row.get("sentences"):
            skipped_error += 1
            continue
        source = label_rows.get(rid, {}) if label_rows is not None else row
        labels = _labels_of(source, len(row["sentences"]), f"id {rid}")
        if labels is None:
            skipped_unlabelled += 1
            continue
        used += 1
        sent_feats += [s["features"] for s in row["sentences"]]
        if probes:
            sent_vecs += [decode_vectors(s) for s in row["sentences"]]
            vector_layers = vector_layers or row.get("vector_layers")
        y += labels
        groups += [str(row.get("record", rid))] * len(labels)
    if not y:
        raise click.ClickException(
            f"no labelled sentences: {skipped_unlabelled} rows without a label, {skipped_error} with errors. "
            "Pass --labels LABELS.jsonl or add 'label' / 'sentence_labels' to the SCORED rows."
        )
    if features:
        names = [n.strip() for n in features.split(",") if n.strip()]
        borrowed = [n for n in names if is_probe_output(n) and n not in probes]
        if borrowed:
            raise click.ClickException(
                f"--features {','.join(borrowed)}: the output of a probe another aggregator fitted; a scorer using "
                f"this aggregator would not produce it. Fit the probe here instead: --probe {borrowed[0]}")
    else:
        # every feature all rows share, but not the output of a probe another aggregator fitted (the default
        # aggregator's hidden_probe): the saved aggregator would need a probe it does not have
        names = [
            n for n in sent_feats[0] if all(n in f for f in sent_feats) and (not is_probe_output(n) or n in probes)
        ]
    missing = [n for n in names if any(f.get(n) is None for f in sent_feats)]
    if missing:
        raise click.ClickException(f"features missing (or null) in some scored sentences: {missing}; choose --features")
    if len(set(y)) < 2:
        raise click.ClickException(f"all {len(y)} labelled sentences have label {y[0]}; an aggregator needs both 0 "
                                   "and 1")
    names = [n for n in names if n not in probes]
    X = np.asarray([[f[n] for n in names] for f in sent_feats], dtype=np.float64)
    vectors = {}
    for p in probes:
        if any(PROBE_INPUTS[p] not in v for v in sent_vecs):
            raise click.ClickException(
                f"--probe {p}: some scored sentences carry no {PROBE_INPUTS[p]!r} vector; score them with "
                f"`syncheck score --vectors{' --lookback' if p == 'lookback_lens' else ''}`")
        vectors[p] = np.stack([v[PROBE_INPUTS[p]] for v in sent_vecs])
    if "hidden_probe" in probes and not vector_layers:
        raise click.ClickException("--probe hidden_probe: the scored rows do not say which layers their vectors pool "
                                   "('vector_layers'); rescore them with a current `syncheck score --vectors`")
    templates = fit.probe_templates(probes, vector_layers)
    # the estimator's own parameters, not the default recipe's: `syncheck train --kind xgb` fits plain XGBoost
    stacked = fit.fit_sentence_model(X, names, vectors, np.asarray(y), np.asarray(groups), kind=kind, params={},
                                     probes=templates, seed=seed)
    agg = stacked.aggregator
    decoding = None
    if tune_decoding:
        try:
            oof = fit.sentence_oof(X, names, vectors, np.asarray(y), np.asarray(groups), kind=kind, params={},
                                   probes=templates, seed=seed)
            decoding = fit.tune_decoding(y, oof, f"out-of-fold scores of the {len(y)} training sentences (5 folds "
                                                 "grouped by record/id)")
        except ValueError as exc:
            raise click.ClickException(f"--tune-decoding: {exc}") from None
    lid_layers = sorted(int(n.rsplit("_", 1)[1]) for n in names if n.startswith("lid_layer_"))
    training = {
        "source": str(scored_path), "labels": str(labels_path) if labels_path else "fields of the scored rows",
        "rows": used, **fit.label_counts(y), "seed": seed, "description": description or "",
    }
    scorer = {"model": scored_model, "alignment": alignment, "align_with_question": align_with_question,
              "lid_layers": lid_layers or None}
    fit.save_sentence_model(stacked, output_dir, training=training, scorer=scorer, decoding=decoding)
    click.echo(
        f"trained {kind} on {len(y)} sentences from {used} rows ({training['faithful']} faithful, "
        f"{training['unfaithful']} unfaithful; skipped {skipped_error} error and {skipped_unlabelled} unlabelled "
        "rows); "
        f"threshold {agg.threshold_:.3f}; features {', '.join(names + list(probes))}; wrote {output_dir}",
        err=True,
    )
    if decoding is not None:
        click.echo(f"decoding thresholds for FOD: tau1 {decoding['tau1']:.2f}, tau2 {decoding['tau2']:.2f}", err=True)
