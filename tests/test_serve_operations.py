"""``syncheck serve`` run by an operator: API keys, Prometheus metrics and JSON request logs, on one server of the
tiny model started with two keys and ``--log-format json``."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from conftest import DOCS, Server  # noqa: E402
from test_serve import ask  # noqa: E402

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
