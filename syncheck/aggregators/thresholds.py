"""Decoding thresholds: which ``tau1`` (backtrack / abstain) and ``tau2`` (prune) a run uses.

A threshold on a faithfulness score only means something for the aggregator
that produced the score: the paper's values (``tau1`` 0.7, ``tau2`` 0.85) were
chosen for its aggregators and GPU models, and the score distribution of
another aggregator on another model's own generations can sit entirely below
0.85 (then FOD prunes every sample). An aggregator directory may therefore carry
thresholds tuned on held-out generations of its model in ``meta.json``::

    "decoding": {"tau1": 0.5, "tau2": 0.7, "rule": "...", ...}

:func:`resolve_thresholds` picks, per threshold: the value the caller passed,
else the aggregator's tuned value, else the paper's. :func:`tune_thresholds`
is the rule that writes them, from out-of-fold scores
(:mod:`syncheck.fitting`; used by ``syncheck train --tune-decoding``
and ``syncheck calibrate``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from syncheck.decoding import SettingsError

#: The paper's values (SynCheck, Section 4.3).
PAPER_TAU1 = 0.7
PAPER_TAU2 = 0.85


def aggregator_decoding(scorer: Any) -> dict[str, Any]:
    """The ``decoding`` block of the scorer's aggregator's ``meta.json`` (``{}`` when it has none)."""
    agg = getattr(scorer, "aggregator", None)
    meta = getattr(agg, "meta", None) or {}
    block = meta.get("decoding") or {}
    return dict(block) if isinstance(block, dict) else {}


def resolve_threshold(scorer: Any, name: str, given: float | None = None) -> tuple[float, str]:
    """``(value, source)`` of ``tau1`` or ``tau2``: the given value, else the aggregator's tuned one, else the paper's.

    ``source`` is ``"given"``, ``"aggregator"`` or ``"paper"``.
    """
    paper = {"tau1": PAPER_TAU1, "tau2": PAPER_TAU2}
    if name not in paper:
        raise SettingsError(f"threshold name must be 'tau1' or 'tau2', got {name!r}")
    if given is not None:
        value, source = float(given), "given"
    else:
        tuned = aggregator_decoding(scorer).get(name)
        value, source = (float(tuned), "aggregator") if tuned is not None else (paper[name], "paper")
    if not 0.0 <= value <= 1.0:
        where = "the aggregator's meta.json 'decoding' block" if source == "aggregator" else "the value given"
        raise SettingsError(f"{name} must be a faithfulness probability in [0, 1], got {value} from {where}; "
                         f"pass {name} between 0 and 1")
    return value, source


def resolve_thresholds(scorer: Any, tau1: float | None = None, tau2: float | None = None) -> tuple[float, float, str]:
    """``(tau1, tau2, source)`` by :func:`resolve_threshold`; ``source`` is one word when both agree
    (e.g. ``"aggregator"``), else e.g. ``"tau1 given, tau2 aggregator"``."""
    t1, s1 = resolve_threshold(scorer, "tau1", tau1)
    t2, s2 = resolve_threshold(scorer, "tau2", tau2)
    return t1, t2, s1 if s1 == s2 else f"tau1 {s1}, tau2 {s2}"


def tune_thresholds(
    labels: Sequence[int],
    scores: Sequence[float],
    *,
    grid: Sequence[float] = tuple(np.round(np.arange(0.2, 0.91, 0.05), 2)),
    min_kept: float = 0.25,
) -> dict[str, Any]:
    """Choose ``tau1`` and ``tau2`` from held-out sentence scores of the model's own generations.

    Args:
        labels: 1 = the sentence is supported by its context, 0 = not.
        scores: the aggregator's out-of-fold P(faithful) for those sentences.
        grid: candidate thresholds.
        min_kept: ``tau2`` must keep at least this share of the supported sentences.

    Rule: ``tau1`` maximises Youden's J for flagging unsupported sentences (a
    sentence below it is backtracked or refused: balanced misses and false
    alarms). ``tau2`` (>= ``tau1``) maximises the share of supported sentences
    among those kept, among thresholds that keep at least ``min_kept`` of the
    supported ones (a sample must pass it; with S samples per step a very
    high ``tau2`` prunes everything). Returns the thresholds, the rule, and the
    table they were read from.
    """
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D and the same length, got {y.shape} and {s.shape}")
    n_sup, n_uns = int(y.sum()), int(len(y) - y.sum())
    if n_sup == 0 or n_uns == 0:
        raise ValueError("tuning thresholds needs both supported and unsupported sentences")
    table = []
    for t in grid:
        below = s < t
        table.append({
            "threshold": float(t),
            "below": float(below.mean()),
            "unsupported_caught": float((below & (y == 0)).sum() / n_uns),
            "supported_kept": float((~below & (y == 1)).sum() / n_sup),
            "supported_among_kept": float(y[~below].mean()) if (~below).any() else float("nan"),
        })
    best1 = max(table, key=lambda r: (r["unsupported_caught"] + r["supported_kept"] - 1, -r["threshold"]))
    tau1 = best1["threshold"]
    options = [r for r in table if r["threshold"] >= tau1 and r["supported_kept"] >= min_kept]
    best2 = max(options, key=lambda r: (r["supported_among_kept"], -r["threshold"])) if options else best1
    return {
        "tau1": tau1,
        "tau2": best2["threshold"],
        "rule": ("tau1 maximises Youden's J for flagging unsupported sentences; tau2 >= tau1 maximises the share of "
                 f"supported sentences among those kept while keeping >= {min_kept:.0%} of the supported ones"),
        "sentences": int(len(y)),
        "supported": n_sup,
        "table": table,
    }


__all__ = ["PAPER_TAU1", "PAPER_TAU2", "aggregator_decoding", "resolve_threshold", "resolve_thresholds",
           "tune_thresholds"]
