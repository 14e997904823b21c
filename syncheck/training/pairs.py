"""A verifier's training example: a (premise, claim) pair with a support label, and how premises are cut to fit.

The verifier is a cross-encoder over ``(premise, claim)`` (:mod:`features.alignment.verifier`). A claim is
question-aware where there is a question (:func:`syncheck.featurize.alignment_claim`: ``"Question: Q\\nAnswer: S"``),
as the scorer forms it at run time. A premise longer than the model's window is cut into the same windows the scorer
uses (:func:`features.alignment.windows.split_windows`); for training, :func:`best_window` keeps the window that shares
the most content words with the claim, which is the window whose score the max over windows would most likely take.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator

from features.alignment.lexical import lexical_precision
from features.alignment.windows import ClaimTooLongError, premise_budget, split_windows
from syncheck.jsonl import iter_jsonl


@dataclass(frozen=True)
class VerifierPair:
    """One training example.

    Attributes:
        premise: the context (or the window of it the claim is checked against).
        claim: the text to check; ``"Question: Q\\nAnswer: S"`` where there is a question.
        label: 1 = the premise supports the claim, 0 = it does not.
        group: the source document's id; every split and the artefact check keep one group on one side.
        kind: where the pair came from (``"halueval-qa"``, ``"distractor"``, ``"edit-entity"``, ...).
    """

    premise: str
    claim: str
    label: int
    group: str
    kind: str

    def __post_init__(self) -> None:
        if self.label not in (0, 1):
            raise ValueError(f"label must be 0 (unsupported) or 1 (supported), got {self.label!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_pairs(path: str) -> list[VerifierPair]:
    """Pairs written by :func:`write_pairs` (one JSON object per line)."""
    return [VerifierPair(**row) for row in iter_jsonl(path)]


def write_pairs(pairs: Iterable[VerifierPair], path: str) -> int:
    """Write pairs as JSON lines; returns how many."""
    import json

    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p.to_json(), ensure_ascii=False) + "\n")
            n += 1
    return n


def best_window(premise: str, claim: str, tokenizer: Any, max_length: int) -> str:
    """The window of ``premise`` (as the scorer cuts it) sharing the most content words with ``claim``.

    A premise that fits next to the claim is returned whole. A claim too long for the model gives the premise's
    start, so the pair is still usable (the trainer truncates it).
    """
    try:
        budget = premise_budget(tokenizer, claim, max_length)
    except ClaimTooLongError:
        return premise[: 4 * max_length]
    windows = split_windows(premise, budget, tokenizer=tokenizer)
    if len(windows) == 1:
        return windows[0].text
    return max(windows, key=lambda w: lexical_precision(w.text, claim)).text


def fitted(pairs: Iterable[VerifierPair], tokenizer: Any, max_length: int) -> Iterator[VerifierPair]:
    """Each pair with its premise cut to :func:`best_window`."""
    for p in pairs:
        window = best_window(p.premise, p.claim, tokenizer, max_length)
        yield p if window == p.premise else VerifierPair(window, p.claim, p.label, p.group, p.kind)


__all__ = ["VerifierPair", "best_window", "fitted", "read_pairs", "write_pairs"]
