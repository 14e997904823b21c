"""One settings object (``FODConfig``), one result type and one stream type for the monitor and every decoder of
``fod``, on the scripted mock model (``decoder_cases``)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import decoder_cases as cases
import pytest

import fod.candidates as fod_candidates
from fod.baselines import METHODS, GreedyGenerator
from fod.config import FODConfig
from fod.generator import FODGenerator
from syncheck.decoding import SettingsError
from syncheck.live.generation import GenerationResult, Repair, SentenceEvent, StopReason
from syncheck.live.monitor import Monitor

ROOT = Path(__file__).resolve().parents[1]
#: FOD repairs both greedy sentences here ("London", then "Bad")
REPAIRING = {**cases.FOD_CASES["fod-greedy-seed3"]}


@pytest.fixture(scope="module")
def scorer():
    return cases.scorer()


@pytest.fixture(scope="module")
def fod(scorer):
    return FODGenerator(scorer, max_sentence_tokens=8, checker=None)


def test_every_decoder_takes_one_config_in_at_most_six_parameters():
    for name, cls in METHODS.items():
        params = inspect.signature(cls.generate).parameters
        assert len(params) <= 6 and "config" in params, name
        assert set(cls.settings) <= {f.name for f in dataclasses.fields(FODConfig)}, name
    assert "setattr(" not in (ROOT / "fod" / "generator.py").read_text(encoding="utf-8")
    assert "inspect.signature" not in (ROOT / "fod" / "cli.py").read_text(encoding="utf-8")


def test_the_config_is_checked_once_and_says_how_to_fix_it():
    with pytest.raises(SettingsError, match="search must be one of"):
        FODConfig(search="bfs")
    with pytest.raises(SettingsError, match="lower num_beams or raise num_samples"):
        FODConfig(num_samples=2, num_beams=3)
    with pytest.raises(SettingsError, match=r"tau1 must be a faithfulness probability in \[0, 1\]"):
        FODConfig(tau1=70)
    with pytest.raises(SettingsError, match="stop_degenerate must be"):
        FODConfig(stop_degenerate="repeat")
    with pytest.raises(TypeError, match="unknown decoding setting"):
        FODConfig(decoding={"max_tokens": 4})
    config = FODConfig(tau1=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tau1 = 0.6
    with pytest.raises(SettingsError, match="alpha must be >= 0"):
        config.replace(alpha=-1.0)
    assert config.replace(search="beam").search == "beam" and config.search == "repair"


def test_a_keyword_a_decoder_does_not_read_is_refused(fod, scorer):
    with pytest.raises(TypeError, match="unknown setting"):
        fod.generate(question="Q?", context=cases.CONTEXT, no_such_setting=1)
    with pytest.raises(TypeError, match=r"greedy does not take the setting\(s\) \['num_samples'\]"):
        GreedyGenerator(scorer, checker=None).generate(question="Q?", context=cases.CONTEXT, num_samples=3)


def test_a_config_and_the_same_settings_as_keywords_give_the_same_answer(fod):
    config = FODConfig(**REPAIRING)
    by_config = fod.generate(question="Q?", context=cases.CONTEXT, config=config)
    by_keywords = fod.generate(question="Q?", context=cases.CONTEXT, **REPAIRING)
    assert by_config.to_json() == by_keywords.to_json() and by_config.trace.repairs == 2
    assert by_config.trace.config == config  # the trace records the call's settings
    assert by_config.to_json()["trace"]["config"]["decode"] == "greedy"


def test_alpha_reaches_the_candidates_contrast(fod, monkeypatch):
    """``steer="cad"``: the candidates are sampled on CAD's contrast with the caller's weight, not 0.5."""
    seen = []
    steered = fod_candidates.steered_logits

    def spy(logp_with, logp_without, mode, alpha=None):
        seen.append((mode, alpha))
        return steered(logp_with, logp_without, mode, alpha)

    monkeypatch.setattr(fod_candidates, "steered_logits", spy)
    res = FODGenerator(cases.scorer(), max_sentence_tokens=8, checker=None).generate(
        question="Q?", context=cases.CONTEXT, tau1=0.5, tau2=0.85, steer="cad", decode="greedy", alpha=0.9,
        decoding=cases.sampled())
    assert res.trace["repairs"] >= 1 and res.trace["alpha"] == 0.9
    assert seen and set(seen) == {("cad", 0.9)}


def test_fod_streams_the_monitors_event_type_with_its_repairs(fod, scorer):
    monitor_events = list(Monitor(scorer, background_kl=False).stream(question="Q?", context=cases.CONTEXT,
                                                                      decoding=cases.GREEDY_40))
    stream = fod.stream(question="Q?", context=cases.CONTEXT, **REPAIRING)
    events = []
    while True:
        try:
            events.append(next(stream))
        except StopIteration as stop:
            result = stop.value
            break
    assert {type(e) for e in events} == {type(e) for e in monitor_events} == {SentenceEvent}
    assert isinstance(result, GenerationResult) and result.stop is StopReason.EOS
    assert "".join(e.text for e in events) == result.text == "The answer is Paris. Fine."
    assert "".join(e.text for e in monitor_events) == "The answer is London. Bad."
    assert [e.index for e in events] == [0, 1] and events[-1].final and not events[0].final
    repairs = [e.repair for e in events]
    assert all(isinstance(r, Repair) for r in repairs)
    assert [r.dropped.text for r in repairs] == ["The answer is London.", "Bad."]
    assert [r.replacement.text for r in repairs] == ["The answer is Paris.", "Fine."]
    assert [r.chosen_by for r in repairs] == ["tau2", "tau2"]
    same = fod.generate(question="Q?", context=cases.CONTEXT, **REPAIRING)
    assert same.to_json() == result.to_json()


def test_a_stream_closed_early_stops_the_decoder(fod):
    stream = fod.stream(question="Q?", context=cases.CONTEXT, **REPAIRING)
    first = next(stream)
    stream.close()
    assert first.index == 0
    assert fod.generate(question="Q?", context=cases.CONTEXT, **REPAIRING).text == "The answer is Paris. Fine."


@pytest.mark.parametrize("name", ["greedy", "abstain", "rerank", "cad", "adacad"])
def test_every_decoder_returns_and_streams_the_same_types(scorer, name):
    decoder = METHODS[name](scorer, checker=None)
    config = FODConfig(num_samples=3, tau1=0.05, decoding=cases.sampled(1) if decoder.samples else cases.GREEDY_40)
    events = []
    result = decoder.generate(question="Q?", context=cases.CONTEXT, config=config, callback=events.append)
    streamed = list(decoder.stream(question="Q?", context=cases.CONTEXT, config=config))
    assert isinstance(result, GenerationResult) and isinstance(result.stop, StopReason)
    assert [(e.index, e.text, e.tokens) for e in streamed] == [(e.index, e.text, e.tokens) for e in events]
    assert "".join(e.text for e in events) == result.text and result.sentences
    assert all(isinstance(e, SentenceEvent) and e.repair is None for e in events) and events[-1].final


def test_the_monitor_returns_the_same_result_type(scorer):
    result = Monitor(scorer, background_kl=False).generate(question="Q?", context=cases.CONTEXT,
                                                           decoding=cases.GREEDY_40)
    assert isinstance(result, GenerationResult) and result.method == "monitor"
    assert result.stop is result.stop_reason is StopReason.EOS and result.stop_reason == "eos"
    assert result.trace == {"stop": "eos", "tokens": len(result.token_ids)} and result.to_json()["stop"] == "eos"


def test_cad_takes_alpha_from_its_config_unless_given_apart(scorer):
    from fod.baselines import CADGenerator

    assert CADGenerator(scorer, checker=None).alpha == FODConfig().alpha
    assert CADGenerator(scorer, checker=None, config=FODConfig(alpha=0.9)).alpha == 0.9  # the config is not overridden
    assert CADGenerator(scorer, checker=None, config=FODConfig(alpha=0.9), alpha=0.2).config.alpha == 0.2
