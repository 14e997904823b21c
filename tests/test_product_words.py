"""The repository speaks of the product: no tracked file outside the benchmark run logs names how the work was
organised (work-unit numbers, tracker numbers, the papers' seed files), only dates, commits and commands."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# built from pieces so that this file does not match itself
PATTERNS = [re.compile(p, re.I) for p in (r"\bst" + r"op \d+\b", r"\bis" + r"sue #?\d+\b", r"\bse" + r"ed 00\d\b",
                                          r"\bsit" + r"ting\b")]
#: quoted data, not prose: a HaluEval answer quoted in RESULTS.md
ALLOWED = ("successful training se" + "ssion",)


def tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = []
    for name in out.splitlines():
        if name.startswith("benchmarks/runs/") or not name.endswith((".py", ".md", ".toml", ".yml", ".yaml", ".sh",
                                                                    ".txt", ".cfg", ".json", ".html", ".j2")):
            continue
        files.append(ROOT / name)
    return files


def test_no_tracked_file_names_how_the_work_was_organised():
    hits = []
    for path in tracked_text_files():
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if any(a in line for a in ALLOWED):
                continue
            for pattern in PATTERNS:
                if pattern.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "say what the product does, with a date and commit, instead of:\n" + "\n".join(hits[:20])
