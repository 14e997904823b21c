"""The build of a probe verifier's directory (:mod:`syncheck.model.probe_verifier`), step by step, each resumable.

1. pairs: the verifier's step (:func:`syncheck.training.verifier_build.prepare_pairs`): the same recipe, the claim-only
   artefact check and the split by source document, with premises cut to the probe's window in the LM's tokens;
2. states: the LM's hidden states of every pair, in a store under ``states/`` keyed by each pair's text
   (:func:`cached_states`): a run cut short resumes at the first missing chunk, and a new recipe on the same model,
   layers and window computes only the pairs it adds (copy or link an earlier directory's ``states/``); the pairs run
   in premise order, so the claims of one premise share its prompt prefix;
3. the head: scikit-learn's logistic regression on the standardised states (:meth:`ProbeHead.fit`), written as
   ``head.json`` with ``manifest.json`` (:mod:`features.model_manifest`), and its AUROC on the dev pairs beside the
   claim-only model's.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from syncheck.model.probe_verifier import HEAD, ProbeHead, ProbeStates, write_head
from syncheck.shipped_models import base_licences
from syncheck.training.artefacts import claim_only_auroc
from syncheck.training.pairs import VerifierPair, read_pairs
from syncheck.training.verifier_build import DEV_PAIRS, PAIRS, prepare_pairs
from syncheck.training.verifier_dataset import DataRecipe
from syncheck.training.verifier_training import TrainSettings

#: Pairs per cached states file.
CHUNK = 64
STATES = "states"


def pair_key(pair: VerifierPair) -> str:
    """The key of a pair's states in the store: a hash of its premise and claim (its label does not change them)."""
    return hashlib.sha256(f"{pair.premise}\0{pair.claim}".encode("utf-8")).hexdigest()[:24]


def _stored(directory: Path) -> dict[str, np.ndarray]:
    known: dict[str, np.ndarray] = {}
    for path in sorted(directory.glob("*.npz")):
        if not path.name.startswith("."):
            with np.load(path) as part:
                known.update(zip(map(str, part["keys"]), part["states"]))
    return known


def cached_states(reader: ProbeStates, pairs: Sequence[VerifierPair], directory: Path, key: dict[str, Any],
                  batch_size: int = 8, progress: bool = True) -> np.ndarray:
    """``(n, d)`` states of ``pairs`` (in their order), read from the store ``directory`` where it has them, the
    rest computed in chunks of :data:`CHUNK` and added to it.

    The store is keyed by each pair's text (:func:`pair_key`), so a run cut short resumes at the first missing
    chunk, and a new recipe on the same model computes only the pairs no earlier recipe had.

    Raises:
        FileExistsError: ``directory`` holds states of another model, layers or window.
    """
    from tqdm import tqdm

    directory.mkdir(parents=True, exist_ok=True)
    key_path = directory / "key.json"
    key = json.loads(json.dumps(key))
    if key_path.exists() and json.loads(key_path.read_text(encoding="utf-8")) != key:
        raise FileExistsError(f"{directory} holds states of another model, layers or window; delete it to recompute")
    key_path.write_text(json.dumps(key) + "\n", encoding="utf-8")
    known = _stored(directory)
    keys = [pair_key(p) for p in pairs]
    missing = list({k: p for k, p in zip(keys, pairs) if k not in known}.items())
    files = len(list(directory.glob("[!.]*.npz")))
    for start in tqdm(range(0, len(missing), CHUNK), disable=not progress, desc=f"states ({directory.name})",
                      unit="chunk"):
        chunk = missing[start: start + CHUNK]
        got = reader.states([p.premise for _, p in chunk], [p.claim for _, p in chunk], batch_size)
        tmp = directory / f".{files:06d}.tmp.npz"
        np.savez(tmp, keys=np.array([k for k, _ in chunk]), states=got)
        os.replace(tmp, directory / f"{files:06d}.npz")
        files += 1
        known.update(zip((k for k, _ in chunk), got))
    return np.vstack([known[k] for k in keys]) if keys else np.empty((0, 0))


def in_premise_order(pairs: Sequence[VerifierPair]) -> list[VerifierPair]:
    """The pairs sorted by premise (then claim), so a premise's claims share a batch and its prompt prefix."""
    return sorted(pairs, key=lambda p: (p.premise, p.claim, p.label))


def build_probe(out: str | Path, recipe: DataRecipe, model: str, *, dtype: str = "bfloat16",
                layers: Sequence[int] = (-1, -8), c: float = 0.05, max_premise_tokens: int = 1536,
                batch_size: int = 8, command: str, dev_share: float = 0.05, device: Any = None,
                progress: bool = True, echo: Callable[[str], None] = print, loaded: Any = None) -> dict[str, Any]:
    """Build (or finish building) the probe verifier's directory ``out`` on the LM ``model``; returns its manifest.

    ``loaded`` passes the LM already loaded (``model`` is then only its name in the head).
    """
    from sklearn.metrics import roc_auc_score

    from features.model_manifest import build_manifest, write_manifest
    from syncheck.build_info import build_record, without_machine_paths
    from syncheck.model.models import load_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lm = loaded if loaded is not None else load_model(model, device=device, dtype=dtype)
    reader = ProbeStates(lm, layers=layers, max_premise_tokens=max_premise_tokens, progress=False)
    settings = TrainSettings(base=f"probe:{model}", max_length=max_premise_tokens)
    data = prepare_pairs(out, recipe, settings, dev_share, device, progress, echo, tokenizer=reader.tokenizer)
    key = {"model": model, "dtype": dtype, "layers": list(reader.layers), "max_premise_tokens": max_premise_tokens}
    train, dev = in_premise_order(read_pairs(str(out / PAIRS))), in_premise_order(read_pairs(str(out / DEV_PAIRS)))
    echo(f"states of {len(train)} training and {len(dev)} dev pairs ({model}, layers {list(reader.layers)})")
    x_train = cached_states(reader, train, out / STATES, key, batch_size, progress)
    y_train = np.array([p.label for p in train])
    if len(set(y_train)) < 2:
        raise ValueError(f"the training pairs have one label only ({len(train)} pairs); give more data")
    head = ProbeHead.fit(x_train, y_train, c=c, model=model, dtype=dtype, layers=reader.layers)
    dev_fig: dict[str, Any] = {"dev_pairs": len(dev)}
    y_dev = np.array([p.label for p in dev])
    if len(set(y_dev)) == 2:
        x_dev = cached_states(reader, dev, out / STATES, key, batch_size, progress)
        dev_fig.update(probe_auroc=round(float(roc_auc_score(y_dev, head.predict(x_dev))), 4),
                       claim_only_auroc=round(claim_only_auroc(dev), 4))
    public = {"rows": len(train), **{k: v for k, v in data.items() if k != "key"}}
    public["recipe"] = data["key"]["recipe"]
    public["dev"] = dev_fig
    write_head(head, out)
    manifest = build_manifest(
        out, name=out.resolve().name, kind="probe-verifier", weights=HEAD, files=[HEAD], base=model, dtype=dtype,
        layers=list(reader.layers), c=c, max_premise_tokens=max_premise_tokens,
        training=build_record(command, device), data=without_machine_paths(public), licences=base_licences(model))
    write_manifest(out, manifest)
    echo(f"dev: {dev_fig}")
    return manifest


__all__ = ["CHUNK", "build_probe", "cached_states", "in_premise_order", "pair_key"]
