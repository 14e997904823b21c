"""Which aggregator was calibrated for which model: the registry of calibrations in the cache.

``syncheck calibrate`` registers the aggregator it fits under the model's
fingerprint (:func:`syncheck.model.fingerprint.model_fingerprint`), and
``Scorer(model)`` looks the fingerprint up, so a calibrated aggregator is used
with no flag, by whatever name or path the model is loaded again.

Registry: ``<cache>/calibrations/index.json`` (see :func:`syncheck.cache.cache_dir`),
a list of ``{"model", "fingerprint", "path", "created"}``; the newest entry of
a fingerprint wins. A leaf of ``syncheck``: it reads and writes that file and imports only :mod:`syncheck.cache`,
so it stands on a floor of its own, below the rest of :mod:`syncheck.calibration` (``tests/test_imports.py``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from syncheck.cache import cache_dir, slug


def calibrations_dir() -> Path:
    """Where calibrations and their index live: ``<cache>/calibrations``."""
    return cache_dir() / "calibrations"


def default_calibration_dir(model_name: str, fingerprint: str) -> Path:
    """Where ``syncheck calibrate`` writes when not given ``-o``."""
    return calibrations_dir() / f"{slug(model_name)}-{fingerprint}"


def _index_path() -> Path:
    return calibrations_dir() / "index.json"


def list_calibrations() -> list[dict[str, Any]]:
    """Registered calibrations, oldest first (each ``model``, ``fingerprint``, ``path``, ``created``, ``exists``)."""
    path = _index_path()
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8")).get("calibrations", [])
    except (json.JSONDecodeError, AttributeError):
        raise ValueError(f"{path} is not a calibration index; delete it and run `syncheck calibrate` again") from None
    return [{**e, "exists": (Path(e["path"]) / "meta.json").is_file()} for e in entries]


def register_calibration(model_name: str, fingerprint: str, path: str | Path) -> dict[str, Any]:
    """Record that the aggregator in ``path`` was calibrated for the model with ``fingerprint``."""
    entry = {"model": str(model_name), "fingerprint": str(fingerprint), "path": str(Path(path).resolve()),
             "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    entries = [{k: v for k, v in e.items() if k != "exists"} for e in list_calibrations()]
    entries = [e for e in entries if not (e["fingerprint"] == entry["fingerprint"] and e["path"] == entry["path"])]
    entries.append(entry)
    index = _index_path()
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"calibrations": entries}, indent=1), encoding="utf-8")
    tmp.replace(index)  # atomic: a concurrent reader sees the old or the new index, never half of one
    return entry


def find_calibration(fingerprint: str) -> Path | None:
    """The newest registered aggregator directory for ``fingerprint`` that still exists, else ``None``."""
    for entry in reversed(list_calibrations()):
        if entry["fingerprint"] == fingerprint and entry["exists"]:
            return Path(entry["path"])
    return None


def calibrations_for_name(model_name: str) -> list[dict[str, Any]]:
    """Registered calibrations made for a model of this name (whatever its fingerprint)."""
    return [e for e in list_calibrations() if e["model"] == str(model_name)]


__all__ = ["calibrations_dir", "calibrations_for_name", "default_calibration_dir", "find_calibration",
           "list_calibrations", "register_calibration"]
