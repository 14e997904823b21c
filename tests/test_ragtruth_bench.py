"""The RAGTruth benchmark: labels from spans, grouped folds, and a smoke run of the scripts on a tiny model."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from benchmarks.ragtruth.data import TASK_QUESTIONS, read_ragtruth
from features.sentences import split_sentences

SENTENCES = {
    "QA": ["The tower was completed in 1889.", "It is 330 m tall.", "It was painted gold in 1999."],
    "Summary": ["The article describes the tower.", "It opened for the World's Fair.", "Millions visit it each year."],
    "Data2txt": ["The cafe is open from 11 am to 5 pm.", "It has outdoor seating.", "It offers free WiFi."],
}
CONTEXT = {"QA": "passage 1: The Eiffel Tower was completed in 1889. It is 330 m tall.",
           "Summary": "The Eiffel Tower opened for the World's Fair of 1889 in Paris.",
           "Data2txt": '{"name": "Cafe", "hours": "11:0-17:0", "OutdoorSeating": true, "WiFi": "no"}'}


def synthetic_ragtruth(path, sources_per_task: int = 4) -> None:
    """Records in RAGTruth's format: the last sentence of every other response is an annotated span."""
    rows = []
    for task, sents in SENTENCES.items():
        for src in range(sources_per_task):
            for k in range(2):
                response = " ".join(sents)
                labels = []
                if (src + k) % 2:
                    start = response.index(sents[-1])
                    labels = [
                        {
                            "start": start, "end": start + len(sents[-1]), "text": sents[-1],
                            "label_type": "Baseless Info",
                        }
                    ]
                rows.append({"id": f"{task}-{src}-{k}", "source_id": f"{task}{src}", "task_type": task, "model": "m",
                             "question": "When was it built?" if task == "QA" else "", "context": CONTEXT[task],
                             "response": response, "labels": labels})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_labels_follow_the_overlap_rule_and_tasks_get_instructions(tmp_path):
    path = tmp_path / "dev.jsonl"
    synthetic_ragtruth(path)
    recs = read_ragtruth(path)
    assert len(recs) == 24
    hallucinated = [r for r in recs if r.spans]
    assert hallucinated and all(r.label == 0 for r in hallucinated)
    assert hallucinated[0].sentence_labels() == [1, 1, 0]
    summary = next(r for r in recs if r.task == "Summary")
    assert summary.question == TASK_QUESTIONS["Summary"]
    assert len(read_ragtruth(path, tasks=["QA"], limit=3)) == 3
    with pytest.raises(FileNotFoundError, match="--data"):
        read_ragtruth(tmp_path / "missing.jsonl")


def test_grouped_folds_never_split_a_document():
    from benchmarks.ragtruth.evaluate import response_f1
    from benchmarks.ragtruth.scoring import SentenceTable
    from syncheck.fitting import grouped_folds

    n = 40
    table = SentenceTable([], {}, {}, np.arange(n) % 2, np.arange(n), np.array(["QA"] * n),
                          np.array([f"d{i // 4}" for i in range(n)]), np.ones(n), np.ones(n))
    for train, test in grouped_folds(table.source, n_splits=5):
        assert not set(table.source[train]) & set(table.source[test])
    # F1 with thresholds from the other folds: a perfectly ordered score is found again
    y_bad = np.array([1, 0] * 10)
    assert response_f1(y_bad, -y_bad.astype(float), np.arange(20) % 4) == 100.0


