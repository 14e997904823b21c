"""``syncheck`` support backend: SynCheck's own faithfulness score as Provenance's support model.

Provenance asks, per selected source, how well the source supports the
answer. Offline, without any NLI cross-encoder, the strongest judge syncheck
has is its own scorer: teacher-force the answer through the local model with
the source as the context (and the question in the prompt), and take the
scorer's response score (the aggregator's learned response verdict where it
has one, else the least faithful sentence's P(faithful); ``statistic="min"``
always takes the latter). Unlike word overlap it sees *which* of two context
spans the answer picked (the model's likelihood of it, the context's pull on it).

It implements :class:`features.alignment.AlignmentScorer`, plus an optional
``questions`` argument: the claim is then the answer alone and the question
goes in the prompt, as in the rest of syncheck.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Sequence

import numpy as np

from features.sentences import split_sentences
from syncheck.aggregators.apply import aggregate_response
from syncheck.records import Record

#: Response statistics a (premise, answer) pair's support can be.
STATISTICS = ("min", "verdict", "live_verdict")
#: How an answer becomes the claim a support backend that reads no question checks: ``paper``, Provenance's
#: "The answer to question Q is A."; ``answer``, the answer alone; ``sentences``, each sentence of the answer on its
#: own, the answer's support being its least supported sentence's (weaker than the whole answer on summaries: a
#: sentence read alone loses its referents).
CLAIMS = ("paper", "answer", "sentences")
#: What the checked answers are (``syncheck check --task``): ``qa``, answers to a question; ``summary``, summaries of
#: their documents, whose support also leans on the lexical support (:data:`SUMMARY_LEXICAL_WEIGHT`); ``auto``
#: (the default), each answer by its question (:func:`answer_task`).
TASKS = ("auto", "qa", "summary")
#: A question that asks for a summary ("Summarize the document.", "Give a summary of ...", "TL;DR").
_SUMMARY_REQUEST = re.compile(r"\bsummar(?:y|ies|i[sz]e[sd]?|i[sz]ing|i[sz]ation)\b|\btl;?\s?dr\b", re.IGNORECASE)
#: Weight of an answer's mean ``local_support`` in the syncheck support of a summary (the rest is the verdict): the
#: largest weight tried that kept RAGTruth Summary's response AUROC at or above the verdict's, chosen before the
#: check's held-out records were read. On summaries the likelihood signals read who wrote the text (HaluEval's
#: hallucinated summaries are ChatGPT's fluent prose, its faithful ones journalists' highlights); the lexical support
#: reads only whether one document sentence holds each answer sentence's words.
SUMMARY_LEXICAL_WEIGHT = 0.5
#: How a verifier-kind support (:class:`VerifierSupport`) reads a summary from its sentences' scores: the least
#: supported sentence's (``min``) or their mean.
SUMMARY_STATISTICS = ("min", "mean")
#: The mean: with the shipped verifier it reads HaluEval summaries better than the least supported sentence, and
#: equally on RAGTruth Summary responses (RESULTS.md in the source repository, "The answer check").
DEFAULT_SUMMARY_STATISTIC = "mean"
#: Weight of a summary's mean ``local_support`` in a verifier-kind support's reading of it (:class:`VerifierSupport`):
#: the ``syncheck`` support's weight, not chosen again; adopted by a rule fixed before it was read on records nothing
#: had touched (RESULTS.md in the source repository, "The answer check").
VERIFIER_SUMMARY_LEXICAL_WEIGHT = SUMMARY_LEXICAL_WEIGHT


def answer_task(question: str | None, task: str = "auto") -> str:
    """``"qa"`` or ``"summary"``: what one answer is checked as under ``task`` (one of :data:`TASKS`).

    ``"auto"`` reads the question: an answer with no question, or to one that asks for a summary (HaluEval's
    "Summarize the document.", RAGTruth's "Summarize the news article in the context.") is a summary, any other
    a QA answer. Any other ``task`` is returned as it is.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; use one of {TASKS}")
    if task != "auto":
        return task
    if not question or not question.strip() or _SUMMARY_REQUEST.search(question):
        return "summary"
    return "qa"


def claim_prompt(question: str | None, answer: str) -> str:
    """``"The answer to question {Q} is {A}."`` (the answer's own final period is not doubled).

    Without a question the claim is the answer itself.
    """
    answer = answer.strip()
    if not question or not question.strip():
        return answer
    return f"The answer to question {question.strip()} is {answer.rstrip('.').rstrip()}."


def answer_claims(answer: str, question: str | None, claim: str) -> list[str]:
    """The claims one answer is checked as, in the form ``claim`` (one of :data:`CLAIMS`)."""
    if claim not in CLAIMS:
        raise ValueError(f"unknown claim form {claim!r}; use one of {CLAIMS}")
    if claim == "paper":
        return [claim_prompt(question, answer)]
    if claim == "answer":
        return [answer.strip()]
    return [s.text for s in split_sentences(answer)] or [answer.strip()]


def claim_supports(support: Any, premises: Sequence[str], answers: Sequence[str],
                   questions: Sequence[str | None] | None = None, claim: str = "paper",
                   batch_size: int = 16) -> np.ndarray:
    """``(n,)`` ``support``'s score of each (premise, answer) pair, the answer read in the claim form ``claim``.

    A question-aware backend (``question_aware = True``: :class:`SynCheckSupport`, :class:`MeanSupport`) gets the
    answer and the question as they are and reads them its own way. Any other backend gets the answer's claims
    (:func:`answer_claims`) in one call; a pair's support is the least of its claims' scores.
    """
    questions = list(questions) if questions is not None else [None] * len(answers)
    if getattr(support, "question_aware", False):
        return np.asarray(support.score(premises, answers, batch_size=batch_size, questions=questions), dtype=float)
    split: dict[tuple[str, str | None], list[str]] = {}  # one answer checked against several sources splits once
    for a, q in zip(answers, questions):
        if (a, q) not in split:
            split[a, q] = answer_claims(a, q, claim)
    return claims_support(support, premises, [split[a, q] for a, q in zip(answers, questions)], batch_size)


def claims_support(support: Any, premises: Sequence[str], per_pair: Sequence[Sequence[str]],
                   batch_size: int = 16, statistic: str = "min") -> np.ndarray:
    """``(n,)`` each premise's support of its claims (``per_pair[i]``, at least one): the least supported claim's
    (``statistic="min"``) or the mean over them (``"mean"``), every (premise, claim) pair scored in one
    ``support.score`` call."""
    if statistic not in SUMMARY_STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; use one of {SUMMARY_STATISTICS}")
    reduce = np.min if statistic == "min" else np.mean
    flat = np.asarray(support.score([p for p, cs in zip(premises, per_pair) for _ in cs],
                                    [c for cs in per_pair for c in cs], batch_size=batch_size), dtype=float)
    ends = np.cumsum([len(cs) for cs in per_pair])
    return np.asarray([reduce(flat[e - len(cs):e]) for e, cs in zip(ends, per_pair)], dtype=float)


class SynCheckSupport:
    """``score(premises, claims[, questions])`` -> the :class:`~syncheck.scorer.Scorer`'s response score per pair.

    Args:
        scorer: a :class:`~syncheck.scorer.Scorer` with an aggregator; built from ``model`` when ``None``.
        model: model for the scorer built here (default: the embedded default model).
        device, dtype: for the scorer built here.
        statistic: the response score a pair gets: ``"verdict"`` (default: the scorer's own response score, its
            learned verdict where the aggregator has one; equal or better than ``min`` on every set measured,
            RESULTS.md in the source repository, "The answer check"; over the final, whole-answer sentence scores
            where the scorer has a final model), ``"live_verdict"`` (the aggregator's verdict over the live
            sentence scores, as before final scores existed) or ``"min"`` (the least faithful sentence's live score).
    """

    name = "syncheck"
    #: ProvenanceChecker passes the question separately (the claim is the answer alone).
    question_aware = True

    def __init__(self, scorer: Any = None, model: str | None = None, *, device: Any = None, dtype: Any = None,
                 batch_size: int = 8, statistic: str = "verdict", lexical_weight: float = 0.0) -> None:
        if statistic not in STATISTICS:
            raise ValueError(f"unknown response statistic {statistic!r}; use one of {STATISTICS}")
        if not 0.0 <= lexical_weight <= 1.0:
            raise ValueError(f"lexical_weight must be in [0, 1], got {lexical_weight}")
        self.statistic, self.lexical_weight = statistic, float(lexical_weight)
        if scorer is None:
            from syncheck.model.models import DEFAULT_MODEL
            from syncheck.scorer import Scorer

            kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
            scorer = Scorer(model or DEFAULT_MODEL, batch_size=batch_size, **kwargs)
        if scorer.aggregator is None:
            raise ValueError("the syncheck support backend needs a Scorer with an aggregator (its response score); "
                             "use the default model or pass Scorer(model, aggregator=DIR)")
        self.scorer = scorer

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16,
              questions: Sequence[str | None] | None = None) -> np.ndarray:
        """``(n,)`` P(the claim is faithful to its premise) in ``[0, 1]``; a pair that cannot be scored raises."""
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        questions = list(questions) if questions is not None else [None] * len(claims)
        records = [Record(id=i, context=p, response=c, question=q)
                   for i, (p, c, q) in enumerate(zip(premises, claims, questions))]
        out = np.zeros(len(records))
        for i, res in enumerate(self.scorer.score_records(records)):
            if res.error is not None:
                value = None
            elif self.statistic == "verdict":
                value = res.response_score
            elif self.statistic == "live_verdict":
                verdict = getattr(self.scorer.aggregator, "response_model", None) or "min"
                value = aggregate_response([s.score for s in res.sentences], verdict)
            else:  # the least faithful sentence, whatever the scorer's response aggregation
                value = aggregate_response([s.score for s in res.sentences], "min")
            if value is None:
                raise ValueError(f"the syncheck support backend could not score pair {i + 1}: {res.error}")
            if self.lexical_weight:
                value = lean_on_lexical(value, mean_local_support(res.sentences), self.lexical_weight)
            out[i] = value
        return out


