"""Choosing the response verdict's form: the rule, the trivial rules' direction, the benchmark on a synthetic table."""

from __future__ import annotations

import numpy as np

from benchmarks.ragtruth import verdict_choice as vc
from tests.test_response_verdict import synthetic_table

MEAN, MIN, VERDICT = (name for name, _, _ in vc.FORMS[:3])


def figs(**means: float) -> dict[str, vc.FormFigures]:
    names = {"mean": MEAN, "min": MIN, "verdict": VERDICT, "length": vc.LENGTH,
             "overlap": "word overlap with the context"}
    return {names[k]: vc.FormFigures(seeds=[v]) for k, v in means.items()}


def test_the_best_form_ships_when_no_simpler_one_is_as_good():
    f = figs(mean=0.70, min=0.72, verdict=0.80, length=0.60, overlap=0.55)
    f[f"{VERDICT} - {MEAN}"] = vc.FormFigures(ci=(0.10, 0.02, 0.18))
    f[f"{VERDICT} - {MIN}"] = vc.FormFigures(ci=(0.08, 0.01, 0.15))
    assert vc.choose(f)[0] == VERDICT


def test_a_simpler_form_replaces_the_best_when_their_paired_interval_holds_zero():
    f = figs(mean=0.78, min=0.72, verdict=0.80, length=0.60, overlap=0.55)
    f[f"{VERDICT} - {MEAN}"] = vc.FormFigures(ci=(0.02, -0.03, 0.07))
    f[f"{VERDICT} - {MIN}"] = vc.FormFigures(ci=(0.08, 0.01, 0.15))
    chosen, why = vc.choose(f)
    assert chosen == MEAN and "simpler" in why


def test_a_form_that_does_not_beat_length_by_the_margin_falls_back_to_the_best_rule():
    f = figs(mean=0.66, min=0.62, verdict=0.64, length=0.63, overlap=0.70)
    f[f"{VERDICT} - {MEAN}"] = vc.FormFigures(ci=(-0.02, -0.05, 0.01))
    f[f"{MEAN} - {MIN}"] = vc.FormFigures(ci=(0.04, 0.0, 0.08))
    chosen, why = vc.choose(f)
    assert chosen == "word overlap with the context" and "falls back" in why


def test_trivial_rules_take_the_direction_that_ranks_better_on_the_other_folds():
    label = np.array([1, 0] * 10)
    words = np.where(label == 1, 10.0, 50.0)  # shorter = faithful
    fold = np.arange(20) % 4
    out = vc.better_direction(words, label, fold)
    assert (out == -words).all()
    assert (vc.better_direction(-words, label, fold) == -words).all()


def test_benchmark_smoke_writes_its_section_with_every_task_and_a_choice(tmp_path, monkeypatch):
    """``main`` on a synthetic feature table (the scoring it would read from the cache is ragtruth.run's)."""
    monkeypatch.setattr(vc, "cached_table", lambda args: synthetic_table())
    results = tmp_path / "RESULTS.md"
    out = vc.main(["--folds", "3", "--seeds", "0,1", "--bootstrap", "20", "--tau", "0.5",
                   "--results-md", str(results), "--json", str(tmp_path / "choice.json")])
    assert set(out["choices"]) == {"QA", "Summary", "Data2txt"} and out["counts"]["QA"] == (18, 6)
    for task, figures in out["figures"].items():
        assert all(len(figures[name]["seeds"]) == 2 for name, _, _ in vc.FORMS)
        assert figures[VERDICT]["brier"] is not None and figures[vc.LENGTH]["brier"] is None
        assert figures[vc.LENGTH]["minus_length"] is None and figures[MEAN]["minus_length"] is not None
    md = results.read_text(encoding="utf-8")
    assert md.count("Chosen for") == 3 and "| answer length in words |" in md and vc.SECTION.lstrip("# ") in md
    assert (tmp_path / "choice.json").is_file()


def test_pooled_files_are_read_in_order_and_may_not_share_a_response(tmp_path):
    import json

    import pytest

    from benchmarks.ragtruth.data import read_ragtruth_files

    def write(name: str, ids: list[str]) -> str:
        rows = [{"id": i, "source_id": f"s{i}", "task_type": "QA", "question": "q?", "context": "c.",
                 "response": "r.", "labels": []} for i in ids]
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return str(path)

    a, b, c = write("a.jsonl", ["1", "2"]), write("b.jsonl", ["3"]), write("c.jsonl", ["2"])
    assert [r.id for r in read_ragtruth_files(f"{a},{b}")] == ["1", "2", "3"]
    with pytest.raises(ValueError, match=r"share response ids \['2'\]"):
        read_ragtruth_files(f"{a},{c}")
