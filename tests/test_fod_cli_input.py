"""`fod generate --input QUESTIONS.jsonl`: one answer row per question, in order, error rows, --resume, usage errors.

Most tests answer with the scripted mock model (its scorer scores by sentence text) put in place of the model
``--model`` names; one answers with the tiny saved model, loaded the way a user's model is.
"""

from __future__ import annotations

import functools
import json

import pytest
from click.testing import CliRunner
from mock_lm import ScriptedLM, make_word_tokenizer, score_by_text, table

import syncheck.scorer
from fod.baselines import METHODS, GreedyGenerator
from fod.cli import METHOD_NAMES, main
from fod.results import ABSTAIN_TEXT
from syncheck.model.models import load_model

#: greedy says "Good. Bad." (Bad scores 0.2); FOD repairs the second sentence to "Fine." (0.95)
SCRIPT = {"": {"Good": 1.0}, "Good.": {" Bad": 0.6, " Fine": 0.4}}
#: the answer each method gives on :data:`SCRIPT` (a method added to fod.baselines is checked for a clean row only)
EXPECTED = {"greedy": "Good. Bad.", "fod": "Good. Fine.", "fod-bt": "Good.", "abstain": ABSTAIN_TEXT}
#: the contexts hold the answers' words, so no answer is off the subject
QUESTIONS = [
    {"id": "a", "context": "The food was good and the service fine, not bad.", "question": "How was it?",
     "response": "ignored"},
    {"id": "b", "context": "  ", "question": "How was it?"},
    {"id": "c", "context": ["The food was good.", "The service was fine, not bad."], "question": "And the service?"},
]
BASE = ["generate", "--model", "scripted", "--aggregator", "none", "--no-check", "--max-new-tokens", "20"]


@pytest.fixture
def scripted(monkeypatch):
    """``--model`` loads the scripted mock model (scored by :func:`mock_lm.score_by_text`); counts the loads."""
    real = syncheck.scorer.Scorer
    loads = []

    def scorer(model, **_settings):
        tok = make_word_tokenizer()
        lm = load_model(ScriptedLM(tok, table(SCRIPT)), tok, name="scripted")
        built = real(lm, lid=None, alignment="lexical", aggregator=None)
        built.featurizer.score_fn = score_by_text
        loads.append(model)
        return built

    monkeypatch.setattr(syncheck.scorer, "Scorer", scorer)
    return loads


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def run(*args):
    return CliRunner().invoke(main, [*BASE, *map(str, args)])


def read_rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_row_per_question_in_order_with_the_error_only_on_the_bad_rows(scripted, tmp_path):
    inp = write_jsonl(tmp_path / "q.jsonl", [*QUESTIONS[:2], "{not json", QUESTIONS[2], {"id": "e", "context": "x"}])
    out = tmp_path / "a.jsonl"
    result = run("--input", inp, "-o", out, "--method", "greedy")
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ["a", "b", None, "c", "e"]
    assert [r["error"] is None for r in rows] == [True, False, False, True, False]
    assert "empty 'context'" in rows[1]["error"] and "not valid JSON" in rows[2]["error"]
    assert "missing 'question'" in rows[4]["error"]
    fields = {"id", "text", "sentences", "method", "trace", "final_check", "warnings", "error"}
    assert all(set(r) >= fields for r in rows)
    assert rows[0]["text"] == rows[3]["text"] == "Good. Bad." and rows[1]["text"] == "" and rows[1]["sentences"] == []
    assert [s["score"] for s in rows[0]["sentences"]] == [0.9, 0.2]
    assert scripted == ["scripted"]  # the model is loaded once for every row
    assert "5 rows, 3 with errors" in result.stderr


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_every_method_answers_a_file(scripted, tmp_path, method):
    out = tmp_path / "a.jsonl"
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", [QUESTIONS[0], QUESTIONS[2]]), "-o", out,
                 "--method", method, "-S", "4", "--temperature", "1.0")  # the candidates EXPECTED was sampled at
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [(r["id"], r["error"], r["method"]) for r in rows] == [("a", None, method), ("c", None, method)]
    if method in EXPECTED:
        assert [r["text"] for r in rows] == [EXPECTED[method]] * 2
    if method == "fod":
        assert rows[0]["trace"]["backtrack"]["text"] == "Bad."


