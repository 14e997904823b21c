"""Any model scored out of the box (portable default), `syncheck calibrate`, the registry and fingerprints.

Two families of tiny random models are built in the test (Llama and Qwen2); the CLI round trip runs on a tiny
Qwen2 saved with ``save_pretrained`` beside a real tokenizer (SmolLM2's, whose ChatML template Qwen shares).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from click.testing import CliRunner
from conftest import CHAT_TEMPLATE, make_model, make_tokenizer

from syncheck.aggregators import resolve as resolve_mod
from syncheck.calibration.labels import LabelError, parse_labelled, read_labelled, sentence_labels_from_spans
from syncheck.calibration.registry import (
    calibrations_for_name,
    find_calibration,
    list_calibrations,
    register_calibration,
)
from syncheck.model.fingerprint import model_fingerprint
from syncheck.model.models import load_model
from syncheck.scorer import Scorer

CONTEXT = "The tower is 330 m tall. It opened in 1889."
FACTS = [("The tower is 330 m tall.", "It opened in 1889."), ("Prices rose 3.5% in 2023.", "Wages rose 2%."),
         ("Dr. Smith moved in 1999.", "She earned $3.5 million."), ("The cafe sells crepes.", "Each costs 4.50.")]


def make_qwen2(vocab_size: int, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, pad_token_id=0,
                      eos_token_id=1, bos_token_id=2)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return model


FAMILIES = {"llama": make_model, "qwen2": make_qwen2}


def labelled_rows(n: int = 24) -> list[dict]:
    """RAGTruth-format records: every third answer ends with a contradicted sentence, marked as a span."""
    rows = []
    for i in range(n):
        a, b = FACTS[i % 4]
        bad = i % 3 == 0
        resp = a + (" It opened in 1999." if bad else " " + b)
        spans = [{"start": len(a) + 1, "end": len(resp), "label_type": "Evident Conflict"}] if bad else []
        rows.append({"id": f"r{i}", "source_id": f"s{i % 8}", "task_type": "QA", "question": "Tell me.",
                     "context": a + " " + b, "response": resp, "labels": spans})
    return rows


@pytest.fixture(autouse=True)
def _fresh_warnings():
    resolve_mod._WARNED.clear()
    yield
    resolve_mod._WARNED.clear()


# ------------------------------------------------------------------ fingerprints and the registry
def test_fingerprint_ignores_dtype_and_name_but_not_weights(tiny_tokenizer):
    model = make_qwen2(len(tiny_tokenizer))
    fp = model_fingerprint(model)
    assert len(fp) == 16
    assert model_fingerprint(make_qwen2(len(tiny_tokenizer)).to(torch.bfloat16)) == fp
    other = make_qwen2(len(tiny_tokenizer))
    other.config._name_or_path = "/somewhere/else"
    assert model_fingerprint(other) == fp
    with torch.no_grad():
        other.lm_head.weight[0, 0] += 1.0
    assert model_fingerprint(other) != fp
    assert model_fingerprint(make_model(len(tiny_tokenizer))) != fp  # another family


def test_registry_finds_the_newest_existing_calibration(tmp_path):
    assert list_calibrations() == [] and find_calibration("abc") is None
    old, new = tmp_path / "old", tmp_path / "new"
    for d in (old, new):
        d.mkdir()
        (d / "meta.json").write_text("{}", encoding="utf-8")
    register_calibration("m", "abc", old)
    register_calibration("m", "abc", new)
    assert find_calibration("abc") == new.resolve()
    (new / "meta.json").unlink()
    assert find_calibration("abc") == old.resolve()
    assert [e["exists"] for e in calibrations_for_name("m")] == [True, False]


# ------------------------------------------------------------------ labelled records
def test_ragtruth_spans_and_syncheck_labels_become_sentence_labels(tmp_path):
    from features.sentences import split_sentences

    row = labelled_rows(1)[0]
    rec = parse_labelled(row)
    sentences = split_sentences(row["response"])
    assert rec.group == "s0" and rec.labels_for(sentences) == [1, 0]
    assert sentence_labels_from_spans(sentences, [(0, 3)]) == [0, 1]
    summary = parse_labelled({**row, "task_type": "Summary", "question": ""})
    assert summary.record.question.startswith("Summarize")
    mine = parse_labelled({"id": 1, "context": "c", "response": "It is tall. It is old.", "sentence_labels": [1, 0]})
    assert mine.labels_for(split_sentences("It is tall. It is old.")) == [1, 0]
    with pytest.raises(LabelError, match="one per sentence"):
        mine.labels_for(split_sentences("A."))
    with pytest.raises(LabelError, match="must be 1 \\(faithful\\) or 0 \\(unfaithful\\)"):
        parse_labelled({"id": 1, "context": "c", "response": "A.", "label": 2})
    with pytest.raises(LabelError, match="no labels"):
        parse_labelled({"id": 1, "context": "c", "response": "A."})
    path = tmp_path / "lab.jsonl"
    path.write_text(json.dumps(row) + "\n{oops\n" + json.dumps({"id": 2, "context": "c", "response": "A."}) + "\n")
    records, errors = read_labelled(path)
    assert len(records) == 1 and len(errors) == 2 and "line 2" in errors[0]


# ------------------------------------------------------------------ any family scores out of the box
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_any_family_gets_the_portable_default_with_one_warning(family, tiny_tokenizer):
    lm = load_model(FAMILIES[family](len(tiny_tokenizer)), tiny_tokenizer, name=f"tiny-{family}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scorer = Scorer(lm)
        Scorer(lm)
    portable = [w for w in caught if "portable default" in str(w.message)]
    assert len(portable) == 1 and "syncheck calibrate --model tiny-" in str(portable[0].message)
    assert scorer.aggregator_source == "portable"
    result = scorer.score(context=CONTEXT, response="It is 330 m tall. It opened in 1999.", question="How tall?")
    assert result.error is None and 0.0 <= result.response_score <= 1.0
    assert all(s.score is not None for s in result.sentences)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_live_features_equal_offline_in_every_family(family, tiny_tokenizer):
    from test_monitor import assert_same_features

    from syncheck.live.monitor import Monitor
    from syncheck.model.passes import response_ids_and_offsets

    lm = load_model(FAMILIES[family](len(tiny_tokenizer)), tiny_tokenizer, name=f"tiny-{family}")
    scorer = Scorer(lm, vectors=True, aggregator=None)
    response = "It is 330 m tall. It opened in 1889 [1].\n* Dr. Smith moved."
    ids, _ = response_ids_and_offsets(lm.tokenizer, response)
    live = Monitor(scorer).generate(question="How tall?", context=CONTEXT, forced_ids=ids)
    assert live.text == response
    assert_same_features(
        scorer.score(context=CONTEXT, response=response, question="How tall?").sentences, live.sentences
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fod_runs_on_any_family(family, tiny_tokenizer):
    from fod.generator import FODGenerator

    lm = load_model(FAMILIES[family](len(tiny_tokenizer)), tiny_tokenizer, name=f"tiny-{family}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fod = FODGenerator(lm, checker=None, max_sentence_tokens=12)
    out = fod.generate(question="How tall?", context=CONTEXT, num_samples=2, num_beams=2, max_sentences=2, tau1=1.0,
                       decoding={"max_new_tokens": 24, "do_sample": True, "top_p": 0.95})
    assert out.trace["tau1"] == 1.0 and out.trace["thresholds_from"] == "tau1 given, tau2 aggregator"
    assert out.trace["backtrack"] is not None  # tau1 = 1.0: the first scored sentence is backtracked


def test_bos_comes_from_the_template_or_the_tokenizer_never_twice():
    from tokenizers import processors

    from syncheck.model.prompts import build_prompt, prompt_ids

    tok = make_tokenizer(None)
    bos = tok.bos_token_id
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", bos)])
    plain = prompt_ids(tok, build_prompt(tok, "Q?", "ctx"))
    assert plain[0] == bos and plain.count(bos) == 1  # the tokenizer's own BOS on a plain prompt
    tok.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    templated = prompt_ids(tok, build_prompt(tok, "Q?", "ctx"))
    assert templated[0] == bos and templated.count(bos) == 1  # the template's BOS, not a second one
    tok.chat_template = CHAT_TEMPLATE
    assert bos not in prompt_ids(tok, build_prompt(tok, "Q?", "ctx"))  # a template without BOS (Qwen's) gets none


# ------------------------------------------------------------------ calibrate
def test_calibrate_registers_an_aggregator_that_scorer_then_uses(tiny_tokenizer, tmp_path):
    from syncheck.calibration.calibrate import calibrate

    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled_rows()), encoding="utf-8")
    lm = load_model(make_qwen2(len(tiny_tokenizer)), tiny_tokenizer, name="tiny-qwen2")
    result = calibrate(lm, path, output=tmp_path / "cal", kind="lr", progress=False)
    assert result.sentences == 48 and result.faithful == 40 and result.registered
    names = {r["name"] for r in result.heldout}
    assert {"sentence length (shorter = faithful)", "word overlap with the context"} <= names
    meta = json.loads((tmp_path / "cal" / "meta.json").read_text())
    assert meta["scorer"]["model"] == "tiny-qwen2" and meta["scorer"]["fingerprint"] == lm.fingerprint
    assert meta["probes"] and meta["decoding"]["tau1"] > 0
    # the response verdict is fitted beside it and reported held out, next to the minimum of the sentence scores
    verdict = json.loads((tmp_path / "cal" / "response.json").read_text())
    assert verdict["training"]["responses"] == 24 and verdict["params"]["tau"] == meta["decoding"]["tau1"]
    response_rows = {r["name"] for r in result.heldout if r.get("level") == "response"}
    assert response_rows == {"learned verdict (held out)", "min of sentence scores",
                             "final: learned verdict (held out)", "final: min of sentence scores",
                             "answer length in words (trivial; fewer = faithful)",
                             "sentences (trivial; fewer = faithful)",
                             "word overlap with the context (trivial; sentence mean)"}
    assert "response: learned verdict (held out)" in result.summary()
    # and the final (whole-answer) model with its own verdict, read by a Scorer as the stacked default's is
    final_meta = json.loads((tmp_path / "cal" / "final" / "meta.json").read_text())
    assert (
        "rel:mean_prob" in final_meta["feature_names"] and "unsupported_specific_count" in final_meta["feature_names"]
    )
    assert "hidden_probe" in final_meta["feature_names"] and (tmp_path / "cal" / "final" / "response.json").is_file()
    assert "final: calibrated final score" in names
    # the same weights under another name: found by fingerprint, no warning
    again = load_model(make_qwen2(len(tiny_tokenizer)), tiny_tokenizer, name="renamed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scorer = Scorer(again)
    assert scorer.aggregator_source == "calibrated" and scorer.featurizer.probes and scorer.final_model is not None
    scored = scorer.score(context=labelled_rows()[0]["context"], response=labelled_rows()[0]["response"])
    assert all(s.final_score is not None for s in scored.sentences) and scored.response_score is not None
    # changed weights under the calibrated name: not used, and the warning says why and what to run
    changed = make_qwen2(len(tiny_tokenizer), seed=1)
    with pytest.warns(UserWarning, match="fingerprint .* not used. Calibrate again"):
        stale = Scorer(load_model(changed, tiny_tokenizer, name="tiny-qwen2"))
    assert stale.aggregator_source == "portable"
    # a run cut mid-write resumes from its complete rows, and rows of another setup are scored again
    scored = tmp_path / "cal" / "scored.jsonl"
    lines = scored.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 24
    scored.write_text("".join(lines[:10]) + lines[10][:25], encoding="utf-8")
    again = calibrate(lm, path, output=tmp_path / "cal", kind="lr", progress=False, register=False)
    assert again.sentences == 48 and scored.read_text(encoding="utf-8").splitlines(keepends=True) == lines
    other = calibrate(lm, path, output=tmp_path / "cal", kind="lr", alignment="embedding",
                      progress=False, register=False)
    assert (
        other.sentences == 48 and json.loads((tmp_path / "cal" / "scored.json").read_text())["alignment"] == "embedding"
    )


def test_calibrate_needs_both_labels(tiny_lm, tmp_path):
    from syncheck.calibration.calibrate import calibrate

    rows = [{**r, "labels": []} for r in labelled_rows(8)]
    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match="faithful and unfaithful"):
        calibrate(tiny_lm, path, output=tmp_path / "cal", progress=False)


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    """A tiny random Qwen2 saved with save_pretrained beside SmolLM2's real tokenizer (ChatML template)."""
    from transformers import AutoTokenizer

    from syncheck.model.models import _resolve

    source, _ = _resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(source)
    path = tmp_path_factory.mktemp("tiny-qwen2")
    make_qwen2(len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.slow
def test_cli_scores_calibrates_and_then_uses_the_calibration(qwen2_dir, tmp_path, monkeypatch):
    from fod.cli import main as fod_main
    from syncheck.cli import main

    monkeypatch.setenv("SYNCHECK_CACHE", str(tmp_path / "cache"))  # the registry only: the model is a directory
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "context": CONTEXT, "question": "How tall?",
                               "response": "It is 330 m tall. It opened in 1999."}) + "\n", encoding="utf-8")
    runner = CliRunner()
    first = runner.invoke(main, ["score", str(inp), "-o", str(tmp_path / "p.jsonl"), "--model", str(qwen2_dir)])
    assert first.exit_code == 0, first.output
    portable = json.loads((tmp_path / "p.jsonl").read_text())
    assert portable["error"] is None and portable["response_score"] is not None

    ctx = tmp_path / "ctx.txt"
    ctx.write_text(CONTEXT, encoding="utf-8")
    fod = runner.invoke(fod_main, ["generate", "--context", str(ctx), "--question", "How tall?", "--model",
                                   str(qwen2_dir), "--method", "fod", "--no-check", "--max-new-tokens", "16", "--json"])
    assert fod.exit_code == 0, fod.output
    assert json.loads(fod.stdout.strip().splitlines()[-1])["method"] == "fod"

    data = tmp_path / "lab.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in labelled_rows()), encoding="utf-8")
    cal = runner.invoke(
        main, ["calibrate", "--model", str(qwen2_dir), "--data", str(data), "-o", str(tmp_path / "cal")]
    )
    assert cal.exit_code == 0, cal.output
    assert "held-out sentence ROC AUC" in cal.output and "word overlap" in cal.output
    meta = json.loads((tmp_path / "cal" / "meta.json").read_text())
    assert meta["scorer"]["model"] == qwen2_dir.name and len(meta["scorer"]["fingerprint"]) == 16
    listed = runner.invoke(main, ["calibrations"])
    assert meta["scorer"]["fingerprint"] in listed.output

    again = runner.invoke(main, ["score", str(inp), "-o", str(tmp_path / "c.jsonl"), "--model", str(qwen2_dir)])
    assert again.exit_code == 0, again.output
    calibrated = json.loads((tmp_path / "c.jsonl").read_text())
    direct = Scorer(str(qwen2_dir), aggregator=str(tmp_path / "cal"))
    expected = direct.score(
        context=CONTEXT, response="It is 330 m tall. It opened in 1999.", question="How tall?"
    ).response_score
    assert calibrated["response_score"] == pytest.approx(expected, abs=1e-6)
    assert calibrated["response_score"] != pytest.approx(portable["response_score"], abs=1e-9)


