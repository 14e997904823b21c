"""Two measurements behind ``syncheck serve``'s design, side by side in one run.

1. **Which thread runs the model.** The same monitor generations (greedy, ``--tokens`` each), timed on the main
   thread (which loaded the model) and on a worker thread, interleaved round by round; then, in a fresh child
   process, on a worker thread that also loaded the model. On CPU, PyTorch's OpenMP pool was fast only in the thread
   that first used it, hence the server's single model thread on the main thread.
2. **Where a pooled round's time goes.** ``--streams`` generations decoded together by
   :class:`syncheck.live.pool.DecodePool` as the server runs them (prefilled in the first round, on the prompt prefix
   cache), timing its packed forwards (its default on CPU), or, in padded rounds, the engine's prefills, batched
   decode steps and per-stream without-context flushes (the rest is text decoding and scoring), against the same
   generations run one after another in the same process: how far batching gets without any HTTP. Packed rounds
   first, then padded.

Usage::

    .venv/bin/python -m benchmarks.serve_costs [--model smollm2-135m] [--tokens 40] [--rounds 2] [--streams 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.run_stamp import machine
from benchmarks.serve_load import DOCUMENTS, QUESTIONS


def _monitor(model: str):
    from syncheck.live.monitor import Monitor
    from syncheck.scorer import Scorer

    return Monitor(Scorer(model))


def _generations(monitor, tokens: int, n: int = 3) -> float:
    t0 = time.perf_counter()
    for q in QUESTIONS[:n]:
        monitor.generate(question=q, context=DOCUMENTS, decoding={"max_new_tokens": tokens})
    return time.perf_counter() - t0


def thread_times(model: str, tokens: int, rounds: int) -> dict[str, float]:
    """Seconds for the same generations on the main thread and on a worker thread (best of ``rounds``)."""
    monitor = _monitor(model)
    _generations(monitor, 4, 1)  # warm-up
    main, worker = [], []
    with ThreadPoolExecutor(1) as pool:
        for _ in range(rounds):
            main.append(_generations(monitor, tokens))
            worker.append(pool.submit(_generations, monitor, tokens).result())
    return {"main thread": min(main), "worker thread": min(worker)}


def all_in_worker(model: str, tokens: int, rounds: int) -> float:
    """Seconds for the same generations when one worker thread loads the model and runs them (a fresh process)."""
    code = ("import json, sys; from benchmarks.serve_costs import load_and_run_in_worker; "
            f"print(json.dumps(load_and_run_in_worker({model!r}, {tokens}, {rounds})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load_and_run_in_worker(model: str, tokens: int, rounds: int) -> float:
    """Seconds for :func:`all_in_worker`'s generations in this process (what its fresh process runs)."""

    def work() -> float:
        monitor = _monitor(model)
        _generations(monitor, 4, 1)
        return min(_generations(monitor, tokens) for _ in range(rounds))

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


PHASES = ("packed forwards", "prefills", "batched decode steps", "without-context flushes")


def pooled_split(model: str, tokens: int, streams: int, packed: bool | None = None) -> dict[str, float]:
    """Seconds of ``streams`` pooled generations as the server runs them (prefilled in the pool's first round), the
    part spent in each engine phase, and the same generations run one after another (``sequential``). ``packed``:
    the pool's rounds (``None``: its default; packed rounds spend their forwards in ``packed forwards``)."""
    from syncheck.live import pool as pool_module
    from syncheck.live.pool import DecodePool

    monitor = _monitor(model)
    engine = monitor.engine
    spent = dict.fromkeys(PHASES, 0.0)
    depth = [0]

    def timed(name: str, fn):
        def wrapper(*args: Any, **kwargs: Any):
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # a phase that runs another (start_many -> start) counts once
                    spent[name] += time.perf_counter() - t0
        return wrapper

    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(streams)]
    decoding = {"max_new_tokens": tokens}
    monitor.generate(question=questions[0], context=DOCUMENTS, decoding={"max_new_tokens": 4})  # warm-up, prefix kept
    t0 = time.perf_counter()
    for q in questions:
        monitor.generate(question=q, context=DOCUMENTS, decoding=decoding)
    sequential = time.perf_counter() - t0
    engine.start = timed("prefills", engine.start)
    engine.start_many = timed("prefills", engine.start_many)
    engine.step = timed("batched decode steps", engine.step)
    engine.flush_kl = timed("without-context flushes", engine.flush_kl)
    pool = DecodePool(engine, packed=packed)
    rounds = "packed" if pool.packed else "padded"  # decided before the clock starts: the check runs forwards
    plain_forward = pool_module.packed_forward
    pool_module.packed_forward = timed("packed forwards", plain_forward)
    try:
        t0 = time.perf_counter()
        runs = [monitor.run(question=q, context=DOCUMENTS, decoding=decoding, prefill=False) for q in questions]
        while any(r.result is None for r in runs):
            pool.step([r for r in runs if r.result is None])
        total = time.perf_counter() - t0
    finally:
        pool_module.packed_forward = plain_forward
    return {"rounds": rounds, "total": total, "sequential": sequential,
            "tokens": sum(len(r.result.token_ids) for r in runs), **spent}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--streams", type=int, default=8)
    args = ap.parse_args(argv)

    threads = thread_times(args.model, args.tokens, args.rounds)
    threads["worker thread that loaded the model (fresh process)"] = all_in_worker(args.model, args.tokens, args.rounds)
    base = threads["main thread"]
    print(f"machine: {machine()}")
    print(f"model={args.model}: 3 monitor generations of up to {args.tokens} tokens, best of {args.rounds}")
    print("| thread | seconds | x main thread |")
    print("| --- | --- | --- |")
    for name, sec in threads.items():
        print(f"| {name} | {sec:.2f} | {sec / base:.2f} |")

    out = {"threads": threads}
    for key, packed in (("pooled", None), ("pooled padded", False)):  # the pool's default, then padded rounds
        split = out[key] = pooled_split(args.model, 64, args.streams, packed)
        print(f"\n{args.streams} pooled generations of up to 64 tokens, {split['rounds']} rounds: {split['tokens']} "
              f"tokens in {split['total']:.2f} s, {split['sequential'] / split['total']:.2f}x the same generations "
              f"one after another ({split['sequential']:.2f} s)")
        print("| phase | seconds | share |")
        print("| --- | --- | --- |")
        for name in PHASES:
            if split[name]:
                print(f"| {name} | {split[name]:.2f} | {split[name] / split['total']:.0%} |")
        if key == "pooled" and split["rounds"] == "padded":  # the default is padded here: nothing else to show
            break
    return out


if __name__ == "__main__":
    main()
