"""The manifest of an aggregator's directory, in the schema every model syncheck ships shares
(:mod:`features.model_manifest`, kind ``aggregator``).

An aggregator is written in steps (:func:`syncheck.aggregators.io.save_aggregator`, then its response verdict and its
final model), so its manifest is written last, by whoever finishes it (``syncheck calibrate``, the scripts that
rebuild the shipped aggregators): :func:`write_aggregator_manifest` hashes the aggregator's own files as they are then
(``meta.json``, the weights, the probes, ``response.json``, ``final/``; a build's by-products beside them, such as
``scored.jsonl``, are left out) and takes the command, the commit, the scoring model and the row count from
``meta.json``. What it cannot read there (the data's sources and their licences, what the aggregator is for) comes
in as arguments, or from a manifest already in the directory, which a rewrite keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from features.model_manifest import MANIFEST, build_manifest, read_manifest, write_manifest
from syncheck.aggregators.io import FINAL_DIR, META_FILE, PROBES_FILE, read_meta
from syncheck.aggregators.response import RESPONSE_FILE

#: The files an aggregator's directory may hold (and ``final/`` the same), the weights first.
AGGREGATOR_FILES = ("model.json", "model.safetensors", "scaler.json", META_FILE, PROBES_FILE, RESPONSE_FILE)


def aggregator_files(directory: str | Path) -> list[str]:
    """The aggregator's own files in ``directory`` (and in its ``final/``), as a manifest lists them."""
    directory = Path(directory)
    return [f"{sub}{name}" for sub in ("", f"{FINAL_DIR}/") for name in AGGREGATOR_FILES
            if (directory / sub / name).is_file()]


def aggregator_manifest(directory: str | Path, *, name: str | None = None, purpose: str | None = None,
                        sources: Iterable[Mapping[str, Any]] | None = None,
                        licences: Iterable[Mapping[str, str]] | None = None, **fields: Any) -> dict[str, Any]:
    """The manifest of the aggregator in ``directory`` (see the module docstring); ``fields`` are added to it.

    Raises:
        FileNotFoundError, ValueError: ``directory`` holds no aggregator (the message says how to write one).
    """
    directory = Path(directory)
    meta = read_meta(directory)
    before = read_manifest(directory, ["aggregator"]) if (directory / MANIFEST).is_file() else {}
    training = dict(meta.get("training") or {})
    weights = "model.safetensors" if meta["kind"] == "mlp" else "model.json"
    data = {**before.get("data", {}), "description": training.get("data"), "rows": training.get("sentences")}
    if sources is not None:
        data["sources"] = [dict(s) for s in sources]
    own = ("format", "name", "kind", "purpose", "weights", "files", "base", "training", "data", "licences")
    kept = {k: v for k, v in before.items() if k not in own}
    earlier = before.get("training") or {}
    return build_manifest(
        directory, name=name or before.get("name") or directory.resolve().name, kind="aggregator",
        purpose=purpose or before.get("purpose"), weights=weights, files=aggregator_files(directory),
        base=(meta.get("scorer") or {}).get("model"),
        training={**earlier, "command": training.get("command"), "commit": meta.get("commit") or earlier.get("commit")},
        data=data, licences=list(licences) if licences is not None else before.get("licences", []),
        **{**kept, **fields})


def write_aggregator_manifest(directory: str | Path, **given: Any) -> dict[str, Any]:
    """Write :func:`aggregator_manifest` of ``directory`` (arguments as there) into it; returns it."""
    manifest = aggregator_manifest(directory, **given)
    write_manifest(directory, manifest)
    return manifest


__all__ = ["AGGREGATOR_FILES", "aggregator_files", "aggregator_manifest", "write_aggregator_manifest"]
