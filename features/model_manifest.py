"""The manifest of a trained model's directory: one schema, ``syncheck-model/1``, for every model syncheck trains and
ships (the aggregators, the verifier, the span reader, the probe verifier).

A model directory holds its files and ``manifest.json``::

    {"format": "syncheck-model/1",
     "name": "verifier",                       # the shipped model's name, or the directory's for one you trained
     "kind": "verifier",                       # one of KINDS
     "purpose": "what it is for, in a line",
     "weights": "verifier.safetensors",        # the file that holds the trained values, one of "files"
     "files": {"verifier.safetensors": {"sha256": "...", "size": 21998066}, "config.json": {...}},
     "base": "packaged:all-MiniLM-L6-v2",      # what it was trained on top of (an encoder, the LM it reads), or null
     "training": {"command": "syncheck verifier train ...", "commit": "c187a56", "date": "...", ...},
     "data": {"sources": [{"name": "...", "licence": "MIT", "rows": 1234}, ...], "rows": 35959,
              "licences": ["MIT"], ...},
     "licences": [{"of": "the base encoder all-MiniLM-L6-v2", "licence": "Apache-2.0"}, ...],
     ...}                                      # and what its kind's loader reads (a verifier's head, frozen tensors)

``files`` lists every file of the model (not the build's by-products: pairs, checkpoints, cached states), each with
its sha256 and size in bytes. The schema is open: a kind adds the fields its loader reads, a training recipe may add
its own, and readers ignore what they do not know. :data:`REQUIRED` are the fields every manifest has.

Directories written before this schema (``syncheck-verifier/1``: the verifier and the span reader, whose weights were
both named ``verifier.safetensors``; ``syncheck-probe/1``: the probe verifier) still load: :func:`read_manifest`
upgrades their manifests in memory (:func:`upgrade_manifest`), and the files keep their old names.

A leaf module (the standard library only): the loaders of :mod:`features.alignment` read it, and so does syncheck.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

#: The format tag of a manifest.
FORMAT = "syncheck-model/1"
#: The manifest's file name in a model directory.
MANIFEST = "manifest.json"
#: The kinds of model, and what each is for (a manifest's ``purpose`` unless its build says more).
KINDS: dict[str, str] = {
    "aggregator": "sentence score: P(faithful) from a sentence's decoding-time features (Scorer(aggregator=DIR))",
    "verifier": "support: P(the context supports the claim), a cross-encoder (alignment verifier:DIR)",
    "span-reader": "support: whether a short answer names the context's answer to its question (alignment reader:DIR)",
    "probe-verifier": "support: P(the context supports the claim) from a frozen LM's hidden states (alignment "
                      "probe:DIR)",
}
#: The fields every manifest has.
REQUIRED = ("format", "name", "kind", "purpose", "weights", "files", "base", "training", "data", "licences")
#: The fields of ``training`` and of ``data`` every manifest has (``commit`` is null for a build from an installed
#: wheel, ``rows`` for an upgraded manifest that did not record it).
TRAINING_REQUIRED = ("command", "commit")
DATA_REQUIRED = ("sources", "rows", "licences")
#: Formats :func:`upgrade_manifest` reads.
VERIFIER_FORMAT_1 = "syncheck-verifier/1"
PROBE_FORMAT_1 = "syncheck-probe/1"
#: The weights file of directories written in those formats (the verifier's and the span reader's alike).
VERIFIER_FORMAT_1_WEIGHTS = "verifier.safetensors"
PROBE_FORMAT_1_HEAD = "head.json"
#: Fields of the old formats that the new one keeps elsewhere (``training``, ``files``) or drops.
_MOVED = ("format", "weights_sha256", "weights_bytes", "head_sha256", "head_bytes", "training", "command", "commit",
          "date", "environment", "data", "model")


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_records(directory: str | Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"sha256", "size"}}`` of the files ``names`` (paths relative to ``directory``, ``/``-separated), in
    name order."""
    directory = Path(directory)
    return {name: {"sha256": file_sha256(directory / name), "size": (directory / name).stat().st_size}
            for name in sorted(names)}


def model_files(directory: str | Path) -> list[str]:
    """Every file under ``directory`` but its manifest (``/``-separated paths relative to it): what a directory that
    holds only its model lists in ``files``."""
    directory = Path(directory)
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                  if p.is_file() and p.relative_to(directory).as_posix() != MANIFEST and "__pycache__" not in p.parts)


