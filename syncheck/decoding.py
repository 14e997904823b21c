"""Decoding settings: one object taken the same way by the monitor, FOD and every baseline.

>>> from syncheck.decoding import Decoding
>>> Decoding(max_new_tokens=64, do_sample=True, temperature=0.7, top_p=0.9, seed=1)   # doctest: +ELLIPSIS
Decoding(max_new_tokens=64, do_sample=True, temperature=0.7, top_p=0.9, top_k=0, seed=1, stop=())

Every ``generate``/``stream`` takes ``decoding=``: a :class:`Decoding`, a
:class:`transformers.GenerationConfig` (its ``max_new_tokens``, ``do_sample``,
``temperature``, ``top_p``, ``top_k`` and ``stop_strings`` are read), or a
plain dict of :class:`Decoding` fields. ``None`` means the decoder's own
default (``Monitor``: greedy; FOD and reranking: the paper's candidate
sampling, temperature 1 and top-p 0.95, seed 0).

``stop``: generation ends at the token where a stop string begins; that token
is dropped with the stop string, so the returned text, its sentences and
their scored tokens always agree (a stop string that begins inside a token
takes the token's earlier characters with it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

import torch
from transformers import GenerationConfig
from transformers.generation.logits_process import (
    LogitsProcessor,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

#: the seeds the sampler takes (``torch.Generator.manual_seed``'s range)
SEED_RANGE = (-(2**63), 2**64 - 1)


#: Top-p filtering (:class:`NucleusWarper`): transformers' :class:`TopPLogitsWarper` sorts the whole vocabulary at
#: every step, most of a sampled step's cost outside the forward pass on a CPU (FOD samples several candidates a
#: step). A language model's nucleus is usually far smaller than its vocabulary, so the same filter is read from the
#: :data:`NUCLEUS_HEAD` most probable tokens (``torch.topk``), and a row whose nucleus runs past them goes to
#: transformers' warper. Both remove a token where the tokens above it hold at least ``top_p`` of the mass; they sum
#: the probabilities in another order, so a token lying on the boundary to the last bit may fall on the other side.
NUCLEUS_HEAD = 1024


class NucleusWarper(LogitsProcessor):
    """Keep the smallest set of most probable tokens whose mass reaches ``top_p`` (scores of the others become
    ``filter_value``), as :class:`~transformers.generation.logits_process.TopPLogitsWarper` does, reading only the
    ``head`` most probable tokens of each row where its nucleus ends among them."""

    def __init__(self, top_p: float, filter_value: float = -float("inf"), min_tokens_to_keep: int = 1,
                 head: int = NUCLEUS_HEAD):
        self.full = TopPLogitsWarper(top_p, filter_value=filter_value, min_tokens_to_keep=min_tokens_to_keep)
        self.top_p, self.filter_value, self.min_tokens_to_keep, self.head = (
            float(top_p), filter_value, min_tokens_to_keep, head)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        k = min(self.head, scores.shape[-1])
        if k <= self.min_tokens_to_keep:
            return self.full(input_ids, scores)
        top, where = scores.topk(k, dim=-1)  # descending
        probs = (top - torch.logsumexp(scores, dim=-1, keepdim=True)).exp()
        keep = probs.cumsum(-1) - probs < self.top_p  # the tokens above each one hold less than top_p
        keep[..., : self.min_tokens_to_keep] = True
        out = torch.full_like(scores, self.filter_value).scatter_(
            -1, where, torch.where(keep, top, torch.full_like(top, self.filter_value)))
        longer = keep[..., -1]  # the nucleus may go on past the head: the whole vocabulary's sort decides
        if bool(longer.any()):
            out[longer] = self.full(input_ids[longer], scores[longer])
        return out


class SettingsError(ValueError):
    """A setting the caller gave is invalid (a decoding setting, a threshold, a decoder option); the message says
    how to fix it. The server answers it with HTTP 400; any other error inside a decoder is a 500."""

@dataclass(frozen=True)
class Decoding:
    """How tokens are chosen, and for how long.

    Args:
        max_new_tokens: response token budget (EOS not counted).
        do_sample: sample from the (warped) distribution; ``False`` is greedy (argmax).
        temperature, top_p, top_k: sampling warpers (transformers' own); ``top_k=0`` is off.
        seed: seeds the sampler (reproducible on the same device); ``None`` is seed 0.
        stop: strings that end generation (see the module docstring).
    """

    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(self.stop))
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise SettingsError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        if self.temperature <= 0:
            raise SettingsError(f"temperature must be > 0, got {self.temperature}; use do_sample=False for greedy "
                                "decoding")
        if not 0 < self.top_p <= 1:
            raise SettingsError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise SettingsError(f"top_k must be >= 0 (0 turns it off), got {self.top_k}")
        if self.seed is not None and not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise SettingsError(f"seed must be in [{SEED_RANGE[0]}, {SEED_RANGE[1]}] (the sampler's range), "
                                f"got {self.seed}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise SettingsError(f"stop strings must be non-empty strings, got {self.stop!r}")

    # ------------------------------------------------------------------ building
    @classmethod
    def coerce(cls, value: "Decoding | GenerationConfig | Mapping[str, Any] | None", default: "Decoding") -> "Decoding":
        """``value`` as a :class:`Decoding`; ``None`` gives ``default``."""
        if value is None:
            return default
        if isinstance(value, Decoding):
            return value
        if isinstance(value, GenerationConfig):
            return cls.from_generation_config(value, default)
        if isinstance(value, Mapping):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise TypeError(f"unknown decoding setting(s) {unknown}; the settings are {sorted(known)}")
            return replace(default, **value)
        raise TypeError(
            f"decoding must be a syncheck.decoding.Decoding, a transformers.GenerationConfig or a dict, "
            f"got {type(value).__name__}"
        )

    @classmethod
    def from_generation_config(cls, config: GenerationConfig, default: "Decoding | None" = None) -> "Decoding":
        """The settings of a :class:`transformers.GenerationConfig` this decoder honours.

        Unset values keep ``default``'s. Settings it cannot honour (beam search, repetition
        penalties, ...) raise, so nothing is ignored silently.
        """
        base = default or cls()
        unsupported = [k for k in ("num_beams", "repetition_penalty", "no_repeat_ngram_size", "min_new_tokens",
                                   "num_return_sequences", "penalty_alpha")
                       if getattr(config, k, None) not in (None, 1, 1.0, 0)]
        if unsupported:
            raise SettingsError(f"GenerationConfig settings {unsupported} are not supported by syncheck's decoders; "
                             "unset them (FOD's sentence beam search takes num_beams in generate())")
        stop = config.stop_strings
        return replace(
            base,
            max_new_tokens=config.max_new_tokens if config.max_new_tokens is not None else base.max_new_tokens,
            do_sample=bool(config.do_sample),
            temperature=config.temperature if config.temperature is not None else base.temperature,
            top_p=config.top_p if config.top_p is not None else base.top_p,
            top_k=config.top_k if config.top_k is not None and config.do_sample else 0,
            stop=((stop,) if isinstance(stop, str) else tuple(stop)) if stop else base.stop,
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["stop"] = list(self.stop)
        return out

    # ------------------------------------------------------------------ using
    @property
    def seed_or_zero(self) -> int:
        return 0 if self.seed is None else self.seed

    def require_sampling(self, who: str) -> "Decoding":
        """``self``, or a ``ValueError`` when it is greedy: ``who`` samples candidates, and greedy ones would all be
        the same (a ``GenerationConfig`` is greedy unless it sets ``do_sample=True``)."""
        if not self.do_sample:
            raise SettingsError(f"{who} samples its candidates, and greedy decoding would make them all identical: "
                                "give "
                             "decoding with do_sample=True (a dict of settings keeps it on; a GenerationConfig needs "
                             "do_sample=True)")
        return self

    def processors(self) -> LogitsProcessorList:
        """transformers' warpers for these settings (empty when greedy); top-p by
        :class:`NucleusWarper`, transformers' filter read from the most probable tokens."""
        procs = LogitsProcessorList()
        if not self.do_sample:
            return procs
        if self.temperature != 1.0:
            procs.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k > 0:
            procs.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            procs.append(NucleusWarper(self.top_p))
        return procs

    def stop_position(self, text: str, start: int = 0) -> int | None:
        """Character index of the earliest stop string found in ``text`` at or after ``start``, else ``None``."""
        found = [p for p in (text.find(s, start) for s in self.stop) if p >= 0]
        return min(found) if found else None

    def held_back(self, text: str) -> int:
        """How many trailing characters of ``text`` could begin a stop string (not safe to stream yet)."""
        best = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:k]):
                    best = k
                    break
        return best


#: the monitor's default: greedy, 256 tokens
GREEDY = Decoding()
#: FOD's and reranking's candidate sampling (SynCheck paper, Section 4): temperature 1, top-p 0.95, seed 0
CANDIDATE_SAMPLING = Decoding(do_sample=True, temperature=1.0, top_p=0.95, seed=0)
#: FOD's default candidate sampling: temperature 0.7, top-p 0.95, seed 0. A small model's temperature-1 samples of
#: a replaced sentence are often off the subject; 0.7 gave more answers from the context on knowledge-conflict QA
#: (on the records the defaults were chosen on; RESULTS.md in the source repository, "FOD on knowledge-conflict QA")
REPAIR_SAMPLING = Decoding(do_sample=True, temperature=0.7, top_p=0.95, seed=0)

__all__ = ["CANDIDATE_SAMPLING", "GREEDY", "NUCLEUS_HEAD", "REPAIR_SAMPLING", "SEED_RANGE", "Decoding", "NucleusWarper",
           "SettingsError"]
