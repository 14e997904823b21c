"""Where syncheck keeps converted models and LID reference sets."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The syncheck cache directory.

    ``$SYNCHECK_CACHE`` if set, else ``$HF_HOME/syncheck``, else
    ``$XDG_CACHE_HOME/syncheck``, else ``~/.cache/syncheck``.
    """
    if os.environ.get("SYNCHECK_CACHE"):
        return Path(os.environ["SYNCHECK_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "syncheck"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "syncheck"


def slug(name: str) -> str:
    """A file-name-safe form of a model name or path."""
    keep = "".join(c if c.isalnum() or c in "-_." else "--" for c in name.strip("/"))
    return keep[-120:] or "model"
