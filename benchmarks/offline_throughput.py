"""Offline scoring throughput with the default model, and the cost of the second (without-context) pass.

Runs, side by side in one process and interleaved round by round, on the same records:

- ``one pass``: the with-context forward only (``kl=False``): likelihood and entropy features;
- ``two passes``: with- and without-context forwards (the KL features added);
- ``full``: as ``syncheck score`` runs by default (two passes, the string checks, lexical alignment, the
  hidden states the default aggregator's probe reads, and its scores), plus LID when ``--lid``;
- ``full, align_score by SPEC``, for each ``--alignment SPEC`` (e.g. ``verifier``): ``full`` with that alignment
  backend, question-aware (``--align-with-question``), as ``syncheck score --alignment SPEC`` runs. The table then
  gives its cost per sentence over ``full``'s.

Usage::

    .venv/bin/python -m benchmarks.offline_throughput [--model smollm2-135m] [--limit 32] [--rounds 3] [--batch-size 4]

A random-weight model of a real shape on an accelerator (no download; the portable aggregator scores it)::

    .venv/bin/python -m benchmarks.offline_throughput --shape llama3-8b --device cuda --dtype bfloat16 --batch-size 16

Records: the bundled LID corpus (60 hand-written RAG records) then the README examples.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from benchmarks.run_stamp import machine


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=32, help="records per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--lid", action="store_true", help="add LID to the full configuration")
    ap.add_argument("--alignment", action="append", default=[],
                    help="also time `full` with this align_score backend, question-aware (repeatable; e.g. verifier)")
    ap.add_argument("--shape", default=None, help="random weights of a real shape instead of --model "
                                                   "(benchmarks/random_shape.py)")
    ap.add_argument("--tokenizer", default=None, help="with --shape: a saved tokenizer's folder "
                                                       "(default: SmolLM2's, embedded)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    import warnings

    from benchmarks.random_shape import model_from_args, synchronize
    from syncheck.lid_reference import bundled_records, load_or_build
    from syncheck.model.passes import encode_record
    from syncheck.scorer import Scorer

    lm = model_from_args(args)
    records = bundled_records()[: args.limit]
    lid = load_or_build(lm) if args.lid else None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="no aggregator is calibrated")  # a random model: portable default
        configs = {
            "one pass": Scorer(lm, lid=None, alignment=None, kl=False, batch_size=args.batch_size, aggregator=None),
            "two passes": Scorer(lm, lid=None, alignment=None, kl=True, batch_size=args.batch_size, aggregator=None),
            "full": Scorer(lm, lid=lid, alignment="lexical", kl=True, batch_size=args.batch_size),
        }
        # the aggregator was trained on lexical align_score: its drift warning is expected, its cost is what counts
        warnings.filterwarnings("ignore", message="the aggregator was trained on features from a different")
        for spec in args.alignment:
            configs[f"full, align_score by {spec}"] = Scorer(lm, lid=lid, alignment=spec, align_with_question=True,
                                                             kl=True, batch_size=args.batch_size)
    resp_tokens = sum(len(encode_record(lm, r.context, r.response, r.question).response) for r in records)
    prompt_tokens = sum(len(encode_record(lm, r.context, r.response, r.question).with_context) for r in records)
    times: dict[str, list[float]] = {k: [] for k in configs}
    sentences = 0
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the aggregator was trained on features from a different")
        for name, scorer in configs.items():  # warm-up
            list(scorer.score_records(records[:2]))
        for _ in range(args.rounds):
            for name, scorer in configs.items():
                synchronize(lm.device)
                t = time.perf_counter()
                rows = list(scorer.score_records(records))
                synchronize(lm.device)
                times[name].append(time.perf_counter() - t)
                assert all(r.error is None for r in rows)
                sentences = sum(len(r.sentences) for r in rows)

    n = len(records)
    base = statistics.median(times["one pass"])
    device = (torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda"
              else f"cpu {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")
    print(f"machine: {machine()}")
    print(f"model={lm.name} dtype={args.dtype} device={device} torch={torch.__version__}")
    print(f"{n} records, {prompt_tokens / n:.0f} prompt tokens and {resp_tokens / n:.0f} response tokens per record, "
          f"batch size {args.batch_size}, median of {args.rounds} interleaved rounds\n")
    print("| configuration | s per round | responses/s | response tokens/s | vs one pass |")
    print("| --- | --- | --- | --- | --- |")
    summary = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        summary[name] = {
            "seconds": med, "responses_per_s": n / med, "tokens_per_s": resp_tokens / med, "ratio": med / base,
        }
        print(f"| {name} | {med:.2f} | {n / med:.2f} | {resp_tokens / med:.0f} | {med / base:.2f}x |")
    if args.alignment:
        full = statistics.median(times["full"])
        print("\n| align_score backend | ms per sentence over `full` (lexical) | vs `full` |")
        print("| --- | --- | --- |")
        for spec in args.alignment:
            med = statistics.median(times[f"full, align_score by {spec}"])
            extra = (med - full) / max(sentences, 1)
            summary[f"full, align_score by {spec}"].update(extra_s_per_sentence=extra, vs_full=med / full)
            print(f"| {spec} | {1000 * extra:.1f} | {med / full:.2f}x |")
        print(f"\n({sentences} sentences per round)")
    return summary


if __name__ == "__main__":
    main()
