"""Smoke runs of the benchmark scripts (the full runs are not tests)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_offline_throughput_benchmark_runs(capsys):
    from benchmarks.offline_throughput import main

    summary = main(["--limit", "2", "--rounds", "1", "--batch-size", "2"])
    assert set(summary) == {"one pass", "two passes", "full"}
    assert all(v["responses_per_s"] > 0 for v in summary.values())
    assert "| two passes |" in capsys.readouterr().out
