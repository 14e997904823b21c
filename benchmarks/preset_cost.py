"""What the quality preset costs: the default and ``--preset quality`` side by side, offline and as a live monitor.

Both presets (:data:`syncheck.cli.common.PRESETS`: SmolLM2-135M in float32, Qwen2.5-Coder-1.5B in bfloat16), each
with the aggregator resolved for its model, are loaded in one process. Each of ``--rounds`` interleaved rounds runs,
for every preset in turn:

- offline: ``Scorer.score_records`` on the same ``--limit`` records (the bundled LID corpus: hand-written RAG
  records), every default feature and the score;
- live: ``Monitor.generate`` of one answer, greedy, at most ``--tokens`` new tokens, over one RAG prompt.

Printed: seconds per response offline, tokens per second live, and each preset's cost as a multiple of the
default's, taken within each round (median over rounds, spread beside it). What the quality preset buys is in the
held-out report of ``syncheck calibrate`` (benchmarks/RESULTS.md, "Cross-model transfer and calibration").

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.preset_cost [--limit 8] [--tokens 48] [--rounds 3]

On an accelerator, ``--random-weights`` builds each preset's model with its published shape and random weights
(:mod:`benchmarks.random_shape`; speed does not depend on the weights, nothing is downloaded), scored by the
aggregator shipped for it (same features, same probe layers), with one tokenizer for both (``--tokenizer``,
SmolLM2's by default), so both answers have the same tokens::

    python -m benchmarks.preset_cost --random-weights --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.monitor_overhead import CONTEXT, QUESTIONS
from benchmarks.random_shape import synchronize
from benchmarks.run_stamp import machine


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="default,quality", help="comma-separated names of syncheck.cli.common.PRESETS")
    ap.add_argument("--limit", type=int, default=8, help="records scored offline per round")
    ap.add_argument("--tokens", type=int, default=48, help="new tokens of the live answer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--random-weights", action="store_true",
                    help="each preset's model shape with random weights (for accelerators; see above)")
    ap.add_argument("--tokenizer", default=None, help="with --random-weights: a saved tokenizer's folder")
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: the scorer's choice)")
    args = ap.parse_args(argv)

    from syncheck.cli.common import PRESETS
    from syncheck.lid_reference import bundled_records
    from syncheck.live.monitor import Monitor

    names = [p for p in args.presets.split(",") if p]
    unknown = set(names) - set(PRESETS)
    if unknown or not names:
        raise SystemExit(f"unknown presets {sorted(unknown)}; choose from {sorted(PRESETS)}")
    records = bundled_records()[: args.limit]
    scorers = {n: _scorer(PRESETS[n], args) for n in names}
    monitors = {n: Monitor(s) for n, s in scorers.items()}
    decoding = {"max_new_tokens": args.tokens}
    for n in names:  # warm-up
        list(scorers[n].score_records(records[:1]))
        monitors[n].generate(question=QUESTIONS[0], context=CONTEXT, decoding={"max_new_tokens": 4})
    offline: dict[str, list[float]] = {n: [] for n in names}
    live: dict[str, list[float]] = {n: [] for n in names}
    tokens: dict[str, int] = {}
    for _ in range(args.rounds):
        for n in names:
            synchronize(scorers[n].lm.device)
            t = time.perf_counter()
            rows = list(scorers[n].score_records(records))
            synchronize(scorers[n].lm.device)
            offline[n].append((time.perf_counter() - t) / len(records))
            if any(r.error is not None for r in rows):
                raise SystemExit(f"{n}: a record failed: {next(r.error for r in rows if r.error is not None)}")
            t = time.perf_counter()
            gen = monitors[n].generate(question=QUESTIONS[0], context=CONTEXT, decoding=decoding)
            synchronize(scorers[n].lm.device)
            live[n].append(len(gen.token_ids) / (time.perf_counter() - t))
            tokens[n] = len(gen.token_ids)

    base = names[0]
    lm = scorers[base].lm
    where = (torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda"
             else machine())
    print(f"{where}, torch "
          f"{torch.__version__}; {len(records)} records offline, one answer of up to {args.tokens} tokens live; "
          f"medians of {args.rounds} interleaved rounds, ratios within each round against '{base}'\n")
    print("| preset | model, dtype | aggregator | offline s / response | x default | live monitor tokens/s "
          "| x default (time per token) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    summary = {}
    for n in names:
        off_ratio = [a / b for a, b in zip(offline[n], offline[base])]
        live_ratio = [b / a for a, b in zip(live[n], live[base])]
        summary[n] = {"offline_s": statistics.median(offline[n]), "offline_x": statistics.median(off_ratio),
                      "live_tokens_per_s": statistics.median(live[n]), "live_x": statistics.median(live_ratio),
                      "aggregator": scorers[n].aggregator_source, "tokens": tokens[n]}

        def spread(r):
            return f" ({min(r):.1f}-{max(r):.1f})" if len(r) > 1 else ""

        dtype = str(scorers[n].lm.model.dtype).removeprefix("torch.")  # what "auto" resolved to on this machine
        weights = ", random weights" if args.random_weights else ""
        print(f"| {n} | {PRESETS[n]['model']}{weights}, {dtype} | {scorers[n].aggregator_source} "
              f"| {summary[n]['offline_s']:.2f} | {summary[n]['offline_x']:.1f}x{spread(off_ratio)} "
              f"| {summary[n]['live_tokens_per_s']:.1f} | {summary[n]['live_x']:.1f}x{spread(live_ratio)} |")
    return summary


def _scorer(preset: dict, args):
    """The preset's scorer: its model by name, or (``--random-weights``) its shape with random weights and the
    aggregator shipped for that model."""
    from syncheck.model.models import model_dtype
    from syncheck.scorer import Scorer

    if not args.random_weights:
        return Scorer(preset["model"], dtype=preset["dtype"], device=args.device)
    from benchmarks.random_shape import random_model
    from syncheck.aggregators.resolve import shipped_aggregator_dirs_for

    dtype = model_dtype(preset["dtype"], args.device)
    lm = random_model(preset["model"], tokenizer=args.tokenizer, device=args.device, dtype=dtype)
    shipped = shipped_aggregator_dirs_for(preset["model"])
    if not shipped:
        raise SystemExit(f"no aggregator ships for {preset['model']!r}: --random-weights needs one (drop the flag)")
    return Scorer(lm, aggregator=str(shipped[0][0]))


if __name__ == "__main__":
    main()
