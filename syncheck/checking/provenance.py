"""Provenance (Sankararaman et al., 2024): check a final answer against its context chunks.

Pipeline (Sections 3.1-3.3):

1. **Relevance**: a relevance scorer rates each context chunk against the
   question; ``softmax(scores / temperature)`` over the chunks turns the
   scores into probabilities that sum to 1.
2. **Selection**: TopK keeps the ``top_k`` most relevant chunks; TopP keeps
   the *minimal* set of chunks, taken in decreasing relevance, whose
   cumulative probability reaches ``top_p``. The selected probabilities are
   re-normalised into weights that sum to 1, and the sources are kept in their
   original order (Appendix A.2: temporal order helps the NLI model).
3. **Claim**: ``"The answer to question {Q} is {A}."`` (or, optionally, the answer alone).
4. **NLI**: an alignment scorer gives P(source supports claim) per source.
5. **Aggregation**: ``min``, ``max`` or ``weighted`` (weighted average with
   the source weights) of the supports: the answer's ``factuality``.

A context given as one string is split into chunks: first at blank lines
(paragraphs), then into sentences (the paper splits all sources into
sentences, Section 5). A list of strings is taken as the chunks, as retrieved.

Sign convention: ``factuality`` in ``[0, 1]``, higher = better supported.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from features.alignment import AlignmentScorer
from features.alignment.relevance import RelevanceScorer, make_relevance_scorer
from features.sentences import split_sentences
from syncheck.alignment import make_alignment_scorer
from syncheck.checking.support import CLAIMS, claim_prompt, claim_supports  # noqa: F401 (claim_prompt: kept public here)
from syncheck.records import Record, RecordError

AGGREGATIONS = ("min", "max", "weighted")
#: ``each``: every selected source is a premise of its own and the supports are aggregated (the paper);
#: ``joined``: the selected sources, joined in context order, are one premise (one support call).
PREMISES = ("each", "joined")
#: What the relevance scorer ranks the chunks against: the question (the paper), or the question followed by the
#: answer (the answer alone when there is no question, as for a summary).
QUERIES = ("question", "question+answer")
#: Offline defaults, chosen by measurement on HaluEval and RAGTruth (RESULTS.md in the source repository, "The answer
#: check", and the notes it links): BM25 relevance; max aggregation where sources are checked one by one
#: (``premise="each"``).
DEFAULT_RELEVANCE = "bm25"
#: The support: the mean of SynCheck's own score and the shipped verifier's (:mod:`features.alignment.verifier`),
#: each 0.4 of it, and the shipped span reader's (:mod:`features.alignment.span_reader`) 0.2, the reader asked only
#: about bare answers that name the passage (a longer answer, a refusal or a dialogue reply is left to the other two,
#: which then share the mean equally). The verifier reads what SynCheck's score misses on dialogue, the reader tells
#: the passage's answer from another entity of it; each share was adopted by a rule fixed before it was read on
#: records nothing had touched (RESULTS.md in the source repository, "The answer check").
DEFAULT_NLI = "syncheck+verifier+reader@0.2"
#: Answers checked as summaries go to the shipped verifier alone when the support is the default (RESULTS.md in the
#: source repository, "The answer check").
DEFAULT_SUMMARY_NLI = "verifier"
DEFAULT_AGGREGATION = "max"
#: One premise, the selected sources joined: as good as ``each`` where contexts are a sentence or two (distractor
#: pairs, dialogue), better on RAGTruth QA with TopK 3 and on summaries, and one scoring pass instead of one per
#: source.
DEFAULT_PREMISE = "joined"
#: The question alone: adding the answer to the relevance query measured no better (RESULTS.md in the source
#: repository, "The answer check", and its notes).
DEFAULT_QUERY = "question"
#: Every chunk (TopP 1.0), joined: level with TopK 3 and TopP 0.9 on HaluEval's short contexts, and on RAGTruth QA
#: the setting the score is trained in, well above the 3 most relevant sources.
DEFAULT_TOP_P = 1.0
#: The paper's models (need the Hugging Face hub or a local copy).
PAPER_RELEVANCE = "cross-encoder:mixedbread-ai/mxbai-rerank-base-v1"
PAPER_NLI = "nli:vectara/hallucination_evaluation_model"
#: Sources the automatic final check reads (TopK), joined into one premise (one teacher-forced pass of the answer
#: with the ``syncheck`` support backend); TopK 3 measured as well as TopP 0.9 on the distractor pairs at about a
#: quarter of TopP's cost on RAGTruth QA (RESULTS.md in the source repository, "The answer check", and its notes).
FINAL_CHECK_TOP_K = 3

_PARAGRAPHS = re.compile(r"\n\s*\n")


def split_context(context: str | Sequence[str]) -> list[str]:
    """Context chunks: a list is kept as is (blank chunks dropped); a string is split into paragraphs, then
    sentences."""
    if not isinstance(context, str):
        return [c.strip() for c in context if c and c.strip()]
    chunks = []
    for para in _PARAGRAPHS.split(context):
        chunks.extend(s.text for s in split_sentences(para))
    return chunks


def relevance_query(question: str | None, answer: str, query: str = "question") -> str | None:
    """The text chunks are ranked against: ``question``, or ``question + " " + answer``
    (``query="question+answer"``)."""
    if query not in QUERIES:
        raise ValueError(f"unknown relevance query {query!r}; use one of {QUERIES}")
    if query == "question":
        return question
    return " ".join(t.strip() for t in (question or "", answer) if t and t.strip()) or None


def joined_premise(chunks: Sequence[str], chosen: Sequence[int]) -> str:
    """The chosen chunks (indices), in context order, as one premise."""
    return " ".join(chunks[int(i)] for i in sorted(chosen))


def relevance_probabilities(scores: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """``softmax(scores / temperature)``: ``(n,)`` probabilities summing to 1."""
    z = np.asarray(scores, dtype=np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def select_top_p(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Indices (ascending) of the minimal most-relevant prefix whose probability reaches ``top_p``.

    Ties are broken by original position (earlier first).
    """
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_p >= 1.0:  # every chunk: a cumulative sum can reach 1 early where small probabilities underflow
        return np.arange(len(probs))
    order = np.argsort(-np.asarray(probs), kind="stable")
    cumulative = np.cumsum(np.asarray(probs)[order])
    n = int(np.searchsorted(cumulative, top_p - 1e-12) + 1)
    return np.sort(order[: min(n, len(order))])


