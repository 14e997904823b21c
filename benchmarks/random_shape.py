"""Random-weight models of real shapes, for speed figures without a download (speed does not depend on weights).

>>> lm = random_model("llama2-7b", device="cuda", dtype="bfloat16")   # doctest: +SKIP

The tokenizer is SmolLM2's (embedded, offline); the vocabulary is the
tokenizer's (49,152 tokens: between Llama-2's 32,000 and Llama-3's 128,256),
so generated ids always decode. Everything else is the published config.
"""

from __future__ import annotations

from typing import Any

import torch

#: Published shapes (hidden size, layers, heads, KV heads, MLP width, context window).
SHAPES: dict[str, dict[str, Any]] = {
    "llama2-7b": {"family": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                  "num_key_value_heads": 32, "intermediate_size": 11008, "max_position_embeddings": 4096},
    "llama3-8b": {"family": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "intermediate_size": 14336, "max_position_embeddings": 8192,
                  "rope_theta": 500000.0},
    "qwen2.5-7b": {"family": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                   "num_key_value_heads": 4, "intermediate_size": 18944, "max_position_embeddings": 32768,
                   "rope_theta": 1000000.0},
    # for the smoke test: the same code path in a second
    "tiny": {"family": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "max_position_embeddings": 2048},
}


def random_model(shape: str, *, tokenizer: Any = None, device: str | torch.device | None = None,
                 dtype: torch.dtype | str = torch.float32, seed: int = 0):
    """A :class:`syncheck.models.LoadedModel` of ``shape`` with random weights, built directly on ``device``."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from syncheck.models import load_model

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {sorted(SHAPES)}")
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    if tokenizer is None:
        tokenizer = load_model("smollm2-135m").tokenizer
    spec = dict(SHAPES[shape])
    family = spec.pop("family")
    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[family]
    eos = tokenizer.eos_token_id
    config = config_cls(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id or eos, eos_token_id=eos,
                        bos_token_id=tokenizer.bos_token_id, **spec)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise in the target dtype: no float32 copy of an 8B model on the way
    try:
        with torch.device(device or "cpu"):
            model = model_cls(config).eval()
    finally:
        torch.set_default_dtype(default)
    model.generation_config.pad_token_id = config.pad_token_id
    return load_model(model, tokenizer, name=f"random-{shape}")


def synchronize(device: Any) -> None:
    """Wait for queued kernels (timings on an accelerator are wall-clock only after this)."""
    if torch.cuda.is_available() and str(device).startswith("cuda"):
        torch.cuda.synchronize()
