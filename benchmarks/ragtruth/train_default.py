"""Retrain the default aggregator shipped in the package (``default-aggregator``, :mod:`syncheck.shipped_models`).

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.ragtruth.train_default --data PATH/TO/ragtruth/dev.jsonl \\
        --halueval-dir PATH/TO/halueval --generated GEN.jsonl

The recipe is :mod:`syncheck.aggregators.recipe` (gradient-boosted trees over
the default features, with the hidden-state probe stacked under them), fitted,
tuned and written by the library's training path (:mod:`syncheck.calibration.training`,
as ``syncheck calibrate`` fits it for another model). The
rows (:mod:`benchmarks.ragtruth.training`): all of RAGTruth dev, the train
side of the HaluEval QA distractor pairs and sentence-level set (first 600
records of each source; the hash split keeps every one of them off the test
side of ``benchmarks.halueval.run``), and the monitored model's own answers
labelled by a judge (``--generated``, from ``benchmarks.halueval.generated_set``).

Before fitting on everything it prints a held-out check on the generated
answers (grouped 5-fold by record, every other row always in training) beside
sentence length, and tunes FOD's thresholds on those out-of-fold scores (the
scores FOD will meet are the model's own sentences). Features are cached as in
the benchmarks, so after a benchmark run this only trains. It writes the
directory's manifest last (:mod:`syncheck.aggregators.manifest`), with each
training set and its licence (:func:`set_sources`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchmarks.ragtruth.training import Rows, generated_rows, halueval_rows, ragtruth_rows

#: Records read from each HaluEval source (only their train side is used).
HALUEVAL_LIMIT = 600
#: RAGTruth's licence, as the shared copy's README gives it.
RAGTRUTH_LICENCE = ("MIT (RAGTruth); this copy joins public partial copies of its test split, one of them CC BY-NC "
                    "4.0 (the shared data's README)")
#: What each training set of an aggregator is (``{model}``: the model that scored it) and its licence.
SET_SOURCES = {
    "ragtruth": ("RAGTruth dev, teacher-forced through {model}", RAGTRUTH_LICENCE),
    "pairs": ("HaluEval QA distractor pairs (the training side), through {model}", "MIT"),
    "sentences": ("HaluEval sentences (the training side), through {model}", "MIT"),
    "generated": ("answers {model} generated to HaluEval QA records (the training side), labelled by a judge",
                  "MIT (HaluEval's passages and questions)"),
}


def set_sources(sentences_per_set: Mapping[str, int], model: str | None = None) -> list[dict]:
    """An aggregator manifest's ``data.sources`` from its sentences per training set (a set ``NAME-MODEL`` was scored
    by that model, a set ``NAME`` by ``model``)."""
    out = []
    for key, rows in sentences_per_set.items():
        name, _, by = key.partition("-")
        what, licence = SET_SOURCES[name]
        out.append({"name": what.format(model=by or model), "licence": licence, "rows": int(rows)})
    return out


def write_shipped_manifest(out: str | Path, sentences_per_set: Mapping[str, int], model: str | None) -> None:
    """Write the manifest of the aggregator in ``out`` (its name and purpose kept from the one there)."""
    from syncheck.aggregators.manifest import write_aggregator_manifest
    from syncheck.shipped_models import PACKAGE_LICENCE, base_licences

    write_aggregator_manifest(out, sources=set_sources(sentences_per_set, model),
                              licences=[PACKAGE_LICENCE, *base_licences(model)])


def _probe_template(model: str):
    from syncheck.calibration.training import probe_templates
    from syncheck.model.models import load_model
    from syncheck.probes import default_probe_layers

    return probe_templates(["hidden_probe"], default_probe_layers(load_model(model).num_layers))[0]


def fit_default(rows: Rows, seed: int = 0, probe=None, **overrides):
    """The recipe fitted on ``rows`` (a :class:`syncheck.aggregators.stacked.StackedModel`) by the library's training
    path (:func:`syncheck.calibration.training.fit_sentence_model`); ``overrides`` go over the recipe's parameters."""
    from syncheck.calibration.training import fit_sentence_model

    return fit_sentence_model(rows.X, rows.names, {"hidden_probe": rows.hidden}, rows.y, rows.groups,
                              probes=[probe] if probe is not None else None, seed=seed, **overrides)


def heldout_generated(fixed: Rows, gen: Rows, seed: int = 0, folds: int = 5, fit=fit_default,
                      label: str = "default recipe") -> tuple[list[str], np.ndarray]:
    """Out-of-fold P(faithful) of the generated sentences (their records held out; ``fixed`` always trained on),
    by ``fit(rows, seed, tune_threshold=False)`` (default: the default recipe)."""
    from syncheck.fitting import out_of_fold
    from syncheck.stats import bootstrap_auroc

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        part = Rows(
            gen.names, gen.X[train], gen.hidden[train], gen.y[train], gen.groups[train], gen.chars[train], "gen"
        )
        model = fit(Rows.concat([fixed, part]), seed, tune_threshold=False)
        return model.predict(gen.X[test], {"hidden_probe": gen.hidden[test]})

    oof = out_of_fold(fit_predict, gen.y, gen.groups, folds, seed, extra_labels=fixed.y)
    lines = [f"held-out generated sentences: n={len(gen)} ({int(gen.y.sum())} supported) from "
             f"{len(set(gen.groups.tolist()))} records, {folds}-fold grouped by record; AUROC [95% CI]:"]
    for name, score in (("sentence length (shorter = supported)", -gen.chars), (label, oof)):
        auc, lo, hi = bootstrap_auroc(gen.y, score, groups=gen.groups, seed=seed)
        lines.append(f"  {name}: {auc:.3f} [{lo:.3f}, {hi:.3f}]")
    lines.append(f"  score spread (10th-90th percentile): {np.percentile(oof, 10):.2f}-{np.percentile(oof, 90):.2f}")
    return lines, oof


