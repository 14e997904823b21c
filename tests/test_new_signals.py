"""The decoding-time signals added for real RAG answers: PMI, unsupported specifics, novel bigrams, lookback, probes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from features.grounding import pmi_mean, pmi_min, pmi_negative_share, pointwise_mutual_information
from features.lookback import lookback_ratios
from features.novelty import novel_ngram_share
from features.specifics import normalize_number, times_of_day, unsupported_specifics, unsupported_specifics_count
from syncheck.live.monitor import Monitor
from syncheck.model.attention import enable_lookback, record_lookback
from syncheck.model.passes import encode_record, response_ids_and_offsets, token_stats
from syncheck.scorer import Scorer

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_model  # noqa: E402

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall."]
RESPONSE = ("It was completed in 1889. Dr. Smith moved to the U.S. Dept. of Energy.\n* Café owners sell crêpes [1].\n"
            "Prices rose 3.5%")


# ------------------------------------------------------------------ pure calculators
def test_pmi_is_the_log_probability_gain_from_the_context():
    pmi = pointwise_mutual_information(np.log([0.5, 0.1, 0.9]), np.log([0.25, 0.2, 0.9]))
    np.testing.assert_allclose(pmi, [np.log(2), np.log(0.5), 0.0])
    assert pmi_min(pmi) == pytest.approx(np.log(0.5))
    assert pmi_mean(pmi) == pytest.approx((np.log(2) + np.log(0.5)) / 3)
    assert pmi_negative_share(pmi) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same response tokens"):
        pointwise_mutual_information(np.zeros(2), np.zeros(3))


@pytest.mark.parametrize(
    "text, value", [("$3.5", "3.5"), ("2,400", "2400"), ("15.0", "15"), ("12%", "12"), ("1,000,000", "1000000")]
)
def test_numbers_are_normalised(text, value):
    assert normalize_number(text) == value


def test_times_of_day_match_across_formats():
    assert times_of_day("open 11:0-17:0 daily") == {(11, 0), (17, 0)}
    assert times_of_day("from 11 am to 5 p.m.") == {(11, 0), (17, 0)}
    assert times_of_day("until 5:30pm") == {(17, 30)}


def test_unsupported_specifics_normalise_before_comparing():
    ctx = (
        "The company raised $3.5 million from 2,400 investors in March. Hours: 11:0-17:0. Three founders met in Paris."
    )
    assert unsupported_specifics(ctx, "It raised 3.5 million dollars from 2400 investors.") == 0.0
    assert unsupported_specifics(ctx, "It closes at 5 pm and opened in March.") == 0.0
    assert unsupported_specifics(ctx, "The 3 founders met in Paris.") == 0.0
    missing, total = unsupported_specifics_count(ctx, "It closes at 7 pm after raising $4 million in Berlin.")
    assert (missing, total) == (3, 3)
    assert unsupported_specifics(ctx, "It was a good year.") == 0.0  # nothing specific: nothing unsupported


def test_novel_bigrams_see_word_order():
    ctx = "She purchased a ticket on March 26. It is not clear when she was arrested."
    assert novel_ngram_share(ctx, "She purchased a ticket on March 26.") == 0.0
    assert novel_ngram_share(ctx, "She was arrested on March 26.") == pytest.approx(1 / 5)  # "arrested on"
    assert novel_ngram_share(ctx, "Arrested") == 0.0 and novel_ngram_share(ctx, "Paris") == 1.0  # one word: unigrams
    assert novel_ngram_share(ctx, "...") == 0.0


def test_lookback_ratio_is_zero_without_any_mass():
    np.testing.assert_allclose(lookback_ratios(np.array([[3.0, 1.0], [0.0, 0.0], [0.0, 2.0]])), [0.75, 0.0, 0.0])


# ------------------------------------------------------------------ lookback recording
def test_recorded_lookback_equals_eager_attention_weights(tiny_tokenizer):
    model = make_model(len(tiny_tokenizer), seed=3)
    eager = make_model(len(tiny_tokenizer), seed=3)
    eager.set_attn_implementation("eager")
    enable_lookback(model)
    ids = torch.randint(3, len(tiny_tokenizer), (1, 20))
    ctx, resp_start, q = (4, 11), 14, 7
    with torch.no_grad(), record_lookback(model, [ctx], [resp_start], q) as rec:
        out = model(input_ids=ids)
        ref = eager(input_ids=ids, output_attentions=True)
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=1e-5)  # recording changes no output
    masses = rec.stacked()[0]  # (q, layers * heads, 2)
    expected = torch.stack([
        torch.stack([a[0, :, -q:, ctx[0]:ctx[1]].sum(-1), a[0, :, -q:, resp_start:].sum(-1)], -1).transpose(0, 1)
        for a in ref.attentions], 1).reshape(q, -1, 2)
    torch.testing.assert_close(masses, expected, atol=1e-5, rtol=1e-5)


def test_recording_needs_the_wrapper(tiny_tokenizer):
    model = make_model(len(tiny_tokenizer), seed=4)
    with pytest.raises(RuntimeError, match="enable_lookback"):
        with record_lookback(model, [(0, 1)], [2], 1):
            pass


def test_batched_padded_lookback_equals_one_by_one(tiny_lm):
    enable_lookback(tiny_lm.model)
    encs = [
        encode_record(tiny_lm, CONTEXT, r, q, locate_context=True)
        for r, q in [("It is tall.", "How tall?"), (RESPONSE, "When?")]
    ]
    batched = token_stats(tiny_lm, encs, lookback=True)
    for e, b in zip(encs, batched):
        (single,) = token_stats(tiny_lm, [e], lookback=True)
        np.testing.assert_allclose(b.lookback, single.lookback, atol=1e-5)
        np.testing.assert_allclose(b.logprob_without, single.logprob_without, atol=1e-5)
        assert b.lookback.shape == (len(e.response), 4 * 4)  # layers x heads of the tiny Llama


# ------------------------------------------------------------------ live == offline for every new signal
@pytest.fixture(scope="module")
def lookback_scorer(tiny_lm):
    return Scorer(tiny_lm, lid=None, lookback=True, vectors=[2, 4], aggregator=None)


def test_live_equals_offline_for_the_new_signals(lookback_scorer):
    from test_monitor import assert_same_features

    offline = lookback_scorer.score(context=CONTEXT, response=RESPONSE, question="When?")
    ids, _ = response_ids_and_offsets(lookback_scorer.lm.tokenizer, RESPONSE)
    live = Monitor(lookback_scorer).generate(question="When?", context=CONTEXT, forced_ids=ids)
    assert live.text == RESPONSE
    new = {"pmi_min", "pmi_mean", "pmi_negative_share", "lookback_ratio", "unsupported_specifics", "novel_bigram_share"}
    assert new <= set(offline.sentences[0].features)
    assert [s.text for s in offline.sentences][2] == "* Café owners sell crêpes [1]."  # a line break ends a sentence
    assert_same_features(offline.sentences, live.sentences)
    for a, b in zip(offline.sentences, live.sentences):
        assert a.vectors.keys() == b.vectors.keys() == {"hidden", "lookback"}
        for k in a.vectors:
            np.testing.assert_allclose(a.vectors[k], b.vectors[k], atol=1e-4)


# ------------------------------------------------------------------ probes stored with the aggregator
def _stacked_on_tiny(scorer, tmp_path, kind="xgb"):
    """A stacked aggregator (hidden probe + features) fitted on the tiny model's own features, saved and reloaded."""
    from syncheck.aggregators import load_aggregator, save_aggregator
    from syncheck.aggregators.stacked import fit_stacked
    from syncheck.probes import LinearProbe

    rng = np.random.default_rng(0)
    texts = ["It was completed in 1889.", "It is 330 m tall.", "It was built in Berlin in 1920.", "Nobody knows.",
             "The tower is in Paris.", "It was painted red by 40 men."]
    results = [
        scorer.score(context=CONTEXT, response=" ".join(rng.permutation(texts)[:3]), question="When?")
        for _ in range(12)
    ]
    sents = [s for r in results for s in r.sentences]
    names = ["min_prob", "pmi_mean", "novel_bigram_share", "unsupported_specifics"]
    X = np.array([[s.features[n] for n in names] for s in sents])
    y = np.array([int(s.features["unsupported_specifics"] == 0) for s in sents])
    groups = [i for i, r in enumerate(results) for _ in r.sentences]
    H = np.stack([s.vectors["hidden"] for s in sents])
    model = fit_stacked(kind, X, names, {"hidden_probe": H}, y, groups,
                        probes=[LinearProbe("hidden_probe", layers=[2, 4], C=0.1)], tune_threshold=False)
    save_aggregator(model.aggregator, tmp_path / "agg", probes=model.probes)
    return model, load_aggregator(tmp_path / "agg"), X, H