@pytest.mark.slow
def test_smollm2_loaded_by_another_name_keeps_its_shipped_default():
    from syncheck.model.models import _resolve

    source, _ = _resolve("smollm2-135m")  # the converted directory: another name, the same weights
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scorer = Scorer(source)
    assert scorer.aggregator_source == "default" and scorer.featurizer.probes


def test_an_aggregator_shipped_for_another_model_is_found_by_name(tiny_tokenizer, tmp_path, monkeypatch):
    from syncheck.calibration.calibrate import calibrate

    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled_rows()), encoding="utf-8")
    # weights no other test registers a calibration for
    lm = load_model(make_qwen2(len(tiny_tokenizer), seed=2), tiny_tokenizer, name="tiny-qwen2-shipped")
    calibrate(lm, path, output=tmp_path / "shipped", kind="lr", progress=False, register=False)
    monkeypatch.setattr(resolve_mod, "shipped_aggregator_dirs",
                        lambda: [resolve_mod.default_aggregator_dir(), tmp_path / "shipped"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not the portable fallback's warning
        scorer = Scorer(lm)
    assert scorer.aggregator_source == "default" and scorer.featurizer.probes
    assert (
        scorer.score(question="Q?", context="The bridge opened in 1932.", response="It opened in 1932.").response_score
        is not None
    )
    # another model is not given it
    other = load_model(make_qwen2(len(tiny_tokenizer), seed=3), tiny_tokenizer, name="other")
    with pytest.warns(UserWarning, match="portable"):
        assert Scorer(other).aggregator_source == "portable"


def test_calibrate_pools_several_files_and_checks_the_verdict_against_the_baselines(tiny_tokenizer, tmp_path):
    from syncheck.calibration.calibrate import calibrate

    rows = labelled_rows()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows[:12]), encoding="utf-8")
    second.write_text("".join(json.dumps(r) + "\n" for r in rows[12:]) + "{not json\n", encoding="utf-8")
    lm = load_model(make_qwen2(len(tiny_tokenizer)), tiny_tokenizer, name="tiny-qwen2")
    result = calibrate(lm, [first, second], output=tmp_path / "cal", kind="lr", progress=False, register=False)
    assert result.records == 24 and result.sentences == 48
    assert len(result.skipped) == 1 and result.skipped[0].startswith("b.jsonl: line 13: not valid JSON")
    meta = json.loads((tmp_path / "cal" / "meta.json").read_text())
    assert meta["training"]["data"] == "a.jsonl,b.jsonl"  # file names only: no machine paths in meta.json
    margins = result.verdict_margins()
    assert [m["task"] for m in margins] == ["all"]
    assert margins[0]["baseline"] in {"answer length in words", "sentences", "word overlap with the context"}
    assert "response verdict against the best trivial baseline" in result.summary()


