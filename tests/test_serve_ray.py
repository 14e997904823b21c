"""``syncheck serve`` as Ray Serve replicas (syncheck.serve.ray_app): two replicas of the tiny model on a local Ray
cluster of 2 CPUs, driven by the official ``openai`` client and raw HTTP, beside the plain server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.serve")

from conftest import DOCS  # noqa: E402  (and the plain server: conftest's server and serve_dir fixtures)
from test_serve import LONG, QUESTIONS, ask, read_stream  # noqa: E402

from syncheck.serve.process import ServerProcess, free_port  # noqa: E402

OTHER_DOCS = ["The Statue of Liberty was dedicated in 1886.", "It stands on Liberty Island."]


class RayServer:
    """The Ray Serve application on a free loopback port (``url``, ``get``, ``post``, ``client`` as conftest's
    ``Server``)."""

    def __init__(self, model: str, **settings) -> None:
        from ray import serve

        from syncheck.serve.config import ServerConfig
        from syncheck.serve.ray_app import build_app

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        serve.start(http_options={"host": "127.0.0.1", "port": self.port})
        # max_concurrent 1 and max_queue 1: a replica admits 2 requests, so the busy and fault tests fill it quickly
        # the API key is the one the tests' openai clients send
        self.api_key = "none"
        self.config = ServerConfig(model=model, model_id="tiny", max_concurrent=1, max_queue=1, replicas=2,
                                   replica_cpus=0.5, api_keys=(self.api_key,), **settings)
        serve.run(build_app(self.config), name="syncheck", route_prefix="/")
        deadline = time.time() + 120
        while not self.ready():  # every replica can take requests: its documents' requests reach it
            assert time.time() < deadline, "the Ray deployment did not report ready within 120 s"
            time.sleep(0.2)

    def ready(self) -> bool:
        try:
            return self.get("/health")["ready"]
        except OSError:  # 503 while starting
            return False

    get, post, headers = ServerProcess.get, ServerProcess.post, ServerProcess.headers  # they read ``url``, ``api_key``

    def client(self):
        return openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0, timeout=120)

    @staticmethod
    def stop() -> None:
        from ray import serve

        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_server(serve_dir, tmp_path_factory):
    # the replicas' workers inherit the driver's environment; it is restored afterwards, so the tests that follow
    # read their own cache (the real one, with the converted SmolLM2) and not this one
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("SYNCHECK_CACHE", str(tmp_path_factory.mktemp("ray-serve-cache")))
        for attempt in range(3):
            try:
                srv = RayServer(str(serve_dir))
                break
            except ray.exceptions.RayError:  # a machine with busy cores can lose Ray's proxy actor as it starts: again
                RayServer.stop()
                if attempt == 2:
                    raise
        yield srv
        srv.stop()


def test_health_is_ready_once_the_router_sees_every_replica(ray_server):
    health = ray_server.get("/health")
    assert health["status"] == "ok" and health["ready"] and health["starting"] == []
    assert set(health["replicas"]) == set(live_replicas()) and len(health["replicas"]) == 2
    answered = {r: h for r, h in health["replicas"].items() if h}  # a replica slow to answer (5 s) shows None
    assert answered and all(h["replica"] == r and h["status"] == "ok" for r, h in answered.items()), health


def test_the_router_sends_a_replicas_own_requests_to_it_and_names_the_preferred_one():
    import asyncio
    from types import SimpleNamespace

    from syncheck.serve.ray_router import DocumentAffinityRouter, replica_weight

    replicas = [SimpleNamespace(replica_id=SimpleNamespace(unique_id=r)) for r in ("r1", "r2", "r3")]
    full: set = set()  # what the router's queue-length cache knows to be full
    router = SimpleNamespace(select_available_replicas=lambda rs: [r for r in rs if r.replica_id.unique_id not in full])

    def ranks(**kwargs):
        pending = SimpleNamespace(kwargs=kwargs, routing_context=SimpleNamespace(should_backoff=False))
        out = asyncio.run(DocumentAffinityRouter.choose_replicas(router, replicas, pending))
        return [[r.replica_id.unique_id for r in rank] for rank in out], pending.kwargs

    assert ranks(to_replica="r2")[0] == [["r2"]]
    assert ranks(to_replica="gone")[0] == [["r1", "r2", "r3"]]  # answered by another, which names itself
    home = max(("r1", "r2", "r3"), key=lambda r: replica_weight("k", r))
    assert ranks(affinity="k") == ([[home]], {"affinity": "k", "preferred": home})  # it waits for its home ...
    full.add(home)
    (first, rest), kwargs = ranks(affinity="k")  # ... unless the home is known to be full
    assert first == [home] == [kwargs["preferred"]] and sorted(first + rest) == ["r1", "r2", "r3"]
    assert ranks()[0] == [["r1", "r2", "r3"]] and "preferred" not in ranks()[1]


def docs_ask(question: str, docs: list[str], **kw) -> dict:
    return {**ask(question, **kw), "extra_body": {"documents": docs}}


def test_the_plain_server_does_not_import_ray():
    code = ("import sys; import syncheck.serve.app, syncheck.cli.serve; from syncheck.cli import main; "
            "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_streams_through_ray_equal_the_plain_server_and_name_their_replica(ray_server, server):
    req = ask(QUESTIONS[0], max_tokens=24, stream=True)
    text, sentences, summary, kinds = read_stream(ray_server.client().chat.completions.create(**req))
    plain = server.client().chat.completions.create(**req)
    plain_text, plain_sentences, plain_summary, plain_kinds = read_stream(plain)
    assert text and sentences and text == plain_text and kinds == plain_kinds
    assert [s["text"] for s in sentences] == [s["text"] for s in plain_sentences]
    assert [s["score"] for s in sentences] == pytest.approx([s["score"] for s in plain_sentences], abs=1e-4)
    assert summary["response_score"] == pytest.approx(plain_summary["response_score"], abs=1e-4)
    assert summary["replica"] and "replica" not in plain_summary
    full = ray_server.client().chat.completions.create(**ask(QUESTIONS[0], max_tokens=24))
    assert full.choices[0].message.content == text and full.model_extra["syncheck"]["replica"] == summary["replica"]


def test_the_same_documents_reach_the_same_replica_and_other_documents_spread(ray_server):
    client = ray_server.client()

    def replica(docs, q):
        return client.chat.completions.create(**docs_ask(q, docs, max_tokens=2)).model_extra["syncheck"]["replica"]

    first = {replica(DOCS, q) for q in QUESTIONS[:3]}
    assert len(first) == 1
    many: set[str] = set()
    for i in range(24):  # new document sets until both replicas have taken some (all on one by chance: 1 in 2**23)
        many.add(replica([f"Document number {i} says the tower is {300 + i} metres tall."], QUESTIONS[0]))
        if len(many) == 2:
            break
    assert len(many) == 2


def test_a_request_without_the_key_gets_401_and_one_with_it_200(ray_server):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                       "max_tokens": 2}).encode()
    for auth in ("", "Bearer wrong"):
        status, err, _ = ray_server.post("/v1/chat/completions", body, headers={"Authorization": auth})
        assert status == 401 and err["error"]["code"] == "invalid_api_key"
    status, _, _ = ray_server.post("/v1/syncheck/score", b"{}", headers={"Authorization": "Bearer wrong"})
    assert status == 401
    with pytest.raises(openai.AuthenticationError):
        ray_server.client().with_options(api_key="wrong").models.list()
    status, reply, _ = ray_server.post("/v1/chat/completions", body)
    assert status == 200 and reply["choices"][0]["message"]["content"]
    assert ray_server.get("/health", headers={"Authorization": ""})["status"] == "ok"


def test_the_ingress_is_safe_by_default(ray_server):
    """The plain server's browser checks, body limit and closed /docs, on the Ray ingress."""
    import urllib.error
    import urllib.request

    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                       "max_tokens": 2}).encode()
    for headers, status in (({"Content-Type": "text/plain"}, 415), ({"Origin": "http://evil.example"}, 403),
                            ({"Host": "evil.example"}, 403), ({"Content-Length": str(64 * 2**20)}, 413)):
        got, err, _ = ray_server.post("/v1/chat/completions", body if "Content-Length" not in headers else b"{}",
                                      headers=headers)
        assert got == status, (headers, got, err)
    for path in ("/docs", "/openapi.json"):
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(ray_server.url + path, timeout=10)
        assert missing.value.code == 404


