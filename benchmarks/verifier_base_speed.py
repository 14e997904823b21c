"""How fast a verifier could train and score on this machine, for each base model the package can load offline.

The shipped verifier is all-MiniLM-L6-v2 with one output logit. A larger base could read a passage better, but it
has to train here (no device is assumed) and score inside the live monitor. For each base this times, on random
token ids of ``--length`` tokens in batches of ``--batch-size``:

- a training step: forward, backward and an AdamW step over the trainable parameters (all of them, or the last
  ``--train-layers`` decoder layers and the head for a causal LM, as LoRA-style training would keep the backward
  short);
- a scoring forward (no gradients).

It prints examples per second for both and the hours one epoch over ``--pairs`` training pairs would take (the
shipped verifier trained on 28,143 pairs). Bases: ``minilm`` (the verifier's own), ``smollm2-135m`` and
``qwen2.5-coder-1.5b`` (bfloat16; needs ``bash scripts/setup.sh --with-qwen``), each given a fresh one-logit head.

Run::

    HF_HUB_OFFLINE=1 python -m benchmarks.verifier_base_speed [--bases minilm,smollm2-135m,qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from benchmarks.run_stamp import machine

DTYPES = {"minilm": torch.float32, "smollm2-135m": torch.float32, "qwen2.5-coder-1.5b": torch.bfloat16}


def one_logit_model(base: str) -> tuple[Any, str]:
    """``base`` with a fresh one-logit head, and what is trained: every parameter (MiniLM) or, for a causal LM,
    the layers :func:`trainable` leaves on."""
    from transformers import AutoModelForSequenceClassification

    if base == "minilm":
        from features.alignment.embedding import default_encoder_path

        return AutoModelForSequenceClassification.from_pretrained(default_encoder_path(), num_labels=1), "all"
    from syncheck.model.models import load_model

    lm = load_model(base, dtype=DTYPES[base])
    config = lm.model.config
    config.num_labels, config.pad_token_id = 1, lm.tokenizer.pad_token_id or lm.tokenizer.eos_token_id
    model = AutoModelForSequenceClassification.from_config(config, dtype=DTYPES[base])
    model.model = lm.model.model  # the causal LM's decoder, shared; the head is new
    return model, "decoder"


def trainable(model: Any, kind: str, layers: int) -> list[torch.nn.Parameter]:
    """The parameters a training step updates (the rest frozen)."""
    if kind == "all":
        return [p for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    keep = list(model.model.layers[-layers:]) + [model.score]
    params = [p for m in keep for p in m.parameters()]
    for p in params:
        p.requires_grad_(True)
    return params


def time_base(base: str, length: int, batch: int, steps: int, layers: int) -> dict[str, float]:
    model, kind = one_logit_model(base)
    params = trainable(model, kind, layers)
    opt = torch.optim.AdamW(params, lr=1e-5)
    vocab = model.config.vocab_size
    ids = torch.randint(5, min(vocab, 30000), (batch, length))
    mask = torch.ones_like(ids)
    y = torch.randint(0, 2, (batch,)).float()

    def train_step() -> None:
        model.train()
        logits = model(input_ids=ids, attention_mask=mask).logits[:, 0].float()
        torch.nn.functional.binary_cross_entropy_with_logits(logits, y).backward()
        opt.step()
        opt.zero_grad()

    @torch.no_grad()
    def score_step() -> None:
        model.eval()
        model(input_ids=ids, attention_mask=mask)

    out = {"trainable_parameters": float(sum(p.numel() for p in params))}
    for name, step in (("train", train_step), ("score", score_step)):
        step()  # untimed: the first call builds kernels and pools
        t = time.perf_counter()
        for _ in range(steps):
            step()
        out[f"{name}_examples_per_s"] = batch * steps / (time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bases", default="minilm,smollm2-135m,qwen2.5-coder-1.5b")
    ap.add_argument("--length", type=int, default=256, help="tokens per (window, claim) pair")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3, help="timed steps of each kind")
    ap.add_argument("--train-layers", type=int, default=2, help="decoder layers a causal LM base trains")
    ap.add_argument("--pairs", type=int, default=28143, help="training pairs of one epoch (the shipped verifier's)")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}")
    print(f"{args.length} tokens per pair, batch {args.batch_size}, {args.steps} timed steps after one untimed\n")
    print("| base | dtype | trained | trainable parameters | train examples/s | hours per epoch of "
          f"{args.pairs:,} pairs | score examples/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    results = {}
    for base in [b.strip() for b in args.bases.split(",") if b.strip()]:
        r = time_base(base, args.length, args.batch_size, args.steps, args.train_layers)
        results[base] = r
        trained = "all" if base == "minilm" else f"last {args.train_layers} layers + head"
        print(f"| {base} | {str(DTYPES[base]).replace('torch.', '')} | {trained} | "
              f"{r['trainable_parameters'] / 1e6:.1f}M | {r['train_examples_per_s']:.2f} | "
              f"{args.pairs / r['train_examples_per_s'] / 3600:.1f} | {r['score_examples_per_s']:.2f} |", flush=True)
    return results


if __name__ == "__main__":
    main()
