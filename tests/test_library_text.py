"""The installed packages speak to users: no error, docstring, comment or ``--help`` names ``benchmarks``, which is
not installed (errors point to ``syncheck calibrate`` / ``syncheck train``; measured figures are stated or cite
RESULTS.md in the source repository)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("features", "syncheck", "fod")
WORD = re.compile(r"\bbenchmarks\b", re.IGNORECASE)


def test_library_never_names_benchmarks():
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for package in LIBRARY for path in sorted((ROOT / package).rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if WORD.search(line)]
    assert not hits, "the library names `benchmarks` (not installed for users):\n" + "\n".join(hits)


def test_check_help_states_no_benchmark_paths():
    from click.testing import CliRunner

    from syncheck.cli.check import check

    text = CliRunner().invoke(check, ["--help"], terminal_width=200).output
    assert "Usage:" in text
    for bad in ("benchmark", "RESULTS.md", ".py"):
        assert bad not in text, f"`syncheck check --help` names {bad!r}"
