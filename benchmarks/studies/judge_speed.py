"""The LLM judge's cost per claim: every sentence of an answer against one source, shared prefix against one by one.

Runs, side by side in one process and interleaved round by round, on the same (context, claims):

- ``one by one``: each claim in its own call, so each prompt runs whole (how the judge ran before it shared
  prefixes, and what a caller still gets when it passes one claim at a time);
- ``shared prefix``: all the claims of the context in one call, so the premise window's prompt prefix runs once
  and each claim runs only its own tokens (:class:`syncheck.model.llm_judge.LLMJudgeScorer`).

Prints seconds per claim of each, the ratio within each round (median and spread over rounds), and the largest
difference between the two runs' scores (they read the same token ids, so it is float rounding).

Usage::

    .venv/bin/python -m benchmarks.studies.judge_speed [--judge qwen2.5-coder-1.5b] [--dtype auto] [--claims 6] \
        [--rounds 3]

Contexts: RAGTruth dev (``--ragtruth``; the first context of each task, and the claims are the sentences of its
first stored response), else the bundled LID corpus's records.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.run_stamp import machine


def items(ragtruth: str | None, claims: int) -> list[tuple[str, list[str]]]:
    """``(context, claims)`` pairs: one per RAGTruth task, or two bundled records."""
    from features.sentences import split_sentences
    from syncheck.jsonl import iter_jsonl

    out = []
    if ragtruth and Path(ragtruth).exists():
        seen = set()
        for r in iter_jsonl(ragtruth):
            if r["task_type"] in seen:
                continue
            seen.add(r["task_type"])
            out.append((r["context"], [s.text for s in split_sentences(r["response"])][:claims]))
        return out
    from syncheck.lid_reference import bundled_records

    return [(r.context if isinstance(r.context, str) else "\n\n".join(r.context),
             [s.text for s in split_sentences(r.response)][:claims] or [r.response]) for r in bundled_records()[:2]]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge", default="qwen2.5-coder-1.5b", help="the judge's causal LM (any load_model name)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/dev.jsonl")
    ap.add_argument("--claims", type=int, default=6, help="claims per context at most")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    import torch

    from benchmarks.fod_table2 import judge_dtype_name
    from syncheck.alignment import make_alignment_scorer

    if args.threads:
        torch.set_num_threads(args.threads)
    judge = make_alignment_scorer(f"llm-judge:{args.judge}", dtype=args.dtype)
    work = items(args.ragtruth, args.claims)
    n = sum(len(c) for _, c in work)
    judge.score([work[0][0]], [work[0][1][0]])  # warm-up

    def one_by_one():
        return np.concatenate([[judge.score([ctx], [c])[0] for c in claims] for ctx, claims in work])

    def shared():
        return np.concatenate([judge.score([ctx] * len(claims), claims) for ctx, claims in work])

    runs = {"one by one": one_by_one, "shared prefix": shared}
    seconds: dict[str, list[float]] = {k: [] for k in runs}
    scores: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            t = time.perf_counter()
            scores[name] = fn()
            seconds[name].append(time.perf_counter() - t)
    ratios = [a / b for a, b in zip(seconds["one by one"], seconds["shared prefix"])]
    diff = float(np.max(np.abs(scores["one by one"] - scores["shared prefix"])))
    print(f"machine: {machine()}")
    print(f"judge={args.judge} ({judge_dtype_name(args.dtype)}) contexts={len(work)} claims={n} rounds={args.rounds} "
          f"cpu={platform.machine()} threads={torch.get_num_threads()}")
    print("| run | s / claim (median over rounds) | x one by one |")
    print("| --- | --- | --- |")
    for name in runs:
        per = statistics.median(seconds[name]) / n
        print(f"| {name} | {per:.2f} | {statistics.median(seconds['one by one']) / n / per:.2f} |")
    print(f"speed-up within each round: median {statistics.median(ratios):.2f}x (spread {min(ratios):.2f}-"
          f"{max(ratios):.2f}); largest score difference {diff:.1e}")
    return {"ratio": statistics.median(ratios), "spread": [min(ratios), max(ratios)], "max_diff": diff,
            "seconds": seconds, "claims": n}


if __name__ == "__main__":
    main()
