"""Smoke runs of the benchmark scripts (the full runs are not tests)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_data


@pytest.mark.slow
def test_offline_throughput_benchmark_runs(capsys):
    from benchmarks.offline_throughput import main

    summary = main(["--limit", "2", "--rounds", "1", "--batch-size", "2", "--alignment", "verifier"])
    assert set(summary) == {"one pass", "two passes", "full", "full, align_score by verifier"}
    assert all(v["responses_per_s"] > 0 for v in summary.values())
    assert summary["full, align_score by verifier"]["vs_full"] > 0
    out = capsys.readouterr().out
    assert "| two passes |" in out
    assert "| verifier |" in out  # its cost per sentence over the lexical default


@pytest.mark.slow
def test_monitor_overhead_benchmark_runs(capsys):
    from benchmarks.monitor_overhead import main

    summary = main(["--tokens", "6", "--rounds", "1", "--prompts", "1", "--fod", "--alignment", "verifier"])
    monitor = summary["monitor (deferred KL)"]
    assert monitor["ratio_vs_generate"] == pytest.approx(monitor["seconds"] / summary["generate"]["seconds"])
    assert summary["fod_forced_backtrack_vs_greedy"] > 0 and 0 < summary["tau1"] <= summary["tau2"] <= 1
    assert summary["monitor (deferred KL)"]["seconds"] > 0
    assert summary["monitors_agree"] == 1.0  # float32 on CPU: every monitor picks generate's tokens
    out = capsys.readouterr().out
    assert "| monitor (lockstep KL) |" in out
    assert "| monitor (deferred KL), prompt prefix cached |" in out  # the warm run is its own row
    assert "| monitor (deferred KL, flushed between steps) |" in out  # on CPU the default flushes on a worker
    assert "tokens after the sentence's end" in out  # and how late each design hands a sentence over
    assert summary["monitor (deferred KL), align_score by verifier"]["vs_lexical_monitor"] > 0
    assert summary["monitor (deferred KL, flushed between steps), align_score by verifier"]["vs_lexical_monitor"] > 0


def test_monitor_overhead_times_every_run_with_a_cold_prompt_prefix_cache(monkeypatch):
    """A timed run must not skip its prefill because an earlier round left the same prompt in the prefix cache."""
    from benchmarks import monitor_overhead
    from syncheck.live.prefix_cache import PromptPrefixCache

    engine = type("Engine", (), {"prefix_caches": [PromptPrefixCache(), PromptPrefixCache()]})()
    for cache in engine.prefix_caches:  # with-context and without-context prompts
        cache._ids, cache._cache = [1, 2, 3], object()
    monkeypatch.setattr(monitor_overhead, "_ENGINES", [engine])
    seen = []
    monitor_overhead._timed(lambda: seen.append([c._cache for c in engine.prefix_caches]), cold=False)
    monitor_overhead._timed(lambda: seen.append([c._cache for c in engine.prefix_caches]))
    assert None not in seen[0]  # the "prompt prefix cached" run keeps them
    assert seen[1] == [None, None]  # every other run finds them cleared


@pytest.mark.slow
def test_speed_benchmarks_run_on_a_random_model_of_a_given_shape(capsys):
    """The GPU figures' path (``--shape llama3-8b --device cuda --dtype bfloat16``), with the tiny shape on CPU."""
    from benchmarks.monitor_overhead import main as overhead
    from benchmarks.offline_throughput import main as throughput
    from benchmarks.random_shape import SHAPES, random_model

    lm = random_model("tiny", dtype="bfloat16")
    assert lm.model.dtype.is_floating_point and str(lm.model.dtype) == "torch.bfloat16"
    assert lm.num_layers == SHAPES["tiny"]["num_hidden_layers"] and lm.model.config.vocab_size == len(lm.tokenizer)
    summary = overhead(
        ["--shape", "tiny", "--tokens", "6", "--rounds", "1", "--prompts", "1", "--fod", "--warmup-rounds", "0"]
    )
    assert summary["fod_vs_greedy"] > 0 and summary["monitor (deferred KL)"]["seconds"] > 0
    # beside each time, the generator's forwards: generate's are one per new token (its prefill gives the first)
    assert summary["generate"]["forwards"] == summary["generate"]["answer_tokens"] == [6]
    for name in ("monitor (deferred KL)", "monitor (lockstep KL)", "greedy (FOD interface)", "FOD S=6 K=2"):
        assert summary[name]["forwards_per_run"] > 0 and summary[name]["forwards_per_token"] > 0, name
    assert summary["monitor (lockstep KL)"]["forwards_per_run"] > summary["monitor (deferred KL)"]["forwards_per_run"]
    assert summary["fod_forwards_vs_greedy"] > 0 and summary["fod_forced_backtrack_forwards_vs_greedy"] > 0
    assert "| forwards per run | forwards per answer token |" in capsys.readouterr().out
    summary = throughput(["--shape", "tiny", "--limit", "2", "--rounds", "1", "--batch-size", "2"])
    assert summary["full"]["responses_per_s"] > 0
    assert "model=random-tiny" in capsys.readouterr().out


