"""``syncheck serve`` in a subprocess on loopback, driven by the official ``openai`` client (and raw HTTP for
errors)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from conftest import DOCS, Server  # noqa: E402  (the test server; server and serve_dir are conftest's fixtures)

QUESTIONS = ["When was it completed?", "How tall is it?", "Who built it?", "Where is it?", "Why was it built?",
             "What is it made of?", "How many visit it?", "Is it painted?"]


LONG = 3000  # tokens: seconds of generation, long enough to be interrupted


def ask(question: str, **kw) -> dict:
    return {"model": "tiny", "messages": [{"role": "user", "content": question}], "extra_body": {"documents": DOCS},
            **kw}


def read_stream(stream) -> tuple[str, list[dict], dict, list[str]]:
    """(content, sentence events, last syncheck summary, the order of chunk kinds)."""
    text, sentences, summary, kinds = "", [], {}, []
    for chunk in stream:
        extra = (chunk.model_extra or {}).get("syncheck")
        delta = chunk.choices[0].delta.content if chunk.choices else None
        if delta:
            text += delta
            kinds.append("text")
        if extra and "sentence" in extra:
            sentences.append(extra["sentence"])
            kinds.append("sentence")
        elif extra:
            summary = extra
            assert chunk.choices[0].finish_reason in ("stop", "length")
    return text, sentences, summary, kinds


def test_models_health_and_a_streamed_completion_with_scored_sentence_events(server):
    assert server.get("/v1/models")["data"][0]["id"] == "tiny"
    assert server.get("/health")["aggregator"] == "portable"
    client = server.client()
    text, sentences, summary, _ = read_stream(client.chat.completions.create(**ask(QUESTIONS[0]), max_tokens=24,
                                                                            stream=True))
    assert text and sentences and all(isinstance(s["score"], float) for s in sentences)
    assert {"index", "text", "start", "end", "score", "features"} <= set(sentences[0])
    assert text[sentences[0]["start"] : sentences[0]["end"]] == sentences[0]["text"]
    assert set(summary) >= {"response_score", "thresholds", "trace", "final_check"}
    assert summary["response_score"] == min(s["score"] for s in sentences)
    full = client.chat.completions.create(**ask(QUESTIONS[0]), max_tokens=24)  # not streamed: the same answer
    extra = full.model_extra["syncheck"]
    assert extra["warnings"] == [] and extra["method"] == "monitor" and extra["final_check"] is None
    assert full.choices[0].message.content == text and full.usage.completion_tokens == 24
    # the second request starts from the first one's cached prompt prefix: equal to float tolerance
    assert [s["score"] for s in extra["sentences"]] == pytest.approx([s["score"] for s in sentences], abs=1e-4)
    assert full.choices[0].finish_reason == "length" and extra["trace"]["stop"] == "max_new_tokens"


def test_fod_streams_only_accepted_sentences(server):
    stream = server.client().chat.completions.create(**ask(QUESTIONS[1], max_tokens=24, stream=True, extra_body={
        "documents": DOCS, "syncheck": {"method": "fod", "tau1": 1.0, "num_samples": 2, "num_beams": 1,
                                        "max_sentences": 2}}))
    text, sentences, summary, kinds = read_stream(stream)
    assert summary["trace"]["backtrack"] is not None  # tau1 = 1: the first sentence is taken back ...
    assert summary["method"] == "fod" and summary["thresholds"]["tau1"] == 1.0
    # ... and never shown: each shown piece of text comes with its accepted sentence, or is the abstention
    assert kinds == ["text", "sentence"] * len(sentences) or (not sentences and summary["trace"]["abstained"])
    assert all(text[s["start"] : s["end"]] == s["text"] for s in sentences)


def test_fod_cut_off_by_max_tokens_reports_length(server):
    """An answer cut off by the token budget says so (``max_new_tokens``, finish reason ``length``), whether or not
    FOD backtracked: the tiny model's random text is off the subject, so FOD may flag and repair it first."""
    reply = server.client().chat.completions.create(**ask(QUESTIONS[1], max_tokens=8, extra_body={
        "documents": DOCS, "syncheck": {"method": "fod", "tau1": 0.0, "final_check": False, "max_sentences": 8}}))
    extra = reply.model_extra["syncheck"]
    assert extra["trace"]["stop"] == "max_new_tokens", extra["trace"]
    assert reply.choices[0].finish_reason == "length"


