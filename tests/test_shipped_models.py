"""The models syncheck ships: one registry, one manifest schema, checked against each model's files, a card for each
in the docs, ``syncheck models``, and directories written before the schema still loading."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from features.model_manifest import (
    FORMAT,
    KINDS,
    MANIFEST,
    file_sha256,
    read_manifest,
    schema_problems,
    upgrade_manifest,
    weights_sha256,
)
from syncheck.shipped_models import (
    PACKAGE_LICENCE,
    PROBE_VERIFIER,
    SHIPPED,
    SPAN_READER,
    VERIFIER,
    data_dir,
    shipped_model,
    shipped_model_dir,
)

ROOT = Path(__file__).resolve().parents[1]
CARDS = ROOT / "docs" / "shipped-models.md"
#: Files under syncheck/data that are no model's.
NOT_MODELS = {"__init__.py", "lid_reference_corpus.jsonl"}


@pytest.mark.parametrize("model", SHIPPED, ids=lambda m: m.name)
def test_every_shipped_model_s_manifest_fits_the_schema_and_its_files(model):
    """Every file the manifest lists has its sha256 and size; no file of the directory goes unlisted; the data names
    its sources with their licences and rows."""
    manifest = model.manifest()
    assert schema_problems(manifest, model.directory) == []
    assert manifest["name"] == model.name and manifest["kind"] == model.kind and "upgraded_from" not in manifest
    assert manifest["licences"][0] == PACKAGE_LICENCE and manifest["purpose"] and manifest["training"]["command"]
    assert re.fullmatch(r"[0-9a-f]{7,40}", manifest["training"]["commit"])
    assert manifest["data"]["rows"] == sum(s["rows"] for s in manifest["data"]["sources"])
    assert manifest["data"]["licences"] == sorted({s["licence"] for s in manifest["data"]["sources"]})


def test_a_shipped_aggregator_s_sources_are_what_its_rebuild_writes():
    """The scripts that rebuild the shipped aggregators write their manifests (benchmarks.ragtruth.train_default):
    the sources they would write from ``meta.json``'s training sets are the ones shipped."""
    from benchmarks.ragtruth.train_default import set_sources
    from syncheck.aggregators.io import read_meta

    for model in SHIPPED:
        if model.kind == "aggregator":
            meta = read_meta(model.directory)
            sets = meta["training"].get("sentences_per_set") or {"ragtruth": meta["training"]["sentences"]}
            assert model.manifest()["data"]["sources"] == set_sources(sets, meta["scorer"]["model"]), model.name


def test_every_file_under_the_data_directory_belongs_to_a_shipped_model():
    """A model added without a registry entry (or left behind by one removed) shows here."""
    dirs = [m.directory for m in SHIPPED]
    stray = [p.relative_to(data_dir()).as_posix() for p in data_dir().rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.name not in NOT_MODELS
             and not any(d in p.parents for d in dirs)]
    assert stray == []
    assert len({m.name for m in SHIPPED}) == len(SHIPPED) and {m.kind for m in SHIPPED} == set(KINDS)


def test_every_shipped_model_has_a_card_in_the_docs():
    """docs/shipped-models.md: a ``## `name` `` card per registry entry, naming its directory and weights file, and
    no card for a model that is not shipped."""
    text = CARDS.read_text(encoding="utf-8")
    cards = dict(re.findall(r"^## .*?`([^`]+)`.*\n((?:(?!^## ).*\n?)*)", text, re.MULTILINE))
    assert sorted(cards) == sorted(m.name for m in SHIPPED)
    for model in SHIPPED:
        manifest = model.manifest()
        assert f"syncheck/data/{model.path}/" in cards[model.name], model.name
        assert f"`{manifest['weights']}`" in cards[model.name], model.name
        assert weights_sha256(manifest)[:12] in cards[model.name], model.name


def test_the_models_command_lists_every_shipped_model_and_checks_their_files():
    from syncheck.cli import main

    shown = CliRunner().invoke(main, ["models"])
    assert shown.exit_code == 0, shown.output
    for model in SHIPPED:
        assert model.name in shown.output and weights_sha256(model.manifest())[:12] in shown.output
    listed = json.loads(CliRunner().invoke(main, ["models", "--json", "--check"]).output)
    assert [r["name"] for r in listed] == [m.name for m in SHIPPED]
    assert all(r["problems"] == [] and r["size"] > 0 and len(r["sha256"]) == 64 and r["purpose"] for r in listed)