@pytest.mark.slow
def test_ragtruth_benchmark_and_default_training_run(tmp_path, tiny_dir, capsys):
    from benchmarks.ragtruth import run, train_default
    from syncheck.aggregators import load_aggregator

    data = tmp_path / "dev.jsonl"
    synthetic_ragtruth(data)
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other section\n\nkept\n", encoding="utf-8")
    args = ["--data", str(data), "--model", str(tiny_dir), "--work-dir", str(tmp_path / "work"), "--folds", "2",
            "--bootstrap", "20", "--no-lid", "--no-embedding", "--results-md", str(results)]
    summary = run.main(args)
    assert summary["counts"]["QA"][2] == 8 and not summary["dropped"]
    rows = summary["rows"]
    assert (
        "word overlap (trivial)" in rows
        and "hidden_probe alone (probe)" in rows
        and "lookback_lens alone (probe)" in rows
    )
    recipe = next(k for k in rows if k.startswith("default recipe"))
    assert set(rows[recipe]) == {"QA", "Summary", "Data2txt"}
    assert (
        "without hidden-state probe" in summary["ablation"]
        and "with lookback (ratio, lens) added" in summary["ablation"]
    )
    text = results.read_text(encoding="utf-8")
    assert run.SECTION in text and "kept" in text and "| reference | SynCheck-MLP, Mistral-7B" in text
    capsys.readouterr()
    run.main(args)  # a rerun only evaluates: the cache holds every row
    assert "scoring RAGTruth" not in capsys.readouterr().err
    out = train_default.main(["--data", str(data), "--halueval-dir", "", "--model", str(tiny_dir),
                              "-o", str(tmp_path / "agg")])
    agg = load_aggregator(out)
    assert agg.kind == "xgb" and [p.name for p in agg.probes] == ["hidden_probe"]
    assert agg.meta["training"]["sets"] == ["ragtruth-dev"]


def test_feature_gain_compares_the_recipe_with_and_without_a_feature(tmp_path, tiny_dir, capsys):
    from benchmarks.ragtruth import feature_gain

    data = tmp_path / "dev.jsonl"
    synthetic_ragtruth(data, sources_per_task=5)
    out = feature_gain.main(["--data", str(data), "--model", str(tiny_dir), "--work-dir", str(tmp_path / "work"),
                             "--feature", "local_support", "--seeds", "0,1", "--bootstrap", "20"])
    assert set(out["gains"]) == {"QA", "Summary", "Data2txt"} and all(len(g) == 2 for g in out["gains"].values())
    assert len(out["auc"]["default recipe with it"]) == 2
    assert "| local_support alone |" in capsys.readouterr().out
    # where the added feature fires: per task, sentences with a nonzero value and the unfaithful share among them
    assert set(out["nonzero"]) == {"local_support"}
    for n, total, bad, base in out["nonzero"]["local_support"].values():
        assert 0 <= n <= total and 0.0 <= bad <= 1.0 and 0.0 <= base <= 1.0
    with pytest.raises(SystemExit, match="no feature"):
        feature_gain.main(["--data", str(data), "--model", str(tiny_dir), "--work-dir", str(tmp_path / "work"),
                           "--feature", "nonsense", "--seeds", "0"])
    # several features at once, derived ones included (each sentence against its response's mean)
    out = feature_gain.main(["--data", str(data), "--model", str(tiny_dir), "--work-dir", str(tmp_path / "work"),
                             "--feature", "rel:pmi_mean,rel_causal:pmi_mean", "--seeds", "0", "--bootstrap", "20"])
    printed = capsys.readouterr().out
    assert "| rel:pmi_mean alone |" in printed and "| rel_causal:pmi_mean alone |" in printed
    assert len(out["auc"]["default recipe with it"]) == 1 and out["nonzero"] == {}  # derived features: not counted
    with pytest.raises(SystemExit, match="to derive"):
        feature_gain.main(["--data", str(data), "--model", str(tiny_dir), "--work-dir", str(tmp_path / "work"),
                           "--feature", "rel:nonsense", "--seeds", "0"])


def test_halueval_rows_label_every_sentence_with_its_answer_and_skip_failed_rows(tmp_path):
    from benchmarks.studies.halueval_rows import halueval_matrix

    rows = [{"label": 1, "error": None, "sentences": [{"features": {"a": 1.0, "b": 2.0}}, {"features": {"a": 3.0}}]},
            {"label": 0, "error": "too long", "sentences": []},
            {"label": 0, "error": None, "sentences": [{"features": {"a": 5.0, "b": 6.0}}]}]
    path = tmp_path / "summarization-600.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    X, y = halueval_matrix(path, ["a", "b"])
    assert X.tolist() == [[1.0, 2.0], [3.0, 0.0], [5.0, 6.0]] and y.tolist() == [1, 1, 0]


