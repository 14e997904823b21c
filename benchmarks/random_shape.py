"""Random-weight models of real shapes, for speed figures without a download (speed does not depend on weights).

>>> lm = random_model("llama2-7b", device="cuda", dtype="bfloat16")   # doctest: +SKIP

The tokenizer is SmolLM2's (embedded, offline), or one saved with
``save_pretrained`` in a folder (``tokenizer=PATH``, ``--tokenizer PATH``: a
machine without the embedded model, such as a lent GPU). The vocabulary is the
tokenizer's (49,152 tokens: between Llama-2's 32,000 and Llama-3's 128,256),
so generated ids always decode. Everything else is the published config.

Saved to a folder, the model loads by path like any checkpoint (``syncheck serve
PATH``, ``benchmarks.serve_load --model PATH``)::

    .venv/bin/python -m benchmarks.random_shape llama3-8b /tmp/random-llama3-8b --dtype bfloat16 --device cuda
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
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
    # the two presets' models (syncheck.cli.common.PRESETS), for benchmarks.preset_cost on an accelerator; with their
    # own vocabulary sizes (a tokenizer with fewer tokens feeds them ids they have)
    "smollm2-135m": {"family": "llama", "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
                     "num_key_value_heads": 3, "intermediate_size": 1536, "max_position_embeddings": 8192,
                     "rope_theta": 100000.0, "tie_word_embeddings": True, "vocab_size": 49152},
    "qwen2.5-coder-1.5b": {"family": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
                           "num_key_value_heads": 2, "intermediate_size": 8960, "max_position_embeddings": 32768,
                           "rope_theta": 1000000.0, "tie_word_embeddings": True, "vocab_size": 151936},
    # for the smoke test: the same code path in a second
    "tiny": {"family": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "max_position_embeddings": 2048},
}


def random_model(shape: str, *, tokenizer: Any = None, device: str | torch.device | None = None,
                 dtype: torch.dtype | str = torch.float32, seed: int = 0):
    """A :class:`syncheck.model.models.LoadedModel` of ``shape`` with random weights, built directly on ``device``."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from syncheck.model.models import load_model

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {sorted(SHAPES)}")
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    tokenizer = load_tokenizer(tokenizer)
    spec = dict(SHAPES[shape])
    family = spec.pop("family")
    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[family]
    eos = tokenizer.eos_token_id
    vocab = max(spec.pop("vocab_size", 0), len(tokenizer))
    config = config_cls(vocab_size=vocab, pad_token_id=tokenizer.pad_token_id or eos, eos_token_id=eos,
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



def model_from_args(args: Any):
    """The model a speed benchmark's arguments name: random weights of ``args.shape`` (with ``args.tokenizer``) when
    it is given, else ``args.model`` loaded by name; on ``args.device``, in ``args.dtype``."""
    if args.shape:
        return random_model(args.shape, tokenizer=args.tokenizer, device=args.device, dtype=args.dtype)
    from syncheck.model.models import load_model

    return load_model(args.model, device=args.device, dtype=args.dtype)

def load_tokenizer(tokenizer: Any = None):
    """``tokenizer`` itself, or the one saved in the folder it names, or SmolLM2's (``None``)."""
    if tokenizer is None:
        from syncheck.model.models import load_model

        return load_model("smollm2-135m").tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(tokenizer)
    return tokenizer


def save_random_model(shape: str, path: str | os.PathLike, *, tokenizer: Any = None,
                      device: str | torch.device | None = None, dtype: torch.dtype | str = torch.float32,
                      seed: int = 0) -> Path:
    """Write :func:`random_model` of ``shape`` and its tokenizer to ``path`` with ``save_pretrained``."""
    lm = random_model(shape, tokenizer=tokenizer, device=device, dtype=dtype, seed=seed)
    path = Path(path)
    lm.model.save_pretrained(path)
    lm.tokenizer.save_pretrained(path)
    return path


def synchronize(device: Any) -> None:
    """Wait for queued kernels (timings on an accelerator are wall-clock only after this)."""
    if torch.cuda.is_available() and str(device).startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description="Save a random-weight model of a real shape, with its tokenizer.")
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("path", help="folder to write (save_pretrained)")
    ap.add_argument("--tokenizer", default=None, help="a saved tokenizer's folder (default: SmolLM2's, embedded)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    path = save_random_model(args.shape, args.path, tokenizer=args.tokenizer, device=args.device, dtype=args.dtype)
    print(f"saved random {args.shape} ({args.dtype}) to {path}")
    return path


if __name__ == "__main__":
    main()
