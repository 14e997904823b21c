"""A scripted mock causal LM: next-token probabilities come from a table keyed by the response text so far.

It speaks the slice of the ``transformers`` interface syncheck uses (``input_ids``,
``position_ids``, ``past_key_values`` as a real ``DynamicCache`` that stores the
token ids, ``logits_to_keep``), so the monitor, FOD and the baselines run on it
unchanged while every probability is chosen by the test.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Callable

import torch
from transformers import DynamicCache

WORDS = ["Good", "Bad", "Fine", "Meh", "Paris", "London", "The", "answer", "is"]
#: A context that holds the scripted answers' words, so that none of them is off the subject
#: (:func:`features.degeneracy.degeneracy`) and only its score decides whether FOD flags it.
CONTEXT = "Context text: good, bad, fine, meh, Paris, London."
CHAT = ("{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")

Script = Callable[[str, bool], dict[str, float]]


def make_word_tokenizer(extra_words: tuple[str, ...] = ()):
    """A word-level tokenizer over :data:`WORDS` (and ``extra_words``, appended: the vocabulary of other tests, and so
    their seeded samples, stay as they are)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for w in WORDS + ["Context", "Question", ":", ".", "?", "Ċ", "ĊĊ", *extra_words]:
        for form in (w, "Ġ" + w):
            vocab.setdefault(form, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>"]})
    fast.chat_template = CHAT
    return fast


class ScriptedLM(torch.nn.Module):
    """``script(response_text, has_context) -> {next token text: probability}`` ("<eos>" ends)."""

    def __init__(self, tokenizer, script: Script) -> None:
        super().__init__()
        self.tok = tokenizer
        self.script = script
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.vocab_size = len(tokenizer)
        self.config = SimpleNamespace(num_hidden_layers=2, max_position_embeddings=4096, _name_or_path="scripted",
                                      _attn_implementation=None)
        self.generation_config = SimpleNamespace(eos_token_id=tokenizer.eos_token_id)
        self.assistant_id = tokenizer.convert_tokens_to_ids("<|assistant|>")
        self.context_id = tokenizer.convert_tokens_to_ids("Context")
        self.calls: list[tuple[int, int]] = []  # (batch, new tokens) per forward
        self.inputs: list[list[list[int]]] = []  # input ids per forward

    @property
    def device(self) -> torch.device:
        return self.dummy.device

    def _logits_after(self, history: list[int]) -> torch.Tensor:
        if self.assistant_id not in history:
            return torch.zeros(self.vocab_size)
        start = len(history) - history[::-1].index(self.assistant_id)
        text = self.tok.decode(history[start:], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        probs = torch.full((self.vocab_size,), 1e-6)
        for token_text, p in self.script(text, self.context_id in history).items():
            if token_text == "<eos>":
                idx = self.tok.eos_token_id
            else:
                ids = self.tok(token_text, add_special_tokens=False)["input_ids"]
                assert len(ids) == 1, f"{token_text!r} is not one token"
                idx = ids[0]
            probs[idx] += p
        return (probs / probs.sum()).log()

    def forward(self, input_ids, past_key_values=None, logits_to_keep=0, packing=None, **_):
        b, n = input_ids.shape
        self.calls.append((b, n))
        self.inputs.append(input_ids.tolist())
        if packing is not None:  # a packed forward (syncheck.model.packed): each segment on its own cache
            parts = []
            for cache, (a, z), pads in zip(packing.caches, packing.spans, packing.pads):
                if pads is None:
                    parts.append(self._fed(input_ids[:, a:z], cache))
                else:  # one token per row of a batched cache
                    parts.append(self._fed(input_ids[:, a:z].T, cache).transpose(0, 1))
            logits = torch.cat(parts, 1)
            return SimpleNamespace(logits=logits[:, logits_to_keep], past_key_values=None, hidden_states=None)
        cache = past_key_values if past_key_values is not None else DynamicCache()
        logits = self._fed(input_ids, cache)
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits, past_key_values=cache, hidden_states=None)

    def _fed(self, input_ids, cache) -> torch.Tensor:
        """Append ``input_ids`` ``(B, n)`` to ``cache``; the ``(B, n, V)`` logits after each of them."""
        b, n = input_ids.shape
        cache.update(input_ids.float()[:, None, :, None], input_ids.float()[:, None, :, None], 0)
        history = cache.layers[0].keys[:, 0, :, 0].long()
        total = history.shape[1]
        logits = torch.stack(
            [
                torch.stack([self._logits_after(history[r, : total - n + p + 1].tolist()) for p in range(n)])
                for r in range(b)
            ]
        )
        return logits


def table(rules: dict[str, dict[str, float]], default_after_period: dict[str, float] | None = None) -> Script:
    """A script from a table ``{response text: next-token distribution}``.

    Unlisted states: after a word comes "."; after a full stop, ``default_after_period`` (EOS by default).
    """

    def script(text: str, has_context: bool) -> dict[str, float]:
        if text in rules:
            return rules[text]
        if text.endswith("."):
            return default_after_period or {"<eos>": 1.0}
        return {".": 1.0}

    return script


SCORES = {"Good.": 0.9, "Bad.": 0.2, "Fine.": 0.95, "Meh.": 0.8, "Paris.": 0.9, "London.": 0.3}


def score_by_text(text: str, features: dict) -> float:
    """The scripted sentence scorer: a fixed score per sentence text."""
    assert all(math.isfinite(v) for v in features.values())
    return SCORES.get(text, 0.5)