def test_halueval_rows_name_what_to_run_when_rows_are_missing_or_misnamed(tmp_path, capsys):
    from benchmarks.studies.halueval_rows import halueval_matrix, main

    with pytest.raises(SystemExit, match="benchmarks.check_signals --set SET --start START"):
        halueval_matrix(tmp_path / "dialogue-600.jsonl", ["a"])
    with pytest.raises(SystemExit):
        main(["--rows", "summarization"])
    assert "SET-START, e.g. summarization-600" in capsys.readouterr().err


def test_unseen_tables_put_each_score_beside_the_trivial_baselines():
    """benchmarks.ragtruth.unseen: sentence and response AUROC per task, baselines on the same rows (no model)."""
    from benchmarks.ragtruth.unseen import tables

    rng = np.random.default_rng(0)
    rows = []
    for i in range(40):
        label = i % 2
        sents = [
            {
                "chars": int(rng.integers(5, 50)), "score": float(rng.random()),
                "final_score": float(rng.random()) * 0.5 + 0.5 * label, "label": label, "overlap": float(rng.random()),
            }
            for _ in range(3)
        ]
        rows.append({"id": str(i), "source_id": f"s{i // 4}", "task": "QA", "label": label, "error": None,
                     "response_score": sents[0]["final_score"], "words": int(rng.integers(10, 90)),
                     "overlap": float(rng.random()), "sentences": sents})
    rows.append({**rows[0], "id": "bad", "error": "boom", "sentences": []})
    text = tables(rows, n_boot=50)
    assert "40 of 41 responses scored" in text
    qa = [line for line in text.splitlines() if line.startswith("| QA |")]
    assert len(qa) == 2 and qa[1].count("|") == 10  # sentence row, response row with its paired difference


def test_the_paired_auroc_difference_is_the_difference_of_the_two_aurocs_with_a_grouped_interval():
    from sklearn.metrics import roc_auc_score

    from syncheck.stats import bootstrap_auroc_difference

    rng = np.random.default_rng(1)
    y = np.tile([0, 1], 40)
    a, b = y + rng.normal(0, 0.8, 80), y + rng.normal(0, 2.0, 80)
    diff, lo, hi = bootstrap_auroc_difference(y, a, b, n=200, groups=np.arange(80) // 4)
    assert diff == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b)) and lo <= diff <= hi
    assert bootstrap_auroc_difference(y, a, a, n=50) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="one length"):
        bootstrap_auroc_difference(y, a, b[:-1])


def test_unseen_scoring_resumes_past_a_half_written_line(tmp_path):
    """A run killed mid-write leaves a partial last line: the rerun drops it and scores that record again."""
    from types import SimpleNamespace

    from benchmarks.ragtruth.data import RAGTruthRecord
    from benchmarks.ragtruth.unseen import score_rows

    recs = [RAGTruthRecord(str(i), f"s{i}", "QA", "m", "Q?", "Paris is in France.", "Paris is in France.", ())
            for i in range(2)]
    sent = SimpleNamespace(text="Paris is in France.", start=0, end=19, score=0.9, final_score=0.8)
    scorer = SimpleNamespace(score=lambda **kw: SimpleNamespace(sentences=[sent], error=None, response_score=0.7))
    out = tmp_path / "rows.jsonl"
    first = score_rows(recs[:1], scorer, out)
    out.write_bytes(out.read_bytes() + b'{"id": "1", "sour')
    rows = score_rows(recs, scorer, out)
    assert [r["id"] for r in rows] == ["0", "1"] and rows[0] == first[0]
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["0", "1"]


