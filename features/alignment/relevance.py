"""Relevance of context chunks to a query (Provenance's first stage, Sankararaman et al., 2024, Section 3.1).

Every scorer implements :class:`RelevanceScorer`: ``score(query, chunks)``
returns one raw relevance score per chunk (higher = more relevant) and carries
a ``temperature`` that puts its scores on a scale where
``softmax(scores / temperature)`` over a query's chunks is a sensible
probability (Section 3.2 normalises relevance to probabilities that sum to 1):

- :class:`CrossEncoderRelevance`: a reranker cross-encoder loaded as a
  sequence-classification model with one output, its logit as the score
  (the paper: ``mixedbread-ai/mxbai-rerank-base-v1``; logits roughly in
  (-10, 10), temperature 1). Needs the hub (or a local copy).
- :class:`BiEncoderRelevance`: cosine between query and chunk embeddings
  (all-MiniLM-L6-v2, offline). Cosines live in [-1, 1], so the temperature is
  0.05 (the scale 20 MiniLM was trained with); at temperature 1 the softmax
  would be nearly uniform and TopP would keep almost every chunk.
- :class:`BM25Relevance`: Okapi BM25 (``rank-bm25``) of the query's content
  words against the chunks, the chunks themselves being the collection;
  temperature 1.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np
import torch

from features.alignment.embedding import SentenceEncoder
from features.alignment.hf_utils import hub_kwargs, load_error, model_max_tokens, resolve_dtype
from features.alignment.lexical import content_words
from features.alignment.windows import max_over_windows, premise_budget, split_windows

#: The paper's relevance model (hub only).
PAPER_RERANKER = "mixedbread-ai/mxbai-rerank-base-v1"


@runtime_checkable
class RelevanceScorer(Protocol):
    """Scores how relevant each chunk is to a query."""

    name: str
    temperature: float

    def score(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        """``(len(chunks),)`` float64 raw relevance, higher = more relevant."""
        ...


class BiEncoderRelevance:
    """Cosine similarity of sentence embeddings (default all-MiniLM-L6-v2)."""

    name = "minilm"
    temperature = 0.05

    def __init__(self, encoder: SentenceEncoder | str | None = None, **encoder_kwargs: Any) -> None:
        self.encoder = encoder if isinstance(encoder, SentenceEncoder) else SentenceEncoder(encoder, **encoder_kwargs)

    def score(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        if not chunks:
            return np.zeros(0)
        vecs = self.encoder.encode([query, *chunks])
        return (vecs[1:] @ vecs[0]).astype(np.float64)


class BM25Relevance:
    """Okapi BM25 over the chunks of one query (lower-cased content words, no stop words)."""

    name = "bm25"
    temperature = 1.0

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b

    def score(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        from rank_bm25 import BM25Okapi

        if not chunks:
            return np.zeros(0)
        docs = [content_words(c) or ["\u2205"] for c in chunks]
        bm25 = BM25Okapi(docs, k1=self.k1, b=self.b)
        return np.asarray(bm25.get_scores(content_words(query)), dtype=np.float64)


class CrossEncoderRelevance:
    """A reranker cross-encoder: the logit of ``(query, chunk)``; long chunks scored as the max over windows."""

    name = "cross-encoder"
    temperature = 1.0

    def __init__(
        self,
        model: Any = PAPER_RERANKER,
        tokenizer: Any = None,
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        max_length: int | None = None,
        batch_size: int = 16,
    ) -> None:
        if isinstance(model, str):
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            name = model
            try:
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(name, **hub_kwargs())
                model = AutoModelForSequenceClassification.from_pretrained(
                    name, dtype=resolve_dtype(dtype, device), **hub_kwargs()
                )
            except (OSError, ValueError) as exc:
                raise OSError(load_error("reranker", name, exc)) from exc
        if tokenizer is None:
            raise ValueError("an already-loaded reranker needs its tokenizer: CrossEncoderRelevance(model, tokenizer)")
        if model.config.num_labels != 1:
            raise ValueError(
                f"a reranker has one output (a relevance logit); this model has {model.config.num_labels}. "
                "Use a cross-encoder reranker such as " + PAPER_RERANKER
            )
        self.model = model.eval()
        if device is not None:
            self.model.to(device)
        self.tokenizer = tokenizer
        self.max_length = max_length or model_max_tokens(self.model, tokenizer)
        self.batch_size = batch_size

    def score(self, query: str, chunks: Sequence[str]) -> np.ndarray:
        # The chunk is the "premise" that gets windowed; the query always goes in whole.
        def windows_of(chunk: str, q: str) -> list[str]:
            budget = premise_budget(self.tokenizer, q, self.max_length)
            return [w.text for w in split_windows(chunk, budget, tokenizer=self.tokenizer)]

        return max_over_windows(list(chunks), [query] * len(chunks), windows_of, self._logits, self.batch_size, False)

    @torch.no_grad()
    def _logits(self, chunks: list[str], queries: list[str]) -> np.ndarray:
        enc = self.tokenizer(
            queries, chunks, truncation="only_second", max_length=self.max_length, padding=True, return_tensors="pt"
        ).to(next(self.model.parameters()).device)
        return self.model(**enc).logits[:, 0].float().cpu().numpy().astype(np.float64)


def make_relevance_scorer(spec: RelevanceScorer | str, *, device: Any = None, dtype: Any = None) -> RelevanceScorer:
    """Build a relevance scorer from a spec.

    Specs: ``"minilm"`` (offline bi-encoder), ``"minilm:<encoder dir or id>"``,
    ``"bm25"``, ``"cross-encoder"`` (the paper's ``mxbai-rerank-base-v1``,
    needs the hub) or ``"cross-encoder:<hub id or dir>"``. An object with a
    ``score`` method is returned as is.
    """
    if not isinstance(spec, str):
        return spec
    kind, _, arg = spec.partition(":")
    if kind == "bm25" and not arg:
        return BM25Relevance()
    if kind == "minilm":
        return BiEncoderRelevance(arg or None, device=device, dtype=dtype)
    if kind == "cross-encoder":
        return CrossEncoderRelevance(arg or PAPER_RERANKER, device=device, dtype=dtype)
    raise ValueError(
        f"unknown relevance scorer {spec!r}; use 'minilm', 'bm25', 'cross-encoder' "
        f"(= {PAPER_RERANKER}, needs the hub) or 'cross-encoder:<hub id or directory>'"
    )
