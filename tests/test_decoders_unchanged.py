"""Every decoder gives, bit for bit, what it gave before the decoders shared one settings, result and stream type
(``fixtures/decoders_before.json``, written by ``decoder_cases.py`` from that code), on the scripted mock model."""

from __future__ import annotations

import json

import decoder_cases as cases


def without_added(case: dict) -> dict:
    """A case's output less what the shared types added: the result's ``stop`` and FOD's ``trace["config"]``."""
    result = case.get("result", case)
    if "method" not in result:  # the monitor's case: no JSON form of a result
        return case
    trimmed = {k: v for k, v in result.items() if k != "stop"}
    if isinstance(trimmed["trace"], dict):
        trimmed["trace"] = {k: v for k, v in trimmed["trace"].items() if k != "config"}
    return {**case, "result": trimmed} if "result" in case else trimmed


#: the one intended difference: the trace gives CAD's weight wherever it is used, with ``steer="cad"`` too (before,
#: only with ``decode="cad"``, while the candidates were sampled with 0.5 whatever the caller gave)
CORRECTED = {("fod", "fod-steer-cad"): {"alpha": (None, 0.5)}}


def test_every_decoder_gives_what_it_gave_before():
    before = json.loads(cases.FIXTURE.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(cases.outputs(), sort_keys=True))
    for (group, name), fields in CORRECTED.items():
        trace = before[group][name]["result"]["trace"]
        for key, (old, new) in fields.items():
            assert trace[key] == old
            trace[key] = new
    for group in before:
        for name in before[group]:
            assert without_added(now[group][name]) == before[group][name], (group, name)


def test_the_json_form_adds_only_the_stop_reason_and_the_config():
    now = json.loads(json.dumps(cases.outputs()))
    for name, case in now["fod"].items():
        assert case["result"]["stop"] == case["result"]["trace"]["stop"], name
        assert case["result"]["trace"]["config"]["tau1"] == cases.FOD_CASES[name]["tau1"], name
    assert {case["stop"] for case in now["baselines"].values()} <= {"eos", "max_sentences", "max_new_tokens", "stop"}


#: FOD's cases whose greedy phases decode on a contrast, and two more: repairs twice, and from another seed
ON_A_CONTRAST = {**{name: case for name, case in cases.FOD_CASES.items() if case.get("decode", "cad") != "greedy"},
                 "fod-two-repairs": {"tau1": 0.99}, "fod-seed3": {"tau1": 0.5, "decoding": cases.sampled(3)}}


def test_fod_on_a_contrast_decodes_the_same_with_both_passes_in_one_forward():
    """With the without-context pass level with the tokens (LiveEngine.step_level: both passes packed into one
    forward per token, the contrast choosing each token as it comes), FOD gives exactly what the draft checked at
    sentence ends gives (tokens, candidates, choices, scores, trace, accepted sentences) in fewer forwards."""
    runs = {}
    for packs_level in (False, True):
        s = cases.scorer()
        out = json.loads(json.dumps(cases.fod_outputs(s, packs_level, ON_A_CONTRAST), sort_keys=True))
        runs[packs_level] = (out, len(s.lm.model.calls))
    (drafted, drafted_forwards), (level, level_forwards) = runs[False], runs[True]
    assert level == drafted
    assert sum(c["result"]["trace"]["steered_tokens"] for c in level.values()) >= 3  # the contrast did choose
    assert sum(c["result"]["trace"]["repairs"] for c in level.values()) >= 2  # and candidates were sampled
    assert level_forwards < 0.6 * drafted_forwards, (level_forwards, drafted_forwards)
