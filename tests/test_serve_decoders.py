"""The server's decoder protocol: FOD and abstention arrive by entry point, any decoder can be plugged in."""

from __future__ import annotations

import pytest
import torch

from syncheck.serve.decoders import AnswerDecoder, DecodedAnswer, Decoders, registered_decoders
from syncheck.serve.turns import in_turns


def test_fod_and_abstain_are_registered_without_syncheck_importing_fod():
    factories = registered_decoders()
    assert {"fod", "abstain"} <= set(factories)
    decoders = Decoders(scorer=None)
    assert decoders.samples("fod") is True and decoders.samples("abstain") is False  # read without building


class Echo:
    """A decoder that answers with the first document."""

    samples = False

    def __init__(self, scorer) -> None:
        self.scorer = scorer

    def decode(self, *, question, documents, decoding, options, sink) -> DecodedAnswer:
        sink.text(documents[0])
        return DecodedAnswer(documents[0], [], {"stop": "eos"})


class Texts:
    def __init__(self) -> None:
        self.got = []

    def text(self, text):
        self.got.append(text)

    def sentence(self, index, sentence):
        raise AssertionError("no sentences")

    def check(self):
        pass


def test_a_plugged_in_decoder_is_built_once_and_run():
    decoders = Decoders(scorer="the scorer", factories={"echo": Echo})
    assert decoders.names == ["echo"] and "echo" in decoders and "fod" not in decoders
    echo = decoders.get("echo")
    assert isinstance(echo, AnswerDecoder) and echo.scorer == "the scorer" and decoders.get("echo") is echo
    sink = Texts()
    done = echo.decode(question="Q?", documents=["D."], decoding=None, options=None, sink=sink)
    assert done.text == "D." and sink.got == ["D."]


def test_a_factory_that_builds_no_decoder_is_refused_with_what_it_lacks():
    with pytest.raises(TypeError, match="lacks AnswerDecoder's samples/decode"):
        Decoders(scorer=None, factories={"bad": lambda scorer: object()}).get("bad")


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.inner(x)


def test_a_decoder_in_turns_hands_the_model_back_before_each_forward():
    model, log = TwoLayers(), []

    def decode():
        with torch.inference_mode():
            for i in range(3):
                log.append(f"decoder {i}")
                model(torch.ones(1, 2))
        return "answer"

    task = in_turns(decode, model)
    turns = 0
    with pytest.raises(StopIteration) as end:
        while True:
            next(task)
            turns += 1
            # the scheduler's side of a pause runs in the thread's own grad mode, not the decoder's inference mode
            assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
            log.append("others")
    assert end.value.value == "answer" and turns == 3
    assert log == ["decoder 0", "others", "decoder 1", "others", "decoder 2", "others"]
    assert not model._forward_pre_hooks  # the pause hook is gone


def test_closing_a_task_in_turns_stops_the_decoder_and_its_errors_reach_the_task():
    model, unwound = TwoLayers(), []

    def decode():
        try:
            while True:
                model(torch.ones(1, 2))
        finally:
            unwound.append(True)

    task = in_turns(decode, model)
    next(task)
    next(task)
    task.close()  # the client left
    assert unwound == [True] and not model._forward_pre_hooks

    def failing():
        model(torch.ones(1, 2))
        raise ValueError("bad request")

    task = in_turns(failing, model)
    next(task)
    with pytest.raises(ValueError, match="bad request"):
        next(task)


