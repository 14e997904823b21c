"""One chat request, run on a worker thread: monitor, FOD or abstention, reported as items on its :class:`Job`.

Items, in order: ``("text", str)`` (text the client may show), ``("sentence", dict)`` (a finished, scored
sentence), then one ``("done", dict)`` with the summary. A request is a task of the
:class:`~syncheck.serve.scheduler.Scheduler`: it runs on the model thread, and a ``monitor`` request's tokens are
decoded in one batch with the other running streams' (:class:`~syncheck.pool.DecodePool`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fod.results import ABSTAIN_TEXT, AcceptedSentence
from syncheck.aggregators.apply import aggregate_response
from syncheck.aggregators.thresholds import resolve_thresholds
from syncheck.decoding import Decoding
from syncheck.results import ScoredSentence
from syncheck.passes import ResponseTooLongError, prompt_pair
from syncheck.prompts import format_context
from syncheck.serve.protocol import ApiError, SyncheckOptions
from syncheck.serve.scheduler import Job, Task

FINISH_REASONS = {"eos": "stop", "stop": "stop", "max_new_tokens": "length", "forced": "stop"}


@dataclass
class ChatJob:
    """What a worker needs to answer one request."""

    question: str
    documents: list[str]
    decoding: Decoding
    options: SyncheckOptions
    warnings: list[str] = field(default_factory=list)


def prompt_tokens_or_413(scorer: Any, question: str, documents: list[str], max_new_tokens: int) -> int:
    """Prompt tokens, or 413 when the documents and the token budget do not fit the model's window."""
    lm = scorer.lm
    try:
        pair = prompt_pair(lm, documents, question, max_new_tokens, scorer.max_length)
    except ResponseTooLongError:
        raise ApiError(413, f"max_tokens {max_new_tokens} plus the question exceed the model's window of "
                            f"{lm.max_length} tokens: lower max_tokens", param="max_tokens") from None
    if pair.warnings:  # the context had to be truncated to fit
        full = len(lm.tokenizer(format_context(documents), add_special_tokens=False)["input_ids"])
        raise ApiError(413, f"the documents take {full} tokens; with the prompt and max_tokens={max_new_tokens} they "
                            f"exceed the model's window of {lm.max_length} tokens: send fewer or shorter documents, "
                            "or lower max_tokens", param="documents", code="context_length_exceeded")
    return len(pair.with_context)


def sentence_json(index: int, sentence: ScoredSentence, tau1: float, features: bool = True) -> dict[str, Any]:
    """A sentence event: ``index``, ``text``, ``start``, ``end``, ``score``, ``features``, ``flagged``
    (its score is below ``tau1``, the threshold FOD would backtrack at) and ``degenerate`` (``"repeat"``,
    ``"question"``, ``"no_content"`` or ``None``: informativeness, not part of the score)."""
    row = sentence.to_json()
    out = {"index": index, "text": row["text"], "start": row["start"], "end": row["end"], "score": row.get("score")}
    if features:
        out["features"] = row["features"]
    out["flagged"] = out["score"] is not None and out["score"] < tau1
    out["degenerate"] = sentence.degenerate
    return out