def load_rows(data: str | None, halueval_dir: str | None, generated: Sequence[str], model: str,
              seed: int = 0, names: Sequence[str] | None = None) -> dict[str, Rows]:
    """Every requested source's rows (scoring what the caches lack), with features ``names`` (default: the
    default recipe's)."""
    from syncheck.aggregators.recipe import DEFAULT_FEATURES
    from syncheck.cache import cache_dir

    names = list(names or DEFAULT_FEATURES)
    out: dict[str, Rows] = {}
    if data:
        from benchmarks.ragtruth.data import read_ragtruth
        from benchmarks.ragtruth.scoring import ScoringConfig, score_ragtruth

        records = read_ragtruth(data)
        # only what the recipe reads: no LID, lookback or embedding baseline (the cache of `ragtruth.run --no-lid
        # --no-lookback --no-embedding` and of `response_verdict`; the full cache costs about twice the scoring)
        light = ScoringConfig(model=model, lid=False, lookback=False, embedding=False)
        out["ragtruth"] = ragtruth_rows(records, score_ragtruth(records, light, cache_dir() / "ragtruth-bench"), names)
    if halueval_dir:
        from benchmarks.halueval.pipeline import DEFAULT_LIMITS, DEFAULT_TRAINING_SETS, BenchConfig, load_scored

        limits = {k: (HALUEVAL_LIMIT if k in DEFAULT_TRAINING_SETS else 0) for k in DEFAULT_LIMITS}
        cfg = BenchConfig(halueval_dir, cache_dir() / "halueval-bench", limits, seed, model, embedding=False)
        for name, items in load_scored(cfg, train_only=True).items():
            if items:
                out[name] = halueval_rows(items, names, name)
    if generated:
        out["generated"] = generated_rows(generated, names)
    return out


def main(argv: Sequence[str] | None = None) -> Path:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.ragtruth.train_default", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--data", default="../shared/data/ragtruth/dev.jsonl", help="RAGTruth JSONL ('' to leave it out)")
    p.add_argument("--halueval-dir", default="../shared/data/halueval", help="HaluEval directory ('' to leave it out)")
    p.add_argument("--generated", action="append", default=[], help="generated_set JSONL of the model's own answers; "
                                                                    "repeatable")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("-o", "--out", default=None, help="output directory (default: the packaged default's)")
    args = p.parse_args(argv)
    if args.out is None:
        from syncheck.shipped_models import DEFAULT_AGGREGATOR, shipped_model_dir

        args.out = str(shipped_model_dir(DEFAULT_AGGREGATOR))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from syncheck.aggregators.recipe import DEFAULT_KIND, DEFAULT_PARAMS, DEFAULT_PROBES
    from syncheck.calibration.training import label_counts, recipe_info, save_sentence_model, tune_decoding

    sources = load_rows(args.data, args.halueval_dir, args.generated, args.model, args.seed)
    decoding = None
    gen = sources.get("generated")
    fixed = Rows.concat([r for k, r in sources.items() if k != "generated"])
    if gen is not None and len(set(gen.y.tolist())) == 2:
        lines, oof = heldout_generated(fixed, gen, args.seed)
        print("\n".join(lines), file=sys.stderr)
        decoding = tune_decoding(gen.y, oof, "out-of-fold scores of the generated sentences (5-fold grouped by record)")
        print(f"decoding thresholds for FOD: tau1 {decoding['tau1']:.2f}, tau2 {decoding['tau2']:.2f}", file=sys.stderr)
    rows = Rows.concat(list(sources.values()))
    model = fit_default(rows, args.seed, probe=_probe_template(args.model))
    agg = model.aggregator
    training = {
        "data": "RAGTruth dev (all rows), HaluEval train side (benchmarks/halueval/splits.py), generated answers",
        "sets": [("ragtruth-dev" if k == "ragtruth" else k) for k in sources],
        "sentences_per_set": {k: int(len(r)) for k, r in sources.items()},
        "faithful_per_set": {k: int(r.y.sum()) for k, r in sources.items()},
        "split_seed": args.seed,
        "recipe": recipe_info(DEFAULT_KIND, DEFAULT_PARAMS, probes=list(DEFAULT_PROBES)),
        "generated": {"files": [Path(g).name for g in args.generated], "sentences": int(len(gen)) if gen else 0},
        **label_counts(rows.y),
        "command": "python -m benchmarks.ragtruth.train_default "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    from syncheck.model.models import load_model

    scorer = {
        "model": args.model, "fingerprint": load_model(args.model).fingerprint, "alignment": "lexical",
        "align_with_question": False, "lid_layers": None, "lid_k": None, "kl": True, "kl_threshold": 3.0,
        "lookback": False, "text_checks": True,
    }
    out = save_sentence_model(model, args.out, training=training, scorer=scorer, decoding=decoding)
    write_shipped_manifest(out, training["sentences_per_set"], args.model)
    print(f"trained {DEFAULT_KIND} + {[p.name for p in model.probes]} on {len(rows)} sentences "
          f"({training['faithful']} faithful) from {training['sets']}; threshold {agg.threshold_:.3f}; wrote {out}",
          file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
