"""The settings of one decoding call: :class:`FODConfig`, one object for FOD and every baseline of :mod:`fod`.

>>> from fod.config import FODConfig
>>> config = FODConfig(tau1=0.5, search="beam", num_samples=4)
>>> config.replace(num_beams=3).num_beams
3
>>> FODConfig.paper().search                  # the paper's Algorithm 1, exactly
'beam'

It is frozen and checked once, when it is made (an error names the setting and how to fix it), as transformers'
``GenerationConfig`` is. Every decoder's ``generate(question=, context=, config=..., **overrides)`` and ``stream()``
take one; the keywords override single fields. Each decoder reads the fields it names in its ``settings``
(:data:`fod.baselines.METHODS`): FOD all of them, greedy decoding only ``max_sentences`` and ``decoding``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

from transformers import GenerationConfig

from features.degeneracy import REASONS as DEGENERATE_KINDS
from fod.steering import DEFAULT_ALPHA, STEERING
from syncheck.decoding import CANDIDATE_SAMPLING, Decoding, SettingsError

SEARCHES = ("repair", "beam")
#: What the greedy phases decode on: plain greedy, or exactly the tokens of AdaCAD / CAD (see :mod:`fod.steering`).
DECODES = ("greedy", "adacad", "cad")
CUTS = ("token", "sentence")
FALLBACKS = ("tau1", "best", "prefix")
#: What becomes of a sentence only the support model flagged, when no candidate replaces it: ``drop`` ends the
#: answer before it, ``keep`` keeps it as it was.
SUPPORT_FALLBACKS = ("drop", "keep")
#: What becomes of a flagged sentence that no candidate replaces (every candidate pruned and no fallback, or the
#: repairs used up): ``end`` ends the answer before it, ``keep`` keeps it as decoded and goes on decoding.
UNREPAIRED = ("end", "keep")
#: How a beam-search step shares ``num_samples`` among the beams: ``spread`` splits them over the beams there are
#: (the first step samples all of them from the one beam); ``per_beam`` (Algorithm 1) samples ceil(S/K) from each.
BEAM_SAMPLES = ("spread", "per_beam")
#: What beam search answers with once a kept beam ends: ``most_faithful_ended``, the most faithful of the beams that
#: ended; ``most_faithful`` (Algorithm 1), the most faithful of the kept beams, ended or not.
BEAM_ANSWERS = ("most_faithful_ended", "most_faithful")
#: The settings of the paper's Algorithm 1 (:meth:`FODConfig.paper`): those that differ from :class:`FODConfig`'s
#: defaults, and ``unrepaired="end"`` (the default), pinned so that the recipe stays the paper's whatever the default
#: becomes: Algorithm 1 ends the answer before a flagged sentence that no sample replaces.
#: Its candidates are plain samples at temperature 1 and top-p 0.95 (``decoding``; the paper gives no temperature).
PAPER = MappingProxyType({
    "search": "beam", "cut": "sentence", "steer": "none", "fallback": "prefix", "stop_degenerate": False,
    "decode": "greedy", "drop_non_answers": False, "limit_candidates": False, "beam_samples": "per_beam",
    "beam_answer": "most_faithful", "distinct_beams": False, "unrepaired": "end",
    "decoding": MappingProxyType({"do_sample": True, "temperature": CANDIDATE_SAMPLING.temperature,
                                  "top_p": CANDIDATE_SAMPLING.top_p}),
})
#: FOD's method names (``fod generate --method``, a result's ``method``), whose settings :meth:`FODConfig.for_method`
#: builds: FOD; FOD that only backtracks (the paper's FOD (BT)); the paper's Algorithm 1 (:meth:`FODConfig.paper`).
FOD_METHODS = ("fod", "fod-bt", "fod-paper")


@dataclass(frozen=True)
class FODConfig:
    """How one answer is decoded (see :mod:`fod.generator` for the algorithm).

    Args:
        tau1: backtrack threshold (FOD), abstention threshold (abstain); ``None``: the value tuned for the scorer's
            aggregator (its ``meta.json``), else the paper's 0.7 (:mod:`syncheck.aggregators.thresholds`).
        tau2: the candidates' pruning threshold (FOD); ``None``: the tuned value, else the paper's 0.85.
        num_samples: candidates per step (FOD; in beam search see ``beam_samples``), whole responses (reranking).
        num_beams: beams kept (FOD's ``search="beam"``); at most ``num_samples``.
        max_sentences: sentences in an answer.
        decoding: token budget, sampling of the candidates, seed and stop strings
            (:class:`~syncheck.decoding.Decoding`, ``GenerationConfig`` or dict of its fields); ``None``: the
            decoder's own (FOD: :data:`~syncheck.decoding.REPAIR_SAMPLING`; greedy: greedy). FOD's greedy phases are
            greedy (on the ``decode`` contrast) whatever it says. Stop strings end the answer with its last sentence
            before them.
        backtrack_only: the paper's FOD (BT): stop at the first flagged sentence, keeping what precedes it.
        search: ``"repair"`` (default) or ``"beam"`` (the paper's beam search to the end).
        cut: ``"token"`` (default) or ``"sentence"`` (the paper): where a backtrack cuts the flagged sentence.
        steer: ``"adacad"`` (default), ``"cad"`` (weight ``alpha``) or ``"none"``: the distribution candidates are
            sampled from.
        fallback: ``"tau1"`` (default), ``"best"`` or ``"prefix"``: what to keep when no candidate clears ``tau2``.
        max_repairs: backtracks allowed in one answer (``search="repair"``); the next flagged sentence ends it.
        stop_degenerate: a degenerate sentence (a repeat, the question again, no content, talk about the prompt,
            a question, off the subject) is flagged too: ``True`` for every kind in
            :data:`features.degeneracy.REASONS`, ``False`` for none, or the kinds to flag (``("repeat",
            "no_content")``). A candidate that does not answer (:data:`features.degeneracy.NON_ANSWERS`) is never
            chosen, whatever this says.
        flag_specifics: a sentence with an unsupported specific (a number, date or name the context lacks) is
            flagged whatever its score, and no candidate with one is chosen (off by default: on knowledge-conflict
            QA it added cost and no answers from the context).
        decode: ``"cad"`` (default): FOD's greedy phases take exactly the tokens CAD would (weight ``alpha``);
            ``"adacad"``: those of AdaCAD; ``"greedy"``: plain greedy (:mod:`fod.steering`). A contrast needs the
            without-context pass (``kl=True``).
        alpha: CAD's contrast weight, wherever the contrast is computed (FOD's ``decode="cad"`` and
            ``steer="cad"``, the CAD baseline); default :data:`DEFAULT_ALPHA`.
        tau_support: with a support model (``FODGenerator(support=...)``): a sentence it scores below this is
            flagged whatever its faithfulness score, and no candidate below it is chosen.
        support_fallback: with a support model, what becomes of a sentence that only it flagged (the sentence clears
            ``tau1``, is not degenerate and names no unsupported specific) when no candidate replaces it:
            ``"keep"`` (default) keeps it as it was, so the support model can change an answer but never empty it;
            ``"drop"`` ends the answer before it, so a first sentence dropped is an abstention; it needs
            ``unrepaired="end"`` (with ``"keep"`` every such sentence stays, so the pair is refused). With the span
            reader ``"keep"`` gave the passage's answer more often than greedy on knowledge-conflict questions,
            ``"drop"`` less, by abstaining (RESULTS.md in the source repository, "FOD on knowledge-conflict QA").
        unrepaired: what becomes of a flagged sentence that no candidate replaces (none passes ``tau2`` or the
            fallback, or ``max_repairs`` are used up): ``"end"`` (default) ends the answer before it (an empty
            answer is an abstention); ``"keep"`` keeps it as decoded and goes on decoding, so FOD changes an
            answer only where a candidate replaces a sentence, and on ``decode="cad"`` gives CAD's answer
            elsewhere. A degenerate sentence (``stop_degenerate``) ends the answer either way. ``"keep"`` keeps a
            sentence only the support model flagged too, so it cannot go with ``support_fallback="drop"``, nor with
            ``backtrack_only=True``, which samples no candidates. Under ``search="beam"`` the search decodes to the
            end once a sentence is flagged, so ``unrepaired`` acts only where no search runs (``max_repairs=0``).
        drop_non_answers: ``True`` (default): a candidate that does not answer (a question, an echo of the question,
            off the subject: :data:`features.degeneracy.NON_ANSWERS`) is never chosen, whatever ``stop_degenerate``
            says; ``False`` (Algorithm 1): its score alone decides.
        limit_candidates: ``True`` (default): a candidate that replaces a flagged sentence gets at most twice its
            tokens (at least 24; a whole sentence's where the flagged one was degenerate) and may not open with a
            document label the flagged sentence copied from the prompt, and once half of a step's candidates have
            finished the others get at most twice the longest one's tokens (:mod:`fod.candidates`); ``False``
            (Algorithm 1): every candidate is a whole sentence, up to the decoder's ``max_sentence_tokens``.
        beam_samples: ``"spread"`` (default) or ``"per_beam"`` (Algorithm 1): how a beam-search step shares
            ``num_samples`` (:data:`BEAM_SAMPLES`; ``search="beam"``).
        beam_answer: ``"most_faithful_ended"`` (default) or ``"most_faithful"`` (Algorithm 1): the answer once a kept
            beam ends (:data:`BEAM_ANSWERS`; ``search="beam"``). A beam's faithfulness is the mean score of its
            sentences.
        distinct_beams: ``True`` (default): identical samples of one step make one beam; ``False`` (Algorithm 1):
            every sample that clears ``tau2`` is a beam, repeats too (``search="beam"``).

    :meth:`paper` is the paper's Algorithm 1 exactly (:data:`PAPER`).
    """

    tau1: float | None = None
    tau2: float | None = None
    num_samples: int = 6
    num_beams: int = 2
    max_sentences: int = 8
    decoding: Decoding | GenerationConfig | Mapping[str, Any] | None = None
    backtrack_only: bool = False
    search: str = "repair"
    cut: str = "token"
    steer: str = "adacad"
    fallback: str = "tau1"
    max_repairs: int = 3
    stop_degenerate: bool | Collection[str] = True
    flag_specifics: bool = False
    decode: str = "cad"
    alpha: float = DEFAULT_ALPHA
    tau_support: float = 0.5
    support_fallback: str = "keep"
    unrepaired: str = "end"
    drop_non_answers: bool = True
    limit_candidates: bool = True
    beam_samples: str = "spread"
    beam_answer: str = "most_faithful_ended"
    distinct_beams: bool = True

    @classmethod
    def paper(cls, **overrides: Any) -> "FODConfig":
        """The paper's Algorithm 1 (:data:`PAPER`), with ``overrides``: greedy decoding, scoring each sentence,
        until one scores below ``tau1``; then, from the sentences before it, a sentence-level beam search to the
        end of the answer: ceil(S/K) whole sentences sampled from each of the K beams, those below ``tau2`` pruned,
        the K most faithful beams kept; once a kept beam ends, the most faithful kept beam is the answer, and when
        every sample of a step is pruned, the most faithful beam before it (the sentences before the flagged one
        at the first step: an abstention when there are none; ``unrepaired="end"`` is pinned). A ``decoding``
        dict given here overlays the paper's sampling; one given to ``generate()`` replaces it.

        ``tau1``/``tau2`` stay the values tuned for the scorer's aggregator (else the paper's 0.7/0.85): a threshold
        means something only for the aggregator that produced it; ``FODConfig.paper(tau1=0.7, tau2=0.85)`` sets the
        paper's own.
        """
        settings = {**PAPER, **overrides}
        if isinstance(overrides.get("decoding"), Mapping):
            settings["decoding"] = {**PAPER["decoding"], **overrides["decoding"]}
        return cls(**settings)

    @classmethod
    def for_method(cls, method: str, **overrides: Any) -> "FODConfig":
        """The settings of FOD's method ``method`` (:data:`FOD_METHODS`), with ``overrides``: ``"fod"``
        (``FODConfig()``), ``"fod-bt"`` (``backtrack_only=True``) or ``"fod-paper"`` (:meth:`paper`)."""
        if method not in FOD_METHODS:
            raise SettingsError(f"unknown FOD method {method!r}: choose one of {FOD_METHODS}")
        if method == "fod-paper":
            return cls.paper(**overrides)
        return cls(**{"backtrack_only": method == "fod-bt", **overrides})

    def __post_init__(self) -> None:
        if isinstance(self.tau_support, bool) or not isinstance(self.tau_support, (int, float)) \
                or not 0 <= self.tau_support <= 1:
            raise SettingsError(f"tau_support must be a support probability in [0, 1], got {self.tau_support!r}")
        for name in ("tau1", "tau2"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and 0 <= value <= 1):
                raise SettingsError(f"{name} must be a faithfulness probability in [0, 1], got {value!r}; "
                                    "or None for the value tuned for the scorer's aggregator")
        for name, least in (("num_samples", 1), ("num_beams", 1), ("max_sentences", 1), ("max_repairs", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise SettingsError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.num_beams > self.num_samples:
            raise SettingsError(f"need 0 < num_beams <= num_samples, got K={self.num_beams}, S={self.num_samples}: "
                                "each beam needs a candidate; lower num_beams or raise num_samples")
        for name, allowed in (("search", SEARCHES), ("cut", CUTS), ("steer", STEERING), ("fallback", FALLBACKS),
                              ("decode", DECODES), ("support_fallback", SUPPORT_FALLBACKS),
                              ("unrepaired", UNREPAIRED), ("beam_samples", BEAM_SAMPLES),
                              ("beam_answer", BEAM_ANSWERS)):
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.support_fallback == "drop" and self.unrepaired == "keep":  # "keep" keeps what "drop" would end
            raise SettingsError("support_fallback='drop' has no effect with unrepaired='keep' (every flagged "
                                "sentence no candidate replaces stays); set unrepaired='end' or "
                                "support_fallback='keep'")
        if self.backtrack_only and self.unrepaired == "keep":  # backtrack_only ends at the first flagged sentence
            raise SettingsError("unrepaired='keep' has no effect with backtrack_only=True (the answer ends at the "
                                "first flagged sentence, which no candidate replaces); set unrepaired='end' or "
                                "backtrack_only=False")
        for name in ("drop_non_answers", "limit_candidates", "distinct_beams"):
            if not isinstance(getattr(self, name), bool):
                raise SettingsError(f"{name} must be True or False, got {getattr(self, name)!r}; False is the "
                                    "paper's Algorithm 1 (FODConfig.paper())")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not self.alpha >= 0 \
                or not math.isfinite(self.alpha):
            raise SettingsError(f"alpha must be >= 0 (0 decodes plain greedy tokens), got {self.alpha}")
        object.__setattr__(self, "stop_degenerate", _stop_degenerate(self.stop_degenerate))
        if self.decoding is not None and not isinstance(self.decoding, (Decoding, GenerationConfig, Mapping)):
            raise SettingsError(f"decoding must be a syncheck.decoding.Decoding, a transformers.GenerationConfig or "
                                f"a dict of Decoding's fields, got {type(self.decoding).__name__}")
        if isinstance(self.decoding, Mapping):
            Decoding.coerce(self.decoding, Decoding())  # its keys and values are checked now
            object.__setattr__(self, "decoding", dict(self.decoding))

    @property
    def is_paper(self) -> bool:
        """Whether these settings run the paper's Algorithm 1: every setting :data:`PAPER` names, its sampling aside,
        is the paper's (thresholds, ``num_samples``, ``num_beams`` and the token budget are the caller's)."""
        return not self.backtrack_only and all(getattr(self, k) == v for k, v in PAPER.items() if k != "decoding")

    @property
    def degenerate_kinds(self) -> frozenset[str]:
        """The degenerate kinds FOD flags (``stop_degenerate`` as a set)."""
        if isinstance(self.stop_degenerate, bool):
            return frozenset(DEGENERATE_KINDS) if self.stop_degenerate else frozenset()
        return frozenset(self.stop_degenerate)

    def replace(self, **overrides: Any) -> "FODConfig":
        """A copy with ``overrides``, checked again; an unknown name says which ones there are."""
        unknown = sorted(set(overrides) - set(NAMES))
        if unknown:
            raise TypeError(f"unknown setting(s) {unknown}; FODConfig's settings are {sorted(NAMES)}")
        return replace(self, **overrides) if overrides else self

    def decoding_or(self, default: Decoding) -> Decoding:
        """:attr:`decoding` as a :class:`~syncheck.decoding.Decoding`, on top of the decoder's ``default``."""
        return Decoding.coerce(self.decoding, default)

    def to_json(self) -> dict[str, Any]:
        """A plain dict (``decoding`` as its fields, ``stop_degenerate`` as a list where it names kinds)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.decoding, Mapping):
            out["decoding"] = dict(self.decoding)
        elif isinstance(self.decoding, Decoding):
            out["decoding"] = self.decoding.to_json()
        elif isinstance(self.decoding, GenerationConfig):
            out["decoding"] = Decoding.from_generation_config(self.decoding).to_json()
        if not isinstance(self.stop_degenerate, bool):
            out["stop_degenerate"] = sorted(self.stop_degenerate)
        return out


def _stop_degenerate(value: Any) -> bool | frozenset[str]:
    """``stop_degenerate`` checked: ``True``, ``False`` or a set of kinds of :data:`features.degeneracy.REASONS`."""
    if isinstance(value, bool):
        return value
    kinds = frozenset(value) if isinstance(value, Collection) and not isinstance(value, str) else None
    if kinds is None or not kinds <= set(DEGENERATE_KINDS):
        raise SettingsError(f"stop_degenerate must be True, False or a collection of {DEGENERATE_KINDS}, "
                            f"got {value!r}")
    return kinds


#: every setting's name
NAMES = tuple(f.name for f in fields(FODConfig))


def resolve(default: FODConfig, config: FODConfig | None, overrides: Mapping[str, Any], method: str,
            settings: Collection[str]) -> FODConfig:
    """The call's settings: ``config`` (else the decoder's ``default``) with ``overrides``, which must be settings
    the decoder reads (``settings``)."""
    if config is not None and not isinstance(config, FODConfig):
        raise SettingsError(f"config must be a fod.config.FODConfig, got {type(config).__name__}; give single "
                            "settings as keywords instead (generate(..., tau1=0.5))")
    unknown = sorted(set(overrides) - set(NAMES))
    unread = sorted(set(overrides) - set(settings))
    if unknown:  # a keyword the call does not take is a TypeError, as Python says of any function
        raise TypeError(f"unknown setting(s) {unknown}; FODConfig's settings are {sorted(NAMES)}")
    if unread:
        raise TypeError(f"{method} does not take the setting(s) {unread}: it reads {sorted(settings)}")
    return (config or default).replace(**overrides)


__all__ = ["BEAM_ANSWERS", "BEAM_SAMPLES", "CUTS", "DECODES", "DEFAULT_ALPHA", "FALLBACKS", "FOD_METHODS", "NAMES",
           "PAPER", "SEARCHES", "SUPPORT_FALLBACKS", "UNREPAIRED", "FODConfig", "resolve"]
