"""Candidate steering: sample FOD's replacement sentences from a context-contrastive distribution.

After a backtrack, plain temperature-1 samples come from the very model that just
went astray. Context-aware decoding (CAD, Shi et al., 2023) sharpens the
distribution toward what the context adds::

    logits = (1 + alpha) * log p(. | context, x) - alpha * log p(. | x)

AdaCAD (Wang et al., 2024) sets ``alpha`` per step to the Jensen-Shannon
divergence between the two distributions (base 2, so in ``[0, 1]``): where the
context changes nothing (function words), the contrast switches itself off and
fluency is kept; where the context and the model's memory disagree, it weighs in.

FOD's greedy phases decode exactly CAD's tokens (``decode="cad"``, the default; or AdaCAD's, ``decode="adacad"``)
without paying for a without-context forward per token: they decode greedily, and at each sentence end (and every
few tokens inside a long sentence), where the deferred without-context pass runs anyway, :func:`first_disagreement`
finds the first token the contrast would have chosen differently; the answer is
cut there, that token is taken, and decoding goes on (a draft checked by the target, as in speculative decoding).
Where the model packs two rows into one forward (on CPU: :meth:`~syncheck.live.engine.LiveEngine.levels`), the
without-context pass runs beside each token instead, in the forward that steps it
(:meth:`~syncheck.live.engine.LiveEngine.step_level`), and the contrast chooses each token as it comes
(:meth:`fod.generator._Run.on_contrast`): the same tokens, with no draft to throw away and no flush of its own.

Only the choice of the token is steered: the token's features (its probability,
entropy, KL and PMI) are always read from the plain with-context distribution,
so a steered sentence is scored exactly as if it had been decoded plainly.
"""

from __future__ import annotations

import math

import torch

from syncheck.decoding import SettingsError

#: What :class:`~fod.generator.FODGenerator` accepts as ``steer``.
STEERING = ("none", "adacad", "cad")
#: CAD's contrast weight unless one is given
DEFAULT_ALPHA = 0.5


def js_divergence(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence in bits (``[0, 1]``) between two log-prob tensors ``(..., V)`` -> ``(...)``."""
    p, q = logp.exp(), logq.exp()
    logm = torch.logaddexp(logp, logq) - math.log(2.0)
    kl_p = (p * (logp - logm)).nan_to_num().sum(-1)
    kl_q = (q * (logq - logm)).nan_to_num().sum(-1)
    return ((kl_p + kl_q) / (2.0 * math.log(2.0))).clamp(0.0, 1.0)


def steered_logits(logp_with: torch.Tensor, logp_without: torch.Tensor, mode: str,
                   alpha: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Contrastive logits ``(B, V)`` and the ``alpha`` used per row ``(B,)``.

    Args:
        logp_with: ``(B, V)`` log-probs with the context.
        logp_without: ``(B, V)`` log-probs without it.
        mode: ``"adacad"`` (alpha = JSD per row), ``"cad"`` (fixed ``alpha``) or ``"none"`` (``logp_with``).
        alpha: CAD's fixed weight (``mode="cad"`` needs it: no call site falls back on a default unseen).
    """
    if mode not in STEERING:
        raise SettingsError(f"steer must be one of {STEERING}, got {mode!r}")
    if logp_with.shape != logp_without.shape:
        raise ValueError(f"with {tuple(logp_with.shape)} and without {tuple(logp_without.shape)} shapes differ")
    if mode == "none":
        return logp_with, torch.zeros(logp_with.shape[0], device=logp_with.device)
    logp_without = logp_without.clamp_min(-1e4)  # a -inf there would turn into +inf after the subtraction
    if mode == "adacad":
        a = js_divergence(logp_with, logp_without)
    elif alpha is None:
        raise SettingsError("steer='cad' needs its weight: pass alpha (fod.config.DEFAULT_ALPHA is the usual 0.5)")
    else:
        a = torch.full((logp_with.shape[0],), float(alpha), device=logp_with.device)
    return (1.0 + a)[:, None] * logp_with - a[:, None] * logp_without, a


def first_disagreement(logp_with: torch.Tensor, logp_without: torch.Tensor, chosen: torch.Tensor, mode: str,
                       skip: int = 0, alpha: float | None = None) -> tuple[int, int] | None:
    """The first position (from ``skip`` on) where the steered argmax differs from the chosen token.

    Args:
        logp_with: ``(k, V)`` with-context log-probs predicting each of ``k`` tokens.
        logp_without: ``(k, V)`` the same without the context.
        chosen: ``(k,)`` the tokens taken.
        mode: ``"adacad"`` or ``"cad"`` (:func:`steered_logits`).
        skip: positions before it are not checked (already taken from the contrast).
        alpha: CAD's weight (``mode="cad"``).

    Returns:
        ``(position, the steered token there)``, or ``None`` when the contrast agrees everywhere.
    """
    steered, _ = steered_logits(logp_with, logp_without.to(logp_with.device), mode, alpha)
    best = steered.argmax(-1)
    differ = (best != chosen.to(best.device)).nonzero()
    differ = differ[differ[:, 0] >= skip]
    if len(differ) == 0:
        return None
    at = int(differ[0, 0])
    return at, int(best[at])


__all__ = ["DEFAULT_ALPHA", "STEERING", "first_disagreement", "js_divergence", "steered_logits"]
