"""Does the probe read the premise? Its artefact check: the same head fitted with the premise left out.

A probe head reads a frozen LM's states of "Premise: P / claim / Is the answer supported...?". The LM could also tell
a claim's writer from its style alone: HaluEval's hallucinated summaries and dialogue replies were written by another
model than the faithful ones. This fits a second head on the same training pairs (a probe directory's
``pairs.jsonl``), with the same LM, layers and ``C``, but with every premise empty, and scores
:mod:`benchmarks.verifier_quality`'s units with empty premises too. Where the claim-only probe comes near the probe,
the probe's figure there says little about whether it checks the claim against the context.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.probe_claim_only --probe DIR --halueval ../shared/data/halueval \\
        --ragtruth DATA/ragtruth/dev.jsonl,DATA/ragtruth/dev_extra.jsonl --limit 300
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from benchmarks.ragtruth.data import TASKS
from benchmarks.run_stamp import machine
from benchmarks.verifier_quality import first_per_set, fmt, halueval_units, ragtruth_units
from syncheck.stats import bootstrap_auroc


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from syncheck.model.probe_scorer import ProbeHead, ProbeStates, load_head
    from syncheck.verifier.build import PAIRS
    from syncheck.verifier.pairs import read_pairs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", required=True, help="a probe directory (its head's settings and its pairs.jsonl)")
    ap.add_argument("--halueval", help="HaluEval's directory")
    ap.add_argument("--ragtruth", help="RAGTruth JSON lines, comma-separated")
    ap.add_argument("--limit", type=int, default=None, help="units per set, the first of each")
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    head, manifest = load_head(args.probe)
    reader = ProbeStates(head.model, layers=head.layers, dtype=head.dtype, progress=False)
    train = read_pairs(f"{args.probe}/{PAIRS}")
    x = reader.states([""] * len(train), [p.claim for p in train], args.batch_size)
    claim_only = ProbeHead.fit(x, np.array([p.label for p in train]), c=manifest.get("c", 0.05), model=head.model,
                               dtype=head.dtype, layers=head.layers)
    units = (halueval_units(args.halueval) if args.halueval else []) + (
        ragtruth_units(args.ragtruth) if args.ragtruth else [])
    if args.limit:
        units = first_per_set(units, args.limit)
    claims = [c for u in units for c in u.claims]
    flat = claim_only.predict(reader.states([""] * len(claims), claims, args.batch_size))
    print(f"machine: {machine()}")
    print(f"claim-only probe: {head.model} ({head.dtype}), layers {list(head.layers)}, fitted on the {len(train)} "
          f"pairs of {args.probe} with empty premises; {time.perf_counter() - t0:.0f} s\n")
    print("| set | units | claim-only probe (min over claims) |")
    print("| --- | --- | --- |")
    out: dict[str, Any] = {}
    k = 0
    scores = []
    for u in units:
        scores.append(min(flat[k: k + len(u.claims)]))
        k += len(u.claims)
    scores_arr = np.asarray(scores)
    for name in ["pairs", "qa", "dialogue", "summarization"] + [f"RAGTruth {t}" for t in TASKS]:
        rows = [i for i, u in enumerate(units) if u.set == name]
        if not rows:
            continue
        y = np.array([units[i].label for i in rows])
        auc = bootstrap_auroc(y, scores_arr[rows], groups=[units[i].group for i in rows])
        out[name] = auc
        print(f"| {name} | {len(rows)} | {fmt(auc)} |")
    return out


if __name__ == "__main__":
    main()