def test_pooled_files_must_not_share_record_ids(tmp_path):
    from syncheck.calibration.labels import read_labelled_files

    rows = labelled_rows(4)
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"4 record ids occur in more than one --data file: 'r0' \(a.jsonl and "
                                         r"b.jsonl\).*Give each record one id"):
        read_labelled_files([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    records, _ = read_labelled_files([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], limit=3)
    assert [r.record.id for r in records] == ["r0", "r1", "r2"]


def test_the_verdict_is_shipped_only_where_it_beats_the_best_trivial_baseline_by_the_margin():
    from syncheck.calibration.calibrate import VERDICT_MARGIN, verdict_margins

    def row(task, name, auc):
        return {"task": task, "level": "response", "name": name, "auroc": auc, "lo": 0.0, "hi": 1.0}

    heldout = [row("QA", "learned verdict (held out)", 0.70), row("QA", "final: learned verdict (held out)", 0.82),
               row("QA", "answer length in words (trivial; fewer = faithful)", 0.76),
               row("QA", "word overlap with the context (trivial; sentence mean)", 0.60),
               row("Summary", "learned verdict (held out)", 0.66),
               row("Summary", "word overlap with the context (trivial; sentence mean)", 0.675),
               {"task": "QA", "name": "calibrated (this model's recipe + probe)", "auroc": 0.9, "lo": 0, "hi": 1}]
    qa, summary = verdict_margins(heldout)
    assert qa == {"task": "QA", "verdict": 0.82, "baseline": "answer length in words", "baseline_auroc": 0.76,
                  "margin": 0.06, "ok": True}  # the final model's verdict is the one the scorer uses
    assert summary["baseline"] == "word overlap with the context" and not summary["ok"]
    assert VERDICT_MARGIN == 0.05
