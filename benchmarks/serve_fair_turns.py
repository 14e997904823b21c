"""Fair turns: a live stream's pace while a large ``/v1/syncheck/score`` batch runs beside it.

A real ``syncheck serve`` runs in a subprocess on loopback. Each of ``--rounds`` rounds runs two phases on the same
streams (distinct questions over the built-in document sets; greedy, ``--tokens`` new tokens, method ``monitor``),
sent one after another by the ``openai`` client:

- **alone**: the streams with nothing else on the server;
- **beside**: first one ``/v1/syncheck/score`` request of ``--records`` records (256, the most one request takes) is
  sent, and once the server runs it (``/health``), the same streams.

For each phase it takes the gaps between a stream's consecutive sentence events (the pace a reader sees) and between
its consecutive text chunks (tokens), and their p95 over the phase's streams. The figure is the ratio of the p95
inter-sentence gap beside the batch to the one alone, taken within each round; the table gives the median over rounds
and the spread. The server scores a batch a record at a time, a forward of the model per turn
(``syncheck.serve.chat.ChatService.score_task``), and while streams run the batch's turns take at most
``--score-share`` of the model's time (``syncheck.serve.scheduler``). The goal: at most 1.5x. ``overlapped``
counts the rounds in which the batch was still running when the last stream ended (else the beside phase was
partly alone, and the ratio is flattering).

Usage::

    .venv/bin/python -m benchmarks.serve_fair_turns [--model smollm2-135m] [--records 256] [--streams 4]
    [--tokens 96] [--rounds 3]
    .venv/bin/python -m benchmarks.serve_fair_turns --smoke    # the tiny settings the tests run

Speed figures: run it on a quiet machine; the ratio is the figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from benchmarks._common import percentile
from benchmarks.run_stamp import machine
from benchmarks.serve_load import DOCUMENT_SETS
from benchmarks.serve_soak import RESPONSES

#: the goal: the p95 inter-sentence gap beside the batch, over the one alone
GOAL = 1.5


def score_records(n: int) -> list[dict[str, Any]]:
    """``n`` records to score, cycling through the document sets and their answers."""
    out = []
    for i in range(n):
        docs, questions = DOCUMENT_SETS[i % len(DOCUMENT_SETS)]
        out.append({"id": f"r{i}", "context": docs, "question": questions[(i // len(DOCUMENT_SETS)) % len(questions)],
                    "response": RESPONSES[i % len(RESPONSES)]})
    return out


def stream_gaps(base_url: str, question: str, documents: list[str], tokens: int) -> dict[str, list[float]]:
    """One streamed answer: the gaps, in seconds, between its consecutive sentence events and text chunks."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
    sentences, texts = [], []
    stream = client.chat.completions.create(model="bench", messages=[{"role": "user", "content": question}],
                                            max_tokens=tokens, temperature=0, stream=True,
                                            extra_body={"documents": documents})
    for chunk in stream:
        now = time.perf_counter()
        if chunk.choices and chunk.choices[0].delta.content:
            texts.append(now)
        if "sentence" in ((chunk.model_extra or {}).get("syncheck") or {}):
            sentences.append(now)
    return {"sentence": [b - a for a, b in zip(sentences, sentences[1:])],
            "token": [b - a for a, b in zip(texts, texts[1:])]}


def run_streams(base_url: str, streams: int, tokens: int) -> dict[str, float]:
    """The streams one after another; the p95 (and median) of their gaps."""
    gaps: dict[str, list[float]] = {"sentence": [], "token": []}
    for i in range(streams):
        docs, questions = DOCUMENT_SETS[i % len(DOCUMENT_SETS)]
        for kind, values in stream_gaps(base_url, questions[i % len(questions)], docs, tokens).items():
            gaps[kind] += values
    out: dict[str, float] = {}
    for kind, values in gaps.items():
        out[f"{kind}_gaps"] = float(len(values))
        out[f"{kind}_gap_p95_s"] = percentile(values, 0.95) if values else float("nan")
        out[f"{kind}_gap_median_s"] = statistics.median(values) if values else float("nan")
    return out