def verifier_claims(answer: str, question: str | None, task: str = "auto") -> list[str]:
    """The claims a verifier-kind backend checks one answer as: a QA answer whole and question-aware
    (``"Question: Q\nAnswer: A"``), a summary (by :func:`answer_task` under ``task``) sentence by sentence."""
    from syncheck.featurize import alignment_claim

    if answer_task(question, task) == "summary":
        return [s.text for s in split_sentences(answer) if s.text.strip()] or [answer.strip()]
    return [alignment_claim(answer.strip(), question)]


class VerifierSupport:
    """The verifier (:mod:`features.alignment.verifier`), or the probe (:mod:`syncheck.model.probe_verifier`), as
    Provenance's support model, reading each answer as it was trained to: a QA answer whole and question-aware
    (``"Question: Q\nAnswer: A"``), a summary (by :func:`answer_task`) sentence by sentence, its support being the
    mean over its sentences (``summary_statistic``, :data:`DEFAULT_SUMMARY_STATISTIC`) leaning on their local support
    (``summary_lexical_weight``, :data:`VERIFIER_SUMMARY_LEXICAL_WEIGHT`). The premise's windows and the max over
    them are the backend's own.

    Args:
        scorer: a :class:`~features.alignment.verifier.VerifierScorer` (or any alignment scorer of that claim form);
            built from ``spec`` when ``None``.
        spec: ``"verifier"`` (the shipped one), ``"verifier:<dir>"``, ``"reader[:<dir>]"`` (the span reader: a
            summary, which has no question, gets ``nan``), ``"probe:<dir>"``.
        summary_statistic: how a summary's sentences' scores make its support: ``"mean"`` (default) or ``"min"``,
            the least supported sentence's (:data:`SUMMARY_STATISTICS`). A QA answer is one claim either way.
        summary_lexical_weight: the weight of a summary's mean ``local_support`` (:func:`features.locality.
            local_support`: the share of each sentence's content words one premise sentence holds) in its support,
            leaning on it as the ``syncheck`` support does (:func:`lean_on_lexical`); default
            :data:`VERIFIER_SUMMARY_LEXICAL_WEIGHT`.
        scorer_kwargs: passed on when building it (a probe's ``loader``).

    A backend with a ``max_answer_sentences`` (the span reader: 1) gives an answer of more sentences no score
    (``nan``), and one with a ``reads(premise, answer)`` (the span reader: a bare answer that names the passage,
    :func:`features.alignment.span_reader.bare_answer`) any answer it is not fit to check: a mean of supports
    (:class:`MeanSupport`) then leaves it out for that answer.
    """

    name = "verifier"
    #: ProvenanceChecker passes the question separately; the claim is formed here.
    question_aware = True

    def __init__(self, scorer: Any = None, spec: str = "verifier", *, device: Any = None, dtype: Any = None,
                 summary_statistic: str = DEFAULT_SUMMARY_STATISTIC,
                 summary_lexical_weight: float | None = None, **scorer_kwargs: Any) -> None:
        weight = VERIFIER_SUMMARY_LEXICAL_WEIGHT if summary_lexical_weight is None else summary_lexical_weight
        check_summary_reading(summary_statistic, weight)
        self.summary_statistic = summary_statistic
        self.summary_lexical_weight = weight
        #: What the answers are (:data:`TASKS`): ``"auto"`` reads each by its question; a checker told the task
        #: sets it on its copy (:func:`read_as`).
        self.task = "auto"
        if scorer is None:
            from syncheck.alignment import make_alignment_scorer

            scorer = make_alignment_scorer(spec, device=device, dtype=dtype, **scorer_kwargs)
        self.scorer = scorer
        self.name = getattr(scorer, "name", "verifier")

    def claims(self, answer: str, question: str | None) -> list[str]:
        """The claims one answer is checked as (see the class docstring)."""
        return verifier_claims(answer, question, self.task)

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16,
              questions: Sequence[str | None] | None = None) -> np.ndarray:
        """``(n,)`` P(the premise supports the answer) per (premise, answer) pair, in ``[0, 1]`` (``nan`` where the
        backend gives none: an answer longer than its ``max_answer_sentences``, or one its ``reads`` refuses)."""
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        questions = list(questions) if questions is not None else [None] * len(claims)
        most = getattr(self.scorer, "max_answer_sentences", None)
        reads = getattr(self.scorer, "reads", None)
        fit = [i for i, a in enumerate(claims) if (most is None or len(split_sentences(a)) <= most)
               and (reads is None or reads(premises[i], a))]
        out = np.full(len(claims), np.nan)
        if not fit:
            return out
        per_pair = [self.claims(claims[i], questions[i]) for i in fit]
        out[fit] = claims_support(self.scorer, [premises[i] for i in fit], per_pair, batch_size,
                                  self.summary_statistic)
        if self.summary_lexical_weight:
            for i, cs in zip(fit, per_pair):
                if answer_task(questions[i], self.task) == "summary" and not np.isnan(out[i]):
                    out[i] = lean_on_lexical(out[i], held_locally(premises[i], cs), self.summary_lexical_weight)
        return out


