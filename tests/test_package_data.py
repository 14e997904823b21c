"""Every file the package keeps under ``syncheck/data`` (aggregators, the verifier, the probe head) is declared in
``pyproject.toml``, so a wheel or a non-editable install carries it."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_data_file_is_in_a_declared_package_and_matched_by_its_globs():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages, globs = set(setup["packages"]), setup["package-data"]
    missing = []
    for path in sorted((ROOT / "syncheck" / "data").rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".py":
            continue
        package = ".".join(path.parent.relative_to(ROOT).parts)
        if package not in packages or not any(fnmatch.fnmatch(path.name, g) for g in globs.get(package, [])):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"add these to pyproject.toml's packages and package-data: {missing}"