def test_verifier_crossfit_scores_every_sentence_with_a_verifier_that_never_trained_on_its_response(tmp_path, capsys):
    from benchmarks.verifier_crossfit import FOLDS_FILE, crossfit_scores, main, sentence_units
    from features.alignment.verifier import VerifierScorer
    from syncheck.jsonl import iter_jsonl

    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data, sources_per_task=2)
    rows = [{**row, "context": row["context"] + "\n"} for row in iter_jsonl(data)]  # as most of RAGTruth's end
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out, work = tmp_path / "folds", tmp_path / "work"
    args = ["--ragtruth", str(data), "--out", str(out), "--work-dir", str(work), "--folds", "2", "--max-steps", "1",
            "--batch-size", "4", "--max-length", "64", "--bootstrap", "20", "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| Summary (sentence) |" in printed and "- fold 1: " in printed and "s of training" in printed
    fold_of = json.loads((out / FOLDS_FILE).read_text())["fold_of"]
    records = read_ragtruth(data)
    assert set(fold_of) == {r.id for r in records}
    for k in (0, 1):
        trained_on = {row["id"] for row in iter_jsonl(out / f"fold-{k}" / "labelled.jsonl")}
        assert trained_on and not any(fold_of[i] == k for i in trained_on)
        sources = {r.source_id for r in records if r.id in trained_on}
        assert not any(fold_of[r.id] == k for r in records if r.source_id in sources)  # grouped by source
    units = sentence_units(records)
    got = crossfit_scores(out, units["id"], units["premise"], units["text"], work)
    first = [n for n, i in enumerate(units["id"]) if fold_of[i] == 0]
    own = VerifierScorer(out / "fold-0", progress=False).score([units["premise"][n] for n in first],
                                                                [units["text"][n] for n in first])
    np.testing.assert_allclose(got[first], own, rtol=1e-5)
    with pytest.raises(SystemExit, match="in none of the folds"):
        crossfit_scores(out, ["no-such-record"], ["p"], ["c"], work)
    # the score file stands for the folds directory, with no verifier: both claim forms, no text in it
    scores_file = tmp_path / "crossfit.jsonl.gz"
    assert main([*args, "--scores-out", str(scores_file)]) == 0
    assert "cross-fitted scores" in capsys.readouterr().out
    for claims in (units["text"], units["claim_q"]):
        np.testing.assert_allclose(crossfit_scores(scores_file, units["id"], units["premise"], claims, work),
                                   crossfit_scores(out, units["id"], units["premise"], claims, work), atol=1e-5)
    assert units["text"][0] not in gzip.decompress(scores_file.read_bytes()).decode()
    with pytest.raises(SystemExit, match="no score in"):
        crossfit_scores(scores_file, ["x"], ["another premise"], ["c"], work)
    with pytest.raises(SystemExit):  # refused before any work
        main([*args, "--scores-out", str(tmp_path / "crossfit.jsonl")])
    assert "name a .jsonl.gz file" in capsys.readouterr().err
    # the verifier reading takes the same folds: each unit scored by its own fold's verifier, sentences or responses
    from benchmarks.verifier_quality import Unit, ragtruth_units, score_units_crossfit
    from benchmarks.verifier_quality import main as quality_main

    sentences = ragtruth_units(str(data))
    cached = {p.name: p.read_text() for p in work.glob("align-*.jsonl")}
    score_units_crossfit(sentences, out, work, 8)  # the pairs the cross-fit scored are read from its cache
    assert {p.name: p.read_text() for p in work.glob("align-*.jsonl")} == cached
    score_units_crossfit(sentences, out, tmp_path / "work-q", 8)
    u = next(u for u in sentences if fold_of[u.record] == 1)
    own = VerifierScorer(out / "fold-1", progress=False).score([u.premise], u.claims)
    np.testing.assert_allclose(u.scores, own, rtol=1e-5)
    assert quality_main(["--ragtruth", str(data), "--alignment", f"crossfit:{out}", "--responses",
                         "--work-dir", str(tmp_path / "work-q")]) == 0
    assert "cross-fitted (min)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no RAGTruth record"):
        score_units_crossfit([Unit("qa", "g", "p", "t", ["c"], 1)], out, work, 8)
    with pytest.raises(SystemExit, match="in none of the folds"):
        score_units_crossfit([Unit("RAGTruth QA", "g", "p", "t", ["c"], 1, record="zz")], out, work, 8)
    with pytest.raises(SystemExit, match=r"\(thinning differ\)"):  # finished folds are not reused for another recipe
        main([*args, "--thinning", "ratio"])