def test_errors_and_fod_mode_are_the_plain_servers(ray_server):
    status, err, _ = ray_server.post("/v1/chat/completions", json.dumps(
        {"model": "tiny", "messages": [{"role": "user", "content": "Q?"}]}).encode())
    assert status == 400 and err["error"]["param"] == "documents"
    with pytest.raises(openai.NotFoundError, match="not served here"):
        ray_server.client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Q?"}],
                                                    extra_body={"documents": DOCS})
    fod = ray_server.client().chat.completions.create(**ask(QUESTIONS[1], max_tokens=8, extra_body={
        "documents": DOCS, "syncheck": {"method": "fod", "tau1": 0.0, "final_check": False, "max_sentences": 2}}))
    assert fod.model_extra["syncheck"]["method"] == "fod" and fod.model_extra["syncheck"]["replica"]
    assert ray_server.get("/v1/models")["data"][0]["id"] == "tiny"


def test_metrics_gather_every_replica_labelled_by_replica(ray_server):
    from prometheus_client.parser import text_string_to_metric_families

    client = ray_server.client()
    replicas = {client.chat.completions.create(**docs_ask(QUESTIONS[0], [f"Metric document {i}."], max_tokens=2))
                .model_extra["syncheck"]["replica"] for i in range(6)}
    deadline = time.time() + 30
    while True:  # the replicas' metrics are those of the ingress's last poll (one a second)
        samples = [s for f in text_string_to_metric_families(ray_server.get("/metrics")) for s in f.samples]
        served = {s.labels["replica"]: s.value for s in samples if s.name == "syncheck_generated_tokens_total"}
        if sum(served.values()) >= 12 or time.time() > deadline:
            break
        time.sleep(0.3)
    assert set(served) == set(live_replicas()) and replicas <= set(served) and sum(served.values()) >= 12
    assert any(s.name == "syncheck_requests_total" and s.labels == {"route": "/v1/chat/completions", "status": "200"}
               and s.value >= 6 for s in samples)
    assert {s.labels["replica"] for s in samples if s.name == "syncheck_free_slots"} == set(served)
    assert any(s.name == "syncheck_router_spills_total" for s in samples)