def build_manifest(directory: str | Path, *, name: str, kind: str, weights: str, files: Iterable[str],
                   base: str | None, training: Mapping[str, Any], data: Mapping[str, Any],
                   licences: Iterable[Mapping[str, str]] = (), purpose: str | None = None,
                   **fields: Any) -> dict[str, Any]:
    """A manifest of the model in ``directory``: its ``files`` hashed as they are now, ``fields`` (what the kind's
    loader reads) after the common ones. ``data`` gets ``sources``, ``rows`` and ``licences`` where it lacks them
    (:func:`data_summary`).

    Raises:
        ValueError: an unknown ``kind``, or ``weights`` not among ``files``.
    """
    files = sorted(set(files))
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose from {sorted(KINDS)}")
    if weights not in files:
        raise ValueError(f"the weights file {weights!r} is not among the model's files {files}")
    return {"format": FORMAT, "name": name, "kind": kind, "purpose": purpose or KINDS[kind], "weights": weights,
            "files": file_records(directory, files), "base": base, **fields, "training": dict(training),
            "data": data_summary(data), "licences": [dict(x) for x in licences]}


def data_summary(data: Mapping[str, Any], rows: int | None = None) -> dict[str, Any]:
    """``data`` with the schema's ``sources`` (each ``{"name", "licence", "rows"}``; a pairs file's record read
    before its ``file`` was named ``name``), ``rows`` (``rows``, else the sources' sum) and ``licences`` (the sources'
    licences, each once)."""
    out = dict(data)
    sources = []
    for source in out.get("sources") or []:
        source = dict(source)
        if "name" not in source and "file" in source:
            source = {"name": source.pop("file"), **source}
        if "rows" not in source and isinstance(source.get("sources"), dict):
            source["rows"] = sum(int(s.get("rows", 0)) for s in source["sources"].values())
        sources.append(source)
    out["sources"] = sources
    if rows is None and "rows" not in out and sources and all(isinstance(s.get("rows"), int) for s in sources):
        rows = sum(s["rows"] for s in sources)
    out["rows"] = rows if rows is not None else out.get("rows")
    out["licences"] = sorted({str(s["licence"]) for s in sources if s.get("licence")} | set(out.get("licences", [])))
    return out


def upgrade_manifest(old: Mapping[str, Any], name: str | None = None) -> dict[str, Any]:
    """A manifest of an older format (``syncheck-verifier/1``, ``syncheck-probe/1``) in this one; a manifest in this
    format is returned as it is. What the old format lacks stays empty (``sources``, ``licences``) and ``rows`` is what
    it recorded (the training pairs, a reader's answers); ``upgraded_from`` names the old format.

    Raises:
        ValueError: a manifest of no format this syncheck reads (the message says how to get one).
    """
    fmt = old.get("format")
    if fmt == FORMAT:
        return dict(old)
    if fmt not in (VERIFIER_FORMAT_1, PROBE_FORMAT_1):
        raise ValueError(f"not a syncheck model manifest (format {fmt!r}, expected {FORMAT!r}); train the model with "
                         "`syncheck verifier train` (or `syncheck verifier reader`), or upgrade syncheck")
    data = dict(old.get("data") or {})
    training = {k: old[k] for k in ("command", "commit", "date", "environment") if k in old}
    kept = {k: v for k, v in old.items() if k not in _MOVED}
    if fmt == VERIFIER_FORMAT_1:
        kind = "span-reader" if old.get("head") == "span" else "verifier"
        weights, base = VERIFIER_FORMAT_1_WEIGHTS, old.get("base")
        sha, size = old.get("weights_sha256"), old.get("weights_bytes")
        if "training" in old:
            training["settings"] = old["training"]
        rows = data.get("train_pairs", data.get("answers"))
    else:
        kind, weights, base = "probe-verifier", PROBE_FORMAT_1_HEAD, old.get("model")
        sha, size = old.get("head_sha256"), old.get("head_bytes")
        rows = data.get("train_pairs")
    training.setdefault("command", None)
    training.setdefault("commit", None)
    return {"format": FORMAT, "name": name or kind, "kind": kind, "purpose": KINDS[kind], "weights": weights,
            "files": {weights: {"sha256": sha, "size": size}} if sha else {}, "base": base, **kept,
            "training": training, "data": data_summary(data, rows), "licences": [], "upgraded_from": fmt}