def test_the_verifier_shipping_rule_reads_paired_intervals_not_point_falls(tmp_path, capsys):
    from benchmarks.verifier_quality import main, shipping_verdict

    better = {"pairs": (0.07, 0.03, 0.11), "RAGTruth Summary": (-0.026, -0.09, 0.04)}
    assert shipping_verdict(better).startswith("ship:")  # a fall inside its own interval does not stop it
    worse = shipping_verdict({**better, "qa": (-0.05, -0.08, -0.01)})
    assert worse == "do not ship: the paired interval lies below 0 on qa"
    assert shipping_verdict({"pairs": (0.02, -0.01, 0.05)}).startswith("do not ship: the paired interval on pairs")
    assert shipping_verdict({"qa": (0.0, -0.1, 0.1)}).startswith("no verdict")
    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data)
    assert main(["--ragtruth", str(data), "--alignment", "lexical", "--against", "lexical"]) == 0
    out = capsys.readouterr().out
    from benchmarks.verifier_quality import first_per_set, ragtruth_units

    units = ragtruth_units(str(data))
    qa = [u for u in units if u.set == "RAGTruth QA"]
    assert [u for u in first_per_set(units, 2, skip=1) if u.set == "RAGTruth QA"] == qa[1:3]
    assert "lexical − `lexical` |" in out and "+0.000 [+0.000, +0.000]" in out and "no verdict" in out
    from benchmarks.verifier_quality import table

    summaries = [u for u in units if u.set == "RAGTruth Summary"]
    for n, u in enumerate(summaries):
        u.scores = [float(n % 2)] * len(u.claims)
        u.against = [float(u.label)] * len(u.claims)
    diffs: dict = {}
    shown = table(summaries, ["RAGTruth Summary"], "lexical", diffs)
    # the rule reads every reading the check takes of a summary, each against the same reading of the other backend
    assert set(diffs) == {"RAGTruth Summary", "RAGTruth Summary (mean)", "RAGTruth Summary (leaning)"}
    assert "mean: verifier − `lexical` | leaning: verifier − `lexical` |" in shown


def test_alignment_scores_are_cached_per_pair_and_a_torn_last_line_is_scored_again(tmp_path):
    from benchmarks.ragtruth.alignment_feature import cached_scores

    class Counting:
        calls: list = []

        def score(self, premises, claims):
            Counting.calls.append(len(claims))
            return np.array([len(c) / 10 for c in claims])

    premises, claims = ["p", "p", "q"], ["ab", "abc", "abcd"]
    first = cached_scores("fake", tmp_path, premises, claims, make_scorer=Counting)
    np.testing.assert_allclose(first, [0.2, 0.3, 0.4])
    cache = next(tmp_path.glob("align-*.jsonl"))
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join(lines[:2]) + "\n" + lines[2][:9])  # a run cut short mid-line
    again = cached_scores("fake", tmp_path, premises, claims, make_scorer=Counting)
    np.testing.assert_allclose(again, first)
    assert Counting.calls == [3, 1]
    assert cached_scores("fake", tmp_path, premises, claims, make_scorer=Counting).tolist() == first.tolist()
    assert Counting.calls == [3, 1]


