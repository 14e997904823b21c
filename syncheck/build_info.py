"""Where a saved artefact came from, without the machine it was made on.

:data:`__version__` is syncheck's version, read once from the installed package's metadata (pyproject.toml's
``version``: the one place it is written; ``syncheck --version``, ``fod --version`` and ``syncheck.__version__`` all
print it). :func:`source_commit` names the git commit of a syncheck that runs from a checkout (``None`` when
installed from a wheel). :func:`without_machine_paths` reduces paths that only mean something on one machine
(absolute, home-relative or above the working directory) to their file names, so a ``meta.json`` or a benchmark row
can be shared.
"""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_MACHINE_PREFIXES = ("/", "~", "..", "\\")


def package_version() -> str:
    """syncheck's version from the installed package's metadata; from ``pyproject.toml`` beside the package when
    it runs from a checkout that was never installed (``pip install -e .`` installs it)."""
    try:
        return metadata.version("syncheck")
    except metadata.PackageNotFoundError:
        pyproject = _ROOT / "pyproject.toml"
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE) \
            if pyproject.is_file() else None
        return found.group(1) if found else "0+unknown"


__version__ = package_version()


def source_commit(root: str | Path | None = None) -> str | None:
    """The short commit of the checkout syncheck runs from, with ``-dirty`` when tracked files differ from it;
    ``None`` outside a git checkout or without git."""
    root = Path(root) if root is not None else _ROOT
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if changed else head or None


def _reduce(text: str) -> str:
    parts = text.split(",")
    if not any(p.strip().startswith(_MACHINE_PREFIXES) or ":\\" in p for p in parts):
        return text
    return ",".join(Path(p.strip().replace("\\", "/")).name if p.strip() else p for p in parts)


def without_machine_paths(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers, paths) with every absolute, home-relative (``~``) or
    parent-relative (``..``) path reduced to its file name; comma-separated lists of paths are reduced part by part.
    Other strings, and paths inside the working directory, are kept."""
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return _reduce(value)
    if isinstance(value, dict):
        return {k: without_machine_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_machine_paths(v) for v in value]
    return value


__all__ = ["__version__", "package_version", "source_commit", "without_machine_paths"]