def test_aggregator_and_probe_round_trip_with_identical_predictions(lookback_scorer, tmp_path):
    model, loaded, X, H = _stacked_on_tiny(lookback_scorer, tmp_path)
    assert [p.name for p in loaded.probes] == ["hidden_probe"] and loaded.probes[0].layers == [2, 4]
    np.testing.assert_array_equal(loaded.probes[0].predict_proba(H), model.probes[0].predict_proba(H))
    expected = model.predict(X, {"hidden_probe": H})
    cols = np.column_stack([X, loaded.probes[0].predict_proba(H)[:, 1]])
    np.testing.assert_array_equal(loaded.predict_proba(cols)[:, 1], expected)
    assert not list((tmp_path / "agg").glob("*.pkl"))


def test_a_scorer_applies_the_probe_live_and_offline_alike(tiny_lm, lookback_scorer, tmp_path):
    _stacked_on_tiny(lookback_scorer, tmp_path)
    scorer = Scorer(tiny_lm, lid=None, aggregator=str(tmp_path / "agg"))
    assert scorer.featurizer.vector_layers == [2, 4] and scorer.featurizer.hidden_layers == [2, 4]
    offline = scorer.score(context=CONTEXT, response=RESPONSE, question="When?")
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, RESPONSE)
    live = Monitor(scorer).generate(question="When?", context=CONTEXT, forced_ids=ids)
    for a, b in zip(offline.sentences, live.sentences):
        assert "hidden_probe" in a.features and a.vectors == {}  # vectors are used, not kept
        assert abs(a.features["hidden_probe"] - b.features["hidden_probe"]) < 1e-4
        assert abs(a.score - b.score) < 1e-4


