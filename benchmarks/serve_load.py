"""Load on ``syncheck serve``: throughput and latency at several concurrencies, beside ``Monitor`` run sequentially.

The same requests (distinct questions over one set of documents, or over ``--doc-sets K`` sets in turn; greedy,
``--tokens`` new tokens at most, method ``monitor``) are sent by the official ``openai`` client as streams,
``--requests`` of them at each concurrency (1, 4, 8 by default), to a server started in a subprocess on loopback
with ``--max-concurrent`` equal to the largest concurrency. The baseline runs the same requests one after another
through :meth:`syncheck.live.monitor.Monitor.steps` in this process, with the same scorer settings, timed the same
way: time to the first token, to the first sentence event, and to the end. Phases never overlap (the server is idle
while the baseline runs). With requests > concurrency (``--requests 32 --concurrency 8``), freed slots refill: each
client thread sends the next request as its stream ends, as a server in use sees.

The phases are interleaved and repeated, as in ``benchmarks.monitor_overhead``: each of ``--rounds`` rounds runs
the baseline and then every concurrency level, so a machine that drifts during the run moves both sides of a ratio
alike. Each ratio is taken within its round, and the table prints the median over rounds with the spread
(lowest-highest) beside it: a spread wider than the effect means the run says nothing. Each round's figures are
printed as it ends, so a run cut short still leaves its finished rounds.

Usage::

    .venv/bin/python -m benchmarks.serve_load [--model smollm2-135m] [--tokens 64] [--requests 8] [--concurrency 1,4,8]
    [--rounds 3] [--doc-sets 1] [--with-fod] [--with-operations] [--ray-replicas 2 [--replica-cpus 1]
    [--replica-gpus 0]]

``--with-operations`` also runs every level against a second plain server started with an API key and JSON request
logs (``--api-key``, ``--log-format json``; both servers keep ``/metrics``), in the same rounds, so the cost of what
an operator turns on shows beside the plain server.

``--ray-replicas N`` also serves the model as N Ray Serve replicas (``syncheck serve --replicas N``, the
``serve-ray`` extra) and runs every level against them in the same rounds; the last column then gives the share of
its requests served by the replica that served the first request over the same documents (document affinity,
counted per document set), and in brackets how many distinct replicas served the sets' first requests.

Figures are ratios against the baseline measured in the same run (absolute times depend on the machine).

The server runs each round as one forward (:class:`syncheck.live.pool.DecodePool`; on CPU, packed rounds): the next
token of every running stream, the without-context flushes of the sentences that ended, and the prompts of the
requests that arrived; sentence scoring stays per stream. To show how far that is from the limit, the last two tables
time the bare model in this process, at batch 1 and at the largest concurrency: its decode step over a cache of the
prompt's length (the ceiling of a batched server's raw token rate), and a forward of 16 tokens per row over a cache
of the without-context prompt's length (a flush or a question's prefill batched across streams).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks._common import percentile
from benchmarks.run_stamp import machine

DOCUMENTS = [
    "The Kestrel Navigation canal opened in 1794 and linked the wool mills of Kestrelford to the port of Aldmouth, "
    "32 km to the south. It was engineered by Josiah Marlowe, who designed its eleven locks and the 240 m Brindle "
    "tunnel.",
    "After the railway reached Kestrelford in 1852 the canal lost most of its traffic; the last commercial barge "
    "unloaded in 1931. Volunteers restored the locks between 1978 and 1989.",
    "About 40,000 people visit each year, most of them between May and September, when trip boats run from the "
    "Marlowe Basin every afternoon.",
]
QUESTIONS = [
    "When did the canal open?", "Who engineered the canal?", "What happened after the railway came?",
    "How many people visit each year?", "When were the locks restored?", "How long is the Brindle tunnel?",
    "Where did the canal lead?", "When did the last commercial barge unload?", "What runs from the Marlowe Basin?",
    "Why did the canal lose its traffic?", "How many locks does the canal have?", "What did the mills produce?",
]
#: Document sets with their questions, of about the same length; ``--doc-sets K`` cycles through the first K
#: (:func:`document_set` numbers copies of them beyond these).
DOCUMENT_SETS: list[tuple[list[str], list[str]]] = [
    (DOCUMENTS, QUESTIONS),
    ([
        "The Harrow Point lighthouse was first lit in 1868. Its 31 m granite tower was designed by the engineer "
        "Edith Calloway, and its lamp could be seen 24 km out to sea on a clear night.",
        "Keepers lived at the station until 1964, when the light was automated; the keepers' cottages became a "
        "museum in 1991 and hold the original Fresnel lens.",
        "The lighthouse is open to visitors from April to October, and about 18,000 people climb its 132 steps "
        "each year.",
    ], [
        "When was the lighthouse first lit?", "Who designed the tower?", "How tall is the tower?",
        "How far could the lamp be seen?", "When was the light automated?", "What is in the museum?",
        "How many steps does the tower have?", "When is the lighthouse open?", "How many people visit each year?",
        "What is the tower built of?", "When did the cottages become a museum?", "Who lived at the station?",
    ]),
    ([
        "The Orrin Valley observatory opened in 1931 on a ridge 1,420 m above sea level. Its main telescope, a 1.2 m "
        "reflector, was built by the Tamsin optical works and paid for by the Halden family.",
        "In 1957 the observatory tracked the first artificial satellites, and from 1972 it ran a survey of variable "
        "stars that catalogued 6,300 of them.",
        "Since 2005 it has been run by the regional university, which opens the dome to the public on the first "
        "Friday of each month.",
    ], [
        "When did the observatory open?", "How high is the ridge?", "How large is the main telescope?",
        "Who built the telescope?", "Who paid for the telescope?", "What did it track in 1957?",
        "How many variable stars were catalogued?", "Who runs the observatory now?", "When is the dome open?",
        "When did the survey start?", "Where is the observatory?", "What kind of telescope is the main one?",
    ]),
]


#: tokens per row in the wide bare forward: about one sentence of an answer (a flush) or one question (a prefill)
FLUSH_WIDTH = 16


def document_set(i: int) -> tuple[list[str], list[str]]:
    """Document set ``i`` with its questions: the built-in sets first, then copies of them that open with a file
    number (same questions, about the same length, documents of their own, so of their own replica)."""
    docs, questions = DOCUMENT_SETS[i % len(DOCUMENT_SETS)]
    if i < len(DOCUMENT_SETS):
        return docs, questions
    return [f"File {i // len(DOCUMENT_SETS) + 1}. {docs[0]}", *docs[1:]], questions


def workload(requests: int, doc_sets: int = 1) -> list[tuple[str, list[str], int]]:
    """The requests of one level, in sending order: ``(question, documents, set index)``, interleaving the first
    ``doc_sets`` document sets (request ``i`` is over set ``i % doc_sets``, and asks that set's questions in turn)."""
    if doc_sets < 1:
        raise ValueError(f"--doc-sets must be at least 1, got {doc_sets}")
    sets = [document_set(k) for k in range(doc_sets)]
    out = []
    for i in range(requests):
        docs, questions = sets[i % doc_sets]
        out.append((questions[(i // doc_sets) % len(questions)], docs, i % doc_sets))
    return out


def affinity(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Document affinity of requests that name their replica (on Ray Serve), per document set: the share of the
    requests over each set served by the replica that served that set's first request (pooled over sets), and how
    many distinct replicas served the sets' first requests (the spread). Empty when no row names a replica."""
    first: dict[int, str] = {}
    same = served = 0
    for r in rows:
        if not r.get("replica"):
            continue
        owner = first.setdefault(r.get("doc_set", 0), r["replica"])
        same += r["replica"] == owner
        served += 1
    if not served:
        return {}
    return {"same_replica_share": same / served, "first_replicas": float(len(set(first.values())))}


def _stream_request(base_url: str, request: tuple[str, list[str], int], tokens: int) -> dict[str, Any]:
    import openai

    question, documents, doc_set = request
    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
    t0 = time.perf_counter()
    first_token = first_sentence = replica = None
    n = 0
    stream = client.chat.completions.create(
        model="bench", messages=[{"role": "user", "content": question}], max_tokens=tokens, temperature=0,
        stream=True, stream_options={"include_usage": True}, extra_body={"documents": documents})
    for chunk in stream:
        now = time.perf_counter() - t0
        if chunk.choices and chunk.choices[0].delta.content and first_token is None:
            first_token = now
        extra = (chunk.model_extra or {}).get("syncheck") or {}
        if "sentence" in extra and first_sentence is None:
            first_sentence = now
        replica = extra.get("replica", replica)  # on Ray Serve: the replica that served it
        if chunk.usage is not None:
            n = chunk.usage.completion_tokens
    total = time.perf_counter() - t0
    return {"ttft": first_token or total, "first_sentence": first_sentence or total, "total": total, "tokens": n,
            "replica": replica, "doc_set": doc_set}


def _summary(rows: list[dict[str, Any]], wall: float) -> dict[str, float]:
    tokens = sum(r["tokens"] for r in rows)
    return {
        "requests": len(rows), "tokens": tokens, "wall_s": wall,
        "requests_per_s": len(rows) / wall, "tokens_per_s": tokens / wall,
        "ttft_median_s": statistics.median(r["ttft"] for r in rows),
        "ttft_max_s": max(r["ttft"] for r in rows),
        "first_sentence_median_s": statistics.median(r["first_sentence"] for r in rows),
        "latency_median_s": statistics.median(r["total"] for r in rows),
        "latency_p95_s": percentile([r["total"] for r in rows], 0.95),
        **affinity(rows),
    }


def run_server_level(base_url: str, requests: list[tuple[str, list[str], int]], tokens: int,
                     concurrency: int) -> dict[str, float]:
    """Send ``requests`` with ``concurrency`` client threads: with more requests than threads, each thread takes the
    next request as its stream ends, so the server's freed slots refill."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        rows = list(pool.map(lambda req: _stream_request(base_url, req, tokens), requests))
    return _summary(rows, time.perf_counter() - t0)


def run_level_beside_fod(base_url: str, requests: list[tuple[str, list[str], int]], tokens: int,
                        concurrency: int) -> dict[str, float]:
    """:func:`run_server_level` while one FOD request, forced to backtrack (``tau1`` 1), runs: the level starts once
    the FOD stream has started. ``fod_overlapped`` is 1 when FOD was still running when the level finished."""
    import openai

    started = threading.Event()
    finished: list[float] = []

    def fod() -> None:
        try:
            client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
            stream = client.chat.completions.create(
                model="bench", messages=[{"role": "user", "content": QUESTIONS[-1]}], max_tokens=2 * tokens,
                stream=True, extra_body={"documents": DOCUMENTS, "syncheck": {
                    "method": "fod", "tau1": 1.0, "max_sentences": 8, "final_check": False}})
            started.set()
            for _ in stream:
                pass
        finally:
            started.set()
            finished.append(time.perf_counter())

    with ThreadPoolExecutor(1) as background:
        job = background.submit(fod)
        started.wait(600)
        row = run_server_level(base_url, requests, tokens, concurrency)
        level_end = time.perf_counter()
        job.result()
    row["fod_overlapped"] = float(finished[0] >= level_end)
    return row


class SequentialMonitor:
    """The baseline: the requests one after another through one in-process :class:`~syncheck.live.monitor.Monitor`."""

    def __init__(self, model: str, scorer_args: dict[str, Any]) -> None:
        from syncheck.live.monitor import Monitor
        from syncheck.scorer import Scorer

        # flushed between decode steps, as the server does: the ratios measure what batching streams gains
        self.monitor = Monitor(Scorer(model, **scorer_args), background_kl=False)
        self.monitor.generate(question=QUESTIONS[0], context=DOCUMENTS, decoding={"max_new_tokens": 4})  # warm-up

    def run(self, requests: list[tuple[str, list[str], int]], tokens: int) -> dict[str, float]:
        decoding = {"max_new_tokens": tokens}
        rows = []
        t_all = time.perf_counter()
        for q, documents, _ in requests:
            t0 = time.perf_counter()
            first_token = first_sentence = None
            n = 0
            for step in self.monitor.steps(question=q, context=documents, decoding=decoding):
                now = time.perf_counter() - t0
                if step.text and first_token is None:
                    first_token = now
                if step.events and first_sentence is None:
                    first_sentence = now
                if step.result is not None:
                    n = len(step.result.token_ids)
            total = time.perf_counter() - t0
            rows.append({"ttft": first_token or total, "first_sentence": first_sentence or total, "total": total,
                         "tokens": n})
        return _summary(rows, time.perf_counter() - t_all)

    def prefix_reuse(self) -> str:
        """What the monitor's prompt prefix caches spared, for the table's footnote."""
        engine = self.monitor.engine
        parts = []
        for name, cache in (("with-context", engine.prefixes), ("without-context", engine.prefixes_without)):
            if cache is not None:
                per_hit = cache.reused_tokens / cache.hits if cache.hits else 0.0
                parts.append(f"{name} prompts {cache.hits} hits, {per_hit:.0f} tokens reused per hit")
        return "; ".join(parts) or "off"


def round_lines(k: int, this_round: dict[str, dict[str, float]], baseline: str) -> str:
    """One line per setup of a finished round, printed at once, so a run cut short still leaves its rounds."""
    base = this_round[baseline]["tokens_per_s"]
    return "\n".join(
        f"round {k}: {name}: {r['tokens_per_s']:.1f} tokens/s ({r['tokens_per_s'] / base:.2f}x baseline), TTFT median "
        f"{r['ttft_median_s']:.2f} s, latency p50 / p95 {r['latency_median_s']:.2f} / {r['latency_p95_s']:.2f} s"
        for name, r in this_round.items())


def combine_rounds(rounds: list[dict[str, dict[str, float]]], baseline: str) -> dict[str, dict[str, float]]:
    """Median of every figure over rounds, with each setup's tokens/s ratio to ``baseline`` taken within its round.

    Adds ``tokens_per_s_vs_baseline`` (median over rounds) and its ``_min`` / ``_max`` (the spread) to each setup.
    """
    out: dict[str, dict[str, float]] = {}
    for name in rounds[0]:
        rows = [r[name] for r in rounds]
        merged = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        ratios = [r[name]["tokens_per_s"] / r[baseline]["tokens_per_s"] for r in rounds]
        merged["tokens_per_s_vs_baseline"] = statistics.median(ratios)
        merged["tokens_per_s_vs_baseline_min"] = min(ratios)
        merged["tokens_per_s_vs_baseline_max"] = max(ratios)
        merged["rounds"] = len(rounds)
        out[name] = merged
    return out


def forward_rates(lm: Any, batches: list[int], prompt_tokens: int, width: int = 1, steps: int = 24
                  ) -> dict[int, float]:
    """Tokens/s of the bare model's forward of ``width`` new tokens per row at each batch size, over one cache of
    ``prompt_tokens`` per row: ``width`` 1 is a decode step; a wider one is a sentence's without-context flush or a
    question's prefill on cached documents, which feed several tokens at once."""
    import torch

    from syncheck.model.forward_cache import cache_kwargs, returned_cache

    vocab = len(lm.tokenizer)
    rates = {}
    for b in batches:
        ids = torch.randint(0, vocab, (b, prompt_tokens), device=lm.device)
        with torch.inference_mode():
            cache = returned_cache(lm.model(input_ids=ids, use_cache=True))
            t0 = time.perf_counter()
            for _ in range(steps):
                step = torch.randint(0, vocab, (b, width), device=lm.device)
                cache = returned_cache(lm.model(input_ids=step, use_cache=True, **cache_kwargs(lm.model, cache)))
            rates[b] = b * width * steps / (time.perf_counter() - t0)
    return rates


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens of every request")
    ap.add_argument("--requests", type=int, default=8,
                    help="requests per concurrency level; more than --concurrency: freed slots refill")
    ap.add_argument("--doc-sets", type=int, default=1,
                    help=f"document sets the requests cycle through ({len(DOCUMENT_SETS)} built in, numbered copies "
                         "of them beyond); with --ray-replicas, document affinity is counted per set")
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--with-fod", action="store_true",
                    help="also run the largest level beside one FOD request, and compare the streams' TTFT")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repeats of the baseline and every level")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--packing", default="auto", choices=["auto", "on", "off"],
                    help="the servers' rounds (syncheck serve --packing): packed on CPU by default")
    ap.add_argument("--with-operations", action="store_true",
                    help="also run every level against a plain server with an API key and JSON request logs "
                         "(--api-key, --log-format json; its /metrics are always on), beside the plain server")
    ap.add_argument("--ray-replicas", type=int, default=0,
                    help="also run every level against this many Ray Serve replicas (syncheck serve --replicas)")
    ap.add_argument("--replica-cpus", type=float, default=1.0, help="CPUs Ray reserves for each replica")
    ap.add_argument("--replica-gpus", type=float, default=0.0, help="GPUs Ray reserves for each replica")
    ap.add_argument("--replica-threads", type=int, default=None,
                    help="torch threads in each replica (default: one per reserved CPU)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    levels = [int(c) for c in args.concurrency.split(",")]
    try:
        requests = workload(args.requests, args.doc_sets)
    except ValueError as exc:
        ap.error(str(exc))
    extra = (["--device", args.device] if args.device else []) + ["--dtype", args.dtype, "--packing", args.packing]

    from syncheck.serve.process import ServerProcess

    baseline_name = "Monitor, sequential (baseline)"
    beside_fod = f"server, concurrency {max(levels)}, beside one FOD request"
    baseline = SequentialMonitor(args.model, {"device": args.device, "dtype": args.dtype})
    server = ServerProcess(args.model, "--model-id", "bench", "--max-concurrent", str(max(levels)), "--max-queue", "64",
                           *extra, env={"PYTHONWARNINGS": "ignore"})
    ray_server = ops_server = None
    rounds: list[dict[str, dict[str, float]]] = []
    try:
        if args.with_operations:  # the clients' api_key is "none"
            ops_server = ServerProcess(args.model, "--model-id", "bench", "--max-concurrent", str(max(levels)),
                                       "--max-queue", "64", "--api-key", "none", "--log-format", "json", *extra,
                                       env={"PYTHONWARNINGS": "ignore"})
            _stream_request(ops_server.base_url, requests[0], 4)  # warm-up
        if args.ray_replicas:
            ray_server = ServerProcess(args.model, "--model-id", "bench", "--max-concurrent", str(max(levels)),
                                       "--max-queue", "64", "--replicas", str(args.ray_replicas), "--ray",
                                       "--replica-cpus", str(args.replica_cpus),
                                       "--replica-gpus", str(args.replica_gpus), *extra,
                                       *(["--replica-threads", str(args.replica_threads)] if args.replica_threads
                                         else []),
                                       env={"PYTHONWARNINGS": "ignore"})
            _stream_request(ray_server.base_url, requests[0], 4)  # warm-up
        base = server.base_url
        _stream_request(base, requests[0], 4)  # warm-up
        for k in range(args.rounds):
            this_round = {baseline_name: baseline.run(requests, args.tokens)}
            for c in levels:
                this_round[f"server, concurrency {c}"] = run_server_level(base, requests, args.tokens, c)
                if ops_server is not None:
                    this_round[f"server with key and JSON logs, concurrency {c}"] = run_server_level(
                        ops_server.base_url, requests, args.tokens, c)
                if ray_server is not None:
                    this_round[f"Ray Serve, {args.ray_replicas} replicas, concurrency {c}"] = run_server_level(
                        ray_server.base_url, requests, args.tokens, c)
            if args.with_fod:
                this_round[beside_fod] = run_level_beside_fod(base, requests, args.tokens, max(levels))
            rounds.append(this_round)
            print(round_lines(k + 1, this_round, baseline_name), flush=True)
    finally:
        server.stop()
        for other in (ray_server, ops_server):
            if other is not None:
                other.stop()
    results = combine_rounds(rounds, baseline_name)

    print(f"\nmodel={args.model} requests={args.requests} over {args.doc_sets} document set(s) "
          f"max_tokens={args.tokens} (greedy, method monitor); "
          f"{args.rounds} interleaved rounds, medians over rounds, ratios taken within each round")
    print(f"machine: {machine()}")
    print("| setup | requests/s | tokens/s | x baseline tokens/s | spread over rounds | TTFT median (max), s "
          "| first sentence median, s | latency p50 / p95, s | same replica (sets' first replicas) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in [baseline_name] + [n for n in results if n != baseline_name]:
        r = results[name]
        share = (f"{r['same_replica_share']:.0%} ({r['first_replicas']:.0f})" if "same_replica_share" in r else "-")
        print(f"| {name} | {r['requests_per_s']:.2f} | {r['tokens_per_s']:.1f} | {r['tokens_per_s_vs_baseline']:.2f} "
              f"| {r['tokens_per_s_vs_baseline_min']:.2f}-{r['tokens_per_s_vs_baseline_max']:.2f} "
              f"| {r['ttft_median_s']:.2f} ({r['ttft_max_s']:.2f}) | {r['first_sentence_median_s']:.2f} "
              f"| {r['latency_median_s']:.2f} / {r['latency_p95_s']:.2f} | {share} |")
    print(f"\nthe sequential monitor's prompt prefix caches over the run (the server's work alike): "
          f"{baseline.prefix_reuse()}")
    if args.with_fod:
        alone = [r[f"server, concurrency {max(levels)}"]["ttft_median_s"] for r in rounds]
        beside = [r[beside_fod]["ttft_median_s"] for r in rounds]
        ratios = [b / a for a, b in zip(alone, beside)]
        results[beside_fod]["ttft_vs_alone"] = statistics.median(ratios)
        print(f"\nmonitor streams' TTFT median while one FOD request (forced to backtrack) runs, against the same "
              f"level alone: {statistics.median(ratios):.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f}; FOD "
              f"still running at the level's end in {sum(r[beside_fod]['fod_overlapped'] for r in rounds):.0f} of "
              f"{len(rounds)} rounds)")
    from syncheck.model.passes import prompt_pair

    lm = baseline.monitor.scorer.lm
    question, documents, _ = requests[0]
    pair = prompt_pair(lm, documents, question, args.tokens)
    prompt_tokens = len(pair.with_context)
    batches = sorted({1, max(levels)})
    rates = forward_rates(lm, batches, prompt_tokens)
    print(f"\nbare decode step, {prompt_tokens}-token prompt (the ceiling of batching concurrent requests):")
    print("| batch | tokens/s | x batch 1 |")
    print("| --- | --- | --- |")
    for b, rate in rates.items():
        print(f"| {b} | {rate:.1f} | {rate / rates[1]:.2f} |")
    results["decode step"] = {f"batch_{b}_tokens_per_s": rate for b, rate in rates.items()}
    without_tokens = len(pair.without_context)
    wide = forward_rates(lm, batches, without_tokens, width=FLUSH_WIDTH, steps=8)
    print(f"\nbare forward of {FLUSH_WIDTH} tokens per row on a {without_tokens}-token cache (a sentence's "
          "without-context flush, a question's prefill; what batching them across streams could gain):")
    print("| batch | tokens/s | x batch 1 |")
    print("| --- | --- | --- |")
    for b, rate in wide.items():
        print(f"| {b} | {rate:.1f} | {rate / wide[1]:.2f} |")
    results[f"forward of {FLUSH_WIDTH} tokens"] = {f"batch_{b}_tokens_per_s": rate for b, rate in wide.items()}
    return results


if __name__ == "__main__":
    main()
