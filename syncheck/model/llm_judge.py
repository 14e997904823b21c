"""LLM yes/no judge: P("Yes") for "Does the premise support the hypothesis?" from a local causal LM.

The prompt (one user turn, through the chat template when the tokenizer has
one, else followed by ``"\\nAnswer:"``) is ``"premise-hypothesis"`` by default::

    Premise: <premise window>
    Hypothesis: <claim>
    Does the premise support the hypothesis? Answer Yes or No.

:data:`JUDGE_PROMPTS` holds the others, by name (``prompt=``); each ends in a Yes/No question.

The score is a softmax over two logits of the *next* token: "Yes" and "No".
Each side pools the spellings a tokenizer may use for the answer's first token
("Yes"/" Yes", "No"/" No": first token of each; a token both sides share is
dropped) by log-sum-exp,
so ``score = exp(lse_yes) / (exp(lse_yes) + exp(lse_no))``. Other tokens are
ignored: the score is the judge's preference between the two answers.

Long premises are split into overlapping windows that fit the model next to
the prompt and the whole claim; the score is the max over windows. Offline it
runs SmolLM2-135M-Instruct (``smollm2-135m``). Sign convention ``+``.

Claims that share a premise window share its prompt prefix: the prefix's
key/value cache is computed once and each claim runs only its own tokens
(the premise is most of the prompt, so checking every sentence of an answer
against one source costs little more than checking one). The token ids are
those of the whole prompt, so the score equals the uncached one up to float
rounding.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from features.alignment.hf_utils import model_max_tokens
from features.alignment.windows import max_over_windows, premise_budget, split_windows
from syncheck.model.forward_cache import cache_kwargs, returned_cache

#: The judge's user message by name; ``{premise}`` and ``{claim}`` are filled in, both stripped.
JUDGE_PROMPTS = {
    "premise-hypothesis": "Premise: {premise}\nHypothesis: {claim}\nDoes the premise support the hypothesis? "
                          "Answer Yes or No.",
    "document-claim": "Document:\n{premise}\n\nClaim: {claim}\n\nIs every fact in the claim stated in the document "
                      "or directly implied by it? Answer Yes or No.",
    "source-check": "You are checking an answer against its source.\n\nSource:\n{premise}\n\nSentence from the answer: "
                    "{claim}\n\nDoes the source contain every name, number, date and fact in this sentence? Answer Yes "
                    "or No.",
}
DEFAULT_PROMPT = "premise-hypothesis"
YES_SPELLINGS = ("Yes", " Yes")
NO_SPELLINGS = ("No", " No")
#: Default premise window: long enough for a retrieved passage, short enough to stay fast on CPU.
DEFAULT_PREMISE_TOKENS = 512
#: Shortest shared prompt prefix worth a cached pass of its own.
MIN_SHARED_TOKENS = 16


def judge_message(premise: str, claim: str, prompt: str = DEFAULT_PROMPT) -> str:
    """The user message of the judge prompt named ``prompt`` (see :data:`JUDGE_PROMPTS`)."""
    return JUDGE_PROMPTS[prompt].format(premise=premise.strip(), claim=claim.strip())


def _first_tokens(tokenizer: Any, spellings: Sequence[str]) -> list[int]:
    ids = []
    for s in spellings:
        toks = tokenizer(s, add_special_tokens=False)["input_ids"]
        if toks and toks[0] not in ids:
            ids.append(int(toks[0]))
    return ids


class LLMJudgeScorer:
    """``align_score`` backend: a causal LM asked whether the premise supports the claim.

    Args:
        model: an already loaded ``LoadedModel`` (anything with ``.model`` and
            ``.tokenizer``), a ``transformers`` causal LM with ``tokenizer``, or
            a model name together with ``loader``.
        loader: ``loader(name, device=..., dtype=...)`` -> a loaded model (default
            :func:`syncheck.model.models.load_model`).
        device, dtype: used when loading by name.
        max_premise_tokens: premise window size (also capped by the model window).
        prompt: the question's wording, a name in :data:`JUDGE_PROMPTS`.
        progress: tqdm bar (``None``: only for long jobs).
    """

    name = "llm-judge"

    def __init__(
        self,
        model: Any = "smollm2-135m",
        tokenizer: Any = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        max_premise_tokens: int = DEFAULT_PREMISE_TOKENS,
        overlap: int | None = None,
        progress: bool | None = None,
        loader: Callable[..., Any] | None = None,
        prompt: str = DEFAULT_PROMPT,
    ) -> None:
        if prompt not in JUDGE_PROMPTS:
            raise ValueError(f"unknown judge prompt {prompt!r}; use one of: {', '.join(JUDGE_PROMPTS)}")
        self.prompt_name = prompt
        if isinstance(model, str):
            if loader is None:
                from syncheck.model.models import load_model as loader
            model = loader(model, device=device, dtype=dtype or torch.float32)
        if hasattr(model, "model") and hasattr(model, "tokenizer"):
            model, tokenizer = model.model, model.tokenizer
        if tokenizer is None:
            raise ValueError("an already-loaded model needs its tokenizer: LLMJudgeScorer(model, tokenizer)")
        self.model = model.eval()
        self.tokenizer = tokenizer
        yes, no = _first_tokens(tokenizer, YES_SPELLINGS), _first_tokens(tokenizer, NO_SPELLINGS)
        # A first token both answers share (e.g. a lone space) says nothing about the answer: drop it.
        self.yes_ids = [t for t in yes if t not in no]
        self.no_ids = [t for t in no if t not in yes]
        if not self.yes_ids or not self.no_ids:
            raise ValueError("this tokenizer does not give 'Yes' and 'No' distinct first tokens; use another judge "
                             "model")
        self.max_length = model_max_tokens(model, tokenizer)
        self.max_premise_tokens = max_premise_tokens
        self.overlap = overlap
        self.progress = progress
        self._templated = self._uses_chat_template()
        self._overhead = len(self._prompt_ids("", ""))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self._pad_id = 0 if pad is None else int(pad)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _uses_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def prompt(self, premise: str, claim: str) -> str:
        """The full prompt text, ending where the judge's answer begins."""
        message = judge_message(premise, claim, self.prompt_name)
        if self._templated:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
            )
        return f"{message}\nAnswer:"

    def _prompt_ids(self, premise: str, claim: str) -> list[int]:
        return list(self.tokenizer(self.prompt(premise, claim), add_special_tokens=not self._templated)["input_ids"])

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` P(Yes) vs No, max over premise windows."""
        return max_over_windows(
            premises, claims, self._windows, self._score_pairs, batch_size, self.progress, "llm-judge"
        )

    def _windows(self, premise: str, claim: str) -> list[str]:
        budget = premise_budget(self.tokenizer, claim, self.max_length, extra_tokens=self._overhead)
        budget = min(budget, self.max_premise_tokens)
        return [w.text for w in split_windows(premise, budget, self.overlap, self.tokenizer)]

    @torch.no_grad()
    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        return self._by_premise(premises, claims, self._score_ids)

    def _by_premise(self, premises: list[str], claims: list[str],
                    run: Callable[[list[list[int]], bool], np.ndarray]) -> np.ndarray:
        """``run(prompt token ids, shared_prefix)`` over the pairs, the claims of one premise together (their prompts
        share its prefix, which then runs once); returns ``run``'s rows in the pairs' order."""
        seqs = [self._prompt_ids(p, c) for p, c in zip(premises, claims)]
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(premises):
            groups.setdefault(p, []).append(i)
        alone = [i for rows in groups.values() if len(rows) == 1 for i in rows]
        parts: list[tuple[list[int], np.ndarray]] = []
        if alone:
            parts.append((alone, run([seqs[i] for i in alone], False)))
        for rows in groups.values():
            if len(rows) > 1:
                parts.append((rows, run([seqs[i] for i in rows], True)))
        first = parts[0][1]
        out = np.empty((len(seqs),) + first.shape[1:], dtype=np.float64)
        for rows, values in parts:
            out[rows] = values
        return out

    def _score_ids(self, seqs: list[list[int]], shared_prefix: bool = False) -> np.ndarray:
        """P(Yes) vs No after each prompt; with ``shared_prefix``, the rows' common leading tokens run once."""
        nxt = self._next_token_logits(*self._batch(seqs, shared_prefix))
        yes = torch.logsumexp(nxt[:, self.yes_ids], dim=-1)
        no = torch.logsumexp(nxt[:, self.no_ids], dim=-1)
        return torch.sigmoid(yes - no).cpu().numpy()

    def _batch(self, seqs: list[list[int]], shared_prefix: bool) -> tuple[torch.Tensor, torch.Tensor, list[int], Any]:
        """``(ids, mask, last, cache)`` of the prompts, right-padded: ``cache`` holds the rows' common leading tokens
        (with ``shared_prefix``, when they are worth a pass of their own), ``ids`` the rest, and ``last[b]`` is the
        position of row ``b``'s last token in ``ids``."""
        start = _common_prefix_length(seqs) if shared_prefix else 0
        start = min(start, min(len(s) for s in seqs) - 1)  # every row keeps at least one token of its own
        cache = None
        if start >= MIN_SHARED_TOKENS:
            prefix = torch.tensor([seqs[0][:start]], device=self.device)
            cache = returned_cache(self._forward(prefix, torch.ones_like(prefix), None, keep=True))
            cache.batch_repeat_interleave(len(seqs))
        else:
            start = 0
        tails = [s[start:] for s in seqs]
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(tails), start + width), dtype=torch.long)
        for i, t in enumerate(tails):  # right padding: real tokens keep positions start..start+len-1
            ids[i, : len(t)] = torch.tensor(t)
            mask[i, : start + len(t)] = 1
        return ids.to(self.device), mask.to(self.device), [len(t) - 1 for t in tails], cache

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, cache: Any, keep: bool = False,
                 **kwargs: Any) -> Any:
        """The decoder body (or the whole model, if it has no separable body) on ``ids`` after ``cache``; ``keep``
        returns the key/value cache of ``ids`` too."""
        body = self._body()
        model = body if body is not None else self.model
        return model(input_ids=ids, attention_mask=mask, use_cache=keep, **cache_kwargs(model, cache), **kwargs)

    def _body(self) -> Any:
        body, head = getattr(self.model, "base_model", None), self.model.get_output_embeddings()
        return None if body is None or body is self.model or head is None else body

    def _next_token_logits(self, ids: torch.Tensor, mask: torch.Tensor, last: list[int],
                           cache: Any = None) -> torch.Tensor:
        """``(B, V)`` float32 logits after position ``last[b]`` of each row of ``ids`` (which follow ``cache``).

        Runs the decoder body and applies the output layer only at those
        positions (full ``(B, T, V)`` logits would cost hundreds of MB).
        """
        rows = torch.arange(ids.shape[0], device=ids.device)
        pos = torch.tensor(last, device=ids.device)
        if self._body() is None:
            return self._forward(ids, mask, cache).logits[rows, pos].float()
        hidden = self._forward(ids, mask, cache).last_hidden_state
        return self.model.get_output_embeddings()(hidden[rows, pos]).float()


def _common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix every sequence starts with."""
    first, n = seqs[0], min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n
