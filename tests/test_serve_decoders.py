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