def check_summary_reading(statistic: str | None, lexical_weight: float | None) -> None:
    """Raise ``ValueError`` (naming the values allowed) for a summary statistic outside :data:`SUMMARY_STATISTICS`
    or a lexical weight outside ``[0, 1]``; ``None`` is not checked."""
    if statistic is not None and statistic not in SUMMARY_STATISTICS:
        raise ValueError(f"unknown summary statistic {statistic!r}; use one of {SUMMARY_STATISTICS}")
    if lexical_weight is not None and not 0 <= lexical_weight <= 1:
        raise ValueError(f"a summary's lexical weight must be in [0, 1], got {lexical_weight}")


def held_locally(premise: str, sentences: Sequence[str]) -> float:
    """A summary's mean :func:`features.locality.local_support` against ``premise``, over its ``sentences``: what
    a verifier-kind support leans a summary's reading on."""
    from features.locality import local_support

    return float(np.mean([local_support(premise, c) for c in sentences]))


def with_summary_reading(support: Any, statistic: str | None = None, lexical_weight: float | None = None) -> Any:
    """A copy of ``support`` whose verifier-kind backends (:class:`VerifierSupport`, alone or in a
    :class:`MeanSupport`) read a summary by ``statistic`` (:data:`SUMMARY_STATISTICS`) and lean it on its sentences'
    local support by ``lexical_weight`` (``None``: as they do); the models are shared, and ``support`` itself is not
    changed.

    Raises:
        ValueError: an unknown statistic, a weight outside ``[0, 1]``, or a support with no verifier-kind backend (it
            reads summaries its own way).
    """
    check_summary_reading(statistic, lexical_weight)
    if not any(isinstance(m, VerifierSupport) for m in getattr(support, "members", [support])):
        raise ValueError(f"a summary statistic or lexical weight applies to a verifier, reader or probe support; "
                         f"{getattr(support, 'name', type(support).__name__)} reads a summary its own way "
                         "(check summaries with --summary-nli verifier, or leave them out)")
    changes = {"summary_statistic": statistic, "summary_lexical_weight": lexical_weight}
    return _verifiers_set(support, **{k: v for k, v in changes.items() if v is not None})


