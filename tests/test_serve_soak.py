"""``benchmarks.serve_soak --smoke``: a few dozen mixed requests (plain, FOD, offline scoring, clients that hang up,
malformed ones) against a real ``syncheck serve`` on the tiny model; nothing fails, nothing stays held."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def test_the_plan_holds_exact_shares_and_a_wrong_key_only_with_a_key():
    from benchmarks.serve_soak import DEFAULT_MIX, parse_mix, plan

    requests = plan(1000, parse_mix(DEFAULT_MIX), 0.10, 0.05, None, seed=0)
    kinds = Counter(r["kind"] for r in requests)
    assert len(requests) == 1000 and kinds["disconnect"] == 100
    assert kinds["bad_json"] + kinds["missing_field"] + kinds["too_long"] == 50 and "wrong_key" not in kinds
    assert kinds["plain"] + kinds["fod"] + kinds["score"] == 850 and kinds["fod"] >= 120 and kinds["score"] >= 200
    assert [r["index"] for r in requests] == list(range(1000))
    keyed = Counter(r["kind"] for r in plan(100, parse_mix(DEFAULT_MIX), 0.10, 0.05, "k", seed=0))
    assert keyed["wrong_key"] >= 1
    assert plan(40, parse_mix(DEFAULT_MIX), 0.1, 0.05, None, seed=1) == plan(40, parse_mix(DEFAULT_MIX), 0.1, 0.05,
                                                                           None, seed=1)
    with pytest.raises(ValueError, match="--mix"):
        parse_mix("plain=1,beam=2")


def test_the_smoke_soak_runs_clean_against_a_real_server(tiny_dir, tmp_path, capsys):
    from benchmarks.serve_soak import main

    out = tmp_path / "soak.json"
    summary = main(["--smoke", "--model", str(tiny_dir), "--malformed", "0.1", "--settle", "20", "--out", str(out),
                    "--results-md", str(tmp_path / "RESULTS.md")])
    whole = summary["whole_run"]
    assert whole["requests"] == 30 and whole["server_errors"] == 0 and whole["other_failures"] == 0
    assert summary["held_after_run"]["running"] == 0 and summary["held_after_run"]["queued"] == 0
    assert summary["malformed"] == 3 and summary["malformed_as_expected"] == 3
    assert summary["hung_up"] >= 1 and summary["cancelled_by_server"] >= 1
    assert summary["first_tenth"]["latency_p95_s"] > 0 and summary["rss_end_mb"] > 0
    saved = json.loads(out.read_text())
    assert {r["kind"] for r in saved["rows"]} >= {"plain", "fod", "score", "disconnect", "too_long"}
    assert saved["run"]["commit"] is None or saved["run"]["commit"]
    printed = capsys.readouterr().out
    assert "5xx on well-formed requests: 0 (goal 0)" in printed
    assert "Soak: syncheck serve over a long run" in (tmp_path / "RESULTS.md").read_text()
