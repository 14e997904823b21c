"""Where saved artefacts and benchmark rows came from: the commit, the configuration, and no machine paths."""

import argparse
import json
from pathlib import Path

import numpy as np

import syncheck
from benchmarks.run_stamp import run_stamp
from syncheck.aggregators import make_aggregator
from syncheck.aggregators.io import save_aggregator
from syncheck.build_info import TRAINING_LIBRARIES, build_record, source_commit, without_machine_paths

SHIPPED = Path(__file__).resolve().parents[1] / "syncheck" / "data"


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_machine_paths_become_file_names_and_other_values_stay():
    value = {"data": "/tmp/abc/dev.jsonl", "home": "~/.cache/x/model.gguf", "up": "../shared/data/halueval",
             "out": "runs/a.jsonl", "both": "/a/b.jsonl,/c/d.jsonl", "path": Path("/x/y.json"), "n": 3,
             "text": "a sentence, with a comma", "nested": [{"p": "/root/q.txt"}], "none": None}
    assert without_machine_paths(value) == {
        "data": "dev.jsonl", "home": "model.gguf", "up": "halueval", "out": "runs/a.jsonl", "both": "b.jsonl,d.jsonl",
        "path": "y.json", "n": 3, "text": "a sentence, with a comma", "nested": [{"p": "q.txt"}], "none": None}


def test_the_commit_is_named_in_a_checkout_and_none_outside(tmp_path):
    commit = source_commit()
    assert commit is None or (len(commit.split("-")[0]) >= 7 and commit.replace("-dirty", "").isalnum())
    assert source_commit(tmp_path) is None


def test_without_git_the_commit_is_none(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert source_commit() is None


def test_a_build_record_names_the_command_commit_libraries_and_machine_without_machine_paths():
    import torch

    record = build_record("syncheck verifier train /tmp/out/v --halueval '../shared/data/halueval' --epochs 1")
    assert record["command"] == "syncheck verifier train v --halueval halueval --epochs 1"
    assert record["commit"] == source_commit() and len(record["date"]) == 10
    env = record["environment"]
    assert set(TRAINING_LIBRARIES) <= set(env) and env["torch"] and env["syncheck"] == syncheck.__version__
    assert env["device"] == "cpu" and env["torch_threads"] == torch.get_num_threads()
    json.dumps(record)


def test_a_benchmark_stamp_carries_the_commit_and_the_options_without_machine_paths():
    stamp = run_stamp(argparse.Namespace(out="/tmp/run/a.jsonl", limit=5, data_dir="../shared/data/halueval"))
    assert set(stamp) == {"commit", "config"} and stamp["commit"] == source_commit()
    assert stamp["config"] == {"out": "a.jsonl", "limit": 5, "data_dir": "halueval"}
    assert run_stamp({"judge": "lexical"})["config"] == {"judge": "lexical"}
    json.dumps(stamp)


def test_a_saved_meta_json_names_the_commit_and_no_machine_path(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), np.arange(40) % 2
    agg = make_aggregator("lr", feature_names=["a", "b"]).fit(X, y)
    out = save_aggregator(agg, tmp_path / "agg", training={"data": str(tmp_path / "train.jsonl")},
                          scorer={"model": "/root/.cache/models/m.gguf"})
    meta = json.loads((out / "meta.json").read_text())
    assert meta["syncheck_version"] == syncheck.__version__ and meta["commit"] == source_commit()
    assert meta["training"]["data"] == "train.jsonl" and meta["scorer"]["model"] == "m.gguf"
    assert not [s for s in strings(meta) if s.startswith(("/", "~"))]


def test_no_shipped_meta_json_or_manifest_names_a_machine_path():
    files = sorted([*SHIPPED.rglob("meta.json"), *SHIPPED.rglob("manifest.json")])
    assert files
    for path in files:
        found = [s for s in strings(json.loads(path.read_text())) if s.startswith(("/", "~")) or ":\\" in s]
        assert not found, f"{path.relative_to(SHIPPED)} names machine paths: {found}"


def test_cached_feature_rows_carry_the_stamp_and_old_rows_without_it_are_reused(tmp_path):
    """benchmarks.halueval.scoring: rows scored now carry ``run``; a row written before it existed still matches."""
    from types import SimpleNamespace

    from benchmarks.halueval.scoring import Item, item_hash, score_items

    items = [Item(str(i), "pairs", "qa", i, "Paris is in France.", "Where is Paris?", "Paris is in France.", label=1)
             for i in range(2)]
    row = {"sentences": [{"text": "Paris is in France.", "start": 0, "end": 19, "features": {"kl": 0.1}}],
           "error": None}
    cache = tmp_path / "pairs-key.jsonl"
    cache.write_text(json.dumps({"id": "0", "hash": item_hash(items[0]), "seconds": 0.5, "row": row,
                                 "extra": [{}]}) + "\n")
    scored_ids = []

    def score_records(recs):
        scored_ids.extend(r.id for r in recs)
        return [SimpleNamespace(to_json=lambda vectors=False: row) for _ in recs]

    stamp = run_stamp({"model": "/models/m.gguf", "batch_size": 2})
    out = score_items(items, cache, lambda: SimpleNamespace(score_records=score_records), None, stamp=stamp)
    assert scored_ids == ["1"] and [s.error for s in out] == [None, None] and out[0].seconds == 0.5
    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    assert "run" not in lines[0] and lines[1]["run"] == stamp and stamp["config"]["model"] == "m.gguf"


def test_unseen_rows_carry_the_stamp_and_resume_over_rows_without_it(tmp_path):
    from types import SimpleNamespace

    from benchmarks.ragtruth.data import RAGTruthRecord
    from benchmarks.ragtruth.unseen import score_rows

    recs = [RAGTruthRecord(str(i), f"s{i}", "QA", "m", "Q?", "Paris is in France.", "Paris is in France.", ())
            for i in range(2)]
    old = {"id": "0", "source": "s0", "task": "QA", "label": 1, "response_score": 0.7, "sentences": []}
    out = tmp_path / "rows.jsonl"
    out.write_text(json.dumps(old) + "\n")
    sent = SimpleNamespace(text="Paris is in France.", start=0, end=19, score=0.9, final_score=0.8)
    scorer = SimpleNamespace(score=lambda **kw: SimpleNamespace(sentences=[sent], error=None, response_score=0.7))
    stamp = run_stamp(argparse.Namespace(data="/data/ragtruth/test.jsonl", out=str(out)))
    rows = score_rows(recs, scorer, out, stamp)
    assert rows[0] == old and rows[1]["run"] == stamp
    assert stamp["config"] == {"data": "test.jsonl", "out": "rows.jsonl"}