@pytest.mark.slow
def test_a_saved_random_model_loads_by_path_with_the_tokenizer_it_was_saved_with(tmp_path, tiny_tokenizer):
    """The GPU serving figure's path: ``python -m benchmarks.random_shape SHAPE DIR`` then ``--model DIR``."""
    import torch

    from benchmarks.random_shape import main as save
    from benchmarks.random_shape import random_model
    from syncheck.model.models import load_model

    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    save(["tiny", str(tmp_path / "model"), "--tokenizer", str(tmp_path / "tok")])
    loaded = load_model(str(tmp_path / "model"))
    fresh = random_model("tiny", tokenizer=str(tmp_path / "tok"))
    assert loaded.model.config.vocab_size == fresh.model.config.vocab_size == len(tiny_tokenizer)
    ids = torch.tensor([tiny_tokenizer.encode("The tower is tall.")])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(input_ids=ids).logits, fresh.model(input_ids=ids).logits)


def test_fod_faithfulness_benchmark_runs(capsys):

    from benchmarks.fod_faithfulness import main

    data = shared_data("halueval") / "halueval"
    summary = main(["--data-dir", str(data), "--limit", "2", "--methods", "greedy,fod,fod-paper", "--judge", "lexical",
                    "--max-new-tokens", "12", "--max-sentences", "1", "--num-samples", "2", "--num-beams", "1"])
    assert ("original", "greedy") in summary and ("original", "fod") in summary and ("original", "fod-paper") in summary
    assert "| original | fod |" in capsys.readouterr().out


@pytest.mark.slow
def test_dtype_drift_benchmark_runs(capsys):

    from benchmarks.dtype_drift import main

    data = shared_data("ragtruth/dev.jsonl") / "ragtruth" / "dev.jsonl"
    summary = main(["--limit", "1", "--data", str(data)])
    assert set(summary["seconds_per_response"]) == {"float32", "bfloat16"}
    assert summary["max_abs_diff"]["align_score"] == 0.0 and "mean_contrastive_kl" in summary["max_abs_diff"]
    assert "| bfloat16 |" in capsys.readouterr().out


def test_serve_load_benchmark_runs(tiny_dir, capsys):
    pytest.importorskip("openai")
    pytest.importorskip("uvicorn")
    from benchmarks.serve_load import main

    summary = main(["--model", str(tiny_dir), "--tokens", "6", "--requests", "2", "--concurrency", "1,2",
                    "--rounds", "2", "--with-fod"])
    rates = summary.pop("decode step")
    wide = summary.pop("forward of 16 tokens")
    beside = summary.pop("server, concurrency 2, beside one FOD request")
    assert beside["ttft_vs_alone"] > 0 and beside["tokens"] == 12
    assert set(summary) == {"server, concurrency 1", "server, concurrency 2", "Monitor, sequential (baseline)"}
    assert all(r["tokens"] == 12 and r["ttft_median_s"] <= r["latency_median_s"] and r["rounds"] == 2
               for r in summary.values())
    assert all(r["tokens_per_s_vs_baseline_min"] <= r["tokens_per_s_vs_baseline"] <= r["tokens_per_s_vs_baseline_max"]
               for r in summary.values())
    assert set(rates) == set(wide) == {"batch_1_tokens_per_s", "batch_2_tokens_per_s"}
    assert min(rates.values()) > 0 and min(wide.values()) > 0
    baseline = summary["Monitor, sequential (baseline)"]
    assert baseline["tokens_per_s_vs_baseline"] == baseline["tokens_per_s_vs_baseline_max"] == 1.0
    out = capsys.readouterr().out
    assert "| server, concurrency 2 |" in out and "machine: " in out
    assert "prompt prefix caches over the run" in out and "without-context prompts" in out


