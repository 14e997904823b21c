"""Provenance's offline final check on records no one has tuned on: which premise, which sources, which statistic.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.provenance_check --halueval-dir PATH/TO/halueval \\
        --start 2000 --limit 100 [--sets pairs,dialogue,summarization,ragtruth-qa] [--results-md benchmarks/RESULTS.md]

Every row is :class:`syncheck.checking.provenance.ProvenanceChecker` itself, with the ``syncheck`` support backend
(SynCheck's own score of the answer given a premise, the offline default) and BM25 relevance; the variants differ in:

- **premise**: ``each`` selected source on its own, supports combined by ``max`` (the paper's form), or the
  selected sources ``joined`` in context order into one premise;
- **selection**: TopP 0.9 (``syncheck check``'s default), TopK 3 (FOD's final check), or all chunks;
- **query** that relevance ranks against: the question (the paper), or the question and the answer;
- **statistic** of the scored pair: the least faithful sentence (``min``), the learned response verdict over the
  live sentence scores (``live_verdict``), or the scorer's response score
  (``verdict``: the verdict over the final, whole-answer sentence scores where the aggregator has a final model).

Sets (label 1 = faithful), read from record ``--start`` on, so that no figure comes from a record any default was
trained or chosen on (the default aggregator trains on the first 600 records of each HaluEval file, and the
benchmarks read from record 0):

- **QA distractor pairs**: "The answer is {right answer}." against the same sentence with another span of the
  knowledge of the answer's shape: both occur in the context, so word overlap is at chance by construction;
- **dialogue** and **summarization**: HaluEval's right and hallucinated response of each record;
- **RAGTruth QA** (optional): the dev responses, which the default aggregator *was* trained on (so not unseen).

Each figure is ROC AUC with a 95% bootstrap interval over records, beside response length and word overlap on the
same rows and the published figures of Provenance (Sankararaman et al., 2024), Table 3, with its NLI models. A
scored (premise, question, answer) triple is scored once and shared by every variant that needs it.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from benchmarks.provenance_offline import Example, parse_run_args, ragtruth_examples
from benchmarks.results_md import publish
from features.alignment.lexical import lexical_precision
from syncheck.stats import bootstrap_auroc

SECTION = "### Provenance's final check: the last `provenance_check` run"
SETS = ("pairs", "dialogue", "summarization", "ragtruth-qa")
SET_TITLES = {"pairs": "QA distractor pairs", "dialogue": "dialogue", "summarization": "summarization",
              "ragtruth-qa": "RAGTruth QA (trained on)"}
#: Provenance (Sankararaman et al., 2024), Table 3, with its own relevance and NLI models on the full sets.
PUBLISHED = {"pairs": None, "dialogue": 0.69, "summarization": 0.66, "ragtruth-qa": None}


@dataclass(frozen=True)
class Variant:
    premise: str  # each | joined
    selection: str  # "TopP 0.9" | "TopK 3" | "all"
    query: str  # question | question+answer
    statistic: str  # min | live_verdict | verdict

    @property
    def name(self) -> str:
        agg = " · max" if self.premise == "each" else ""
        return f"{self.premise}{agg} · {self.selection} · query {self.query} · {self.statistic}"

    def checker_kwargs(self) -> dict[str, Any]:
        top_k, top_p = {"TopP 0.9": (None, 0.9), "TopK 3": (3, 0.9), "all": (None, 1.0)}[self.selection]
        return {"top_k": top_k, "top_p": top_p, "aggregation": "max", "premise": self.premise, "query": self.query}


VARIANTS = tuple(
    Variant(premise, selection, query, statistic)
    for premise, selection, query in (
        ("each", "TopP 0.9", "question"),  # the paper's form, TopP
        ("each", "TopK 3", "question"),  # the paper's form, TopK
        ("each", "TopK 3", "question+answer"),
        ("joined", "TopK 3", "question"),
        ("joined", "TopK 3", "question+answer"),
        ("joined", "TopP 0.9", "question"),
        ("joined", "all", "question"),
    )
    for statistic in ("min", "live_verdict", "verdict")
)


class CachedScorer:
    """A :class:`~syncheck.scorer.Scorer` stand-in that scores each distinct (context, question, response) once."""

    def __init__(self, scorer: Any) -> None:
        self.scorer, self.aggregator = scorer, scorer.aggregator
        self.cache: dict[tuple, Any] = {}

    def score_records(self, records):
        records = list(records)
        keys = [(r.context, r.question, r.response) for r in records]
        todo = {k: r for k, r in zip(keys, records) if k not in self.cache}
        for key, res in zip(todo, self.scorer.score_records(list(todo.values()))):
            self.cache[key] = res
        return [self.cache[k] for k in keys]


def halueval_examples(data_dir: str, subset: str, start: int, limit: int, seed: int) -> list[Example]:
    """Records ``start .. start + limit - 1`` of a HaluEval file (``pairs``: the QA distractor pairs)."""
    if subset == "pairs":
        from benchmarks.halueval.pairs import build_pairs, pair_examples

        return [Example(e.id, f"qa-{e.record}", e.context, e.question, e.response, int(e.label))
                for e in pair_examples(build_pairs(data_dir, limit, seed, start=start))]
    from benchmarks.halueval.data import load_subset

    return [Example(e.id, f"{subset}-{e.record}", e.context, e.question, e.response, int(e.label))
            for e in load_subset(data_dir, subset, start + limit) if e.record >= start]


def evaluate(examples: list[Example], variants: Sequence[Variant], scorer: CachedScorer, n_boot: int,
             seed: int) -> dict[str, tuple[float, float, float, float]]:
    """``{row name: (auc, lo, hi, support passes per answer)}`` for each variant and the trivial baselines."""
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import SynCheckSupport

    y = np.asarray([e.label for e in examples])
    groups = [e.group for e in examples]
    out = {}
    for v in variants:
        before = len(scorer.cache)
        checker = ProvenanceChecker("bm25", SynCheckSupport(scorer, statistic=v.statistic), **v.checker_kwargs())
        results = [checker.check(question=e.question, context=e.context, answer=e.response, id=e.id) for e in examples]
        failed = [r.error for r in results if r.error]
        if failed:
            raise RuntimeError(f"{v.name}: {len(failed)} answers could not be checked, e.g. {failed[0]}")
        passes = np.mean([1 if v.premise == "joined" else len(r.sources) for r in results])
        out[v.name] = (*bootstrap_auroc(y, [r.factuality for r in results], n=n_boot, groups=groups, seed=seed),
                       float(passes))
        print(f"  {v.name}: {out[v.name][0]:.3f} ({len(scorer.cache) - before} new pairs scored)", file=sys.stderr,
              flush=True)
    for label, score in (("baseline: response length (shorter = faithful)", [-len(e.response) for e in examples]),
                         ("baseline: word overlap (response vs context)",
                          [lexical_precision(e.context, e.response) for e in examples])):
        out[label] = (*bootstrap_auroc(y, score, n=n_boot, groups=groups, seed=seed), float("nan"))
    return out


def table(results: dict[str, dict[str, tuple]], sets: Sequence[str]) -> list[str]:
    head = "| premise · selection · relevance query · statistic | " + " | ".join(SET_TITLES[s] for s in sets)
    lines = [head + " | support passes / answer |", "| --- |" + " --- |" * (len(sets) + 1)]
    for row in next(iter(results.values())):
        cells = [f"{results[s][row][0]:.3f} [{results[s][row][1]:.2f}, {results[s][row][2]:.2f}]" for s in sets]
        passes = " / ".join(f"{results[s][row][3]:.1f}" for s in sets) if not row.startswith("baseline") else "-"
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {passes} |")
    published = [f"{PUBLISHED[s]:.2f} (published)" if PUBLISHED[s] else "-" for s in sets]
    lines.append("| reference: Provenance (Sankararaman et al., 2024), Table 3 (its NLI models, full sets) | "
                 + " | ".join(published)
                 + " | - |")
    return lines


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, tuple]]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.provenance_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--halueval-dir", default="../shared/data/halueval")
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--sets", default="pairs,dialogue,summarization")
    ap.add_argument("--start", type=int, default=2000, help="first HaluEval record read (records < 600 are trained on)")
    ap.add_argument("--limit", type=int, default=100, help="HaluEval records read per set")
    ap.add_argument("--ragtruth-limit", type=int, default=None, help="RAGTruth QA responses read (default: all)")
    ap.add_argument("--variants", default=None, help="indices into VARIANTS, comma-separated (default: all)")
    ap.add_argument("--model", default=None, help="scoring model (default: the embedded default)")
    ap.add_argument("--dtype", default="float32", help="the scoring model's dtype (float32, bfloat16, auto)")
    args = parse_run_args(ap, argv)
    from syncheck.model.models import DEFAULT_MODEL
    from syncheck.scorer import Scorer

    sets = [s for s in args.sets.split(",") if s]
    unknown = sorted(set(sets) - set(SETS))
    if unknown:
        ap.error(f"unknown sets {unknown}; choose from {', '.join(SETS)}")
    variants = VARIANTS if args.variants is None else [VARIANTS[int(i)] for i in args.variants.split(",")]
    scorer = CachedScorer(Scorer(args.model or DEFAULT_MODEL, dtype=args.dtype))
    t0 = time.perf_counter()
    results, sizes = {}, {}
    for name in sets:
        examples = (ragtruth_examples(args.ragtruth, args.ragtruth_limit) if name == "ragtruth-qa"
                    else halueval_examples(args.halueval_dir, name, args.start, args.limit, args.seed))
        sizes[name] = (len(examples), sum(e.label for e in examples), len({e.group for e in examples}))
        print(f"{SET_TITLES[name]}: {sizes[name][0]} answers", file=sys.stderr, flush=True)
        results[name] = evaluate(examples, variants, scorer, args.bootstrap, args.seed)
    cmd = "python -m benchmarks.provenance_check " + " ".join(argv if argv is not None else sys.argv[1:])
    body = [
        f"Regenerate: `HF_HUB_OFFLINE=1 .venv/bin/{cmd}` ({time.perf_counter() - t0:.0f} s on "
        f"{platform.machine()}, {len(scorer.cache)} distinct pairs scored by {args.model or DEFAULT_MODEL}). "
        f"HaluEval records {args.start}-{args.start + args.limit - 1}; "
        + "; ".join(f"{SET_TITLES[s]}: {n} answers ({k} faithful) from {g} records" for s, (n, k, g) in sizes.items())
        + ". Relevance: BM25. Support: `syncheck` (the answer scored with the premise as its context and the "
        "question in the prompt). AUROC [95% CI over records], label 1 = faithful.",
        "",
    ]
    md = "\n".join(body + table(results, sets)) + "\n"
    publish(md, args.results_md, SECTION)
    return results


if __name__ == "__main__":
    main()
