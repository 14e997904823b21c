"""A support model beside FOD's sentence score: P(the context supports the answer), question-aware.

FOD steers by the sentence score, which cannot see a bare answer that names another entity of the passage (on
knowledge-conflict QA such answers score about 0.99). A support model that reads the question with the answer can:
:class:`SupportCache` scores each sentence text once per answer, as ``"Question: Q\\nAnswer: S"`` against the
context (:func:`syncheck.featurize.alignment_claim`), and :func:`build_support` makes one from a spec, sharing the
decoder's own model where the spec is a probe on it.
"""

from __future__ import annotations

from typing import Any, Sequence

from syncheck.featurize import Premise, alignment_claim


class SupportCache:
    """A support model's scores of sentence texts against one premise, each text scored once."""

    def __init__(self, scorer: Any, premise: Premise) -> None:
        if not hasattr(scorer, "score"):
            raise TypeError(f"a support model needs score(premises, claims) (an alignment scorer or its spec), got "
                            f"{type(scorer).__name__}")
        self.scorer, self.premise = scorer, premise
        self.scores: dict[str, float] = {}

    def prefetch(self, texts: Sequence[str]) -> None:
        """Score the texts not scored yet, in one call."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.scores]
        if todo:
            claims = [alignment_claim(t.strip(), self.premise.question) for t in todo]
            got = self.scorer.score([self.premise.context] * len(todo), claims)
            self.scores.update((t, float(v)) for t, v in zip(todo, got))

    def of(self, text: str) -> float:
        """The support of one sentence text."""
        self.prefetch([text])
        return self.scores[text]


def build_support(spec: str, lm: Any = None) -> Any:
    """An alignment scorer from its spec (:func:`syncheck.alignment.make_alignment_scorer`). A probe whose head was
    fitted on ``lm``'s model (by name) and dtype reads ``lm`` itself, so no second copy loads."""
    from features.alignment import parse_alignment_spec
    from syncheck.alignment import make_alignment_scorer

    kind, arg = parse_alignment_spec(spec)
    if kind == "probe" and lm is not None:
        from syncheck.model.probe_verifier import load_head
        from syncheck.shipped_models import PROBE_VERIFIER, shipped_model_dir

        head, _ = load_head(arg or shipped_model_dir(PROBE_VERIFIER))
        same_dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.") == head.dtype
        if getattr(lm, "name", None) == head.model and same_dtype:
            return make_alignment_scorer(spec, model=lm)
    return make_alignment_scorer(spec)


__all__ = ["SupportCache", "build_support"]
