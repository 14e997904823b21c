"""Every decoder's output on the scripted mock model, in a fixed set of cases: what ``test_decoders_unchanged``
compares bit for bit against ``fixtures/decoders_before.json``.

The fixture was written by the code before the decoders shared one settings, result and stream type, with
``PYTHONPATH=$PWD python tests/decoder_cases.py``; the cases call the decoders the way callers did then (settings
as keywords), so the test also shows those calls still work.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mock_lm import ScriptedLM, make_word_tokenizer  # noqa: E402

from syncheck.decoding import Decoding  # noqa: E402
from syncheck.model.models import load_model  # noqa: E402
from syncheck.scorer import Scorer  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "decoders_before.json"
CONTEXT = "Paris is the answer: good, bad, fine, meh."


def script(text: str, has_context: bool) -> dict[str, float]:
    """"The answer is Paris/London." (the context leans to Paris, the model's memory to London), then a second
    sentence that may be good, bad or fine, then EOS."""
    steps = {"": {"The": 1.0}, "The": {" answer": 1.0}, "The answer": {" is": 1.0},
             "The answer is": {" London": 0.55, " Paris": 0.45} if has_context else {" London": 0.9, " Paris": 0.1}}
    if text in steps:
        return steps[text]
    if text.count(".") == 1 and text.endswith("."):
        return {" Bad": 0.5, " Fine": 0.3, " Good": 0.2} if has_context else {" Bad": 0.8, " Fine": 0.2}
    return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}


def by_words(text: str, features: dict) -> float:
    """Paris and Fine are supported, London and Bad are not."""
    assert all(math.isfinite(v) for v in features.values())
    return 0.95 if "Paris" in text else 0.1 if "London" in text else 0.3 if "Bad" in text else 0.9


def scorer() -> Scorer:
    tok = make_word_tokenizer()
    lm = load_model(ScriptedLM(tok, script), tok, name="scripted")
    s = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    s.featurizer.score_fn = by_words
    return s


def sampled(seed: int = 0) -> Decoding:
    return Decoding(max_new_tokens=40, do_sample=True, top_p=1.0, seed=seed)


GREEDY_40 = Decoding(max_new_tokens=40)
ASK = {"question": "Q?", "context": CONTEXT}
#: FOD's cases: the settings each passes as keywords
FOD_CASES = {
    "fod": {"tau1": 0.5, "tau2": 0.85},
    "fod-greedy-seed3": {"tau1": 0.5, "tau2": 0.85, "decoding": sampled(3), "decode": "greedy"},
    "fod-paper-beam": {"tau1": 0.5, "tau2": 0.25, "search": "beam", "cut": "sentence", "steer": "none",
                       "fallback": "prefix", "num_samples": 6, "num_beams": 2, "decode": "greedy",
                       "decoding": sampled(5)},
    "fod-bt": {"tau1": 0.5, "tau2": 0.85, "backtrack_only": True, "decode": "greedy"},
    "fod-steer-cad": {"tau1": 0.5, "tau2": 0.85, "steer": "cad", "decode": "greedy"},
    "fod-adacad-best": {"tau1": 0.5, "tau2": 0.99, "decode": "adacad", "cut": "sentence", "fallback": "best",
                        "flag_specifics": True, "stop_degenerate": False, "max_repairs": 1},
    "fod-best-one-repair": {"tau1": 0.5, "tau2": 0.99, "decode": "greedy", "cut": "sentence", "fallback": "best",
                            "flag_specifics": True, "stop_degenerate": False, "max_repairs": 1},
    "fod-one-sentence": {"tau1": 0.5, "tau2": 0.85, "max_sentences": 1, "num_samples": 3, "decode": "greedy"},
}


def fod_outputs(s: Scorer, packs_level: bool | None = None, cases: dict | None = None) -> dict:
    """FOD's output in each of ``cases`` (default :data:`FOD_CASES`); ``packs_level``: the engine's
    :attr:`~syncheck.live.engine.LiveEngine.packs_level` (``None``: its own choice, which the scripted model never
    packs)."""
    from fod.generator import FODGenerator

    fod = FODGenerator(s, max_sentence_tokens=8, checker=None)
    fod.engine.packs_level = packs_level
    out = {}
    for name, settings in (FOD_CASES if cases is None else cases).items():
        accepted: list = []
        res = fod.generate(**ASK, **{"decoding": sampled(), **settings},
                           callback=lambda a: accepted.append([a.index, a.text, a.sentence.score]))
        out[name] = {"result": res.to_json(), "accepted": accepted}
    return out


def baseline_outputs(s: Scorer) -> dict:
    from fod.baselines import AbstainGenerator, AdaCADGenerator, CADGenerator, GreedyGenerator, RerankGenerator

    return {
        "greedy": GreedyGenerator(s, checker=None).generate(**ASK, decoding=GREEDY_40).to_json(),
        "greedy-1": GreedyGenerator(s, checker=None).generate(**ASK, decoding=GREEDY_40, max_sentences=1).to_json(),
        "abstain": AbstainGenerator(s, checker=None, threshold=0.5).generate(**ASK, decoding=GREEDY_40).to_json(),
        "rerank": RerankGenerator(s, checker=None).generate(**ASK, num_samples=4, decoding=sampled(1)).to_json(),
        "cad": CADGenerator(s, checker=None, alpha=0.7).generate(**ASK, decoding=GREEDY_40).to_json(),
        "adacad": AdaCADGenerator(s, checker=None).generate(**ASK, decoding=GREEDY_40).to_json(),
    }


def monitor_outputs(s: Scorer) -> dict:
    from syncheck.live.monitor import Monitor

    monitor = Monitor(s, background_kl=False)
    out = {}
    for name, decoding in {"greedy": GREEDY_40, "sampled": sampled(2),
                           "stop": Decoding(max_new_tokens=40, stop=("Bad",))}.items():
        gen = monitor.generate(**ASK, decoding=decoding)
        out[name] = {"text": gen.text, "sentences": [x.to_json() for x in gen.sentences], "token_ids": gen.token_ids,
                     "stop_reason": str(gen.stop_reason), "warnings": gen.warnings,
                     "response_score": gen.response_score}
        out[name]["events"] = [[e.index, e.sentence.text, e.sentence.score, list(e.tokens), e.final]
                               for e in monitor.stream(**ASK, decoding=decoding)]
    return out


def outputs() -> dict:
    s = scorer()
    return {"monitor": monitor_outputs(s), "fod": fod_outputs(s), "baselines": baseline_outputs(s)}


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(outputs(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
