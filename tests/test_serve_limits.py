"""Limits before work: a body over the limit is refused before it is read (a real server, raw sockets), an offline
scoring batch takes turns no larger than a live one, FOD's options are capped by the server's settings, and the Ray
ingress's /health and /metrics answer from a background poll."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from conftest import DOCS, Server  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from syncheck.serve.protocol import MAX_BODY_BYTES  # noqa: E402

MIB = 1024 * 1024


def raw_socket(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    sock.settimeout(20)  # an answer that does not come within 20 s: the server is waiting for the body
    return sock


def head(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def send_quietly(sock: socket.socket, data: bytes) -> int:
    """Send what the server takes before it closes the connection; the bytes sent."""
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:sent + MIB])
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


def response_of(sock: socket.socket) -> tuple[int, dict]:
    """The status and JSON body of the response on ``sock`` (a timeout if none comes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    header, _, body = data.partition(b"\r\n\r\n")
    status = int(header.split(b" ", 2)[1])
    length = int(next(line.split(b":", 1)[1] for line in header.split(b"\r\n") if line.lower().startswith(
        b"content-length:")))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, json.loads(body[:length])


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_declared_64_mib_body_sent_slowly_gets_413_before_it_arrives(server):
    with raw_socket(server) as sock:
        sock.sendall(head("/v1/chat/completions", {"Content-Length": str(64 * MIB)}) + b'{"model": ')
        status, body = response_of(sock)  # only the first bytes of the body were sent
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert f"the limit is {MAX_BODY_BYTES}" in body["error"]["message"]


def test_a_chunked_body_is_refused_as_it_passes_the_limit(server):
    with raw_socket(server) as sock:
        sock.sendall(head("/v1/syncheck/score", {"Transfer-Encoding": "chunked"}))
        chunk = b"%x\r\n%s\r\n" % (MIB, b" " * MIB)
        send_quietly(sock, chunk * (MAX_BODY_BYTES // MIB + 1))  # past the limit, and no closing chunk
        status, body = response_of(sock)
    assert status == 413 and "more than" in body["error"]["message"]


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the server's memory from /proc")
def test_a_64_mib_body_sent_whole_gets_413_and_the_server_holds_none_of_it(server):
    before = rss(server.proc.pid)
    with raw_socket(server) as sock:
        sock.sendall(head("/v1/chat/completions", {"Content-Length": str(64 * MIB)}))
        send_quietly(sock, b" " * (64 * MIB))
        status, _ = response_of(sock)
    assert status == 413
    assert rss(server.proc.pid) - before < 32 * MIB
    assert server.get("/health")["status"] == "ok"


# ---------------------------------------------------------------------- offline scoring in turns
def test_a_score_batch_takes_a_forward_per_turn_beside_a_live_stream(tiny_tokenizer):
    """Forced order, not timing: the model thread runs a monitor stream and a 6-record score request together; every
    forward of the scoring is followed by a round of the stream's before the next, while the stream runs. (A model
    of its own: one that records lookback, as the session's tiny model may by now, is scored in one turn.)"""
    from conftest import make_model

    from syncheck.model.attention import lookback_enabled
    from syncheck.model.models import load_model
    from syncheck.scorer import Scorer
    from syncheck.serve.chat import ChatService
    from syncheck.serve.config import ServerConfig
    from syncheck.serve.protocol import ChatRequest

    tiny_lm = load_model(make_model(len(tiny_tokenizer)), tiny_tokenizer, name="tiny-llama")
    assert not lookback_enabled(tiny_lm.model)
    service = ChatService(Scorer(tiny_lm, aggregator=None), ServerConfig(model_id="tiny"))
    scheduler, log, stepping = service.scheduler, [], [False]
    step = scheduler.batch_step

    def logged_step(values):
        stepping[0] = True
        try:
            step(values)
        finally:
            stepping[0] = False
        log.append("round")

    scheduler.batch_step = logged_step
    hook = tiny_lm.model.register_forward_pre_hook(lambda *_: None if stepping[0] else log.append("score"))
    records = {"records": [{"id": i, "context": DOCS, "response": "It was completed in 1889. It is tall."}
                           for i in range(6)]}
    req = ChatRequest(model="tiny", messages=[{"role": "user", "content": "When was it completed?"}],
                      documents=DOCS, stream=True, max_tokens=120)

    async def both():
        reply = await service.chat(req)  # streaming: admitted, and its first turn taken
        events = reply.events
        first = await events.__anext__()
        scored = await service.score(records)
        log.append("scored")
        async for _ in events:  # the rest of the stream
            pass
        return first, scored

    scheduler.start_thread()
    try:
        first, scored = asyncio.run(both())
    finally:
        hook.remove()
        scheduler.stop()
    assert first["choices"][0]["delta"]["role"] == "assistant"
    assert [r["id"] for r in scored["results"]] == list(range(6)) and all(r["error"] is None
                                                                         for r in scored["results"])
    during = log[:log.index("scored")]
    while_streaming = during[:len(during) - during[::-1].index("round")]  # up to the stream's last round
    assert "score, score" not in ", ".join(while_streaming), during  # never two without a round between
    assert during.count("score") >= 12, during  # a with-context and a without-context forward per record


def test_a_background_task_takes_at_most_its_share_while_others_run():
    """Forced order on a clock the tasks move: a foreground task's turn takes 1 s, a background task's 3 s; with a
    share of 0.25 the background may take a third of the foreground's seconds, so it gets one turn per 9 rounds
    (overdrawing, then paying it back), and every turn once it is alone."""
    from syncheck.serve.scheduler import Scheduler

    now, log = [0.0], []

    def task(name, seconds, turns):
        for _ in range(turns):
            now[0] += seconds
            log.append(name)
            yield None

    scheduler = Scheduler(max_concurrent=4, background_share=0.25, clock=lambda: now[0])

    async def run():
        scheduler.submit(lambda job: task("live", 1.0, 90))
        scheduler.submit(lambda job: task("batch", 3.0, 20), background=True)
        scheduler.start_thread()
        deadline = time.monotonic() + 10
        while len(log) < 110 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        scheduler.stop()

    asyncio.run(run())
    assert len(log) == 110
    last_live = len(log) - log[::-1].index("live")
    shared = log[:last_live]
    batch_seconds, live_seconds = 3 * shared.count("batch"), shared.count("live")
    assert batch_seconds <= live_seconds * 0.25 / 0.75 + 3  # within its share, give or take one turn
    assert shared.count("batch") >= 9  # and it is not starved
    assert log[last_live:] == ["batch"] * (20 - shared.count("batch"))  # alone: every round is its own
    with pytest.raises(ValueError, match="background_share"):
        Scheduler(background_share=1.0)


# ---------------------------------------------------------------------- FOD's caps
def test_fod_options_are_capped_by_the_servers_settings(tiny_lm):
    from syncheck.scorer import Scorer
    from syncheck.serve.app import create_app

    scorer = Scorer(tiny_lm, aggregator=None)
    app = create_app(scorer, model_id="tiny", model_thread=False, num_samples_cap=3, num_beams_cap=2,
                     max_sentences_cap=4)
    client = TestClient(app, base_url="http://127.0.0.1:8000")
    base = {"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS, "max_tokens": 2}
    for field, over in (("num_samples", 4), ("num_beams", 3), ("max_sentences", 5)):
        within = {"num_samples": 1, "num_beams": 1, "max_sentences": 1}
        got = client.post("/v1/chat/completions", json={**base, "syncheck": {"method": "fod", **within, field: over}})
        assert got.status_code == 422, got.text
        error = got.json()["error"]
        assert error["param"] == f"syncheck.{field}" and error["code"] == "above_server_limit"
        assert f"--{field.replace('_', '-')}-cap" in error["message"] and f"at most {over - 1}" in error["message"]
    from syncheck.serve.chat import check_caps
    from syncheck.serve.config import ServerConfig
    from syncheck.serve.protocol import SyncheckOptions

    check_caps(SyncheckOptions(num_samples=3, num_beams=2, max_sentences=4), app.state.config)  # at the caps: fine
    defaults = ServerConfig()
    assert (defaults.num_samples_cap, defaults.num_beams_cap, defaults.max_sentences_cap) == (16, 4, 32)
    check_caps(SyncheckOptions(), defaults)  # FOD's defaults are within the default caps


# ---------------------------------------------------------------------- the Ray ingress's poll
def test_the_ray_ingress_health_answers_from_its_poll_without_calling_a_replica():
    """However often /health is asked, it calls no replica itself: it reads the last poll, and at most one poll per
    interval starts, in the background; a busy deployment's replicas keep their last state."""
    from syncheck.serve.ray_poll import ReplicaPoll

    calls, busy = [], asyncio.Event()

    async def live():
        return ["r1", "r2"]

    async def ask(replica):
        calls.append(replica)
        if busy.is_set():  # every replica full: a call would wait behind the queued requests
            await asyncio.sleep(3600)
        return {"replica": replica, "health": {"status": "ok", "replica": replica, "running": 1, "queued": 2,
                                               "cancelled": 0}, "metrics": f"# {replica}\n"}

    async def scenario():
        poll = ReplicaPoll(live, ask, interval=0.2, timeout=0.05)
        body, ready = poll.health_body("tiny", 2)
        assert not ready and body["status"] == "starting" and body["polled_s_ago"] is None  # before the first poll
        poll.refresh()
        assert calls == []  # started, not awaited
        await asyncio.sleep(0.05)
        body, ready = poll.health_body("tiny", 2)
        assert ready and body["running"] == 2 and body["queued"] == 4 and set(body["replicas"]) == {"r1", "r2"}
        assert calls == ["r1", "r2"] and poll.health_body("tiny", 3)[1] is False  # fewer replicas than asked for
        for _ in range(100):  # asked often: no new poll within the interval
            poll.refresh()
            poll.health_body("tiny", 2)
        await asyncio.sleep(0.01)
        assert calls == ["r1", "r2"]
        busy.set()
        await asyncio.sleep(0.2)
        poll.refresh()  # stale: one poll starts; the replicas do not answer in time
        for _ in range(100):
            poll.refresh()
            body, ready = poll.health_body("tiny", 2)
            assert ready  # answered from the last poll while the new one waits
        await asyncio.sleep(0.2)
        assert calls == ["r1", "r2", "r1", "r2"] and poll.metrics == {"r1": "# r1\n", "r2": "# r2\n"}
        await poll.stop()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- the fair-turns benchmark
def test_the_fair_turns_benchmark_runs(tiny_dir, capsys):
    """``benchmarks.serve_fair_turns --smoke``: its phases run against a real server (the figure needs a quiet
    machine and SmolLM2; see the module)."""
    from benchmarks.serve_fair_turns import main, score_records

    records = score_records(256)
    assert len({r["id"] for r in records}) == 256 and {len(r["context"]) for r in records} == {3}
    summary = main(["--smoke", "--model", str(tiny_dir), "--tokens", "48"])
    (round_,) = summary["rounds"]
    for phase in ("alone", "beside"):
        assert round_[phase]["token_gaps"] > 0 and round_[phase]["token_gap_p95_s"] > 0
    assert summary["overlapped"] in (0, 1) and summary["goal"] == 1.5
    out = capsys.readouterr().out
    assert "| p95 inter-sentence gap, s |" in out and "goal: the p95 inter-sentence gap" in out
