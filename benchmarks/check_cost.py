"""What a support costs ``syncheck check``: seconds per answer of several supports, side by side on the same answers.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.check_cost --halueval DIR \\
        --ragtruth ../shared/data/ragtruth/dev.jsonl --supports syncheck+verifier,syncheck+verifier+reader@0.2

Each support (``--supports``, the first the baseline) is a :class:`syncheck.checking.provenance.ProvenanceChecker`
with ``syncheck check``'s defaults, built once (its build time, model loads included, is reported apart, after an
untimed build of the baseline has warmed imports and file caches, so the first support built pays no more). The answers:
HaluEval QA distractor pairs ("The answer is X.", bare answers the span reader reads) and RAGTruth QA responses
(paragraphs it does not read). Rounds interleave the supports (A, B, A, B, ...) so a machine that slows down slows
every support alike; a support's time on a set is its median over rounds, and its ratio is that time over the
baseline's. One process, one thread count, nothing timed twice in one call.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.results_md import command_line, measured_line, publish
from benchmarks.verifier_check import examples, ragtruth_examples
from syncheck.checking.provenance import ProvenanceChecker

SECTION = "### What a support costs `syncheck check`"


def answer_sets(args: argparse.Namespace) -> dict[str, list[tuple[str | None, str, str]]]:
    """``{set label: [(question, context, answer), ...]}`` of the answers the options name."""
    sets = {}
    if args.pairs:
        rows = examples(args.halueval, "pairs", args.pairs_start, args.pairs)
        sets[f"QA distractor pairs {args.pairs_start}-{args.pairs_start + args.pairs - 1}"] = [r[1:4] for r in rows]
    if args.ragtruth_qa:
        rows = ragtruth_examples(args.ragtruth, args.ragtruth_qa)
        sets[f"RAGTruth QA, first {args.ragtruth_qa} responses"] = [r[1:4] for r in rows]
    if not sets:
        raise SystemExit("no answers to time: give --pairs N and/or --ragtruth-qa N above 0")
    return sets


def timed(checker: ProvenanceChecker, answers: list[tuple[str | None, str, str]]) -> float:
    """Seconds to check every answer once (an answer that fails raises: a cost of failed rows means nothing)."""
    t0 = time.perf_counter()
    for question, context, answer in answers:
        result = checker.check(question=question, context=context, answer=answer)
        if result.error:
            raise RuntimeError(f"{getattr(checker.nli, 'name', checker.nli)}: {result.error}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--supports", default="syncheck+verifier,syncheck+verifier+reader@0.2",
                    help="support specs, comma-separated; the first is the baseline of the ratios")
    ap.add_argument("--halueval", default="../shared/data/halueval")
    ap.add_argument("--pairs", type=int, default=50, help="HaluEval QA records whose distractor pairs to check")
    ap.add_argument("--pairs-start", type=int, default=2000)
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--ragtruth-qa", type=int, default=50, help="RAGTruth QA responses to check (0: none)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--results-md", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    specs = [s.strip() for s in args.supports.split(",") if s.strip()]
    if len(specs) < 2:
        ap.error("--supports: give at least two, the first the baseline")
    sets = answer_sets(args)
    built, checkers = {}, {}
    timed(ProvenanceChecker(nli=specs[0]), next(iter(sets.values()))[:1])  # untimed: imports and file caches warm
    for spec in specs:
        t0 = time.perf_counter()
        checkers[spec] = ProvenanceChecker(nli=spec)
        timed(checkers[spec], next(iter(sets.values()))[:1])  # first call: lazy loads and allocations
        built[spec] = time.perf_counter() - t0
    seconds: dict[str, dict[str, list[float]]] = {s: {label: [] for label in sets} for s in specs}
    for _ in range(args.rounds):
        for label, answers in sets.items():
            for spec in specs:
                seconds[spec][label].append(timed(checkers[spec], answers))
    summary = {spec: {label: statistics.median(t) / len(sets[label]) for label, t in per.items()}
               for spec, per in seconds.items()}
    base = specs[0]
    lines = ["| support | build, first answer (s) | " + " | ".join(f"{label}: ms per answer (x {base})"
                                                         for label in sets) + " |",
             "|" + " --- |" * (2 + len(sets))]
    for spec in specs:
        cells = [f"{1000 * summary[spec][label]:.0f} ({summary[spec][label] / summary[base][label]:.2f}x)"
                 for label in sets]
        lines.append(f"| `{spec}` | {built[spec]:.1f} | " + " | ".join(cells) + " |")
    cmd = command_line("benchmarks.check_cost", argv)
    body = "\n".join([f"{measured_line()} Command: `{cmd}`.", "",
                      f"`syncheck check` defaults, only the support changed; median of {args.rounds} interleaved "
                      f"rounds, answers: {', '.join(f'{label} ({len(a)})' for label, a in sets.items())}.", "",
                      *lines])
    publish(body, args.results_md, SECTION)
    return summary


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