def test_a_changed_missing_or_unlisted_file_is_a_problem(tmp_path):
    src = shipped_model_dir(PROBE_VERIFIER)
    shutil.copytree(src, tmp_path / "probe")
    directory = tmp_path / "probe"
    manifest = read_manifest(directory)
    assert schema_problems(manifest, directory) == []
    (directory / "head.json").write_text("{}")
    (directory / "extra.safetensors").write_bytes(b"x")
    problems = schema_problems(manifest, directory)
    assert problems == ["head.json does not match its sha256 and size",
                        "extra.safetensors is in the directory but not listed"]
    (directory / "head.json").unlink()
    assert "head.json is listed but missing" in schema_problems(manifest, directory)
    assert "no 'licences'" in schema_problems({k: v for k, v in manifest.items() if k != "licences"})


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(ValueError, match="verifier"):
        shipped_model("no-such-model")
    assert shipped_model_dir(SPAN_READER) == data_dir() / "reader"


# ---------------------------------------------------------------------------- directories of the older formats
def old_verifier_manifest(directory: Path, head: str = "logit") -> dict:
    """The manifest ``syncheck verifier train`` / ``reader`` wrote before the schema (``syncheck-verifier/1``)."""
    new = read_manifest(directory)
    weights = directory / new["weights"]
    return {"format": "syncheck-verifier/1", "head": head, "base": new["base"], "frozen": new["frozen"],
            "frozen_sha256": new["frozen_sha256"], "weights_sha256": file_sha256(weights),
            "weights_bytes": weights.stat().st_size, "max_length": new["max_length"],
            "training": new["training"]["settings"], "data": {k: v for k, v in new["data"].items()
                                                               if k not in ("sources", "rows", "licences")},
            "command": new["training"]["command"], "commit": new["training"]["commit"], "date": "2026-11-29"}


def test_an_old_manifest_upgrades_to_the_schema():
    old = old_verifier_manifest(shipped_model_dir(VERIFIER))
    new = upgrade_manifest(old, name="mine")
    assert new["format"] == FORMAT and new["kind"] == "verifier" and new["name"] == "mine"
    assert new["upgraded_from"] == "syncheck-verifier/1" and new["weights"] == "verifier.safetensors"
    assert new["files"] == {"verifier.safetensors": {"sha256": old["weights_sha256"], "size": old["weights_bytes"]}}
    assert new["training"]["command"] == old["command"] and new["training"]["settings"] == old["training"]
    assert new["data"]["rows"] == old["data"]["train_pairs"] and new["data"]["sources"] == []
    assert new["head"] == "logit" and new["frozen_sha256"] == old["frozen_sha256"] and new["licences"] == []
    assert upgrade_manifest(new) == new
    probe = upgrade_manifest({"format": "syncheck-probe/1", "model": "m", "dtype": "float32", "layers": [-1],
                              "head_sha256": "ab", "head_bytes": 3, "data": {"train_pairs": 7}, "command": "c"})
    assert probe["kind"] == "probe-verifier" and probe["base"] == "m" and probe["layers"] == [-1]
    assert probe["files"] == {"head.json": {"sha256": "ab", "size": 3}} and probe["data"]["rows"] == 7
    pairs = upgrade_manifest({**old, "data": {"sources": [{"file": "snli.jsonl.gz", "licence": "CC BY-SA 4.0",
                                                           "sources": {"snli": {"rows": 5, "supported": 2}}}]}})
    assert pairs["data"]["sources"][0]["name"] == "snli.jsonl.gz" and pairs["data"]["sources"][0]["rows"] == 5
    assert pairs["data"]["licences"] == ["CC BY-SA 4.0"]
    with pytest.raises(ValueError, match="syncheck verifier train"):
        upgrade_manifest({"format": "something-else/9"})


