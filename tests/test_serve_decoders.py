"""The server's decoder protocol: FOD and abstention arrive by entry point, any decoder can be plugged in."""

from __future__ import annotations

import pytest

from syncheck.serve.decoders import AnswerDecoder, DecodedAnswer, Decoders, registered_decoders


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
