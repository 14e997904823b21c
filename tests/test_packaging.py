"""The wheel carries what the package needs at run time: pyproject.toml finds packages and package data by pattern, so
setuptools warns of nothing, and its file list holds the live page, the report templates and every file the package
keeps under ``syncheck/data`` (every shipped model, :mod:`syncheck.shipped_models`, and the LID corpus).

The list is setuptools' own (``build_py``'s outputs for pyproject.toml), computed in process: building the wheel itself
takes more than a minute of compression, and ``build_py`` decides what goes into it."""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "syncheck" / "data"


@pytest.fixture(scope="module")
def wheel_files() -> tuple[set[str], list[str]]:
    """(the files a wheel of this checkout holds, relative to its root; setuptools' warnings while listing them)."""
    setuptools_config = pytest.importorskip("setuptools.config.pyprojecttoml")
    from setuptools.dist import Distribution

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dist = setuptools_config.apply_configuration(Distribution(), "pyproject.toml")
            dist.script_name = "setup.py"
            build_py = dist.get_command_obj("build_py")
            build_py.ensure_finalized()
            files = {Path(os.path.relpath(f, build_py.build_lib)).as_posix()
                     for f in build_py.get_outputs(include_bytecode=False)}
    finally:
        os.chdir(here)
    setuptools_dir = str(Path(setuptools_config.__file__).parents[1])
    notes = [f"{w.category.__name__}: {str(w.message).strip().splitlines()[0]}" for w in caught
             if str(w.filename).startswith(setuptools_dir)]
    return files, notes


def shipped_data() -> list[str]:
    """Every file under syncheck/data that git tracks (every file there outside a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "syncheck/data"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        names = [name for name in out.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        names = []
    return names or [p.relative_to(ROOT).as_posix() for p in DATA.rglob("*") if p.is_file()
                     and "__pycache__" not in p.parts]


def test_setuptools_warns_of_nothing(wheel_files):
    _, notes = wheel_files
    assert not notes, "setuptools warns while listing the wheel (find packages and data by pattern in " \
                      "pyproject.toml's [tool.setuptools.packages.find] and package-data):\n" + "\n".join(notes)


def test_the_wheel_holds_the_live_page_and_the_templates(wheel_files):
    files, _ = wheel_files
    static = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "syncheck" / "serve" / "static").iterdir()
                    if p.is_file())
    templates = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "syncheck" / "templates").glob("*.j2"))
    assert "syncheck/serve/static/index.html" in static and templates
    missing = [f for f in static + templates if f not in files]
    assert not missing, f"the wheel would leave out: {missing}"


def test_the_wheel_holds_every_shipped_model(wheel_files):
    files, _ = wheel_files
    data = shipped_data()
    assert any(f.endswith(".safetensors") for f in data) and any("/verifier/" in f for f in data)
    missing = [f for f in data if f not in files]
    assert not missing, f"the wheel would leave out shipped model files: {missing}"


def test_the_wheel_holds_every_module(wheel_files):
    files, _ = wheel_files
    modules = [p.relative_to(ROOT).as_posix() for package in ("syncheck", "fod", "features")
               for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts]
    missing = [m for m in modules if m not in files]
    assert not missing, f"the wheel would leave out modules: {missing}"
    assert not [f for f in files if f.startswith(("tests/", "benchmarks/"))], "tests and benchmarks stay out"