# ---------------------------------------------------------------------- FOD's repairs on the stream
def _sse(response) -> list:
    """The data of each server-sent event of a streamed reply (``"[DONE]"`` as it is)."""
    import json

    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_a_fod_repair_comes_on_its_sentence_event_as_it_happens():
    """A scripted model whose second sentence ("London.") FOD must take back: the event of the sentence that replaced
    it carries the ``repair``, before the next sentence and the summary; the other events carry none."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient
    from mock_lm import ScriptedLM, make_word_tokenizer
    from test_fod_repair import CONTEXT, by_words

    from syncheck.model.models import load_model
    from syncheck.scorer import Scorer
    from syncheck.serve.app import create_app

    def script(text, has_context):
        after = {"": {"Good": 1.0}, "Good.": {" London": 0.7, " Paris": 0.3}, "Good. Paris.": {" Fine": 1.0}}
        if text in after:
            return after[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}

    tok = make_word_tokenizer()
    scorer = Scorer(load_model(ScriptedLM(tok, script), tok, name="scripted"), lid=None, alignment="lexical",
                    aggregator=None)
    scorer.featurizer.score_fn = by_words
    body = {"model": "scripted", "messages": [{"role": "user", "content": "Q?"}], "documents": [CONTEXT],
            "max_tokens": 40, "stream": True,
            "syncheck": {"method": "fod", "tau1": 0.5, "tau2": 0.9, "final_check": False, "features": False}}
    with TestClient(create_app(scorer, model_id="scripted"), base_url="http://127.0.0.1:8000") as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            assert reply.status_code == 200
            events = _sse(reply)
    assert events[-1] == "[DONE]"
    extras = [e.get("syncheck") for e in events[:-1]]
    sentences = [x["sentence"] for x in extras if x and "sentence" in x]
    assert [s["text"] for s in sentences] == ["Good.", "Paris.", "Fine."]
    assert "repair" not in sentences[0] and "repair" not in sentences[2]  # the other fields are as they were
    repair = sentences[1]["repair"]  # what FOD took back at index 1, and how its replacement was chosen
    assert set(repair) == {"index", "text", "score", "degenerate", "chosen_by"}
    assert (repair["index"], repair["text"], repair["chosen_by"]) == (1, "London.", "tau2")
    assert repair["score"] == pytest.approx(0.1) and sentences[1]["score"] == pytest.approx(0.95)
    at = next(i for i, x in enumerate(extras) if x and x.get("sentence", {}).get("repair"))
    summary = next(i for i, x in enumerate(extras) if x and "trace" in x)
    assert at < summary and extras[summary]["trace"]["repairs"] == 1  # as it happened, not only in the trace
    assert extras[summary]["trace"]["backtracks"][0]["text"] == "London."


def test_the_server_and_the_page_decode_fod_with_fod_generates_defaults():
    """A request that sets nothing (what the live page sends for FOD) is decoded as ``fod generate`` with no options
    decodes: ``FODConfig()``, the same candidate sampling, seed and token budget; no default is the server's own."""
    import re

    from fod.cli import generate
    from fod.config import FODConfig
    from fod.generator import FODGenerator
    from fod.serving import FODDecoder
    from syncheck.serve.config import ServerConfig
    from syncheck.serve.page import asset
    from syncheck.serve.protocol import ChatRequest

    cli = {p.name: p.default for p in generate.params}
    request = ChatRequest(model="m", messages=[{"role": "user", "content": "Q?"}], syncheck={"method": "fod"})
    decoding = request.candidate_decoding(ServerConfig().max_tokens)
    sampling = FODConfig().decoding_or(FODGenerator.candidate_sampling)
    assert (decoding.temperature, decoding.top_p, decoding.seed_or_zero) == (
        sampling.temperature, cli["top_p"], cli["seed"]) == (sampling.temperature, sampling.top_p, sampling.seed)
    assert decoding.max_new_tokens == cli["max_new_tokens"] and not decoding.stop

    class Recorder:  # the FOD generator, recording the settings the server gives it
        settings = FODConfig().to_json().keys()

        def generate(self, **kw):
            self.got = kw
            raise StopIteration

    decoder = FODDecoder.__new__(FODDecoder)
    decoder.generator = Recorder()
    with pytest.raises(StopIteration):
        decoder.decode(question="Q?", documents=["D."], decoding=decoding, options=request.syncheck, sink=None)
    given = {k: v for k, v in decoder.generator.got.items() if k not in ("question", "context", "callback",
                                                                          "decoding")}
    assert FODConfig().replace(**given) == FODConfig()
    assert all(given[name] == cli[name] for name in ("tau1", "tau2", "num_samples", "num_beams", "max_sentences"))
    # the page sends no FOD setting of its own: thresholds and token budget blank (the server's), the check on
    page = asset("index.html")
    for field in ("tau1", "tau2", "max-tokens"):
        tag = re.search(rf'<input [^>]*id="{field}"[^>]*>', page).group()
        assert "value=" not in tag, tag
    assert re.search(r'<input [^>]*id="final-check"[^>]*checked', page) and cli["check"] is True
    script = asset("page.js")
    assert not re.search(r"num_samples|num_beams|max_sentences|temperature|top_p|seed", script)