def test_a_probe_for_another_model_is_reported_as_missing(tmp_path, lookback_scorer, tiny_lm_plain):
    from syncheck.aggregators import FeatureMismatchError

    _stacked_on_tiny(lookback_scorer, tmp_path)
    other = make_model(len(tiny_lm_plain.tokenizer), seed=2, layers=1)
    from syncheck.model.models import load_model

    lm = load_model(other, tiny_lm_plain.tokenizer, name="one-layer")
    with pytest.raises(FeatureMismatchError, match="hidden_probe: the aggregator's probe .* reads one model's hidden "
                                                   "states; fit one for this model with `syncheck calibrate"):
        Scorer(lm, lid=None, aggregator=str(tmp_path / "agg"))


def test_lookback_of_left_padded_beams_equals_one_row_decoding(lookback_scorer):
    """FOD decodes beams of different lengths as one left-padded batch: each row's ratios must be its own."""
    from syncheck.model.passes import prompt_pair

    mon = Monitor(lookback_scorer)
    engine, lm = mon.engine, lookback_scorer.lm
    ids, _ = response_ids_and_offsets(lm.tokenizer, RESPONSE)
    pair = prompt_pair(lm, CONTEXT, "When?", 64, locate_context=True)

    def advanced(n):
        batch = engine.start(pair.with_context, pair.without_context, pair.context_span)
        for t in ids[:n]:
            engine.step(batch, torch.tensor([t]))
        engine.flush_kl(batch, [n])
        return engine.select(batch, 0, n)

    def continue_with(batch, tokens):
        for t in tokens:
            engine.step(batch, torch.tensor([t] * len(batch)))
        return [np.stack(r.lookback) for r in batch.rows]

    nxt = ids[8:12]
    merged = continue_with(engine.merge([advanced(3), advanced(5)]), nxt)
    alone = [continue_with(advanced(3), nxt)[0], continue_with(advanced(5), nxt)[0]]
    for m, a in zip(merged, alone):
        np.testing.assert_allclose(m, a, atol=1e-5)


