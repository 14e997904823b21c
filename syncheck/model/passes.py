"""Teacher-forced forward passes that turn (prompt, response) into :class:`TokenStats`.

Offline scoring runs two batched forwards per batch of records: one over
``prompt_with_context + response`` and one over ``prompt_without_context +
response``. Rows are left-padded, so every response ends at the last column and
``logits_to_keep`` keeps only the response positions; position ids are
``cumsum(attention_mask) - 1`` so padding never shifts a row.
"""

from __future__ import annotations

import contextlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch

from features.context_influence import contrastive_kl
from features.entropy import normalized_entropy
from features.likelihood import token_logprobs
from features.lookback import lookback_ratios
from features.stats import TokenStats
from syncheck.model.attention import record_lookback
from syncheck.model.models import LoadedModel
from syncheck.model.prompts import build_prompt, context_token_span, format_context, prompt_ids


class ResponseTooLongError(ValueError):
    """The response alone does not fit the model window."""


@dataclass
class EncodedRecord:
    """Token ids of one record, ready for the forward passes."""

    with_context: list[int]
    without_context: list[int] | None
    response: list[int]
    offsets: np.ndarray  # (T, 2) character spans of the response tokens
    warnings: list[str] = field(default_factory=list)
    context_span: tuple[int, int] | None = None  # token range of the context in ``with_context`` (lookback only)


@dataclass
class PromptPair:
    """The two prompts of a record, as token ids, and where the context sits in the first."""

    with_context: list[int]
    without_context: list[int]
    warnings: list[str]
    #: token index range [start, end) of the context inside ``with_context``; located only when asked
    #: (``locate_context=True``: recording lookback ratios needs it)
    context_span: tuple[int, int] | None = None


def response_ids_and_offsets(tokenizer, response: str) -> tuple[list[int], np.ndarray]:
    """Tokenise a response alone, with the character span of every token.

    Uses the fast tokenizer's offset mapping; for a slow tokenizer the spans
    come from :func:`decode_offsets`.
    """
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    ids = list(tokenizer(response, add_special_tokens=False)["input_ids"])
    return ids, decode_offsets(tokenizer, ids)[1]


def decode_text(tokenizer, ids: Sequence[int]) -> str:
    """Text of generated ids, with no clean-up that would move characters (so spans stay exact)."""
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def decode_offsets(
    tokenizer, ids: Sequence[int], start: int = 0, prefix: np.ndarray | None = None
) -> tuple[str, np.ndarray]:
    """Decoded text of ``ids`` and each token's character span, by decoding growing prefixes.

    A token that ends inside a multi-byte character (its prefix decodes to a
    replacement character) gets an empty span; the token completing the
    character gets it. ``prefix`` (offsets of ``ids[:start]``) lets the live
    monitor extend the spans token by token.
    """
    offsets = [tuple(x) for x in (prefix.tolist() if prefix is not None else [])][:start]
    prev = int(offsets[-1][1]) if offsets else 0
    text = decode_text(tokenizer, ids)
    for i in range(start, len(ids)):
        prefix = text if i == len(ids) - 1 else decode_text(tokenizer, ids[: i + 1])
        end = len(prefix.rstrip("\ufffd"))
        end = max(prev, min(end, len(text)))
        offsets.append((prev, end))
        prev = end
    return text, np.asarray(offsets, dtype=np.int64).reshape(-1, 2)


