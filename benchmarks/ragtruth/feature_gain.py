"""What one feature adds to the default recipe on RAGTruth dev, over several fold assignments.

    HF_HUB_OFFLINE=1 python -m benchmarks.ragtruth.feature_gain --feature local_support [--seeds 0,1,2,3,4]

For each seed, 5-fold cross-validation grouped by ``source_id`` (:func:`syncheck.fitting.grouped_folds`) of
the default recipe (:mod:`syncheck.aggregators.recipe`: boosted trees over its features, the hidden-state probe
stacked under them) with and without ``--feature``, trained on RAGTruth rows only, one model for the three tasks.
Per task: sentence ROC AUC with a 95% bootstrap interval over source documents (seed 0), the same averaged over
the seeds, and the feature alone; word overlap beside them on the same sentences. A gain that shows up under one
fold assignment only is noise: read the per-seed column.

``--feature`` takes one name or several, comma-separated (added together, or removed together when the recipe has
them). Derived names: ``rel:<name>`` is the feature minus its response's mean over all its sentences, and
``rel_causal:<name>`` minus the mean over the sentences up to and including it (:mod:`features.relative`; the
causal form is the one a live monitor could compute). "alone" rows orient a derived feature by its base's sign.

``--alignment SPEC`` first adds ``align_score:SPEC``, the alignment score of another backend (e.g. ``verifier``;
:mod:`benchmarks.ragtruth.alignment_feature`), which ``--feature`` can then name. ``--drop`` takes features out of
both recipes, so ``--drop align_score --feature align_score:verifier`` asks what swapping the backend does.

Features come from the cache :mod:`benchmarks.ragtruth.run` writes (run with ``--no-lid --no-lookback
--no-embedding``); string checks added since the cache was written are computed from the texts, with no model pass.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.ragtruth.data import TASKS, read_ragtruth_files
from benchmarks.ragtruth.evaluate import oof_stacked, probe_folds, task_figures
from benchmarks.ragtruth.scoring import ScoringConfig, SentenceTable, score_ragtruth, sentence_table
from features.registry import feature_sign
from features.relative import relative_by_response
from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS, DEFAULT_PROBES
from syncheck.fitting import grouped_folds

#: Prefixes of derived features: ``rel:<name>`` (minus the response's mean), ``rel_causal:<name>`` (minus the mean
#: of the response's sentences so far).
DERIVED = {"rel:": False, "rel_causal:": True}


def add_derived(table: SentenceTable, name: str) -> None:
    """Put the derived feature ``name`` (``rel:<base>`` or ``rel_causal:<base>``) into ``table.features``."""
    for prefix, causal in DERIVED.items():
        if name.startswith(prefix):
            base = name[len(prefix):]
            if base not in table.features:
                raise SystemExit(f"no feature {base!r} to derive {name!r} from; choose from {sorted(table.features)}")
            table.features[name] = relative_by_response(table.features[base], table.response, causal)
            return


def base_name(name: str) -> str:
    """The feature a derived one is computed from, and ``align_score`` for ``align_score:<backend>``."""
    name = next((name[len(p):] for p in DERIVED if name.startswith(p)), name)
    return "align_score" if name.startswith("align_score:") else name


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ragtruth.feature_gain", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl",
                   help="RAGTruth JSONL; several files comma-separated are pooled (folds grouped by source document)")
    p.add_argument("--work-dir", default=None, help="feature cache (default: <syncheck cache>/ragtruth-bench)")
    p.add_argument("--feature", required=True,
                   help="the feature(s) to add (or, if the recipe has them, to remove), comma-separated; "
                        "rel:<name> and rel_causal:<name> are derived (see the module's doc)")
    p.add_argument("--alignment", default=None,
                   help="also compute align_score:<SPEC> with this alignment backend (e.g. verifier)")
    p.add_argument("--drop", default="", help="features taken out of both recipes, comma-separated")
    p.add_argument("--seeds", default="0,1,2,3,4", help="fold assignments")
    p.add_argument("--model", default="smollm2-135m", help="scoring model (the cache is per model)")
    p.add_argument("--limit", type=int, default=None, help="responses read per task (default: all)")
    p.add_argument("--bootstrap", type=int, default=1000)
    args = p.parse_args(argv)
    from syncheck.cache import cache_dir

    records = read_ragtruth_files(args.data, limit=args.limit)
    config = ScoringConfig(model=args.model, lid=False, lookback=False, embedding=False)
    work_dir = Path(args.work_dir or cache_dir() / "ragtruth-bench")
    table = sentence_table(records, score_ragtruth(records, config, work_dir))
    if args.alignment:
        from benchmarks.ragtruth.alignment_feature import add_alignment_feature

        add_alignment_feature(table, args.alignment, work_dir)
    added = [n for n in args.feature.split(",") if n]
    dropped = [n for n in args.drop.split(",") if n]
    for name in added:
        add_derived(table, name)
        if name not in table.features:
            raise SystemExit(f"no feature {name!r} in the table; choose from {sorted(table.features)}")
    label = ", ".join(added) + (f" (both recipes without {', '.join(dropped)})" if dropped else "")
    without = [n for n in DEFAULT_FEATURES if n not in added and n not in dropped and n in table.features]
    rows = {"word overlap (trivial)": None, **{f"{n} alone": None for n in added},
            "default recipe without it": without, "default recipe with it": [*without, *added]}
    seeds = [int(s) for s in args.seeds.split(",") if s]
    auc: dict[str, list[dict[str, float]]] = {name: [] for name in rows}
    first: dict[str, dict[str, tuple[float, float, float]]] = {}
    for seed in seeds:
        folds = grouped_folds(table.source, 5, seed)
        probes = probe_folds(table, folds, list(DEFAULT_PROBES), seed)
        for name, features in rows.items():
            if features is None:
                alone = name[: -len(" alone")]
                score = (table.overlap if name.startswith("word overlap")
                         else feature_sign(base_name(alone)) * table.features[alone])
            else:
                score = oof_stacked(table, folds, DEFAULT_KIND, features, list(DEFAULT_PROBES), seed, DEFAULT_PARAMS,
                                    probes)
            figures = task_figures(table, score, folds, args.bootstrap)
            auc[name].append({t: figures[t].sentence[0] for t in TASKS})
            if seed == seeds[0]:
                first[name] = {t: figures[t].sentence for t in TASKS}
    command = "python -m benchmarks.ragtruth.feature_gain " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    data = ", ".join(Path(f.strip()).name for f in args.data.split(",") if f.strip())
    print(f"Command: `{command}`\n\nRAGTruth ({data}), {len(table.label)} sentences, RAGTruth rows only; "
          f"sentence ROC AUC. Seed {seeds[0]} with a 95% bootstrap interval over documents; then the mean over "
          f"fold seeds {seeds} and each seed's gain of the recipe with {label} over the recipe without.\n")
    print("| row | " + " | ".join(f"{t} (seed {seeds[0]})" for t in TASKS) + " | mean | "
          + " | ".join(f"{t}, mean of {len(seeds)} seeds" for t in TASKS) + " | mean |")
    print("| --- |" + " --- |" * (2 * len(TASKS) + 2))
    for name in rows:
        cells = [f"{first[name][t][0]:.3f} [{first[name][t][1]:.2f}, {first[name][t][2]:.2f}]" for t in TASKS]
        means = [float(np.mean([a[t] for a in auc[name]])) for t in TASKS]
        print(f"| {name} | " + " | ".join(cells) + f" | {np.mean([first[name][t][0] for t in TASKS]):.3f} | "
              + " | ".join(f"{m:.3f}" for m in means) + f" | {np.mean(means):.3f} |")
    gains = {t: [w[t] - o[t] for w, o in zip(auc["default recipe with it"], auc["default recipe without it"])]
             for t in TASKS}
    print("\nGain per seed (with - without): "
          + "; ".join(f"{t} " + ", ".join(f"{g:+.3f}" for g in gains[t]) for t in TASKS))
    fired = {name: nonzero_rows(table, name) for name in added if base_name(name) == name}
    for name, per_task in fired.items():
        print(
            f"\nSentences where {name} is nonzero (unfaithful share among them; the task's base rate): "
            + "; ".join(f"{t} {n} of {total} ({bad:.0%}; {base:.0%})" for t, (n, total, bad, base) in per_task.items())
        )
    return {"auc": auc, "gains": gains, "nonzero": fired}


def nonzero_rows(table: SentenceTable, name: str) -> dict[str, tuple[int, int, float, float]]:
    """Per task: (sentences where ``name`` is nonzero, sentences, unfaithful share among the former, among all)."""
    x = table.features[name]
    fired = np.isfinite(x) & (x != 0)
    out = {}
    for t in TASKS:
        m = table.task == t
        hit = fired & m
        out[t] = (int(hit.sum()), int(m.sum()), float(1 - table.label[hit].mean()) if hit.any() else 0.0,
                  float(1 - table.label[m].mean()) if m.any() else 0.0)
    return out


if __name__ == "__main__":
    main()