def test_alpha_reaches_fod_as_it_reaches_cad(scripted, tmp_path):
    from fod.cli import ALPHA_METHODS

    assert {"fod", "cad"} <= set(ALPHA_METHODS) and "adacad" not in ALPHA_METHODS
    out = tmp_path / "answers.jsonl"
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1]), "-o", out, "--method", "fod",
                 "--alpha", "1.0")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text().splitlines()[0])["trace"]["alpha"] == 1.0


def test_resume_answers_only_the_rows_missing_from_the_output(scripted, tmp_path):
    inp = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert run("--input", inp, "-o", full, "--method", "fod").exit_code == 0
    lines = full.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 3
    part.write_text("".join(lines[:2]) + lines[2][:25], encoding="utf-8")  # cut in the middle of the last row
    result = run("--input", inp, "-o", part, "--method", "fod", "--resume")
    assert result.exit_code == 0, result.output
    assert part.read_text(encoding="utf-8") == full.read_text(encoding="utf-8")
    assert "resuming: 2 of 3 rows" in result.stderr
    assert "(2 kept from the interrupted run, 1 answered now)" in result.stderr

    # the kept rows are not answered again: a kept row edited by hand stays as it is
    kept = json.loads(lines[0]) | {"text": "kept"}
    part.write_text(json.dumps(kept) + "\n", encoding="utf-8")
    assert run("--input", inp, "-o", part, "--method", "fod", "--resume").exit_code == 0
    assert [r["text"] for r in read_rows(part)] == ["kept", "", "Good. Fine."]


def test_resume_refuses_the_output_of_another_input(scripted, tmp_path):
    out = write_jsonl(tmp_path / "a.jsonl", [{"id": "zz", "text": "", "error": None}])
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS), "-o", out, "--resume")
    assert result.exit_code == 2 and "row 1 has id \"zz\" but input row 1 has id \"a\"" in result.output
    assert scripted == []


def test_a_failing_row_gets_an_error_row_and_the_run_goes_on(scripted, tmp_path, monkeypatch):
    answer = GreedyGenerator.generate

    @functools.wraps(answer)
    def generate(self, *, question=None, context, **kwargs):
        if question == "And the service?":
            raise RuntimeError("the scripted model broke")
        return answer(self, question=question, context=context, **kwargs)

    monkeypatch.setattr(GreedyGenerator, "generate", generate)
    out = tmp_path / "a.jsonl"
    questions = [QUESTIONS[2] | {"id": "c2"}, QUESTIONS[0]]
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", questions), "-o", out, "--method", "greedy")
    assert result.exit_code == 0, result.output
    bad, good = read_rows(out)
    assert "RuntimeError: the scripted model broke" in bad["error"] and "fod generate --context" in bad["error"]
    assert bad["id"] == "c2" and bad["text"] == "" and good["error"] is None and good["text"] == "Good. Bad."


def test_a_settings_error_stops_the_run_in_one_line(scripted, tmp_path):
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS), "--method", "fod", "-S", "1", "-K", "2")
    assert result.exit_code == 2 and "num_beams <= num_samples" in result.output and "Traceback" not in result.output


def test_rows_go_to_standard_output_without_o(scripted, tmp_path):
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1]), "--method", "greedy")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["id"] == "a" and row["text"] == "Good. Bad."


