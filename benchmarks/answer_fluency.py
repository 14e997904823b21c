"""Fluency of decoded answers: their perplexity under a model that did not decode them.

A string match counts an answer as faithful when it names the passage's entity, even inside broken text ("Gavin
Newsmailom", "The National Government of 1954–1937"). Steering can buy faithfulness with fluency, so each method's
answers are also scored by another model, given what the decoder saw:

    Passage: <the passage the decoder read>
    Question: <the question>
    Answer: <the answer>

An answer's figure is the sum of its tokens' negative log-likelihoods (nats) and its token count, read under the
scoring model in one forward pass. A method's perplexity is pooled over its answers, ``exp(sum NLL / sum tokens)``
(a long answer weighs by its tokens, as a corpus perplexity does). A method is compared with greedy on the questions
both answered (abstentions and errors carry no text), as the ratio of the two pooled perplexities, with a bootstrap
95% interval over questions. The scoring model must differ from the decoder (Qwen for SmolLM2's answers, SmolLM2 for
Qwen's): a model scores its own greedy text as likely by construction.

Scores are cached by scoring model, condition, record, method and answer text (``cache``, JSONL), so a report
recomputes nothing it has scored.

Usage (through the conflict benchmark's report)::

    .venv/bin/python -m benchmarks.conflict_qa ... --report --fluency-model qwen2.5-coder-1.5b --fluency-dtype bfloat16
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

PROMPT = "Passage: {context}\nQuestion: {question}\nAnswer:"
#: Longest answer, in words, counted as a bare answer (a name, a year, "The answer is X.").
BARE_WORDS = 4


def answer_form(text: str) -> str:
    """``"bare"`` (at most :data:`BARE_WORDS` words) or ``"sentence"``."""
    return "bare" if len(text.split()) <= BARE_WORDS else "sentence"


@functools.lru_cache(maxsize=2)
def scoring_model(name: str, dtype: str = "float32"):
    """The scoring model, loaded once per process (:func:`syncheck.model.models.load_model`)."""
    from syncheck.model.models import load_model

    return load_model(name, dtype=dtype)


def fluency_key(model: str, row: Mapping) -> str:
    """The cache key of one answer under one scoring model."""
    text = row.get("text") or ""
    raw = json.dumps([model, row["condition"], row["id"], row["method"], text], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def answered(row: Mapping) -> bool:
    """Whether a run row carries an answer to score: no error, not abstained, some text."""
    return not row.get("error") and not row.get("abstained") and bool((row.get("text") or "").strip())


@torch.no_grad()
def answer_nll(lm, prompt: str, answer: str) -> tuple[float, int]:
    """``(sum of the answer tokens' NLL in nats, token count)`` of ``answer`` after ``prompt`` under ``lm``
    (a :class:`syncheck.model.models.LoadedModel`). The answer is tokenized on its own, after a space, so the
    prompt's last token never merges into it; a prompt longer than the model's window loses its start."""
    from features.likelihood import token_logprobs

    if not answer.strip():
        return 0.0, 0
    tok = lm.tokenizer
    answer_ids = tok(" " + answer.strip(), add_special_tokens=False)["input_ids"]
    prompt_ids = tok(prompt, add_special_tokens=True)["input_ids"]
    room = max(1, lm.max_length - len(answer_ids))
    prompt_ids = prompt_ids[-room:]
    ids = torch.tensor([prompt_ids + answer_ids], device=lm.device)
    logits = lm.model(input_ids=ids).logits[0]
    start = len(prompt_ids)
    logp = token_logprobs(logits[start - 1 : -1], ids[0, start:])
    return float(-logp.sum()), len(answer_ids)


def score_answers(lm, model_name: str, rows: Iterable[Mapping], prompts: Mapping[tuple[str, str], str],
                  cache: str | Path | None = None) -> dict[str, tuple[float, int]]:
    """``{fluency_key: (nll, tokens)}`` for every answered row; ``prompts`` maps ``(condition, id)`` to the prompt
    (:data:`PROMPT` filled in). Rows already in ``cache`` are read back; new ones are appended to it as scored."""
    from tqdm import tqdm

    done: dict[str, tuple[float, int]] = {}
    if cache and Path(cache).exists():
        for line in Path(cache).read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["key"]] = (r["nll"], r["tokens"])
    todo = [r for r in rows if answered(r) and fluency_key(model_name, r) not in done]
    out = open(cache, "a", encoding="utf-8") if cache else None
    try:
        for r in tqdm(todo, desc=f"fluency under {model_name}", disable=not todo):
            key = fluency_key(model_name, r)
            nll, n = answer_nll(lm, prompts[(r["condition"], r["id"])], r["text"])
            done[key] = (nll, n)
            if out:
                out.write(json.dumps({"key": key, "model": model_name, "condition": r["condition"], "id": r["id"],
                                      "method": r["method"], "nll": nll, "tokens": n}) + "\n")
                out.flush()
    finally:
        if out:
            out.close()
    return done


def pooled_perplexity(pairs: Sequence[tuple[float, int]]) -> float:
    """``exp(sum NLL / sum tokens)``; NaN for no tokens."""
    tokens = sum(n for _, n in pairs)
    return math.exp(sum(v for v, _ in pairs) / tokens) if tokens else float("nan")


def ratio_interval(base: Sequence[tuple[float, int]], other: Sequence[tuple[float, int]], n: int = 2000,
                   seed: int = 0) -> tuple[float, float, float]:
    """``other``'s pooled perplexity over ``base``'s on the same questions (paired by position), with a bootstrap 95%
    interval over questions."""
    b = np.asarray(base, dtype=float).reshape(-1, 2)
    o = np.asarray(other, dtype=float).reshape(-1, 2)
    if len(b) != len(o) or not len(b):
        raise ValueError("ratio_interval needs the same, non-empty set of questions on both sides")

    def ratio(idx: np.ndarray) -> float:
        return math.exp(o[idx, 0].sum() / max(o[idx, 1].sum(), 1) - b[idx, 0].sum() / max(b[idx, 1].sum(), 1))

    rng = np.random.default_rng(seed)
    boots = [ratio(rng.integers(0, len(b), len(b))) for _ in range(n)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return ratio(np.arange(len(b))), float(lo), float(hi)


def _by_method(rows: Sequence[Mapping], scores: Mapping[str, tuple[float, int]], model_name: str, condition: str
               ) -> tuple[dict[str, dict[str, tuple[float, int]]], dict[tuple[str, str], str]]:
    """``({method: {id: (nll, tokens)}}, {(method, id): answer form})`` of the scored answers of ``condition``."""
    by_method: dict[str, dict[str, tuple[float, int]]] = {}
    forms: dict[tuple[str, str], str] = {}
    for r in rows:
        key = fluency_key(model_name, r)
        if r["condition"] == condition and answered(r) and key in scores:
            by_method.setdefault(r["method"], {})[r["id"]] = scores[key]
            forms[(r["method"], r["id"])] = answer_form(r["text"])
    return by_method, forms


def fluency_table(rows: Sequence[Mapping], scores: Mapping[str, tuple[float, int]], model_name: str,
                  condition: str, methods: Sequence[str]) -> list[str]:
    """A markdown table: each method's answers, their pooled perplexity under ``model_name``, and its ratio to
    greedy's on the questions both answered."""
    by_method, _ = _by_method(rows, scores, model_name, condition)
    greedy = by_method.get("greedy", {})
    lines = [f"| method | answers | perplexity under {model_name} | × greedy, same questions [95% CI] |",
             "| --- | --- | --- | --- |"]
    for m in methods:
        got = by_method.get(m)
        if not got:
            continue
        ids = [i for i in got if i in greedy]
        cell = ""
        if m != "greedy" and ids:
            r, lo, hi = ratio_interval([greedy[i] for i in ids], [got[i] for i in ids])
            cell = f"{r:.2f} [{lo:.2f}, {hi:.2f}] ({len(ids)} questions)"
        lines.append(f"| {m} | {len(got)} | {pooled_perplexity(list(got.values())):.2f} | {cell} |")
    return lines


def fluency_by_form_table(rows: Sequence[Mapping], scores: Mapping[str, tuple[float, int]], model_name: str,
                          condition: str, methods: Sequence[str]) -> list[str]:
    """The ratio to greedy within one answer form: on the questions where both answers are bare (at most
    :data:`BARE_WORDS` words), and where both are sentences. A bare name's tokens are less predictable than a sentence
    that copies the passage, so a method that answers barer than greedy has a higher pooled perplexity whatever its
    fluency; within one form that difference is gone, and what is left is the text's own."""
    by_method, forms = _by_method(rows, scores, model_name, condition)
    greedy = by_method.get("greedy", {})
    lines = ["| method | bare answers of both: questions | × greedy [95% CI] | sentences of both: questions | "
             "× greedy [95% CI] |", "| --- | --- | --- | --- | --- |"]
    for m in methods:
        got = by_method.get(m)
        if m == "greedy" or not got:
            continue
        cells = []
        for form in ("bare", "sentence"):
            ids = [i for i in got if i in greedy and forms[(m, i)] == forms[("greedy", i)] == form]
            if ids:
                r, lo, hi = ratio_interval([greedy[i] for i in ids], [got[i] for i in ids])
                cells += [str(len(ids)), f"{r:.2f} [{lo:.2f}, {hi:.2f}]"]
            else:
                cells += ["0", ""]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines
