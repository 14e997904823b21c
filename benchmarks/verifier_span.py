"""The span reader as a verifier, on HaluEval QA distractor pairs.

The shipped verifier (a MiniLM cross-encoder) cannot tell the passage's answer from another entity of the same
passage given as the answer (AUROC 0.600); a linear probe on Qwen2.5-Coder-1.5B can (0.878), but costs a 1.5B forward
per answer. The span reader (:mod:`features.alignment.span_reader`) is the same small encoder trained to *point at*
the answer instead of to classify a pair. A claim's score is the share of the reader's answer it names.

Scored on the distractor pairs of ``--test`` records (outside the verifier's and the reader's training ranges) and
``--dev`` records (QA 4800-4999: inside the verifier's training ranges, outside the shipped reader's; where a recipe
may be chosen), beside word overlap and, with ``--verifier``, the shipped verifier. AUROC counts the right answer as
positive, with 95% bootstrap intervals over records and paired differences.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_span --reader shipped --test 2000-2250 --verifier
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks.run_stamp import machine
from benchmarks.verifier_probe import pair_units, record_range


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.halueval.pairs import build_pairs
    from features.alignment.lexical import lexical_precision
    from features.alignment.span_reader import SpanReaderScorer
    from syncheck.featurize import alignment_claim
    from syncheck.stats import bootstrap_auroc, bootstrap_auroc_difference

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/halueval", help="HaluEval's directory")
    ap.add_argument("--reader", default="shipped", help="a reader directory (syncheck verifier reader), or 'shipped'")
    ap.add_argument("--dev", type=record_range, default=(4800, 5000), help="records START-END to choose a recipe on")
    ap.add_argument("--test", type=record_range, default=(2000, 2250), help="records START-END it is scored on")
    ap.add_argument("--sets", default="dev,test", help="which record sets to score (dev, test or both)")
    ap.add_argument("--verifier", action="store_true", help="score the shipped verifier on the test units too")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from features.model_manifest import weights_sha256
    from syncheck.shipped_models import SPAN_READER, VERIFIER, shipped_model_dir

    reader = SpanReaderScorer(shipped_model_dir(SPAN_READER) if args.reader == "shipped" else args.reader)
    print(f"machine: {machine()}")
    print(f"reader {args.reader} (weights sha256 {(weights_sha256(reader.manifest) or '?')[:12]})\n")
    result: dict[str, Any] = {}
    for name, rng in (("dev", args.dev), ("test", args.test)):
        if name not in args.sets.split(","):
            continue
        units = pair_units(args.data, *rng)
        question_of = {p.record: p.question for p in build_pairs(args.data, limit=rng[1] - rng[0], start=rng[0])}
        y, groups = np.array([u.label for u in units]), [u.record for u in units]
        scores = {"span reader": reader.score([u.premise for u in units],
                                              [alignment_claim(u.answer, question_of[u.record]) for u in units]),
                  "word overlap (trivial)": np.array([lexical_precision(u.premise, u.answer) for u in units])}
        if args.verifier and name == "test":
            from features.alignment.verifier import VerifierScorer

            scores["shipped verifier"] = VerifierScorer(shipped_model_dir(VERIFIER), progress=False).score(
                [u.premise for u in units], [u.claim for u in units])
        print(f"### {name}: distractor pairs of records {rng[0]}-{rng[1] - 1} ({len(units)} answers)\n")
        print("| score | AUROC [95% CI] | span reader − this |")
        print("| --- | --- | --- |")
        for key, s in scores.items():
            auc = bootstrap_auroc(y, s, groups=groups)
            diff = (bootstrap_auroc_difference(y, scores["span reader"], s, groups=groups)
                    if key != "span reader" else None)
            result[f"{name}:{key}"] = {"auroc": auc, "reader_minus": diff}
            print(f"| {key} | {auc[0]:.3f} [{auc[1]:.3f}, {auc[2]:.3f}] | "
                  + ("" if diff is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*diff)) + " |")
        print()
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return result


if __name__ == "__main__":
    main()
