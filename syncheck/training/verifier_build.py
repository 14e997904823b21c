"""The whole build of a verifier directory, step by step, each step skipped when its output is already there.

1. pairs: :func:`syncheck.training.verifier_dataset.build_pairs`, cut to the scorer's windows, thinned by the claim-only
   artefact check, split into train and dev by source document (``pairs.jsonl``, ``dev_pairs.jsonl``,
   ``data.json``);
2. training: :func:`syncheck.training.verifier_training.fit` (``checkpoints/``, resumable);
3. export: ``verifier.safetensors``, ``config.json`` and ``manifest.json`` (:mod:`features.model_manifest`), with the
   dev AUROC of the exported (float16-stored) verifier beside the claim-only model's on the same dev pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from syncheck.training.artefacts import claim_only_auroc, rebalance
from syncheck.training.pair_files import shipping_problems
from syncheck.training.pairs import fitted, read_pairs, write_pairs
from syncheck.training.verifier_dataset import DataRecipe, build_pairs, data_sources, named_sources, split_groups
from syncheck.training.verifier_training import TrainSettings, base_model, export, fit

PAIRS, DEV_PAIRS, DATA = "pairs.jsonl", "dev_pairs.jsonl", "data.json"
#: Dev pairs a kind needs for its own AUROC in :func:`dev_figures`.
MIN_KIND_PAIRS = 20


def _counts(pairs) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for p in pairs:
        out.setdefault(p.kind, {"0": 0, "1": 0})[str(p.label)] += 1
    return dict(sorted(out.items()))


def prepare_pairs(out: Path, recipe: DataRecipe, settings: TrainSettings, dev_share: float, device: Any,
                  progress: bool, echo: Callable[[str], None], tokenizer: Any = None) -> dict[str, Any]:
    """Step 1 (skipped when ``data.json`` holds the same recipe); returns ``data.json``'s content. Premises are cut
    to ``settings.max_length`` tokens of ``tokenizer`` (default: the base's)."""
    key = json.loads(json.dumps({"recipe": recipe.to_json(), "base": settings.base,
                                 "max_length": settings.max_length, "dev_share": dev_share}))  # as data.json reads back
    data_path = out / DATA
    if data_path.exists():
        data = json.loads(data_path.read_text(encoding="utf-8"))
        if data.get("key") == key and (out / PAIRS).exists():
            echo(f"pairs: reusing {out / PAIRS}")
            return data
        raise FileExistsError(f"{out} holds pairs of another recipe or settings; pass a new output directory (or "
                              f"delete {data_path} to rebuild the pairs there)")

    def load_writer(name: str):
        from syncheck.model.models import load_model

        return load_model(name, device=device)

    pairs, skipped = build_pairs(recipe, load_writer, progress)
    for reason in skipped[:5]:
        echo(f"skipped: {reason}")
    if tokenizer is None:
        _, tokenizer = base_model(settings)
    pairs = list(fitted(pairs, tokenizer, settings.max_length))
    kept, check = rebalance(pairs, recipe.seed, thinning=recipe.thinning)
    echo(f"claim-only artefact check: AUROC {check.auroc_before:.3f} on {check.n_before} pairs, "
         f"{check.auroc_after:.3f} on the {check.n_after} kept")
    train, dev = split_groups(kept, dev_share, recipe.seed)
    if not train:
        raise ValueError(f"no training pairs are left of {len(pairs)} after the claim-only artefact check and the dev "
                         "split: the claims alone give their labels away (give each claim with both labels, against "
                         "different premises) or there are too few pairs")
    write_pairs(train, str(out / PAIRS))
    write_pairs(dev, str(out / DEV_PAIRS))
    data = {"key": key, "skipped_records": len(skipped),
            "artefact_check": {"claim_only_auroc_before": round(check.auroc_before, 4),
                               "claim_only_auroc_after": round(check.auroc_after, 4),
                               "pairs_before": check.n_before, "pairs_after": check.n_after,
                               "rounds": check.rounds, "passed": check.passed},
            "train_pairs": len(train), "dev_pairs": len(dev), "kinds": _counts(train),
            "sources": data_sources(recipe, train), "rows": len(train)}
    if recipe.pairs:
        data["licence_problems"] = shipping_problems(recipe.pairs, recipe.drop_sources)
    data_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def dev_figures(directory: Path, dev) -> dict[str, Any]:
    """AUROC of the exported verifier and of the claim-only model on the dev pairs; with several kinds of pairs, also
    the verifier's AUROC per kind (kinds of at least :data:`MIN_KIND_PAIRS` pairs with both labels) and their mean."""
    from sklearn.metrics import roc_auc_score

    from features.alignment.verifier import VerifierScorer

    y = np.array([p.label for p in dev])
    if len(dev) == 0 or len(set(y)) < 2:
        return {"dev_pairs": len(dev)}
    scores = VerifierScorer(directory, progress=False).score([p.premise for p in dev], [p.claim for p in dev])
    out = {"dev_pairs": len(dev), "verifier_auroc": round(float(roc_auc_score(y, scores)), 4),
           "claim_only_auroc": round(claim_only_auroc(dev), 4)}
    kinds = np.array([p.kind for p in dev])
    by_kind = {str(k): round(float(roc_auc_score(y[kinds == k], scores[kinds == k])), 4) for k in sorted(set(kinds))
               if (kinds == k).sum() >= MIN_KIND_PAIRS and len(set(y[kinds == k])) == 2}
    if len(by_kind) > 1:
        out["verifier_auroc_by_kind"] = by_kind
        out["verifier_auroc_mean_over_kinds"] = round(float(np.mean(list(by_kind.values()))), 4)
    return out


def build_verifier(out: str | Path, recipe: DataRecipe, settings: TrainSettings, *, command: str,
                   dev_share: float = 0.05, device: Any = None, progress: bool = True,
                   echo: Callable[[str], None] = print,
                   labelled_as: tuple[str | None, str | None] = (None, None)) -> dict[str, Any]:
    """Build (or finish building) the verifier directory ``out``; returns its manifest. ``labelled_as``: the name and
    licence its manifest gives the pairs made from the recipe's labelled records and documents (default
    :data:`~syncheck.training.verifier_dataset.YOURS`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_pairs(out, recipe, settings, dev_share, device, progress, echo)
    train = read_pairs(str(out / PAIRS))
    echo(f"training on {len(train)} pairs ({settings.epochs} epoch(s), max {settings.max_length} tokens)")
    model, _ = fit(train, out, settings, progress)
    public = {k: v for k, v in data.items() if k != "key"}
    public["recipe"] = data["key"]["recipe"]
    public["sources"] = named_sources(public["sources"], *labelled_as)
    manifest = export(model, out, settings, public, command)
    manifest["data"]["dev"] = dev_figures(out, read_pairs(str(out / DEV_PAIRS)))
    from features.model_manifest import write_manifest

    write_manifest(out, manifest)
    echo(f"dev: {manifest['data']['dev']}")
    return manifest


__all__ = ["build_verifier", "dev_figures", "prepare_pairs"]
