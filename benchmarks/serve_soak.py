"""Soak test of ``syncheck serve``: many short requests against one server process, to see what changes over time.

A real ``syncheck serve`` runs in a subprocess on loopback (:class:`~syncheck.serve.process.ServerProcess`) and
``--concurrency`` client threads send it ``--requests`` short requests, each thread taking the next as its own ends.
The requests, shuffled with ``--seed``:

- 10% (``--disconnect``) are streamed answers whose client hangs up after a few events, mid-stream;
- 5% (``--malformed``) are malformed, in turn: not JSON (400), a missing field (422), documents longer than the
  model's window (413) and, with ``--api-key``, a wrong key (401);
- the rest are well-formed, split by ``--mix``: plain streamed answers (greedy, scored as they stream), FOD
  answers (streamed; every other one forced to backtrack with ``tau1`` 1) and offline ``/v1/syncheck/score``
  requests.

It reports the first tenth of the run (by sending order; it ends the warm-up) against the last tenth: 5xx on
well-formed requests (a status of 500 or more, or an error event of type ``server_error`` in a stream), p50 and
p95 latency of the well-formed requests that ran to their end, and the server's resident memory (RSS; ``psutil``
where installed) after the first tenth and at the end. After the run it waits up to ``--settle`` seconds for the
server to go idle and reports the slots and queue entries still held (``GET /health``'s ``running`` and ``queued``,
and the gauges of ``GET /metrics`` where the server has it), and how many streams the server saw cancelled beside
the clients that hung up.

Usage::

    .venv/bin/python -m benchmarks.serve_soak [--model smollm2-135m] [--requests 1000] [--concurrency 8]
    [--tokens 16] [--api-key KEY] [--out soak.json] [--results-md benchmarks/RESULTS.md]
    .venv/bin/python -m benchmarks.serve_soak --smoke    # a few dozen requests, as tests/test_serve_soak.py runs

The goals: 0 5xx on well-formed requests, 0 slots or queue entries held after the run, RSS growth from the end of
the warm-up to the end of at most 5%, and the last tenth's p95 latency within 1.2x the first tenth's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import percentile
from benchmarks.run_stamp import machine, run_stamp
from benchmarks.serve_load import DOCUMENT_SETS

#: the well-formed kinds and their default shares
DEFAULT_MIX = "plain=0.6,fod=0.15,score=0.25"
MALFORMED_KINDS = ("bad_json", "missing_field", "too_long", "wrong_key")
#: the status each malformed kind must get
EXPECTED_STATUS = {"bad_json": 400, "missing_field": 422, "too_long": 413, "wrong_key": 401}
#: ``/metrics`` gauges whose names say they count requests that hold a slot or a queue entry
HELD_WORDS = ("running", "waiting", "queue")
#: words of the document that fits no model's window (tokenized on the server's model thread once per such request)
TOO_LONG_WORDS = 40_000
#: answers ``/v1/syncheck/score`` requests score, one per document set
RESPONSES = ["The canal opened in 1794 and was engineered by Josiah Marlowe. It has eleven locks.",
             "The lighthouse was first lit in 1868. Its tower is 31 m tall and made of granite.",
             "The observatory opened in 1931. Its main telescope is a 1.2 m reflector."]


# ---------------------------------------------------------------------- the plan
def plan(requests: int, mix: dict[str, float], disconnect: float, malformed: float, api_key: str | None,
         seed: int) -> list[dict[str, Any]]:
    """The requests in sending order: ``{"index", "kind", "question", "documents", "set"}``, with exactly
    ``round(disconnect * requests)`` hang-ups and ``round(malformed * requests)`` malformed ones, shuffled."""
    n_cut, n_bad = round(disconnect * requests), round(malformed * requests)
    if n_cut + n_bad > requests:
        raise ValueError("--disconnect plus --malformed exceed 1: leave room for well-formed requests")
    bad_kinds = [k for k in MALFORMED_KINDS if api_key or k != "wrong_key"]
    rest = requests - n_cut - n_bad
    total = sum(mix.values())
    counts = {k: int(rest * v / total) for k, v in mix.items()}
    counts[max(mix, key=mix.get)] += rest - sum(counts.values())
    kinds = ["disconnect"] * n_cut + [bad_kinds[i % len(bad_kinds)] for i in range(n_bad)]
    kinds += [k for k, c in counts.items() for _ in range(c)]
    rng = random.Random(seed)
    rng.shuffle(kinds)
    out = []
    for i, kind in enumerate(kinds):
        docs, questions = DOCUMENT_SETS[i % len(DOCUMENT_SETS)]
        out.append({"index": i, "kind": kind, "question": questions[(i // len(DOCUMENT_SETS)) % len(questions)],
                    "documents": docs, "set": i % len(DOCUMENT_SETS)})
    return out


def parse_mix(text: str) -> dict[str, float]:
    mix = {}
    for part in text.split(","):
        name, _, share = part.partition("=")
        if name not in ("plain", "fod", "score") or not share:
            raise ValueError(f"--mix takes plain=SHARE,fod=SHARE,score=SHARE, got {part!r}")
        mix[name] = float(share)
    if sum(mix.values()) <= 0:
        raise ValueError("--mix: the shares add up to 0")
    return mix


# ---------------------------------------------------------------------- one request
class Client:
    """Sends the plan's requests to one server (an ``httpx`` client per thread)."""

    def __init__(self, url: str, model_id: str, tokens: int, api_key: str | None) -> None:
        self.url, self.model_id, self.tokens, self.api_key = url, model_id, tokens, api_key
        self.local = threading.local()

    def http(self):
        import httpx

        if not hasattr(self.local, "client"):
            self.local.client = httpx.Client(base_url=self.url, timeout=600)
        return self.local.client

    def headers(self, key: str | None = None) -> dict[str, str]:
        key = key or self.api_key
        return {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def chat(self, req: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"model": self.model_id, "messages": [{"role": "user", "content": req["question"]}],
                "documents": req["documents"], "max_tokens": self.tokens, **extra}

    def send(self, req: dict[str, Any]) -> dict[str, Any]:
        kind, i = req["kind"], req["index"]
        t0 = time.perf_counter()
        if kind in MALFORMED_KINDS:
            row = self.malformed(req)
        elif kind == "score":
            body = {"context": req["documents"], "question": req["question"], "response": RESPONSES[req["set"]]}
            r = self.http().post("/v1/syncheck/score", content=json.dumps(body), headers=self.headers())
            row = {"status": r.status_code, "completed": r.status_code == 200 and "results" in r.json()}
        elif kind == "fod":
            fod = {"method": "fod", "num_samples": 2, "num_beams": 1, "max_sentences": 2, "final_check": i % 4 == 1,
                   **({"tau1": 1.0} if i % 2 else {})}
            row = self.stream(self.chat(req, stream=True, syncheck=fod), hang_up_after=None)
        else:  # plain, or a client that hangs up after a few events
            row = self.stream(self.chat(req, stream=True), hang_up_after=1 + i % 3 if kind == "disconnect" else None)
        return {"index": i, "kind": kind, "latency_s": time.perf_counter() - t0, **row}

    def stream(self, body: dict[str, Any], hang_up_after: int | None) -> dict[str, Any]:
        """A streamed answer read to ``[DONE]`` (``completed`` when its summary came), or hung up on after
        ``hang_up_after`` events."""
        events, summary, server_error = 0, False, False
        with self.http().stream("POST", "/v1/chat/completions", content=json.dumps(body),
                                headers=self.headers()) as r:
            if r.status_code != 200:
                r.read()
                return {"status": r.status_code, "completed": False}
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                events += 1
                if "error" in obj:
                    server_error = server_error or obj["error"].get("type") == "server_error"
                extra = obj.get("syncheck")
                summary = summary or (isinstance(extra, dict) and "sentence" not in extra)
                if hang_up_after is not None and events >= hang_up_after:
                    return {"status": 200, "completed": False, "hung_up": True, "server_error": server_error}
        return {"status": 200, "completed": summary and not server_error, "server_error": server_error}

    def malformed(self, req: dict[str, Any]) -> dict[str, Any]:
        kind, headers = req["kind"], self.headers()
        if kind == "bad_json":
            content = json.dumps(self.chat(req))[:-7]  # cut off mid-object
        elif kind == "missing_field":
            body = self.chat(req)
            del body["messages"]
            content = json.dumps(body)
        elif kind == "too_long":
            content = json.dumps(self.chat(req, documents=[" ".join(["word"] * TOO_LONG_WORDS)]))
        else:  # wrong_key
            content, headers = json.dumps(self.chat(req)), self.headers(key="not-" + (self.api_key or ""))
        r = self.http().post("/v1/chat/completions", content=content, headers=headers)
        return {"status": r.status_code, "completed": False, "expected": r.status_code == EXPECTED_STATUS[kind]}


# ---------------------------------------------------------------------- the server's state
def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid``: ``psutil`` where installed, else ``/proc``."""
    try:
        import psutil
    except ImportError:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process(pid).memory_info().rss


def server_gauges(server) -> dict[str, float]:
    """``/health``'s ``running``, ``queued`` and ``cancelled``, and the gauges of ``/metrics`` when it is served
    (parsed with ``prometheus_client``, where installed)."""
    health = server.get("/health")
    out = {k: float(health[k]) for k in ("running", "queued", "cancelled") if isinstance(health.get(k), (int, float))}
    try:
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            if family.type == "gauge":
                for s in family.samples:
                    labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                    out[f"metrics:{s.name}" + (f"{{{labels}}}" if labels else "")] = s.value
    except (ImportError, OSError, ValueError):
        pass  # no /metrics here (or no prometheus_client): /health alone
    return out


def settle(server, seconds: float) -> dict[str, float]:
    """The server's gauges once nothing runs or waits, or after ``seconds``."""
    deadline = time.time() + seconds
    while True:
        gauges = server_gauges(server)
        if (gauges.get("running", 0) == 0 and gauges.get("queued", 0) == 0) or time.time() > deadline:
            return gauges
        time.sleep(0.5)


# ---------------------------------------------------------------------- the run
def run(server, requests: list[dict[str, Any]], client: Client, concurrency: int) -> tuple[list[dict], dict]:
    """Send every request; the rows in sending order, and the RSS samples (start, after the first tenth, end)."""
    pid, tenth = server.proc.pid, max(1, len(requests) // 10)
    memory = {"start": rss_bytes(pid)}
    finished, lock = [0], threading.Lock()

    def one(req: dict[str, Any]) -> dict[str, Any]:
        try:
            row = client.send(req)
        except Exception as exc:  # a connection the server dropped, a body that is not JSON: a failure, not a crash
            row = {"index": req["index"], "kind": req["kind"], "latency_s": 0.0, "status": 0, "completed": False,
                   "error": f"{type(exc).__name__}: {exc}"}
        with lock:
            finished[0] += 1
            if finished[0] == tenth:
                memory["after_warmup"] = rss_bytes(pid)
        return row

    with ThreadPoolExecutor(concurrency) as pool:
        rows = list(pool.map(one, requests))
    return rows, memory


def part_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in rows if r["kind"] not in MALFORMED_KINDS]
    done = [r["latency_s"] for r in good if r.get("completed")]
    return {
        "requests": len(rows), "well_formed": len(good),
        "server_errors": sum(r["status"] >= 500 or bool(r.get("server_error")) for r in good),
        "other_failures": sum(not r.get("completed") and not r.get("hung_up") and r["status"] < 500
                              and not r.get("server_error") for r in good),
        "completed": len(done),
        "latency_p50_s": percentile(done, 0.5) if done else None,
        "latency_p95_s": percentile(done, 0.95) if done else None,
    }


def summarise(rows: list[dict[str, Any]], memory: dict[str, int], after: dict[str, float]) -> dict[str, Any]:
    tenth = max(1, len(rows) // 10)
    first, last = part_summary(rows[:tenth]), part_summary(rows[-tenth:])
    bad = [r for r in rows if r["kind"] in MALFORMED_KINDS]
    held = {k: v for k, v in after.items()
            if k in ("running", "queued") or (k.startswith("metrics:") and any(w in k for w in HELD_WORDS))}
    warm = memory.get("after_warmup", memory["start"])
    return {
        "first_tenth": first, "last_tenth": last, "whole_run": part_summary(rows),
        "hung_up": sum(bool(r.get("hung_up")) for r in rows),
        "cancelled_by_server": after.get("cancelled"),
        "malformed": len(bad), "malformed_as_expected": sum(bool(r.get("expected")) for r in bad),
        "malformed_server_errors": sum(r["status"] >= 500 for r in bad),
        "held_after_run": held,
        "rss_start_mb": memory["start"] / 2**20, "rss_after_warmup_mb": warm / 2**20,
        "rss_end_mb": memory["end"] / 2**20, "rss_growth": memory["end"] / warm - 1,
        "p95_last_over_first": (last["latency_p95_s"] / first["latency_p95_s"]
                                if first["latency_p95_s"] and last["latency_p95_s"] else None),
    }


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(summary: dict[str, Any], args: argparse.Namespace) -> str:
    """The markdown the run prints (and writes to ``--results-md``)."""
    f, last, whole = summary["first_tenth"], summary["last_tenth"], summary["whole_run"]
    held = summary["held_after_run"]
    held_total = sum(held.values())
    cancelled = summary["cancelled_by_server"]
    lines = [
        f"`{command(args)}`: {args.requests} requests at concurrency {args.concurrency} (`--max-concurrent "
        f"{args.max_concurrent}`), max_tokens {args.tokens}, mix {args.mix}, {args.disconnect:.0%} hung up "
        f"mid-stream, {args.malformed:.0%} malformed. Machine: {machine()}.",
        "",
        "| | first tenth | last tenth | whole run |",
        "| --- | --- | --- | --- |",
        f"| requests (well-formed) | {f['requests']} ({f['well_formed']}) | {last['requests']} "
        f"({last['well_formed']}) | {whole['requests']} ({whole['well_formed']}) |",
        f"| 5xx on well-formed requests | {f['server_errors']} | {last['server_errors']} | {whole['server_errors']} |",
        f"| other failures of well-formed requests (4xx, no summary, connection lost) | {f['other_failures']} "
        f"| {last['other_failures']} | {whole['other_failures']} |",
        f"| latency p50 / p95, s (completed) | {_s(f['latency_p50_s'])} / {_s(f['latency_p95_s'])} "
        f"| {_s(last['latency_p50_s'])} / {_s(last['latency_p95_s'])} "
        f"| {_s(whole['latency_p50_s'])} / {_s(whole['latency_p95_s'])} |",
        f"| server RSS, MiB | {summary['rss_after_warmup_mb']:.0f} (after it) | {summary['rss_end_mb']:.0f} (at the "
        f"end) | {summary['rss_start_mb']:.0f} at the start |",
        "",
        f"- 5xx on well-formed requests: {whole['server_errors']} (goal 0)",
        f"- slots and queue entries held after the run: {held_total:g} "
        f"({', '.join(f'{k} {v:g}' for k, v in held.items())}; goal 0)",
        f"- RSS growth from the end of the warm-up (first tenth) to the end: {summary['rss_growth']:+.1%} "
        "(goal at most +5%)",
        f"- p95 latency, last tenth over first: {_s(summary['p95_last_over_first'])}x (goal at most 1.2x)",
        f"- clients that hung up mid-stream: {summary['hung_up']}; streams the server counted cancelled: "
        f"{'-' if cancelled is None else f'{cancelled:g}'}",
        f"- malformed requests answered with the expected 4xx: {summary['malformed_as_expected']} of "
        f"{summary['malformed']} ({summary['malformed_server_errors']} got 5xx)",
    ]
    return "\n".join(lines)


def command(args: argparse.Namespace) -> str:
    parts = ["python -m benchmarks.serve_soak"]
    if args.smoke:
        parts.append("--smoke")
    parts += ["--model", Path(args.model).name if os.path.isdir(args.model) else args.model,
              "--requests", str(args.requests), "--concurrency", str(args.concurrency), "--tokens", str(args.tokens)]
    if args.api_key:
        parts += ["--api-key", "KEY"]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="what syncheck serve --model takes")
    ap.add_argument("--requests", type=int, default=None, help="requests in all (default 1000; --smoke: 30)")
    ap.add_argument("--concurrency", type=int, default=8, help="client threads sending at once")
    ap.add_argument("--max-concurrent", type=int, default=4,
                    help="the server's --max-concurrent (the rest of the clients' requests wait in its queue)")
    ap.add_argument("--tokens", type=int, default=None, help="max_tokens of each answer (default 16; --smoke: 8)")
    ap.add_argument("--mix", default=DEFAULT_MIX, help="shares of the well-formed kinds")
    ap.add_argument("--disconnect", type=float, default=0.10, help="share of clients that hang up mid-stream")
    ap.add_argument("--malformed", type=float, default=0.05, help="share of malformed requests")
    ap.add_argument("--api-key", default=None,
                    help="start the server with --api-key KEY; requests send it, and some send a wrong one")
    ap.add_argument("--settle", type=float, default=30, help="seconds to wait for the server to go idle after the run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="a few dozen requests (CI)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="also write every request's row and the summary to this JSON file")
    ap.add_argument("--results-md", default=None, help="also write the report into this markdown file's --title "
                                                       "section")
    ap.add_argument("--title", default="Soak: syncheck serve over a long run", help="section heading in --results-md")
    args = ap.parse_args(argv)
    args.requests = args.requests or (30 if args.smoke else 1000)
    args.tokens = args.tokens or (8 if args.smoke else 16)
    try:
        requests = plan(args.requests, parse_mix(args.mix), args.disconnect, args.malformed, args.api_key, args.seed)
    except ValueError as exc:
        ap.error(str(exc))

    from syncheck.serve.process import ServerProcess

    server_args = ["--model-id", "soak", "--max-concurrent", str(args.max_concurrent), "--max-queue", "64",
                   *(["--device", args.device] if args.device else []), *(["--api-key", args.api_key] if args.api_key
                                                                          else [])]
    with tempfile.TemporaryDirectory(prefix="syncheck-soak-") as tmp:
        server = ServerProcess(args.model, *server_args, log=Path(tmp) / "server.log",
                               env={"PYTHONWARNINGS": "ignore"})
        try:
            client = Client(server.url, "soak", args.tokens, args.api_key)
            t0 = time.perf_counter()
            rows, memory = run(server, requests, client, args.concurrency)
            wall = time.perf_counter() - t0
            after = settle(server, args.settle)
            memory["end"] = rss_bytes(server.proc.pid)
        finally:
            server.stop()
    summary = {**summarise(rows, memory, after), "wall_s": wall}
    text = report(summary, args)
    print(text, flush=True)
    if args.out:
        stamp = run_stamp({**vars(args), "api_key": "KEY" if args.api_key else None})  # never the key itself
        Path(args.out).write_text(json.dumps({"run": stamp, "summary": summary, "rows": rows}, indent=1))
    if args.results_md:
        from benchmarks.results_md import measured_line, write_section

        write_section(Path(args.results_md), f"## {args.title}", f"{measured_line()}\n\n{text}")
    return summary


if __name__ == "__main__":
    main()
