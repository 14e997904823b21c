"""Bad input never loses a row: each case gets a clear error or warning (tiny model saved to a temp dir)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from syncheck.cli import main
from syncheck.io import ResumeError, RowWriter, guard_row, prepare_resume

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_model  # noqa: E402

CTX = ["The tower is 330 m tall.", "It opened in 1889 for the World's Fair."]


def ok(rid, response, context=CTX, **extra):
    return json.dumps({"id": rid, "context": context, "question": "How tall is it?", "response": response, **extra})


# (id, input line, expected error substring or None, expected warning substring or None)
CASES = [
    ("good", ok("good", "It is 330 m tall. It opened in 1889."), None, None),
    ("empty-response", ok("empty-response", ""), "empty response", None),
    ("blank-response", ok("blank-response", "  \n\t "), "empty response", None),
    ("empty-context", ok("empty-context", "It is 330 m tall.", context=""), None, "empty context"),
    ("empty-context-list", ok("empty-context-list", "It is 330 m tall.", context=[]), None, "empty context"),
    (
        "long-context",
        ok("long-context", "It is 330 m tall.", context="The tower is tall and old. " * 400),
        None,
        "context truncated",
    ),
    (None, "{this is not json", "not valid JSON", None),
    (None, "[1, 2, 3]", "expected a JSON object", None),
    ("no-response", json.dumps({"id": "no-response", "context": "c"}), "missing 'response'", None),
    ("no-context", json.dumps({"id": "no-context", "response": "r."}), "missing 'context'", None),
    (
        "int-response",
        json.dumps({"id": "int-response", "context": "c", "response": 5}),
        "'response' must be a string",
        None,
    ),
    ("bad-chunks", json.dumps({"id": "bad-chunks", "context": ["a", 3], "response": "r."}), "only strings", None),
    (
        "bad-question",
        json.dumps({"id": "bad-question", "context": "c", "response": "r.", "question": ["q"]}),
        "'question' must be a string",
        None,
    ),
    (None, json.dumps({"id": {"a": 1}, "context": "c", "response": "r."}), "'id' must be a string or number", None),
    (None, '{"id": NaN, "context": "c", "response": "r."}', "'id' must be a finite number", None),
    (
        "surrogate",
        '{"id": "surrogate", "context": "c", "response": "abc \\ud800 def."}',
        "unpaired UTF-16 surrogate",
        None,
    ),
    ("good", ok("good", "A second row with the same id."), None, 'duplicate id "good": line 1 already used it'),
    ("no-boundary", ok("no-boundary", "it is three hundred and thirty metres tall and it opened in 1889"), None, None),
    ("huge-sentence", ok("huge-sentence", "the tower is very tall " * 200), "split the response", None),
    ("long-sentence", ok("long-sentence", "the tower is tall and old and made of iron " * 12 + "indeed."), None, None),
    ("chinese", ok("chinese", "埃菲尔铁塔于1889年完工。它高330米。"), None, "not Latin script"),
    ("arabic", ok("arabic", "اكتمل البرج عام 1889. ارتفاعه 330 مترا."), None, "not Latin script"),
    ("german", ok("german", "Der Turm wurde 1889 fertiggestellt. Er ist 330 m hoch."), None, None),
]


@pytest.fixture(scope="module")
def scored(tiny_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hardening")
    inp, out = tmp / "in.jsonl", tmp / "out.jsonl"
    lines = [line.encode("utf-8") for _, line, _, _ in CASES]
    lines.insert(7, b'{"id": "bad-utf8", "context": "\xff\xfe", "response": "r."}')  # invalid UTF-8
    inp.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.MonkeyPatch.context() as mp:  # module fixtures run before conftest's per-test cache isolation
        mp.setenv("SYNCHECK_CACHE", str(tmp_path_factory.getbasetemp() / "syncheck-cache"))
        result = CliRunner().invoke(
            main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--batch-size", "3"]
        )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return rows, result.output


def expected_cases():
    cases = list(CASES)
    cases.insert(7, ("bad-utf8", None, "not valid UTF-8", None))
    return cases


def test_no_row_is_lost_and_order_is_kept(scored):
    rows, _ = scored
    cases = expected_cases()
    assert len(rows) == len(cases)
    assert [r["id"] for r in rows] == [c[0] for c in cases]


@pytest.mark.parametrize(
    "index", range(len(CASES) + 1), ids=[c[0] or f"line-{i + 1}" for i, c in enumerate(expected_cases())]
)
def test_each_bad_input_gets_a_clear_error_or_warning(scored, index):
    rows, _ = scored
    rid, _, error, warning = expected_cases()[index]
    row = rows[index]
    if error is None:
        assert row["error"] is None, row["error"]
        assert row["sentences"], "a row without an error must have scored sentences"
    else:
        assert error in (row["error"] or ""), row["error"]
        assert row["sentences"] == []
    if warning is None:
        assert not any("duplicate" in w or "Latin" in w for w in row["warnings"]), row["warnings"]
    else:
        assert any(warning in w for w in row["warnings"]), row["warnings"]


def test_specific_shapes_of_hard_rows(scored):
    rows, output = scored
    by_id = {}
    for r in rows:
        by_id.setdefault(r["id"], r)
    assert len(by_id["no-boundary"]["sentences"]) == 1
    assert len(by_id["long-sentence"]["sentences"]) == 1
    assert "model window of 512 tokens" in by_id["huge-sentence"]["error"]
    assert "line 8" in rows[7]["error"]  # the invalid UTF-8 line names its line
    assert f"{len(rows)} rows, " in output


def test_features_are_never_nan(scored):
    rows, _ = scored
    for r in rows:
        for s in r["sentences"]:
            assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in s["features"].values()), s


def test_a_nan_feature_becomes_an_error_row_not_a_null(tiny_tokenizer):
    import torch

    from syncheck.io import dumps_row
    from syncheck.model.models import load_model
    from syncheck.scorer import Scorer

    model = make_model(len(tiny_tokenizer), seed=3)
    with torch.no_grad():
        model.lm_head.weight[5].fill_(float("nan"))
    scorer = Scorer(load_model(model, tiny_tokenizer, name="nan-llama"), lid=None)
    result = scorer.score(context=CTX, question="How tall?", response="It is 330 m tall.", id="n")
    assert result.sentences == [] and "non-finite feature values" in result.error
    json.loads(dumps_row(result.to_json()), parse_constant=_no_constants)


def _no_constants(name):
    raise AssertionError(f"the output holds a bare {name}")


def test_writer_guard_turns_nan_and_null_into_errors(tmp_path):
    good = {
        "id": 1,
        "sentences": [{"text": "a", "start": 0, "end": 1, "features": {"min_prob": 0.5}}],
        "warnings": [],
        "error": None,
    }
    nan = {
        "id": 2,
        "sentences": [{"text": "a", "start": 0, "end": 1, "features": {"min_prob": float("nan")}}],
        "warnings": ["w"],
        "error": None,
    }
    null = {
        "id": 3,
        "sentences": [{"text": "a", "start": 0, "end": 1, "features": {"min_prob": None}, "score": 0.2}],
        "warnings": [],
        "error": None,
    }
    assert guard_row(good) is good
    for row in (nan, null):
        fixed = guard_row(row)
        assert fixed["sentences"] == [] and "sentence 1 feature min_prob" in fixed["error"]
    assert guard_row(nan)["warnings"] == ["w"]
    path = tmp_path / "o.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        RowWriter(f, group_size=2).write_all([good, nan, null])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    for line in lines:
        json.loads(line, parse_constant=_no_constants)


# ---------------------------------------------------------------------------- resume
def test_prepare_resume_drops_a_truncated_last_line_and_checks_ids(tmp_path):
    out = tmp_path / "out.jsonl"
    rows = [json.dumps({"id": i, "sentences": [], "warnings": [], "error": None}) for i in ("a", "b", "c")]
    out.write_text("\n".join(rows) + '\n{"id": "d", "sent', encoding="utf-8")
    assert prepare_resume(out, ["a", "b", "c", "d", "e"]) == 3
    assert out.read_text(encoding="utf-8") == "\n".join(rows) + "\n"
    with pytest.raises(ResumeError, match='row 2 has id "b" but input row 2 has id "x"'):
        prepare_resume(out, ["a", "x", "c"])
    with pytest.raises(ResumeError, match="has only 2"):
        prepare_resume(out, ["a", "b"])
    with pytest.raises(ResumeError, match="row 1 has id"):
        prepare_resume(out, [1, "b", "c"])  # 1 vs "a": same position, other id
    assert prepare_resume(tmp_path / "missing.jsonl", ["a"]) == 0
    out.write_text('{"id": "a"}\ngarbage\n{"id": "c"}\n', encoding="utf-8")
    with pytest.raises(ResumeError, match="line 2 is not a JSON row"):
        prepare_resume(out, ["a", "b", "c"])


def test_resume_refuses_another_input(tiny_dir, tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(ok("x", "It is tall.") + "\n", encoding="utf-8")
    out.write_text(json.dumps({"id": "other", "sentences": [], "warnings": [], "error": None}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--resume"])
    assert result.exit_code != 0 and "written from another input" in result.output


def test_killed_run_resumes_to_the_same_bytes(tiny_dir, tmp_path):
    """Kill `syncheck score` mid-run (SIGKILL), resume, compare with an uninterrupted run byte for byte."""
    n_rows, batch = 80, 2
    inp = tmp_path / "in.jsonl"
    lines = [ok(f"r{i}", "It is 330 m tall. It opened in 1889. " * (1 + i % 4)) for i in range(n_rows)]
    lines[5] = "{broken"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [
        sys.executable, "-c", "from syncheck.cli import main; main()", "score", str(inp), "--model", str(tiny_dir),
        "--batch-size", str(batch), "--no-lid",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    full = tmp_path / "full.jsonl"
    subprocess.run([*cmd, "-o", str(full)], check=True, env=env, capture_output=True, timeout=300)

    part = tmp_path / "part.jsonl"
    proc = subprocess.Popen([*cmd, "-o", str(part)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if part.exists() and part.read_bytes().count(b"\n") >= 6:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be interrupted; give it more rows"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = part.read_bytes().count(b"\n")
    assert 6 <= kept < n_rows

    subprocess.run([*cmd, "-o", str(part), "--resume"], check=True, env=env, capture_output=True, timeout=300)
    assert part.read_bytes() == full.read_bytes()
