"""The shipped default on RAGTruth responses it was never trained or chosen on: sentence and response AUROC per
task, each beside the trivial baselines on the same rows.

Every response is scored as a user scores it (``Scorer(MODEL)`` with its defaults: the aggregator, final model and
response verdict that ship for the model). Nothing is fitted here, so the figures are honest out-of-sample ones
only on data that took no part in choosing the recipe (RAGTruth's ``dev_extra.jsonl``, read before anything is
trained on it).

- Sentence level: a sentence is unfaithful when it overlaps an annotated span (:mod:`benchmarks.ragtruth.data`).
  Scores: ``final_score`` (the whole-answer score users see last), ``score`` (the live one); baselines: sentence
  length in characters (shorter = faithful) and word overlap with the context.
- Response level: a response is unfaithful when it has any span. Scores: ``response_score`` (the learned verdict),
  the mean and the minimum of its final scores; baselines: length in words and in sentences (each in its better
  direction on these rows, which flatters the baseline) and word overlap with the context.
- 95% intervals: percentile bootstrap over source documents.

Resumable: scored rows go to ``--out`` as JSON lines, one per response, and a rerun scores only the missing ones.
The rows hold scores, labels and lengths, never the responses' text (RAGTruth is not redistributed here).

    python -m benchmarks.ragtruth.unseen --data ../shared/data/ragtruth/dev_extra.jsonl \\
        --out benchmarks/runs/ragtruth_dev_extra_smollm2.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm import tqdm

from benchmarks._common import interval
from benchmarks.ragtruth.data import TASKS, RAGTruthRecord, read_ragtruth
from benchmarks.results_md import measured_line
from benchmarks.run_stamp import run_stamp
from features.alignment.lexical import lexical_precision as word_overlap
from syncheck.io import complete_rows
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

TITLE = "The shipped default on RAGTruth responses never trained or chosen on"


def score_rows(records: Sequence[RAGTruthRecord], scorer, out: Path,
               stamp: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per record (scored now or read back from ``out``), in record order; rows scored now carry
    ``stamp`` (:func:`benchmarks.run_stamp.run_stamp`) under ``"run"``."""
    done: dict[str, dict] = {}
    if out.exists():
        rows, end = complete_rows(out)  # a line half-written when a run was killed is dropped
        done = {row["id"]: row for row in rows}
        with out.open("r+b") as fh:
            fh.truncate(end)
    todo = [r for r in records if r.id not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for rec in tqdm(todo, desc="responses"):
            res = scorer.score(context=rec.context, response=rec.response, question=rec.question, id=rec.id)
            labels = rec.sentence_labels(res.sentences) if res.sentences else []
            row = {"id": rec.id, "source_id": rec.source_id, "task": rec.task, "writer": rec.model,
                   "label": rec.label, "error": res.error, "response_score": res.response_score,
                   "words": len(rec.response.split()), "overlap": word_overlap(rec.context, rec.response),
                   "sentences": [{"chars": len(s.text), "start": s.start, "end": s.end, "score": s.score,
                                  "final_score": s.final_score, "label": lab,
                                  "overlap": word_overlap(rec.context, s.text)}
                                 for s, lab in zip(res.sentences, labels)], "run": stamp}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[rec.id] = row
    return [done[r.id] for r in records]


def _auc(labels, scores, groups, n_boot: int, better_direction: bool = False) -> tuple[float, float, float, str]:
    auc, lo, hi = bootstrap_auroc(labels, scores, n=n_boot, groups=groups)
    if better_direction and auc < 0.5:
        auc, lo, hi = bootstrap_auroc(labels, -np.asarray(scores, dtype=float), n=n_boot, groups=groups)
        return auc, lo, hi, " (flipped: longer = faithful)"
    return auc, lo, hi, ""


def _fmt(a: tuple) -> str:
    return interval(a) + a[3]


def tables(rows: Sequence[dict], n_boot: int) -> str:
    """The markdown tables: sentence AUROC and response AUROC per task, scores beside the baselines."""
    ok = [r for r in rows if not r["error"] and r["sentences"]]
    lines = [f"{len(ok)} of {len(rows)} responses scored; "
             + ", ".join(f"{t} {sum(r['task'] == t for r in ok)} ({sum(r['task'] == t and r['label'] == 0 for r in ok)}"
                         " with a span)" for t in TASKS) + ".", ""]
    lines += ["Sentence AUROC (unfaithful = overlaps an annotated span):", "",
              "| task | sentences (unfaithful) | final_score | score (live) | sentence length (trivial) "
              "| word overlap (trivial) |", "| --- | --- | --- | --- | --- | --- |"]
    for task in TASKS:
        sents = [(s, r["source_id"]) for r in ok if r["task"] == task for s in r["sentences"]]
        y = [s["label"] for s, _ in sents]
        if len(set(y)) < 2:
            continue
        g = [src for _, src in sents]
        cols = [_auc(y, [s["final_score"] for s, _ in sents], g, n_boot),
                _auc(y, [s["score"] for s, _ in sents], g, n_boot),
                _auc(y, [-s["chars"] for s, _ in sents], g, n_boot),
                _auc(y, [s["overlap"] for s, _ in sents], g, n_boot)]
        lines.append(f"| {task} | {len(y)} ({len(y) - sum(y)}) | " + " | ".join(map(_fmt, cols)) + " |")
    lines += ["", "Response AUROC (unfaithful = any annotated span; lengths in their better direction on these rows):",
              "", "| task | responses (unfaithful) | `response_score` | mean final_score | min final_score "
              "| length in words (trivial) | sentences (trivial) | word overlap (trivial) "
              "| `response_score` - length [95% CI] |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for task in TASKS:
        rs = [r for r in ok if r["task"] == task]
        y = [r["label"] for r in rs]
        if len(set(y)) < 2:
            continue
        g = [r["source_id"] for r in rs]
        finals = [[s["final_score"] for s in r["sentences"]] for r in rs]
        cols = [_auc(y, [r["response_score"] for r in rs], g, n_boot),
                _auc(y, [float(np.mean(f)) for f in finals], g, n_boot),
                _auc(y, [float(np.min(f)) for f in finals], g, n_boot),
                _auc(y, [-r["words"] for r in rs], g, n_boot, better_direction=True),
                _auc(y, [-len(r["sentences"]) for r in rs], g, n_boot, better_direction=True),
                _auc(y, [r["overlap"] for r in rs], g, n_boot)]
        sign = -1.0 if cols[3][3] else 1.0  # length as the column above scored it (in its better direction)
        d = bootstrap_auroc_difference(y, [r["response_score"] for r in rs], [-sign * r["words"] for r in rs],
                                       n=n_boot, groups=g)
        lines.append(f"| {task} | {len(y)} ({len(y) - sum(y)}) | " + " | ".join(map(_fmt, cols))
                     + f" | {d[0]:+.3f} [{d[1]:+.2f}, {d[2]:+.2f}] |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/ragtruth/dev_extra.jsonl", help="RAGTruth JSON lines")
    ap.add_argument("--model", default="smollm2-135m", help="scoring model (alias, hub id or directory)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", required=True, help="scored rows, JSON lines (resumable)")
    ap.add_argument("--limit", type=int, default=None, help="responses per task (default: all)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--results-md", default=None, help="write the tables into this file's section --title")
    ap.add_argument("--title", default=TITLE)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    records = read_ragtruth(args.data, limit=args.limit)
    from syncheck.scorer import Scorer

    scorer = Scorer(args.model, dtype=args.dtype)
    rows = score_rows(records, scorer, Path(args.out), run_stamp(args))
    if any(s["final_score"] is None for r in rows if not r["error"] for s in r["sentences"]):
        raise SystemExit(f"{args.model} has no shipped final-score model, so its sentences have no final_score to "
                         "read: run this benchmark with a model the package calibrates (e.g. smollm2-135m), or "
                         f"calibrate one first (syncheck calibrate); rows kept in {args.out}")
    head = (f"{len(records)} RAGTruth responses of `{Path(args.data).name}`, scored by `{args.model}` ({args.dtype}) "
            f"with its shipped defaults (aggregator: {scorer.aggregator_source}). {measured_line()}\n\n"
            f"```bash\n.venv/bin/python -m benchmarks.ragtruth.unseen --data {args.data} --out {args.out}\n```\n\n")
    text = head + tables(rows, args.bootstrap)
    print(text)
    if args.results_md:
        from benchmarks.results_md import write_section

        write_section(Path(args.results_md), f"## {args.title}", text)
    return text


if __name__ == "__main__":
    main()
