"""Does training on HaluEval's summarization and dialogue answers help the sentence score on RAGTruth?

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.studies.halueval_rows --data PATH/TO/ragtruth/dev.jsonl \\
        --rows summarization-600 --rows dialogue-600 [--seeds 0,1]

Do HaluEval's train sides help where they help RAGTruth's grouped CV? This trains the feature
model (the default recipe's aggregator and parameters over its features, without the hidden-state probe, whose
vectors ``check_signals`` does not cache) on RAGTruth's training folds, with and without the HaluEval answers added to
every training fold, and
prints RAGTruth sentence AUROC per task on the test folds (grouped by ``source_id``, mean over ``--seeds``). Each
HaluEval sentence takes its answer's label (HaluEval labels answers, not sentences).

The HaluEval rows are the cache of :mod:`benchmarks.check_signals` (``--rows SET-START`` names the file that
:func:`benchmarks.check_signals.row_cache` gives that set and first record, for the shipped default as it is now):
run ``python -m benchmarks.check_signals --set summarization --start 600 --limit 200`` first. RAGTruth's features
come from the cache of ``benchmarks.ragtruth.run --no-lid --no-lookback --no-embedding``.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from benchmarks.ragtruth.data import TASKS
from syncheck.jsonl import iter_jsonl


def halueval_matrix(path: Path, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of every sentence of the cached answers in ``path``, each labelled with its answer's label."""
    if not path.is_file():
        raise SystemExit(f"no check_signals rows at {path}: run `python -m benchmarks.check_signals --set SET --start "
                         "START` first (its cache is per version of the shipped default aggregator)")
    X, y = [], []
    for row in iter_jsonl(path):
        if row["error"] is not None:
            continue
        for s in row["sentences"]:
            X.append([s["features"].get(n, np.nan) for n in names])
            y.append(row["label"])
    return np.nan_to_num(np.asarray(X, dtype=float).reshape(-1, len(names))), np.asarray(y, dtype=np.int64)


def main(argv: Sequence[str] | None = None) -> dict[str, list[float]]:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.halueval_rows", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--rows", action="append", default=[], help="a check_signals cache, SET-START (repeatable)")
    ap.add_argument("--work-dir", default=None, help="check_signals' cache (default: <syncheck cache>/check-signals)")
    ap.add_argument("--seeds", default="0,1")
    args = ap.parse_args(argv)
    bad = [key for key in args.rows if not re.fullmatch(r"[a-z]+-\d+", key)]
    if bad:
        ap.error(f"--rows {bad[0]!r}: name a check_signals cache as SET-START, e.g. summarization-600")
    from sklearn.metrics import roc_auc_score

    from benchmarks.check_signals import row_cache
    from benchmarks.ragtruth.response_verdict import cached_table
    from benchmarks.ragtruth.response_verdict import parse_args as verdict_args
    from syncheck.aggregators import make_aggregator
    from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS
    from syncheck.cache import cache_dir
    from syncheck.fitting import grouped_folds

    table = cached_table(verdict_args(["--data", args.data]))
    names = [n for n in DEFAULT_FEATURES if n in table.features]
    X, y = np.nan_to_num(table.matrix(names)), table.label
    work = Path(args.work_dir) if args.work_dir else cache_dir() / "check-signals"
    extra = {key: halueval_matrix(row_cache(work, *key.rsplit("-", 1)), names) for key in args.rows}
    variants = {"RAGTruth only": None, **extra}
    if len(extra) > 1:
        variants[" + ".join(extra)] = (np.vstack([x for x, _ in extra.values()]),
                                       np.concatenate([t for _, t in extra.values()]))
    print(f"features: {', '.join(names)}")
    print("| training rows | " + " | ".join(TASKS) + " | mean |\n| --- |" + " --- |" * (len(TASKS) + 1))
    out = {}
    for name, rows in variants.items():
        per_seed = []
        for seed in (int(s) for s in args.seeds.split(",")):
            p = np.zeros(len(y))
            for train, test in grouped_folds(table.source, 5, seed):
                Xtr, ytr = X[train], y[train]
                if rows is not None:
                    Xtr, ytr = np.vstack([Xtr, rows[0]]), np.concatenate([ytr, rows[1]])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = make_aggregator(DEFAULT_KIND, feature_names=names, random_state=seed, **DEFAULT_PARAMS)
                    p[test] = model.fit(Xtr, ytr).predict_proba(X[test])[:, 1]
            per_seed.append([roc_auc_score(y[table.task == t], p[table.task == t]) for t in TASKS])
        out[name] = np.mean(per_seed, axis=0).tolist()
        label = name if rows is None else f"+ {name} ({len(rows[1])} sentences)"
        print(f"| {label} | " + " | ".join(f"{a:.3f}" for a in out[name]) + f" | {np.mean(out[name]):.3f} |")
    return out


if __name__ == "__main__":
    main()
