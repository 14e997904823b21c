"""A packed forward against the padded decode step plus a forward per sentence: what a server's round costs both ways.

A round of ``syncheck serve`` decodes the next token of every stream and, where a sentence has just ended, feeds that
sentence to the stream's without-context cache (its flush). Padded, that is one decode step of ``--rows`` rows and
one forward of ``--width`` tokens per flush, each reading every weight again; packed
(:func:`syncheck.model.packed.packed_forward`), it is one forward of ``rows + flushes * width`` tokens, each row
attending to its own cache. For each number of flushes in ``--flushes``, both are timed side by side in the same
interleaved rounds, on random tokens over caches of ``--cache`` positions (decode rows) and ``--flush-cache``
positions (flushes), and the table gives the median time of each and their ratio with its spread over rounds.

Usage::

    .venv/bin/python -m benchmarks.packed_forward [--model smollm2-135m | --shape llama3-8b] [--rows 8]
    [--flushes 0,1,2,4] [--rounds 5] [--device cuda --dtype bfloat16]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from benchmarks.random_shape import model_from_args, synchronize
from benchmarks.run_stamp import machine
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.model.kv import concat_left_padded, with_room
from syncheck.model.packed import Segment, packed_forward, packs


def _caches(lm: Any, rows: int, length: int) -> list:
    vocab = len(lm.tokenizer)
    with torch.inference_mode():
        return [with_room(returned_cache(lm.model(input_ids=torch.randint(0, vocab, (1, length), device=lm.device),
                                                  use_cache=True)))
                for _ in range(rows)]


def _timed(lm: Any, fn, repeats: int) -> float:
    """Median seconds of ``fn`` over ``repeats`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(lm.device)
        t0 = time.perf_counter()
        fn()
        synchronize(lm.device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _crop(caches: list, n: int) -> None:
    for cache in caches:
        cache.crop(-n)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--shape", default=None,
                    help="a random-weight model of this shape instead (benchmarks.random_shape)")
    ap.add_argument("--tokenizer", default=None, help="a saved tokenizer's folder for --shape (default SmolLM2's)")
    ap.add_argument("--rows", type=int, default=8, help="decoding streams")
    ap.add_argument("--cache", type=int, default=206, help="positions in each stream's with-context cache")
    ap.add_argument("--flush-cache", type=int, default=38, help="positions in each without-context cache")
    ap.add_argument("--width", type=int, default=16, help="tokens per flush (a sentence)")
    ap.add_argument("--flushes", default="0,1,2,4", help="flushes per round to time")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5, help="calls per setup and round")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    lm = model_from_args(args)
    model, vocab = lm.model, len(lm.tokenizer)
    if not packs(model):
        raise SystemExit(f"{args.shape or args.model} does not pack: its attention is not SDPA through transformers' "
                         "attention interface (or a packed forward did not equal the plain one). Pick a model of a "
                         "family that dispatches attention there (Llama, Qwen2, Mistral), loaded with SDPA attention")
    levels = [int(x) for x in args.flushes.split(",")]
    rows = _caches(lm, args.rows, args.cache)
    flush_caches = _caches(lm, max(levels, default=0), args.flush_cache)
    batched, _ = concat_left_padded(rows)  # the padded decode step's cache: the same rows stacked

    def padded(f: int):
        def run():
            with torch.inference_mode():
                model(input_ids=torch.randint(0, vocab, (args.rows, 1), device=lm.device), use_cache=True,
                      **cache_kwargs(model, batched))
                batched.crop(-1)
                for cache in flush_caches[:f]:
                    model(input_ids=torch.randint(0, vocab, (1, args.width), device=lm.device), use_cache=True,
                          **cache_kwargs(model, cache))
                    cache.crop(-args.width)
        return run

    def packed(f: int):
        def run():
            segs = [Segment(c, torch.randint(0, vocab, (1,))) for c in rows]
            segs += [Segment(c, torch.randint(0, vocab, (args.width,)), logits=args.width) for c in flush_caches[:f]]
            packed_forward(model, segs)
            _crop(rows, 1)
            _crop(flush_caches[:f], args.width)
        return run

    per_round: list[dict[int, tuple[float, float]]] = []
    for r in range(args.rounds):
        timings = {f: (_timed(lm, padded(f), args.repeats), _timed(lm, packed(f), args.repeats)) for f in levels}
        per_round.append(timings)
        print(f"round {r + 1}: " + "; ".join(f"{f} flushes: padded {a * 1e3:.1f} ms, packed {b * 1e3:.1f} ms"
                                              for f, (a, b) in timings.items()), flush=True)
    name = args.shape or args.model
    print(f"\n{name}, {lm.device}, {args.dtype}: {args.rows} decode rows on {args.cache}-position caches, flushes of "
          f"{args.width} tokens on {args.flush_cache}-position caches; medians over {args.rounds} interleaved rounds")
    print(f"machine: {machine()}")
    print("| flushes in the round | padded step + a forward per flush, ms | packed forward, ms "
          "| padded / packed (spread) |")
    print("| --- | --- | --- | --- |")
    out = {}
    for f in levels:
        a = statistics.median(t[f][0] for t in per_round)
        b = statistics.median(t[f][1] for t in per_round)
        ratios = [t[f][0] / t[f][1] for t in per_round]
        out[f"{f} flushes"] = {"padded_s": a, "packed_s": b, "ratio": statistics.median(ratios),
                               "ratio_min": min(ratios), "ratio_max": max(ratios)}
        print(f"| {f} | {a * 1e3:.1f} | {b * 1e3:.1f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")
    return out


if __name__ == "__main__":
    main()