def read_manifest(directory: str | Path, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """The manifest of the model directory ``directory``, in this format (an older one upgraded in memory).

    Raises:
        OSError: ``directory`` holds no manifest (the message says how to train a model).
        ValueError: a manifest of no format this syncheck reads, or of a kind other than ``kinds``.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise OSError(f"{path} is missing: {directory} is not a model directory; train one with `syncheck verifier "
                      "train` (or `syncheck verifier reader`)")
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        manifest = upgrade_manifest(old, name=Path(directory).resolve().name)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    kinds = list(kinds) if kinds is not None else None
    if kinds is not None and manifest.get("kind") not in kinds:
        raise ValueError(f"{directory} holds a {manifest.get('kind')} ({path}), not a {' or a '.join(kinds)}")
    return manifest


def write_manifest(directory: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest`` as ``directory``'s ``manifest.json``; returns its path."""
    path = Path(directory) / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path


def checked_file(directory: str | Path, manifest: Mapping[str, Any], name: str | None = None, *,
                 check_hash: bool = True) -> Path:
    """The file ``name`` of a model directory (default: its ``weights``), once it is there and (``check_hash``)
    matches the manifest's sha256.

    Raises:
        OSError: the file is missing, or does not match (the message gives the manifest's command to rebuild it).
    """
    name = name or manifest["weights"]
    path = Path(directory) / name
    command = (manifest.get("training") or {}).get("command") or "the command that trained it"
    if not path.is_file():
        raise OSError(f"{path} is missing; the model directory is incomplete (rebuild it with the manifest's command: "
                      f"{command})")
    expected = (manifest.get("files") or {}).get(name, {}).get("sha256")
    if check_hash and expected and file_sha256(path) != expected:
        raise OSError(f"{path} does not match its manifest's sha256; rebuild it with the manifest's command: "
                      f"{command}")
    return path


def inherited_sources(started: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The data sources a model warm-started from ``started`` learned through it: each of ``started``'s sources
    (its own inherited ones included), marked ``through`` the model that trained on it where not marked already."""
    through = f"{started.get('name')} ({(weights_sha256(started) or '')[:12]})"
    return [{**source, "through": source.get("through", through)}
            for source in (started.get("data") or {}).get("sources") or []]


def weights_sha256(manifest: Mapping[str, Any]) -> str | None:
    """The sha256 of a model's weights file, as its manifest lists it (``None`` where it lists none)."""
    return (manifest.get("files") or {}).get(manifest.get("weights"), {}).get("sha256")


def schema_problems(manifest: Mapping[str, Any], directory: str | Path | None = None) -> list[str]:
    """What a manifest lacks or gets wrong against this schema (empty when nothing): the required fields, the kind,
    the weights among the files, every data source's name, licence and rows; with ``directory``, each listed file's
    sha256 and size, and any file of the directory that the manifest does not list."""
    problems = [f"no {field!r}" for field in REQUIRED if field not in manifest]
    if manifest.get("format") != FORMAT:
        problems.append(f"format {manifest.get('format')!r}, not {FORMAT!r}")
    if manifest.get("kind") not in KINDS:
        problems.append(f"kind {manifest.get('kind')!r} is none of {sorted(KINDS)}")
    files = manifest.get("files") or {}
    if manifest.get("weights") not in files:
        problems.append(f"the weights {manifest.get('weights')!r} are not among the files")
    problems += [f"no training.{k}" for k in TRAINING_REQUIRED if k not in (manifest.get("training") or {})]
    data = manifest.get("data") or {}
    problems += [f"no data.{k}" for k in DATA_REQUIRED if k not in data]
    if not isinstance(data.get("rows"), int):
        problems.append(f"data.rows is {data.get('rows')!r}, not a count")
    for i, source in enumerate(data.get("sources") or []):
        problems += [f"data.sources[{i}] has no {k!r}" for k in ("name", "licence", "rows") if k not in source]
    if not data.get("sources"):
        problems.append("data.sources is empty")
    for i, licence in enumerate(manifest.get("licences") or []):
        problems += [f"licences[{i}] has no {k!r}" for k in ("of", "licence") if k not in licence]
    if directory is not None:
        directory = Path(directory)
        for name, record in files.items():
            path = directory / name
            if not path.is_file():
                problems.append(f"{name} is listed but missing")
            elif (path.stat().st_size, file_sha256(path)) != (record.get("size"), record.get("sha256")):
                problems.append(f"{name} does not match its sha256 and size")
        problems += [f"{name} is in the directory but not listed" for name in model_files(directory)
                     if name not in files]
    return problems


__all__ = ["DATA_REQUIRED", "FORMAT", "KINDS", "MANIFEST", "PROBE_FORMAT_1", "PROBE_FORMAT_1_HEAD", "REQUIRED",
           "TRAINING_REQUIRED", "VERIFIER_FORMAT_1", "VERIFIER_FORMAT_1_WEIGHTS", "build_manifest", "checked_file",
           "data_summary", "file_records", "file_sha256", "inherited_sources", "model_files",
           "read_manifest", "schema_problems",
           "upgrade_manifest", "weights_sha256", "write_manifest"]
