"""Record how much attention goes to the context (lookback ratios) while the model runs its usual kernels.

Fast attention kernels (SDPA, flash attention) never return attention weights,
and ``output_attentions=True`` needs the slow eager path for every position.
:func:`enable_lookback` instead registers, with ``transformers``'
``AttentionInterface``, a thin wrapper around the model's own attention
implementation and switches the model to it. The wrapper returns exactly what
the wrapped kernel returns. Only inside :func:`record_lookback` does it also
recompute, from the query and key states it is handed, the softmax weights
of the few query positions asked for and reduce them to two numbers per head
(:func:`features.lookback.span_masses`): the mass on the context's keys and
on the response's keys. Everything else about the forward is unchanged.

Cost: one ``(H, Q, K)`` product per layer for the ``Q`` recorded queries. In
live decoding ``Q = 1``; in teacher-forced scoring ``Q`` is the response length.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from features.lookback import attention_probabilities, span_masses

WRAPPER_PREFIX = "syncheck_lookback|"
#: ``id(config)`` -> the request being recorded for the model owning that config.
_ACTIVE: dict[int, "LookbackRequest"] = {}


@dataclass
class LookbackRequest:
    """What to record during the forwards run inside :func:`record_lookback`.

    Attributes:
        context: ``(B, 2)`` key index range ``[start, end)`` of each row's context
            tokens (cache coordinates: left padding included).
        response_start: ``(B,)`` key index of each row's first response token.
        queries: record the last ``queries`` query positions of each forward.
        masses: filled per forward: ``{layer index: (B, queries, H, 2)}`` float32
            (see :func:`features.lookback.span_masses`).
    """

    context: torch.Tensor
    response_start: torch.Tensor
    queries: int
    masses: dict[int, torch.Tensor] = field(default_factory=dict)

    def stacked(self) -> torch.Tensor:
        """``(B, queries, n_layers * H)`` context / response masses ``(..., 2)``, layer-major."""
        if not self.masses:
            raise RuntimeError("no attention was recorded: was the model's attention switched with enable_lookback()?")
        layers = [self.masses[i] for i in sorted(self.masses)]
        b, q, h, _ = layers[0].shape
        return torch.stack(layers, dim=2).reshape(b, q, len(layers) * h, 2)


def _causal_mask(q_len: int, kv_len: int, device) -> torch.Tensor:
    """``(1, 1, q_len, kv_len)`` bool: query ``i`` (the ``kv_len - q_len + i``-th key) sees keys up to itself."""
    q_pos = torch.arange(kv_len - q_len, kv_len, device=device)[:, None]
    return (torch.arange(kv_len, device=device)[None, :] <= q_pos)[None, None]


def _record(module, query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, scaling, req: LookbackRequest):
    n = min(req.queries, query.shape[2])
    q = query[:, :, -n:]
    kv_len = key.shape[2]
    if mask is None:
        sel = _causal_mask(n, kv_len, query.device) if query.shape[2] > 1 else None
    elif mask.dim() == 2:  # a padding mask (flash attention): combine with causality
        sel = mask[:, None, None, :].bool() & _causal_mask(n, kv_len, query.device)
    else:
        sel = mask[..., -n:, :kv_len]
    probs = attention_probabilities(q, key, scaling, sel)
    pos = torch.arange(kv_len, device=query.device)[None, :]
    ctx = req.context.to(query.device)
    context = (pos >= ctx[:, :1]) & (pos < ctx[:, 1:])
    response = pos >= req.response_start.to(query.device)[:, None]
    req.masses[int(module.layer_idx)] = span_masses(probs, context, response)


def _wrap(base_name: str):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    base = ALL_ATTENTION_FUNCTIONS[base_name]

    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        out = base(module, query, key, value, attention_mask, *args, **kwargs)
        req = _ACTIVE.get(id(module.config))
        if req is not None:
            _record(module, query, key, attention_mask, kwargs.get("scaling", getattr(module, "scaling", None)), req)
        return out

    return attention


def enable_lookback(model) -> None:
    """Switch ``model``'s attention to the recording wrapper of its current implementation (idempotent).

    Outputs are unchanged: the wrapper calls the same kernel. ``eager`` is
    wrapped as ``sdpa`` (same math). Raises ``ValueError`` for a model that
    does not dispatch attention through ``AttentionInterface``.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    current = getattr(model.config, "_attn_implementation", None) or "sdpa"
    if current.startswith(WRAPPER_PREFIX):
        return
    base = "sdpa" if current == "eager" else current
    if base not in AttentionInterface._global_mapping:
        raise ValueError(
            f"cannot record lookback ratios with attention implementation {current!r}; load the model with "
            "attn_implementation='sdpa' (or 'eager'), or score without lookback"
        )
    name = WRAPPER_PREFIX + base
    AttentionInterface.register(name, _wrap(base))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    if not model._can_set_attn_implementation():
        raise ValueError(
            f"{type(model).__name__} does not dispatch attention through transformers' AttentionInterface, so its "
            "attention to the context cannot be recorded; score without lookback"
        )
    model.set_attn_implementation(name)


def lookback_enabled(model) -> bool:
    return str(getattr(getattr(model, "config", None), "_attn_implementation", "")).startswith(WRAPPER_PREFIX)


@contextmanager
def record_lookback(
    model,
    context: Sequence[tuple[int, int]],
    response_start: Sequence[int],
    queries: int,
) -> Iterator[LookbackRequest]:
    """Record lookback masses of the last ``queries`` query positions of every forward inside the block.

    Args:
        context: per row, the ``[start, end)`` key range of the context.
        response_start: per row, the key index where the response begins.
    """
    if not lookback_enabled(model):
        raise RuntimeError("call syncheck.model.attention.enable_lookback(model) before recording lookback ratios")
    req = LookbackRequest(torch.as_tensor(list(context), dtype=torch.long).reshape(-1, 2),
                          torch.as_tensor(list(response_start), dtype=torch.long), queries)
    key = id(model.config)
    _ACTIVE[key] = req
    try:
        yield req
    finally:
        _ACTIVE.pop(key, None)
