"""Fuzz the edges: malformed and adversarial input never loses a row, never gets a 500 or a traceback.

``syncheck score`` takes batches of hypothesis-made lines (random bytes, deep JSON, huge fields, wrong types, unpaired
surrogates, NaN, ...), each batch in one run: every non-blank line gives exactly one row, in order, with an
``error`` where it failed, ``--resume`` after a cut gives the same bytes, and the command exits 1 only when every row
failed. The server (one for the module, on a tiny random Llama) takes such bodies on its two POST endpoints: each
gets a 200 or a 4xx with an OpenAI-style error object, and afterwards the server still answers. It also takes
hypothesis-made headers (``Host``, ``Origin``, ``Content-Type``: each refused or let in as the browser rules say),
bodies whose ``Content-Length`` lies or that come chunked (raw sockets: never a 5xx or a hang), and ``syncheck``
options at the server's caps and just past them. The ``@example`` s are the inputs that broke it before.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections import Counter

import pytest
from click.testing import CliRunner
from conftest import DOCS, Server
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from syncheck.cli import main

NAN, INF = float("nan"), float("inf")


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[
        HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
        HealthCheck.large_base_example])


#: examples run per target, and the statuses the server answered (the last test prints them)
CASES: Counter[str] = Counter()
STATUSES: Counter[str] = Counter()

# ---------------------------------------------------------------------- adversarial values
DEEP = b"[" * 100_000 + b"]" * 100_000  # json.loads raised RecursionError
BIG_INT = b"1" + b"0" * 5000  # json.loads raised ValueError: over 4300 digits
NUMBERS = [0, -1, 1, 2, -(2**70), 2**31, 2**63, 2**64, 10**30, 1.5, -0.0, 1e308, NAN, INF, -INF, True, False]
STRINGS = ["", " ", "\x00", "\ud800", "a\udc00b", "\ufeff", "\u202e\u0301", "<|user|>{{ x }}", "\u3000", "ﬁİ\u2028.",
           "word " * 9000, "the tower is very tall " * 200, "It was completed in 1889. It is tall."]

scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(NUMBERS), st.integers(), st.floats(),
                    st.text(max_size=40), st.sampled_from(STRINGS))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)
texts = st.one_of(st.text(max_size=80), st.sampled_from(STRINGS), st.characters().map(lambda c: c * 3))


def deep(depth: int, obj: bool) -> bytes:
    return b'{"a":' * depth + b"0" + b"}" * depth if obj else b"[" * depth + b"]" * depth


def dumps(value, ascii_only: bool = True) -> bytes:
    """JSON (NaN and Infinity included) as bytes; unpaired surrogates pass as they are (not UTF-8) when not ASCII."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


not_json = st.one_of(st.binary(max_size=300), st.builds(deep, st.integers(1, 200_000), st.booleans()),
                     st.sampled_from([b"", b"   ", b"NaN", b"\xef\xbb\xbf{}", b'{"a": 1' + BIG_INT + b"}"]))


def mutated(base: dict, values: dict[str, st.SearchStrategy], draw) -> dict:
    """``base`` with a few fields replaced by a field's adversarial values (or anything), or dropped."""
    out = dict(base)
    for name in draw(st.lists(st.sampled_from(sorted(values) + ["extra"]), max_size=4, unique=True)):
        choice = draw(st.sampled_from(["field", "anything", "drop"]))
        if choice == "drop":
            out.pop(name, None)
        else:
            out[name] = draw(values.get(name, json_values) if choice == "field" else json_values)
    return out


# ---------------------------------------------------------------------- records (syncheck score, /v1/syncheck/score)
RECORD_FIELDS = {
    "id": st.one_of(st.sampled_from(NUMBERS + STRINGS[:8]), json_values),
    "context": st.one_of(texts, st.lists(texts, max_size=4), st.just(DOCS)),
    "question": st.one_of(st.none(), texts),
    "response": texts,
}


@st.composite
def records(draw, rid: str) -> tuple[object, object]:
    """``(record, the id its row must carry or None)``: a good record, one with bad fields, or any JSON value."""
    good = {"id": rid, "context": DOCS, "question": "When was it completed?",
            "response": "It was completed in 1889. It is 330 metres tall."}
    rec = draw(st.one_of(st.just(good), st.builds(dict), json_values, st.composite(
        lambda d: mutated(good, RECORD_FIELDS, d))()))
    return rec, (rid if isinstance(rec, dict) and rec.get("id") == rid else None)


