"""``syncheck serve`` run by an operator: API keys, Prometheus metrics and JSON request logs, on one server of the
tiny model started with two keys and ``--log-format json``."""

from __future__ import annotations

import json
import time

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from conftest import DOCS, Server  # noqa: E402
from test_serve import ask, read_stream  # noqa: E402

KEYS = ("sk-first-key", "sk-second-key")


@pytest.fixture(scope="module")
def keyed(serve_dir, tmp_path_factory):
    """The tiny model served with two API keys (the second from ``--api-key`` twice) and JSON request logs."""
    srv = Server(str(serve_dir), "tiny", tmp_path_factory.mktemp("serve-keys"), "--api-key", KEYS[1],
                 "--log-format", "json", api_key=KEYS[0])
    yield srv
    srv.stop()


def chat_body(**kw) -> bytes:
    return json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "When?"}], "documents": DOCS,
                       "max_tokens": 2, **kw}).encode()


# ---------------------------------------------------------------------------------------------------- API keys
def test_a_v1_request_needs_one_of_the_keys_and_health_stays_open(keyed):
    status, err, headers = keyed.post("/v1/chat/completions", chat_body(), headers={"Authorization": ""})
    assert status == 401 and err["error"]["code"] == "invalid_api_key" and "Bearer" in err["error"]["message"]
    assert set(err["error"]) == {"message", "type", "param", "code"} and headers["WWW-Authenticate"] == "Bearer"
    status, err, _ = keyed.post("/v1/chat/completions", chat_body(), headers={"Authorization": "Bearer sk-wrong"})
    assert status == 401 and "not accepted" in err["error"]["message"]
    for key in KEYS:
        status, body, _ = keyed.post("/v1/chat/completions", chat_body(), headers={"Authorization": f"Bearer {key}"})
        assert status == 200 and body["choices"][0]["message"]["content"]
    status, _, _ = keyed.post("/v1/syncheck/score", b"{}", headers={"Authorization": "Bearer sk-wrong"})
    assert status == 401
    assert keyed.get("/health")["status"] == "ok"  # open, as in vLLM
    assert keyed.get("/health", headers={"Authorization": "Bearer sk-wrong"})["status"] == "ok"


def test_the_openai_client_sends_its_api_key_and_raises_on_a_wrong_one(keyed):
    with pytest.raises(openai.AuthenticationError, match="not accepted"):
        keyed.client(api_key="sk-wrong").chat.completions.create(**ask("When?", max_tokens=2))
    assert keyed.client(api_key=KEYS[1]).models.list().data[0].id == "tiny"
    assert keyed.client().chat.completions.create(**ask("When?", max_tokens=2)).choices[0].message.content


def test_the_framework_models_pass_their_api_key(keyed):
    langchain = pytest.importorskip("syncheck.integrations.langchain")
    chat = langchain.ChatSyncheck(base_url=keyed.base_url, model="tiny", documents=DOCS, max_tokens=4,
                                  max_retries=0, api_key=KEYS[0])
    assert chat.invoke("When?").response_metadata["syncheck"]["sentences"] is not None
    with pytest.raises(openai.AuthenticationError):
        langchain.ChatSyncheck(base_url=keyed.base_url, model="tiny", documents=DOCS, max_tokens=4, max_retries=0,
                               api_key="sk-wrong").invoke("When?")
    llamaindex = pytest.importorskip("syncheck.integrations.llamaindex")
    from llama_index.core.llms import ChatMessage

    llm = llamaindex.SyncheckLLM(api_base=keyed.base_url, model="tiny", documents=DOCS, max_tokens=4, max_retries=0,
                                 api_key=KEYS[1])
    assert "syncheck" in llm.chat([ChatMessage(role="user", content="When?")]).additional_kwargs


def test_keys_never_reach_the_log_or_the_settings_repr(keyed):
    from syncheck.serve.config import ServerConfig

    keyed.client().chat.completions.create(**ask("When?", max_tokens=2))
    keyed.post("/v1/chat/completions", chat_body(), headers={"Authorization": "Bearer sk-wrong"})
    log = keyed._tail() + open(keyed._log_path).read()
    assert not any(key in log for key in (*KEYS, "sk-wrong"))
    assert "sk-" not in repr(ServerConfig(model="m", api_keys=KEYS))


def test_keys_come_from_the_option_or_the_variable_and_are_compared_whole(monkeypatch):
    import importlib

    from click.testing import CliRunner

    from syncheck.serve.auth import ApiKeys
    from syncheck.serve.config import ServerConfig, ServerConfigError

    cli = importlib.import_module("syncheck.cli.serve")
    calls = []
    monkeypatch.setattr(cli, "run_ray_server", lambda host, port, config: calls.append(config))
    result = CliRunner().invoke(cli.serve, ["--model", "m", "--replicas", "2"], env={"SYNCHECK_API_KEY": "ka  kb"})
    assert result.exit_code == 0 and calls[-1].api_keys == ("ka", "kb")
    assert CliRunner().invoke(cli.serve, ["--model", "m", "--ray", "--api-key", "kc"]).exit_code == 0
    assert calls[-1].api_keys == ("kc",)
    keys = ApiKeys(["ka", "kb"])
    assert keys.accepts("kb") and not keys.accepts("k") and not keys.accepts("kbb") and not ApiKeys()
    with pytest.raises(ServerConfigError, match="one word"):
        ServerConfig(api_keys=(" ka",))


