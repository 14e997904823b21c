"""Alignment scorers: how well a premise (the context) supports a claim.

Every backend implements :class:`AlignmentScorer`: ``score(premises, claims)``
returns one support probability in ``[0, 1]`` per pair (sign convention ``+``:
higher = better supported). One backend per module:

- ``lexical`` (:mod:`.lexical`): share of the claim's content words in the premise;
- ``embedding`` (:mod:`.embedding`): max cosine to the premise's sentences (all-MiniLM-L6-v2);
- ``llm-judge``: P("Yes") of a causal LM asked "Does the premise support the hypothesis?" (it runs a causal LM, so
  syncheck builds it: ``syncheck.model.llm_judge``, by ``syncheck.alignment.make_alignment_scorer``);
- ``nli:<model>`` (:mod:`.nli`): P(entailment) of any sequence-classification NLI cross-encoder;
- ``alignscore:<checkpoint>`` (:mod:`.alignscore`): the official AlignScore checkpoints (SynCheck's ``align_score``);
- ``verifier:<dir>`` (:mod:`.verifier`): syncheck's own cross-encoder, one trained by ``syncheck verifier train``
  (``verifier`` alone, the one shipped in the package, is built by ``syncheck.alignment.make_alignment_scorer``: this
  layer never looks into the package's data);
- ``reader:<dir>`` (:mod:`.span_reader`): syncheck's own span reader: the share of its answer to the claim's question
  that the claim names (``nan`` for a claim without a question); ``reader`` alone, the shipped one, as ``verifier``;
- ``probe:<dir>``: a logistic head on a frozen causal LM's hidden states (fitted by ``syncheck verifier train
  --probe MODEL``; it runs a causal LM, so syncheck builds it: ``syncheck.model.probe_verifier``).

Model backends split long premises into overlapping windows (:mod:`.windows`)
and keep the max over windows. Build one with :func:`make_alignment_scorer`;
models load when the scorer is built, never at import.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from features.alignment.lexical import LexicalOverlapScorer


@runtime_checkable
class AlignmentScorer(Protocol):
    """Scores how well each premise supports its claim."""

    name: str

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``len(premises) == len(claims)`` pairs -> ``(n,)`` float in ``[0, 1]``."""
        ...


#: The spec forms :func:`make_alignment_scorer` accepts (for help texts).
ALIGNMENT_SPECS = (
    "lexical",
    "embedding[:<encoder dir or hub id>]",
    "llm-judge[:<model>]",
    "nli:<hub id or dir>",
    "alignscore[:<.ckpt path, dir or hub id>]",
    "verifier[:<dir>]",
    "reader[:<dir>]",
    "probe:<dir>",
)


def parse_alignment_spec(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` of a spec, checked without loading anything.

    Raises:
        ValueError: an unknown or malformed spec (the message lists the forms).
    """
    kind, _, arg = spec.strip().partition(":")
    ok = (kind == "lexical" and not arg) or kind in (
        "embedding", "llm-judge", "alignscore", "verifier", "reader", "probe") or (
        kind == "nli" and arg)
    if not ok:
        raise ValueError(f"unknown alignment backend {spec!r}; use one of: " + ", ".join(ALIGNMENT_SPECS))
    return kind, arg


def make_alignment_scorer(
    spec: "AlignmentScorer | str",
    *,
    device: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> AlignmentScorer:
    """Build an alignment backend from a spec string (an :class:`AlignmentScorer` is returned as is).

    Specs:
        ``"lexical"``; ``"embedding"`` (packaged all-MiniLM-L6-v2) or
        ``"embedding:<encoder>"``; ``"llm-judge"`` (SmolLM2-135M-Instruct) or
        ``"llm-judge:<model>"`` (any name ``syncheck.model.models.load_model``
        takes); ``"nli:<hub id or dir>"`` (a sequence-classification NLI
        model; pass ``trust_remote_code=True`` for Vectara's HHEM);
        ``"alignscore"`` (``yzha/AlignScore`` AlignScore-base, needs the hub)
        or ``"alignscore:<.ckpt path, dir or hub id[/file.ckpt]>"``; ``"verifier:<dir>"`` (one ``syncheck verifier
        train`` wrote); ``"reader:<dir>"`` (one ``syncheck verifier reader`` wrote). ``"probe:<dir>"``, and
        ``"verifier"`` and ``"reader"`` without a directory (the shipped ones), are built by
        :func:`syncheck.alignment.make_alignment_scorer`.

    Args:
        device, dtype: for model backends.
        kwargs: passed to the backend's constructor.

    Raises:
        ValueError: an unknown or malformed spec (the message lists the forms).
    """
    if not isinstance(spec, str):
        return spec
    kind, arg = parse_alignment_spec(spec)
    model_kw = {"device": device, "dtype": dtype, **kwargs}
    if kind == "lexical":
        return LexicalOverlapScorer()
    if kind == "embedding":
        from features.alignment.embedding import EmbeddingScorer

        return EmbeddingScorer(arg or None, **model_kw)
    if kind in ("llm-judge", "probe"):  # a causal LM run by syncheck (syncheck.model): features/ imports no syncheck
        raise ValueError(f"{spec!r} runs a causal LM: build it with syncheck.alignment.make_alignment_scorer({spec!r})")
    if kind in ("verifier", "reader") and not arg:  # the shipped one: syncheck finds it (syncheck.shipped_models)
        raise ValueError(f"{spec!r} alone is the {kind} shipped with syncheck: build it with "
                         f"syncheck.alignment.make_alignment_scorer({spec!r}), or give a directory ({kind}:<dir>)")
    if kind == "nli":
        from features.alignment.nli import NLIScorer

        return NLIScorer.from_pretrained(arg, **model_kw)
    if kind == "verifier":
        from features.alignment.verifier import VerifierScorer

        return VerifierScorer(arg, **model_kw)
    if kind == "reader":
        from features.alignment.span_reader import SpanReaderScorer

        return SpanReaderScorer(arg, **model_kw)
    from features.alignment.alignscore import DEFAULT_REPO, AlignScoreScorer  # kind == "alignscore"

    return AlignScoreScorer(arg or DEFAULT_REPO, **model_kw)


__all__ = [
    "ALIGNMENT_SPECS", "AlignmentScorer", "LexicalOverlapScorer", "make_alignment_scorer", "parse_alignment_spec",
]
