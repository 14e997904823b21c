"""Where ``syncheck serve`` spends its time (at concurrency 1 by default): a sampling profile of the server process.

``benchmarks.serve_load`` says how far the server is from ``Monitor`` run in process; this says why. It starts the
server (as ``serve_load`` does: a subprocess on loopback), warms it up, then samples every thread of the server
process with `py-spy <https://github.com/benfred/py-spy>`_ (``pip install py-spy``; it reads the process from
outside, so the server runs unmodified) while ``--requests`` streamed requests run, ``--concurrency`` at a time
(with more requests than that, a freed slot takes the next), and sorts
every sample (idle threads too, so the model thread's waiting for requests shows) into where it was:

- on the model thread: the packed forward (decode steps, flushes and prefills in one forward; the pool's default on
  CPU), or else the with-context forward (decode steps and prefills) and the without-context flush at sentence
  ends, sentence scoring (features, alignment, aggregator), the pool's cache bookkeeping, the tokenizer, handing
  items to the event loop, and the rest of the monitor's per-token Python;
- on the HTTP thread: building the SSE chunks (pydantic / JSON), and the event loop with uvicorn and starlette.

Each share is of all samples taken; the model thread's forward is the work the in-process monitor also does, so the
rest is the server's own cost, or the monitor's per-token code. On 2 cores anything the HTTP thread runs competes
with PyTorch's threads for the same cores.

Usage::

    .venv/bin/python -m benchmarks.serve_profile [--model smollm2-135m] [--requests 8] [--tokens 64] [--rate 200]
    [--concurrency 1]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.run_stamp import machine
from benchmarks.serve_load import run_server_level, workload

#: (category, frame pattern), in order: the first pattern that matches any frame of a stack names its category
MODEL_THREAD = (
    ("waiting for a request", re.compile(r"Condition\.wait|^wait \(threading\.py")),
    ("packed forward (decode steps, flushes, prefills)", re.compile(r"packed_forward")),
    ("without-context flush", re.compile(r"flush_kl")),
    ("sentence scoring", re.compile(r"featurize|score_finished|mark_degenerate")),
    ("prefill", re.compile(r"prefill|start_many")),
    ("with-context forward (decode step)", re.compile(r"\bforward \(|_call_impl")),
    ("pool bookkeeping (cache rows, concat)", re.compile(r"kv\.py|_sync \(.*pool\.py")),
    ("tokenizer", re.compile(r"tokeniz|decode \(.*tokenization")),
    ("hand-off to the event loop", re.compile(r"call_soon_threadsafe|Job\.put|put \(.*scheduler")),
)
#: the HTTP thread's event loop with nothing to run: its innermost Python frame is the loop's own run (uvloop polls
#: in C), or the selector's poll
HTTP_IDLE = re.compile(r"^(Runner\.run \(asyncio/runners\.py|select \(selectors\.py|poll \(selectors\.py)")
HTTP_THREAD = (
    ("SSE chunks: JSON and pydantic", re.compile(r"json|pydantic|model_dump|dumps|protocol\.py")),
    ("event loop, uvicorn, starlette", re.compile(r".")),
)


def categorise(stack: str) -> tuple[str, str]:
    """``(thread, category)`` of one collapsed py-spy stack (frames ``;``-separated, outermost first)."""
    frames = stack.split(";")
    model = any("Scheduler.run" in f for f in frames)
    if not model and not any(re.search(r"uvicorn|asyncio|starlette|anyio", f) for f in frames):
        return "other thread", "idle or helper"
    thread = "model thread" if model else "HTTP thread"
    if not model and HTTP_IDLE.search(frames[-1]):
        return thread, "waiting on sockets"
    for name, pattern in MODEL_THREAD if model else HTTP_THREAD:  # in the table's order: the first that matches
        if any(pattern.search(f) for f in frames):
            return thread, name
    return thread, "the monitor's per-token Python"


def read_raw(path: Path) -> Counter:
    """Samples per (thread, category) from a ``py-spy record --format raw`` file."""
    counts: Counter = Counter()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[categorise(stack)] += int(n)
    return counts


def main(argv: list[str] | None = None) -> Counter:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    ap.add_argument("--raw", default=None, help="keep py-spy's raw stacks in this file")
    args = ap.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(os.sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: `.venv/bin/pip install py-spy`, then run this again")
    from syncheck.serve.process import ServerProcess

    requests = workload(args.requests)
    raw = Path(args.raw) if args.raw else Path(tempfile.mkdtemp()) / "serve.raw"
    with ServerProcess(args.model, "--model-id", "bench", "--max-concurrent", str(args.concurrency)) as server:
        run_server_level(server.base_url, requests[:1], args.tokens, 1)  # warm-up
        spy_proc = subprocess.Popen([spy, "record", "-p", str(server.proc.pid), "-f", "raw", "-r", str(args.rate),
                                     "--nonblocking", "--idle", "-o", str(raw)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # py-spy attaches
        level = run_server_level(server.base_url, requests, args.tokens, args.concurrency)
        spy_proc.send_signal(signal.SIGINT)
        spy_proc.wait(60)
    counts = read_raw(raw)
    per_thread = Counter()
    for (thread, _), n in counts.items():
        per_thread[thread] += n
    print(f"machine: {machine()}")
    print(f"model={args.model} requests={args.requests} max_tokens={args.tokens} concurrency {args.concurrency}: "
          f"{level['tokens_per_s']:.1f} tokens/s; {sum(per_thread.values())} samples at {args.rate}/s "
          f"(py-spy --nonblocking --idle; raw stacks: {raw}). Each share is of its own thread's samples; the model "
          "thread's waiting includes the second py-spy takes to attach.")
    print("| thread | where | share of the thread's samples |")
    print("| --- | --- | --- |")
    for (thread, name), n in sorted(counts.items(), key=lambda kv: (kv[0][0] != "model thread", kv[0][0], -kv[1])):
        if thread != "other thread":
            print(f"| {thread} | {name} | {n / per_thread[thread]:.1%} |")
    return counts


if __name__ == "__main__":
    main()
