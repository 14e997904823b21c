"""Safe by default: no web page of another origin can drive ``syncheck serve`` (a real server on the tiny model,
raw HTTP so every header is the test's), ``/docs`` is off, and a server open to the network says so."""

from __future__ import annotations

import http.client
import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from conftest import DOCS, Server  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from syncheck.serve.config import ServerConfig, ServerConfigError  # noqa: E402

CHAT = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "When was it completed?"}],
                   "documents": DOCS, "max_tokens": 3}).encode()


def request(server: Server, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, raw body)`` of one request sent with exactly ``headers`` (``Host`` included when given)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def generated_tokens(server: Server) -> float:
    """``syncheck_generated_tokens_total`` from ``/metrics``: the model's work so far."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(s.value for f in text_string_to_metric_families(server.get("/metrics")) for s in f.samples
               if s.name == "syncheck_generated_tokens_total")


def error_of(raw: bytes) -> dict:
    error = json.loads(raw)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"], error
    return error


def test_a_cross_site_text_plain_post_is_refused_and_runs_no_model(server):
    """The "simple" cross-site POST a page may send without asking (text/plain, its JSON as the body): refused
    with 4xx, with or without the page's Origin, and the model does not run."""
    before = generated_tokens(server)
    for headers, status in (({"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}, 403),
                            ({"Content-Type": "text/plain;charset=UTF-8"}, 415),
                            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
                            ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
                            ({}, 415)):  # a Blob without a type sends none
        got, _, raw = request(server, "POST", "/v1/chat/completions", CHAT, headers)
        assert got == status, (headers, got, raw[:300])
        error = error_of(raw)
        assert "--cors-origin" in error["message"] if status == 403 else "Content-Type: application/json" in \
            error["message"]
    got, _, raw = request(server, "POST", "/v1/syncheck/score", json.dumps(
        {"context": DOCS, "response": "It is tall."}).encode(), {"Content-Type": "text/plain"})
    assert got == 415 and error_of(raw)["code"] == "unsupported_media_type"
    assert generated_tokens(server) == before  # no model work was done for any of them


def test_a_foreign_host_is_refused_and_the_loopback_names_answer(server):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    got, _, raw = request(server, "POST", "/v1/chat/completions", CHAT,
                          {"Host": f"evil.example:{server.port}", "Content-Type": "application/json"})
    assert got == 403 and error_of(raw)["code"] == "host_not_allowed"
    assert "--allowed-host" in error_of(raw)["message"]
    got, _, _ = request(server, "GET", "/health", headers={"Host": "evil.example"})
    assert got == 403  # the open routes too: a rebound page reads nothing
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"[::1]:{server.port}", "LOCALHOST"):
        got, _, raw = request(server, "GET", "/v1/models", headers={"Host": host})
        assert got == 200, (host, raw)


def test_a_same_host_json_request_gets_200_and_no_cors_headers(server):
    for extra in ({}, {"Origin": f"http://127.0.0.1:{server.port}"}):  # the live page: same-origin
        got, headers, raw = request(server, "POST", "/v1/chat/completions", CHAT,
                                    {"Content-Type": "application/json; charset=utf-8", **extra})
        assert got == 200 and json.loads(raw)["choices"][0]["message"]["content"]
        assert not any(k.startswith("access-control-") for k in headers), headers
    # a preflight from another origin gets no CORS headers: the browser then refuses to send the request
    got, headers, _ = request(server, "OPTIONS", "/v1/chat/completions", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert got >= 400 and not any(k.startswith("access-control-") for k in headers), (got, headers)


def test_docs_redoc_and_openapi_are_off(server):
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert request(server, "GET", path)[0] == 404, path


def test_the_errors_are_counted_by_kind(server):
    from prometheus_client.parser import text_string_to_metric_families

    request(server, "POST", "/v1/chat/completions", CHAT, {"Content-Type": "text/plain"})
    errors = {s.labels["kind"]: s.value for f in text_string_to_metric_families(server.get("/metrics"))
              for s in f.samples if s.name == "syncheck_errors_total"}
    assert errors.get("unsupported_media_type", 0) >= 1


# ---------------------------------------------------------------------- the options
@pytest.fixture(scope="module")
def scorer(tiny_lm):
    from syncheck.scorer import Scorer

    return Scorer(tiny_lm, aggregator=None)


def local_client(app, host: str = "127.0.0.1") -> TestClient:
    return TestClient(app, base_url=f"http://{host}:8000")


def test_cors_origin_lets_that_origin_in_with_cors_headers_and_no_other(scorer):
    from syncheck.serve.app import create_app

    app = create_app(scorer, model_id="tiny", model_thread=False, cors_origins=("https://app.example.com",))
    client = local_client(app)
    preflight = client.options("/v1/chat/completions", headers={
        "Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    models = client.get("/v1/models", headers={"Origin": "https://app.example.com"})
    assert models.status_code == 200 and models.headers["access-control-allow-origin"] == "https://app.example.com"
    refused = client.get("/v1/models", headers={"Origin": "https://other.example.com"})
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    wrong_type = client.post("/v1/chat/completions", content=CHAT,
                             headers={"Origin": "https://app.example.com", "Content-Type": "text/plain"})
    assert wrong_type.status_code == 415 and wrong_type.headers["access-control-allow-origin"]  # readable there


def test_allowed_host_and_openapi(scorer):
    from syncheck.serve.app import create_app

    app = create_app(scorer, model_id="tiny", model_thread=False, allowed_hosts=("syncheck.example.com",),
                     openapi=True)
    assert local_client(app, "syncheck.example.com").get("/v1/models").status_code == 200
    assert local_client(app, "localhost").get("/v1/models").status_code == 200
    assert local_client(app, "example.com").get("/v1/models").status_code == 403
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert local_client(app).get(path).status_code == 200, path
    # on a public address without --allowed-host any name is answered (a proxy's, a LAN name): the key guards it
    public = create_app(scorer, model_id="tiny", model_thread=False, host="0.0.0.0", api_keys=("k",))
    assert local_client(public, "10.1.2.3").get("/health").status_code == 200
    wildcard = create_app(scorer, model_id="tiny", model_thread=False, host="0.0.0.0",
                          allowed_hosts=("*.example.com",))
    assert local_client(wildcard, "a.example.com").get("/health").status_code == 200
    assert local_client(wildcard, "example.org").get("/health").status_code == 403


def test_the_settings_are_checked_and_say_how_to_fix_them():
    assert ServerConfig().trusted_hosts == ("localhost", "127.0.0.1", "[::1]")
    assert ServerConfig(host="::1").trusted_hosts == ("localhost", "127.0.0.1", "[::1]")
    assert "127.0.0.2" in ServerConfig(host="127.0.0.2").trusted_hosts
    assert ServerConfig(host="0.0.0.0").trusted_hosts is None
    assert "[fe80::1]" in ServerConfig(host="0.0.0.0", allowed_hosts="fe80::1").trusted_hosts
    assert ServerConfig(allowed_hosts="a.example.com").allowed_hosts == ("a.example.com",)
    for bad, says in ((dict(allowed_hosts=("http://a.example.com",)), "without scheme or port"),
                      (dict(allowed_hosts=("a.example.com:8000",)), "without scheme or port"),
                      (dict(allowed_hosts=("a.*.com",)), "*.example.com"),
                      (dict(cors_origins=("app.example.com",)), "--cors-origin https://app.example.com"),
                      (dict(cors_origins=("https://app.example.com/",)), "scheme, host and port only"),
                      (dict(num_samples_cap=0), "num_samples_cap must be a whole number of at least 1"),
                      (dict(max_body_bytes=-1), "max_body_bytes"),
                      (dict(host=""), "127.0.0.1, 0.0.0.0")):
        with pytest.raises(ServerConfigError, match=says.replace("*", r"\*")):
            ServerConfig(**bad)


@pytest.mark.parametrize("flags,warned", [
    (["--host", "0.0.0.0"], "listening on 0.0.0.0 without --api-key"),
    (["--host", "192.168.1.5"], "listening on 192.168.1.5 without --api-key"),
    (["--cors-origin", "*"], "--cors-origin '*' without --api-key"),
    (["--host", "0.0.0.0", "--api-key", "k"], None),
    ([], None),
    (["--host", "localhost"], None),
])
def test_a_server_open_to_the_network_without_a_key_says_so_naming_api_key(scorer, monkeypatch, flags, warned):
    import importlib

    from click.testing import CliRunner

    import syncheck.scorer

    serve_cli = importlib.import_module("syncheck.cli.serve")
    monkeypatch.setattr(syncheck.scorer, "Scorer", lambda *a, **k: scorer)
    monkeypatch.setattr(serve_cli, "run_server", lambda app, host, port: None)
    monkeypatch.delenv("SYNCHECK_API_KEY", raising=False)
    result = CliRunner().invoke(serve_cli.serve, ["--model", "m", "--model-id", "tiny", *flags])
    assert result.exit_code == 0, result.output
    if warned is None:
        assert "warning:" not in result.output
    else:
        line = next(x for x in result.output.splitlines() if x.startswith("warning:"))
        assert warned in line and "--api-key KEY" in line