def test_syncheck_support_backend_scores_each_source_with_the_question(tiny_lm):
    from syncheck.aggregators import make_aggregator
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import SynCheckSupport

    rng = np.random.default_rng(0)
    agg = make_aggregator("lr", feature_names=["min_prob", "pmi_mean"]).fit(rng.normal(size=(40, 2)), np.arange(40) % 2)
    support = SynCheckSupport(Scorer(tiny_lm, lid=None, aggregator=agg))
    scores = support.score(["The tower was completed in 1889.", "It is 330 m tall."], ["It was completed in 1889."] * 2,
                           questions=["When?", "When?"])
    assert scores.shape == (2,) and np.all((scores >= 0) & (scores <= 1))
    direct = Scorer(tiny_lm, lid=None, aggregator=agg).score(context="It is 330 m tall.", response="It was completed "
                                                                                                   "in 1889.",
                                                              question="When?")
    assert scores[1] == pytest.approx(direct.response_score)
    least = SynCheckSupport(support.scorer, statistic="min").score(["It is 330 m tall."], ["It was completed in 1889."],
                                                                  questions=["When?"])
    assert least[0] == pytest.approx(min(x.score for x in direct.sentences))
    with pytest.raises(ValueError, match="response statistic"):
        SynCheckSupport(support.scorer, statistic="mean")
    checker = ProvenanceChecker("bm25", support, top_k=2)
    res = checker.check(question="When was it completed?", context=CONTEXT, answer="It was completed in 1889.")
    assert res.error is None and res.claim == "It was completed in 1889." and 0 <= res.factuality <= 1
    with pytest.raises(ValueError, match="needs a Scorer with an aggregator"):
        SynCheckSupport(Scorer(tiny_lm, lid=None, aggregator=None))
    reused = ProvenanceChecker.for_scorer(support.scorer)  # FOD's final check: no second model
    assert reused.nli.scorer is support.scorer and reused.aggregation == "max"
    assert ProvenanceChecker.for_scorer(Scorer(tiny_lm, lid=None, aggregator=None)).nli.name == "lexical"


@pytest.mark.parametrize(("question", "task"), [
    (None, "summary"), ("", "summary"), ("  ", "summary"),
    ("Summarize the document.", "summary"), ("Summarize the news article in the context.", "summary"),
    ("Give a short summary of the report", "summary"), ("summarise this", "summary"), ("TL;DR?", "summary"),
    ("Write a summarization of the text.", "summary"),
    ("When was the tower completed?", "qa"), ("Who summarily dismissed him?", "qa"),
    ("Write an objective overview of the local business described by the structured data in the context, based "
     "only on that data.", "qa"),
])
def test_auto_task_reads_the_question(question, task):
    from syncheck.checking.support import answer_task

    assert answer_task(question) == task
    assert answer_task(question, "qa") == "qa" and answer_task(question, "summary") == "summary"


def test_answer_task_rejects_an_unknown_task():
    from syncheck.checking.support import answer_task

    with pytest.raises(ValueError, match=r"unknown task 'news'; use one of \('auto', 'qa', 'summary'\)"):
        answer_task("When?", "news")