def test_a_verifier_s_cached_scores_are_named_by_its_weights_so_new_weights_score_again(tmp_path):
    import json

    from benchmarks.ragtruth.alignment_feature import backend_identity, cached_scores

    weights = tmp_path / "verifier"
    weights.mkdir()
    spec = f"verifier:{weights}"

    def build(sha: str, value: float):
        (weights / "manifest.json").write_text(json.dumps({"format": "syncheck-verifier/1", "weights_sha256": sha,
                                                           "weights_bytes": 1}))  # a manifest of the older format

        class Fixed:
            def score(self, premises, claims):
                return np.full(len(claims), value)
        return Fixed

    assert backend_identity(spec) == spec  # no manifest yet: the spec alone
    first = cached_scores(spec, tmp_path / "cache", ["p"], ["c"], make_scorer=build("a" * 64, 0.1))
    assert backend_identity(spec) == f"{spec}@{'a' * 64}"
    again = cached_scores(spec, tmp_path / "cache", ["p"], ["c"], make_scorer=build("b" * 64, 0.9))
    assert first.tolist() == [0.1] and again.tolist() == [0.9]  # rebuilt weights under the same spec score again
    assert backend_identity("verifier").startswith("verifier@")  # the shipped one, by its manifest
    assert backend_identity("lexical") == "lexical" and backend_identity("probe") == "probe"


def test_the_probe_s_claim_only_check_fits_a_head_without_premises_and_scores_each_set(tmp_path, tiny_dir, capsys):
    from benchmarks.probe_claim_only import main
    from syncheck.model.probe_verifier import ProbeHead, write_head
    from syncheck.training.pairs import VerifierPair, write_pairs
    from syncheck.training.verifier_build import PAIRS

    probe = tmp_path / "probe"
    probe.mkdir()
    write_pairs([VerifierPair("", f"She was born in {1850 + i}.", i % 2, f"g{i}", "test") for i in range(12)],
                str(probe / PAIRS))
    width = 2 * 32
    write_head(ProbeHead(str(tiny_dir), "float32", (-1, -2), np.zeros(width), np.ones(width), np.zeros(width), 0.0),
               probe)
    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data)
    out = main(["--probe", str(probe), "--ragtruth", str(data), "--limit", "20"])
    assert set(out) <= {"RAGTruth QA", "RAGTruth Summary", "RAGTruth Data2txt"} and out
    assert "claim-only probe (min over claims)" in capsys.readouterr().out


def test_the_check_benchmark_reads_qa_responses_after_a_skip_across_files(tmp_path):
    from benchmarks.verifier_check import ragtruth_examples

    synthetic_ragtruth(tmp_path / "a.jsonl", sources_per_task=2)  # 4 QA responses per file
    synthetic_ragtruth(tmp_path / "b.jsonl", sources_per_task=3)  # 6
    both = f"{tmp_path / 'a.jsonl'},{tmp_path / 'b.jsonl'}"
    assert len(ragtruth_examples(both, 100)) == 10
    later = ragtruth_examples(both, 5, skip=3)
    assert [g for g, *_ in later] == ["ragtruth-QA1", "ragtruth-QA0", "ragtruth-QA0", "ragtruth-QA1", "ragtruth-QA1"]
    with pytest.raises(FileNotFoundError, match="--ragtruth"):
        ragtruth_examples(f"{tmp_path / 'missing.jsonl'}", 5)


def test_the_check_benchmark_reads_every_task_s_responses_and_checks_each_with_its_fold_s_verifier(tmp_path,
                                                                                                   monkeypatch):
    import argparse
    from types import SimpleNamespace

    from benchmarks import verifier_check as vc

    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data, sources_per_task=2)
    ids: list[str] = []
    rows = vc.ragtruth_examples(str(data), None, task="Data2txt", ids=ids)
    assert len(rows) == 4 and ids == ["Data2txt-0-0", "Data2txt-0-1", "Data2txt-1-0", "Data2txt-1-1"]
    args = argparse.Namespace(sets="ragtruth-summary", ragtruth_qa=0, ragtruth_qa_skip=0,
                              ragtruth_tasks="QA,Summary", **{k: False for k in vc.LATER_SETS})
    assert vc.chosen_sets(args) == [("ragtruth-summary", 0, None)]
    # summaries go to the verifier alone under the default, and to the swapped verifier under the default with it
    assert vc.summary_reader("syncheck+verifier+reader@0.2") == "verifier"
    assert vc.summary_reader("reader@0.2+syncheck+crossfit:/x/cf") == "crossfit:/x/cf"
    assert vc.summary_reader("syncheck+verifier:/x/v2+reader@0.2") == "verifier:/x/v2"
    assert vc.summary_reader("syncheck+verifier:/x/v2") is None  # not the default's members: reads them itself

    out = tmp_path / "cf"
    out.mkdir()
    (out / "folds.json").write_text(json.dumps({"fold_of": {i: n % 2 for n, i in enumerate(ids)}}))
    monkeypatch.setattr(vc, "ProvenanceChecker", lambda nli, dtype=None: SimpleNamespace(
        check=lambda **kw: SimpleNamespace(factuality=float(nli.endswith("fold-1")), error=None)))
    folds = vc.FoldCheckers(f"crossfit:{out}")
    assert [r.factuality for r in folds.check_all(rows, ids)] == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(SystemExit, match="--ragtruth-tasks"):
        folds.check_all(rows, [])  # a HaluEval set has no response ids
    for wrong in (["--ragtruth-tasks", "Sumary"], ["--ragtruth-tasks", "Summary, QA", "--ragtruth-qa", "5"]):
        with pytest.raises(SystemExit):  # an unknown task; QA twice
            vc.main(wrong)


