"""The generated training set: the model's own answers, labelled per sentence, in `syncheck train`'s input format."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from benchmarks.halueval.generated_set import build, generation_jobs, label_sentences
from benchmarks.halueval.pairs import DistractorPair
from benchmarks.halueval.splits import is_test
from syncheck.cli import main as cli
from syncheck.live.monitor import Monitor
from syncheck.scorer import Scorer


class KeywordJudge:
    """Supported iff the claim mentions 'tower' (scores 0.9 / 0.1)."""

    name = "keyword"

    def score(self, premises, claims, batch_size=16):
        return np.array([0.9 if "tower" in c.lower() else 0.1 for c in claims])


def test_labels_follow_the_judge_and_a_memorised_answer_is_always_unfaithful():
    labels, scores = label_sentences(
        KeywordJudge(),
        "ctx",
        "Q?",
        ["The tower is tall.", "It rains.", "The tower opened in 1889."],
        0.5,
        memorised="1889",
    )
    assert labels == [1, 0, 0] and scores == [0.9, 0.1, 0.9]
    assert label_sentences(KeywordJudge(), "ctx", "Q?", [], 0.5) == ([], [])


def test_jobs_use_only_train_side_records_with_greedy_first():
    pairs = [DistractorPair(r, f"Built in 1889 by firm {r}.", "When?", "1889", "1890", "year") for r in range(20)]
    cfs = [("Built in 1925 by firm.", "1925") if r % 2 else None for r in range(20)]
    jobs = list(generation_jobs(pairs, cfs, samples=1, seed=0))
    assert jobs and all(not is_test("qa", j["record"], 0) for j in jobs)
    train = [r for r in range(20) if not is_test("qa", r, 0)]
    assert len(jobs) == sum(2 * (2 if r % 2 else 1) for r in train)
    assert [j["sample"] for j in jobs[:2]] == [0, 1]
    assert all(j["memorised"] == "1889" for j in jobs if j["variant"] == "counterfactual")


def test_build_writes_trainable_rows_and_resumes(tiny_lm, tmp_path):
    monitor = Monitor(Scorer(tiny_lm, lid=None, aggregator=None))
    jobs = [{"id": f"gen-{k}", "record": 1, "variant": "original", "context": "The tower opened in 1889.",
             "question": "When did the tower open?", "memorised": None, "sample": k} for k in range(3)]
    out = tmp_path / "gen.jsonl"
    assert build(monitor, KeywordJudge(), jobs[:2], out, max_new_tokens=12) == 2
    assert build(monitor, KeywordJudge(), jobs, out, max_new_tokens=12) == 1  # the first two are not redone
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["gen-0", "gen-1", "gen-2"]
    for r in rows:
        assert len(r["sentence_labels"]) == len(r["sentences"]) == len(r["judge_scores"])
        assert all("min_prob" in s["features"] for s in r["sentences"])
    # the greedy answer (sample 0) is the monitor's greedy generation
    assert (
        rows[0]["response"]
        == monitor.generate(
            question=jobs[0]["question"], context=jobs[0]["context"], decoding={"max_new_tokens": 12}
        ).text
    )
    # one more row whose labels hold both classes, so `syncheck train` has something to fit
    feats = rows[0]["sentences"][0]["features"] if rows[0]["sentences"] else {"min_prob": 0.5}
    extra = [
        {
            "id": f"x{i}", "sentences": [{"text": "t", "features": feats}] * 6,
            "sentence_labels": [i % 2] * 3 + [1 - i % 2] * 3, "error": None,
        }
        for i in range(4)
    ]
    with out.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(e) + "\n" for e in extra)
    res = CliRunner().invoke(
        cli, ["train", str(out), "--kind", "lr", "-o", str(tmp_path / "agg"), "--features", "min_prob"]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "agg" / "meta.json").exists()


def test_generated_rows_and_heldout_report(tmp_path):
    from benchmarks.ragtruth.train_default import heldout_generated
    from benchmarks.ragtruth.training import Rows, generated_rows
    from syncheck.results import encode_vector

    rng = np.random.default_rng(0)
    path = tmp_path / "gen.jsonl"
    rows = []
    names = ["min_prob", "mean_prob"]
    for r in range(10):
        labels = [int(v) for v in rng.integers(0, 2, 3)]
        sents = [{"text": "x" * (5 + 3 * i), "features": {"min_prob": float(y + rng.normal(0, 0.3)), "mean_prob": 0.5},
                  "vectors": {"hidden": encode_vector(rng.normal(size=4) + y)}} for i, y in enumerate(labels)]
        rows.append({"id": f"g{r}", "record": r, "sentences": sents, "sentence_labels": labels, "error": None})
    rows.append({"id": "bad", "record": 99, "sentences": [], "sentence_labels": [1], "error": None})  # skipped
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gen = generated_rows([str(path)], names)
    assert gen.X.shape == (30, 2) and gen.hidden.shape == (30, 4) and len(gen.y) == len(gen.groups) == 30
    assert "generated/99" not in set(gen.groups.tolist())
    y_fixed = np.repeat([0, 1], 20)
    fixed = Rows(
        names,
        np.column_stack([y_fixed + rng.normal(0, 0.3, 40), np.full(40, 0.5)]),
        rng.normal(size=(40, 4)) + y_fixed[:, None],
        y_fixed,
        np.arange(40).astype(str),
        np.full(40, 9.0),
        "fixed",
    )
    lines, oof = heldout_generated(fixed, gen, seed=0)
    assert len(lines) == 4 and "default recipe" in lines[2]
    assert oof.shape == (30,) and np.all((oof >= 0) & (oof <= 1))
    assert float(lines[2].split(":")[1].split()[0]) > 0.8  # min_prob and the vector track the label here
