"""Do same-writer summary edits help the summary path? Grouped CV on RAGTruth, with the edits in training folds only.

Hallucinated summaries are few in RAGTruth (40 of 191 responses in dev + dev_extra). FactCC's answer is to make
unfaithful summaries out of faithful ones by the same writer (:mod:`syncheck.training.summary_edits`: one sentence of a
faithful summary edited, by an entity swap, a negation, a subject/object swap or an inserted unsupported sentence).
This benchmark asks whether training on those edits beside the real labels raises the score on *real* RAGTruth
summaries.

Protocol (fixed before any run):

- Real rows: every response of ``--data`` (RAGTruth dev + dev_extra pooled), scored once with the default scoring
  model (run.py's feature cache, ``--no-lid --no-lookback --no-embedding`` as ``verdict_choice`` reads it).
- Edited rows: ``--per-kind`` edits of each kind of every *faithful* RAGTruth summary, seeded by ``--edit-seed``; the
  edited sentence is labelled unfaithful through a span over it, the others faithful. They keep their source's
  ``source_id``.
- Folds: 5 folds grouped by ``source_id`` over the real rows, for each fold seed. *Without*: the default recipe
  (:data:`syncheck.aggregators.recipe.DEFAULT_FEATURES` with its hidden-state probe, as shipped) fitted on the
  training fold's real rows. *With*: the same, plus every edited row whose source document is not in the test fold
  (an edit of a test article never trains). Test rows are always real.
- Read on the real rows of each task: sentence AUROC, and response AUROC of the minimum of the response's
  out-of-fold sentence scores (the label: no annotated span), each with the paired difference *with - without* and
  its 95% bootstrap interval over source documents (seed 0), and the mean over fold seeds. Word overlap and answer
  length stand beside them on the same rows.

Usage::

    HF_HUB_OFFLINE=1 python -m benchmarks.studies.summary_edits_cv \\
        --data DATA/ragtruth/dev.jsonl,DATA/ragtruth/dev_extra.jsonl --seeds 0,1,2 --threads 2
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks._common import interval
from benchmarks.ragtruth.data import TASKS, RAGTruthRecord
from benchmarks.ragtruth.evaluate import oof_stacked, probe_folds, response_scores
from benchmarks.ragtruth.scoring import SentenceTable
from benchmarks.run_stamp import run_stamp

SECTION = "### Summaries trained on same-writer edits"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="RAGTruth JSONL file(s), comma-separated, pooled")
    ap.add_argument("--seeds", default="0,1,2", help="fold seeds")
    ap.add_argument("--edit-seed", type=int, default=0, help="seed of the edits")
    ap.add_argument("--per-kind", type=int, default=1, help="edits of each kind per faithful summary")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="records per task and file (smoke runs)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--work-dir", default=None, help="feature cache (default: <cache>/ragtruth-bench)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--results-md", default=None, help="write the section into this markdown file")
    return ap.parse_args(argv)


def edited_records(records: Sequence[RAGTruthRecord], seed: int, per_kind: int) -> list[RAGTruthRecord]:
    """Edits of every faithful summary of ``records``, as RAGTruth records whose one span covers the edited
    sentence."""
    from syncheck.training.summary_edits import make_edits

    out = []
    for rec in records:
        if rec.task != "Summary" or rec.label != 1:
            continue
        counts: Counter = Counter()
        for edit in make_edits(rec.response, rec.context, seed=seed, per_kind=per_kind):
            sentence = dataclasses.replace(rec, response=edit.text).sentences()[edit.sentence_index]
            out.append(dataclasses.replace(rec, id=f"{rec.id}-edit-{edit.kind}-{counts[edit.kind]}",
                                           response=edit.text, spans=((sentence.start, sentence.end),)))
            counts[edit.kind] += 1
    return out


def concat(a: SentenceTable, b: SentenceTable) -> SentenceTable:
    """``a``'s rows, then ``b``'s (response indices of ``b`` shifted past ``a``'s records); features both hold."""
    names = [n for n in a.features if n in b.features]
    vectors = [n for n in a.vectors if n in b.vectors]
    return SentenceTable(
        a.records + b.records, {n: np.concatenate([a.features[n], b.features[n]]) for n in names},
        {n: np.concatenate([a.vectors[n], b.vectors[n]]) for n in vectors}, np.concatenate([a.label, b.label]),
        np.concatenate([a.response, b.response + len(a.records)]), np.concatenate([a.task, b.task]),
        np.concatenate([a.source, b.source]), np.concatenate([a.chars, b.chars]),
        np.concatenate([a.overlap, b.overlap]), a.texts + b.texts, {**a.dropped, **b.dropped})


def folds_with_edits(table: SentenceTable, real: int, seed: int) -> tuple[list, list]:
    """Grouped folds over the first ``real`` rows; *without*: their training rows, *with*: those plus every edited
    row (after ``real``) whose source document is not in the test fold."""
    from syncheck.fitting import grouped_folds

    edited = np.arange(real, len(table))
    without, with_edits = [], []
    for train, test in grouped_folds(table.source[:real], 5, seed):
        held = set(table.source[test].tolist())
        keep = edited[[s not in held for s in table.source[edited]]]
        without.append((train, test))
        with_edits.append((np.concatenate([train, keep]), test))
    return without, with_edits


def recipe_oof(table: SentenceTable, folds: list, seed: int) -> np.ndarray:
    """Out-of-fold P(faithful) of the shipped recipe (its features and probe) over ``folds``."""
    from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS, DEFAULT_PROBES

    names = [n for n in DEFAULT_FEATURES if n in table.features]
    probes = [p for p in DEFAULT_PROBES if p in table.vectors]
    return oof_stacked(table, folds, DEFAULT_KIND, names, probes, seed, DEFAULT_PARAMS,
                       probe_folds(table, folds, probes, seed))


def figures(table: SentenceTable, real: int, scores: dict[str, np.ndarray], n_boot: int) -> dict[str, dict]:
    """Per task, sentence and response AUROC of each score on the real rows, with the paired difference
    ``with - without`` and its interval over source documents."""
    from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

    rows = np.arange(real)
    n_resp = int(table.response[:real].max()) + 1
    resp_label = np.asarray([r.label for r in table.records[:n_resp]])
    resp_task = np.asarray([r.task for r in table.records[:n_resp]])
    resp_source = np.asarray([r.source_id for r in table.records[:n_resp]])
    words = np.zeros(n_resp)
    np.add.at(words, table.response[rows], [len(t.split()) for t in table.texts[:real]])
    overlap = np.zeros(n_resp)
    np.add.at(overlap, table.response[rows], table.overlap[rows])
    overlap /= np.bincount(table.response[rows], minlength=n_resp)
    sub = table.subset(rows)
    per_response = {k: response_scores(sub, v[:real])[:n_resp] for k, v in scores.items()}
    out: dict[str, dict] = {}
    for task in TASKS:
        s, r = table.task[rows] == task, resp_task == task
        if len(set(table.label[rows][s].tolist())) < 2 or len(set(resp_label[r].tolist())) < 2:
            continue
        cell: dict[str, Any] = {"sentences": int(s.sum()), "unfaithful sentences": int((table.label[rows][s] == 0)
                                                                                       .sum()),
                                "responses": int(r.sum()), "hallucinated responses": int((resp_label[r] == 0).sum())}
        for level, y, group, sc, base in (
                ("sentence", table.label[rows][s], table.source[rows][s], {k: v[:real][s] for k, v in scores.items()},
                 {"word overlap": table.overlap[rows][s], "length (shorter = faithful)": -table.chars[rows][s]}),
                ("response", resp_label[r], resp_source[r], {k: v[r] for k, v in per_response.items()},
                 {"word overlap": overlap[r], "length (shorter = faithful)": -words[r]})):
            for name, v in {**sc, **base}.items():
                cell[f"{level}: {name}"] = bootstrap_auroc(y, v, n=n_boot, groups=group)
            cell[f"{level}: with - without"] = bootstrap_auroc_difference(y, sc["with"], sc["without"], n=n_boot,
                                                                          groups=group)
        out[task] = cell
    return out


def evaluate(table: SentenceTable, real: int, seeds: Sequence[int], n_boot: int) -> dict[int, dict[str, dict]]:
    """:func:`figures` per fold seed, for the table's first ``real`` rows against the rest as edits."""
    per_seed = {}
    for seed in seeds:
        without, with_edits = folds_with_edits(table, real, seed)
        scores = {"without": recipe_oof(table, without, seed), "with": recipe_oof(table, with_edits, seed)}
        per_seed[seed] = figures(table, real, scores, n_boot)
    return per_seed


def _f(c: tuple[float, float, float], signed: bool = False) -> str:
    return interval(c, 3, signed=True) if signed else interval(c)


def markdown(per_seed: dict[int, dict[str, dict]], header: list[str]) -> str:
    seeds = sorted(per_seed)
    lines = [*header, "",
             f"| task | level | without edits (seed {seeds[0]}) | with edits | with - without, paired [95% CI] | "
             f"with - without, mean over seeds {','.join(map(str, seeds))} [range] | word overlap | length |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    first = per_seed[seeds[0]]
    for task, cell in first.items():
        for level in ("sentence", "response"):
            diffs = [per_seed[s][task][f"{level}: with - without"][0] for s in seeds]
            lines.append(f"| {task} | {level} | {_f(cell[f'{level}: without'])} | {_f(cell[f'{level}: with'])} | "
                         f"{_f(cell[f'{level}: with - without'], True)} | {np.mean(diffs):+.3f} "
                         f"[{min(diffs):+.3f}, {max(diffs):+.3f}] | {_f(cell[f'{level}: word overlap'])} | "
                         f"{_f(cell[f'{level}: length (shorter = faithful)'])} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from benchmarks.ragtruth.data import read_ragtruth_files
    from benchmarks.ragtruth.scoring import ScoringConfig, score_ragtruth, sentence_table
    from benchmarks.results_md import measured_line
    from syncheck.cache import cache_dir

    args = parse_args(argv)
    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    records = read_ragtruth_files(args.data, limit=args.limit)
    edits = edited_records(records, args.edit_seed, args.per_kind)
    config = ScoringConfig(model=args.model, lid=False, lookback=False, embedding=False, batch_size=args.batch_size,
                           dtype=args.dtype)
    work = Path(args.work_dir or cache_dir() / "ragtruth-bench")
    real = sentence_table(records, score_ragtruth(records, config, work))
    edited = sentence_table(edits, score_ragtruth(edits, config, work))
    table = concat(real, edited)
    scored = time.perf_counter() - started
    per_seed = evaluate(table, len(real), [int(s) for s in args.seeds.split(",")], args.n_boot)
    kinds = Counter(r.id.split("-edit-")[1].rsplit("-", 1)[0] for r in edits)
    command = "python -m benchmarks.studies.summary_edits_cv " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    stamp = run_stamp(vars(args))
    header = [f"Command: `{command}`", "",
              f"Real rows: {len(real.records)} responses ({len(real)} sentences); edited rows: {len(edits)} summaries "
              f"({len(edited)} sentences) from {sum(r.task == 'Summary' and r.label == 1 for r in records)} faithful "
              f"summaries, by kind {dict(kinds)}. Sentence AUROC, and response AUROC of the minimum sentence score, "
              "on real rows only (label 1 = faithful); intervals: 95% bootstrap over source documents, seed "
              f"{min(per_seed)}. {measured_line()} Source commit {stamp['commit']}; scoring (cached) {scored:.0f} s, "
              f"CV {time.perf_counter() - started - scored:.0f} s."]
    body = markdown(per_seed, header)
    print(SECTION + "\n\n" + body)
    if args.results_md:
        from benchmarks.results_md import write_section

        write_section(Path(args.results_md), SECTION, body)
    return {"per_seed": per_seed, "edits": len(edits)}


if __name__ == "__main__":
    main()
