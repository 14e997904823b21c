"""RAGTruth benchmark: every faithfulness signal on real RAG answers, grouped 5-fold CV, per task.

    HF_HUB_OFFLINE=1 python -m benchmarks.ragtruth.run --data PATH/TO/ragtruth/dev.jsonl \\
        [--results-md benchmarks/RESULTS.md] [--json figures.json]

Scores every response once with the scoring model (cached in ``--work-dir``;
reruns only evaluate), then reports, per task (QA, Summary, Data2txt),
sentence-level and response-level ROC AUC with 95% bootstrap intervals and
response-level F1 at a tuned threshold (see :mod:`benchmarks.ragtruth.evaluate`)
for: the trivial baselines, every single feature oriented by its sign,
RAGulator's and DelucionQA's baselines, the probes alone, SynCheck-LR/XGB/MLP
on the paper's features and on every signal, the default recipe, the shipped
default aggregator, and the paper's Table 1 as reference lines; then the
drop-one / add-one ablation of the default recipe.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks._common import interval
from benchmarks.ragtruth.data import TASKS, read_ragtruth
from benchmarks.ragtruth.evaluate import (
    BASELINES,
    PAPER_FEATURES,
    PAPER_TABLE1,
    PUBLISHED_RESPONSE_F1,
    SIGNAL_GROUPS,
    Row,
    oof_probe,
    oof_stacked,
    oriented,
    probe_folds,
    task_figures,
)
from benchmarks.ragtruth.scoring import ScoringConfig, SentenceTable, score_ragtruth, sentence_table
from benchmarks.results_md import publish
from benchmarks.run_stamp import run_stamp
from features.lexical import LEXICAL_FEATURE_SIGNS
from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS, DEFAULT_PROBES
from syncheck.fitting import grouped_folds

SECTION = "## RAGTruth: faithfulness on real RAG answers"
KIND_LABELS = {"lr": "LR", "xgb": "XGB", "mlp": "MLP"}
STRING_BASELINES = {
    "lexical_precision": "lexical precision, stemmed (RAGulator)",
    "unigram_perplexity": "unigram perplexity (RAGulator)",
    "bigram_perplexity": "bigram perplexity (RAGulator)",
    "overlap_ratio": "overlap ratio, DP alignment (DelucionQA)",
    "keyword_support": "keyword support (DelucionQA)",
    "embedding_similarity": "embedding max-cosine, MiniLM (DelucionQA, RAGulator)",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ragtruth.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl", help="RAGTruth JSONL (its dev part)")
    p.add_argument("--work-dir", default=None, help="feature cache (default: <syncheck cache>/ragtruth-bench)")
    p.add_argument("--model", default="smollm2-135m", help="scoring model (alias, hub id, directory, .gguf)")
    p.add_argument("--limit", type=int, default=None, help="responses read per task (default: all)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0, help="fold assignment and model seeds")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of each 95%% interval")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--dtype", default="float32", help="scoring model dtype (bfloat16: ~3x faster for a 1.5B model on "
                                                      "CPUs with AMX; features drift slightly: benchmarks.dtype_drift)")
    p.add_argument("--score-only", action="store_true", help="fill the feature cache and stop (no evaluation)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--no-lookback", action="store_true", help="do not record lookback ratios (faster scoring)")
    p.add_argument("--no-lid", action="store_true", help="do not compute LID features")
    p.add_argument("--no-embedding", action="store_true", help="skip the MiniLM embedding baseline")
    p.add_argument("--no-ablation", action="store_true", help="skip the ablation table")
    p.add_argument("--halueval-dir", default=None,
                   help="also report the default recipe with the shipped default's other training rows (HaluEval train "
                        "side) added to every training fold")
    p.add_argument("--generated", action="append", default=[],
                   help="as --halueval-dir, for generated_set files of the model's own answers; repeatable")
    p.add_argument("--results-md", default=None, help="write the tables into this file's RAGTruth section")
    p.add_argument("--json", default=None, help="also write every figure as JSON here")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- rows
def main_rows(table: SentenceTable, folds, probe_cache, seed: int, n_boot: int, shipped: Any | None,
              extra: Any | None = None) -> list[Row]:
    def row(label: str, family: str, scores: np.ndarray) -> Row:
        return Row(label, family, task_figures(table, scores, folds, n_boot))

    scorer_feats = [n for n in table.feature_names if n not in LEXICAL_FEATURE_SIGNS]
    rows = [row(label, "baseline", oriented(table, key)) for label, key in BASELINES.items()]
    rows += [row(name, "single feature", oriented(table, name)) for name in scorer_feats]
    rows += [row(label, "string baseline", oriented(table, name)) for name, label in STRING_BASELINES.items()
             if name in table.features]
    rows += [row(f"{p} alone (probe)", "probe", oof_probe(probe_cache, folds, p, len(table))) for p in table.vectors]
    paper = [n for n in scorer_feats if n in PAPER_FEATURES or n.startswith("lid_layer_")]
    for kind, label in KIND_LABELS.items():
        rows.append(
            row(
                f"SynCheck-{label}, the paper's features", "aggregator",
                oof_stacked(table, folds, kind, paper, seed=seed),
            )
        )
    for kind, label in KIND_LABELS.items():
        rows.append(
            row(
                f"{label}, every signal + probes",
                "aggregator",
                oof_stacked(table, folds, kind, scorer_feats, list(table.vectors), seed, probe_cache=probe_cache),
            )
        )
    recipe = [n for n in DEFAULT_FEATURES if n in table.features]
    probes = [p for p in DEFAULT_PROBES if p in table.vectors]
    rows.append(row(f"default recipe ({DEFAULT_KIND.upper()} + {', '.join(probes)}), grouped CV", "default",
                    oof_stacked(table, folds, DEFAULT_KIND, recipe, probes, seed, DEFAULT_PARAMS, probe_cache)))
    if extra is not None:
        rows.append(row(f"default recipe + the shipped default's other rows ({extra.source}) in every training fold",
                        "default", oof_with_extra(table, folds, extra, seed)))
    if shipped is not None:
        agg, note = shipped
        rows.append(row(f"shipped default aggregator, {note}", "default", shipped_scores(table, agg)))
    return rows


def oof_with_extra(table: SentenceTable, folds, extra: Any, seed: int) -> np.ndarray:
    """Out-of-fold scores of the default recipe trained on each training fold plus ``extra`` rows (never tested)."""
    from benchmarks.ragtruth.train_default import fit_default
    from benchmarks.ragtruth.training import Rows

    names = list(extra.names)
    X = table.matrix(names)
    out = np.zeros(len(table))
    for train, test in folds:
        part = Rows(names, X[train], table.vectors["hidden_probe"][train], table.label[train],
                    np.asarray([f"ragtruth/{s}" for s in table.source[train]]), table.chars[train], "ragtruth")
        model = fit_default(Rows.concat([part, extra]), seed, tune_threshold=False)
        out[test] = model.predict(X[test], {"hidden_probe": table.vectors["hidden_probe"][test]})
    return out


def shipped_scores(table: SentenceTable, agg: Any) -> np.ndarray:
    """The installed default aggregator (and its probes) applied to the table as is."""
    columns = []
    probes = {p.name: p for p in getattr(agg, "probes", [])}
    for name in agg.feature_names_in_:
        if name in probes:
            columns.append(probes[name].predict_proba(table.vectors[name])[:, 1])
        else:
            columns.append(table.features[name])
    return agg.predict_proba(np.column_stack(columns))[:, 1]


def load_shipped(table: SentenceTable, model: str) -> tuple[Any, str] | None:
    from syncheck.aggregators import default_aggregator_dir, load_aggregator

    path = default_aggregator_dir()
    if not (path / "meta.json").is_file():
        return None
    agg = load_aggregator(path)
    have = set(table.features) | set(table.vectors)
    if any(n not in have for n in agg.feature_names_in_) or agg.meta.get("scorer", {}).get("model") not in (
        None,
        model,
    ):
        return None
    sets = agg.meta.get("training", {}).get("sets", [])
    if any("ragtruth" in str(s).lower() for s in sets):
        return agg, "trained on all of these rows (in-sample: not a test figure)"
    return agg, "as installed"


def ablation(table: SentenceTable, folds, probe_cache, seed: int) -> dict[str, dict[str, float]]:
    """Sentence AUROC per task of the default recipe, without each signal group, and with LID / lookback added."""
    from sklearn.metrics import roc_auc_score

    recipe = [n for n in DEFAULT_FEATURES if n in table.features]
    probes = [p for p in DEFAULT_PROBES if p in table.vectors]
    everything = [n for n in table.feature_names if n not in LEXICAL_FEATURE_SIGNS]

    def figures(names, probe_names) -> dict[str, float]:
        scores = oof_stacked(table, folds, DEFAULT_KIND, names, probe_names, seed, DEFAULT_PARAMS, probe_cache)
        return {t: float(roc_auc_score(table.label[table.task == t], scores[table.task == t])) for t in TASKS
                if (table.task == t).any()}

    out = {"default recipe": figures(recipe, probes)}
    for group, member in SIGNAL_GROUPS.items():
        names = [n for n in recipe if not member(n)]
        kept = [p for p in probes if not member(p)]
        if len(names) < len(recipe) or len(kept) < len(probes):
            out[f"without {group}"] = figures(names, kept)
    for group, member in SIGNAL_GROUPS.items():
        extra = [n for n in everything if member(n) and n not in recipe]
        extra_probes = [p for p in table.vectors if member(p) and p not in probes]
        if extra or extra_probes:
            out[f"with {group} added"] = figures(recipe + extra, probes + extra_probes)
    return out


# ---------------------------------------------------------------------------- markdown
def markdown(rows: list[Row], abl: dict[str, dict[str, float]] | None, header: list[str]) -> str:
    lines = list(header)
    tasks = [t for t in TASKS if any(t in r.tasks for r in rows)]
    lines += [
        "",
        "**Sentence level** (ROC AUC [95% CI]; higher = better separation of faithful from unfaithful sentences):",
        "",
        "| family | signal | " + " | ".join(tasks) + " | mean |",
        "| --- | --- | " + " | ".join("---" for _ in tasks) + " | --- |",
    ]
    for r in rows:
        cells = [interval(r.tasks[t].sentence) if t in r.tasks else "-" for t in tasks]
        lines.append(f"| {r.family} | {r.label} | " + " | ".join(cells) + f" | {r.mean_sentence_auroc():.3f} |")
    for model, refs in PAPER_TABLE1.items():
        for name, vals in refs.items():
            cells = [f"{v:.3f}" for t, v in zip(TASKS, vals) if t in tasks]
            lines.append(f"| reference | {name}, {model} (paper Table 1, full test split, own answers) | "
                         + " | ".join(cells) + f" | {np.mean(vals):.3f} |")
    lines += ["", "**Response level** (a response's score is its least faithful sentence's; ROC AUC [95% CI], and F1 "
                  "in % of "
              "flagging hallucinated responses at a threshold tuned on the other folds):", "",
              "| family | signal | " + " | ".join(f"{t} AUROC | {t} F1" for t in tasks) + " |",
              "| --- | --- | " + " | ".join("--- | ---" for _ in tasks) + " |"]
    for r in rows:
        cells = [f"{interval(r.tasks[t].response)} | {r.tasks[t].f1:.1f}" if t in r.tasks else "- | -" for t in tasks]
        lines.append(f"| {r.family} | {r.label} | " + " | ".join(cells) + " |")
    pub = "; ".join(f"{k} {v}" for k, v in PUBLISHED_RESPONSE_F1.items())
    lines += ["", "Published response-level F1 on the full test split, all tasks together (reference, not rerun): "
                  f"{pub}."]
    if abl:
        base = abl["default recipe"]
        lines += [
            "",
            "**Ablation of the default recipe** (sentence ROC AUC, grouped CV; Δ = change of the mean "
            "against the recipe):",
            "",
            "| configuration | " + " | ".join(tasks) + " | mean | Δ mean |",
            "| --- | " + " | ".join("---" for _ in tasks) + " | --- | --- |",
        ]
        for label, figs in abl.items():
            mean = np.mean([figs[t] for t in tasks])
            delta = mean - np.mean([base[t] for t in tasks])
            lines.append(f"| {label} | " + " | ".join(f"{figs[t]:.3f}" for t in tasks) + f" | {mean:.3f} | "
                                                                                         f"{delta:+.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from syncheck.cache import cache_dir

    t0 = time.perf_counter()
    records = read_ragtruth(args.data, limit=args.limit)
    cfg = ScoringConfig(model=args.model, lid=not args.no_lid, lookback=not args.no_lookback,
                        embedding=not args.no_embedding, batch_size=args.batch_size, dtype=args.dtype)
    work = Path(args.work_dir) if args.work_dir else cache_dir() / "ragtruth-bench"
    scored = score_ragtruth(records, cfg, work)
    if args.score_only:
        print(f"scored {sum(s.error is None for s in scored)} of {len(scored)} responses into {work}")
        return
    table = sentence_table(records, scored)
    t_score = time.perf_counter() - t0
    folds = grouped_folds(table.source, args.folds, args.seed)
    probe_cache = probe_folds(table, folds, list(table.vectors), args.seed)
    extra = None
    if args.halueval_dir or args.generated:
        from benchmarks.ragtruth.train_default import load_rows
        from benchmarks.ragtruth.training import Rows

        extra = Rows.concat(list(load_rows(None, args.halueval_dir, args.generated, args.model, args.seed).values()))
    rows = main_rows(table, folds, probe_cache, args.seed, args.bootstrap, load_shipped(table, args.model), extra)
    abl = None if args.no_ablation else ablation(table, folds, probe_cache, args.seed)
    t_all = time.perf_counter() - t0
    import torch
    import transformers

    counts = {t: (int((table.task == t).sum()), int((table.label[table.task == t] == 0).sum()),
                  sum(r.task == t for r in table.records), sum(r.task == t and not r.label for r in table.records))
              for t in TASKS}
    command = "python -m benchmarks.ragtruth.run " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    header = [
        f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/{command}` (features cached in the work dir; a rerun only "
        "evaluates).",
        "",
        f"Data: RAGTruth dev part ({len(table.records)} responses by six LLMs over {len(set(table.source.tolist()))} "
        "source documents; RAGTruth's `dev.jsonl`, never committed). Per task, sentences (unfaithful) / responses "
        "(unfaithful): " + "; ".join(f"{t} {c[0]} ({c[1]}) / {c[2]} ({c[3]})" for t, c in counts.items()) + ". "
        "Sentence labels: unfaithful when the sentence overlaps an annotated span (SynCheck, Wu et al., 2024, "
        "Appendix B); sentences are syncheck's (Punkt plus line breaks). Summary and Data2txt records get the task's "
        "instruction as question.",
        "",
        f"Protocol: {args.folds}-fold cross-validation grouped by `source_id` (no document on both sides), one model "
        "trained on the training folds of all three tasks and evaluated per task; probes are stacked (the aggregator "
        "learns from their inner out-of-fold scores); single features oriented by their declared sign, never flipped. "
        f"Scoring model: {args.model} (teacher-forced: these answers were written by other models), {args.dtype}, "
        "2 CPU "
        f"threads; align_score = lexical; scoring {t_score:.0f} s (cached), whole run {t_all:.0f} s. Machine: "
        f"{platform.machine()}, python {platform.python_version()}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}.",
    ]
    md = markdown(rows, abl, header)
    publish(md, args.results_md, SECTION)
    figures = {r.label: {t: {"sentence": list(f.sentence), "response": list(f.response), "f1": f.f1,
                             "n_sentences": f.n_sentences, "n_responses": f.n_responses} for t, f in r.tasks.items()}
               for r in rows}
    summary = {"rows": figures, "ablation": abl, "counts": counts, "dropped": table.dropped, "run": run_stamp(args)}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