@pytest.mark.parametrize("args, message", [
    ([], "nothing to answer: give --context FILE --question TEXT"),
    (["--context", "{ctx}", "--question", "Q?", "--input", "{inp}"], "--context and --input both given"),
    (["--input", "{inp}", "--question", "Q?"], "--question goes with --context"),
    (["--context", "{ctx}"], "--context needs --question TEXT"),
    (["--context", "{ctx}", "--question", "Q?", "--resume"], "--resume goes with --input"),
    (["--context", "{ctx}", "--question", "Q?", "-o", "{out}"], "-o/--output goes with --input"),
    (["--input", "{inp}", "--resume"], "--resume needs -o OUTPUT.jsonl"),
])
def test_usage_errors_say_how_to_fix_them(scripted, tmp_path, args, message):
    ctx = tmp_path / "ctx.txt"
    ctx.write_text(QUESTIONS[0]["context"], encoding="utf-8")
    paths = {"ctx": ctx, "inp": write_jsonl(tmp_path / "q.jsonl", QUESTIONS), "out": tmp_path / "a.jsonl"}
    result = run(*[a.format(**paths) for a in args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert scripted == []  # refused before loading the model


def test_one_question_prints_its_scored_sentences(scripted, tmp_path):
    ctx = tmp_path / "ctx.txt"
    ctx.write_text(json.dumps(QUESTIONS[2]["context"]), encoding="utf-8")
    result = run("--context", ctx, "--question", "How was it?", "--method", "fod")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Good. Fine.", "", "[0.90] Good.", "[0.95] Fine."]
    assert "backtracked before sentence 2 (score 0.20): Bad." in result.stderr
    as_json = json.loads(run("--context", ctx, "--question", "How was it?", "--method", "greedy", "--json").stdout)
    assert as_json["text"] == "Good. Bad." and "id" not in as_json and "error" not in as_json


def test_a_saved_model_without_scores_answers_a_file(tiny_dir, tmp_path, monkeypatch):
    """The tiny saved model, loaded from its directory; with --aggregator none the sentences carry no score (and
    that is not mistaken for a broken number)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "a.jsonl"
    result = CliRunner().invoke(main, ["generate", "--input", str(write_jsonl(tmp_path / "q.jsonl", QUESTIONS)),
                                       "-o", str(out), "--model", str(tiny_dir), "--aggregator", "none",
                                       "--no-check", "--method", "greedy", "--max-new-tokens", "8"])
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [(r["id"], r["error"] is None) for r in rows] == [("a", True), ("b", False), ("c", True)]
    assert all("score" not in s for r in rows for s in r["sentences"])


def test_the_method_list_is_fod_baselines_own():
    assert set(METHOD_NAMES) == {*METHODS, "fod-bt", "fod-paper"}


def test_support_steers_fod_and_is_refused_for_the_baselines(scripted, tmp_path, monkeypatch):
    import numpy as np

    import fod.support

    class RejectsBad:
        name = "rejects-bad"

        def score(self, premises, claims, batch_size=16):
            return np.array([0.1 if c.endswith("Bad.") else 0.9 for c in claims])

    specs = []
    monkeypatch.setattr(fod.support, "build_support", lambda spec, lm=None: specs.append(spec) or RejectsBad())
    out = tmp_path / "a.jsonl"
    result = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1]), "-o", out, "--method", "fod",
                 "--support", "reader", "-S", "4", "--temperature", "1.0")
    assert result.exit_code == 0, result.output
    row = read_rows(out)[0]
    assert specs == ["reader"] and row["text"] == "Good. Fine." and row["trace"]["backtrack"]["support"] == 0.1
    refused = run("--input", write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1]), "--method", "greedy",
                  "--support", "reader")
    assert refused.exit_code == 2 and "--support steers fod and fod-bt only" in refused.output


def test_decode_sets_what_fod_decodes_on_and_is_refused_for_the_baselines(scripted, tmp_path):
    questions = write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1])
    for given, expected in ((None, "cad"), ("greedy", "greedy")):
        out = tmp_path / f"{given}.jsonl"
        result = run("--input", questions, "-o", out, "--method", "fod",
                     *(("--decode", given) if given else ()))
        assert result.exit_code == 0, result.output
        assert read_rows(out)[0]["trace"]["decode"] == expected
    refused = run("--input", questions, "--method", "cad", "--decode", "greedy")
    assert refused.exit_code == 2 and "--decode sets what fod and fod-bt decode on" in refused.output


def test_fod_paper_runs_the_papers_algorithm_1_at_its_temperature(scripted, tmp_path):
    questions = write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1])
    out = tmp_path / "a.jsonl"
    result = run("--input", questions, "-o", out, "--method", "fod-paper", "-S", "4", "--tau1", "0.7",
                 "--seed", "1")
    assert result.exit_code == 0, result.output
    row = read_rows(out)[0]
    config = row["trace"]["config"]
    assert row["method"] == "fod-paper" and row["text"] == "Good. Fine." and row["trace"]["backtrack"]["text"] == "Bad."
    assert {k: config[k] for k in ("search", "decode", "beam_samples", "beam_answer", "num_samples", "tau1")} == {
        "search": "beam", "decode": "greedy", "beam_samples": "per_beam", "beam_answer": "most_faithful",
        "num_samples": 4, "tau1": 0.7}
    assert config["decoding"]["temperature"] == 1.0 and config["decoding"]["top_p"] == 0.95
    assert [len(step["candidates"]) for step in row["trace"]["steps"]][:1] == [2]  # ceil(S/K) from the one beam
    refused = run("--input", questions, "--method", "fod-paper", "--decode", "cad")
    assert refused.exit_code == 2 and "fod-paper decodes its own way" in refused.output
