"""Pairs a language model wrote, labelled by construction (AlignScore's QA negatives).

A small model answers each question twice with greedy decoding: once from the whole passage, once from the passage
with every sentence that holds the right answer removed. Only the first sentence of each answer is kept.

- The answer from the passage *without* the answer's sentences, when it does not contain the right answer, names
  something else: against the *whole* passage it is unsupported (0). These are the bare answers that name another
  entity of the passage, or one of the model's own.
- The answer from the whole passage, when it contains the right answer, is supported (1). Both sides come from one
  writer, so the verifier cannot tell them apart by style.

Answers that fit neither rule are dropped. The model is loaded by the caller (any name
:func:`syncheck.model.models.load_model` takes).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import torch

from features.sentences import split_sentences
from syncheck.featurize import alignment_claim
from syncheck.model.prompts import build_prompt
from syncheck.training.pairs import VerifierPair

#: Tokens each answer may take.
MAX_NEW_TOKENS = 40


def without_answer(context: str, answer: str) -> str | None:
    """``context`` less every sentence containing ``answer`` (case-insensitive); ``None`` when nothing is left or no
    sentence held it."""
    sentences = [s.text for s in split_sentences(context)]
    kept = [s for s in sentences if answer.casefold() not in s.casefold()]
    if len(kept) == len(sentences) or not kept:
        return None
    return " ".join(kept)


def first_sentence(text: str) -> str:
    spans = split_sentences(text.strip())
    return spans[0].text.strip() if spans else ""


@torch.no_grad()
def generate_answers(loaded: Any, prompts: Sequence[tuple[str, str]], batch_size: int = 8,
                     max_new_tokens: int = MAX_NEW_TOKENS, progress: bool = True) -> list[str]:
    """Greedy answers of ``loaded`` (a :class:`syncheck.model.models.LoadedModel`) to ``(question, context)``
    prompts, left-padded in batches."""
    from tqdm import tqdm

    tok, model = loaded.tokenizer, loaded.model
    side, tok.padding_side = tok.padding_side, "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    out: list[str] = []
    try:
        for s in tqdm(range(0, len(prompts), batch_size), desc="writer", disable=not progress):
            texts = [build_prompt(tok, q, c) for q, c in prompts[s : s + batch_size]]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(loaded.device)
            ids = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
            out += tok.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tok.padding_side = side
    return out


def writer_pairs(loaded: Any, records: Iterable[tuple[str, str, str, str]], batch_size: int = 8,
                 progress: bool = True) -> Iterator[VerifierPair]:
    """Labelled pairs from ``(group, context, question, right answer)`` records (see the module docstring)."""
    jobs: list[tuple[str, str, str, str, str, bool]] = []  # group, context, question, answer, prompt context, whole
    for group, context, question, answer in records:
        answer = answer.strip()
        rest = without_answer(context, answer) if answer else None
        if rest is None:
            continue
        jobs += [(group, context, question, answer, context, True), (group, context, question, answer, rest, False)]
    written = generate_answers(loaded, [(job[2], job[4]) for job in jobs], batch_size, progress=progress)
    for (group, context, question, answer, _, whole), text in zip(jobs, written):
        said = first_sentence(text)
        if not said:
            continue
        holds = answer.casefold() in said.casefold()
        if whole and holds:
            yield VerifierPair(context, alignment_claim(said, question), 1, group, "writer-whole")
        elif not whole and not holds:
            yield VerifierPair(context, alignment_claim(said, question), 0, group, "writer-removed")


__all__ = ["MAX_NEW_TOKENS", "first_sentence", "generate_answers", "without_answer", "writer_pairs"]
