"""A verifier whose weights are the weighted average of other verifiers' (weight-space ensembling).

Verifiers fine-tuned from the same weights (the same base, frozen tensors and head) often lie close enough in weight
space that their average is a verifier too (model soups, Wortsman et al., 2022; WiSE-FT, the same authors, 2022,
for a fine-tuned model and its start); whether it is a better one is for a reading on held-out rows to say. It
costs nothing at scoring time, unlike an ensemble of scores: one forward, as any verifier. A typical use: average
a verifier trained on one's own domain (``--init verifier``) with the shipped one, to keep what the shipped one
knows.

Every tensor is averaged in float32 and stored in float16, as training exports it. The manifest records each input's
whole manifest (its data, command, commit and hash) and weight, so a rebuild is each input's command and then this
one; when the inputs share their training data recipe, it is also the average's ``data.recipe``, and when their
build directories hold the same dev pairs, the average's dev AUROC is measured on them (``data.dev``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

from features.alignment.span_reader import WEIGHTS as READER_WEIGHTS
from features.alignment.verifier import DIRECTORY_KINDS, WEIGHTS
from features.model_manifest import (
    build_manifest,
    checked_file,
    file_sha256,
    read_manifest,
    weights_sha256,
    write_manifest,
)
from syncheck.training.pairs import read_pairs
from syncheck.training.verifier_build import DEV_PAIRS, dev_figures

#: Manifest fields that must agree for an average to be a verifier of the same kind.
SAME = ("head", "base", "frozen", "frozen_sha256", "max_length")


def average_verifiers(directories: Sequence[str | Path], weights: Sequence[float], out: str | Path, *,
                      command: str) -> dict[str, Any]:
    """Write the weighted average of ``directories`` (verifier directories) into ``out``; returns its manifest.

    Raises:
        ValueError: fewer than two verifiers, weights that do not match them or do not sum to 1, or verifiers of
            different kinds (another base, head, frozen tensors or length; the message names the field).
        OSError: a directory's weights are missing or do not match its manifest's sha256.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from syncheck.build_info import build_record

    directories = [Path(d) for d in directories]
    if len(directories) < 2:
        raise ValueError("give at least two verifier directories to average")
    if len(weights) != len(directories) or any(w < 0 for w in weights) or abs(sum(weights) - 1) > 1e-6:
        raise ValueError(f"give one weight per verifier, each >= 0, summing to 1 (got {list(weights)} for "
                         f"{len(directories)} verifiers)")
    manifests = [read_manifest(d, DIRECTORY_KINDS) for d in directories]
    for field in SAME:
        values = {json.dumps(m.get(field, "logit" if field == "head" else None)) for m in manifests}
        if len(values) > 1:
            raise ValueError(f"these verifiers differ in {field!r} ({sorted(values)}); only verifiers trained from "
                             "the same base, with the same head and frozen tensors, can be averaged")
    states = [load_file(str(checked_file(d, m))) for d, m in zip(directories, manifests)]
    names = set(states[0])
    for d, state in zip(directories[1:], states[1:]):
        if set(state) != names or any(state[k].shape != states[0][k].shape for k in names):
            raise ValueError(f"{d}'s tensors differ from {directories[0]}'s in name or shape; only verifiers of the "
                             "same architecture can be averaged")
    averaged = {k: sum(w * s[k].float() for w, s in zip(weights, states)).to(torch.float16).contiguous()
                for k in sorted(names)}
    first = manifests[0]
    weights_file = READER_WEIGHTS if first["kind"] == "span-reader" else WEIGHTS
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(averaged, str(out / weights_file))
    (out / weights_file).chmod(0o644)
    shutil.copyfile(directories[0] / "config.json", out / "config.json")
    recipes = {json.dumps(m.get("data", {}).get("recipe"), sort_keys=True) for m in manifests}
    trained = list({weights_sha256(m): m for m in manifests}.values())  # each input once
    data = {"sources": _once(s for m in trained for s in m["data"]["sources"]),
            "rows": sum(m["data"]["rows"] or 0 for m in trained),
            **({"recipe": first["data"]["recipe"]} if len(recipes) == 1 and "recipe" in first["data"] else {})}
    manifest = build_manifest(
        out, name=out.resolve().name, kind=first["kind"], weights=weights_file, files=[weights_file, "config.json"],
        base=first.get("base"), **{field: first[field] for field in SAME if field in first and field != "base"},
        average_of=[{"weight": w, "manifest": m} for w, m in zip(weights, manifests)],
        training=build_record(command), data=data, licences=_once(x for m in trained for x in m["licences"]))
    write_manifest(out, manifest)
    dev = [d / DEV_PAIRS for d in directories]
    if all(p.exists() for p in dev) and len({file_sha256(p) for p in dev}) == 1:  # built on the same pairs
        manifest["data"]["dev"] = dev_figures(out, read_pairs(str(dev[0])))
        write_manifest(out, manifest)
    return manifest


def _once(items: Iterable[Any]) -> list[Any]:
    """``items`` without repeats, in order."""
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def builds(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifests of the trainings behind a verifier: its own (or each averaged input's), each followed by those of
    the verifier it went on training (``training.init``), recursively, so a chain's last build is rebuilt first."""
    if "average_of" in manifest:
        return [m for part in manifest["average_of"] for m in builds(part["manifest"])]
    init = (manifest.get("training") or {}).get("init")
    return [manifest, *(builds(init) if init else [])]


__all__ = ["SAME", "average_verifiers", "builds"]
