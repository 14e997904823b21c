"""The probe verifier: the states it reads, its head's format and hash, windows, and the training command end to end
on a tiny random LM."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from features.model_manifest import MANIFEST, weights_sha256
from syncheck.model.probe_verifier import HEAD, ProbeHead, ProbeScorer, ProbeStates, load_head, write_head
from syncheck.shipped_models import PROBE_VERIFIER, shipped_model_dir


def shipped_probe_dir():
    return shipped_model_dir(PROBE_VERIFIER)


DOCUMENT = ("Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics. In 1903 she shared "
            "the Nobel Prize in Physics with Pierre Curie and Henri Becquerel.")
CLAIMS = ["She was born in Warsaw.", "Question: Where did she move?\nAnswer: Paris", "She was born in Rome."]


def a_head(d: int, layers=(-1, -2), seed: int = 0) -> ProbeHead:
    rng = np.random.default_rng(seed)
    return ProbeHead("tiny-llama", "float32", layers, rng.normal(size=d), rng.uniform(0.5, 2, size=d),
                     rng.normal(size=d), 0.3)


def test_the_states_are_the_last_prompt_token_s_hidden_states_of_the_layers(tiny_lm):
    reader = ProbeStates(tiny_lm, layers=(-1, -3))
    prompt = reader.prompt(DOCUMENT, CLAIMS[0])
    assert prompt.startswith("Premise: Marie") and prompt.endswith("Answer Yes or No.\nAnswer:")
    ids = tiny_lm.tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        hidden = tiny_lm.model(input_ids=ids, output_hidden_states=True).hidden_states
    expected = torch.cat([hidden[-1][0, -1], hidden[-3][0, -1]]).numpy()
    assert reader.states([DOCUMENT], [CLAIMS[0]])[0] == pytest.approx(expected, abs=1e-5)


def test_claims_of_one_premise_share_its_prefix_and_batches_give_the_one_by_one_states(tiny_lm):
    reader = ProbeStates(tiny_lm, layers=(-1, -2))
    premises = [DOCUMENT, "Bananas are yellow fruits.", DOCUMENT, DOCUMENT]
    claims = [CLAIMS[0], "Bananas are blue.", CLAIMS[1], CLAIMS[2]]
    batched = reader.states(premises, claims, batch_size=3)
    single = np.stack([reader.states([p], [c])[0] for p, c in zip(premises, claims)])
    assert batched.shape == (4, 64) and np.abs(batched - single).max() < 1e-4


def test_the_score_is_the_head_on_the_states_with_the_max_over_windows(tiny_lm):
    head = a_head(64)
    scorer = ProbeScorer(head, model=tiny_lm, max_premise_tokens=24)
    windows = scorer._windows(DOCUMENT, CLAIMS[0])
    assert len(windows) > 1
    per_window = head.predict(scorer.states(windows, [CLAIMS[0]] * len(windows)))
    assert scorer.score([DOCUMENT], [CLAIMS[0]])[0] == pytest.approx(per_window.max(), abs=1e-6)
    short = "Marie Curie was born in Warsaw."
    assert scorer.score([short], [CLAIMS[0]])[0] == pytest.approx(
        head.predict(scorer.states([short], [CLAIMS[0]]))[0], abs=1e-6)
    assert scorer.score([DOCUMENT, ""], ["", CLAIMS[0]])[0] == 1.0  # an empty claim asserts nothing


def test_a_head_for_another_model_or_layers_is_refused(tiny_lm):
    with pytest.raises(ValueError, match="not the one it was fitted on"):
        ProbeScorer(a_head(48), model=tiny_lm).score([DOCUMENT], [CLAIMS[0]])
    with pytest.raises(ValueError, match="layers must be"):
        ProbeStates(tiny_lm, layers=(-9,))


def test_a_head_round_trips_through_its_directory_and_a_changed_head_is_refused(tmp_path):
    head = a_head(8)
    digest = write_head(head, tmp_path)  # a manifest of the older format, as directories built before the schema hold
    old = {"format": "syncheck-probe/1", "head_sha256": digest}
    (tmp_path / MANIFEST).write_text(json.dumps(old), encoding="utf-8")
    back, _ = load_head(tmp_path)
    x = np.random.default_rng(1).normal(size=(5, 8))
    assert back.predict(x) == pytest.approx(head.predict(x)) and back.layers == head.layers
    (tmp_path / HEAD).write_text((tmp_path / HEAD).read_text().replace('"intercept": 0.3', '"intercept": 0.4'))
    with pytest.raises(OSError, match="sha256"):
        load_head(tmp_path)
    with pytest.raises(OSError, match="train --probe"):
        load_head(tmp_path / "missing")


def test_the_spec_builds_a_probe_on_a_loaded_model(tiny_lm, tmp_path):
    from syncheck.alignment import make_alignment_scorer

    write_head(a_head(64), tmp_path)
    scorer = make_alignment_scorer(f"probe:{tmp_path}", model=tiny_lm)
    assert isinstance(scorer, ProbeScorer) and 0 <= scorer.score([DOCUMENT], [CLAIMS[2]])[0] <= 1


def test_the_shipped_head_matches_its_manifest():
    if not (shipped_probe_dir() / HEAD).exists():
        pytest.skip("no probe head shipped")
    head, manifest = load_head(shipped_probe_dir())
    assert manifest["base"] == head.model and manifest["layers"] == list(head.layers)
    assert manifest["data"]["artefact_check"]["passed"]
    assert (shipped_probe_dir() / HEAD).stat().st_size < 1_000_000


def test_the_training_command_fits_a_probe_and_resumes_from_its_cached_states(tmp_path, tiny_dir, monkeypatch):
    from syncheck.cli import main
    from syncheck.training import probe_verifier_build as probe_build

    labelled = tmp_path / "labelled.jsonl"
    rows = []  # the claim alone cannot tell: each year is right for one context and wrong for the other
    for i in range(24):
        born, said = (1860, 1870)[i % 2], (1860, 1870)[(i // 2) % 2]
        rows.append({"id": f"r{i}", "context": DOCUMENT.replace("1867", str(born)) + f" Note {i}.",
                     "question": "When was she born?", "response": f"She was born in {said}.",
                     "label": int(born == said)})
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "probe"
    args = ["verifier", "train", str(out), "--probe", str(tiny_dir), "--dtype", "float32", "--labelled",
            str(labelled), "--layers", "-1,-2", "--batch-size", "4", "--dev-share", "0.25", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    head, manifest = load_head(out)
    assert manifest["layers"] == [-1, -2] and manifest["data"]["dev"]["dev_pairs"] > 0
    assert manifest["kind"] == "probe-verifier" and manifest["weights"] == HEAD and list(manifest["files"]) == [HEAD]
    assert "--probe" in manifest["training"]["command"] and str(tmp_path) not in json.dumps(manifest)
    scores = ProbeScorer(out).score([DOCUMENT], ["She was born in Warsaw."])
    assert 0 <= scores[0] <= 1

    def no_forward(*_a, **_k):
        raise AssertionError("the states were cached")

    monkeypatch.setattr(probe_build.ProbeStates, "states", no_forward)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "reusing" in again.output, again.output
    assert weights_sha256(json.loads((out / MANIFEST).read_text())) == weights_sha256(manifest)
    shown = CliRunner().invoke(main, ["verifier", "info", str(out)])
    assert shown.exit_code == 0 and json.loads(shown.output)["format"] == "syncheck-model/1"


def test_syncheck_check_reads_a_probe_in_its_head_s_dtype_unless_dtype_is_given(tmp_path, monkeypatch):
    from syncheck.cli import main
    from syncheck.model import models

    head = a_head(64)
    write_head(ProbeHead(head.model, "bfloat16", head.layers, head.mean, head.scale, head.coef, head.intercept),
                tmp_path)
    asked = []

    def no_load(name, *args, dtype=None, **kwargs):
        asked.append(str(dtype))
        raise OSError("not loaded here")

    monkeypatch.setattr(models, "load_model", no_load)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "context": DOCUMENT, "question": "Where?", "response": "Warsaw"}) + "\n")
    for extra in ([], ["--dtype", "float32"]):
        CliRunner().invoke(main, ["check", str(rows), "--nli", f"probe:{tmp_path}", *extra])
    assert asked == ["bfloat16", "float32"]


def test_the_states_store_is_keyed_by_pair_text_so_a_new_recipe_computes_only_what_it_adds(tmp_path, tiny_dir):
    from syncheck.model.models import load_model
    from syncheck.training.pairs import VerifierPair
    from syncheck.training.probe_verifier_build import cached_states

    reader = ProbeStates(load_model(str(tiny_dir), dtype="float32"), layers=(-1,), progress=False)
    calls = []
    real = reader.states

    def counted(premises, claims, batch_size=8):
        calls.append(len(claims))
        return real(premises, claims, batch_size)

    reader.states = counted
    key = {"model": "tiny", "dtype": "float32", "layers": [-1], "max_premise_tokens": 64}
    first = [VerifierPair(DOCUMENT, f"Claim {i}.", i % 2, "g", "k") for i in range(5)]
    x = cached_states(reader, first, tmp_path, key, progress=False)
    more = [VerifierPair(DOCUMENT, "Claim 0.", 0, "g", "k"), VerifierPair(DOCUMENT, "A new claim.", 1, "g", "k")]
    y = cached_states(reader, first[2:] + more, tmp_path, key, progress=False)
    assert calls == [5, 1]  # the label does not key the states; only the new claim runs
    np.testing.assert_array_equal(y[:3], x[2:]) and np.testing.assert_array_equal(y[3], x[0])
    with pytest.raises(FileExistsError, match="another model"):
        cached_states(reader, first, tmp_path, {**key, "layers": [-2]}, progress=False)


def test_fod_s_support_reads_the_decoder_s_own_model_when_the_head_was_fitted_on_it(tiny_lm, tmp_path):
    from fod.support import build_support

    write_head(a_head(64), tmp_path)  # fitted on "tiny-llama" in float32: the decoder's model
    support = build_support(f"probe:{tmp_path}", tiny_lm)
    assert isinstance(support, ProbeScorer) and support.model is tiny_lm.model


def test_a_probe_head_ships_for_the_quality_preset_s_model():
    from syncheck.cli.common import PRESETS, QUALITY_CHECK_SUPPORT

    head, manifest = load_head(shipped_probe_dir())  # checks the head against its manifest's hash
    assert "probe" in QUALITY_CHECK_SUPPORT.split("+") and head.model == PRESETS["quality"]["model"]
    assert head.dtype == "bfloat16" and weights_sha256(manifest).startswith("bf197a3f948b")  # the head the rule read


def test_a_mean_of_a_judge_and_a_probe_on_one_model_loads_it_once(tiny_lm, tmp_path):
    from syncheck.checking.provenance import make_support

    write_head(a_head(64), tmp_path)  # fitted on "tiny-llama" in float32
    calls = []

    def loader(model, tokenizer=None, *, device=None, dtype=None, **kwargs):
        calls.append((model, dtype))
        return tiny_lm

    support = make_support(f"llm-judge:tiny-llama+probe:{tmp_path}+verifier", loader=loader)
    judge, probe, _ = support.members
    assert len(calls) == 1 and calls[0][0] == "tiny-llama"
    assert judge.model is probe.scorer.model is tiny_lm.model
    assert 0 <= support.score([DOCUMENT], ["Paris"], questions=["Where did she move?"])[0] <= 1
