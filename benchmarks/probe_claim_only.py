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

from benchmarks._common import interval
from benchmarks.ragtruth.data import TASKS
from benchmarks.run_stamp import machine
from benchmarks.verifier_quality import first_per_set, halueval_units, ragtruth_units, score_units
from syncheck.stats import bootstrap_auroc


class ClaimOnlyScorer:
    """A probe head fitted on claims alone, as an alignment scorer that reads no premise."""

    name = "claim-only probe"

    def __init__(self, reader, head) -> None:
        self.reader, self.head = reader, head

    def score(self, premises, claims, batch_size: int = 16) -> np.ndarray:
        return self.head.predict(self.reader.states([""] * len(claims), list(claims), batch_size))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from syncheck.model.probe_verifier import ProbeHead, ProbeStates, load_head
    from syncheck.training.pairs import read_pairs
    from syncheck.training.verifier_build import PAIRS

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
    score_units(units, ClaimOnlyScorer(reader, claim_only), args.batch_size)
    print(f"machine: {machine()}")
    print(f"claim-only probe: {head.model} ({head.dtype}), layers {list(head.layers)}, fitted on the {len(train)} "
          f"pairs of {args.probe} with empty premises; {time.perf_counter() - t0:.0f} s\n")
    print("| set | units | claim-only probe (min over claims) |")
    print("| --- | --- | --- |")
    out: dict[str, Any] = {}
    for name in ["pairs", "qa", "dialogue", "summarization"] + [f"RAGTruth {t}" for t in TASKS]:
        us = [u for u in units if u.set == name]
        if not us:
            continue
        auc = bootstrap_auroc(np.array([u.label for u in us]), np.array([min(u.scores) for u in us]),
                              groups=[u.group for u in us])
        out[name] = auc
        print(f"| {name} | {len(us)} | {interval(auc, 3)} |")
    return out


if __name__ == "__main__":
    main()