def prompt_pair(
    lm: LoadedModel,
    context: str | Sequence[str],
    question: str | None,
    reserve: int,
    limit: int | None = None,
    *,
    locate_context: bool = False,
) -> PromptPair:
    """Token ids of the with- and without-context prompts, leaving ``reserve`` tokens for the response.

    The context is truncated (its end dropped) when the with-context prompt
    would not leave room; the warning says so. ``locate_context``: also find
    the context's token range in the with-context prompt (lookback needs it;
    a chat template that rewrites the message makes it fail, so it is only
    done when asked).

    Raises:
        ResponseTooLongError: when even the prompt without context leaves no room.
        ValueError: ``locate_context`` and the chat template does not keep the context verbatim.
    """
    tok = lm.tokenizer
    limit = min(limit or lm.max_length, lm.max_length)
    without = prompt_ids(tok, build_prompt(tok, question, None))
    if len(without) + reserve > limit:
        raise ResponseTooLongError(
            f"the response ({reserve} tokens) plus the prompt without context ({len(without)} tokens) exceed "
            f"the model window of {limit} tokens; split the response or use a model with a longer window"
        )
    ctx_text = format_context(context)
    prompt = build_prompt(tok, question, ctx_text)
    with_ids = prompt_ids(tok, prompt)
    warnings: list[str] = []
    if len(with_ids) + reserve > limit:
        ctx_ids = list(tok(ctx_text, add_special_tokens=False)["input_ids"])
        keep = len(ctx_ids)
        while len(with_ids) + reserve > limit and keep > 0:
            keep = max(0, keep - (len(with_ids) + reserve - limit) - 4)
            ctx_text = tok.decode(ctx_ids[:keep], skip_special_tokens=True)
            prompt = build_prompt(tok, question, ctx_text)
            with_ids = prompt_ids(tok, prompt)
        warnings.append(
            f"context truncated from {len(ctx_ids)} to {keep} tokens (its end was dropped) to fit the model window "
            f"of {limit} tokens; features of sentences that rely on the dropped part are unreliable"
        )
    span = context_token_span(tok, prompt, ctx_text) if locate_context else None
    return PromptPair(with_ids, without, warnings, span)


def encode_record(
    lm: LoadedModel,
    context: str | Sequence[str],
    response: str,
    question: str | None = None,
    *,
    max_length: int | None = None,
    with_kl: bool = True,
    locate_context: bool = False,
) -> EncodedRecord:
    """Build both prompts and tokenise; truncate the context (never the response) to fit.

    ``locate_context``: record where the context sits in the prompt (for lookback ratios).

    Raises:
        ResponseTooLongError: when even the prompt without context plus the
            response exceed ``max_length``.
    """
    resp_ids, offsets = response_ids_and_offsets(lm.tokenizer, response)
    pair = prompt_pair(lm, context, question, len(resp_ids), max_length, locate_context=locate_context)
    return EncodedRecord(pair.with_context, pair.without_context if with_kl else None, resp_ids, offsets, pair.warnings,
                         pair.context_span)


def decoder_layers(model) -> Sequence[torch.nn.Module] | None:
    base = getattr(model, "model", None) or getattr(model, "transformer", None)
    for holder in (base, getattr(base, "decoder", None)):
        for attr in ("layers", "h"):
            layers = getattr(holder, attr, None) if holder is not None else None
            if isinstance(layers, torch.nn.ModuleList):
                return layers
    return None


@contextmanager
def capture_hidden(model, layers: Sequence[int], last: int | None = None) -> Iterator[dict[int, torch.Tensor]]:
    """Capture hidden states of ``layers`` (1-based) during the forwards this thread runs inside the block.

    Yields a dict filled with ``{layer: (B, n, d) float32}``: the outputs of those
    decoder layers for the last ``last`` positions (all when ``None``) of the
    most recent forward. Models whose decoder layers cannot be found leave it
    empty (callers then fall back to ``output_hidden_states``).
    """
    captured: dict[int, torch.Tensor] = {}
    decoder = decoder_layers(model) if layers else None
    hooks = []
    owner = threading.get_ident()  # forwards of other threads (a background flush) are not captured
    if decoder is not None:
        for layer in layers:
            if not 1 <= layer <= len(decoder):
                raise ValueError(f"hidden layer {layer} is outside 1..{len(decoder)} for this model")

            def hook(_module, _args, output, layer=layer):
                if threading.get_ident() != owner:
                    return
                out = output[0] if isinstance(output, tuple) else output
                captured[layer] = (out if last is None else out[:, -last:]).float()

            hooks.append(decoder[layer - 1].register_forward_hook(hook))
    try:
        yield captured
    finally:
        for h in hooks:
            h.remove()


@dataclass
class ForwardOutput:
    """One row of :func:`forward_response`."""

    logits: torch.Tensor  # (T, V) float32, predicting each response token
    hidden: dict[int, torch.Tensor]  # {layer: (T, d) float32} hidden states of the response tokens
    lookback: torch.Tensor | None = None  # (T, n_layers * H, 2) context / response attention masses