def read_as(support: Any, task: str) -> Any:
    """A copy of ``support`` whose verifier-kind backends read every answer as ``task`` says (:data:`TASKS`:
    ``"summary"`` sentence by sentence, ``"qa"`` whole with its question), not by its question; other backends are
    kept as they are, and ``support`` itself is not changed."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; use one of {TASKS}")
    return _verifiers_set(support, task=task)


def _verifiers_set(support: Any, **attributes: Any) -> Any:
    """A copy of ``support`` (alone or a :class:`MeanSupport`) with ``attributes`` set on copies of its
    :class:`VerifierSupport` backends, which share their scorers: no second model."""
    copies = []
    for m in getattr(support, "members", [support]):
        if isinstance(m, VerifierSupport):
            m = copy.copy(m)
            for name, value in attributes.items():
                setattr(m, name, value)
        copies.append(m)
    if not isinstance(support, MeanSupport):
        return copies[0]
    mean = copy.copy(support)
    mean.members = copies
    return mean


def lean_on_lexical(statistic: Any, local_support: Any, weight: float = SUMMARY_LEXICAL_WEIGHT) -> Any:
    """``(1 - weight) * statistic + weight * local_support``: a response score leaning on the answer's mean
    ``local_support`` (scalars or arrays alike); the summary task's support (:class:`SynCheckSupport`)."""
    return (1 - weight) * statistic + weight * local_support