@st.composite
def jsonl_lines(draw, n: int) -> tuple[bytes, object]:
    """``(line, the id its row must carry or None)``; a line has no newline byte."""
    rec, rid = draw(records(f"L{n}"))
    kind = draw(st.sampled_from(["record", "record", "record", "record", "other"]))
    if kind == "record":
        line = dumps(rec, ascii_only=draw(st.booleans()))
        return line + draw(st.sampled_from([b"", b"\r", b"  "])), rid if b"\xed" not in line else None
    junk = draw(st.one_of(not_json, st.sampled_from(["\u3000", "\x1c", "\u2028", "\x85"]).map(str.encode),
                          json_values.map(dumps)))
    return junk.replace(b"\n", b" "), None


def blank(line: bytes) -> bool:
    """JSONL's blank line: nothing but spaces, tabs, CR, VT, FF (no row)."""
    return not line.strip(b" \t\r\x0b\x0c")


def check_row(row: dict) -> None:
    assert set(row) >= {"id", "sentences", "warnings", "error"}, row
    if row["error"] is None:
        assert row["sentences"], f"a row without an error must have scored sentences: {row}"
    else:
        assert isinstance(row["error"], str) and row["error"] and "Traceback" not in row["error"]
        assert row["sentences"] == []


def score_cli(*args: str):
    result = CliRunner().invoke(main, ["score", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output, result.output[-3000:]
    everything_failed = "every row failed" in result.output
    assert result.exit_code == (1 if everything_failed else 0), result.output[-3000:]
    return result


@fuzz(3)
@given(lines=st.integers(30, 60).flatmap(lambda n: st.tuples(*(jsonl_lines(i) for i in range(n)))))
@example(lines=((b'{"id": "L0", "context": "c", "response": "It is tall."}', "L0"), (DEEP, None), (BIG_INT, None),
                (b'{"id": 1' + BIG_INT + b', "context": "c", "response": "r."}', None), (b"\xff" + DEEP, None),
                ("\u3000".encode(), None), (b"\x1c", None), (b"  \r", None),
                (b'{"id": "L8", "response": "\\ud800"}', "L8"),
                ('{"context": "\ud800"}'.encode("utf-8", "surrogatepass"), None),
                (b'{"id": "L9", "context": "c", "response": "Ok."}', "L9")))
def test_score_gives_one_row_per_line_and_resumes_to_the_same_bytes(tiny_dir, tmp_path_factory, lines):
    CASES["syncheck score (lines)"] += len(lines)
    tmp = tmp_path_factory.mktemp("fuzz-score")
    inp, full, part = tmp / "in.jsonl", tmp / "full.jsonl", tmp / "part.jsonl"
    inp.write_bytes(b"".join(line + b"\n" for line, _ in lines))
    common = ["--model", str(tiny_dir), "--batch-size", "3"]
    result = score_cli(str(inp), "-o", str(full), *common)
    kept = [(line, rid) for line, rid in lines if not blank(line)]
    data = full.read_bytes()
    rows = [json.loads(row) for row in data.split(b"\n")[:-1]]
    assert len(rows) == len(kept) and re.search(rf"^{len(kept)} rows", result.output, re.MULTILINE)
    assert (result.exit_code == 1) is (bool(rows) and all(r["error"] is not None for r in rows))
    for row, (line, rid) in zip(rows, kept):
        check_row(row)
        if rid is not None:
            assert row["id"] == rid, (line[:200], row)
    # cut after a few rows and in the middle of the next one; --resume neither loses nor repeats a row
    cut = sum(len(line) + 1 for line in data.split(b"\n")[:len(rows) // 3]) + 5
    part.write_bytes(data[:cut])
    score_cli(str(inp), "-o", str(part), "--resume", *common)
    assert part.read_bytes() == data


def test_the_inputs_that_broke_a_run_now_fail_in_words():
    """The fuzzer's finds, without a model: each is a row's error or a setting's error, never an exception."""
    from syncheck.decoding import Decoding, SettingsError
    from syncheck.records import RecordError, is_blank, load_json, parse_record, read_jsonl

    for text, reason in [(DEEP, "nested too deeply"), (BIG_INT, "more than 4300 digits"), (b"\xff", "not UTF-8"),
                         ('{"a": 1,\n', "line 2 column 1")]:
        with pytest.raises(ValueError, match=reason):
            load_json(text)
    lines = [DEEP, "\u3000".encode(), b" \t\r", b'{"id": ' + BIG_INT + b"}", b'{"id": "x", "context": "c"}']
    got = [item for _, item in read_jsonl(lines)]  # the blank line 3 gives none
    assert [str(e)[:30] for e in got] == ["line 1: not valid JSON (arrays", "line 2: not valid JSON (Expect",
                                          "line 4: not valid JSON (an int", "line 5: missing 'response': ad"]
    assert [e.record_id for e in got] == [None, None, None, "x"]
    assert is_blank(b" \t\r\n") and is_blank("\x0c") and not is_blank("\u3000") and not is_blank(b"\x1c")
    with pytest.raises(RecordError) as bad:
        parse_record({"id": NAN, "context": "c"})
    assert bad.value.record_id is None  # a NaN id is not echoed (it is not JSON)
    with pytest.raises(SettingsError, match="seed must be in"):
        Decoding(do_sample=True, seed=2**64)
    assert Decoding(seed=-(2**63)).seed == -(2**63)


# ---------------------------------------------------------------------- the server
@pytest.fixture(scope="module")
def server(serve_dir, tmp_path_factory):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    cache = tmp_path_factory.mktemp("fuzz-serve")
    srv = Server(str(serve_dir), "tiny", cache, "--max-tokens", "6")
    srv.log_file = cache / "server.log"
    yield srv
    srv.stop()


def post(server: Server, path: str, body: bytes) -> tuple[int, str, bytes]:
    """``(status, content type, raw body)``: what came back, whatever it is."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def answer(server: Server, path: str, body: bytes):
    """The JSON (or the list of SSE events) of a 200; ``None`` after checking a 4xx's OpenAI-style error object."""
    status, ctype, raw = post(server, path, body)
    STATUSES[f"{path} {status}"] += 1
    assert status < 500, (status, raw[:1000])
    if status >= 400:
        error = json.loads(raw)["error"]
        assert set(error) >= {"message", "type", "param", "code"} and error["message"], error
        assert error["type"] == "invalid_request_error" and "Traceback" not in error["message"], error
        return None
    assert status == 200, (status, raw[:1000])
    if ctype.startswith("text/event-stream"):
        events = [e[len("data: "):] for e in raw.decode("utf-8").split("\n\n") if e]
        assert events[-1] == "[DONE]", events[-3:]
        chunks = [json.loads(e) for e in events[:-1]]
        assert all("error" not in c for c in chunks), chunks[-2:]
        return chunks
    return json.loads(raw)


OPTIONS = {
    "method": st.sampled_from(["monitor", "fod", "abstain", "beam", "", "\ud800", 5, None]),
    "tau1": st.sampled_from([NAN, INF, -1, 0, 0.5, 1, 2, None, "0.5"]),
    "tau2": st.sampled_from([NAN, -1, 0, 0.5, 1, 1.5, None]),
    "num_samples": st.sampled_from([0, 1, 2, 65, NAN, 10**30, "2"]),
    "num_beams": st.sampled_from([0, 1, 2, 65, -1]),
    "max_sentences": st.sampled_from([0, 1, 2, 257, 1.5]),
    "final_check": st.sampled_from([True, False, None, "yes", 2]),
    "features": st.sampled_from([True, False, None, 3]),
}
MESSAGE = {"role": st.sampled_from(["user", "system", "assistant", "tool", "bogus", None, 5]),
           "content": st.one_of(texts, st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]),
                                                                       "text": texts}), max_size=3))}