@torch.inference_mode()
def forward_response(
    lm: LoadedModel,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    hidden_layers: Sequence[int] = (),
    context_spans: Sequence[tuple[int, int]] | None = None,
) -> list[ForwardOutput]:
    """One batched, left-padded forward over ``prompt + response`` rows.

    Args:
        prompts: ``B`` prompt id lists.
        responses: ``B`` response id lists, each non-empty.
        hidden_layers: hidden-state indices to keep (``L`` = output of decoder
            layer ``L``, 1-based as in ``output_hidden_states``).
        context_spans: per row, the context's token range in its prompt; when
            given, the attention masses on the context and on the response are
            recorded for every position predicting a response token (the model's
            attention must be switched with :func:`syncheck.model.attention.enable_lookback`).
    """
    model = lm.model
    device = lm.device
    rows = [list(p) + list(r) for p, r in zip(prompts, responses)]
    width = max(len(r) for r in rows)
    keep = max(len(r) for r in responses) + 1
    pad_id = lm.tokenizer.pad_token_id
    if pad_id is None:
        pad_id = lm.tokenizer.eos_token_id or 0
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = 1
    position_ids = (mask.cumsum(-1) - 1).clamp_(min=0)
    pads = [width - len(r) for r in rows]

    lookback = contextlib.nullcontext(None)
    if context_spans is not None:
        lookback = record_lookback(model, [(p + a, p + b) for p, (a, b) in zip(pads, context_spans)],
                                   [p + len(pr) for p, pr in zip(pads, prompts)], keep)
    with capture_hidden(model, hidden_layers, last=keep) as captured, lookback as recorded:
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=position_ids.to(device),
            use_cache=False,
            logits_to_keep=keep,
            output_hidden_states=bool(hidden_layers) and decoder_layers(model) is None,
        )
        if hidden_layers and decoder_layers(model) is None:
            captured.update({layer: out.hidden_states[layer][:, -keep:].float() for layer in hidden_layers})
    masses = recorded.stacked() if recorded is not None else None
    logits = out.logits[:, -keep:]
    result = []
    for i, resp in enumerate(responses):
        t = len(resp)
        result.append(ForwardOutput(
            logits=logits[i, keep - t - 1 : keep - 1].float(),
            hidden={layer: h[i, keep - t :] for layer, h in captured.items()},
            lookback=masses[i, keep - t - 1 : keep - 1] if masses is not None else None,
        ))
    return result


def token_stats(
    lm: LoadedModel,
    encoded: Sequence[EncodedRecord],
    hidden_layers: Sequence[int] = (),
    lookback: bool = False,
) -> list[TokenStats]:
    """Statistics for a batch of encoded records (two batched forwards when KL is wanted).

    ``lookback``: record each head's attention to the context (:mod:`features.lookback`).
    """
    if any(not e.response for e in encoded):
        raise ValueError("every record needs at least one response token")
    responses = [e.response for e in encoded]
    spans = [e.context_span for e in encoded] if lookback else None
    if spans is not None and any(s is None for s in spans):
        raise ValueError("lookback ratios need the context's place in each prompt: encode the records with "
                         "encode_record(..., locate_context=True)")
    with_out = forward_response(lm, [e.with_context for e in encoded], responses, hidden_layers, spans)
    want_kl = [e.without_context is not None for e in encoded]
    without_out: list[ForwardOutput | None] = [None] * len(encoded)
    idx = [i for i, w in enumerate(want_kl) if w]
    if idx:
        outs = forward_response(lm, [encoded[i].without_context for i in idx], [responses[i] for i in idx])
        for i, o in zip(idx, outs):
            without_out[i] = o
    stats = []
    for e, w, wo in zip(encoded, with_out, without_out):
        target = torch.tensor(e.response, dtype=torch.long, device=w.logits.device)
        stats.append(
            TokenStats(
                token_ids=np.asarray(e.response, dtype=np.int64),
                offsets=e.offsets,
                logprob=token_logprobs(w.logits, target).cpu().numpy(),
                entropy=normalized_entropy(w.logits).cpu().numpy(),
                kl=contrastive_kl(w.logits, wo.logits).cpu().numpy() if wo is not None else None,
                hidden={k: v.cpu().numpy() for k, v in w.hidden.items()},
                logprob_without=token_logprobs(wo.logits, target).cpu().numpy() if wo is not None else None,
                lookback=lookback_ratios(w.lookback.cpu().numpy()).astype(np.float32)
                if w.lookback is not None
                else None,
            )
        )
    return stats