class Holder(threading.Thread):
    """A long streamed completion held open on a thread of its own (admitted or queued) until ``close()``."""

    def __init__(self, server: RayServer, docs: list[str]) -> None:
        super().__init__(daemon=True)
        self.server, self.docs, self.closing, self.streaming = server, docs, threading.Event(), threading.Event()
        self.error: Exception | None = None
        self.start()

    def run(self) -> None:
        try:
            with self.server.client().chat.completions.create(
                    **docs_ask(QUESTIONS[2], self.docs, max_tokens=LONG, stream=True)) as stream:
                for _ in stream:
                    self.streaming.set()
                    if self.closing.is_set():
                        break
        except openai.APIError as exc:
            self.error = exc

    def close(self) -> None:
        self.closing.set()


def test_a_full_deployment_answers_429_with_retry_after(ray_server):
    """Each replica admits 2 requests (1 generating, 1 queued) and 1 more may wait at the router: the 6th gets 429.
    (One at a time: Ray Serve counts simultaneous arrivals as waiting until each reaches its replica.)"""
    holders = []
    try:
        for i in range(5):
            holders.append(Holder(ray_server, [f"Filler document {i}."]))
            time.sleep(0.5)
        deadline = time.time() + 60
        while sum(h.streaming.is_set() for h in holders) < 2 and time.time() < deadline:  # both replicas generate
            time.sleep(0.1)
        assert [h.error for h in holders] == [None] * 5
        body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                           "max_tokens": 2}).encode()
        deadline, status = time.time() + 30, None
        while time.time() < deadline:
            status, err, headers = ray_server.post("/v1/chat/completions", body)
            if status == 429:
                break
            time.sleep(0.2)
        assert status == 429 and int(headers["Retry-After"]) >= 1 and "--replicas" in err["error"]["message"]
        # every replica full and the router's queue too: /health and /metrics still answer, from the ingress's own
        # count and the last poll
        health = ray_server.get("/health")
        assert health["ready"] and health["polled_s_ago"] is not None and health["in_flight"] >= 4
        assert "syncheck_free_slots" in ray_server.get("/metrics")
    finally:
        for holder in holders:
            holder.close()
    for holder in holders:
        holder.join(30)
    assert ray_server.client().chat.completions.create(**ask(QUESTIONS[0], max_tokens=2)).choices[0].message.content


def live_replicas() -> dict[str, str]:
    """The model replicas' live actors: actor name by replica id (the ``replica`` a reply names)."""
    return {a["name"].rsplit("#", 1)[1]: a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == "serve" and "#syncheck-replica#" in a["name"]}


def kill_replica(replica: str) -> None:
    ray.kill(ray.get_actor(live_replicas()[replica], namespace="serve"), no_restart=True)


