"""The live page at ``/`` of ``syncheck serve``: served with its files, nothing from elsewhere, off with ``--no-ui``,
and, in headless Chromium, an answer streamed from the tiny model with every sentence coloured by its score."""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from html.parser import HTMLParser

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from conftest import DOCS  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

#: what would make the page fetch something from elsewhere (it must work offline)
EXTERNAL = re.compile(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['\"]?(?!data:)", re.IGNORECASE)


@pytest.fixture(scope="module")
def scorer(tiny_lm):
    from syncheck.scorer import Scorer

    return Scorer(tiny_lm, aggregator=None)


class Links(HTMLParser):
    """The page's ``src`` / ``href`` references and element ids."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.refs += [attrs[k] for k in ("src", "href") if attrs.get(k)]
        if attrs.get("id"):
            self.ids.add(attrs["id"])


def test_the_page_and_its_files_are_served_and_reference_nothing_elsewhere(scorer):
    from syncheck.serve.app import create_app

    client = TestClient(create_app(scorer, model_id="tiny", model_thread=False, openapi=True),
                        base_url="http://127.0.0.1:8000")
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    links = Links()
    links.feed(page.text)
    assert sorted(links.refs) == ["/ui/page.css", "/ui/page.js"]
    texts = {"index.html": page.text}
    for ref, kind in (("/ui/page.js", "text/javascript"), ("/ui/page.css", "text/css")):
        got = client.get(ref)
        assert got.status_code == 200 and got.headers["content-type"].startswith(kind)
        texts[ref] = got.text
    for name, text in texts.items():
        assert not EXTERNAL.search(text), f"{name} refers to {EXTERNAL.search(text).group()}"
    # the script reads the stream any client gets, and every element it looks up is on the page
    script = texts["/ui/page.js"]
    assert '"/v1/chat/completions"' in script and "stream: true" in script and "Authorization" in script
    assert set(re.findall(r'\$\("([\w-]+)"\)', script)) <= links.ids
    assert "innerHTML" not in script  # model text is set as text only
    # the API is untouched: /health and the model list answer as before, without the page in the schema
    assert client.get("/health").json()["model"] == "tiny"
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_no_ui_leaves_the_page_out(scorer, monkeypatch):
    import importlib

    from click.testing import CliRunner

    import syncheck.scorer
    from syncheck.serve.app import create_app

    client = TestClient(create_app(scorer, model_id="tiny", model_thread=False, ui=False),  # a ServerConfig field
                        base_url="http://127.0.0.1:8000")
    assert client.get("/").status_code == 404 and client.get("/ui/page.js").status_code == 404
    assert client.get("/health").status_code == 200
    serve_cli = importlib.import_module("syncheck.cli.serve")  # the module (syncheck.cli.serve is its command)
    served = []
    monkeypatch.setattr(syncheck.scorer, "Scorer", lambda *a, **k: scorer)
    monkeypatch.setattr(serve_cli, "run_server", lambda app, host, port: served.append(app))
    for flags, status in (([], 200), (["--no-ui"], 404)):
        result = CliRunner().invoke(serve_cli.serve, ["--model", "m", "--model-id", "tiny", *flags])
        assert result.exit_code == 0, result.output
        assert TestClient(served[-1], base_url="http://localhost:8000").get("/").status_code == status
        assert ("live page: http://127.0.0.1:8000/" in result.output) is (not flags)
    # on Ray Serve, the ingress gets the same choice
    ray_calls = []
    monkeypatch.setattr(serve_cli, "run_ray_server", lambda host, port, config: ray_calls.append(config))
    for flags in ([], ["--no-ui"]):
        assert CliRunner().invoke(serve_cli.serve, ["--model", "m", "--replicas", "2", *flags]).exit_code == 0
    assert [config.ui for config in ray_calls] == [True, False]


# ---------------------------------------------------------------------- in a real browser
def _browser():
    pytest.importorskip("websockets")
    from headless_chromium import HeadlessChromium, chromium_path

    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get (Debian package `chromium`)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return HeadlessChromium()


def _link(server, question: str, **fields: str) -> str:
    params = [("question", question), *(("document", d) for d in DOCS), *fields.items(), ("run", "1")]
    return f"{server.url}/?{urllib.parse.urlencode(params)}"


SHOWN = """(() => ({
  state: document.body.dataset.state,
  status: document.getElementById('status').textContent,
  sentences: [...document.querySelectorAll('#answer .sentence')].map(s => ({
    index: Number(s.dataset.index), text: s.textContent, score: Number(s.dataset.score),
    colour: getComputedStyle(s).backgroundColor})),
  pending: document.querySelectorAll('#answer .pending').length,
  struck: [...document.querySelectorAll('#answer del.repaired')].map(d => d.textContent),
  responseScore: Number(document.getElementById('response-score')?.dataset.value),
  check: document.getElementById('final-check-result')?.textContent,
}))()"""


def test_the_page_streams_an_answer_with_each_sentence_coloured_by_its_stream_score(server):
    from test_serve import read_stream

    with _browser() as browser:
        browser.open(_link(server, "When was it completed?", max_tokens="40", tau1="0.5"))
        browser.wait_for("['done', 'error'].includes(document.body.dataset.state)")
        shown = browser.evaluate(SHOWN)
        assert shown["state"] == "done", shown["status"]
        # the same request from a plain client: the page shows its sentences and scores
        stream = server.client().chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "When was it completed?"}], max_tokens=40,
            stream=True, extra_body={"documents": DOCS, "syncheck": {"tau1": 0.5, "final_check": True}})
        text, sentences, summary, _ = read_stream(stream)
        assert [s["index"] for s in shown["sentences"]] == [s["index"] for s in sentences] and sentences
        assert [s["text"] for s in shown["sentences"]] == [s["text"] for s in sentences]
        assert [s["score"] for s in shown["sentences"]] == pytest.approx([s["score"] for s in sentences], abs=1e-4)
        assert shown["responseScore"] == pytest.approx(summary["response_score"], abs=1e-4)
        assert all(s["colour"] not in ("", "rgba(0, 0, 0, 0)") for s in shown["sentences"])
        assert shown["check"].startswith("factuality")
        # hovering a sentence shows its features
        browser.evaluate("document.querySelector('#answer .sentence').dispatchEvent("
                         "new MouseEvent('mouseover', {bubbles: true}))")
        details = browser.evaluate("document.getElementById('details').innerText")
        assert all(name in details for name in sentences[0]["features"])


def test_the_page_strikes_out_what_fod_took_back(server):
    with _browser() as browser:
        # tau1 = 1: FOD takes back the first sentence (tests/test_serve.py)
        browser.open(_link(server, "How tall is it?", max_tokens="24", method="fod", tau1="1", final_check="0"))
        browser.wait_for("['done', 'error'].includes(document.body.dataset.state)")
        shown = browser.evaluate(SHOWN)
        assert shown["state"] == "done", shown["status"]
        assert shown["struck"] and all(shown["struck"])
        assert shown["check"] == "not run"


# ---------------------------------------------------------------------- FOD's repairs as they happen
class ScriptedStream:
    """The live page's files, ``/health`` and a scripted FOD stream on loopback: ``Good.``, then ``Paris.``, which
    replaced ``London.``; the stream waits before its summary until :attr:`release` is set. ``live``: the repair
    comes on the sentence event (what ``syncheck serve`` sends); else only in the summary's trace (a runner that
    reports at the end)."""

    def __init__(self, live: bool) -> None:
        import http.server
        import threading

        from syncheck.serve.page import page_files

        self.release = threading.Event()
        files, stream = page_files(), self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body: bytes, media_type: str):
                self.send_response(status)
                self.send_header("Content-Type", media_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                path = self.path.split("?")[0]
                if path == "/health":
                    self._send(200, b'{"model": "scripted", "aggregator": "none"}', "application/json")
                elif path in files:
                    text, media_type = files[path]
                    self._send(200, text.encode(), media_type)
                else:
                    self._send(404, b"", "text/plain")

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for event in stream.events(live):
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                stream.release.wait(60)
                for event in stream.summary():
                    self.wfile.write(f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode())
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _chunk(delta: dict, syncheck: dict | None = None, finish_reason: str | None = None) -> dict:
        out = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
        return {**out, "syncheck": syncheck} if syncheck is not None else out

    def events(self, live: bool) -> list[dict]:
        first = {"index": 0, "text": "Good.", "start": 0, "end": 5, "score": 0.9, "flagged": False, "degenerate": None}
        second = {"index": 1, "text": "Paris.", "start": 6, "end": 12, "score": 0.95, "flagged": False,
                  "degenerate": None}
        if live:
            second["repair"] = {"index": 1, "text": "London.", "score": 0.1, "degenerate": None, "chosen_by": "tau2"}
        return [self._chunk({"role": "assistant", "content": ""}), self._chunk({"content": "Good."}),
                self._chunk({}, {"sentence": first}), self._chunk({"content": " Paris."}),
                self._chunk({}, {"sentence": second})]

    def summary(self) -> list:
        trace = {"stop": "eos", "repairs": 1, "steps": [{"chosen_by": "tau2"}],
                 "backtracks": [{"sentence_index": 1, "text": "London.", "score": 0.1}]}
        return [self._chunk({}, {"method": "fod", "response_score": 0.9, "thresholds": {"tau1": 0.5, "tau2": 0.9},
                                 "trace": trace, "final_check": None, "warnings": []}, "stop"), "[DONE]"]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


#: the answer as drawn: each piece's tag and text, in order
DRAWN = "[...document.getElementById('answer').children].map(c => c.tagName.toLowerCase() + ':' + c.textContent)"


@pytest.mark.parametrize("live", [True, False], ids=["on-the-sentence-event", "only-in-the-trace"])
def test_the_page_strikes_out_a_repair_when_its_sentence_comes_and_once(live):
    stream = ScriptedStream(live)
    try:
        with _browser() as browser:
            browser.open(f"{stream.url}/?question=Q%3F&document=D.&method=fod&run=1")
            browser.wait_for("document.querySelectorAll('#answer .sentence').length === 2")
            held = browser.evaluate(SHOWN)
            assert held["state"] == "busy" and browser.evaluate("document.getElementById('summary').children.length") \
                == 0  # the stream has not ended
            if live:  # struck out as soon as the replacement's event came, before the sentence that replaced it
                assert held["struck"] == ["London."]
                assert browser.evaluate(DRAWN) == ["span:Good.", "del:London.", "span:Paris."]
            else:
                assert held["struck"] == []
            stream.release.set()
            browser.wait_for("['done', 'error'].includes(document.body.dataset.state)")
            shown = browser.evaluate(SHOWN)
            assert shown["state"] == "done", shown["status"]
            assert shown["struck"] == ["London."]  # from the event or the trace, shown once
            assert browser.evaluate(DRAWN) == ["span:Good.", "del:London.", "span:Paris."]
    finally:
        stream.close()
