"""Build the sets, score them (cached), split them: what ``run.py`` and ``train_default.py`` share."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.halueval.scoring import ScoredItem, config_key, score_items
from benchmarks.halueval.sets import SETS, build_sets
from benchmarks.halueval.splits import split_items
from benchmarks.run_stamp import run_stamp
from features.lexical import LEXICAL_FEATURE_SIGNS

#: Records read per set by default (for ``sentences``: per source subset, QA and dialogue).
#: Chosen to finish in under ~30 minutes on 2 shared CPU cores with SmolLM2-135M.
DEFAULT_LIMITS = {"pairs": 250, "sentences": 250, "qa": 100, "dialogue": 80, "summarization": 15}
#: The sets the default aggregator is trained on (artefact-controlled only).
DEFAULT_TRAINING_SETS = ("pairs", "sentences")


def default_alignment() -> str:
    """The ``align_score`` backend :class:`syncheck.Scorer` uses when none is given (whatever it is today)."""
    from syncheck.scorer_config import ScorerConfig

    spec = ScorerConfig().alignment
    return spec if isinstance(spec, str) else "lexical"


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default="../shared/data/halueval", help="HaluEval directory "
                                                                         "(qa/dialogue/summarization.jsonl)")
    p.add_argument("--work-dir", default=None, help="where scored features are cached (default: <syncheck "
                                                    "cache>/halueval-bench)")
    p.add_argument("--limit", type=int, default=None,
                   help="records read for each of pairs, sentences (per source), qa and dialogue (default "
                        f"{DEFAULT_LIMITS['pairs']} / "
                        f"{DEFAULT_LIMITS['sentences']} / {DEFAULT_LIMITS['qa']} / {DEFAULT_LIMITS['dialogue']})")
    p.add_argument("--summarization-limit", type=int, default=None,
                   help=f"records of summarization (long documents; default {DEFAULT_LIMITS['summarization']}, 0 = "
                        "skip)")
    p.add_argument("--seed", type=int, default=0, help="seed of the distractor choices and of the train/test split")
    p.add_argument("--model", default="smollm2-135m", help="scoring model (alias, hub id, directory, .gguf)")
    p.add_argument("--alignment", default=None, help="align_score backend spec (default: the Scorer's default)")
    p.add_argument("--align-with-question", action="store_true",
                   help="align_score checks 'Question: Q / Answer: sentence' (Scorer(align_with_question=True))")
    p.add_argument("--batch-size", type=int, default=4, help="records per forward pass")
    p.add_argument("--no-embedding", action="store_true", help="skip the all-MiniLM-L6-v2 embedding baseline")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1 is fastest on shared cores: several threads per process oversubscribe "
                        "them)")


@dataclass
class BenchConfig:
    data_dir: str
    work_dir: Path
    limits: dict[str, int]
    seed: int = 0
    model: str = "smollm2-135m"
    alignment: str = "lexical"
    batch_size: int = 4
    embedding: bool = True
    align_with_question: bool = False
    scoring_seconds: dict[str, float] = field(default_factory=dict)  # cold scoring time of the items loaded, per set
    _scorer: Any = field(default=None, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace, sets: tuple[str, ...] = SETS) -> "BenchConfig":
        from syncheck.cache import cache_dir

        limits = dict(DEFAULT_LIMITS)
        if args.limit is not None:
            limits.update({k: args.limit for k in ("pairs", "sentences", "qa", "dialogue")})
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        if args.summarization_limit is not None:
            limits["summarization"] = args.summarization_limit
        limits = {k: (v if k in sets else 0) for k, v in limits.items()}
        work = Path(args.work_dir) if args.work_dir else cache_dir() / "halueval-bench"
        return cls(args.data_dir, work, limits, args.seed, args.model, args.alignment or default_alignment(),
                   args.batch_size, not args.no_embedding, getattr(args, "align_with_question", False))

    def scorer_settings(self) -> dict[str, Any]:
        """What the cached features depend on (keys the cache files)."""
        settings = {"model": self.model, "alignment": self.alignment, "lid": "auto", "kl": True,
                    "embedding": self.embedding, "vectors": True, "format": 2}
        if self.align_with_question:  # only when set, so caches written before the option existed stay valid
            settings["align_with_question"] = True
        return settings

    def scorer(self):
        """The feature scorer (no aggregator), loaded on first use."""
        if self._scorer is None:
            from syncheck.scorer import Scorer

            self._scorer = Scorer(self.model, alignment=self.alignment, align_with_question=self.align_with_question,
                                  lid="auto", vectors=True, aggregator=None, batch_size=self.batch_size)
        return self._scorer


def _embedder():
    from features.alignment.embedding import EmbeddingScorer

    return EmbeddingScorer(progress=False)


def load_scored(cfg: BenchConfig, train_only: bool = False) -> dict[str, list[ScoredItem]]:
    """``{set: scored items}``, scoring whatever the cache lacks; items that failed to score are dropped.

    ``train_only``: build, score and return only the items on the train side of the split.
    """
    key = config_key(cfg.scorer_settings())
    stamp = run_stamp({**cfg.scorer_settings(), "batch_size": cfg.batch_size})
    sets = build_sets(cfg.data_dir, cfg.limits, cfg.seed)
    out = {}
    for name, items in sets.items():
        if train_only:
            items = split_items(items, cfg.seed)[0]
        cache = cfg.work_dir / f"{name}-{key}.jsonl"
        scored = score_items(items, cache, cfg.scorer, _embedder if cfg.embedding else None, chunk=2 * cfg.batch_size,
                             desc=f"scoring {name}", vectors=True, stamp=stamp)
        out[name] = [s for s in scored if s.error is None]
        cfg.scoring_seconds[name] = sum(s.seconds for s in scored)
    return out


def syncheck_feature_names(scored: dict[str, list[ScoredItem]]) -> list[str]:
    """The SynCheck features present in every scored sentence, in scorer order (plus ``hidden_probe`` when every
    sentence carries its hidden vector)."""
    names: list[str] | None = None
    for items in scored.values():
        for it in items:
            for s in it.sentences:
                keys = [k for k in s["features"] if k not in LEXICAL_FEATURE_SIGNS]
                if "hidden" in (s.get("vectors") or {}):
                    keys.append("hidden_probe")  # a learned feature: fitted on the train side with each aggregator
                names = keys if names is None else [k for k in names if k in keys]
    return names or []


def split(items: list[ScoredItem], seed: int) -> tuple[list[ScoredItem], list[ScoredItem]]:
    return split_items(items, seed)
