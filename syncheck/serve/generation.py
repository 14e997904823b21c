"""One chat request, run as a task of the model thread: the monitor, or a registered decoder (FOD, abstention;
:mod:`syncheck.serve.decoders`), reported as items on its :class:`Job`.

Items, in order: ``("text", str)`` (text the client may show), ``("sentence", dict)`` (a finished, scored
sentence), then one ``("done", dict)`` with the summary. A request is a task of the
:class:`~syncheck.serve.scheduler.Scheduler`: it runs on the model thread, and a ``monitor`` request's tokens are
decoded in one batch with the other running streams' (:class:`~syncheck.live.pool.DecodePool`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncheck.aggregators.thresholds import resolve_thresholds
from syncheck.decoding import Decoding
from syncheck.live.generation import Repair
from syncheck.model.passes import ResponseTooLongError, prompt_pair
from syncheck.model.prompts import format_context
from syncheck.results import ScoredSentence
from syncheck.serve.decoders import DecodedAnswer, DecoderFactory, Decoders
from syncheck.serve.protocol import ApiError, SyncheckOptions
from syncheck.serve.scheduler import Job, Task
from syncheck.serve.turns import in_turns

FINISH_REASONS = {"eos": "stop", "stop": "stop", "max_new_tokens": "length", "forced": "stop"}


@dataclass
class ChatJob:
    """What the model thread needs to answer one request."""

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


def sentence_json(index: int, sentence: ScoredSentence, tau1: float, features: bool = True,
                  repair: Repair | None = None) -> dict[str, Any]:
    """A sentence event: ``index``, ``text``, ``start``, ``end``, ``score``, ``features``, ``flagged``
    (its score is below ``tau1``, the threshold FOD would backtrack at) and ``degenerate`` (``"repeat"``,
    ``"question"``, ``"no_content"``, ``"meta"`` or ``None``: informativeness, not part of the score); in the done
    event also ``final_score``, the whole-answer score (:mod:`syncheck.aggregators.final`), where there is one.
    A sentence that replaced a flagged one (FOD's ``repair``) also has ``repair``, :func:`repair_json`."""
    row = sentence.to_json()
    out = {"index": index, "text": row["text"], "start": row["start"], "end": row["end"], "score": row.get("score")}
    if features:
        out["features"] = row["features"]
    if row.get("final_score") is not None:  # in the done event, once the answer is complete
        out["final_score"] = row["final_score"]
    out["flagged"] = out["score"] is not None and out["score"] < tau1
    out["degenerate"] = sentence.degenerate
    if repair is not None:
        out["repair"] = repair_json(index, repair)
    return out


def repair_json(index: int, repair: Repair) -> dict[str, Any]:
    """The sentence FOD took back at ``index`` (the replacement's own index): ``index``, ``text`` and ``score`` of the
    dropped sentence, its ``degenerate`` kind, and ``chosen_by`` (how its replacement was chosen: ``"tau2"``,
    ``"fallback:tau1"``, ``"fallback:best"`` or ``"beam"``)."""
    dropped = repair.dropped
    return {"index": index, "text": dropped.text, "score": dropped.score, "degenerate": dropped.degenerate,
            "chosen_by": repair.chosen_by}


class JobSink:
    """A decoder's reports as the job's ``text`` and ``sentence`` items
    (:class:`~syncheck.serve.decoders.AnswerSink`)."""

    def __init__(self, job: Job, tau1: float, features: bool) -> None:
        self.job, self.tau1, self.features = job, tau1, features

    def text(self, text: str) -> None:
        self.job.put("text", text)

    def sentence(self, index: int, sentence: ScoredSentence, repair: Repair | None = None) -> None:
        self.job.put("sentence", sentence_json(index, sentence, self.tau1, self.features, repair))

    def check(self) -> None:
        self.job.check()


class ChatRunner:
    """Runs chat requests against one scorer (the monitor and every decoder share the model).

    Args:
        scorer: the served :class:`~syncheck.scorer.Scorer`.
        decoders: factories of the decoders besides ``monitor``, by method name (default: those registered under
            the ``syncheck.decoders`` entry-point group, :func:`~syncheck.serve.decoders.registered_decoders`).
        packing: the pool's rounds: ``auto`` (packed on CPU where the model allows it), ``on`` or ``off``
            (:class:`~syncheck.live.pool.DecodePool`).
    """

    def __init__(self, scorer: Any, decoders: dict[str, DecoderFactory] | None = None, packing: str = "auto") -> None:
        from syncheck.live.monitor import Monitor
        from syncheck.live.pool import DecodePool, packing_choice

        self.scorer = scorer
        # the without-context flushes run between the pool's decode steps: a worker thread beside batched steps
        # measured 15-20% fewer tokens/s at concurrency 4 and 8 on 2 CPU cores (RESULTS.md in the source repository,
        # "The
        # without-context pass beside decoding"); it pays for single streams only
        self.monitor = Monitor(scorer, background_kl=False)
        #: batches the decode steps of the running ``monitor`` streams (the scheduler's ``batch_step``)
        self.pool = DecodePool(self.monitor.engine, packed=packing_choice(packing))
        self.decoders = Decoders(scorer, decoders)
        self._checker = None

    @property
    def methods(self) -> list[str]:
        """Every ``syncheck.method`` this runner answers."""
        return ["monitor", *(n for n in self.decoders.names if n != "monitor")]

    # ------------------------------------------------------------------ entry
    def task(self, job: Job, chat: ChatJob) -> Task:
        """The request as a task: in ``monitor`` mode it yields its :class:`~syncheck.live.monitor.MonitorRun` for every
        token (the scheduler steps all of them at once); a decoder (FOD, abstention) yields ``None`` before each of
        its forwards (:func:`~syncheck.serve.turns.in_turns`), so it takes one forward per round."""
        prompt_tokens = prompt_tokens_or_413(self.scorer, chat.question, chat.documents, chat.decoding.max_new_tokens)
        job.put("ready")
        method = chat.options.method
        tau1, tau2, source = resolve_thresholds(self.scorer, chat.options.tau1, chat.options.tau2)
        thresholds = {"tau1": tau1, "tau2": tau2, "from": source}
        if method == "monitor":
            text, sentences, trace, warnings, tokens, response_score = yield from self._monitor(job, chat, tau1)
        else:
            decoder, sink = self.decoders.get(method), JobSink(job, tau1, chat.options.features)
            done = yield from in_turns(  # a forward per turn: the monitor streams keep stepping meanwhile
                lambda: decoder.decode(question=chat.question, documents=chat.documents, decoding=chat.decoding,
                                       options=chat.options, sink=sink), self.scorer.lm.model)
            text, sentences, trace, warnings, tokens, response_score = self._decoded(done)
        check = None
        run_check = chat.options.final_check if chat.options.final_check is not None else method != "monitor"
        if run_check and sentences:
            yield  # the check is a turn of its own
            check = self.checker.check(question=chat.question, context=chat.documents, answer=text).to_json()
        job.put("done", {
            "method": method,
            "text": text,
            "response_score": response_score,
            # the whole-answer scores, by sentence index (a stream's sentence events carried the live ones)
            "final_scores": ([s.final_score for s in sentences]
                             if any(s.final_score is not None for s in sentences) else None),
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
            from syncheck.checking.provenance import FINAL_CHECK_TOP_K, ProvenanceChecker

            self._checker = ProvenanceChecker.for_scorer(self.scorer, top_k=FINAL_CHECK_TOP_K)
        return self._checker

    # ------------------------------------------------------------------ methods
    def _monitor(self, job: Job, chat: ChatJob, tau1: float):
        # prefilled by the pool, together with the other streams that start in this round
        run = self.monitor.run(question=chat.question, context=chat.documents, decoding=chat.decoding, prefill=False)
        while run.result is None:
            yield run  # the next token: one forward with the other streams' (self.pool)
            step = run.last
            if step.text:
                job.put("text", step.text)
            for ev in step.events:
                job.put("sentence", sentence_json(ev.index, ev.sentence, tau1, chat.options.features))
        result = run.result
        trace = dict(result.trace)  # {"stop": ..., "tokens": ...}, the monitor's own trace
        return result.text, result.sentences, trace, result.warnings, len(result.token_ids), result.response_score

    def _decoded(self, done: DecodedAnswer):
        score = done.response_score if done.response_score is not None else self.scorer.finish_response(done.sentences)
        return done.text, done.sentences, done.trace, done.warnings, self._count(done.text), score

    def _count(self, text: str) -> int:
        return len(self.scorer.lm.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


__all__ = ["ChatJob", "ChatRunner", "JobSink", "prompt_tokens_or_413", "repair_json", "sentence_json"]