def test_serve_load_interleaves_document_sets_and_counts_affinity_per_set():
    from benchmarks.serve_load import DOCUMENT_SETS, SequentialMonitor, affinity, round_lines, workload

    one = workload(5)
    assert [set_ for _, _, set_ in one] == [0] * 5 and len({q for q, _, _ in one}) == 5
    three = workload(7, doc_sets=3)
    assert [set_ for _, _, set_ in three] == [0, 1, 2, 0, 1, 2, 0]
    assert all(docs is DOCUMENT_SETS[set_][0] and q in DOCUMENT_SETS[set_][1] for q, docs, set_ in three)
    assert three[3][0] == DOCUMENT_SETS[0][1][1]  # each set asks its own questions in turn
    with pytest.raises(ValueError, match="--doc-sets"):
        workload(4, doc_sets=0)
    n = len(DOCUMENT_SETS)
    more = workload(2 * (n + 1), doc_sets=n + 1)  # beyond the built-in sets: a numbered copy of set 0
    copy = more[n]
    assert copy[2] == n and copy[1] != DOCUMENT_SETS[0][0] and copy[1][1:] == DOCUMENT_SETS[0][0][1:]
    assert copy[0] in DOCUMENT_SETS[0][1] and len({tuple(docs) for _, docs, _ in more}) == n + 1
    # the baseline answers the same (question, documents) pairs in the same order as the server's levels
    asked = []

    class Recorder:
        def steps(self, question, context, decoding):
            asked.append((question, context))
            return iter(())

    baseline = SequentialMonitor.__new__(SequentialMonitor)
    baseline.monitor = Recorder()
    baseline.run(more, tokens=4)
    assert asked == [(q, docs) for q, docs, _ in more]
    # set 0 stays on replica a (3 of 3), set 1 starts on b and strays once (1 of 2): 4 of 5 pooled, 2 first replicas
    rows = [{"replica": r, "doc_set": d} for r, d in [("a", 0), ("b", 1), ("a", 0), ("a", 1), ("a", 0)]]
    assert affinity(rows) == {"same_replica_share": 0.8, "first_replicas": 2.0}
    assert affinity([{"replica": None, "doc_set": 0}]) == {}
    line = round_lines(2, {"base": {"tokens_per_s": 10.0, "ttft_median_s": 0.5, "latency_median_s": 1.0,
                                    "latency_p95_s": 2.0}}, "base")
    assert line.startswith("round 2: base: 10.0 tokens/s (1.00x baseline)") and "p50 / p95 1.00 / 2.00" in line


def test_serve_load_ratios_are_taken_within_each_round():
    from benchmarks.serve_load import combine_rounds

    def row(rate):
        return {"tokens_per_s": rate, "ttft_median_s": rate / 10}

    # the machine halves its speed in round 2: within-round ratios stay 2.0, a ratio of medians would not
    rounds = [{"base": row(10.0), "server": row(20.0)}, {"base": row(5.0), "server": row(10.0)},
              {"base": row(10.0), "server": row(20.0)}]
    merged = combine_rounds(rounds, "base")
    assert merged["server"]["tokens_per_s_vs_baseline"] == 2.0
    assert (merged["server"]["tokens_per_s_vs_baseline_min"], merged["server"]["tokens_per_s_vs_baseline_max"]) == (
        2.0,
        2.0,
    )
    assert merged["server"]["tokens_per_s"] == 20.0 and merged["base"]["rounds"] == 3


def test_serve_costs_benchmark_runs(tiny_dir, capsys):
    from benchmarks.serve_costs import main

    out = main(["--model", str(tiny_dir), "--tokens", "4", "--rounds", "1", "--streams", "2"])
    assert len(out["threads"]) == 3 and all(v > 0 for v in out["threads"].values())
    packed, padded = out["pooled"], out["pooled padded"]
    assert packed["rounds"] == "packed" and 0 < packed["packed forwards"] <= packed["total"]
    assert padded["tokens"] > 0 and 0 < padded["prefills"] + padded["batched decode steps"] <= padded["total"]
    assert packed["sequential"] > 0 and packed["tokens"] == padded["tokens"]
    assert "| worker thread |" in capsys.readouterr().out