def test_summary_task_averages_the_verdict_with_the_mean_local_support(tiny_lm):
    """``task="summary"`` (``syncheck check --task summary``): the syncheck support leans on the lexical support."""
    from syncheck.aggregators import make_aggregator
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import SUMMARY_LEXICAL_WEIGHT, MeanSupport, SynCheckSupport, mean_local_support

    rng = np.random.default_rng(0)
    agg = make_aggregator("lr", feature_names=["min_prob", "pmi_mean"]).fit(rng.normal(size=(40, 2)), np.arange(40) % 2)
    scorer = Scorer(tiny_lm, lid=None, aggregator=agg)
    premise, answer = "The tower was completed in 1889. It is 330 m tall.", "It was completed in 1889. It is tall."
    plain = SynCheckSupport(scorer).score([premise], [answer], questions=["Summarize the document."])[0]
    direct = scorer.score(context=premise, response=answer, question="Summarize the document.")
    lexical = mean_local_support(direct.sentences)
    assert 0 < lexical <= 1
    w = SUMMARY_LEXICAL_WEIGHT
    leaning = SynCheckSupport(scorer, lexical_weight=w).score(
        [premise], [answer], questions=["Summarize the document."]
    )
    assert leaning[0] == pytest.approx((1 - w) * plain + w * lexical)
    with pytest.raises(ValueError, match=r"lexical_weight must be in \[0, 1\]"):
        SynCheckSupport(scorer, lexical_weight=1.5)
    checker = ProvenanceChecker("bm25", SynCheckSupport(scorer), task="summary")
    leaning_view = checker.support_for("When was it completed?")
    assert leaning_view.lexical_weight == w and leaning_view.scorer is scorer  # a copy: no second model
    assert checker.nli.lexical_weight == 0.0  # the backend passed in is not changed
    mean = MeanSupport([SynCheckSupport(scorer), "lexical-stub"])
    leaning_mean = ProvenanceChecker("bm25", mean, task="summary").support_for(None)
    assert leaning_mean.members[0].lexical_weight == w  # a syncheck member of a mean leans too
    assert leaning_mean.members[1] == "lexical-stub" and mean.members[0].lexical_weight == 0.0
    qa = ProvenanceChecker("bm25", SynCheckSupport(scorer), task="qa")
    assert qa.support_for(None).lexical_weight == 0.0
    auto = ProvenanceChecker("bm25", SynCheckSupport(scorer))  # the default: each answer by its question
    assert auto.task == "auto"
    assert auto.support_for("Summarize the document.").lexical_weight == w
    assert auto.support_for(None).lexical_weight == w
    assert auto.support_for("When was it completed?").lexical_weight == 0.0
    by_auto = auto.check(question="Summarize the document.", context=premise, answer=answer)
    by_summary = checker.check(question="Summarize the document.", context=premise, answer=answer)
    assert by_auto.error is None and by_auto.factuality == pytest.approx(by_summary.factuality)
    with pytest.raises(ValueError, match="unknown task 'summaries'; use one of"):
        ProvenanceChecker("bm25", SynCheckSupport(scorer), task="summaries")
    with pytest.raises(ValueError, match=r"needs each sentence's local_support .*text_checks=True"):
        mean_local_support([type("S", (), {"features": {}})()])


def test_cli_scores_vectors_and_trains_a_stacked_probe(tiny_dir, tmp_path):
    import json

    from click.testing import CliRunner

    from syncheck.aggregators import load_aggregator
    from syncheck.cli import main

    records = [{"id": f"r{i}", "context": CONTEXT, "question": "When?",
                "response": "It was completed in 1889. It is 330 m tall." if i % 2 else "It was built in Berlin in "
                                                                                        "1920.",
                "label": i % 2, "record": i} for i in range(12)]
    inp, scored = tmp_path / "in.jsonl", tmp_path / "scored.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    runner = CliRunner()
    res = runner.invoke(main, ["score", str(inp), "-o", str(scored), "--model", str(tiny_dir), "--vectors",
                               "--aggregator", "none"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert rows[0]["vector_layers"] == [2, 3]  # the default probe layers of a 4-layer model
    assert "hidden" in rows[0]["sentences"][0]["vectors"]
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({**r, "label": src["label"], "record": src["record"]}) + "\n"
                                for r, src in zip(rows, records)))
    res = runner.invoke(main, ["train", str(labelled), "--kind", "lr", "--probe", "hidden_probe", "--tune-decoding",
                               "-o", str(tmp_path / "agg"), "--model", str(tiny_dir)])
    assert res.exit_code == 0, res.output
    agg = load_aggregator(tmp_path / "agg")
    assert agg.feature_names_in_[-1] == "hidden_probe" and agg.probes[0].layers == rows[0]["vector_layers"]
    assert "tau1" in agg.meta["decoding"]
    res = runner.invoke(main, ["score", str(inp), "-o", str(tmp_path / "out.jsonl"), "--model", str(tiny_dir),
                               "--aggregator", str(tmp_path / "agg")])
    assert res.exit_code == 0, res.output
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert all("hidden_probe" in s["features"] and "score" in s for r in out for s in r["sentences"])
    assert "vectors" not in out[0]["sentences"][0]
    plain = tmp_path / "plain.jsonl"  # scored without --vectors: the probe has nothing to read
    plain.write_text("".join(json.dumps({**r, "label": src["label"]}) + "\n" for r, src in zip(out, records)))
    res = runner.invoke(main, ["train", str(plain), "--probe", "hidden_probe", "-o", str(tmp_path / "x")])
    assert res.exit_code != 0 and "syncheck score --vectors" in res.output


