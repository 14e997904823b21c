"""Where a saved artefact came from, without the machine it was made on.

:data:`__version__` is syncheck's version, read once from the installed package's metadata (pyproject.toml's
``version``: the one place it is written; ``syncheck --version``, ``fod --version`` and ``syncheck.__version__`` all
print it). :func:`source_commit` names the git commit of a syncheck that runs from a checkout (``None`` when
installed from a wheel). :func:`build_environment` names the libraries and the machine a model was trained
with, which decide whether a rebuild is the same file bit for bit; :func:`build_record` gathers what a trained
model's manifest says of its making. :func:`without_machine_paths` reduces paths that only mean something on one
machine (absolute, home-relative or above the working directory) to their file names, so a ``meta.json`` or a
benchmark row can be shared.
"""

from __future__ import annotations

import platform
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


#: The libraries whose versions :func:`build_environment` records.
TRAINING_LIBRARIES = ("torch", "transformers", "numpy", "scikit-learn", "safetensors", "tokenizers")


def build_environment(device: Any = None) -> dict[str, Any]:
    """What a trained model was built with: syncheck's and the :data:`TRAINING_LIBRARIES`' versions (``None`` for one
    not installed), Python, the CPU architecture, torch's intra-op threads and ``device`` (a CUDA device's name).

    Two builds by the same command agree in their figures; they are the same file bit for bit only where these agree
    too (float sums are ordered by the threads and the kernels the hardware picks)."""
    import torch

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    dev = torch.device(device) if device is not None else torch.device("cpu")
    return {
        "syncheck": __version__, "python": platform.python_version(), "machine": platform.machine(),
        **{name: version(name) for name in TRAINING_LIBRARIES},
        "torch_threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else dev.type,
    }


def build_record(command: str, device: Any = None) -> dict[str, Any]:
    """The fields that say how a trained model was made: ``command`` (its paths reduced by
    :func:`without_machine_paths`), the checkout's ``commit`` (:func:`source_commit`), the ``date`` and the
    ``environment`` (:func:`build_environment` on ``device``)."""
    import shlex
    from datetime import date

    return {
        "command": " ".join(shlex.quote(without_machine_paths(arg)) for arg in shlex.split(command)),
        "commit": source_commit(), "date": date.today().isoformat(), "environment": build_environment(device),
    }


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


__all__ = [
    "TRAINING_LIBRARIES", "__version__", "build_environment", "build_record", "package_version", "source_commit",
    "without_machine_paths",
]