def mean_local_support(sentences: Sequence[Any]) -> float:
    """The mean ``local_support`` feature of scored sentences (:class:`~syncheck.results.ScoredSentence`)."""
    values = [s.features.get("local_support") for s in sentences]
    if not values or any(v is None for v in values):
        raise ValueError("the summary check needs each sentence's local_support feature, which the string checks "
                         "compute: score with Scorer(..., text_checks=True) (the default), or check with task='qa'")
    return float(np.mean(values))


class MeanSupport:
    """The mean of several support backends' scores: ``--nli syncheck+llm-judge:qwen2.5-coder-1.5b``.

    Each member reads the pair in its own form: a question-aware member (``syncheck``) gets the answer as the claim
    and the question apart; any other member gets the answer in the claim form ``claim`` (:data:`CLAIMS`; by default
    Provenance's "The answer to question Q is A.", the answer alone without a question). The mean is fixed (nothing
    fitted): equal weights unless ``weights`` names some (``--nli syncheck+verifier+reader@0.2``). Two checks that
    read different things make errors of different kinds, so their mean can beat each alone (RESULTS.md in the
    source repository, "The answer check").

    Args:
        members: the backends (each with ``score(premises, claims, batch_size)``), at least two.
        claim: the claim form the members that read no question check (:func:`claim_supports`).
        weights: per member, its share of the mean, or ``None`` for an equal share of what the named ones leave
            (:func:`member_weights`); default: equal shares.
    """

    #: ProvenanceChecker passes the question separately; each member gets the claim form it reads.
    question_aware = True

    def __init__(self, members: Sequence[Any], claim: str = "paper",
                 weights: Sequence[float | None] | None = None) -> None:
        if claim not in CLAIMS:
            raise ValueError(f"unknown claim form {claim!r}; use one of {CLAIMS}")
        self.claim = claim
        members = list(members)
        if len(members) < 2:
            raise ValueError(f"a mean of supports needs at least two backends, got {len(members)}; "
                             "join the specs with '+', e.g. syncheck+llm-judge:qwen2.5-coder-1.5b")
        self.members = members
        given = list(weights) if weights is not None else [None] * len(members)
        if len(given) != len(members):
            raise ValueError(f"got {len(given)} weights for {len(members)} members; give one per member (None: an "
                             "equal share of the rest)")
        self.weights = member_weights(given)
        names = [getattr(m, "name", type(m).__name__) for m in members]
        self.name = "+".join(n if w is None else f"{n}@{w:g}" for n, w in zip(names, given))

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16,
              questions: Sequence[str | None] | None = None) -> np.ndarray:
        """``(n,)`` the members' (weighted) mean support per (premise, answer) pair, in ``[0, 1]``; a member with no
        score for a pair (``nan``: the span reader on an answer it does not read) is left out of that pair's mean,
        the others' weights scaled to sum to 1."""
        return mean_of_supports([claim_supports(m, premises, claims, questions, self.claim, batch_size)
                                 for m in self.members], self.weights)