@pytest.mark.slow
def test_a_span_reader_trained_before_the_schema_loads_from_its_old_file_and_scores_the_same(tmp_path):
    """A reader directory as ``syncheck verifier reader`` wrote it before: weights named ``verifier.safetensors``, a
    ``syncheck-verifier/1`` manifest. It loads, and scores as the shipped reader (the same weights) does."""
    from syncheck.alignment import make_alignment_scorer
    from syncheck.cli import main

    src = shipped_model_dir(SPAN_READER)
    old = old_verifier_manifest(src, head="span")
    (tmp_path / "verifier.safetensors").write_bytes((src / "reader.safetensors").read_bytes())
    (tmp_path / "config.json").write_bytes((src / "config.json").read_bytes())
    (tmp_path / MANIFEST).write_text(json.dumps(old))
    premise = "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891."
    claims = [f"Question: Where was Marie Curie born?\nAnswer: {a}" for a in ("Warsaw", "Paris")]
    then = make_alignment_scorer(f"reader:{tmp_path}").score([premise] * 2, claims)
    now = make_alignment_scorer("reader").score([premise] * 2, claims)
    assert then.tolist() == now.tolist()
    shown = CliRunner().invoke(main, ["verifier", "info", str(tmp_path), "--against", str(src)])
    assert shown.exit_code == 0 and "files.reader.safetensors.sha256" in shown.output


def test_a_verifier_trained_before_the_schema_can_be_averaged_with_the_shipped_one(tmp_path):
    from safetensors.torch import load_file

    from syncheck.training.verifier_averaging import average_verifiers

    src = shipped_model_dir(VERIFIER)
    for name in ("verifier.safetensors", "config.json"):
        (tmp_path / "old" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "old" / name).write_bytes((src / name).read_bytes())
    (tmp_path / "old" / MANIFEST).write_text(json.dumps(old_verifier_manifest(src)))
    manifest = average_verifiers([tmp_path / "old", src], [0.5, 0.5], tmp_path / "avg", command="t")
    assert manifest["format"] == FORMAT and schema_problems(manifest, tmp_path / "avg") == []
    shipped, averaged = load_file(str(src / "verifier.safetensors")), load_file(str(tmp_path / "avg" /
                                                                                     "verifier.safetensors"))
    assert all((averaged[k] == v).all() for k, v in shipped.items())


def test_features_never_looks_into_the_package_s_data():
    """Layers point down: ``features/`` is handed a directory; no module of it builds a path into ``syncheck``."""
    found = []
    for path in (ROOT / "features").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if node.value == "syncheck" or "syncheck/data" in node.value or node.value == "syncheck.data":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_a_built_model_is_installed_as_a_shipped_one_with_the_package_licence_first(tmp_path, monkeypatch):
    """install_shipped copies a build's listed files over the shipped model's, names it and keeps its purpose."""
    from syncheck import shipped_models
    from syncheck.shipped_models import install_shipped

    build = tmp_path / "build"
    shutil.copytree(shipped_model_dir(VERIFIER), build)
    manifest = read_manifest(build)
    (build / MANIFEST).write_text(json.dumps({**manifest, "name": "build", "purpose": "a build",
                                              "licences": manifest["licences"][1:]}))
    (build / "pairs.jsonl").write_text("{}\n")  # a build's own files that are not the model's stay behind
    data = tmp_path / "data"
    shutil.copytree(shipped_model_dir(VERIFIER), data / "verifier")
    (data / "verifier" / "stale.safetensors").write_bytes(b"x")
    monkeypatch.setattr(shipped_models, "data_dir", lambda: data)
    shipped = install_shipped(build, VERIFIER)
    assert shipped["name"] == VERIFIER and shipped["purpose"] == manifest["purpose"]
    assert shipped["licences"][0] == PACKAGE_LICENCE and shipped["licences"][1:] == manifest["licences"][1:]
    assert sorted(p.name for p in (data / "verifier").iterdir()) == sorted([*manifest["files"], MANIFEST])
    assert schema_problems(read_manifest(data / "verifier"), data / "verifier") == []
    with pytest.raises(ValueError, match="span-reader"):
        install_shipped(build, SPAN_READER)
    (build / manifest["weights"]).write_bytes(b"changed")
    with pytest.raises(ValueError, match="does not match its sha256.*run the command of its manifest again"):
        install_shipped(build, VERIFIER)
