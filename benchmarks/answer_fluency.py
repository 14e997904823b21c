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

import copy
import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

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
def answers_nll(lm, prompt: str, answers: Sequence[str]) -> list[tuple[float, int]]:
    """``(sum of the answer tokens' NLL in nats, token count)`` of each of ``answers`` after ``prompt`` under ``lm``
    (a :class:`syncheck.model.models.LoadedModel`). The prompt is run once and its cache reused for every answer.
    Each answer is tokenized on its own, after a space, so the prompt's last token never merges into it; a prompt
    longer than the model's window (with the longest answer) loses its start. An empty answer is ``(0.0, 0)``."""
    from features.likelihood import token_logprobs
    from syncheck.model.forward_cache import cache_kwargs, returned_cache

    tok = lm.tokenizer
    ids = [tok(" " + a.strip(), add_special_tokens=False)["input_ids"] if a.strip() else [] for a in answers]
    if not any(ids):
        return [(0.0, 0)] * len(answers)
    prompt_ids = tok(prompt, add_special_tokens=True)["input_ids"]
    prompt_ids = prompt_ids[-max(1, lm.max_length - max(map(len, ids))):]
    first = lm.model(input_ids=torch.tensor([prompt_ids], device=lm.device), use_cache=True)
    out = []
    for answer_ids in ids:
        if not answer_ids:
            out.append((0.0, 0))
            continue
        cache = copy.deepcopy(returned_cache(first))  # each answer extends the prompt's cache on its own
        target = torch.tensor([answer_ids], device=lm.device)
        logits = lm.model(input_ids=target, use_cache=True, **cache_kwargs(lm.model, cache)).logits[0]
        logits = torch.cat([first.logits[0, -1:], logits[:-1]])  # row t predicts answer token t
        out.append((float(-token_logprobs(logits, target[0]).sum()), len(answer_ids)))
    return out


def answer_nll(lm, prompt: str, answer: str) -> tuple[float, int]:
    """:func:`answers_nll` of one answer."""
    return answers_nll(lm, prompt, [answer])[0]


def cache_path(run_file: str) -> str:
    """The fluency cache beside a run file: ``RUN.fluency.jsonl``, or its gzipped copy where only that exists (as in
    ``benchmarks/runs``)."""
    plain = run_file.removesuffix(".gz").removesuffix(".jsonl") + ".fluency.jsonl"
    return plain + ".gz" if not Path(plain).exists() and Path(plain + ".gz").exists() else plain


def score_answers(lm, model_name: str, rows: Iterable[Mapping], prompts: Mapping[tuple[str, str], str],
                  cache: str | Path | None = None) -> dict[str, tuple[float, int]]:
    """``{fluency_key: (nll, tokens)}`` for every answered row; ``prompts`` maps ``(condition, id)`` to the prompt
    (:data:`PROMPT` filled in). Rows already in ``cache`` (JSON lines, gzipped where it ends in ``.gz``) are read
    back; new ones are appended to it as scored."""
    import gzip

    from tqdm import tqdm

    from benchmarks.fod_table2 import read_rows

    done = {r["key"]: (r["nll"], r["tokens"]) for r in read_rows(str(cache))} if cache else {}
    todo: dict[str, list[Mapping]] = {}  # the answers of one prompt are scored together
    for r in rows:
        if answered(r) and fluency_key(model_name, r) not in done:
            todo.setdefault(prompts[(r["condition"], r["id"])], []).append(r)
    out = ((gzip.open if str(cache).endswith(".gz") else open)(cache, "at", encoding="utf-8")
           if cache and todo else None)
    try:
        for prompt, group in tqdm(todo.items(), desc=f"fluency under {model_name}", unit="question",
                                  disable=not todo):
            for r, (nll, n) in zip(group, answers_nll(lm, prompt, [r["text"] for r in group])):
                key = fluency_key(model_name, r)
                done[key] = (nll, n)
                if out:
                    out.write(json.dumps({"key": key, "model": model_name, "condition": r["condition"],
                                          "id": r["id"], "method": r["method"], "nll": nll, "tokens": n}) + "\n")
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
    interval over questions: ``exp`` of the paired difference of their pooled mean token NLLs
    (:func:`benchmarks._common.bootstrap_paired_difference`, each answer's tokens at its mean NLL)."""
    from benchmarks._common import bootstrap_paired_difference

    if len(base) != len(other) or not len(base):
        raise ValueError("ratio_interval needs the same, non-empty set of questions on both sides")

    def tokens(pairs: Sequence[tuple[float, int]]) -> list[list[float]]:
        return [[nll / k] * int(k) for nll, k in pairs]

    d, lo, hi = bootstrap_paired_difference(tokens(base), tokens(other), n=n, seed=seed)
    return math.exp(d), math.exp(lo), math.exp(hi)


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
