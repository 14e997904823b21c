"""The span reader: which span of the passage answers the question, and does the claim name it.

An extractive reader (all-MiniLM-L6-v2's 6 layers with a start/end head, ``AutoModelForQuestionAnswering``), trained
by ``syncheck verifier reader`` on HaluEval QA answers that occur in their passage. It reads ``[CLS] question [SEP]
passage window [SEP]`` and points at the answer. A classifier of (passage, claim) pairs sees whether the claim's words
are in the passage; it cannot tell the passage's answer from another entity of the same passage (HaluEval's
distractor pairs). Pointing can (RESULTS.md in the source repository, "The shipped support models"). It does not suit
long answers: a faithful paragraph often answers without restating the entity (below chance on RAGTruth's QA
responses).
So a caller that checks whole answers asks it only about bare answers that name the passage (:meth:`SpanReaderScorer.
reads`, :func:`bare_answer`).

**The score** of a claim ``"Question: Q\\nAnswer: S"`` (the question-aware form of
:func:`syncheck.featurize.alignment_claim`) is the share of the reader's answer that ``S`` names: over the reader's
best spans in every window of the passage (the top :data:`TOP` starts by the top :data:`TOP` ends, at most
:data:`MAX_SPAN` tokens), a softmax over their start + end logits weighs each span by how many of its normalised
words ``S`` contains. Sign convention ``+``: higher = the claim gives the passage's answer. A claim with no question,
or whose question is a conversation (it holds chat turn markers: a reply in a dialogue is not a span of the
passage), has nothing to point at and scores ``nan``; an empty answer asserts nothing and scores 1.0; an empty passage
answers nothing and scores 0.0.

The directory is laid out as a verifier's (:mod:`features.alignment.verifier`): its manifest's kind is
``span-reader`` and its ``head`` :data:`READER_HEAD`, its weights are :data:`WEIGHTS` (``verifier.safetensors`` in a
directory written before the manifest schema). The model loads when the scorer is built, never at import.
"""

from __future__ import annotations

import re
import string
from typing import Any, Sequence

import numpy as np
import torch

from features.alignment.lexical import content_words, lexical_precision
from features.alignment.verifier import DirectoryScorer
from features.alignment.windows import ClaimTooLongError, premise_budget, split_windows

#: The manifest's ``head`` of a span reader.
READER_HEAD = "span"
#: Trained tensors (float16 safetensors) of a span reader's directory.
WEIGHTS = "reader.safetensors"
#: Starts (and ends) the reader weighs per window.
TOP = 20
#: The longest span, in tokens (chosen on HaluEval QA records outside the shipped reader's training: longer spans
#: running from one entity across a sentence to another took weight).
MAX_SPAN = 10
#: The most content words a bare answer holds: the 99th percentile of the right answers the shipped reader trained
#: on.
BARE_ANSWER_WORDS = 5
#: Words an answer uses to cite its sources or announce itself ("Based on the given passages, the answer is ..."):
#: they name nothing of the passage, so a bare answer's words leave them out.
CITING_WORDS = frozenset("answer answers based given passage passages context according provided text".split())
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_QUESTION_AWARE = re.compile(r"\AQuestion: (.*?)\nAnswer: (.*)\Z", re.DOTALL)
#: A chat turn marker: a question holding one is a conversation, which no span of the context answers.
_TURN = re.compile(r"\[(?:Human|User|Assistant|System)\]:|^(?:Human|User|Assistant|System):", re.MULTILINE)