def test_the_verifier_benchmark_reads_responses_as_the_check_does_and_only_held_out_records(tmp_path):
    from benchmarks.verifier_quality import parse_records, ragtruth_units

    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data)
    responses = ragtruth_units(str(data), responses=True)
    assert len(responses) == 24 and {u.label for u in responses} == {0, 1}
    summary = next(u for u in responses if u.set == "RAGTruth Summary")
    assert summary.claims == [s.text for s in split_sentences(summary.text)]  # a summary: each sentence alone
    qa = next(u for u in responses if u.set == "RAGTruth QA")
    assert qa.claims == [f"Question: When was it built?\nAnswer: {qa.text}"]  # any other answer whole
    assert parse_records(["summarization=8000-8300"]) == {"summarization": (8000, 8300)}
    with pytest.raises(SystemExit, match="not inside the verifier's held-out summarization records"):
        parse_records(["summarization=100-200"])
    with pytest.raises(SystemExit, match="SUBSET=START-END"):
        parse_records(["summaries=8000-8300"])


def test_unseen_benchmark_smoke_scores_writes_and_resumes(tmp_path, monkeypatch, capsys):
    """``main`` end to end with a stand-in scorer (the real one needs a model with a shipped final model; ragtruth.run's
    smoke test scores with the tiny one): rows written, tables and section, and a rerun that scores nothing."""
    from types import SimpleNamespace

    import syncheck.scorer
    from benchmarks.ragtruth import unseen
    from features.alignment.lexical import lexical_precision

    calls = []

    class StandIn:
        aggregator_source = "stand-in"

        def __init__(self, model: str, dtype: str) -> None:
            pass

        def score(self, context: str, response: str, question: str, id: str):
            calls.append(id)
            overlap = [(s, lexical_precision(context, s.text)) for s in split_sentences(response)]
            sents = [SimpleNamespace(text=s.text, start=s.start, end=s.end, score=o, final_score=o / 2)
                     for s, o in overlap]
            return SimpleNamespace(sentences=sents, error=None, response_score=min(s.final_score for s in sents))

    monkeypatch.setattr(syncheck.scorer, "Scorer", StandIn)
    data, rows, results = tmp_path / "dev_extra.jsonl", tmp_path / "rows.jsonl", tmp_path / "RESULTS.md"
    synthetic_ragtruth(data)
    args = ["--data", str(data), "--model", "stand-in", "--out", str(rows), "--bootstrap", "20",
            "--results-md", str(results), "--title", "Unseen smoke"]
    text = unseen.main(args)
    assert len(calls) == 24 and "24 of 24 responses scored" in text and "(aggregator: stand-in)" in text
    assert "## Unseen smoke" in results.read_text(encoding="utf-8")
    assert len(rows.read_text(encoding="utf-8").splitlines()) == 24
    again = unseen.main(args)  # resumed from the rows: nothing is scored again, the same tables
    assert len(calls) == 24 and again.split("```\n\n", 1)[1] == text.split("```\n\n", 1)[1]
    # a model without a shipped final-score model: a clear error naming the fix, the rows kept
    monkeypatch.setattr(StandIn, "score", lambda self, **kw: SimpleNamespace(
        sentences=[SimpleNamespace(text="x", start=0, end=1, score=0.5, final_score=None)], error=None,
        response_score=None))
    with pytest.raises(SystemExit, match="no shipped final-score model"):
        unseen.main(["--data", str(data), "--model", "stand-in", "--out", str(tmp_path / "none.jsonl")])
    assert len((tmp_path / "none.jsonl").read_text(encoding="utf-8").splitlines()) == 24


