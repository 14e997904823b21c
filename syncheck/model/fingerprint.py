"""A model's fingerprint: which weights an aggregator was calibrated for, whatever name or path loads them.

An aggregator's features (the hidden-state probe above all) belong to one
model's weights; the calibration registry (:mod:`syncheck.calibration.registry`) keys them by this fingerprint.

Fingerprint (:func:`model_fingerprint`): SHA-256 of the architecture config
(minus the fields that name a path, a dtype, a kernel or a library version)
and the names and shapes of every parameter, plus a strided sample of up to
4,096 values of five parameters (the first two, the middle one, the last two),
rounded to bfloat16 so that the same weights loaded in float32, bfloat16 or
float16 on any device match. It reads those samples, never all the weights.
Fine-tuning changes the sampled values, hence the fingerprint; so does a
different quantisation of the same model.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

#: Config fields that do not change what the weights compute.
_VOLATILE_CONFIG = ("transformers_version", "torch_dtype", "dtype", "attn_implementation", "use_cache",
                    "output_attentions", "output_hidden_states", "return_dict")
SAMPLE_VALUES = 4096


def model_fingerprint(model: Any) -> str:
    """A 16-hex-digit fingerprint of a ``transformers`` model's config and weights (see the module docstring)."""
    h = hashlib.sha256()
    config = model.config.to_dict() if hasattr(model.config, "to_dict") else dict(vars(model.config))
    config = {k: v for k, v in config.items() if not k.startswith("_") and k not in _VOLATILE_CONFIG}
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    params = list(model.named_parameters())
    for name, p in params:
        h.update(f"{name}:{tuple(p.shape)};".encode())
    middle = len(params) // 2
    for name, p in params[:2] + params[middle:middle + 1] + params[-2:]:
        if p.device.type == "meta":  # offloaded or not yet materialised: shapes only
            continue
        flat = p.detach().reshape(-1)
        step = max(1, flat.numel() // SAMPLE_VALUES)
        sample = flat[::step][:SAMPLE_VALUES].to(torch.bfloat16).to(torch.float32).cpu().numpy()
        h.update(sample.tobytes())
    return h.hexdigest()[:16]


__all__ = ["SAMPLE_VALUES", "model_fingerprint"]
