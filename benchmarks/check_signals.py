"""What Provenance's final check reads on a HaluEval set: every signal of the scored answers, one by one.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.check_signals --set summarization --start 600 --limit 200 \\
        [--ragtruth PATH/TO/ragtruth/dev.jsonl] [--results-md benchmarks/RESULTS.md]

Each answer is scored as ``syncheck check``'s default scores it (every chunk of its context joined into one premise,
the question in the prompt, the default scorer with its final model), and the scored rows are cached as JSON lines
(``--work-dir``, default ``<syncheck cache>/check-signals``, one file per set, first record and version of the shipped
default aggregator: a rerun scores nothing, a retrained default scores again). Then, per signal, the response
AUROC (label 1 = faithful) with a 95% bootstrap interval over records:

- the check's own statistics: the response verdict over final scores (``--task qa``), what ``syncheck check --task
  summary`` gives (the verdict averaged with the answer's mean ``local_support``; one premise of every chunk, as
  here), the default ``--task auto`` (each answer one or the other by its question), the mean and the minimum of
  the live and of the final sentence scores;
- every sentence feature's response mean, read in the feature's own sign convention (:mod:`features.registry`;
  "which way" names it): a figure under 0.5 is a signal that points the wrong way on this set;
- with ``--ragtruth``: a *support-only* sentence model (logistic regression over the context-support features
  :data:`SUPPORT_FEATURES`, nothing that reads fluency), fitted on every RAGTruth dev sentence from the feature cache
  of ``benchmarks.ragtruth.run --no-lid --no-lookback --no-embedding``, its response mean, so one can see what a
  check blind to the writer's style would get;
- the trivial baselines: response length (shorter = faithful) and word overlap with the context.

It exists to read errors, not to choose a default: records ``--start`` on (the default aggregator trains on records
< 600 of the QA file; ``benchmarks.provenance_check`` reports the default on records 2000+).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.provenance_check import SET_TITLES, halueval_examples
from benchmarks.provenance_offline import parse_run_args
from benchmarks.results_md import publish
from benchmarks.run_stamp import run_stamp
from features.alignment.lexical import lexical_precision
from features.registry import feature_sign
from syncheck.checking.support import SUMMARY_LEXICAL_WEIGHT, answer_task, lean_on_lexical
from syncheck.jsonl import iter_jsonl
from syncheck.stats import bootstrap_auroc

SECTION = "### What the final check reads: the last `check_signals` run"
#: Features that compare the answer with its context and read nothing of its fluency on its own.
SUPPORT_FEATURES = ("local_support", "pmi_mean", "align_score", "mean_contrastive_kl")


def default_model_tag() -> str:
    """Ten hex digits of a digest of every file of the shipped default aggregator (live model, final model, verdicts):
    cached rows hold that model's scores, so a retrained default must not read a cache its predecessor wrote."""
    import hashlib

    from syncheck.aggregators.resolve import default_aggregator_dir

    root = default_aggregator_dir()
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:10]


def row_cache(work: Path, subset: str, start: int) -> Path:
    """The row cache of ``subset`` from record ``start`` under ``work``, for the shipped default as it is now."""
    return work / f"{subset}-{start}-{default_model_tag()}.jsonl"


def cached_rows(cache: Path) -> dict[str, dict[str, Any]]:
    """``{id: row}`` of a JSON-lines row cache (empty when the file does not exist yet)."""
    if not cache.is_file():
        return {}
    return {row["id"]: row for row in iter_jsonl(cache)}


def score_rows(examples: list, cache: Path, batch: int = 8) -> list[dict[str, Any]]:
    """One JSON row per example (cached in ``cache`` by id; an example already there is not scored again)."""
    from syncheck.checking.provenance import joined_premise, split_context
    from syncheck.model.models import DEFAULT_MODEL
    from syncheck.records import Record
    from syncheck.scorer import Scorer

    done = cached_rows(cache)
    todo = [e for e in examples if e.id not in done]
    if todo:
        scorer = Scorer(DEFAULT_MODEL)
        stamp = run_stamp({"model": DEFAULT_MODEL, "batch": batch})
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as out:
            for i in range(0, len(todo), batch):
                part = todo[i:i + batch]
                records = []
                for e in part:
                    chunks = split_context(e.context)
                    records.append(Record(id=e.id, context=joined_premise(chunks, range(len(chunks))),
                                          response=e.response, question=e.question or None))
                for e, rec, res in zip(part, records, scorer.score_records(records)):
                    row = {"id": e.id, "group": e.group, "label": e.label, "context": rec.context,
                           "response": rec.response, "error": res.error, "response_score": res.response_score,
                           "sentences": [s.to_json() for s in res.sentences], "run": stamp}
                    done[e.id] = row
                    out.write(json.dumps(row) + "\n")
                print(f"  scored {min(i + batch, len(todo))} of {len(todo)}", file=sys.stderr, flush=True)
    return [done[e.id] for e in examples]


def _response_mean(rows: list[dict], name: str) -> np.ndarray:
    out = []
    for r in rows:
        v = [s["features"].get(name) for s in r["sentences"]]
        v = [x for x in v if x is not None]
        out.append(np.mean(v) if v else np.nan)
    return np.asarray(out, dtype=float)


def support_model(ragtruth: str):
    """syncheck's LR aggregator over :data:`SUPPORT_FEATURES`, fitted on every RAGTruth dev sentence (the benchmark
    cache)."""
    from benchmarks.ragtruth.response_verdict import cached_table
    from benchmarks.ragtruth.response_verdict import parse_args as verdict_args
    from syncheck.aggregators import make_aggregator

    table = cached_table(verdict_args(["--data", ragtruth]))
    X = np.nan_to_num(table.matrix(list(SUPPORT_FEATURES)))
    return make_aggregator("lr", feature_names=list(SUPPORT_FEATURES)).fit(X, table.label)


