"""Document affinity right after a Ray Serve deployment of ``syncheck serve`` starts.

Each run starts ``syncheck serve --replicas N`` afresh and, as soon as it is let in, sends ``--requests`` requests
(12) over ``--doc-sets`` document sets (6), ``--concurrency`` (4) at a time, not streamed, ``--tokens`` each. It
counts the requests that left their documents' replica two ways:

- *off the first*: served by another replica than the one that served the set's first request (what
  ``benchmarks.serve_load`` counts);
- *off home*: served by another replica than the set's home, the replica the router's rendezvous hash gives the set
  among the replicas alive at the end of the run; and of those, the *spills* the router counted in ``/metrics``
  (``syncheck_router_spills_total``: the home replica was in its view, but full or slow to answer). Off home and
  not a spill: the router did not see the home replica yet.

``--start ready`` (the default) sends once ``/health`` says ``ok`` (every replica reached by its own id);
``--start first`` once it first carries a replica's own answer, which is when ``/health`` answered before it waited
for every replica (it was forwarded to whichever replica the router saw first).

Usage::

    .venv/bin/python -m benchmarks.serve_affinity [--model smollm2-135m] [--replicas 2] [--runs 5]
        [--start ready|first] [--requests 12] [--doc-sets 6] [--concurrency 4] [--tokens 8] [--replica-cpus 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.run_stamp import machine
from benchmarks.serve_load import affinity, workload


def documents_key(documents: list[str]) -> str:
    """The router's key of a document set (``syncheck.serve.ray_app.documents_key``, without importing Ray)."""
    return hashlib.sha256(json.dumps(documents, ensure_ascii=False).encode()).hexdigest()[:32]


def home(key: str, replicas: list[str]) -> str:
    from syncheck.serve.ray_router import replica_weight

    return max(replicas, key=lambda r: replica_weight(key, r))


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    import openai

    from syncheck.serve.process import ServerProcess

    server = ServerProcess(args.model, "--model-id", "bench", "--replicas", str(args.replicas), "--ray",
                           "--replica-cpus", str(args.replica_cpus), "--max-concurrent", str(args.concurrency),
                           "--max-queue", "64", env={"PYTHONWARNINGS": "ignore"}, until_ready=args.start == "ready",
                           timeout=600)
    try:
        while args.start == "first" and not any(_health(server)["replicas"].values()):
            time.sleep(0.1)
        let_in = time.perf_counter()
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=600)

        def ask(request: tuple[str, list[str], int]) -> dict[str, Any]:
            question, documents, doc_set = request
            reply = client.chat.completions.create(
                model="bench", messages=[{"role": "user", "content": question}], max_tokens=args.tokens,
                temperature=0, extra_body={"documents": documents})
            return {"replica": reply.model_extra["syncheck"]["replica"], "doc_set": doc_set,
                    "key": documents_key(documents)}

        with ThreadPoolExecutor(args.concurrency) as pool:
            rows = list(pool.map(ask, workload(args.requests, args.doc_sets)))
        wall = time.perf_counter() - let_in
        deadline = time.time() + 120
        while not _health(server)["ready"] and time.time() < deadline:  # the replicas alive, once every one is
            time.sleep(0.5)
        replicas = sorted(_health(server)["replicas"])
        spills = sum(s.value for s in _samples(server.get("/metrics")) if s.name == "syncheck_router_spills_total")
    finally:
        server.stop()
    share = affinity(rows)
    off_home = sum(r["replica"] != home(r["key"], replicas) for r in rows)
    return {"off_first": round(len(rows) * (1 - share["same_replica_share"])), "off_home": off_home,
            "spills": int(spills), "replicas_used": len({r["replica"] for r in rows}), "replicas": len(replicas),
            "seconds": round(wall, 1)}


def _health(server: Any) -> dict[str, Any]:
    """``/health``'s body, a 503's included (Ray's proxy answers text until the application is deployed)."""
    import urllib.error

    try:
        return server.get("/health")
    except urllib.error.HTTPError as exc:
        try:
            return json.loads(exc.read())
        except ValueError:
            pass
    except OSError:  # a busy machine: no answer within 10 s
        pass
    return {"replicas": {}, "ready": False}


def _samples(text: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--start", choices=["ready", "first"], default="ready",
                    help="send once /health says ok (ready), or once it first answers at all (first)")
    ap.add_argument("--requests", type=int, default=12)
    ap.add_argument("--doc-sets", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--replica-cpus", type=float, default=1.0)
    args = ap.parse_args(argv)
    print(f"model={args.model} replicas={args.replicas} start={args.start} requests={args.requests} over "
          f"{args.doc_sets} document sets, concurrency {args.concurrency}, max_tokens {args.tokens}")
    print(f"machine: {machine()}")
    print("| run | off the first | off home | of which spills | replicas used (alive) | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    runs = []
    for k in range(args.runs):
        run = one_run(args)
        runs.append(run)
        print(f"| {k + 1} | {run['off_first']} | {run['off_home']} | {run['spills']} | {run['replicas_used']} "
              f"({run['replicas']}) | {run['seconds']} |", flush=True)
    return runs


if __name__ == "__main__":
    main()