def test_serve_profile_sorts_py_spy_stacks_by_thread_and_stage(tmp_path):
    from benchmarks.serve_profile import read_raw

    model = ("serve (syncheck/cli/serve.py:42);Scheduler.run (syncheck/serve/scheduler.py:148);"
             "DecodePool.step (syncheck/live/pool.py:58)")
    raw = tmp_path / "serve.raw"
    raw.write_text("\n".join([
        f"{model};LiveEngine.start_many (syncheck/live/engine.py:119);Module._call_impl "
        "(torch/nn/modules/module.py:1789) 30",
        f"{model};LiveEngine.step (syncheck/live/engine.py:170);Module._call_impl (torch/nn/modules/module.py:1789) 50",
        f"{model};DecodePool._step_packed (syncheck/live/pool.py:140);packed_forward (syncheck/model/packed.py:130);"
        "Module._call_impl (torch/nn/modules/module.py:1789) 20",
        f"{model};MonitorRun.advance (syncheck/live/monitor.py:272);LiveEngine.flush_kl (syncheck/live/engine.py:214);"
        "Module._call_impl (torch/nn/modules/module.py:1789) 10",
        f"{model};MonitorRun.advance (syncheck/live/monitor.py:272);SentenceFeaturizer.featurize "
        "(syncheck/featurize.py:156) 5",
        "_bootstrap (threading.py:1002);run (uvicorn/server.py:60);dumps (json/__init__.py:231) 3",
        "_bootstrap (threading.py:1002);run (asyncio/base_events.py:600) 2",
        "_bootstrap (threading.py:1002);run (asyncio/base_events.py:600);select (selectors.py:468) 5",
        "_bootstrap (threading.py:1002);Server.run (uvicorn/server.py:86);Runner.run (asyncio/runners.py:118) 2",
        "serve (syncheck/cli/serve.py:42);Scheduler.run (syncheck/serve/scheduler.py:128);wait (threading.py:327) 4",
        "_bootstrap (threading.py:1002);_worker (concurrent/futures/thread.py:81) 6",
        "a torn last line",
    ]))
    counts = read_raw(raw)
    assert counts == {("model thread", "prefill"): 30, ("model thread", "with-context forward (decode step)"): 50,
                      ("model thread", "packed forward (decode steps, flushes, prefills)"): 20,
                      ("model thread", "without-context flush"): 10, ("model thread", "sentence scoring"): 5,
                      ("HTTP thread", "SSE chunks: JSON and pydantic"): 3,
                      ("HTTP thread", "event loop, uvicorn, starlette"): 2,
                      ("HTTP thread", "waiting on sockets"): 7, ("model thread", "waiting for a request"): 4,
                      ("other thread", "idle or helper"): 6}


@pytest.mark.slow
def test_preset_cost_benchmark_runs(capsys):
    from benchmarks.preset_cost import main

    summary = main(["--presets", "default", "--limit", "1", "--tokens", "4", "--rounds", "1"])
    assert summary["default"]["offline_x"] == pytest.approx(1.0) and summary["default"]["live_tokens_per_s"] > 0
    assert "| default | smollm2-135m, float32 | default |" in capsys.readouterr().out
    # on an accelerator: the preset's shape with random weights, scored by the aggregator shipped for the model
    summary = main(["--presets", "default", "--limit", "1", "--tokens", "4", "--rounds", "1", "--random-weights"])
    assert summary["default"]["aggregator"] == "directory" and summary["default"]["live_tokens_per_s"] > 0
    assert "| default | smollm2-135m, random weights, float32 | directory |" in capsys.readouterr().out


@pytest.mark.slow
def test_judge_speed_benchmark_runs(capsys):
    from benchmarks.studies.judge_speed import main

    # float32: "auto" is bfloat16 on a CPU with native bfloat16, where sharing the prefix rounds differently (4e-2)
    summary = main(
        [
            "--judge", "smollm2-135m", "--dtype", "float32", "--ragtruth", "/nonexistent.jsonl", "--claims", "3",
            "--rounds", "1",
        ]
    )
    assert summary["claims"] >= 2 and summary["ratio"] > 0
    assert summary["max_diff"] < 1e-4  # sharing the prefix changes the cost, not the scores
    assert "| shared prefix |" in capsys.readouterr().out


