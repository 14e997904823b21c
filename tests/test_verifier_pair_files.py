"""Labelled pairs files (``premise`` / ``hypothesis`` / ``label``): reading them, their licences in a manifest, and a
tiny verifier trained from them through the CLI."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from features.model_manifest import MANIFEST, read_manifest
from syncheck.shipped_models import VERIFIER, shipped_model_dir
from syncheck.training.pair_files import (
    KNOWN_SOURCES,
    capped,
    pair_file_record,
    parse_label,
    read_pair_file,
    shipping_problems,
)
from syncheck.training.verifier_dataset import DataRecipe, build_pairs, data_sources

ROWS = [
    {"src": "mini_nli", "premise": "Marie Curie was born in Warsaw in 1867.", "hypothesis": "Curie was born in Warsaw.",
     "label": 1},
    {"src": "mini_nli", "premise": "Marie Curie was born in Warsaw in 1867.", "hypothesis": "Curie was born in Rome.",
     "label3": "contradiction", "label": "contradiction"},
    {"src": "mini_fact", "premise": "The Danube flows into the Black Sea.", "hypothesis": "The Danube ends in a sea.",
     "label": True},
    {"src": "sick", "premise": "A man plays a guitar.", "hypothesis": "A woman sings.", "label": 0},
    {"premise": "Paris is the capital of France.", "hypothesis": "Lyon is the capital of France.", "label": 0.0},
]


def write_pairs_file(path, rows):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_a_pairs_file_reads_gzipped_with_labels_in_every_form_and_groups_pairs_by_premise(tmp_path):
    path = write_pairs_file(tmp_path / "mine.jsonl.gz", ROWS)
    pairs = read_pair_file(path, drop=("sick",))
    assert [p.label for p in pairs] == [1, 0, 1, 0]
    assert [p.kind for p in pairs] == ["mini_nli", "mini_nli", "mini_fact", "mine"]  # no src: the file's name
    assert pairs[0].group == pairs[1].group != pairs[2].group  # one premise, one group
    assert pairs[0].claim == "Curie was born in Warsaw."


@pytest.mark.parametrize("row, message", [
    ({"premise": "p", "label": 1}, "'premise' and 'hypothesis' strings"),
    ({"premise": "p", "hypothesis": "h", "label": 2}, "give 1 where the premise supports"),
    ({"premise": "p", "hypothesis": "h"}, "label None"),
])
def test_a_bad_line_is_named_with_what_to_write(tmp_path, row, message):
    path = write_pairs_file(tmp_path / "bad.jsonl", [ROWS[0], row])
    with pytest.raises(ValueError, match=message) as err:
        read_pair_file(path)
    assert "line 2" in str(err.value)
    with pytest.raises(FileNotFoundError, match="premise, hypothesis and label"):
        read_pair_file(tmp_path / "none.jsonl")
    assert parse_label("Entailment", "x") == 1 and parse_label("neutral", "x") == 0


def test_the_cap_keeps_whole_premise_groups_of_each_source_and_is_fixed_by_the_seed(tmp_path):
    rows = [{"src": s, "premise": f"premise {s} {i // 2}", "hypothesis": f"claim {i}", "label": i % 2}
            for s in ("a", "b") for i in range(40)]
    pairs = read_pair_file(write_pairs_file(tmp_path / "p.jsonl", rows))
    kept = capped(pairs, 10, seed=3)
    assert {k: sum(p.kind == k for p in kept) for k in "ab"} == {"a": 10, "b": 10}
    groups = {p.group for p in kept}
    assert all(p in kept for p in pairs if p.group in groups)  # no premise group is cut
    assert kept == capped(pairs, 10, seed=3) and kept != capped(pairs, 10, seed=4)
    assert capped(pairs, None) == pairs


def test_a_shipped_model_may_not_learn_from_non_commercial_rows_or_the_check_sets():
    assert shipping_problems(["d/snli.jsonl.gz", "d/frank.jsonl.gz", "mine.jsonl"], ()) == []
    problems = shipping_problems(["d/anli_dev.jsonl.gz", "d/wice.jsonl.gz", "d/felsal_nli.jsonl.gz"], ())
    assert any("anli_dev is non-commercial" in p for p in problems)
    assert any("wice is a check set" in p for p in problems)
    assert any("sick" in p and "--drop-source" in p for p in problems)
    assert shipping_problems(["d/felsal_nli.jsonl.gz"], ("sick",)) == []
    assert {name for name, known in KNOWN_SOURCES.items() if known.check} == {"summedits", "wice", "fever_symmetric"}


def test_the_recipe_lists_each_file_with_its_licence_and_rows_per_source(tmp_path):
    path = write_pairs_file(tmp_path / "snli.jsonl", ROWS[:4])
    recipe = DataRecipe(pairs=(str(path),), drop_sources=("sick",))
    pairs, _ = build_pairs(recipe)
    (record,) = data_sources(recipe, pairs)
    assert record == pair_file_record(path, pairs, ("sick",))
    assert record["licence"] == KNOWN_SOURCES["snli"].licence and record["dropped"] == ["sick"]
    assert record["sources"] == {"mini_fact": {"rows": 1, "supported": 1}, "mini_nli": {"rows": 2, "supported": 1}}
    assert "pairs" not in DataRecipe().to_json()  # recipes built before pairs files read the same
    with pytest.raises(ValueError, match="give the files"):
        DataRecipe(drop_sources=("sick",))


def test_a_tiny_verifier_trains_from_pairs_files_through_the_cli(tmp_path):
    from syncheck.cli import main

    rows = [{"src": f"s{i % 2}", "premise": f"The {w} is in room {i + shift}.",
             "hypothesis": f"The {w} is in room {i}.", "label": int(shift == 0)}
            for i, w in enumerate(["cat", "key", "pen"] * 4) for shift in (0, 1)]
    path = write_pairs_file(tmp_path / "own.jsonl.gz", rows)
    out = tmp_path / "verifier"
    args = ["verifier", "train", str(out), "--pairs", str(path), "--pairs-per-source", "10", "--max-steps", "2",
            "--batch-size", "4", "--max-length", "48", "--dev-share", "0.3", "--sampling", "length", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest["training"]["settings"]["sampling"] == "length"
    assert manifest["data"]["recipe"]["pairs"] == ["own.jsonl.gz"] and manifest["data"]["licence_problems"] == []
    assert [s["name"] for s in manifest["data"]["sources"]] == ["own.jsonl.gz"]
    assert "--pairs own.jsonl.gz --pairs-per-source 10" in manifest["training"]["command"]
    said = [{**r, "hypothesis": f"{['no', 'yes'][r['label']]} {r['hypothesis']}"} for r in rows]
    telling = write_pairs_file(tmp_path / "telling.jsonl", said)  # the claim alone gives its label away
    empty = CliRunner().invoke(main, ["verifier", "train", str(tmp_path / "e"), "--pairs", str(telling)])
    assert empty.exit_code != 0 and "give each claim with both labels" in empty.output, empty.output
    refused = CliRunner().invoke(main, ["verifier", "train", str(tmp_path / "n"), "--drop-source", "sick",
                                        "--labelled", str(path)])
    assert refused.exit_code == 2 and "give the files" in refused.output


def test_every_shipped_verifier_s_sources_and_licences_match_its_recipe():
    """A manifest that names pairs files lists each with its licence, and none a shipped model may not learn from;
    one without them (HaluEval only) lists none."""
    manifest = json.loads((shipped_model_dir(VERIFIER) / MANIFEST).read_text())
    from syncheck.training.verifier_averaging import builds

    for built in builds(manifest):
        data = built["data"]
        files = data["recipe"].get("pairs", [])
        assert [s["name"] for s in data.get("sources", []) if s["name"] in files] == files
        assert shipping_problems(files, data["recipe"].get("drop_sources", [])) == []
        assert data.get("licence_problems", []) == []