def normalised_words(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, no punctuation or articles, split on white space."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return _ARTICLES.sub(" ", text).split()


def question_and_answer(claim: str) -> tuple[str | None, str]:
    """``"Question: Q\\nAnswer: S"`` -> ``(Q, S)``; any other claim, or one whose "question" is a conversation (it
    holds chat turn markers such as ``[Human]:``: a reply in a dialogue answers no span) -> ``(None, S)``."""
    m = _QUESTION_AWARE.match(claim)
    if not m:
        return None, claim
    question = m.group(1).strip()
    return (question if question and not _TURN.search(question) else None), m.group(2)


def bare_answer(premise: str, answer: str) -> bool:
    """Whether ``answer`` is a bare answer that names the passage ``premise``: at most :data:`BARE_ANSWER_WORDS`
    content words (:func:`features.alignment.lexical.content_words`, less :data:`CITING_WORDS`), at least half of
    them in the premise. These are the answers the reader is fit to check ("The answer is X.", X a span of the
    passage); a refusal ("Unable to answer based on given passages.") names nothing of the passage, and a longer
    answer lists or paraphrases more than the one span the reader points at."""
    words = [w for w in content_words(answer) if w not in CITING_WORDS]
    return 0 < len(words) <= BARE_ANSWER_WORDS and lexical_precision(premise, " ".join(words)) >= 0.5


def named_share(span: str, claim_words: set[str]) -> float:
    """Share of ``span``'s normalised words that are among ``claim_words`` (0.0 for a span with none)."""
    words = normalised_words(span)
    return sum(w in claim_words for w in words) / len(words) if words else 0.0


class SpanReaderScorer(DirectoryScorer):
    """``align_score`` backend: the share of the span reader's answer that a question-aware claim names.

    Args:
        model: a reader directory, or a loaded ``AutoModelForQuestionAnswering`` model (then pass ``tokenizer``).
        tokenizer: the tokenizer of a loaded model.
        device, dtype: where and in which precision to run (default CPU, float32).
        max_length: input tokens per (question, window) pair (default: what the reader was trained on).
        overlap: tokens shared by consecutive premise windows (default 1/4).
    """

    name = "reader"
    #: The most sentences of an answer the reader is fit to check: its training answers are HaluEval's, 99.9% of them
    #: one sentence. A caller that checks whole answers (:class:`syncheck.checking.support.VerifierSupport`) gives a
    #: longer one no score: a paragraph often answers without restating the span (RAGTruth's QA responses).
    max_answer_sentences = 1

    #: Whether :meth:`reads` takes only bare answers that name the passage (``False``: every answer, as the check
    #: read them before this gate; measured worse on HaluEval QA, RESULTS.md in the source repository, "The answer
    #: check").
    bare_answers_only = True

    def reads(self, premise: str, answer: str) -> bool:
        """Whether the reader is fit to check ``answer`` against ``premise`` as a whole answer: a bare answer that
        names the passage (:func:`bare_answer`). A caller that checks whole answers
        (:class:`syncheck.checking.support.VerifierSupport`) gives any other answer no score; :meth:`score` itself
        scores every claim."""
        return bare_answer(premise, answer) if self.bare_answers_only else True

    def check_model(self, model: Any) -> None:
        if not hasattr(model, "qa_outputs") and "QuestionAnswering" not in type(model).__name__:
            raise ValueError(f"a span reader has a start/end head (AutoModelForQuestionAnswering); got "
                             f"{type(model).__name__} (for a one-logit verifier use the verifier:<dir> backend)")

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` the share of the reader's answer each claim names, in ``[0, 1]``
        (``nan`` for a claim without a question, or whose question is a conversation)."""
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        parsed = [question_and_answer(c) for c in claims]
        wanted = sorted({(q, p) for (q, a), p in zip(parsed, premises) if q is not None and a.strip() and p.strip()})
        answers = dict(zip(wanted, self.answer_spans(wanted, batch_size)))
        out = np.empty(len(claims))
        for i, ((q, a), p) in enumerate(zip(parsed, premises)):
            if q is None:
                out[i] = np.nan
            elif not a.strip():
                out[i] = 1.0
            elif not p.strip():
                out[i] = 0.0
            else:
                words = set(normalised_words(a))
                out[i] = sum(w * named_share(text, words) for text, w in answers[q, p])
        return out

    def answer_spans(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> list[list[tuple[str, float]]]:
        """Per ``(question, premise)``: the reader's best spans over all the premise's windows, with their softmax
        weights (summing to 1)."""
        jobs = []  # (pair index, question, window text)
        for k, (q, p) in enumerate(pairs):
            try:
                budget = premise_budget(self.tokenizer, q, self.max_length)
            except ClaimTooLongError:  # a question that fills the input: its first half of the input is kept
                ids = self.tokenizer(q, add_special_tokens=False, verbose=False)["input_ids"][:self.max_length // 2]
                q = self.tokenizer.decode(ids)
                budget = premise_budget(self.tokenizer, q, self.max_length)
            jobs.extend((k, q, w.text) for w in split_windows(p, budget, self.overlap, self.tokenizer))
        candidates: list[list[tuple[str, float]]] = [[] for _ in pairs]
        for b in range(0, len(jobs), batch_size):
            chunk = jobs[b:b + batch_size]
            for (k, _, window), spans in zip(chunk, self._window_spans([j[1] for j in chunk], [j[2] for j in chunk])):
                candidates[k].extend((window[s:e], logit) for s, e, logit in spans)
        out = []
        for spans in candidates:
            logits = torch.tensor([lg for _, lg in spans], dtype=torch.float64)
            out.append(list(zip([t for t, _ in spans], torch.softmax(logits, 0).tolist())) if spans else [])
        return out

    @torch.no_grad()
    def _window_spans(self, questions: list[str], windows: list[str]) -> list[list[tuple[int, int, float]]]:
        """Per (question, window): ``(first char, end char, start + end logit)`` of its best spans in the window."""
        enc = self.tokenizer(questions, windows, truncation="only_second", max_length=self.max_length, padding=True,
                             return_offsets_mapping=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping").tolist()
        out = self.model(**enc.to(self.device))
        starts, ends = out.start_logits.float().cpu(), out.end_logits.float().cpu()
        result = []
        for i in range(len(windows)):
            inside = torch.tensor([s == 1 for s in enc.sequence_ids(i)])
            n = int(inside.sum())
            if n == 0:
                result.append([])
                continue
            start, end = starts[i].masked_fill(~inside, -1e9), ends[i].masked_fill(~inside, -1e9)
            top_s, top_e = start.topk(min(TOP, n)).indices.tolist(), end.topk(min(TOP, n)).indices.tolist()
            result.append([(offsets[i][a][0], offsets[i][b][1], float(start[a] + end[b]))
                           for a in top_s for b in top_e if a <= b < a + MAX_SPAN])
        return result


__all__ = ["BARE_ANSWER_WORDS", "CITING_WORDS", "MAX_SPAN", "READER_HEAD", "TOP", "WEIGHTS", "SpanReaderScorer",
           "bare_answer", "named_share", "normalised_words", "question_and_answer"]
