"""Offline (teacher-forced) scoring of existing (context, question, response) records.

>>> from syncheck import Scorer
>>> scorer = Scorer("smollm2-135m")                       # doctest: +SKIP
>>> result = scorer.score(context="...", question="...", response="...")  # doctest: +SKIP
>>> [s.features["mean_contrastive_kl"] for s in result.sentences]          # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Iterator, Sequence

from features.sentences import assign_tokens, split_sentences
from features.stats import TokenStats
from syncheck.aggregators.apply import aggregate_response
from syncheck.aggregators.final import final_sentence_scores
from syncheck.featurize import Premise, SentenceItem, mark_degenerate
from syncheck.lid_reference import LIDReference
from syncheck.model.models import DEFAULT_MODEL, LoadedModel
from syncheck.model.passes import EncodedRecord, ResponseTooLongError, encode_record, token_stats
from syncheck.model.prompts import format_context
from syncheck.pipeline import ScoringPipeline, build_pipeline
from syncheck.records import Record, RecordError, script_warning
from syncheck.results import ScoredResponse, ScoredSentence
from syncheck.scorer_config import ScorerConfig


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


class Scorer:
    """Computes SynCheck's per-sentence features for existing responses.

    Args:
        model: anything :func:`syncheck.model.models.load_model` accepts (alias, hub
            id, directory, GGUF file, loaded model) or a :class:`LoadedModel`.
        tokenizer: the tokenizer when ``model`` is an already-loaded model.
        config: which features it computes and how it scores them (:class:`~syncheck.scorer_config.ScorerConfig`:
            device and dtype, the ``align_score`` backend, LID, KL, lookback, string checks, probe vectors, the
            aggregator, the response aggregation and final scores); ``None``: the defaults.
        **settings: fields of :class:`~syncheck.scorer_config.ScorerConfig` by name, overriding ``config``'s
            (``Scorer(model, alignment="verifier")``); a name that is no setting is a ``TypeError`` naming those
            that are, a bad value a :class:`~syncheck.decoding.SettingsError` naming the fix.
        max_length: cap on prompt + response tokens (default: the model window).
        batch_size: records per forward pass.
        pipeline: a pipeline built beforehand (:func:`syncheck.pipeline.build_pipeline`); the model, ``config`` and
            the settings are then not read (see :meth:`from_pipeline`).

    ``scorer.config`` holds the settings it was built with; ``scorer.aggregator_source`` says where the aggregator
    came from.
    """

    def __init__(
        self,
        model: Any = DEFAULT_MODEL,
        tokenizer: Any = None,
        *,
        config: ScorerConfig | None = None,
        max_length: int | None = None,
        batch_size: int = 4,
        pipeline: ScoringPipeline | None = None,
        **settings: Any,
    ) -> None:
        _check_batch_size(batch_size)
        if pipeline is None:
            pipeline = build_pipeline(model, tokenizer, ScorerConfig.with_overrides(config, settings))
        elif settings or config is not None or tokenizer is not None or model != DEFAULT_MODEL:
            given = sorted(settings) + (["config"] if config is not None else []) + \
                (["tokenizer"] if tokenizer is not None else []) + (["model"] if model != DEFAULT_MODEL else [])
            raise TypeError(f"give either pipeline= or the model and feature arguments ({', '.join(given)}), not both: "
                            f"pass those to build_pipeline(...) and the result as pipeline=")
        #: the model, featurizer and aggregator this scorer runs (:mod:`syncheck.pipeline`)
        self.pipeline = pipeline
        #: the settings it was built with (:class:`~syncheck.scorer_config.ScorerConfig`)
        self.config: ScorerConfig | None = pipeline.config
        setup = pipeline.setup
        self.lm: LoadedModel = setup.lm
        self.alignment = setup.alignment
        self.align_with_question = setup.align_with_question
        self.lid: LIDReference | None = setup.lid
        self.kl = setup.kl
        self.kl_threshold = setup.kl_threshold
        self.lookback = setup.lookback
        self.text_checks = setup.text_checks
        #: where the aggregator came from: calibrated / default / portable / directory / estimator / None
        self.aggregator_source: str | None = pipeline.aggregator_source
        self.aggregator = pipeline.aggregator
        self.probes = pipeline.probes
        #: the aggregator's final (whole-answer) sentence model, or None
        self.final_model = pipeline.final_model
        #: "min", "mean" or the fitted response verdict ("learned"; the final model's when final scores are on)
        self.response_aggregation = pipeline.response_aggregation
        self.featurizer = pipeline.featurizer
        self.max_length = max_length
        self.batch_size = batch_size

    @classmethod
    def from_pipeline(cls, pipeline: ScoringPipeline, *, max_length: int | None = None,
                      batch_size: int = 4) -> Scorer:
        """A scorer that runs a pipeline built beforehand (:func:`syncheck.pipeline.build_pipeline`)."""
        return cls(pipeline=pipeline, max_length=max_length, batch_size=batch_size)

    # ------------------------------------------------------------------ public API
    def score(self, *, context: str | Sequence[str], response: str, question: str | None = None,
              id: Any = None) -> ScoredResponse:
        """Score one response; errors come back in ``result.error``, never raised.

        Texts are keyword-only (``context=``, ``response=``, ``question=``), as in every syncheck entry point,
        so that two plain strings cannot be swapped silently.
        """
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
        """Names of the features this scorer produces, then its aggregator's probes'."""
        return self.pipeline.setup.feature_names + [p.name for p in self.probes]

    # ------------------------------------------------------------------ internals
    def _score_batch(self, batch: Sequence[Record | RecordError]) -> list[ScoredResponse]:
        results: list[ScoredResponse] = []
        todo: list[tuple[int, Record, EncodedRecord]] = []
        for rec in batch:
            if isinstance(rec, RecordError):
                results.append(ScoredResponse(id=rec.record_id, error=str(rec)))
                continue
            out = ScoredResponse(
                id=rec.id,
                warnings=list(rec.warnings),
                vector_layers=list(self.featurizer.vector_layers) if self.featurizer.keep_vectors else None,
            )
            results.append(out)
            if not rec.response.strip():
                out.error = "empty response: there is nothing to score; drop the row or fill in 'response'"
                continue
            try:
                enc = encode_record(self.lm, rec.context, rec.response, rec.question, max_length=self.max_length,
                                    with_kl=self.kl, locate_context=self.lookback)
            except ResponseTooLongError as exc:
                out.error = str(exc)
                continue
            except Exception as exc:  # an odd record must not stop the run
                out.error = f"could not tokenise the row ({exc.__class__.__name__}: {exc}); check its text fields"
                continue
            if not enc.response:
                out.error = "the response tokenises to nothing; check its encoding"
                continue
            out.warnings.extend(enc.warnings)
            if not format_context(rec.context):
                out.warnings.append("empty context: context-influence and alignment features carry no signal for "
                                    "this row")
            if script_warning(rec.response):
                out.warnings.append(script_warning(rec.response))
            todo.append((len(results) - 1, rec, enc))
        if todo:
            layers = self.featurizer.hidden_layers
            try:
                stats = token_stats(self.lm, [enc for _, _, enc in todo], hidden_layers=layers, lookback=self.lookback)
            except Exception as exc:  # a failing batch must not lose rows: retry one by one
                if len(todo) == 1:
                    results[todo[0][0]].error = f"forward pass failed: {exc.__class__.__name__}: {exc}"
                    return results
                stats = []
                for item in todo:
                    try:
                        stats.extend(token_stats(self.lm, [item[2]], hidden_layers=layers, lookback=self.lookback))
                    except Exception as exc1:
                        results[item[0]].error = f"forward pass failed: {exc1.__class__.__name__}: {exc1}"
                        stats.append(None)
            for (pos, rec, _), st in zip(todo, stats):
                if st is not None:
                    try:
                        results[pos].sentences = self._sentences(rec, st)
                    except Exception as exc:  # keep the row, say what broke
                        results[pos].error = f"feature computation failed ({exc.__class__.__name__}: {exc})"
                        continue
                    bad = non_finite_features(results[pos].sentences)
                    if bad:
                        results[pos].sentences = []
                        results[pos].error = (
                            f"non-finite feature values ({', '.join(bad[:4])}): the model produced NaN or infinite "
                            "numbers for this row; check its weights and dtype (float16 overflows on CPU: use float32)"
                        )
                    else:
                        results[pos].response_score = self.finish_response(results[pos].sentences)
        return results

    def finish_response(self, sentences: Sequence[ScoredSentence]) -> float | None:
        """A complete answer's sentences -> its ``response_score`` (``None`` without an aggregator or a scored
        sentence); sets each sentence's ``final_score`` when the scorer has a final model. Offline scoring, the live
        monitor and the server all end an answer here."""
        if self.aggregator is None or not sentences:
            return None
        scores = [s.score for s in sentences]
        if self.final_model is not None and all(x is not None for x in scores):
            scores = final_sentence_scores(self.final_model, [s.features for s in sentences]).tolist()
            for s, x in zip(sentences, scores):
                s.final_score = float(x)
        scores = [x for x in scores if x is not None]
        return aggregate_response(scores, self.response_aggregation) if scores else None

    def _sentences(self, rec: Record, stats: TokenStats) -> list[ScoredSentence]:
        spans = split_sentences(rec.response)
        ranges = assign_tokens(rec.response, stats.offsets, spans)
        premise = Premise(format_context(rec.context), rec.question)
        items = [SentenceItem(premise, span, stats, t0, t1) for span, (t0, t1) in zip(spans, ranges) if t1 > t0]
        sentences = self.featurizer.featurize(items)
        mark_degenerate(sentences, (), premise)
        return sentences


def non_finite_features(sentences: Sequence[ScoredSentence]) -> list[str]:
    """``"sentence i: name"`` for every NaN or infinite feature (a NaN must become an error, never a null)."""
    return [f"sentence {i + 1}: {name}" for i, s in enumerate(sentences)
            for name, v in s.features.items() if not math.isfinite(float(v))]
