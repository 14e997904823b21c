"""Offline scoring in float32 against another dtype, side by side: time per response and feature drift.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.dtype_drift --model qwen2.5-coder-1.5b --dtype bfloat16 --limit 2

The same RAGTruth responses (``--limit`` per task) are scored by one scorer
per dtype, interleaved record by record after a warm-up; it prints the seconds
per response of each and, per feature, the largest and the mean absolute
difference between the two. An aggregator should be used with the dtype its
features were computed in; this says how far apart they are.
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import numpy as np

from benchmarks.run_stamp import machine


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dtype_drift", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--dtype", default="bfloat16", help="compared with float32")
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl")
    p.add_argument("--limit", type=int, default=2, help="responses per task")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    import torch

    from benchmarks.ragtruth.data import read_ragtruth
    from syncheck.scorer import Scorer

    if args.threads:
        torch.set_num_threads(args.threads)
    records = read_ragtruth(args.data, limit=args.limit)
    scorers = {d: Scorer(args.model, dtype=d, aggregator=None, batch_size=1) for d in ("float32", args.dtype)}
    for scorer in scorers.values():  # warm-up
        scorer.score(context=records[0].context, response=records[0].response, question=records[0].question)
    seconds = {d: 0.0 for d in scorers}
    results = {d: [] for d in scorers}
    for rec in records:
        for d, scorer in scorers.items():
            t = time.perf_counter()
            results[d].append(scorer.score(context=rec.context, response=rec.response, question=rec.question))
            seconds[d] += time.perf_counter() - t
    diffs: dict[str, list[float]] = {}
    for a, b in zip(results["float32"], results[args.dtype]):
        for sa, sb in zip(a.sentences, b.sentences):
            for name, value in sa.features.items():
                diffs.setdefault(name, []).append(abs(value - sb.features[name]))
    n = len(records)
    print(f"machine: {machine()}")
    print(f"model={args.model}, {n} RAGTruth responses, torch threads={torch.get_num_threads()}\n")
    print("| dtype | s per response | vs float32 |\n| --- | --- | --- |")
    for d in scorers:
        print(f"| {d} | {seconds[d] / n:.2f} | {seconds[d] / seconds['float32']:.2f}x |")
    print(f"\n| feature | max abs difference ({args.dtype} vs float32) | mean abs difference |\n| --- | --- | --- |")
    for name, values in diffs.items():
        print(f"| {name} | {max(values):.4f} | {np.mean(values):.4f} |")
    return {"seconds_per_response": {d: s / n for d, s in seconds.items()},
            "max_abs_diff": {k: float(max(v)) for k, v in diffs.items()}}


if __name__ == "__main__":
    main()