def running_replicas() -> int:
    """The model replicas Ray Serve reports running."""
    from ray import serve

    deployment = serve.status().applications["syncheck"].deployments["syncheck-replica"]
    return deployment.replica_states.get("RUNNING", 0)


def test_ray_serve_replaces_a_killed_replica(ray_server):
    client = ray_server.client()
    replica = client.chat.completions.create(**docs_ask(QUESTIONS[0], DOCS, max_tokens=1)).model_extra["syncheck"][
        "replica"]
    assert running_replicas() == 2 and len(live_replicas()) == 2
    kill_replica(replica)
    deadline = time.time() + 60
    while not (replica not in live_replicas() and len(live_replicas()) == 2 and running_replicas() == 2):
        assert time.time() < deadline, f"still {running_replicas()} running replicas after 60 s"
        time.sleep(0.5)
    reply = client.chat.completions.create(**docs_ask(QUESTIONS[1], DOCS, max_tokens=2))
    assert reply.choices[0].message.content and reply.model_extra["syncheck"]["replica"] in live_replicas()


def test_a_replica_that_dies_mid_stream_ends_the_stream_with_an_error_event(ray_server):
    client = ray_server.client()
    first = client.chat.completions.create(**docs_ask(QUESTIONS[0], DOCS, max_tokens=1))
    replica = first.model_extra["syncheck"]["replica"]
    stream = client.chat.completions.create(**docs_ask(QUESTIONS[3], DOCS, max_tokens=LONG, stream=True))
    pieces = iter(stream)
    next(pieces)
    kill_replica(replica)
    with pytest.raises(openai.APIError, match="stopped"):
        for _ in pieces:
            pass
    # the next requests go to the live replica, and Ray Serve brings the count back
    assert client.chat.completions.create(**docs_ask(QUESTIONS[0], DOCS, max_tokens=2)).choices[0].message.content


def test_the_serve_command_starts_ray_serve_for_more_than_one_replica(monkeypatch):
    import importlib

    from click.testing import CliRunner

    cli = importlib.import_module("syncheck.cli.serve")  # the module (syncheck.cli exports the command by its name)

    calls = []
    monkeypatch.setattr(cli, "run_ray_server", lambda host, port, config: calls.append((host, port, config)))
    args = ["--model", "m", "--max-concurrent", "2", "--replica-cpus", "0.5"]
    assert CliRunner().invoke(cli.serve, [*args, "--replicas", "2"]).exit_code == 0
    assert CliRunner().invoke(cli.serve, [*args, "--replicas", "2", "--max-replicas", "4"]).exit_code == 0
    (_, port, fixed), (_, _, scaled) = calls
    assert port == 8000 and fixed.model == "m" and fixed.replicas == 2 and fixed.autoscaling is None
    assert (fixed.replica_cpus, fixed.replica_gpus) == (0.5, 0.0) and fixed.max_concurrent == 2
    assert scaled.autoscaling == {"min_replicas": 2, "max_replicas": 4, "target_ongoing_requests": 2.0}
    assert fixed.replica_threads is None
    assert CliRunner().invoke(cli.serve, [*args, "--replicas", "2", "--replica-threads", "2"]).exit_code == 0
    assert calls[-1][2].replica_threads == 2
    bad = CliRunner().invoke(cli.serve, [*args, "--replicas", "3", "--max-replicas", "2"])
    assert bad.exit_code == 2 and "below --replicas" in bad.output


def test_the_application_builder_reads_serve_run_arguments():
    from syncheck.serve.ray_app import build, documents_key

    app = build({"model": "m", "max_concurrent": "2", "min_replicas": "1", "max_replicas": "3", "num_cpus": "0.5",
                 "threads": "2"})
    assert app is not None
    with pytest.raises(ValueError, match="model=MODEL"):
        build({})
    assert documents_key(list(DOCS)) == documents_key(DOCS) and documents_key(DOCS) != documents_key(DOCS[:1])
    assert documents_key(None) is None and documents_key([]) is None


def test_the_load_benchmark_reports_p95_latency_and_the_share_served_by_one_replica():
    from benchmarks.serve_load import _summary

    rows = [{"ttft": 0.1, "first_sentence": 0.2, "total": t, "tokens": 4, "replica": r}
            for t, r in zip([1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "a"])]
    out = _summary(rows, wall=4.0)
    assert out["latency_p95_s"] == 4.0 and out["latency_median_s"] == 2.5 and out["same_replica_share"] == 0.75
    assert "same_replica_share" not in _summary([{**r, "replica": None} for r in rows], wall=4.0)