def test_a_template_that_rewrites_the_message_still_scores_without_lookback():
    """Only lookback needs the context verbatim in the prompt; other scoring must not depend on it."""
    from conftest import make_model, make_tokenizer

    from syncheck.model.models import load_model

    template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | replace('Context:', 'Documents:') }}\n"
                "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    tok = make_tokenizer(template)
    lm = load_model(make_model(len(tok)), tok, name="rewriting-template")
    res = Scorer(lm, aggregator=None).score(context=CONTEXT, response="It is tall.", question="How tall?")
    assert res.error is None and res.sentences
    failed = Scorer(lm, lookback=True, aggregator=None).score(
        context=CONTEXT, response="It is tall.", question="How tall?"
    )
    assert "context verbatim" in failed.error


def test_check_cli_model_picks_the_syncheck_support_model(tiny_dir, tmp_path):
    import json

    from click.testing import CliRunner

    from syncheck.cli import main

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": 1, "context": CONTEXT, "question": "When was it completed?",
                               "response": "It was completed in 1889."}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(main, ["check", str(inp), "-o", str(out), "--model", str(tiny_dir), "--top-k", "2",
                                    "--premise", "joined"])
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text(encoding="utf-8"))
    assert row["error"] is None and 0 <= row["factuality"] <= 1 and len(row["sources"]) == 2
    summary = tmp_path / "summary.jsonl"
    res = CliRunner().invoke(main, ["check", str(inp), "-o", str(summary), "--model", str(tiny_dir), "--top-k", "2",
                                    "--premise", "joined", "--task", "summary"])
    assert res.exit_code == 0, res.output
    assert json.loads(summary.read_text(encoding="utf-8"))["factuality"] != row["factuality"]  # it leans on lexical
    asked = tmp_path / "asked.jsonl"  # the default --task auto checks an answer to "Summarize ..." as a summary
    asked.write_text(json.dumps({"id": 1, "context": CONTEXT, "question": "Summarize the document.",
                                 "response": "It was completed in 1889."}) + "\n", encoding="utf-8")
    rows = {}
    for task in ("auto", "summary", "qa"):
        res = CliRunner().invoke(main, ["check", str(asked), "-o", str(tmp_path / f"{task}.jsonl"), "--model",
                                        str(tiny_dir), "--top-k", "2", "--premise", "joined", "--task", task])
        assert res.exit_code == 0, res.output
        rows[task] = json.loads((tmp_path / f"{task}.jsonl").read_text(encoding="utf-8"))["factuality"]
    assert rows["auto"] == rows["summary"] != rows["qa"]
    bad_task = CliRunner().invoke(main, ["check", str(inp), "--task", "news"])
    assert bad_task.exit_code == 2 and "'news' is not one of 'auto', 'qa', 'summary'" in bad_task.output
    missing = CliRunner().invoke(main, ["check", str(inp), "--model", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "nope" in missing.output
    both = CliRunner().invoke(main, ["check", str(inp), "--nli", "lexical", "--model", str(tiny_dir)])
    assert both.exit_code == 2 and "name the model in the --nli spec" in both.output
    preset = CliRunner().invoke(main, ["check", str(inp), "-o", str(out), "--preset", "quality", "--nli", "lexical"])
    assert preset.exit_code == 0, preset.output  # the preset's model does not apply to lexical support: no error
