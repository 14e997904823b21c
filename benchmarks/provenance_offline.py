"""Provenance's offline support backend, chosen by measurement on hard rows: distractor pairs and RAGTruth QA.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.provenance_offline --halueval-dir PATH/TO/halueval \\
        --ragtruth PATH/TO/ragtruth/dev.jsonl [--pairs 200] [--ragtruth-limit 299] [--results-md benchmarks/RESULTS.md]

Sets:

- **QA distractor pairs** (test side of the record split): "The answer is
  {right answer}." against "The answer is {distractor}.", where the distractor
  is another span of the same knowledge with the answer's shape. Both answers
  occur in the context, so word overlap sits at chance by construction; a
  support model must see which span answers the question.
- **RAGTruth QA** (all responses read): real long answers of six LLMs over
  MS MARCO passages, unfaithful when a human annotated any span.

For each support backend (``lexical``, ``embedding``, ``llm-judge`` with
SmolLM2, ``syncheck`` = SynCheck's own response score given each source),
BM25 relevance, TopP 0.9 and TopK 3, max and weighted aggregation: ROC AUC of
``factuality`` (label 1 = faithful) with a 95% bootstrap interval (over source
records / documents), beside response length and word overlap on the same
rows, and the time per answer. Supports are computed once per (answer,
source) and every configuration is assembled with
:func:`syncheck.checking.provenance.combine`, the code path of ``ProvenanceChecker``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from benchmarks.results_md import publish
from features.alignment.lexical import lexical_precision
from syncheck.checking.provenance import (
    claim_prompt,
    combine,
    relevance_probabilities,
    select_top_k,
    select_top_p,
    split_context,
)
from syncheck.stats import bootstrap_auroc

SECTION = "## Provenance: the offline support backend"
BACKENDS = ("lexical", "embedding", "llm-judge", "syncheck")
SELECTIONS = (("TopP 0.9", None, 0.9), ("TopK 3", 3, 0.9))
AGGREGATIONS = ("max", "weighted")


@dataclass
class Example:
    id: str
    group: str  # bootstrap cluster (source record / document)
    context: str
    question: str
    response: str
    label: int  # 1 = faithful


def pair_examples(halueval_dir: str, limit: int, seed: int) -> list[Example]:
    from benchmarks.halueval.sets import pair_items
    from benchmarks.halueval.splits import is_test

    return [Example(it.id, f"qa-{it.record}", it.context, it.question, it.response, int(it.label))
            for it in pair_items(halueval_dir, limit, seed) if is_test(it.subset, it.record, seed)]


def ragtruth_examples(path: str, limit: int | None) -> list[Example]:
    from benchmarks.ragtruth.data import read_ragtruth

    return [Example(r.id, r.source_id, r.context, r.question, r.response, r.label)
            for r in read_ragtruth(path, tasks=["QA"], limit=limit)]


def make_backend(name: str):
    if name == "syncheck":
        from syncheck.checking.support import SynCheckSupport

        return SynCheckSupport()
    from syncheck.alignment import make_alignment_scorer

    return make_alignment_scorer(name)


def evaluate_set(examples: list[Example], backends: Sequence[str], n_boot: int, seed: int) -> list[str]:
    from features.alignment.relevance import make_relevance_scorer

    relevance = make_relevance_scorer("bm25")
    chunks = [split_context(e.context) for e in examples]
    probs = [
        relevance_probabilities(relevance.score(e.question, c), relevance.temperature) for e, c in zip(examples, chunks)
    ]
    needed = [sorted(set(select_top_p(p, 0.9).tolist()) | set(select_top_k(p, 3).tolist())) for p in probs]
    y = np.asarray([e.label for e in examples])
    groups = [e.group for e in examples]
    lines = ["| support | selection | aggregation | AUROC [95% CI] | ms / answer |", "| --- | --- | --- | --- | --- |"]
    for name in backends:
        backend = make_backend(name)
        question_aware = getattr(backend, "question_aware", False)
        t0 = time.perf_counter()
        supports = []
        for e, c, idx in zip(examples, chunks, needed):
            claim = e.response.strip() if question_aware else claim_prompt(e.question, e.response)
            extra = {"questions": [e.question] * len(idx)} if question_aware else {}
            scores = backend.score([c[i] for i in idx], [claim] * len(idx), **extra)
            supports.append({i: float(s) for i, s in zip(idx, scores)})
        per_pair = (time.perf_counter() - t0) / max(1, sum(len(i) for i in needed))
        for sel, top_k, top_p in SELECTIONS:
            for how in AGGREGATIONS:
                fact, n_src = [], []
                for p, sup in zip(probs, supports):
                    f, sources, _ = combine(p, sup, top_k=top_k, top_p=top_p, aggregation=how)
                    fact.append(f)
                    n_src.append(len(sources))
                auc, lo, hi = bootstrap_auroc(y, fact, n=n_boot, groups=groups, seed=seed)
                lines.append(f"| {name} | {sel} | {how} | {auc:.3f} [{lo:.3f}, {hi:.3f}] | "
                             f"{1000 * per_pair * np.mean(n_src):.0f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    for label, score in (
        ("response length (shorter = faithful)", [-len(e.response) for e in examples]),
        ("word overlap (response vs context)", [lexical_precision(e.context, e.response) for e in examples]),
    ):
        auc, lo, hi = bootstrap_auroc(y, score, n=n_boot, groups=groups, seed=seed)
        lines.append(f"| baseline: {label} | - | - | {auc:.3f} [{lo:.3f}, {hi:.3f}] | - |")
    return lines


def parse_run_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Add the options every Provenance benchmark has (bootstrap, seed, threads, results file), parse, set threads."""
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--results-md", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, list[str]]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.provenance_offline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval-dir", default="../shared/data/halueval")
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--pairs", type=int, default=200, help="QA records read for the pairs (about half are test side)")
    ap.add_argument("--ragtruth-limit", type=int, default=None, help="RAGTruth QA responses read (default: all)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    args = parse_run_args(ap, argv)
    backends = [b for b in args.backends.split(",") if b]
    t0 = time.perf_counter()
    sets = {}
    if args.pairs:
        sets["QA distractor pairs"] = pair_examples(args.halueval_dir, args.pairs, args.seed)
    if args.ragtruth and args.ragtruth_limit != 0:
        sets["RAGTruth QA"] = ragtruth_examples(args.ragtruth, args.ragtruth_limit)
    out = {name: evaluate_set(ex, backends, args.bootstrap, args.seed) for name, ex in sets.items()}
    cmd = "python -m benchmarks.provenance_offline " + " ".join(argv if argv is not None else sys.argv[1:])
    body = [f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/{cmd}` ({time.perf_counter() - t0:.0f} s on "
            f"{platform.machine()}, "
            "2 CPU threads). Relevance: BM25. Claim: \"The answer to question Q is A.\" (the paper's), except "
            "`syncheck`, which puts the question in its prompt and scores the answer itself. Label 1 = faithful."]
    for name, lines in out.items():
        n = len(sets[name])
        body += ["", f"**{name}** ({n} answers, {sum(e.label for e in sets[name])} faithful):", ""] + lines
    md = "\n".join(body) + "\n"
    publish(md, args.results_md, SECTION)
    return out


if __name__ == "__main__":
    main()