def select_top_k(probs: np.ndarray, top_k: int) -> np.ndarray:
    """Indices (ascending) of the ``top_k`` most relevant chunks (ties: earlier first)."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    order = np.argsort(-np.asarray(probs), kind="stable")
    return np.sort(order[:top_k])


def aggregate(supports: np.ndarray, weights: np.ndarray, how: str) -> float:
    """Combine per-source supports: ``min``, ``max`` or ``weighted`` (``sum(w * s)``, weights summing to 1)."""
    supports = np.asarray(supports, dtype=np.float64)
    if how == "min":
        return float(supports.min())
    if how == "max":
        return float(supports.max())
    if how == "weighted":
        return float(np.dot(np.asarray(weights, dtype=np.float64), supports))
    raise ValueError(f"unknown aggregation {how!r}; use one of {AGGREGATIONS}")


@dataclass
class Source:
    """A selected chunk: its ``index`` in the context, ``weight`` (re-normalised relevance), NLI ``support``."""

    index: int
    weight: float
    support: float

    def to_json(self) -> dict:
        return {"index": self.index, "weight": self.weight, "support": self.support}


@dataclass
class ProvenanceResult:
    """The check of one answer.

    Attributes:
        factuality: probability-like score that the answer is supported (``None`` on error).
        sources: the selected chunks, in original context order.
        best_source: index (into the context chunks) of the source that supports the answer best.
        claim: the claim text given to the NLI model.
        error: why the row could not be checked, else ``None``.
    """

    id: Any = None
    factuality: float | None = None
    sources: list[Source] = field(default_factory=list)
    best_source: int | None = None
    claim: str = ""
    error: str | None = None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "factuality": self.factuality,
            "sources": [s.to_json() for s in self.sources],
            "best_source": self.best_source,
            "error": self.error,
        }


def combine(
    probs: np.ndarray,
    supports: dict[int, float] | np.ndarray,
    *,
    top_k: int | None = None,
    top_p: float = 0.9,
    aggregation: str = "weighted",
) -> tuple[float, list[Source], int]:
    """Selection + re-normalisation + aggregation, given relevance probabilities and per-chunk supports.

    Args:
        probs: ``(n,)`` relevance probabilities of all chunks.
        supports: NLI support of (at least) every selected chunk, by chunk index.
        top_k: TopK when given, else TopP with ``top_p``.

    Returns:
        ``(factuality, sources in original order, best_source)``.
    """
    chosen = select_top_k(probs, top_k) if top_k is not None else select_top_p(probs, top_p)
    weights = np.asarray(probs, dtype=np.float64)[chosen]
    weights = weights / weights.sum()
    sup = np.array([float(supports[int(i)]) for i in chosen])
    factuality = aggregate(sup, weights, aggregation)
    best = int(chosen[np.lexsort((-weights, -sup))[0]])  # highest support, then highest weight, then earliest
    sources = [Source(int(i), float(w), float(s)) for i, w, s in zip(chosen, weights, sup)]
    return factuality, sources, best


def default_summary_nli(nli: Any) -> str | None:
    """The support that checks summaries when none is named: :data:`DEFAULT_SUMMARY_NLI` where ``nli`` is the
    default support (:data:`DEFAULT_NLI`, in any spelling), else ``None`` (``nli`` checks summaries itself)."""
    return DEFAULT_SUMMARY_NLI if isinstance(nli, str) and same_support_spec(nli, DEFAULT_NLI) else None


def same_support_spec(a: str, b: str) -> bool:
    """Whether two support specs name the same members with the same shares of the mean, whatever their order,
    spacing or the way a weight is written (``syncheck+verifier+reader@0.2`` and ``verifier@0.4 + syncheck +
    reader@0.20`` are the same)."""
    from syncheck.checking.support import mean_members, member_weights

    def members(spec: str) -> list[tuple[str, float]]:
        names, weights = zip(*mean_members(spec))
        return sorted(zip(names, (round(w, 9) for w in member_weights(weights))))

    try:
        return members(a) == members(b)
    except ValueError:  # a spec whose weights do not parse is not the default; make_support says why
        return False


def make_support(spec: AlignmentScorer | str, *, device: Any = None, dtype: Any = None,
                 trust_remote_code: bool = False, claim: str = "paper", loader: Any = None) -> Any:
    """A support backend from its spec: ``syncheck[:<model>]``, ``verifier[:<dir>]``, ``reader[:<dir>]`` and
    ``probe:<dir>`` (question-aware: :class:`syncheck.checking.support.VerifierSupport`), any
    :func:`make_alignment_scorer` spec, or several joined by ``+`` (:class:`syncheck.checking.support.MeanSupport`,
    the mean of their scores, its members that read no question checking the claim form ``claim``; ``member@w`` gives
    one its share ``w`` of the mean, the others sharing the rest); an object passes
    through. The members of a mean that run a
    causal LM (``llm-judge``, ``probe``) load each model once and share it
    (:func:`syncheck.model.models.shared_loader`); ``loader`` loads those members' models (default
    :func:`~syncheck.model.models.load_model`)."""
    if not isinstance(spec, str):
        return spec
    from syncheck.checking.support import mean_members, split_weight

    if "+" in spec:
        from syncheck.checking.support import MeanSupport
        from syncheck.model.models import shared_loader

        shared = shared_loader(loader)
        parts = mean_members(spec)
        return MeanSupport([make_support(part, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                                         loader=shared) for part, _ in parts], claim=claim,
                           weights=[w for _, w in parts])
    if split_weight(spec)[1] is not None:
        raise ValueError(f"{spec!r}: a weight is a member's share of a mean; join two or more supports with '+', "
                         "e.g. syncheck+verifier+reader@0.2")
    kind = spec.partition(":")[0]
    if kind == "syncheck":
        from syncheck.checking.support import SynCheckSupport

        return SynCheckSupport(model=spec.partition(":")[2] or None, device=device, dtype=dtype)
    lm_kwargs = {"loader": loader} if loader is not None and kind in ("llm-judge", "probe") else {}
    if kind in ("verifier", "probe", "reader"):
        from syncheck.checking.support import VerifierSupport

        return VerifierSupport(spec=spec, device=device, dtype=dtype, **lm_kwargs)
    kwargs = {"trust_remote_code": True} if trust_remote_code and spec.startswith("nli:") else {}
    return make_alignment_scorer(spec, device=device, dtype=dtype, **kwargs, **lm_kwargs)


def summary_support(support: Any) -> Any:
    """``support`` as it checks summaries: a ``syncheck`` backend (alone or in a mean of backends) with the summary
    task's lexical weight (:data:`syncheck.checking.support.SUMMARY_LEXICAL_WEIGHT`); a copy, so the backend keeps
    checking QA answers as before. Any other backend is returned as it is: it reads summaries as it reads answers."""
    from syncheck.checking.support import SUMMARY_LEXICAL_WEIGHT, MeanSupport, SynCheckSupport

    if isinstance(support, SynCheckSupport):
        leaning = copy.copy(support)  # shares the scorer: no second model
        leaning.lexical_weight = SUMMARY_LEXICAL_WEIGHT
        return leaning
    if isinstance(support, MeanSupport):
        leaning = copy.copy(support)
        leaning.members = [summary_support(m) for m in support.members]
        return leaning
    return support


class ProvenanceChecker:
    """Checks final answers against their context chunks (Provenance).

    Args:
        relevance: a :class:`RelevanceScorer` or spec (``"bm25"``, ``"minilm"``,
            ``"cross-encoder[:<id>]"``); default: the best offline one measured.
        nli: an alignment scorer or spec for :func:`make_alignment_scorer`
            (``"embedding"``, ``"lexical"``, ``"llm-judge"``, ``"nli:<id>"``, ...), or
            ``"syncheck[:<model>]"``: SynCheck's own response score of the answer given the source
            (:class:`syncheck.checking.support.SynCheckSupport`; the question goes in its prompt, so the claim is
            the answer alone whatever ``claim`` says), or several specs joined by ``+``: the mean of their
            supports (:class:`syncheck.checking.support.MeanSupport`; each member reads the claim form it takes).
        top_k: use TopK with this many sources; ``None`` (default) uses TopP.
        top_p: TopP threshold (ignored when ``top_k`` is given); ``1.0`` (default) keeps every chunk.
        aggregation: ``"min"``, ``"max"`` or ``"weighted"``.
        device, dtype: for model backends built from specs.
        batch_size: (source, claim) pairs per NLI batch.
        trust_remote_code: let an ``nli:<id>`` model run its own code (Vectara's
            HHEM, the paper's NLI model, needs it).
        claim: ``"paper"`` (default): ``"The answer to question Q is A."``;
            ``"answer"``: the answer alone. The template's words ("answer",
            "question") are never in the context, which drags word-overlap
            support down most for short answers: with ``lexical`` support
            ``"answer"`` measured much better on HaluEval.
            ``"sentences"``: each sentence of the answer is a claim, the answer's support
            being its least supported sentence's (measured worse than the whole answer
            with the Qwen judge on summaries). A backend that reads the question itself
            (``syncheck``) always gets the answer; a mean of backends (``A+B``) gives this
            form to its members that do not.
        premise: ``"each"``: each selected source is checked on its own and ``aggregation`` combines
            the supports (the paper); ``"joined"``: the selected sources, joined in context order, are one
            premise, checked once (``aggregation`` is then moot: every source reports the joint support).
        query: what relevance ranks the chunks against: ``"question"`` (the paper) or
            ``"question+answer"`` (the answer alone without a question, e.g. for a summary).
        task: what the answers are (:data:`syncheck.checking.support.TASKS`): ``"summary"``: the ``syncheck``
            support (alone or in a ``+`` mean) then also leans on the answer's lexical support
            (:data:`syncheck.checking.support.SUMMARY_LEXICAL_WEIGHT`, through :func:`summary_support`; the backend
            passed in is not changed); other backends read summaries as they read answers. ``"qa"``: every answer
            answers a question. ``"auto"`` (default): each answer by its question
            (:func:`syncheck.checking.support.answer_task`): a summary where there is no question or it asks for a
            summary, else a QA answer.
        summary_nli: the support backend (spec or object) of the answers checked as summaries. ``None`` (default):
            :data:`DEFAULT_SUMMARY_NLI` where ``nli`` is the default (:data:`DEFAULT_NLI`), else ``nli`` itself, as
            ``task`` describes.
        summary_statistic: how a verifier-kind summary support reads a summary from its sentences' scores:
            ``"mean"`` or ``"min"`` (the least supported sentence's). ``None`` (default): the backend's own
            (:data:`syncheck.checking.support.DEFAULT_SUMMARY_STATISTIC` for one built from a spec).
        summary_lexical_weight: the weight in ``[0, 1]`` of a summary's mean local support in a verifier-kind summary
            support's reading (``0`` reads the verifier alone). ``None`` (default): the backend's own
            (:data:`syncheck.checking.support.VERIFIER_SUMMARY_LEXICAL_WEIGHT` for one built from a spec).
    """

    def __init__(
        self,
        relevance: RelevanceScorer | str = DEFAULT_RELEVANCE,
        nli: AlignmentScorer | str = DEFAULT_NLI,
        top_k: int | None = None,
        top_p: float = DEFAULT_TOP_P,
        aggregation: str = DEFAULT_AGGREGATION,
        *,
        device: Any = None,
        dtype: Any = None,
        batch_size: int = 16,
        trust_remote_code: bool = False,
        claim: str = "paper",
        premise: str = DEFAULT_PREMISE,
        query: str = DEFAULT_QUERY,
        task: str = "auto",
        summary_nli: AlignmentScorer | str | None = None,
        summary_statistic: str | None = None,
        summary_lexical_weight: float | None = None,
    ) -> None:
        from syncheck.checking.support import TASKS

        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; use one of {TASKS}")
        if claim not in CLAIMS:
            raise ValueError(f"unknown claim form {claim!r}; use one of {CLAIMS}")
        if premise not in PREMISES:
            raise ValueError(f"unknown premise form {premise!r}; use one of {PREMISES}")
        if query not in QUERIES:
            raise ValueError(f"unknown relevance query {query!r}; use one of {QUERIES}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; use one of {AGGREGATIONS}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if relevance == "minilm" and nli == "embedding":  # one MiniLM for both stages: each chunk is embedded once
            from features.alignment.embedding import EmbeddingScorer, SentenceEncoder
            from features.alignment.relevance import BiEncoderRelevance

            shared = SentenceEncoder(device=device, dtype=dtype)
            relevance, nli = BiEncoderRelevance(shared), EmbeddingScorer(shared)
        self.relevance = make_relevance_scorer(relevance, device=device, dtype=dtype)
        self.nli = make_support(nli, device=device, dtype=dtype, trust_remote_code=trust_remote_code, claim=claim)
        self.top_k, self.top_p, self.aggregation, self.claim = top_k, top_p, aggregation, claim
        self.premise, self.query, self.task = premise, query, task
        self.batch_size = batch_size
        if summary_nli is None:
            summary_nli = default_summary_nli(nli)
        from syncheck.checking.support import mean_members

        parts = [name for name, _ in mean_members(nli)] if isinstance(nli, str) else []
        if isinstance(summary_nli, str) and summary_nli.strip() in parts:
            # the support's own member of that spec checks summaries: one model, loaded once
            summary_nli = getattr(self.nli, "members", [self.nli])[parts.index(summary_nli.strip())]
        self._summary_nli = (summary_support(self.nli) if summary_nli is None else
                             make_support(summary_nli, device=device, dtype=dtype,
                                          trust_remote_code=trust_remote_code, claim=claim))
        from syncheck.checking.support import read_as, with_summary_reading

        if summary_statistic is not None or summary_lexical_weight is not None:
            self._summary_nli = with_summary_reading(self._summary_nli, summary_statistic, summary_lexical_weight)
        # told the task, a verifier reads every answer so: a summary sentence by sentence whatever its question, a QA
        # answer whole even where its question asks for a summary
        if task == "summary":
            self._summary_nli = read_as(self._summary_nli, "summary")
        elif task == "qa":
            self.nli = read_as(self.nli, "qa")

    def support_for(self, question: str | None) -> Any:
        """The support backend an answer to ``question`` is checked with under this checker's ``task``."""
        from syncheck.checking.support import answer_task

        return self._summary_nli if answer_task(question, self.task) == "summary" else self.nli

    @classmethod
    def for_scorer(cls, scorer: Any, **kwargs: Any) -> "ProvenanceChecker":
        """The default checker, its ``syncheck`` support backend reusing ``scorer`` (no second model is loaded).

        Falls back to the ``lexical`` backend when ``scorer`` has no aggregator (no response score to use).
        """
        from syncheck.checking.support import SynCheckSupport

        nli = SynCheckSupport(scorer) if getattr(scorer, "aggregator", None) is not None else "lexical"
        return cls(kwargs.pop("relevance", DEFAULT_RELEVANCE), kwargs.pop("nli", nli), **kwargs)

    def relevance_probabilities(self, question: str | None, chunks: Sequence[str]) -> np.ndarray:
        """``(n,)`` relevance probabilities of the chunks for the question (uniform without a question)."""
        if not question or not question.strip():
            return np.full(len(chunks), 1.0 / len(chunks))
        return relevance_probabilities(self.relevance.score(question, chunks), self.relevance.temperature)

    def check(self, *, question: str | None = None, context: str | Sequence[str], answer: str,
              id: Any = None) -> ProvenanceResult:
        """Check one answer; problems come back in ``result.error``, never raised."""
        result = ProvenanceResult(id=id)
        try:
            chunks = split_context(context)
            if not chunks:
                raise ValueError("empty context: there is nothing to check the answer against; fill in 'context'")
            if not answer or not answer.strip():
                raise ValueError("empty answer: there is nothing to check; fill in 'response'")
            support = self.support_for(question)
            whole = getattr(support, "question_aware", False) or self.claim != "paper"  # the answer, or its sentences
            result.claim = answer.strip() if whole else claim_prompt(question, answer)
            probs = self.relevance_probabilities(relevance_query(question, answer, self.query), chunks)
            chosen = select_top_k(probs, self.top_k) if self.top_k is not None else select_top_p(probs, self.top_p)
            premises = [joined_premise(chunks, chosen)] if self.premise == "joined" else [chunks[i] for i in chosen]
            scores = claim_supports(support, premises, [answer] * len(premises),
                                    [question] * len(premises), self.claim, self.batch_size)
            if self.premise == "joined":
                scores = [scores[0]] * len(chosen)
            supports = {int(i): float(s) for i, s in zip(chosen, scores)}
            result.factuality, result.sources, result.best_source = combine(
                probs, supports, top_k=self.top_k, top_p=self.top_p, aggregation=self.aggregation
            )
        except Exception as exc:  # one bad row must not stop the others
            result.error = str(exc) if isinstance(exc, ValueError) else f"{exc.__class__.__name__}: {exc}"
        return result

    def check_records(self, records: Iterable[Record | RecordError]) -> Iterator[ProvenanceResult]:
        """One result per input, in order; a :class:`RecordError` becomes a row with its error."""
        for rec in records:
            if isinstance(rec, RecordError):
                yield ProvenanceResult(id=rec.record_id, error=str(rec))
            else:
                yield self.check(question=rec.question, context=rec.context, answer=rec.response, id=rec.id)
