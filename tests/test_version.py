"""``syncheck --version`` prints the version pyproject.toml declares, and ``syncheck.__version__`` agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from click.testing import CliRunner

import syncheck
from syncheck.cli import main

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _pyproject_version() -> str:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]


def test_version_option_prints_pyprojects_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"syncheck {_pyproject_version()}"


def test_package_version_matches_pyproject():
    assert syncheck.__version__ == _pyproject_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", syncheck.__version__)


def test_fod_and_syncheck_print_one_version():
    """One version, from the package metadata: ``fod --version`` names the one ``syncheck --version`` names."""
    import fod
    from fod.cli import main as fod_main

    syncheck_says = CliRunner().invoke(main, ["--version"]).output.split()[-1]
    fod_says = CliRunner().invoke(fod_main, ["--version"]).output.split()[-1]
    assert fod_says == syncheck_says == fod.__version__ == syncheck.__version__
