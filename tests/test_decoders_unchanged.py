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