class ChatRunner:
    """Runs chat requests against one scorer (its monitor, FOD and abstention decoders share the model).

    Args:
        scorer: the served :class:`~syncheck.scorer.Scorer`.
    """

    def __init__(self, scorer: Any) -> None:
        from fod.generator import FODGenerator
        from syncheck.monitor import Monitor
        from syncheck.pool import DecodePool

        self.scorer = scorer
        self.monitor = Monitor(scorer)
        #: batches the decode steps of the running ``monitor`` streams (the scheduler's ``batch_step``)
        self.pool = DecodePool(self.monitor.engine)
        self.fod = FODGenerator(scorer, checker=None)
        self._checker = None

    # ------------------------------------------------------------------ entry
    def task(self, job: Job, chat: ChatJob) -> Task:
        """The request as a task: in ``monitor`` mode it yields its :class:`~syncheck.monitor.MonitorRun` for every
        token (the scheduler steps all of them at once); otherwise it runs in one turn."""
        prompt_tokens = prompt_tokens_or_413(self.scorer, chat.question, chat.documents, chat.decoding.max_new_tokens)
        job.put("ready")
        method = chat.options.method
        tau1, tau2, source = resolve_thresholds(self.scorer, chat.options.tau1, chat.options.tau2)
        thresholds = {"tau1": tau1, "tau2": tau2, "from": source}
        if method == "monitor":
            text, sentences, trace, warnings, tokens = yield from self._monitor(job, chat, tau1)
        elif method == "fod":
            text, sentences, trace, warnings, tokens = self._fod(job, chat, tau1)
        else:
            text, sentences, trace, warnings, tokens = self._abstain(job, chat, tau1)
        check = None
        run_check = chat.options.final_check if chat.options.final_check is not None else method != "monitor"
        if run_check and sentences:
            yield  # the check is a turn of its own
            check = self.checker.check(question=chat.question, context=chat.documents, answer=text).to_json()
        scores = [s.score for s in sentences if s.score is not None]
        job.put("done", {
            "method": method,
            "text": text,
            "response_score": aggregate_response(scores, self.scorer.response_aggregation) if scores else None,
            "thresholds": thresholds,
            "aggregator": self.scorer.aggregator_source,
            "trace": trace,
            "final_check": check,
            "warnings": chat.warnings + list(warnings),
            "sentences": [sentence_json(i, s, tau1, chat.options.features) for i, s in enumerate(sentences)],
            "finish_reason": FINISH_REASONS.get(trace.get("stop", "eos"), "stop"),
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                      "total_tokens": prompt_tokens + tokens},
        })

    @property
    def checker(self):
        """The Provenance checker FOD's final check uses (built on first use, on the model thread)."""
        if self._checker is None:
            from fod.generator import FINAL_CHECK_TOP_K
            from syncheck.provenance import ProvenanceChecker

            self._checker = ProvenanceChecker.for_scorer(self.scorer, top_k=FINAL_CHECK_TOP_K)
        return self._checker

    # ------------------------------------------------------------------ methods
    def _monitor(self, job: Job, chat: ChatJob, tau1: float):
        run = self.monitor.run(question=chat.question, context=chat.documents, decoding=chat.decoding)
        while run.result is None:
            yield run  # the next token: one forward with the other streams' (self.pool)
            step = run.last
            if step.text:
                job.put("text", step.text)
            for ev in step.events:
                job.put("sentence", sentence_json(ev.index, ev.sentence, tau1, chat.options.features))
        result = run.result
        trace = {"stop": result.stop_reason, "tokens": len(result.token_ids)}
        return result.text, result.sentences, trace, result.warnings, len(result.token_ids)

    def _fod(self, job: Job, chat: ChatJob, tau1: float):
        def accepted(a: AcceptedSentence) -> None:
            job.check()  # a client that left stops FOD at its next accepted sentence
            job.put("text", a.text)
            job.put("sentence", sentence_json(a.index, a.sentence, tau1, chat.options.features))

        opts = chat.options
        res = self.fod.generate(question=chat.question, context=chat.documents, tau1=opts.tau1, tau2=opts.tau2,
                                num_samples=opts.num_samples, num_beams=min(opts.num_beams, opts.num_samples),
                                max_sentences=opts.max_sentences, decoding=chat.decoding, callback=accepted)
        if not res.sentences:
            job.put("text", res.text)  # the abstention text
        return res.text, res.sentences, _jsonable(res.trace), res.warnings, self._count(res.text)

    def _abstain(self, job: Job, chat: ChatJob, tau1: float):
        from fod.baselines import AbstainGenerator

        gen = AbstainGenerator(self.scorer, checker=None, threshold=chat.options.tau1)
        res = gen.generate(question=chat.question, context=chat.documents, max_sentences=chat.options.max_sentences,
                           decoding=chat.decoding)
        shown = 0
        for i, s in enumerate(res.sentences):  # nothing is shown before the whole answer passed
            job.put("text", res.text[shown : s.end])
            job.put("sentence", sentence_json(i, s, tau1, chat.options.features))
            shown = s.end
        if res.text == ABSTAIN_TEXT:
            job.put("text", res.text)
        return res.text, res.sentences, _jsonable(res.trace), res.warnings, self._count(res.text)

    def _count(self, text: str) -> int:
        return len(self.scorer.lm.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, ScoredSentence):
        return value.to_json()
    return value


__all__ = ["ChatJob", "ChatRunner", "prompt_tokens_or_413", "sentence_json"]