def checked_as_default(row: dict, question: str | None) -> float:
    """The support ``syncheck check``'s default (``--task auto``) gives a scored row whose answer has ``question``."""
    if answer_task(question) == "summary":
        lexical = _response_mean([row], "local_support")[0]
        return float(lean_on_lexical(row["response_score"], lexical, SUMMARY_LEXICAL_WEIGHT))
    return float(row["response_score"])


def signals(rows: list[dict], model: Any = None,
            questions: Sequence[str | None] | None = None) -> dict[str, tuple[np.ndarray, str]]:
    """``{signal: (per-response score, direction note)}``, higher = faithful for every score as returned.

    ``questions`` (one per row) give the row of the check's default, ``--task auto``, which checks each answer as a
    summary or a QA answer by its question (:func:`syncheck.checking.support.answer_task`).
    """
    out: dict[str, tuple[np.ndarray, str]] = {}
    verdict = np.asarray([r["response_score"] for r in rows])
    out["the check with --task qa (verdict over final scores)"] = (verdict, "")
    if all("local_support" in s["features"] for r in rows for s in r["sentences"]):
        w = SUMMARY_LEXICAL_WEIGHT
        leaning = lean_on_lexical(verdict, _response_mean(rows, "local_support"), w)
        out[f"the check with --task summary (verdict and mean local_support, weight {w})"] = (leaning, "")
        if questions is not None:
            summaries = sum(answer_task(q) == "summary" for q in questions)
            out["the check's default, --task auto (each answer by its question)"] = (
                np.asarray([checked_as_default(r, q) for r, q in zip(rows, questions)]),
                f"{summaries} of {len(rows)} answers checked as summaries")
    for key, title in (("score", "live"), ("final_score", "final")):
        vals = [[s[key] for s in r["sentences"]] for r in rows]
        out[f"mean {title} sentence score"] = (np.asarray([np.mean(v) for v in vals]), "")
        out[f"min {title} sentence score"] = (np.asarray([np.min(v) for v in vals]), "")
    if model is not None:
        means = []
        for r in rows:
            X = np.asarray([[s["features"].get(n, np.nan) for n in SUPPORT_FEATURES] for s in r["sentences"]], float)
            means.append(model.predict_proba(np.nan_to_num(X))[:, 1].mean())
        out["support-only model (LR on " + ", ".join(SUPPORT_FEATURES) + ", fitted on RAGTruth), mean"] = (
            np.asarray(means), "")
    names = sorted({n for r in rows for s in r["sentences"] for n in s["features"]})
    for name in names:
        try:
            sign = feature_sign(name)
        except KeyError:  # not a registered feature
            continue
        v = _response_mean(rows, name)
        out[f"feature mean: {name}"] = (np.nan_to_num(sign * v, nan=np.nanmin(sign * v)),
                                        "higher = faithful" if sign > 0 else "lower = faithful")
    out["response length in characters (trivial; shorter = faithful)"] = (
        -np.asarray([len(r["response"]) for r in rows], float), "")
    out["word overlap with the context (trivial)"] = (
        np.asarray([lexical_precision(r["context"], r["response"]) for r in rows]), "")
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, tuple[float, float, float]]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.check_signals", description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval-dir", default="../shared/data/halueval")
    ap.add_argument("--set", default="summarization", choices=("pairs", "dialogue", "summarization"))
    ap.add_argument("--start", type=int, default=600, help="first HaluEval record read")
    ap.add_argument("--limit", type=int, default=200, help="records read")
    ap.add_argument("--ragtruth", default=None, help="RAGTruth dev JSONL: add the support-only model's row")
    ap.add_argument("--work-dir", default=None, help="row cache (default: <syncheck cache>/check-signals)")
    args = parse_run_args(ap, argv)
    from syncheck.cache import cache_dir

    t0 = time.perf_counter()
    examples = halueval_examples(args.halueval_dir, args.set, args.start, args.limit, args.seed)
    work = Path(args.work_dir) if args.work_dir else cache_dir() / "check-signals"
    rows = [r for r in score_rows(examples, row_cache(work, args.set, args.start))
            if r["error"] is None and r["sentences"]]
    y = np.asarray([r["label"] for r in rows])
    groups = [r["group"] for r in rows]
    model = support_model(args.ragtruth) if args.ragtruth else None
    question_of = {e.id: e.question for e in examples}
    results = {}
    lines = ["Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.check_signals "
             + " ".join(argv if argv is not None else sys.argv[1:]) + f"` ({time.perf_counter() - t0:.0f} s). "
             f"HaluEval {SET_TITLES[args.set]}, records {args.start}-{args.start + args.limit - 1}: {len(rows)} "
             "answers "
             f"({int(y.sum())} faithful). AUROC [95% CI over records], label 1 = faithful.", "",
             "| signal (response level) | AUROC | which way |", "| --- | --- | --- |"]
    for name, (score, note) in signals(rows, model, [question_of[r["id"]] for r in rows]).items():
        results[name] = bootstrap_auroc(y, score, n=args.bootstrap, groups=groups, seed=args.seed)
        auc, lo, hi = results[name]
        lines.append(f"| {name} | {auc:.3f} [{lo:.2f}, {hi:.2f}] | {note or '-'} |")
    publish("\n".join(lines) + "\n", args.results_md, SECTION)
    return results


if __name__ == "__main__":
    main()
