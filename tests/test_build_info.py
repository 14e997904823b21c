"""Where saved artefacts and benchmark rows came from: the commit, the configuration, and no machine paths."""

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.run_stamp import run_stamp
from syncheck.aggregators import make_aggregator
from syncheck.aggregators.io import save_aggregator
from syncheck.build_info import source_commit, without_machine_paths

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
    assert "commit" in meta["versions"] and meta["training"]["data"] == "train.jsonl"
    assert not [s for s in strings(meta) if s.startswith(("/", "~"))]


def test_no_shipped_meta_json_names_a_machine_path():
    files = sorted(SHIPPED.rglob("meta.json"))
    assert files
    for path in files:
        found = [s for s in strings(json.loads(path.read_text())) if s.startswith(("/", "~")) or ":\\" in s]
        assert not found, f"{path.relative_to(SHIPPED)} names machine paths: {found}"