@pytest.mark.slow
def test_packed_forward_benchmark_runs(capsys):
    from benchmarks.packed_forward import main

    out = main(["--shape", "tiny", "--rows", "2", "--cache", "8", "--flush-cache", "4", "--width", "3",
                "--flushes", "0,1", "--rounds", "2", "--repeats", "1"])
    assert set(out) == {"0 flushes", "1 flushes"}
    assert all(r["padded_s"] > 0 and r["packed_s"] > 0 and r["ratio_min"] <= r["ratio"] <= r["ratio_max"]
               for r in out.values())
    assert "| padded step + a forward per flush, ms |" in capsys.readouterr().out


def test_monitor_overhead_lockstep_and_forced_backtrack_on_the_mock_model():
    """The benchmark's own lockstep loop gives the monitor's answer and features; its forced backtrack repairs the
    first sentence once."""
    import decoder_cases as cases

    from benchmarks.monitor_overhead import CONTEXT, backtrack_at_first_sentence, lockstep_generate
    from fod.generator import FODGenerator
    from syncheck.live.monitor import Monitor

    scorer = cases.scorer()
    budget = {"max_new_tokens": 40}
    plain = Monitor(scorer, background_kl=False).generate(question="Q?", context=CONTEXT, decoding=budget)
    lock = lockstep_generate(Monitor(scorer, background_kl=False), "Q?", budget)
    assert lock.token_ids == plain.token_ids and lock.text == plain.text
    assert [s.text for s in lock.sentences] == [s.text for s in plain.sentences]
    for a, b in zip(lock.sentences, plain.sentences):
        assert a.features == pytest.approx(b.features, abs=1e-4) and a.score == b.score
    fod = FODGenerator(scorer, max_sentence_tokens=8, checker=None)
    with backtrack_at_first_sentence():
        res = fod.generate(question="Q?", context=CONTEXT, tau1=0.0, num_samples=6, num_beams=2, decode="greedy",
                           decoding=cases.sampled(), stop_degenerate=False)
    assert len(res.trace["backtracks"]) == 1 and res.trace["repairs"] == 1
    assert fod.generate(question="Q?", context=CONTEXT, tau1=0.0, decode="greedy",
                        decoding=cases.sampled(), stop_degenerate=False).trace["repairs"] == 0  # not flagged outside it


def test_monitor_overhead_counts_the_generator_forwards_of_every_timed_run(monkeypatch):
    """Every timed run counts its calls of the generator model, those of a worker thread's flushes too (the scripted
    model counts its calls itself): the lockstep monitor's extra pass per token shows, and so does a forced repair."""
    import decoder_cases as cases

    from benchmarks import monitor_overhead
    from fod.generator import FODGenerator
    from syncheck.live.monitor import Monitor

    scorer = cases.scorer()
    model = scorer.lm.model
    monkeypatch.setattr(monitor_overhead, "_ENGINES", [])
    monkeypatch.setattr(monitor_overhead, "_MODELS", [model, model])  # the same model named twice counts once
    budget = {"max_new_tokens": 40}
    deferred, lockstep = Monitor(scorer), Monitor(scorer, background_kl=False)
    assert deferred.background is not None  # on CPU its flushes run on a worker thread
    fod = FODGenerator(scorer, max_sentence_tokens=8, checker=None)

    def forced():
        with monitor_overhead.backtrack_at_first_sentence():
            return fod.generate(question="Q?", context=monitor_overhead.CONTEXT, tau1=0.0, num_samples=6,
                                num_beams=2, decode="greedy", decoding=cases.sampled(), stop_degenerate=False)

    runs = {"deferred": lambda: deferred.generate(question="Q?", context=monitor_overhead.CONTEXT, decoding=budget),
            "lockstep": lambda: monitor_overhead.lockstep_generate(lockstep, "Q?", budget), "forced repair": forced}
    counted = {}
    for name, fn in runs.items():
        before = len(model.calls)
        _, forwards, out = monitor_overhead._timed(fn)
        assert forwards == len(model.calls) - before > 0, name
        counted[name] = (forwards, monitor_overhead.answer_tokens(out, scorer.lm.tokenizer))
    assert counted["deferred"][1] == counted["lockstep"][1] > 0  # the same answer
    assert counted["lockstep"][0] > counted["deferred"][0]
    assert counted["forced repair"][1] > 0
    _, none, _ = monitor_overhead._timed(lambda: None)
    assert none == 0 and not model._forward_pre_hooks  # nothing left hooked after a run