# ---------------------------------------------------------------------------------------------------- metrics
def scrape(server) -> dict:
    """``/metrics`` parsed by ``prometheus_client``'s own parser: value by (sample name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    time.sleep(0.3)  # a request's record is counted as its response ends, just after the client has read it
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(server.get("/metrics")) for s in family.samples}


def test_metrics_count_a_known_sequence_of_requests(keyed):
    before = scrape(keyed)
    client = keyed.client()
    full = client.chat.completions.create(**ask("When was it completed?", max_tokens=12))
    _, streamed, _, _ = read_stream(client.chat.completions.create(
        **ask("How tall is it?", max_tokens=12, stream=True, stream_options={"include_usage": True})))
    assert keyed.post("/v1/chat/completions", chat_body(), headers={"Authorization": "Bearer sk-x"})[0] == 401
    assert keyed.post("/v1/chat/completions", chat_body(model="gpt-4o"))[0] == 404
    assert keyed.post("/v1/chat/completions", json.dumps({"model": "tiny"}).encode())[0] == 422
    after = scrape(keyed)

    def delta(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    sentences = full.model_extra["syncheck"]["sentences"] + streamed
    route = "/v1/chat/completions"
    assert delta("syncheck_requests_total", route=route, status="200") == 2
    assert [delta("syncheck_requests_total", route=route, status=s) for s in ("401", "404", "422")] == [1, 1, 1]
    assert delta("syncheck_request_latency_seconds_count", route=route) == 5
    assert delta("syncheck_errors_total", kind="invalid_api_key") == 1
    assert delta("syncheck_errors_total", kind="model_not_found") == 1
    assert delta("syncheck_generated_tokens_total") == full.usage.completion_tokens + 12
    assert delta("syncheck_sentences_scored_total") == len(sentences) > 0
    assert delta("syncheck_sentence_score_count") == len(sentences)
    assert delta("syncheck_sentences_flagged_total") == sum(s["flagged"] for s in sentences)
    assert delta("syncheck_time_to_first_token_seconds_count") == 2
    assert delta("syncheck_fod_backtracks_total") == 0 and delta("syncheck_abstentions_total") == 0
    assert after[("syncheck_requests_running", ())] == 0 and after[("syncheck_requests_waiting", ())] == 0
    assert after[("syncheck_free_slots", ())] == 4 + 16
    assert after[("process_resident_memory_bytes", ())] > 0


def test_a_client_that_leaves_mid_stream_is_counted_as_an_error(keyed):
    kind = ("syncheck_errors_total", (("kind", "client_disconnected"),))
    before = scrape(keyed).get(kind, 0.0)
    stream = keyed.client().chat.completions.create(**ask("Who built it?", max_tokens=3000, stream=True))
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.time() + 30
    while True:  # its generation stops at the next turn
        now = scrape(keyed)
        if now.get(kind, 0.0) == before + 1 and now[("syncheck_requests_running", ())] == 0:
            break
        assert time.time() < deadline, now.get(kind)


def test_every_metric_is_documented():
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families

    from syncheck.serve.metrics import HttpMetrics, ModelMetrics, exposition
    from syncheck.serve.scheduler import Scheduler

    registry = __import__("prometheus_client").CollectorRegistry()
    HttpMetrics(registry)
    ModelMetrics(registry, Scheduler())
    docs = (Path(__file__).resolve().parents[1] / "docs" / "serving.md").read_text()
    names = [f.name for f in text_string_to_metric_families(exposition(registry).decode())
             if not f.name.endswith("_created")]  # each counter's and histogram's start time
    assert names and [n for n in names if n.startswith("syncheck_") and f"`{n}" not in docs] == []


# ---------------------------------------------------------------------------------------------------- logs
def request_lines(server) -> list[dict]:
    time.sleep(0.3)
    lines = [json.loads(line) for line in open(server._log_path) if line.startswith("{")]
    return [line for line in lines if line["logger"] == "syncheck.serve.requests"]


def test_json_logs_have_one_line_per_request_with_its_id(keyed):
    client = keyed.client()
    raw = client.chat.completions.with_raw_response.create(**ask("When was it completed?", max_tokens=12),
                                                           extra_headers={"X-Request-Id": "req-given-1"})
    reply = raw.parse()
    assert raw.headers["x-request-id"] == "req-given-1"
    status, _, headers = keyed.post("/v1/chat/completions", chat_body(model="gpt-4o"))
    made_up = headers["X-Request-Id"]
    assert status == 404 and len(made_up) == 32
    lines = {line["request_id"]: line for line in request_lines(keyed)}
    given = lines["req-given-1"]
    sentences = reply.model_extra["syncheck"]["sentences"]
    assert given["route"] == "/v1/chat/completions" and given["status"] == 200 and given["latency_s"] > 0
    assert given["tokens"] == reply.usage.completion_tokens and given["sentences"] == len(sentences)
    assert given["flagged"] == sum(s["flagged"] for s in sentences) and given["decoder"] == "monitor"
    assert lines[made_up]["status"] == 404 and lines[made_up]["error"] == "model_not_found"
    assert {"ts", "level", "method", "error"} <= set(given)
