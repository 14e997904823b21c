"""The tree passes ``ruff check .`` (pyproject.toml's [tool.ruff]: pyflakes, pycodestyle, import order)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff_command() -> list[str] | None:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_check_is_clean():
    ruff = ruff_command()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install 'syncheck[test]')")
    proc = subprocess.run([*ruff, "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
