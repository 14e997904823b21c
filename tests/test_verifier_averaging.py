"""``syncheck verifier average``: a verifier whose weights average other verifiers', and the ones it refuses."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from features.alignment.verifier import WEIGHTS, VerifierScorer
from features.model_manifest import MANIFEST, file_sha256, weights_sha256
from syncheck.cli import main
from syncheck.shipped_models import SPAN_READER, VERIFIER, shipped_model_dir
from syncheck.training.verifier_averaging import average_verifiers, builds


def shipped_verifier_dir():
    return shipped_model_dir(VERIFIER)


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """A copy of the shipped verifier with every trained tensor moved by +0.25 (its manifest's hash updated)."""
    out = tmp_path_factory.mktemp("shifted")
    src = shipped_verifier_dir()
    state = {k: (v.float() + 0.25).to(torch.float16) for k, v in load_file(str(src / WEIGHTS)).items()}
    save_file(state, str(out / WEIGHTS))
    (out / "config.json").write_bytes((src / "config.json").read_bytes())
    manifest = json.loads((src / MANIFEST).read_text())
    manifest["files"][WEIGHTS]["sha256"] = file_sha256(out / WEIGHTS)
    (out / MANIFEST).write_text(json.dumps(manifest))
    return out


def test_the_average_is_the_weighted_mean_of_each_tensor_and_scores_as_a_verifier(tmp_path, shifted):
    result = CliRunner().invoke(main, ["verifier", "average", str(tmp_path / "avg"), "shipped", str(shifted),
                                       "--weights", "0.75,0.25"])
    assert result.exit_code == 0, result.output
    shipped = load_file(str(shipped_verifier_dir() / WEIGHTS))
    averaged = load_file(str(tmp_path / "avg" / WEIGHTS))
    assert set(averaged) == set(shipped)
    for name, tensor in shipped.items():
        expected = (tensor.float() + 0.25 * 0.25).to(torch.float16)
        assert torch.allclose(averaged[name].float(), expected.float(), atol=1e-3), name
    manifest = json.loads((tmp_path / "avg" / MANIFEST).read_text())
    assert [part["weight"] for part in manifest["average_of"]] == [0.75, 0.25]
    shipped_manifest = json.loads((shipped_verifier_dir() / MANIFEST).read_text())
    shipped_builds = [b["training"]["command"] for b in builds(shipped_manifest)]
    assert [b["training"]["command"] for b in builds(manifest)] == shipped_builds * 2
    assert manifest["data"]["recipe"] == builds(shipped_manifest)[0]["data"]["recipe"]
    assert weights_sha256(manifest) == file_sha256(tmp_path / "avg" / WEIGHTS)
    command = f"syncheck verifier average avg shipped {shifted.name} --weights 0.75,0.25"
    assert manifest["training"]["command"] == command
    assert manifest["data"]["rows"] == 2 * shipped_manifest["data"]["rows"]  # two trainings, on the same sources
    assert manifest["data"]["sources"] == shipped_manifest["data"]["sources"]
    assert manifest["licences"] == shipped_manifest["licences"]
    score = VerifierScorer(tmp_path / "avg", progress=False).score(["Paris is in France."], ["Paris is in France."])
    assert 0.0 <= float(score[0]) <= 1.0


def test_a_verifier_averaged_with_itself_is_itself(tmp_path):
    average_verifiers([shipped_verifier_dir(), shipped_verifier_dir()], [0.5, 0.5], tmp_path, command="test")
    shipped = load_file(str(shipped_verifier_dir() / WEIGHTS))
    assert all(torch.equal(load_file(str(tmp_path / WEIGHTS))[k], v) for k, v in shipped.items())


def test_weights_that_do_not_fit_and_verifiers_of_another_kind_are_refused(tmp_path, shifted):
    runner = CliRunner()
    for weights in ("0.5", "0.7,0.7", "a,b"):
        refused = runner.invoke(main, ["verifier", "average", str(tmp_path / "x"), "shipped", str(shifted),
                                       "--weights", weights])
        assert refused.exit_code != 0 and ("summing to 1" in refused.output or "commas" in refused.output), weights
    alone = runner.invoke(main, ["verifier", "average", str(tmp_path / "x"), "shipped"])
    assert alone.exit_code != 0 and "at least two" in alone.output
    with pytest.raises(ValueError, match="differ in 'head'"):  # the span reader has a start/end head
        average_verifiers([shipped_verifier_dir(), shipped_model_dir(SPAN_READER)], [0.5, 0.5], tmp_path / "y",
                          command="t")
    manifest = json.loads((shifted / MANIFEST).read_text())
    (tmp_path / "bad").mkdir()
    for name in (WEIGHTS, "config.json"):
        (tmp_path / "bad" / name).write_bytes((shifted / name).read_bytes())
    manifest["files"][WEIGHTS]["sha256"] = "0" * 64
    (tmp_path / "bad" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(OSError, match="sha256"):
        average_verifiers([shipped_verifier_dir(), tmp_path / "bad"], [0.5, 0.5], tmp_path / "z", command="t")


def test_inputs_built_on_the_same_dev_pairs_give_the_average_a_dev_auroc(tmp_path, shifted):
    from syncheck.training.pairs import VerifierPair, write_pairs

    doc = "Marie Curie was born in Warsaw in 1867."
    pairs = [VerifierPair(doc, claim, label, f"g{i}", "test") for i, (claim, label) in enumerate(
        [("Marie Curie was born in Warsaw.", 1), ("Marie Curie was born in Berlin.", 0),
         ("She was born in 1867.", 1), ("She was born in 1912.", 0)])]
    inputs = []
    for name, src in (("a", shipped_verifier_dir()), ("b", shifted)):
        (tmp_path / name).mkdir()
        for file in (WEIGHTS, MANIFEST, "config.json"):
            (tmp_path / name / file).write_bytes((src / file).read_bytes())
        write_pairs(pairs, str(tmp_path / name / "dev_pairs.jsonl"))
        inputs.append(tmp_path / name)
    manifest = average_verifiers(inputs, [0.5, 0.5], tmp_path / "avg", command="test")
    assert manifest["data"]["dev"]["dev_pairs"] == 4 and 0 <= manifest["data"]["dev"]["verifier_auroc"] <= 1
    assert json.loads((tmp_path / "avg" / MANIFEST).read_text())["data"]["dev"] == manifest["data"]["dev"]