def test_portable_benchmark_smoke_transfers_between_two_models(tmp_path, monkeypatch, capsys):
    """``main`` on two synthetic feature tables standing in for two models' scoring (ragtruth.run's smoke test scores
    with the tiny model): every row of the transfer table, and its section."""
    from benchmarks.ragtruth import portable
    from tests.test_response_verdict import synthetic_table

    monkeypatch.setattr(portable, "read_ragtruth", lambda path, limit=None: [])
    monkeypatch.setattr(portable, "scored_for", lambda records, name, dtype, work: name)
    monkeypatch.setattr(portable, "aligned_tables",
                        lambda records, scored: {name: synthetic_table(seed=k) for k, name in enumerate(scored)})
    results = tmp_path / "RESULTS.md"
    out = portable.main(["--model", "a", "--model", "b:bfloat16", "--work-dir", str(tmp_path), "--folds", "3",
                         "--bootstrap", "20", "--kinds", "lr", "--results-md", str(results), "-o", str(tmp_path / "o")])
    assert {"b / portable LR trained on a", "a / portable LR trained on all 2 models",
            "b / calibrated for b (default recipe + its own hidden probe)", "any / word overlap (trivial)"} <= set(out)
    assert all(set(figures) == {"QA", "Summary", "Data2txt"} for figures in out.values())
    assert portable.SECTION.lstrip("# ") in results.read_text(encoding="utf-8")
    assert "--model a:float32 --model b:bfloat16" in capsys.readouterr().out


def test_verifier_crossfit_replays_the_same_halueval_rows_beside_every_fold(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from benchmarks import verifier_crossfit
    from features.model_manifest import MANIFEST
    from syncheck.training import verifier_build

    data = tmp_path / "rt.jsonl"
    synthetic_ragtruth(data, sources_per_task=2)
    recipes = []

    def fake_build(d, recipe, settings, command, **kw):  # records what each fold would train on
        recipes.append((recipe, command))
        (d / MANIFEST).write_text("{}")

    monkeypatch.setattr(verifier_build, "build_verifier", fake_build)
    replay = {"halueval": "HE", "halueval_records": {"qa": 2, "dialogue": 3}, "distractors": 2}
    settings = SimpleNamespace(init="verifier", epochs=1.0, learning_rate=3e-5, batch_size=4, max_length=64,
                               max_steps=1)
    out = tmp_path / "folds"
    verifier_crossfit.train_folds(out, str(data), read_ragtruth(data), 2, 0, settings, False, echo=lambda *_: None,
                                  replay=replay)
    assert len(recipes) == 2
    for recipe, command in recipes:
        assert (recipe.halueval, recipe.halueval_records, recipe.distractors_per_record) == ("HE", replay[
            "halueval_records"], 2)
        assert "--halueval HALUEVAL --halueval-records qa=2,dialogue=3 --distractors 2" in command
    with pytest.raises(SystemExit):  # refused before any work
        verifier_crossfit.main(["--ragtruth", str(data), "--out", str(tmp_path / "other"), "--halueval", "HE",
                                "--halueval-records", "qa:2"])
    assert "use FILE=N pairs such as" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"\(replay differ\)"):  # finished folds are not reused without the replay
        verifier_crossfit.train_folds(out, str(data), read_ragtruth(data), 2, 0, settings, False,
                                      echo=lambda *_: None)