TOKENS = st.sampled_from([None, -(2**70), -1, 0, 1, 3, 2**31, 2**63, 10**30, 1.5, 2.0, "4", NAN, INF, True, []])
CHAT_FIELDS = {
    "model": st.sampled_from(["tiny", "gpt-4o", "", "\ud800", 5, None, "tiny" * 10_000]),
    "messages": st.one_of(st.lists(st.composite(lambda d: mutated(
        {"role": "user", "content": "When was it completed?"}, MESSAGE, d))(), max_size=3), json_values),
    "documents": st.one_of(st.lists(texts, max_size=4), st.just([]), st.just(["  "]), json_values),
    "max_tokens": TOKENS,
    "max_completion_tokens": TOKENS,
    "temperature": st.sampled_from([NAN, INF, -1, 0, 0.7, 2, 2.5, "1", None, 1e308]),
    "top_p": st.sampled_from([NAN, 0, 0.5, 1, 1.5, -0.1, None]),
    "seed": st.sampled_from([None, -1, 0, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 2**70, 1.5, "1", NAN]),
    "stop": st.sampled_from([None, "", ".", ["."] * 5, [""], ["\ud800"], [1], "x" * 1000, {}]),
    "n": st.sampled_from([1, 2, 0, -1, NAN, None]),
    "stream": st.one_of(st.booleans(), json_values),
    "stream_options": st.sampled_from([None, {}, {"include_usage": True}, "x", [], {"include_usage": NAN}]),
    "syncheck": st.one_of(st.composite(lambda d: mutated({}, OPTIONS, d))(), json_values),
}
GOOD_CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "When was it completed?"}], "documents": DOCS,
             "max_tokens": 3}