def member_weights(weights: Sequence[float | None]) -> list[float]:
    """Each member's share of a mean: a named weight as it is, ``None`` an equal share of what the named ones leave.

    Raises:
        ValueError: a weight outside ``(0, 1)``, named weights summing past 1, or all of them named and not summing
            to 1.
    """
    named = [w for w in weights if w is not None]
    if any(not 0 < w < 1 for w in named):
        raise ValueError(f"a member's weight is its share of the mean, in (0, 1); got {named}")
    rest, free = 1.0 - sum(named), sum(w is None for w in weights)
    if rest < -1e-9 or (free == 0 and abs(rest) > 1e-9) or (free and rest <= 1e-9):
        raise ValueError(f"the named weights {named} leave {rest:.3g} for {free} other member(s); name shares that "
                         "sum to 1, or below 1 with members left to share the rest")
    return [rest / free if w is None else w for w in weights]


def split_weight(spec: str) -> tuple[str, float | None]:
    """``"reader@0.2"`` -> ``("reader", 0.2)``: a member spec of a mean and its weight (``None`` when it names none;
    an ``@`` inside a directory, ``verifier:/data/me@lab/v1``, names none).

    Raises:
        ValueError: a weight that is not a number.
    """
    base, at, weight = spec.rpartition("@")
    if not at or "/" in weight or "\\" in weight:
        return spec, None
    try:
        return base, float(weight)
    except ValueError:
        raise ValueError(f"{spec!r}: write a member's weight as a number after '@', e.g. reader@0.2") from None


def mean_members(spec: str) -> list[tuple[str, float | None]]:
    """``"syncheck + verifier+reader@0.2"`` -> ``[("syncheck", None), ("verifier", None), ("reader", 0.2)]``: the
    members of a support spec joined by ``+`` (one member when there is no ``+``), each with its named weight
    (:func:`split_weight`).

    Raises:
        ValueError: a weight that is not a number.
    """
    return [split_weight(part.strip()) for part in spec.split("+")]


def mean_of_supports(scores: Sequence[Sequence[float]], weights: Sequence[float] | None = None) -> np.ndarray:
    """``(n,)`` the mean of several backends' ``(n,)`` supports (weighted by ``weights``, default equal), each pair's
    ``nan`` scores left out and the others' weights scaled to sum to 1 (``nan`` where every backend gave ``nan``)."""
    scores = np.asarray(scores, dtype=np.float64)
    w = np.ones(len(scores)) if weights is None else np.asarray(weights, dtype=np.float64)
    counted = (~np.isnan(scores)) * w[:, None]
    total = counted.sum(axis=0)
    weighted = (np.where(np.isnan(scores), 0.0, scores) * counted).sum(axis=0)
    return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), np.nan)