def test_eight_concurrent_streams_each_equal_their_sequential_result(server):
    client = server.client()
    sequential = [client.chat.completions.create(**ask(q), max_tokens=16).choices[0].message.content
                  for q in QUESTIONS]

    def streamed(q):
        return read_stream(server.client().chat.completions.create(**ask(q), max_tokens=16, stream=True))[0]

    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(streamed, QUESTIONS))
    assert concurrent == sequential
    assert len(set(sequential)) > 1  # distinct prompts gave distinct answers, so a mix-up would show


def test_monitor_streams_step_while_a_fod_request_runs_and_all_equal_their_solo_results(server):
    """FOD runs a forward per round (syncheck.serve.turns): its answer and the streams' are those of solo runs."""
    client = server.client()
    fod = {"documents": DOCS, "syncheck": {"method": "fod", "tau1": 1.0, "num_samples": 2, "num_beams": 1,
                                           "max_sentences": 3, "final_check": False}}

    def ask_fod():
        return (
            client.chat.completions.create(**ask(QUESTIONS[1], max_tokens=48, extra_body=fod))
            .choices[0]
            .message.content
        )

    def streamed(q):
        return read_stream(server.client().chat.completions.create(**ask(q), max_tokens=16, stream=True))[0]

    solo_fod = ask_fod()
    solo = [client.chat.completions.create(**ask(q), max_tokens=16).choices[0].message.content for q in QUESTIONS[:4]]
    with ThreadPoolExecutor(5) as pool:
        together_fod = pool.submit(ask_fod)
        together = list(pool.map(streamed, QUESTIONS[:4]))
        assert together_fod.result() == solo_fod
    assert together == solo


def test_a_client_that_disconnects_stops_its_generation_and_the_server_still_answers(server):
    before = server.get("/health")["cancelled"]
    stream = server.client().chat.completions.create(**ask(QUESTIONS[2]), max_tokens=LONG, stream=True)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.time() + 30
    while server.get("/health")["running"] and time.time() < deadline:
        time.sleep(0.1)
    health = server.get("/health")
    assert health["running"] == 0 and health["cancelled"] == before + 1  # stopped, not run to its end
    assert server.client().chat.completions.create(**ask(QUESTIONS[3]), max_tokens=4).choices[0].message.content


def test_a_system_message_is_left_out_with_a_warning(server):
    req = ask(QUESTIONS[0], max_tokens=4)
    req["messages"] = [{"role": "system", "content": "Be brief."}, *req["messages"]]
    out = server.client().chat.completions.create(**req)
    assert "1 message(s) (system) were not given to the model" in out.model_extra["syncheck"]["warnings"][0]


def test_offline_score_endpoint_gives_the_rows_of_syncheck_score(server):
    rec = {"id": "a", "context": DOCS, "question": "When?", "response": "It was completed in 1889. It is red."}
    status, body, _ = server.post("/v1/syncheck/score", json.dumps({"records": [rec, {"id": "b"}]}).encode())
    assert status == 200
    good, bad = body["results"]
    assert good["id"] == "a" and len(good["sentences"]) == 2 and good["error"] is None and "response_score" in good
    assert bad["id"] == "b" and "missing 'response'" in bad["error"]


@pytest.mark.parametrize("body,status,param,says", [
    (b'{"model": "tiny", "messages": [', 400, None, "not valid JSON"),
    (json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS}).encode(),
     404, "model", "GET /v1/models"),
    (json.dumps({"model": "tiny", "documents": DOCS}).encode(), 422, "messages", "Field required"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}]}).encode(), 400, "documents",
     "extra_body"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}],
                 "documents": ["word " * 9000]}).encode(),
     413, "documents", "fewer or shorter documents"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                 "syncheck": {"method": "fod", "tau2": 1.5}}).encode(),
     422, "syncheck.tau2", "less than or equal to 1"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                 "syncheck": {"methd": "fod"}}).encode(), 422, "syncheck.methd", "remove it"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                 "syncheck": {"method": "beam"}}).encode(), 400, "syncheck.method", "monitor, abstain, fod"),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS,
                 "temperature": 0, "syncheck": {"method": "fod"}}).encode(), 400, "temperature", "samples"),
])
def test_bad_requests_get_openai_error_objects_that_say_how_to_fix_them(server, body, status, param, says):
    got, err, _ = server.post("/v1/chat/completions", body)
    assert got == status and set(err["error"]) >= {"message", "type", "param"}
    assert err["error"]["param"] == param and says in err["error"]["message"]