def test_verifier_conflict_keeps_the_answer_a_score_rates_highest_per_question():
    from benchmarks.verifier_conflict import preferred_rates

    def answer(q, method, label, s):
        return {"id": q, "method": method, "label": label, "s": s}

    answers = [answer("q1", "fod", 1, 0.2), answer("q1", "greedy", 0, 0.9), answer("q2", "fod", 0, 0.5),
               answer("q2", "greedy", 1, 0.5), answer("q3", "fod", 1, 0.1)]  # q3 lacks greedy's answer: left out
    n, rates, kept = preferred_rates(answers, "s")
    assert n == 2 and rates == {"fod": 0.5, "greedy": 0.5}
    assert kept == 0.0  # q1 keeps greedy's wrong answer; q2 ties and keeps fod's (first by name), also wrong


@pytest.mark.slow
def test_verifier_conflict_benchmark_runs_on_a_stored_conflict_run(capsys):
    from benchmarks.verifier_conflict import main

    data = shared_data("halueval/qa.jsonl")
    main(["--runs", "benchmarks/runs/conflict_qwen_fresh2.1.jsonl.gz", "--support", "verifier",
          "--halueval", str(data / "halueval")])
    out = capsys.readouterr().out
    assert "| conflict_qwen_fresh2 |" in out and "keep the answer verifier rates highest" in out
    assert "| conflict_qwen_fresh2, bare answers |" in out and "| conflict_qwen_fresh2, sentence answers |" in out


def test_conflict_coherence_types_each_swap_and_splits_the_runs_by_it(tmp_path):
    from benchmarks.studies.conflict_coherence import main
    from syncheck.training.conflict_set import build_conflict_set

    data = shared_data("halueval/qa.jsonl") / "halueval"
    items = build_conflict_set(data, 7610, 120)
    absurd = {it.substitute for it in items[1::3]}

    def typer(passage, answer):  # every third substitute is typed as another kind of thing; one answer unknown
        return None if answer == items[2].original else ("place" if answer in absurd else "person")

    scores = tmp_path / "scores.jsonl"
    scores.write_text("".join(json.dumps({"id": it.id, "label": k % 2, "s": float(k % 3)}) + "\n"
                              for k, it in enumerate(items)))
    text = main(["--halueval", str(data), "--start", "7610", "--limit", "120", "--runs",
                 "benchmarks/runs/conflict_qwen_fresh2.1.jsonl.gz", "--scores", str(scores), "--columns", "s",
                 "--show", "2"], typer=typer)
    assert "(120 swaps): coherent" in text and "person -> place" in text
    assert "| swaps | questions | greedy | fod | fod − greedy |" in text and "| absurd |" in text
    assert "| swaps | answers (passage's answer) | s |" in text


def test_verifier_conflict_splits_bare_answers_from_sentences():
    from benchmarks.verifier_conflict import answer_form

    assert [answer_form(t) for t in ("Hallmark Cards", "The answer is 1913.", "He was replaced by Vincenzo Montella.")
            ] == ["bare", "bare", "sentence"]


def test_verifier_base_speed_times_training_and_scoring(capsys):
    from benchmarks.verifier_base_speed import main

    out = main(["--bases", "minilm", "--length", "16", "--batch-size", "2", "--steps", "1"])
    assert out["minilm"]["train_examples_per_s"] > 0 and out["minilm"]["score_examples_per_s"] > 0
    assert out["minilm"]["trainable_parameters"] > 2e7  # every parameter of MiniLM trains
    assert "| minilm | float32 | all |" in capsys.readouterr().out