@st.composite
def chat_bodies(draw) -> bytes:
    if draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(not_json, json_values.map(dumps)))
    return dumps(mutated(GOOD_CHAT, CHAT_FIELDS, draw), ascii_only=draw(st.booleans()))


@fuzz(120)
@given(body=chat_bodies())
@example(body=DEEP)  # 500: RecursionError
@example(body=b" " * (8 * 1024 * 1024 + 1))  # 413
@example(body=b'{"model": "tiny", "seed": ' + BIG_INT + b"}")  # 500: int() refuses 5001 digits
@example(body=dumps({**GOOD_CHAT, "temperature": 1, "seed": 2**64}))  # 500: the sampler's seed overflowed
@example(body=dumps({**GOOD_CHAT, "seed": -(2**70), "syncheck": {"method": "fod", "num_samples": 1}}))
@example(body=dumps({**GOOD_CHAT, "messages": [{"role": "user", "content": "When\ud800?"}]}))  # 500: tokenizer
@example(body=dumps({**GOOD_CHAT, "messages": [{"role": "user", "content": [{"type": "text", "text": "\udc00"}]}]}))
@example(body=dumps({**GOOD_CHAT, "documents": ["It is tall.\ud800"], "stream": True}))
def test_chat_completions_answers_200_or_an_openai_error(server, body):
    CASES["POST /v1/chat/completions"] += 1
    got = answer(server, "/v1/chat/completions", body)
    if isinstance(got, dict):
        assert got["object"] == "chat.completion" and isinstance(got["choices"][0]["message"]["content"], str)


@st.composite
def score_bodies(draw) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.one_of(not_json, json_values.map(dumps)))
    if kind == 1:
        return dumps({"records": draw(json_values)})
    n = draw(st.integers(1, 6))
    recs = [draw(records(f"r{i}"))[0] for i in range(n)]
    return dumps(recs[0] if kind == 2 else {"records": recs}, ascii_only=draw(st.booleans()))


@fuzz(70)
@given(body=score_bodies())
@example(body=b'{"records": [{"id": NaN, "context": "c"}]}')  # 500: NaN id echoed, not JSON
@example(body=b'{"records": [{"id": Infinity, "context": "c", "response": "r."}]}')
@example(body=b'{"records": [{"id": "\\ud800", "context": "c", "response": "r."}]}')  # 500: not UTF-8
@example(body=b'{"records": ' + DEEP + b"}")  # 500: RecursionError
@example(body=b'{"records": [{"id": ' + BIG_INT + b', "context": "c", "response": "r."}]}')
@example(body=dumps({"records": [{"id": i, "context": "c", "response": "r."} for i in range(257)]}))  # 413
def test_score_endpoint_answers_one_row_per_record_or_an_openai_error(server, body):
    CASES["POST /v1/syncheck/score"] += 1
    got = answer(server, "/v1/syncheck/score", body)
    if got is None:
        return
    try:
        sent = json.loads(body)
    except ValueError:  # not UTF-8 (a lone surrogate passed as it is): then the server refused it
        raise AssertionError(f"a body that is not JSON got 200: {body[:200]!r}") from None
    recs = sent["records"] if isinstance(sent, dict) and "records" in sent else [sent]
    assert len(got["results"]) == len(recs)
    for i, (row, rec) in enumerate(zip(got["results"], recs)):
        check_row(row)
        if isinstance(rec, dict) and rec.get("id") == f"r{i}":
            assert row["id"] == f"r{i}"


# ---------------------------------------------------------------------- the browser's headers
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "LocalHost", "127.0.0.1:{port}", "localhost:{port}",
                  "[::1]:{port}"]
FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example:{port}",
                 "10.0.0.1", "0.0.0.0", "[::]", "127.0.0.2", "::1", "a" * 300]
#: Host values the HTTP server itself may refuse (400) before the app sees them
ODD_HOSTS = ["", "local host", "\u00e9vil.example", "[::1", "localhost:port"]
ORIGINS = [None, "http://127.0.0.1:{port}", "http://evil.example", "https://evil.example:{port}", "null", "",
           "http://localhost:{port}", "file://", "http://127.0.0.1:{port}/page", "*", "http://127.0.0.1",
           "HTTP://LOCALHOST:{port}"]
#: the Content-Type values that declare JSON
JSON_TYPES = ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", " application/json ",
              "application/json;"]
CONTENT_TYPES = [None, *JSON_TYPES, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", "application/jsonx", "application/json-patch+json",
                 "application/vnd.api+json", "json", "", "application/ json"]


def expected_status(host: str, origin: str | None, content_type: str | None) -> tuple[int, ...]:
    """The browser rules: a Host that is not a loopback name 403 (or the HTTP server's 400 for one it cannot parse),
    then an Origin other than ``http://`` and the Host 403, then a body not declared JSON 415, else 200 (the model
    runs)."""
    if host not in LOOPBACK_HOSTS:
        return (400, 403) if host in ODD_HOSTS else (403,)
    if origin is not None and origin.lower() != f"http://{host}".lower():
        return (403,)
    return (200,) if content_type in JSON_TYPES else (415,)