def test_the_openai_client_raises_its_own_errors(server):
    with pytest.raises(openai.NotFoundError, match="not served here"):
        server.client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Q?"}],
                                                extra_body={"documents": DOCS})


def test_requests_beyond_the_queue_get_429_with_retry_after(serve_dir, tmp_path_factory):
    srv = Server(str(serve_dir), "tiny", tmp_path_factory.mktemp("serve-busy"), "--max-concurrent", "1",
                 "--max-queue", "0")
    try:
        stream = srv.client().chat.completions.create(**ask(QUESTIONS[0]), max_tokens=LONG, stream=True)
        next(iter(stream))  # admitted and generating
        status, err, headers = srv.post("/v1/chat/completions", json.dumps(
            {"model": "tiny", "messages": [{"role": "user", "content": "Q?"}], "documents": DOCS}).encode())
        assert status == 429 and int(headers["Retry-After"]) >= 1 and "--max-queue" in err["error"]["message"]
        stream.close()
    finally:
        srv.stop()


@pytest.mark.slow
def test_real_smollm2_streams_scored_sentences_and_runs_fod(tmp_path_factory):
    srv = Server("smollm2-135m", "smollm2-135m", tmp_path_factory.mktemp("serve-smollm2"))
    try:
        client = srv.client()
        req = {"model": "smollm2-135m", "messages": [{"role": "user", "content": "When was the tower completed?"}],
               "max_tokens": 48}
        text, sentences, summary, _ = read_stream(client.chat.completions.create(
            **req, stream=True, extra_body={"documents": DOCS}))
        assert "1889" in text and sentences and all(0 <= s["score"] <= 1 for s in sentences)
        assert summary["aggregator"] == "default" and summary["thresholds"]["from"] == "aggregator"
        fod = client.chat.completions.create(**req, extra_body={"documents": DOCS, "syncheck": {"method": "fod"}})
        extra = fod.model_extra["syncheck"]
        assert extra["method"] == "fod" and extra["final_check"] is not None and "tau1" in extra["trace"]
    finally:
        srv.stop()


def test_only_setting_errors_become_400_and_internal_failures_500():
    """A regression: every ValueError became a 400, internal invariant failures included."""
    from syncheck.decoding import Decoding, SettingsError
    from syncheck.serve.chat import server_error

    with pytest.raises(SettingsError) as bad:
        Decoding(top_p=0.0)
    assert server_error(bad.value).status == 400 and "top_p" in str(bad.value)
    internal = server_error(ValueError("token 7 is not a flushed sentence boundary of row 0"))
    assert internal.status == 500 and internal.type == "server_error"


def test_the_server_packs_its_rounds_as_asked(tiny_lm):
    """``--packing``: auto packs on CPU where the model allows it, on and off force it; anything else says what it
    takes, and so does the Ray application, before any replica starts."""
    from click.testing import CliRunner

    from syncheck.cli.serve import serve
    from syncheck.scorer import Scorer
    from syncheck.serve.app import create_app

    scorer = Scorer(tiny_lm, aggregator=None)
    for packing, packed in (("auto", True), ("on", True), ("off", False)):
        app = create_app(scorer, packing=packing, model_thread=False)
        assert app.state.scheduler.batch_step.__self__.packed is packed
    with pytest.raises(ValueError, match="auto, on or off"):
        create_app(scorer, packing="yes", model_thread=False)
    result = CliRunner().invoke(serve, ["--model", "m", "--packing", "yes"])
    assert result.exit_code == 2 and "auto" in result.output
    ray_app = pytest.importorskip("syncheck.serve.ray_app")
    with pytest.raises(ValueError, match="auto, on or off"):
        ray_app.build({"model": "m", "packing": "always"})
