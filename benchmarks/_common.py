"""The small helpers several benchmarks share: nearest-rank percentiles, record-resampling bootstrap intervals, a
figure with its interval as a table cell, and the key a judge's cached verdict is stored under.

A benchmark imports a shared helper from here, never a private name of another benchmark; nothing here loads a model
or reads data.
"""

from __future__ import annotations

import hashlib

import numpy as np


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (0.95: the value 95% of them stay within, a latency's p95)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-int(q * 100) * len(ordered) // 100) - 1))]


def bootstrap_mean(per_record: list[list[float]], n: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """Pooled mean of per-record value lists and a 95% percentile interval from resampling records."""
    flat = [v for r in per_record for v in r]
    if not flat:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n):
        idx = rng.integers(0, len(per_record), len(per_record))
        vals = [v for i in idx for v in per_record[i]]
        if vals:
            stats.append(float(np.mean(vals)))
    return float(np.mean(flat)), float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def bootstrap_paired_difference(base: list[list[float]], other: list[list[float]], n: int = 1000,
                                seed: int = 0) -> tuple[float, float, float]:
    """Pooled mean of ``other`` minus pooled mean of ``base`` (the same records, in the same order), with a 95%
    interval from resampling records jointly for both (a paired bootstrap: narrower than comparing two intervals)."""
    if len(base) != len(other):
        raise ValueError(f"paired lists differ in length: {len(base)} vs {len(other)}")

    def pooled(lists, idx):
        vals = [v for i in idx for v in lists[i]]
        return float(np.mean(vals)) if vals else float("nan")

    every = np.arange(len(base))
    diff = pooled(other, every) - pooled(base, every)
    rng = np.random.default_rng(seed)
    stats = [
        pooled(other, idx) - pooled(base, idx) for idx in (rng.integers(0, len(base), len(base)) for _ in range(n))
    ]
    stats = [d for d in stats if np.isfinite(d)]
    if not stats or not np.isfinite(diff):
        return float("nan"), float("nan"), float("nan")
    return diff, float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def interval(figure: tuple[float, ...], bounds: int = 2, signed: bool = False) -> str:
    """``"0.812 [0.78, 0.84]"``: a figure to three places and its interval's bounds to ``bounds`` places, each with
    its sign when ``signed`` (a difference); only the first three items of ``figure`` are read."""
    sign = "+" if signed else ""
    return f"{figure[0]:{sign}.3f} [{figure[1]:{sign}.{bounds}f}, {figure[2]:{sign}.{bounds}f}]"


def claim_key(context: str, claim: str) -> str:
    """The key a judge's verdict on ``claim`` given ``context`` is cached under (``fod_table2``'s ``--judged`` file,
    which ``judge_accuracy`` reads and writes too)."""
    return hashlib.sha1(f"{context}\x00{claim}".encode()).hexdigest()
