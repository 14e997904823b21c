"""Retrain the default aggregator shipped in ``syncheck/data/aggregators/default/``.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.halueval.train_default --data-dir ../shared/data/halueval

It scores (with the default :class:`syncheck.Scorer`: model ``smollm2-135m``,
LID on, KL on, the Scorer's default ``align_score`` backend unless
``--alignment`` says otherwise) the *train side* of the artefact-controlled
sets -- QA distractor pairs and the sentence-level set, never the raw
HaluEval subsets -- and fits one aggregator on their sentences. It reads the
first 600 records of each source (``--limit``); the hash split of
:mod:`benchmarks.halueval.splits` keeps every one of them off the test side of
any benchmark run with the same ``--seed``. Features are
cached in the same work dir as ``benchmarks.halueval.run``, so after a run
this only trains. Retrain whenever the default alignment backend or model changes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from benchmarks.halueval.evaluate import training_data
from benchmarks.halueval.pipeline import DEFAULT_TRAINING_SETS, BenchConfig, add_common_args, load_scored, syncheck_feature_names

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "syncheck" / "data" / "aggregators" / "default"
#: The kind shipped; chosen on the benchmark (see benchmarks/RESULTS.md, issue 3).
DEFAULT_KIND = "lr"
#: Records read from each of QA (pairs, sentences) and dialogue (sentences); only their train side is scored.
DEFAULT_TRAINING_LIMIT = 600


def generated_rows(paths: Sequence[str], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, record, n_chars)`` of the labelled sentences in ``generated_set`` files.

    Rows with an error or without one label per sentence are skipped.
    """
    X: list[list[float]] = []
    y: list[int] = []
    rec: list[int] = []
    chars: list[int] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            labels = row.get("sentence_labels") or []
            if row.get("error") is not None or len(labels) != len(row.get("sentences", [])):
                continue
            for sent, label in zip(row["sentences"], labels):
                missing = [n for n in names if n not in sent["features"]]
                if missing:
                    raise SystemExit(f"{path}: row {row.get('id')} lacks features {missing}; regenerate it with this scorer")
                X.append([float(sent["features"][n]) for n in names])
                y.append(int(label))
                rec.append(int(row.get("record", -1)))
                chars.append(len(sent["text"]))
    n = len(y)
    return (np.asarray(X, dtype=np.float64).reshape(n, len(names)), np.asarray(y, dtype=np.int64),
            np.asarray(rec, dtype=np.int64), np.asarray(chars, dtype=np.float64))


def heldout_report(kind: str, X_fixed: np.ndarray, y_fixed: np.ndarray, gen: tuple, names: Sequence[str],
                   seed: int, folds: int = 5) -> tuple[list[str], np.ndarray | None]:
    """AUROC on generated sentences of records held out of training (grouped K-fold), beside trivial baselines.

    Rows: sentence length (the trivial baseline, oriented shorter = supported), and the aggregator trained on
    the fixed sets only, on the generated train folds only, and on both. Returns the report lines and the
    out-of-fold scores of "fixed + generated" (the shipped recipe; ``None`` when the check was skipped).
    """
    from benchmarks.stats import bootstrap_auroc
    from syncheck.aggregators import make_aggregator
    from syncheck.aggregators.thresholds import out_of_fold_scores

    X, y, rec, chars = gen
    if len(set(y.tolist())) < 2 or len(set(rec.tolist())) < folds:
        return ["held-out check skipped: the generated set needs both labels and >= 5 records"], None

    def make():
        return make_aggregator(kind, feature_names=list(names), random_state=seed)

    fixed = make().fit(X_fixed, y_fixed)
    preds = {
        "fixed sets only": fixed.predict_proba(X)[:, 1],
        "generated only": out_of_fold_scores(make, X, y, rec, folds=folds),
        "fixed + generated": out_of_fold_scores(make, X, y, rec, folds=folds, extra=(X_fixed, y_fixed)),
    }
    lines = [f"held-out generated sentences: n={len(y)} ({int(y.sum())} supported) from {len(set(rec.tolist()))} records, "
             f"{folds}-fold grouped by record; AUROC [95% CI], score spread (10th-90th percentile):"]
    rows = {"sentence length (shorter = supported)": -chars, **preds}
    for name, score in rows.items():
        auc, lo, hi = bootstrap_auroc(y, score, groups=rec, seed=seed)
        spread = f"{np.percentile(score, 10):.2f}-{np.percentile(score, 90):.2f}" if name in preds else "-"
        lines.append(f"  {name}: {auc:.3f} [{lo:.3f}, {hi:.3f}]  spread {spread}")
    return lines, preds["fixed + generated"]