def beside_batch(server: Any, records: list[dict[str, Any]], streams: int, tokens: int) -> dict[str, float]:
    """:func:`run_streams` once the server runs one ``/v1/syncheck/score`` request of ``records``; ``overlapped``
    is 1 when the batch was still running as the last stream ended."""
    import httpx

    ended: list[float] = []
    status: list[int] = []

    def batch() -> None:
        try:
            r = httpx.post(server.url + "/v1/syncheck/score", content=json.dumps({"records": records}),
                           headers={"Content-Type": "application/json"}, timeout=3600)
            status.append(r.status_code)
        finally:
            ended.append(time.perf_counter())

    thread = threading.Thread(target=batch, daemon=True)
    thread.start()
    deadline = time.time() + 120
    while server.get("/health")["running"] < 1 and not ended and time.time() < deadline:
        time.sleep(0.05)  # the batch is admitted and running before the streams start
    row = run_streams(server.base_url, streams, tokens)
    streams_end = time.perf_counter()
    thread.join()
    if status != [200]:
        raise RuntimeError(f"the score request failed with {status}")
    row["overlapped"] = float(ended[0] >= streams_end)
    row["batch_s"] = ended[0] - streams_end  # how long the batch ran on after the streams (negative: it ended first)
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="what syncheck serve --model takes")
    ap.add_argument("--records", type=int, default=None, help="records in the score request (default 256; --smoke 8)")
    ap.add_argument("--streams", type=int, default=None, help="streams per phase (default 4; --smoke 2)")
    ap.add_argument("--tokens", type=int, default=None, help="max_tokens of each stream (default 96; --smoke 24)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; --smoke 1)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny settings (the tests)")
    args = ap.parse_args(argv)
    small = args.smoke
    args.records = args.records or (8 if small else 256)
    args.streams = args.streams or (2 if small else 4)
    args.tokens = args.tokens or (24 if small else 96)
    args.rounds = args.rounds or (1 if small else 3)

    from syncheck.serve.process import ServerProcess

    records = score_records(args.records)
    server = ServerProcess(args.model, "--model-id", "bench", "--max-concurrent", "4",
                           *(["--device", args.device] if args.device else []), env={"PYTHONWARNINGS": "ignore"})
    rounds = []
    try:
        run_streams(server.base_url, 1, 4)  # warm-up
        for k in range(args.rounds):
            alone = run_streams(server.base_url, args.streams, args.tokens)
            beside = beside_batch(server, records, args.streams, args.tokens)
            ratio = beside["sentence_gap_p95_s"] / alone["sentence_gap_p95_s"]
            rounds.append({"alone": alone, "beside": beside, "ratio": ratio})
            print(f"round {k + 1}: p95 inter-sentence gap {alone['sentence_gap_p95_s']:.3f} s alone, "
                  f"{beside['sentence_gap_p95_s']:.3f} s beside a {args.records}-record batch ({ratio:.2f}x); "
                  f"p95 inter-token gap {alone['token_gap_p95_s']:.3f} / {beside['token_gap_p95_s']:.3f} s; batch "
                  f"{'still running' if beside['overlapped'] else 'done'} when the streams ended", flush=True)
    finally:
        server.stop()
    ratios = [r["ratio"] for r in rounds]
    token_ratios = [r["beside"]["token_gap_p95_s"] / r["alone"]["token_gap_p95_s"] for r in rounds]
    summary = {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
               "token_ratio_median": statistics.median(token_ratios),
               "overlapped": sum(r["beside"]["overlapped"] for r in rounds), "rounds": rounds,
               "goal": GOAL}
    print(f"\nmodel={args.model} records={args.records} streams={args.streams} tokens={args.tokens} "
          f"rounds={args.rounds}; machine: {machine()}")
    print("| | alone | beside the batch | x alone (median, spread) |")
    print("| --- | --- | --- | --- |")
    for kind, ratio_list in (("sentence", ratios), ("token", token_ratios)):
        a = statistics.median(r["alone"][f"{kind}_gap_p95_s"] for r in rounds)
        b = statistics.median(r["beside"][f"{kind}_gap_p95_s"] for r in rounds)
        print(f"| p95 inter-{kind} gap, s | {a:.3f} | {b:.3f} | {statistics.median(ratio_list):.2f} "
              f"({min(ratio_list):.2f}-{max(ratio_list):.2f}) |")
    median = summary["ratio_median"]
    verdict = ("no figure: a stream gave fewer than two sentences (raise --tokens)" if median != median
               else f"{'met' if median <= GOAL else 'NOT met'} ({median:.2f}x)")
    print(f"\ngoal: the p95 inter-sentence gap beside the batch at most {GOAL}x alone: {verdict}; the batch "
          f"overlapped every stream in {summary['overlapped']:.0f} of {len(rounds)} rounds")
    return summary


if __name__ == "__main__":
    main()