def test_verifier_probe_reads_the_last_prompt_tokens_states(tiny_lm):
    from benchmarks.verifier_probe import ProbeUnit, fit_probe, probe_inputs, record_range

    units = [ProbeUnit(i // 2, "The tower was completed in 1889 in Paris.", f"Question: When?\nAnswer: {a}", a, lab)
             for i, (a, lab) in enumerate([("The answer is 1889.", 1), ("The answer is Paris.", 0)] * 4)]
    x, margin = probe_inputs(tiny_lm, units, [-1, -2])
    width = tiny_lm.model.config.hidden_size
    assert x.shape == (8, 2 * width) and margin.shape == (8,) and np.isfinite(x).all()
    assert np.allclose(x[0], x[2])  # the same prompt, the same states
    probe = fit_probe(x, np.array([u.label for u in units]), 1.0)
    assert probe.predict_proba(x)[:, 1][0] > probe.predict_proba(x)[:, 1][1]  # it separates what it was fitted on
    assert record_range("0-200") == (0, 200)


def test_shared_lm_cost_builds_a_mean_both_ways_and_counts_a_shared_model_once(tiny_dir, tmp_path, capsys):
    from benchmarks.studies.shared_lm_cost import main

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"context": ["Ann wrote it in 1990."], "question": "Who wrote it?",
                                "response": "Ann wrote it."}) + "\n", encoding="utf-8")
    spec = f"llm-judge:{tiny_dir}+llm-judge:{tiny_dir}"
    assert main(["--nli", spec, "--dtype", "float32", "--data", str(data), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "the same scores: True" in out
    held = {line.split(" | ")[0]: line.split(" | ")[2] for line in out.splitlines() if line.startswith("| ")}
    assert held["| shared"] != held["| each loads its own"]  # two copies of the judge's model, then one
    assert "0.50x |" in out


def test_verifier_span_scores_the_reader_beside_word_overlap_and_the_verifier(tmp_path, capsys):
    from benchmarks.verifier_span import main

    people = [("Marie Curie", "Warsaw", "Pierre Curie", "Paris"),
              ("Ada Lovelace", "London", "Charles Babbage", "Teignmouth")]
    rows = [{"knowledge": f"{a} was born in {b}. {c} was born in {d}.", "question": f"Where was {a} born?",
             "right_answer": b, "hallucinated_answer": "Rome"} for a, b, c, d in people * 2]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = main(["--data", str(tmp_path), "--dev", "0-2", "--test", "2-4", "--verifier"])
    assert set(out) == {"dev:span reader", "dev:word overlap (trivial)", "test:span reader",
                        "test:word overlap (trivial)", "test:shipped verifier"}
    assert "### test: distractor pairs of records 2-3 (4 answers)" in capsys.readouterr().out


def test_check_cost_benchmark_times_supports_side_by_side_on_the_same_answers(capsys):
    from benchmarks.check_cost import main

    root = shared_data("halueval/qa.jsonl", "ragtruth/dev.jsonl")
    summary = main(["--supports", "lexical,lexical+lexical@0.3", "--halueval", str(root / "halueval"), "--pairs", "2",
                    "--ragtruth", str(root / "ragtruth" / "dev.jsonl"), "--ragtruth-qa", "2", "--rounds", "2"])
    assert set(summary) == {"lexical", "lexical+lexical@0.3"}
    assert all(v > 0 for per in summary.values() for v in per.values())
    out = capsys.readouterr().out
    assert "| `lexical+lexical@0.3` |" in out and "(1.00x)" in out  # the baseline against itself


def test_fod_table2_reads_only_the_tasks_it_is_given(tmp_path):
    """``--tasks`` without HaluEval-QA reads no HaluEval file; contexts stay one per source document, interleaved."""
    import json

    from benchmarks.fod_table2 import contexts

    data = tmp_path / "dev_extra.jsonl"
    rows = [{"task_type": t, "source_id": f"{t}-{k}", "question": "Q?" if t == "QA" else None, "context": "C"}
            for k in range(3) for t in ("QA", "Summary", "Data2txt")]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows + rows), encoding="utf-8")
    got = contexts(str(data), str(tmp_path / "no-halueval"), 2, tasks=("QA", "Summary"))
    assert [(c["task"], c["record"]) for c in got] == [("QA", "QA-0"), ("Summary", "Summary-0"), ("QA", "QA-1"),
                                                      ("Summary", "Summary-1")]
    assert got[1]["question"].startswith("Summarize") and got[0]["qa"] and not got[1]["qa"]
