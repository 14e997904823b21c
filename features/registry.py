"""The one list of sentence features: name, sign convention, what produces it, and whether a probe learns it.

Everything that names features reads this table: the scorer's list of what it produces
(:attr:`syncheck.scorer.Scorer.feature_names`), the hints when an aggregator wants a feature a scorer lacks, the
probes' inputs, ``syncheck train``'s choice of features, and the measurements' signs (as lm-polygraph declares
what each statistic depends on).

Sign convention: ``+1`` when a higher value means the sentence is *more* faithful to the context, ``-1`` when it
means *less*. ``needs`` names the switch that produces the feature:

- ``always``: the with-context pass (every scorer);
- ``kl``: the without-context pass (``Scorer(kl=True)``, ``--no-kl`` turns it off);
- ``lookback``: attention to the context (``Scorer(lookback=True)``, ``--lookback``);
- ``lid``: local intrinsic dimension against a reference (``Scorer(lid=...)``), one feature per layer;
- ``text_checks``: string checks against the context (``Scorer(text_checks=True)``);
- ``alignment``: an alignment scorer (``Scorer(alignment=...)``);
- ``probe``: a linear probe stored with the aggregator, reading the sentence vector ``vector``;
- ``lexical``: the lightweight lexical detectors (:mod:`features.lexical`, RAGulator and DelucionQA), not the scorer.
"""

from __future__ import annotations

from dataclasses import dataclass

NEEDS = ("always", "kl", "lookback", "lid", "text_checks", "alignment", "probe", "lexical")


@dataclass(frozen=True)
class FeatureSpec:
    """One sentence feature.

    Attributes:
        name: its key in a sentence's ``features`` (``lid_layer_<L>`` stands for every LID layer).
        sign: ``+1`` higher = more faithful, ``-1`` higher = less faithful.
        needs: the switch that produces it (one of :data:`NEEDS`).
        vector: for ``needs="probe"``, the sentence vector the probe reads (``"hidden"``, ``"lookback"``).
        about: one line on what it measures.
    """

    name: str
    sign: int
    needs: str
    about: str
    vector: str | None = None

    def __post_init__(self) -> None:
        if self.sign not in (-1, 1) or self.needs not in NEEDS or (self.needs == "probe") != (self.vector is not None):
            raise ValueError(f"bad feature spec {self}")

    @property
    def probe(self) -> bool:
        """Learned by a probe fitted with an aggregator (a scorer produces it only with that aggregator)."""
        return self.needs == "probe"


#: Every feature, in the order a scorer lists them.
FEATURES: tuple[FeatureSpec, ...] = (
    FeatureSpec("min_prob", +1, "always", "lowest token probability of the sentence"),
    FeatureSpec("mean_prob", +1, "always", "mean token probability"),
    FeatureSpec("max_entropy", -1, "always", "highest next-token entropy"),
    FeatureSpec("mean_entropy", -1, "always", "mean next-token entropy"),
    FeatureSpec("mean_contrastive_kl", +1, "kl", "mean KL between the with- and without-context distributions"),
    FeatureSpec("large_kl_pos", +1, "kl", "share of tokens whose KL exceeds the threshold"),
    FeatureSpec("pmi_min", +1, "kl", "lowest context PMI of a chosen token (features.grounding)"),
    FeatureSpec("pmi_mean", +1, "kl", "mean context PMI of the chosen tokens"),
    FeatureSpec("pmi_negative_share", -1, "kl", "share of chosen tokens the context made less likely"),
    FeatureSpec("lookback_ratio", +1, "lookback", "attention to the context over all attention (features.lookback)"),
    FeatureSpec(
        "lid_layer_<L>", -1, "lid", "local intrinsic dimension at layer L (Yin et al., 2024: truthful is lower)"
    ),
    FeatureSpec("unsupported_specifics", -1, "text_checks", "numbers, dates and names absent from the context"),
    FeatureSpec(
        "unsupported_specific_count",
        -1,
        "text_checks",
        "how many numbers, dates and names the context lacks (the share's numerator)",
    ),
    FeatureSpec(
        "contradicted_fields",
        -1,
        "text_checks",
        "yes/no fields of the context's JSON records the sentence contradicts (features.structured)",
    ),
    FeatureSpec("novel_bigram_share", -1, "text_checks", "share of the sentence's bigrams absent from the context"),
    FeatureSpec(
        "local_support",
        +1,
        "text_checks",
        "share of the sentence's content words held by its best-matching context sentence (features.locality)",
    ),
    FeatureSpec(
        "word_pair_support",
        +1,
        "text_checks",
        "share of the sentence's neighbouring content-word pairs one context sentence holds (features.locality)",
    ),
    FeatureSpec("align_score", +1, "alignment", "the alignment scorer's P(supported)"),
    FeatureSpec("hidden_probe", +1, "probe", "a linear probe's P(faithful) from mean hidden states", vector="hidden"),
    FeatureSpec(
        "lookback_lens", +1, "probe", "a linear probe's P(faithful) from per-head lookback ratios", vector="lookback"
    ),
    FeatureSpec("lexical_precision", +1, "lexical", "share of the sentence's content words in the context"),
    FeatureSpec("unigram_perplexity", -1, "lexical", "unigram perplexity under the context's word distribution"),
    FeatureSpec("bigram_perplexity", -1, "lexical", "bigram perplexity under the context's word distribution"),
    FeatureSpec("overlap_ratio", +1, "lexical", "DelucionQA's overlap ratio"),
    FeatureSpec("keyword_support", +1, "lexical", "share of keywords found in the context"),
    FeatureSpec("embedding_similarity", +1, "lexical", "embedding cosine to the best context sentence"),
)
_BY_NAME = {f.name: f for f in FEATURES}
LID_PREFIX = "lid_layer_"


def feature_spec(name: str) -> FeatureSpec:
    """The spec of feature ``name`` (``lid_layer_15`` resolves to ``lid_layer_<L>``).

    Raises:
        KeyError: an unknown name, with the known ones.
    """
    if name.startswith(LID_PREFIX):
        return _BY_NAME[LID_PREFIX + "<L>"]
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown feature {name!r}; known: {sorted(_BY_NAME)}") from None


def feature_sign(name: str) -> int:
    """Sign convention of feature ``name``: ``+1`` higher = more faithful."""
    return feature_spec(name).sign


def is_probe_output(name: str) -> bool:
    """Whether ``name`` is learned by a probe (``False`` for unknown names)."""
    spec = _BY_NAME.get(name)
    return spec is not None and spec.probe


def names_needing(*needs: str) -> list[str]:
    """Names of the features produced by the switches ``needs``, in scorer order (``lid_layer_<L>`` excluded)."""
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown switch(es) {sorted(unknown)}; known: {NEEDS}")
    return [f.name for f in FEATURES if f.needs in needs and not f.name.startswith(LID_PREFIX)]


def signs(needs: tuple[str, ...] = NEEDS) -> dict[str, int]:
    """``{name: sign}`` of the features produced by ``needs`` (``lid_layer_<L>`` excluded)."""
    return {n: feature_sign(n) for n in names_needing(*needs)}


__all__ = ["FEATURES", "LID_PREFIX", "NEEDS", "FeatureSpec", "feature_sign", "feature_spec", "is_probe_output",
           "names_needing", "signs"]
