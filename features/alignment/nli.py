"""NLI cross-encoder alignment: P(entailment) from any sequence-classification model.

Works with any Hugging Face ``AutoModelForSequenceClassification`` trained for
NLI or factual consistency (e.g. a DeBERTa/RoBERTa MNLI model). The input is
the pair ``(premise, claim)``; the score is the softmax probability of the
*entailment* class, found in ``config.id2label`` by name (a label containing
"entail", "support" or "consistent", case-insensitive, and not negated such as
"not_entailment" or "inconsistent"), never by position.

Vectara's HHEM-2.1 (``vectara/hallucination_evaluation_model``, the model of
the Provenance paper) needs ``trust_remote_code=True``: its remote class brings
its own tokenizer and a ``predict(pairs) -> scores in [0, 1]`` method, which is
used when the model has one and its labels name no entailment class.

Long premises are split into overlapping windows that fit next to the whole
claim (:mod:`features.alignment.windows`); the score is the max over windows.
Sign convention ``+``: higher = better supported.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from features.alignment.hf_utils import hub_kwargs, load_error, model_max_tokens, resolve_dtype
from features.alignment.windows import max_over_windows, premise_budget, split_windows

_ENTAIL_WORDS = ("entail", "support", "consistent")
_NEGATIONS = {"not", "non", "no"}
#: Window for models scored through their own ``predict`` (HHEM-2.1 reads up to ~4k tokens).
PREDICT_MAX_TOKENS = 2048


def find_entailment_label(id2label: Mapping[Any, str]) -> int:
    """Index of the entailment class in ``id2label``.

    Raises:
        ValueError: no label (or more than one) names entailment/support/consistency.
    """
    hits = []
    for idx, label in id2label.items():
        words = [w for w in re.split(r"[^a-z]+", str(label).lower()) if w]
        if any(w in _NEGATIONS for w in words):
            continue
        if any(w.startswith(k) for w in words for k in _ENTAIL_WORDS):
            hits.append(int(idx))
    if len(hits) != 1:
        labels = ", ".join(f"{k}: {v!r}" for k, v in sorted(id2label.items(), key=lambda kv: int(kv[0])))
        what = "no label" if not hits else f"{len(hits)} labels"
        raise ValueError(
            f"{what} of this model's id2label ({labels}) names entailment ('entail', 'support' or 'consistent'); "
            "it may not be an NLI model. Pass entailment_label=<index or label name> to say which class means "
            "'the premise supports the claim'"
        )
    return hits[0]


def _label_index(id2label: Mapping[Any, str], label: int | str) -> int:
    if isinstance(label, int):
        if label not in {int(k) for k in id2label}:
            raise ValueError(f"entailment_label={label} is not a class index of this model ({dict(id2label)})")
        return label
    for k, v in id2label.items():
        if str(v).lower() == label.lower():
            return int(k)
    raise ValueError(f"entailment_label={label!r} is not one of this model's labels ({dict(id2label)})")


class NLIScorer:
    """``align_score`` backend: a sequence-classification NLI cross-encoder.

    Args:
        model: a loaded sequence-classification model, or a hub id / local
            directory (see :meth:`from_pretrained`).
        tokenizer: its tokenizer (required with a loaded model unless it has
            a ``predict`` method, as HHEM does).
        device, dtype: where and in which precision to run.
        entailment_label: class index or name; default: found in ``id2label``.
        max_length: cap on input tokens (default: the model's window).
        overlap: tokens shared by consecutive premise windows (default 1/4).
        progress: tqdm bar (``None``: only for long jobs).
    """

    name = "nli"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        entailment_label: int | str | None = None,
        max_length: int | None = None,
        overlap: int | None = None,
        trust_remote_code: bool = False,
        progress: bool | None = None,
    ) -> None:
        if isinstance(model, str):
            model, tokenizer = self._load(model, tokenizer, resolve_dtype(dtype, device), trust_remote_code)
        self.model = model.eval()
        if device is not None:
            self.model.to(device)
        self.tokenizer = tokenizer
        self.overlap = overlap
        self.progress = progress
        id2label = dict(getattr(model.config, "id2label", None) or {})
        self._predict = False
        if entailment_label is not None:
            self.entail_index = _label_index(id2label, entailment_label)
        elif callable(getattr(model, "predict", None)) and not self._names_entailment(id2label):
            self._predict, self.entail_index = True, -1
            self.tokenizer = tokenizer or getattr(model, "tokenizer", None)
        else:
            self.entail_index = find_entailment_label(id2label)
        if self.tokenizer is None and not self._predict:
            raise ValueError("an already-loaded model needs its tokenizer: NLIScorer(model, tokenizer)")
        cap = PREDICT_MAX_TOKENS if self._predict else None
        self.max_length = max_length or model_max_tokens(self.model, self.tokenizer, cap)

    @classmethod
    def from_pretrained(cls, name: str, **kwargs: Any) -> "NLIScorer":
        """Load ``name`` (hub id or directory); keyword arguments as for the constructor."""
        return cls(name, **kwargs)

    @staticmethod
    def _names_entailment(id2label: Mapping[Any, str]) -> bool:
        try:
            find_entailment_label(id2label)
            return True
        except ValueError:
            return False

    @staticmethod
    def _load(name: str, tokenizer: Any, dtype: Any, trust_remote_code: bool) -> tuple[Any, Any]:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        opts = {**hub_kwargs(), "trust_remote_code": trust_remote_code}
        try:
            model = AutoModelForSequenceClassification.from_pretrained(name, dtype=resolve_dtype(dtype), **opts)
        except (OSError, ValueError) as exc:
            msg = load_error("NLI model", name, exc)
            if "trust_remote_code" in str(exc):
                msg += "; this model ships its own code: pass trust_remote_code=True if you trust it"
            raise OSError(msg) from exc
        if tokenizer is None and not callable(getattr(model, "predict", None)):
            try:
                tokenizer = AutoTokenizer.from_pretrained(name, **opts)
            except (OSError, ValueError) as exc:
                raise OSError(load_error("tokenizer of NLI model", name, exc)) from exc
        return model, tokenizer

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` P(entailment) in ``[0, 1]``, max over premise windows."""
        return max_over_windows(premises, claims, self._windows, self._score_pairs, batch_size, self.progress, "nli")

    def _windows(self, premise: str, claim: str) -> list[str]:
        if self.tokenizer is None:  # predict-only model without an exposed tokenizer: count words
            return [w.text for w in split_windows(premise, self.max_length // 2, self.overlap)]
        budget = premise_budget(self.tokenizer, claim, self.max_length)
        return [w.text for w in split_windows(premise, budget, self.overlap, self.tokenizer)]

    @torch.no_grad()
    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        if self._predict:
            out = self.model.predict(list(zip(premises, claims)))
            return np.clip(np.asarray(torch.as_tensor(out, dtype=torch.float32).cpu()), 0.0, 1.0)
        enc = self.tokenizer(
            premises, claims, truncation="only_first", max_length=self.max_length, padding=True, return_tensors="pt"
        ).to(self.device)
        logits = self.model(**enc).logits.float()
        return torch.softmax(logits, dim=-1)[:, self.entail_index].cpu().numpy()