def send_raw(server: Server, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> int:
    """The status of one request sent with exactly ``headers`` (Host included), as bytes on a socket."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(data)
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                return 0  # closed without an answer
            reply += chunk
    return int(reply.split(b" ", 2)[1])


@fuzz(60)
@given(host=st.sampled_from(LOOPBACK_HOSTS + FOREIGN_HOSTS + ODD_HOSTS), origin=st.sampled_from(ORIGINS),
       content_type=st.sampled_from(CONTENT_TYPES))
@example(host="127.0.0.1:{port}", origin=None, content_type="text/plain;charset=UTF-8")  # today: 200, the model ran
@example(host="evil.example:{port}", origin=None, content_type="application/json")  # today: 200 (DNS rebinding)
@example(host="127.0.0.1:{port}", origin="http://evil.example", content_type="application/json")
def test_host_origin_and_content_type_are_refused_or_let_in_as_the_rules_say(server, host, origin, content_type):
    CASES["headers (Host, Origin, Content-Type)"] += 1
    expected = expected_status(host, origin, content_type)  # the rules read the values before the port goes in
    host, origin = host.format(port=server.port), origin and origin.format(port=server.port)
    headers = [("Host", host), *([("Origin", origin)] if origin is not None else []),
               *([("Content-Type", content_type)] if content_type is not None else []),
               ("Content-Length", str(len(dumps(GOOD_CHAT)))), ("Connection", "close")]
    status = send_raw(server, "POST", "/v1/chat/completions", headers, dumps(GOOD_CHAT))
    STATUSES[f"headers {status}"] += 1
    assert status in expected, (host, origin, content_type, status)


# ---------------------------------------------------------------------- lying lengths and chunked bodies
@st.composite
def framed_bodies(draw) -> tuple[list[tuple[str, str]], bytes, bool]:
    """``(headers, bytes sent after them, whether the sender then stops writing)``: a body whose Content-Length is
    right, too small, too large (then the client stops), not a number, past the limit, or a chunked body, its chunks
    well or badly framed, possibly past the limit."""
    body = draw(st.one_of(st.just(dumps(GOOD_CHAT)), st.binary(max_size=200), not_json.filter(lambda b: len(b) < 2000)))
    kind = draw(st.sampled_from(["right", "short", "long", "junk", "huge", "chunked", "bad-chunks", "chunked-huge"]))
    if kind in ("right", "short", "long"):
        length = {"right": len(body), "short": max(len(body) - draw(st.integers(1, 50)), 0),
                  "long": len(body) + draw(st.integers(1, 10_000))}[kind]
        return [("Content-Length", str(length))], body, kind == "long"
    if kind == "junk":
        junk = ["abc", "-1", "1e3", "0x10", "", "1 2", "99999999999999999999"]
        return [("Content-Length", draw(st.sampled_from(junk)))], body, True
    if kind == "huge":
        return [("Content-Length", str(draw(st.integers(8 * 1024 * 1024 + 1, 2**40))))], body[:100], True
    cut = sorted(draw(st.lists(st.integers(0, len(body)), max_size=5)))
    pieces = [body[a:b] for a, b in zip([0, *cut], [*cut, len(body)]) if body[a:b]]
    if kind == "chunked-huge":
        pieces += [b" " * 1024 * 1024] * 9
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    if kind == "bad-chunks":
        framed = draw(st.sampled_from([b"zz\r\n" + body, framed[:-2], b"%x\r\n%s" % (len(body) + 5, body),
                                       framed + b"0\r\n"]))
        return [("Transfer-Encoding", "chunked")], framed, True
    return [("Transfer-Encoding", "chunked")], framed + b"0\r\n\r\n", False


@fuzz(40)
@given(framing=framed_bodies(), path=st.sampled_from(["/v1/chat/completions", "/v1/syncheck/score"]))
@example(framing=([("Content-Length", str(64 * 1024 * 1024))], b'{"model": ', True), path="/v1/chat/completions")
def test_lying_lengths_and_chunked_bodies_never_get_a_5xx_or_hang(server, framing, path):
    CASES["framing (Content-Length, chunked)"] += 1
    headers, sent, stops = framing
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}", "Content-Type: application/json",
             "Connection: close", *(f"{k}: {v}" for k, v in headers)]
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + sent)
            if stops:
                sock.shutdown(socket.SHUT_WR)  # no more bytes: the server must answer or close, not wait
        except OSError:  # the server answered and closed before taking it all
            pass
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
    STATUSES[f"framing {status}"] += 1
    assert status < 500, (headers, sent[:100], reply[:500])
    declared = [int(v) for k, v in headers if k == "Content-Length" and v.isdigit()]
    if declared and 8 * 1024 * 1024 < declared[0] < 2**63:  # beyond 2**63 the HTTP server itself answers 400
        assert status == 413, reply[:500]


# ---------------------------------------------------------------------- syncheck options at the server's caps
CAPS = {"num_samples": 16, "num_beams": 4, "max_sentences": 32}  # ServerConfig's defaults, the fuzz server's


@fuzz(12)
@given(options=st.fixed_dictionaries({name: st.sampled_from([1, cap - 1, cap, cap + 1, 10**6])
                                      for name, cap in CAPS.items()}),
       method=st.sampled_from(["fod", "abstain", "monitor"]))
@example(options={"num_samples": 16, "num_beams": 4, "max_sentences": 32}, method="fod")
@example(options={"num_samples": 17, "num_beams": 1, "max_sentences": 1}, method="fod")
def test_syncheck_options_at_the_caps_run_and_past_them_get_422(server, options, method):
    from syncheck.serve.config import ServerConfig

    assert CAPS == {name: getattr(ServerConfig(), f"{name}_cap") for name in CAPS}
    CASES["syncheck options at the caps"] += 1
    body = {**GOOD_CHAT, "max_tokens": 2, "syncheck": {"method": method, "final_check": False, **options}}
    status, _, raw = post(server, "/v1/chat/completions", dumps(body))
    STATUSES[f"caps {status}"] += 1
    over = [name for name, cap in CAPS.items() if options[name] > cap]
    if over:
        assert status == 422 and json.loads(raw)["error"]["param"] == f"syncheck.{over[0]}", raw[:500]
    else:
        assert status == 200, raw[:500]


def test_the_server_still_answers_after_the_fuzzing(server):
    """Run last: the fuzzed server answers a valid request, has nothing left running and logged no traceback."""
    deadline = time.time() + 30
    while (health := server.get("/health"))["running"] + health["queued"] and time.time() < deadline:
        time.sleep(0.1)  # a job is counted until the model thread's next round
    assert health["status"] == "ok" and health["running"] == health["queued"] == 0 and server.proc.poll() is None
    assert answer(server, "/v1/chat/completions", dumps(GOOD_CHAT))["choices"][0]["message"]["content"]
    rows = answer(server, "/v1/syncheck/score", dumps({"id": "a", "context": DOCS, "response": "It is tall."}))
    assert rows["results"][0]["error"] is None and rows["results"][0]["sentences"]
    log = server.log_file.read_text(errors="replace")
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]
    print("\nfuzz cases:", dict(CASES), "total", sum(CASES.values()), "\nstatuses:", dict(sorted(STATUSES.items())))

