"""The only place prompts are built.

The with-context and without-context prompts come from one function and
differ only by the context block, so KL(with || without) measures the
context's influence and nothing else.
"""

from __future__ import annotations

from typing import Sequence

#: Used when a record has no question (e.g. a summary of the context).
DEFAULT_QUESTION = "Write a response."


def format_context(context: str | Sequence[str]) -> str:
    """One string for the prompt: a list of chunks is numbered ``[1] ...``, ``[2] ...``."""
    if isinstance(context, str):
        return context.strip()
    return "\n\n".join(f"[{i}] {chunk.strip()}" for i, chunk in enumerate(context, 1))


CONTEXT_HEADER = "Context:\n"


def user_message(question: str | None, context: str | None) -> str:
    """The user turn: ``Context:`` block (only when ``context`` is given) then the question."""
    question_block = f"Question: {(question or DEFAULT_QUESTION).strip()}"
    if context is None:
        return question_block
    return f"{CONTEXT_HEADER}{context}\n\n{question_block}"


def build_prompt(tokenizer, question: str | None, context: str | None) -> str:
    """The full prompt text, ending where the response begins.

    Args:
        tokenizer: the model's tokenizer; its chat template is applied when it
            has one (with the generation prompt), else a plain
            ``...\\nAnswer:`` layout is used.
        question: the user's question, or ``None``.
        context: the already formatted context (:func:`format_context`), or
            ``None`` for the without-context prompt.
    """
    message = user_message(question, context)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
    return f"{message}\nAnswer: "


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """Token ids of a prompt from :func:`build_prompt`.

    A chat template already holds its special tokens; a plain prompt gets the
    tokenizer's own (e.g. BOS).
    """
    templated = bool(getattr(tokenizer, "chat_template", None))
    return list(tokenizer(prompt, add_special_tokens=not templated)["input_ids"])


def context_token_span(tokenizer, prompt: str, context: str) -> tuple[int, int]:
    """Token index range ``[start, end)`` of ``context`` inside ``prompt_ids(tokenizer, prompt)``.

    The tokens overlapping the context's characters; ``(n, n)`` for an empty
    context. Raises ``ValueError`` when the prompt does not hold the context
    block verbatim (a chat template that rewrites message content).
    """
    at = prompt.find(CONTEXT_HEADER + context)
    if at < 0:
        raise ValueError("the prompt does not contain the context verbatim (the chat template rewrites the user "
                         "message), so the lookback ratios cannot find it: score without lookback (drop --lookback), "
                         "or give the tokenizer a chat template that keeps the message as it is")
    c0 = at + len(CONTEXT_HEADER)
    c1 = c0 + len(context)
    templated = bool(getattr(tokenizer, "chat_template", None))
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(prompt, add_special_tokens=not templated, return_offsets_mapping=True)
        inside = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > c0 and a < c1 and b > a]
        if not inside:
            before = sum(1 for a, b in enc["offset_mapping"] if b <= c0)
            return before, before
        return inside[0], inside[-1] + 1
    start = len(tokenizer(prompt[:c0], add_special_tokens=not templated)["input_ids"])
    end = len(tokenizer(prompt[:c1], add_special_tokens=not templated)["input_ids"])
    return start, max(start, end)
