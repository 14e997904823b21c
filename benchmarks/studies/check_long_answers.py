"""The check's mean with the verifier reading long answers sentence by sentence, on RAGTruth QA and Data2txt.

``syncheck check`` reads a QA or data-to-text answer whole with its verifier member. This study puts, in place of that
whole-answer score, the mean (and the minimum) of the verifier's scores of the answer's sentences
(:func:`benchmarks.verifier_quality.ragtruth_units`: question-aware claims against the whole context), beside the
``syncheck`` member of the stored rows of ``benchmarks.verifier_check --ragtruth-tasks`` (``--rows``), half each as
the check's mean gives them where the reader gives no score. Each verifier: the shipped one, and a cross-fitted one
(``--crossfit DIR``, each sentence scored by the fold verifier that never trained on its response). AUROC over
responses, paired against the default as the rows read it (the shipped verifier on the whole answer).

A description only: the ``syncheck`` member's aggregator trained on these responses, so only differences between the
means are read.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.studies.check_long_answers --crossfit DIR \\
        --rows benchmarks/runs/verifier_check_ragtruth_crossfit_v2f.jsonl.gz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.fod_table2 import read_rows
from benchmarks.verifier_check import ragtruth_examples, ragtruth_set
from benchmarks.verifier_quality import ragtruth_units, score_units, score_units_crossfit
from syncheck.cache import cache_dir
from syncheck.checking.support import mean_of_supports
from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

TASKS = ("QA", "Data2txt")


def cell(v: tuple[float, float, float], signed: bool = False) -> str:
    return ("{:+.3f} [{:+.3f}, {:+.3f}]" if signed else "{:.3f} [{:.3f}, {:.3f}]").format(*v)


def main(argv: list[str] | None = None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl,../shared/data/ragtruth/dev_extra.jsonl")
    ap.add_argument("--crossfit", required=True, type=Path, help="the folds of benchmarks.verifier_crossfit --out")
    ap.add_argument("--rows", required=True, help="the --rows-out file of benchmarks.verifier_check --ragtruth-tasks "
                                                  "QA,Data2txt with --nli syncheck,verifier (and the same --ragtruth)")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="the score cache (default: <syncheck cache>/ragtruth-bench)")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args(argv)
    from syncheck.alignment import make_alignment_scorer

    units = [u for u in ragtruth_units(args.ragtruth) if u.set in {f"RAGTruth {t}" for t in TASKS}]
    score_units_crossfit(units, args.crossfit, args.work_dir or cache_dir() / "ragtruth-bench", args.batch_size)
    score_units(units, make_alignment_scorer("verifier"), args.batch_size, attr="against")
    stored = read_rows(args.rows)
    lines = ["| RAGTruth responses | reading | AUROC | − the default |", "| --- | --- | --- | --- |"]
    for task in TASKS:
        ids: list[str] = []
        ragtruth_examples(args.ragtruth, None, task=task, ids=ids)
        rows = [r for r in stored if r["set"] == ragtruth_set(task)]
        if len(rows) != len(ids):
            raise SystemExit(f"{args.rows} holds {len(rows)} {task} rows, the --ragtruth files {len(ids)}: pass the "
                             "rows of the same files")
        sentences: dict[str, list[tuple[float, float]]] = {}
        for u in units:
            if u.set == f"RAGTruth {task}":
                sentences.setdefault(u.record, []).append((u.scores[0], u.against[0]))
        y, groups = np.array([r["label"] for r in rows]), [r["group"] for r in rows]
        check = np.array([r["syncheck"] for r in rows])
        default = mean_of_supports([check, np.array([r["verifier"] for r in rows])])
        readings = {"the default (shipped verifier, whole answer)": default, "`syncheck` alone (in-sample)": check}
        for name, k in (("cross-fitted", 0), ("shipped", 1)):
            for stat, f in (("mean", np.mean), ("min", np.min)):
                alone = np.array([f([s[k] for s in sentences.get(i, [(0.5, 0.5)])]) for i in ids])
                readings[f"{name} verifier, sentences ({stat}), in the mean"] = mean_of_supports([check, alone])
                readings[f"{name} verifier, sentences ({stat}), alone"] = alone
        for name, v in readings.items():
            lines.append(f"| {task} ({len(y)}) | {name} | {cell(bootstrap_auroc(y, v, groups=groups))} | "
                         f"{cell(bootstrap_auroc_difference(y, v, default, groups=groups), True)} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
