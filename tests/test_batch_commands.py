"""The batch commands never lose or hide a failure: ``syncheck check --resume`` continues a killed run to the same
bytes, its rows carry the warnings reading them gave, and ``score``, ``check`` and ``fod generate --input`` exit 1,
saying how many failed, when every row failed."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_fod_cli_input import QUESTIONS, scripted  # noqa: F401  (the fixture: the scripted mock model)
from test_fod_cli_input import run as fod_run

from syncheck.cli import main

CHECK = ["--relevance", "bm25", "--nli", "lexical"]  # no model to load
GOOD = [{"id": f"r{i}", "context": ["Paris is the capital of France.", "The Seine runs through it."],
         "question": "What is the capital of France?", "response": f"Paris{'!' * i}"} for i in range(5)]
BAD = ["{not json", json.dumps({"id": "x", "context": "c"}), json.dumps({"id": "y", "response": "r"})]


def write(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def check(*args):
    return CliRunner().invoke(main, ["check", *map(str, args), *CHECK])


def test_check_resumes_a_killed_run_to_the_same_bytes(tmp_path):
    inp, full, part = write(tmp_path / "in.jsonl", [*GOOD, BAD[0]]), tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert check(inp, "-o", full).exit_code == 0
    data = full.read_bytes()
    lines = data.split(b"\n")
    part.write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][:7])  # killed while writing the third row
    resumed = check(inp, "-o", part, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert part.read_bytes() == data
    assert "resuming: 2 of 6 rows already in" in resumed.output and "2 kept from the interrupted run" in resumed.output
    other = write(tmp_path / "other.jsonl", [{**GOOD[0], "id": "z"}])
    refused = check(other, "-o", part, "--resume")
    assert refused.exit_code != 0 and "drop --resume" in refused.output
    assert check(inp, "--resume").exit_code == 2  # it needs -o


def test_check_rows_carry_their_warnings(tmp_path):
    inp, out = write(tmp_path / "in.jsonl", [GOOD[0], GOOD[0], BAD[1]]), tmp_path / "out.jsonl"
    assert check(inp, "-o", out).exit_code == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["warnings"] for r in rows[:1]] == [[]] and "duplicate id" in rows[1]["warnings"][0]
    assert rows[2]["warnings"] == [] and rows[2]["error"]
    assert list(rows[0]) == ["id", "factuality", "sources", "best_source", "warnings", "error"]


def test_check_exits_1_when_every_row_failed_and_says_how_many(tmp_path):
    out = tmp_path / "out.jsonl"
    failed = check(write(tmp_path / "bad.jsonl", BAD), "-o", out)
    assert failed.exit_code == 1
    assert "3 rows, 3 with errors" in failed.output and "every row failed (3 of 3)" in failed.output
    assert "not valid JSON" in failed.output  # the first error
    assert len(out.read_text().splitlines()) == 3  # every row is still written, with its error
    assert check(write(tmp_path / "mixed.jsonl", [*BAD, GOOD[0]]), "-o", out).exit_code == 0
    # resumed: the kept rows count too
    part = tmp_path / "part.jsonl"
    part.write_text(out.read_text().splitlines()[0] + "\n")
    assert check(write(tmp_path / "mixed2.jsonl", BAD), "-o", part, "--resume").exit_code == 1
    from syncheck.cli.common import ALL_ROWS_FAILED_EXIT

    assert ALL_ROWS_FAILED_EXIT == 1


def test_score_exits_1_when_every_row_failed(tiny_dir, tmp_path):
    result = CliRunner().invoke(main, ["score", write(tmp_path / "bad.jsonl", BAD), "-o", str(tmp_path / "o.jsonl"),
                                       "--model", str(tiny_dir)])
    assert result.exit_code == 1 and "every row failed (3 of 3)" in result.output
    empty = CliRunner().invoke(main, ["score", write(tmp_path / "empty.jsonl", []), "--model", str(tiny_dir)])
    assert empty.exit_code == 0  # nothing failed


def test_fod_generate_input_exits_1_when_every_row_failed(scripted, tmp_path):  # noqa: F811
    bad = write(tmp_path / "q.jsonl", [QUESTIONS[1], "{not json"])
    result = fod_run("--input", bad, "-o", tmp_path / "a.jsonl", "--method", "greedy")
    assert result.exit_code == 1 and "every row failed (2 of 2)" in result.stderr
    good = fod_run("--input", write(tmp_path / "q2.jsonl", [QUESTIONS[0], QUESTIONS[1]]), "-o", tmp_path / "b.jsonl",
                   "--method", "greedy")
    assert good.exit_code == 0 and "2 rows, 1 with errors" in good.stderr
