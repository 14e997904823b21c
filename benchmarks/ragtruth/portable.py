"""Cross-model transfer on RAGTruth, and the portable default aggregator trained from it.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.ragtruth.portable --model smollm2-135m \\
        --model qwen2.5-coder-1.5b:bfloat16 --generated GEN.jsonl --results-md benchmarks/RESULTS.md --train

Each ``--model NAME[:DTYPE]`` scores RAGTruth dev teacher-forced (cached with
``benchmarks.ragtruth.run``; the two families here: SmolLM2-135M, Llama
architecture; Qwen2.5-Coder-1.5B, Qwen2). Responses scored by every model are
kept, so every row of the table is on the same sentences, with the same
5 folds grouped by source document. Per task, sentence ROC AUC [95% CI] of:

- the trivial baselines (sentence length, word overlap);
- the portable recipe (:data:`syncheck.aggregators.recipe.PORTABLE_FEATURES`:
  no probe, no LID, no per-head features) trained on one model's features and
  tested on another's (training folds of one, test fold of the other), on its
  own, and on every model's training folds at once;
- each model's own calibrated recipe (default features + its hidden-state
  probe), as ``syncheck calibrate`` fits it.

``--train`` then fits the shipped portable aggregator (``portable-aggregator``,
:mod:`syncheck.shipped_models`) on every model's RAGTruth sentences, plus the
first model's HaluEval train-side rows and ``--generated`` answers (as the
default), tunes FOD's thresholds on held-out generated sentences, and writes
its manifest.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.ragtruth.data import TASKS, read_ragtruth
from benchmarks.ragtruth.evaluate import Row, oof_stacked, oriented, task_figures
from benchmarks.ragtruth.scoring import ScoringConfig, SentenceTable, score_ragtruth, sentence_table
from benchmarks.ragtruth.training import Rows
from syncheck.fitting import grouped_folds

SECTION = "## Cross-model transfer: the portable default"


def parse_model(spec: str) -> tuple[str, str]:
    name, _, dtype = spec.partition(":")
    return name, dtype or "float32"


def scored_for(records, name: str, dtype: str, work: Path):
    """Scored items of ``records`` by ``name``: an existing complete cache of any LID / lookback setting, else
    scored now without LID and lookback (the portable recipe needs neither)."""
    from benchmarks.halueval.scoring import config_key

    variants = [ScoringConfig(model=name, dtype=dtype, lid=lid, lookback=lb) for lid, lb in
                ((True, True), (False, False), (True, False), (False, True))]
    for cfg in variants:
        path = work / f"ragtruth-{config_key(cfg.settings())}.jsonl"
        if path.is_file() and sum(1 for line in path.open(encoding="utf-8") if line.strip()) >= len(records):
            return score_ragtruth(records, cfg, work)
    return score_ragtruth(records, variants[1], work)


def aligned_tables(records, scored: dict[str, list]) -> dict[str, SentenceTable]:
    """One :class:`SentenceTable` per model over the responses every model scored, sentence for sentence."""
    ok = [i for i in range(len(records)) if all(s[i].error is None for s in scored.values())]
    tables = {m: sentence_table([records[i] for i in ok], [s[i] for i in ok]) for m, s in scored.items()}
    first = next(iter(tables.values()))
    for m, t in tables.items():
        if t.texts != first.texts:
            raise ValueError(f"{m}'s sentences differ from the first model's: the tables cannot be compared row by row")
    return tables


def fit_predict(kind: str, params: dict, names: Sequence[str], X_train, y_train, X_test, seed: int) -> np.ndarray:
    from syncheck.aggregators import make_aggregator

    agg = make_aggregator(kind, feature_names=list(names), random_state=seed, tune_threshold=False, **params)
    return agg.fit(X_train, y_train).predict_proba(X_test)[:, 1]


def oof_transfer(train: list[SentenceTable], test: SentenceTable, folds, kind: str, params: dict,
                 names: Sequence[str], seed: int) -> np.ndarray:
    """Out-of-fold scores of ``test``'s rows by the portable recipe fitted on the training folds of every table
    in ``train`` (rows aligned, so a fold is the same documents in each)."""
    out = np.zeros(len(test))
    for tr, te in folds:
        X = np.vstack([t.matrix(names)[tr] for t in train])
        y = np.concatenate([t.label[tr] for t in train])
        out[te] = fit_predict(kind, params, names, X, y, test.matrix(names)[te], seed)
    return out


def transfer_rows(tables: dict[str, SentenceTable], folds, kinds: dict[str, dict], seed: int,
                  n_boot: int) -> list[tuple[str, Row]]:
    """(tested on, row) for the baselines, every train -> test pair, all models together, and each calibrated."""
    from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS, PORTABLE_FEATURES

    names = [n for n in PORTABLE_FEATURES if all(n in t.features for t in tables.values())]
    out: list[tuple[str, Row]] = []
    first = next(iter(tables.values()))
    for label, key in (("sentence length (trivial)", "chars"), ("word overlap (trivial)", "overlap")):
        out.append(("any", Row(label, "baseline", task_figures(first, oriented(first, key), folds, n_boot))))
    for test_name, test in tables.items():
        for kind, params in kinds.items():
            for train_name, train in tables.items():
                scores = oof_transfer([train], test, folds, kind, params, names, seed)
                family = "portable, same model" if train_name == test_name else "portable, transferred"
                out.append((test_name, Row(f"portable {kind.upper()} trained on {train_name}", family,
                                           task_figures(test, scores, folds, n_boot))))
            if len(tables) > 1:
                scores = oof_transfer(list(tables.values()), test, folds, kind, params, names, seed)
                out.append((test_name, Row(f"portable {kind.upper()} trained on all {len(tables)} models",
                                           "portable, pooled", task_figures(test, scores, folds, n_boot))))
        recipe = [n for n in DEFAULT_FEATURES if n in test.features]
        probes = ["hidden_probe"] if "hidden_probe" in test.vectors else []
        scores = oof_stacked(test, folds, DEFAULT_KIND, recipe, probes, seed, DEFAULT_PARAMS)
        out.append((test_name, Row(f"calibrated for {test_name} (default recipe + its own hidden probe)", "calibrated",
                                   task_figures(test, scores, folds, n_boot))))
    return out


def markdown(rows: list[tuple[str, Row]], header: list[str]) -> str:
    lines = list(header) + ["", "| tested on (features of) | family | aggregator | " + " | ".join(TASKS) + " | mean |",
                            "| --- | --- | --- | " + " | ".join("---" for _ in TASKS) + " | --- |"]
    for test, r in rows:
        cells = [f"{r.tasks[t].sentence[0]:.3f} [{r.tasks[t].sentence[1]:.2f}, {r.tasks[t].sentence[2]:.2f}]"
                 if t in r.tasks else "-" for t in TASKS]
        lines.append(
            f"| {test} | {r.family} | {r.label} | " + " | ".join(cells) + f" | {r.mean_sentence_auroc():.3f} |"
        )
    return "\n".join(lines) + "\n"


def table_rows(table: SentenceTable, names: Sequence[str], source: str) -> Rows:
    """The table as training rows without probe inputs (the portable recipe has no probe; widths differ by model)."""
    return Rows(list(names), table.matrix(names), np.zeros((len(table), 0), np.float32), table.label,
                np.asarray([f"ragtruth/{s}" for s in table.source]), table.chars, source)


def train_portable(tables: dict[str, SentenceTable], first_model: str, args: argparse.Namespace) -> Path:
    """Fit and save the shipped portable aggregator (see the module docstring)."""
    from benchmarks.ragtruth.train_default import heldout_generated, load_rows, write_shipped_manifest
    from syncheck.aggregators import save_aggregator
    from syncheck.aggregators.recipe import PORTABLE_FEATURES, PORTABLE_KIND, PORTABLE_PARAMS
    from syncheck.aggregators.stacked import fit_stacked
    from syncheck.aggregators.thresholds import tune_thresholds

    names = list(PORTABLE_FEATURES)

    def fit(rows: Rows, seed: int = 0, **overrides):
        return fit_stacked(PORTABLE_KIND, rows.X, names, None, rows.y, rows.groups, seed=seed,
                           **{**PORTABLE_PARAMS, **overrides})

    sources = {f"ragtruth-{m}": table_rows(t, names, f"ragtruth-{m}") for m, t in tables.items()}
    extra = load_rows(None, args.halueval_dir or None, args.generated, first_model, args.seed, names=names)
    for key, rows in extra.items():
        sources[f"{key}-{first_model}"] = replace(rows, hidden=np.zeros((len(rows), 0), np.float32))
    gen_key = f"generated-{first_model}"
    decoding = None
    if gen_key in sources and len(set(sources[gen_key].y.tolist())) == 2:
        fixed = Rows.concat([r for k, r in sources.items() if k != gen_key])
        lines, oof = heldout_generated(fixed, sources[gen_key], args.seed, fit=fit, label="portable recipe")
        print("\n".join(lines), file=sys.stderr)
        decoding = tune_thresholds(sources[gen_key].y, oof)
        decoding["data"] = f"out-of-fold scores of {first_model}'s generated sentences (5-fold grouped by record)"
    rows = Rows.concat(list(sources.values()))
    model = fit(rows, args.seed)
    training = {
        "data": "RAGTruth dev scored by each model below (all rows), plus the first model's HaluEval train side and "
                "generated answers",
        "models": [f"{m}" for m in tables], "sets": list(sources),
        "sentences_per_set": {k: int(len(r)) for k, r in sources.items()},
        "recipe": {"kind": PORTABLE_KIND, "params": PORTABLE_PARAMS, "features": names},
        "sentences": int(len(rows)), "faithful": int(rows.y.sum()), "unfaithful": int(len(rows) - rows.y.sum()),
        "command": "python -m benchmarks.ragtruth.portable " + " ".join(sys.argv[1:]),
    }
    scorer = {
        "model": None, "fingerprint": None, "alignment": "lexical", "align_with_question": False, "lid_layers": None,
        "lid_k": None, "kl": True, "kl_threshold": 3.0, "lookback": False, "text_checks": True,
    }
    out = save_aggregator(model.aggregator, args.out, training=training, scorer=scorer, decoding=decoding)
    write_shipped_manifest(out, training["sentences_per_set"], None)
    print(f"trained the portable {PORTABLE_KIND} on {len(rows)} sentences from {list(sources)}; wrote {out}"
          + (f"; tau1 {decoding['tau1']:.2f}, tau2 {decoding['tau2']:.2f}" if decoding else ""), file=sys.stderr)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ragtruth.portable", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl")
    p.add_argument("--model", action="append", default=[], help="NAME[:DTYPE]; repeatable (default: smollm2-135m)")
    p.add_argument("--limit", type=int, default=None, help="responses per task")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--kinds", default="lr,xgb", help="aggregators of the portable recipe to compare")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--results-md", default=None)
    p.add_argument("--train", action="store_true", help="also fit the shipped portable aggregator")
    p.add_argument("--halueval-dir", default="../shared/data/halueval", help="'' to leave HaluEval out of --train")
    p.add_argument("--generated", action="append", default=[], help="the first model's generated_set JSONL")
    p.add_argument("-o", "--out", default=None, help="where --train writes (default: the shipped portable's directory)")
    args = p.parse_args(argv)
    if args.out is None:
        from syncheck.shipped_models import PORTABLE_AGGREGATOR, shipped_model_dir

        args.out = str(shipped_model_dir(PORTABLE_AGGREGATOR))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from syncheck.aggregators.recipe import PORTABLE_KIND, PORTABLE_PARAMS
    from syncheck.cache import cache_dir

    models = [parse_model(m) for m in (args.model or ["smollm2-135m"])]
    records = read_ragtruth(args.data, limit=args.limit)
    work = Path(args.work_dir) if args.work_dir else cache_dir() / "ragtruth-bench"
    scored = {name: scored_for(records, name, dtype, work) for name, dtype in models}
    tables = aligned_tables(records, scored)
    first = next(iter(tables.values()))
    folds = grouped_folds(first.source, args.folds, args.seed)
    from syncheck.aggregators.recipe import DEFAULT_KIND, DEFAULT_PARAMS

    known = {PORTABLE_KIND: PORTABLE_PARAMS, DEFAULT_KIND: DEFAULT_PARAMS}
    kinds = {k: known.get(k, {}) for k in args.kinds.split(",") if k}
    rows = transfer_rows(tables, folds, kinds, args.seed, args.bootstrap)
    header = ["Command: `HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.ragtruth.portable "
              + " ".join(f"--model {n}:{d}" for n, d in models) + " --results-md benchmarks/RESULTS.md`.",
              "",
              f"RAGTruth dev, {len(first.records)} responses scored by every model ({len(first)} sentences), "
              "teacher-forced; "
              f"{args.folds}-fold CV grouped by source document, the same folds for every row; sentence ROC AUC "
              "[95% bootstrap CI over documents]. Models: " + ", ".join(f"{n} ({d})" for n, d in models) + ". "
              "'portable' is the recipe with architecture-independent features only (shipped: "
              f"{PORTABLE_KIND.upper()}); 'transferred' trains on one "
              "model's features and tests on another's; 'calibrated' is what `syncheck calibrate` fits (default "
              "features + the model's own hidden-state probe)."]
    md = markdown(rows, header)
    print(SECTION + "\n\n" + md)
    if args.results_md:
        from benchmarks.results_md import write_section

        write_section(Path(args.results_md), SECTION, md)
    if args.train:
        train_portable(tables, models[0][0], args)
    return {f"{test} / {r.label}": {t: r.tasks[t].sentence[0] for t in r.tasks} for test, r in rows}


if __name__ == "__main__":
    main()
