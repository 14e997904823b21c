"""Retrain the default aggregator shipped in ``syncheck/data/aggregators/default/``.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.halueval.train_default --data-dir ../shared/data/halueval

It scores (with the default :class:`syncheck.Scorer`: model ``smollm2-135m``,
LID on, KL on, the Scorer's default ``align_score`` backend unless
``--alignment`` says otherwise) the *train side* of the artefact-controlled
sets -- QA distractor pairs and the sentence-level set, never the raw
HaluEval subsets -- and fits one aggregator on their sentences. It reads the
first 600 records of each source (``--limit``); the hash split of
:mod:`benchmarks.halueval.splits` keeps every one of them off the test side of
any benchmark run with the same ``--seed``. Features are
cached in the same work dir as ``benchmarks.halueval.run``, so after a run
this only trains. Retrain whenever the default alignment backend or model changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from benchmarks.halueval.evaluate import training_data
from benchmarks.halueval.pipeline import DEFAULT_TRAINING_SETS, BenchConfig, add_common_args, load_scored, syncheck_feature_names

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "syncheck" / "data" / "aggregators" / "default"
#: The kind shipped; chosen on the benchmark (see benchmarks/RESULTS.md, issue 3).
DEFAULT_KIND = "lr"
#: Records read from each of QA (pairs, sentences) and dialogue (sentences); only their train side is scored.
DEFAULT_TRAINING_LIMIT = 600


def main(argv: Sequence[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.halueval.train_default", description=__doc__.split("\n\n")[0])
    add_common_args(p)
    p.add_argument("--kind", choices=("lr", "xgb", "mlp"), default=DEFAULT_KIND)
    p.add_argument("-o", "--out", default=str(DEFAULT_OUT), help="output directory (default: the packaged default)")
    args = p.parse_args(argv)
    if args.limit is None:  # more training records than the benchmark run reads: the split keeps them off its test side
        args.limit = DEFAULT_TRAINING_LIMIT
    from syncheck.aggregators import make_aggregator, save_aggregator, scorer_config

    cfg = BenchConfig.from_args(args, sets=DEFAULT_TRAINING_SETS)
    scored = load_scored(cfg, train_only=True)
    items = [it for name in DEFAULT_TRAINING_SETS for it in scored.get(name, [])]
    scorer = cfg.scorer()
    names = [n for n in scorer.feature_names if n in syncheck_feature_names(scored)]
    X, y = training_data(items, names)
    agg = make_aggregator(args.kind, feature_names=names, random_state=args.seed).fit(X, y)
    training = {
        "data": "HaluEval (Li et al., 2023), train side of the record split of benchmarks/halueval/splits.py",
        "sets": list(DEFAULT_TRAINING_SETS),
        "records_read": {k: cfg.limits[k] for k in DEFAULT_TRAINING_SETS},
        "split_seed": cfg.seed,
        "responses": {name: len(scored.get(name, [])) for name in DEFAULT_TRAINING_SETS},
        "sentences": int(len(y)), "faithful": int(np.sum(y)), "unfaithful": int(len(y) - np.sum(y)),
        "command": "python -m benchmarks.halueval.train_default " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = save_aggregator(agg, args.out, training=training, scorer=scorer_config(scorer))
    print(f"trained {args.kind} on {len(y)} sentences ({training['faithful']} faithful); threshold {agg.threshold_:.3f}; "
          f"wrote {out}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
