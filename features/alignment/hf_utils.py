"""Small helpers shared by the Hugging Face model backends (loading options, window size, errors)."""

from __future__ import annotations

import os
from typing import Any

import torch

#: Tokenizers without a real limit report a huge ``model_max_length``; ignore values above this.
_NO_LIMIT = 1_000_000
#: Models whose position ids start after the padding index, so 2 positions are not usable.
_PADDED_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text")


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set (read at call time: huggingface_hub reads it only at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


def hub_kwargs() -> dict:
    """``from_pretrained`` options: local files only when ``HF_HUB_OFFLINE`` is set."""
    return {"local_files_only": True} if hub_offline() else {}


def native_bfloat16(device: str | torch.device | None = None) -> bool:
    """Whether ``device`` computes bfloat16 natively: a CUDA GPU that supports it, or a CPU with AMX or AVX512-BF16.

    Elsewhere (an AVX2 CPU, say) bfloat16 matmuls are emulated: measured here, a Qwen2-sized linear layer ran 6x
    slower in bfloat16 than in float32.
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if dev.type == "cpu":
        probes = [getattr(torch.cpu, n, None) for n in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
        return any(bool(p()) for p in probes if p is not None)
    return False


def resolve_dtype(dtype: torch.dtype | str | None, device: str | torch.device | None = None) -> torch.dtype:
    """``"bfloat16"`` / ``torch.bfloat16`` / ``None`` (float32) -> a ``torch.dtype``; ``"auto"``: bfloat16 where
    ``device`` (default CPU) computes it natively (:func:`native_bfloat16`), else float32; anything else raises
    ``ValueError``."""
    if dtype is None:
        return torch.float32
    if dtype == "auto":
        return torch.bfloat16 if native_bfloat16(device) else torch.float32
    if isinstance(dtype, str):
        value = getattr(torch, dtype, None)
        if not isinstance(value, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; use float32, bfloat16, float16 or auto")
        return value
    return dtype


def model_max_tokens(model: Any, tokenizer: Any, cap: int | None = None) -> int:
    """The longest input (in tokens, special tokens included) the model and tokenizer accept."""
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < _NO_LIMIT:
        limits.append(tok_max)
    cfg = getattr(model, "config", None)
    pos = getattr(cfg, "max_position_embeddings", None)
    if isinstance(pos, int) and pos > 0:
        limits.append(pos - 2 if getattr(cfg, "model_type", "") in _PADDED_POSITIONS else pos)
    if cap is not None:
        limits.append(cap)
    if not limits:
        return 512
    return min(limits)


def load_error(what: str, name: str, exc: Exception) -> str:
    """A message saying why ``name`` did not load and how to get it."""
    how = (
        "HF_HUB_OFFLINE is set, so only local files are used: download it where the hub is reachable "
        f"(`hf download {name}`) and copy the Hugging Face cache here, or pass a local directory"
        if hub_offline()
        else "check the hub id and your network, or pass a local directory written by save_pretrained"
    )
    return f"could not load {what} {name!r}: {exc.__class__.__name__}: {exc}. {how}"