def main(argv: Sequence[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.halueval.train_default", description=__doc__.split("\n\n")[0])
    add_common_args(p)
    p.add_argument("--kind", choices=("lr", "xgb", "mlp"), default=DEFAULT_KIND)
    p.add_argument("-o", "--out", default=str(DEFAULT_OUT), help="output directory (default: the packaged default)")
    p.add_argument("--generated", action="append", default=[],
                   help="also train on a JSONL of the model's own labelled answers (benchmarks.halueval.generated_set); "
                        "repeatable")
    args = p.parse_args(argv)
    if args.limit is None:  # more training records than the benchmark run reads: the split keeps them off its test side
        args.limit = DEFAULT_TRAINING_LIMIT
    from syncheck.aggregators.thresholds import tune_thresholds
    from syncheck.aggregators import make_aggregator, save_aggregator, scorer_config

    cfg = BenchConfig.from_args(args, sets=DEFAULT_TRAINING_SETS)
    scored = load_scored(cfg, train_only=True)
    items = [it for name in DEFAULT_TRAINING_SETS for it in scored.get(name, [])]
    scorer = cfg.scorer()
    names = [n for n in scorer.feature_names if n in syncheck_feature_names(scored)]
    X, y = training_data(items, names)
    gen = generated_rows(args.generated, names)
    gen_X, gen_y = gen[0], gen[1]
    decoding = None
    if len(gen_y):
        lines, oof = heldout_report(args.kind, X, y, gen, names, args.seed)
        for line in lines:
            print(line, file=sys.stderr)
        if oof is not None:
            decoding = tune_thresholds(gen_y, oof)
            decoding["data"] = "out-of-fold scores of the generated sentences (5-fold grouped by record)"
            print(f"decoding thresholds for FOD: tau1 {decoding['tau1']:.2f}, tau2 {decoding['tau2']:.2f} "
                  f"({decoding['rule']})", file=sys.stderr)
        X, y = np.vstack([X, gen_X]), np.concatenate([y, gen_y])
    agg = make_aggregator(args.kind, feature_names=names, random_state=args.seed).fit(X, y)
    training = {
        "data": "HaluEval (Li et al., 2023), train side of the record split of benchmarks/halueval/splits.py",
        "sets": list(DEFAULT_TRAINING_SETS),
        "records_read": {k: cfg.limits[k] for k in DEFAULT_TRAINING_SETS},
        "split_seed": cfg.seed,
        "responses": {name: len(scored.get(name, [])) for name in DEFAULT_TRAINING_SETS},
        "generated": {"files": [Path(g).name for g in args.generated], "sentences": int(len(gen_y)),
                      "faithful": int(np.sum(gen_y))},
        "sentences": int(len(y)), "faithful": int(np.sum(y)), "unfaithful": int(len(y) - np.sum(y)),
        "command": "python -m benchmarks.halueval.train_default " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = save_aggregator(agg, args.out, training=training, scorer=scorer_config(scorer), decoding=decoding)
    print(f"trained {args.kind} on {len(y)} sentences ({training['faithful']} faithful); threshold {agg.threshold_:.3f}; "
          f"wrote {out}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
