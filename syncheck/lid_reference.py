"""Reference sets of hidden states for the ``lid_layer_<L>`` features.

LID-MLE measures a sentence's last-token hidden state against its nearest
neighbours in a reference set built the same way from other responses. A
reference set belongs to one model (and dtype): it is saved as safetensors
under the cache directory, named after the model, with the layers and ``k``
in its metadata.

When none exists for a model, :func:`load_or_build` builds one from the
corpus bundled with syncheck (``syncheck/data/lid_reference_corpus.jsonl``:
60 hand-written RAG records, ~250 sentences) and caches it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from features.lid import DEFAULT_K
from features.sentences import assign_tokens, split_sentences
from syncheck.cache import cache_dir, slug
from syncheck.model.models import LoadedModel
from syncheck.model.passes import encode_record, token_stats
from syncheck.records import Record, read_jsonl

BUNDLED_CORPUS = "lid_reference_corpus.jsonl"


def default_lid_layers(num_layers: int) -> list[int]:
    """Three middle layers (1-based): 15, 16, 17 for a 32-layer model, as the paper used for Llama 2 7B."""
    mid = num_layers // 2
    return [layer for layer in (mid - 1, mid, mid + 1) if 1 <= layer <= num_layers]


@dataclass
class LIDReference:
    """Hidden states ``{layer: (m, d)}`` of sentence-final tokens, for one model."""

    model_name: str
    states: dict[int, np.ndarray]
    k: int = DEFAULT_K

    @property
    def layers(self) -> list[int]:
        return sorted(self.states)

    def save(self, path: str | Path) -> Path:
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {f"layer_{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in self.states.items()}
        meta = {"model_name": self.model_name, "k": str(self.k), "format": "syncheck-lid-reference-1"}
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata=meta)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> "LIDReference":
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
            states = {int(key.split("_", 1)[1]): f.get_tensor(key) for key in f.keys()}
        if meta.get("format") != "syncheck-lid-reference-1":
            raise ValueError(f"{path} is not a syncheck LID reference set; build one with `syncheck lid-reference`")
        return cls(meta.get("model_name", "?"), states, int(meta.get("k", DEFAULT_K)))


def reference_path(lm: LoadedModel) -> Path:
    dtype = str(next(lm.model.parameters()).dtype).replace("torch.", "")
    return cache_dir() / "lid" / f"{slug(lm.name)}-{dtype}.safetensors"


def bundled_records() -> list[Record]:
    text = resources.files("syncheck.data").joinpath(BUNDLED_CORPUS).read_text(encoding="utf-8")
    return [r for _, r in read_jsonl(text.splitlines()) if isinstance(r, Record)]


def build_reference(
    lm: LoadedModel,
    records: Iterable[Record],
    layers: Sequence[int],
    *,
    k: int = DEFAULT_K,
    batch_size: int = 4,
) -> LIDReference:
    """Collect the with-context hidden state of every sentence's last token over ``records``."""
    collected: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    batch: list[tuple[Record, object]] = []

    def flush() -> None:
        stats = token_stats(lm, [enc for _, enc in batch], hidden_layers=layers)
        for (rec, _), st in zip(batch, stats):
            for t0, t1 in assign_tokens(rec.response, st.offsets, split_sentences(rec.response)):
                if t1 > t0:
                    for layer in layers:
                        collected[layer].append(st.hidden[layer][t1 - 1])
        batch.clear()

    for rec in records:
        if not rec.response.strip():
            continue
        batch.append((rec, encode_record(lm, rec.context, rec.response, rec.question, with_kl=False)))
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if not collected or len(next(iter(collected.values()))) < 3:
        raise ValueError("an LID reference set needs at least 3 sentences; give more records")
    return LIDReference(lm.name, {layer: np.stack(v) for layer, v in collected.items()}, k)


def load_or_build(lm: LoadedModel, layers: Sequence[int] | None = None) -> LIDReference:
    """The cached reference set for ``lm``, built from the bundled corpus if missing or for other layers."""
    num_layers = lm.num_layers
    layers = list(layers) if layers else default_lid_layers(num_layers)
    path = reference_path(lm)
    if path.exists():
        ref = LIDReference.load(path)
        if set(layers) <= set(ref.layers):
            return LIDReference(ref.model_name, {layer: ref.states[layer] for layer in layers}, ref.k)
    with torch.inference_mode():
        ref = build_reference(lm, bundled_records(), layers)
    ref.save(path)
    return ref


def describe(ref: LIDReference) -> str:
    sizes = {layer: tuple(v.shape) for layer, v in ref.states.items()}
    return json.dumps({"model": ref.model_name, "k": ref.k, "layers": {str(k): list(v) for k, v in sizes.items()}})
