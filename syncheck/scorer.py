"""Offline (teacher-forced) scoring of existing (context, question, response) records.

>>> from syncheck import Scorer
>>> scorer = Scorer("smollm2-135m")                       # doctest: +SKIP
>>> result = scorer.score(context="...", question="...", response="...")  # doctest: +SKIP
>>> [s.features["mean_contrastive_kl"] for s in result.sentences]          # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import torch

from features.alignment import AlignmentScorer, LexicalOverlapScorer
from features.context_influence import LARGE_KL_THRESHOLD
from features.sentence import sentence_features
from features.sentences import assign_tokens, split_sentences
from features.stats import TokenStats
from syncheck.lid_reference import LIDReference, load_or_build
from syncheck.models import DEFAULT_MODEL, LoadedModel, load_model
from syncheck.passes import EncodedRecord, ResponseTooLongError, encode_record, token_stats
from syncheck.prompts import format_context
from syncheck.records import Record, RecordError
from syncheck.results import ScoredResponse, ScoredSentence


def _alignment(spec: AlignmentScorer | str | None) -> AlignmentScorer | None:
    if spec is None or not isinstance(spec, str):
        return spec
    if spec == "lexical":
        return LexicalOverlapScorer()
    raise ValueError(f"unknown alignment backend {spec!r}; use 'lexical', None, or pass an AlignmentScorer object")


class Scorer:
    """Computes SynCheck's per-sentence features for existing responses.

    Args:
        model: anything :func:`syncheck.models.load_model` accepts (alias, hub
            id, directory, GGUF file, loaded model) or a :class:`LoadedModel`.
        tokenizer: the tokenizer when ``model`` is an already-loaded model.
        device, dtype: passed to :func:`load_model`.
        alignment: ``align_score`` backend: ``"lexical"`` (default), an
            :class:`AlignmentScorer`, or ``None`` to skip the feature.
        lid: ``"auto"`` (reference set from the cache, built from the bundled
            corpus on first use), an :class:`LIDReference`, or ``None`` to skip
            the ``lid_layer_<L>`` features.
        lid_layers: layers for ``"auto"`` (default: three middle layers).
        kl: compute the without-context pass and the KL features.
        kl_threshold: nats for ``large_kl_pos``.
        max_length: cap on prompt + response tokens (default: the model window).
        batch_size: records per forward pass.
    """

    def __init__(
        self,
        model: Any = DEFAULT_MODEL,
        tokenizer: Any = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str = torch.float32,
        alignment: AlignmentScorer | str | None = "lexical",
        lid: LIDReference | str | None = "auto",
        lid_layers: Sequence[int] | None = None,
        kl: bool = True,
        kl_threshold: float = LARGE_KL_THRESHOLD,
        max_length: int | None = None,
        batch_size: int = 4,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lm: LoadedModel = load_model(model, tokenizer, device=device, dtype=dtype)
        self.alignment = _alignment(alignment)
        if lid == "auto":
            lid = load_or_build(self.lm, lid_layers)
        elif lid is not None and not isinstance(lid, LIDReference):
            raise ValueError("lid must be 'auto', None or an LIDReference")
        self.lid: LIDReference | None = lid
        self.kl = kl
        self.kl_threshold = kl_threshold
        self.max_length = max_length
        self.batch_size = batch_size

    # ------------------------------------------------------------------ public API
    def score(self, context: str | Sequence[str], response: str, question: str | None = None, id: Any = None) -> ScoredResponse:
        """Score one response; errors come back in ``result.error``, never raised."""
        context = tuple(context) if not isinstance(context, str) else context
        return next(self.score_records([Record(id=id, context=context, response=response, question=question)]))

    def score_records(self, records: Iterable[Record | RecordError]) -> Iterator[ScoredResponse]:
        """Score records in order, ``batch_size`` at a time; yields exactly one result per input."""
        batch: list[Record | RecordError] = []
        for rec in records:
            batch.append(rec)
            if len(batch) >= self.batch_size:
                yield from self._score_batch(batch)
                batch = []
        if batch:
            yield from self._score_batch(batch)

    @property
    def feature_names(self) -> list[str]:
        """Names of the features this scorer produces, in output order."""
        names = ["min_prob", "mean_prob", "max_entropy", "mean_entropy"]
        if self.lid is not None:
            names += [f"lid_layer_{layer}" for layer in self.lid.layers]
        if self.kl:
            names += ["mean_contrastive_kl", "large_kl_pos"]
        if self.alignment is not None:
            names.append("align_score")
        return names

    # ------------------------------------------------------------------ internals
    def _score_batch(self, batch: Sequence[Record | RecordError]) -> list[ScoredResponse]:
        results: list[ScoredResponse] = []
        todo: list[tuple[int, Record, EncodedRecord]] = []
        for rec in batch:
            if isinstance(rec, RecordError):
                results.append(ScoredResponse(id=rec.record_id, error=str(rec)))
                continue
            out = ScoredResponse(id=rec.id)
            results.append(out)
            if not rec.response.strip():
                out.error = "empty response: there is nothing to score; drop the row or fill in 'response'"
                continue
            try:
                enc = encode_record(self.lm, rec.context, rec.response, rec.question, max_length=self.max_length, with_kl=self.kl)
            except ResponseTooLongError as exc:
                out.error = str(exc)
                continue
            if not enc.response:
                out.error = "the response tokenises to nothing; check its encoding"
                continue
            out.warnings.extend(enc.warnings)
            if not format_context(rec.context):
                out.warnings.append("empty context: context-influence and alignment features carry no signal for this row")
            todo.append((len(results) - 1, rec, enc))
        if todo:
            layers = self.lid.layers if self.lid is not None else []
            try:
                stats = token_stats(self.lm, [enc for _, _, enc in todo], hidden_layers=layers)
            except Exception as exc:  # a failing batch must not lose rows: retry one by one
                if len(todo) == 1:
                    results[todo[0][0]].error = f"forward pass failed: {exc.__class__.__name__}: {exc}"
                    return results
                stats = []
                for item in todo:
                    try:
                        stats.extend(token_stats(self.lm, [item[2]], hidden_layers=layers))
                    except Exception as exc1:
                        results[item[0]].error = f"forward pass failed: {exc1.__class__.__name__}: {exc1}"
                        stats.append(None)
            for (pos, rec, _), st in zip(todo, stats):
                if st is not None:
                    results[pos].sentences = self._sentences(rec, st)
        return results

    def _sentences(self, rec: Record, stats: TokenStats) -> list[ScoredSentence]:
        spans = split_sentences(rec.response)
        ranges = assign_tokens(rec.response, stats.offsets, spans)
        lid_states = self.lid.states if self.lid is not None else None
        lid_k = self.lid.k if self.lid is not None else 0
        sentences = []
        for span, (t0, t1) in zip(spans, ranges):
            if t1 <= t0:
                continue
            feats = sentence_features(stats, t0, t1, lid_reference=lid_states, lid_k=lid_k, kl_threshold=self.kl_threshold)
            sentences.append(ScoredSentence(span.text, span.start, span.end, feats))
        if self.alignment is not None and sentences:
            premise = format_context(rec.context)
            scores = self.alignment.score([premise] * len(sentences), [s.text for s in sentences])
            for s, a in zip(sentences, scores):
                s.features["align_score"] = float(a)
        return sentences
