"""LangChain's ``ChatSyncheck`` and LlamaIndex's ``SyncheckLLM`` against a real ``syncheck serve`` (conftest's server).

Each framework's tests are skipped when its extra is not installed; the missing-extra error is tested either way.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import re
import sys

import pytest

pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from conftest import DOCS  # noqa: E402  (server, the tiny model served as "tiny", is conftest's fixture)

QUESTION = "When was it completed?"
OTHER_DOCS = ["The bridge opened in 1937 and is painted orange.", "Its main span is 1280 metres long."]
TOKENS = 24  # enough for the tiny model's answers to end sentences
FOD = {"method": "fod", "temperature": 1.0, "seed": 3, "num_samples": 2, "num_beams": 1, "max_sentences": 2,
       "final_check": False, "tau1": 0.25}


def sentences_of(chunks, key: str) -> list[dict]:
    """The sentence events of a stream's chunks (their ``key`` mapping's ``syncheck``)."""
    return [s for c in chunks for s in getattr(c, key).get("syncheck", {}).get("sentences", [])]


def summaries_of(chunks, key: str) -> list[dict]:
    return [getattr(c, key)["syncheck"] for c in chunks if "response_score" in getattr(c, key).get("syncheck", {})]


@pytest.fixture(scope="module")
def raw_reply(server):
    """The ``openai`` client's reply to QUESTION with some documents: what an integration's request must equal."""
    @functools.cache
    def reply(documents: tuple[str, ...]) -> tuple[str, list[float]]:
        out = server.client().chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": QUESTION}], max_tokens=TOKENS,
            extra_body={"documents": list(documents)})
        return out.choices[0].message.content, [s["score"] for s in out.model_extra["syncheck"]["sentences"]]

    return lambda documents: reply(tuple(documents))


def assert_scored(text: str, syncheck: dict, method: str = "monitor") -> None:
    sentences = syncheck["sentences"]
    assert sentences and all(isinstance(s["score"], float) for s in sentences)
    assert all(text[s["start"]: s["end"]] == s["text"] for s in sentences)
    assert syncheck["response_score"] == min(s["score"] for s in sentences)
    assert syncheck["method"] == method and {"thresholds", "trace"} <= set(syncheck)


def integration(package: str, module: str, name: str) -> type:
    """An integration's chat model class; the test is skipped when its framework (``package``) is not installed."""
    pytest.importorskip(package)
    return getattr(importlib.import_module(f"syncheck.integrations.{module}"), name)


#: the tiny served model, its documents and answer length, and no retries (an error is raised at once)
MODEL = {"model": "tiny", "documents": DOCS, "max_tokens": TOKENS, "max_retries": 0}


# ---------------------------------------------------------------------------------------------------- LangChain
@pytest.fixture(scope="module")
def chat_model():
    return integration("langchain_openai", "langchain", "ChatSyncheck")


@pytest.fixture(scope="module")
def chat(chat_model, server):
    return chat_model(base_url=server.base_url, **MODEL)


@pytest.fixture(scope="module")
def reply(chat):
    return chat.invoke(QUESTION)


def close(got, want, tol: float = 1e-4) -> bool:
    """Equal, numbers to ``tol``, through dicts and lists: two requests for the same prompt agree to float tolerance,
    since the second starts from the server's cached prompt prefix (:mod:`syncheck.live.prefix_cache`)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(close(got[k], want[k], tol) for k in got)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(close(a, b, tol) for a, b in zip(got, want))
    if isinstance(got, float) or isinstance(want, float):
        return isinstance(got, (int, float)) and isinstance(want, (int, float)) and abs(got - want) <= tol
    return got == want


def assert_same_reply(got: tuple[str, list[float]], want: tuple[str, list[float]]) -> None:
    """The same text, and the same scores to float tolerance (see :func:`close`)."""
    assert close(got, want)


def test_langchain_invoke_puts_every_scored_sentence_in_response_metadata(chat, reply, raw_reply):
    assert_scored(reply.content, reply.response_metadata["syncheck"])
    assert_same_reply((reply.content, [s["score"] for s in reply.response_metadata["syncheck"]["sentences"]]),
                      raw_reply(DOCS))
    assert close(asyncio.run(chat.ainvoke(QUESTION)).response_metadata["syncheck"]["sentences"],
                 reply.response_metadata["syncheck"]["sentences"])


def test_langchain_stream_carries_each_sentence_and_the_summary_and_adds_up_to_invoke(chat, reply):
    chunks = list(chat.stream(QUESTION))
    assert "".join(c.content for c in chunks) == reply.content  # greedy: the same answer
    events, (summary,) = sentences_of(chunks, "response_metadata"), summaries_of(chunks, "response_metadata")
    assert close(events, reply.response_metadata["syncheck"]["sentences"])
    assert all(len(c.response_metadata["syncheck"].get("sentences", ())) <= 1 for c in chunks
               if "syncheck" in c.response_metadata)
    assert close(summary["response_score"], reply.response_metadata["syncheck"]["response_score"])
    total = sum(chunks[1:], chunks[0])  # LangChain's own aggregation of a stream
    assert total.content == reply.content and total.response_metadata["syncheck"]["sentences"] == events
    streamed = chat.model_copy(update={"streaming": True}).invoke(QUESTION)  # invoke by adding up the stream
    assert streamed.content == reply.content and close(streamed.response_metadata["syncheck"]["response_score"],
                                                       reply.response_metadata["syncheck"]["response_score"])


def test_langchain_per_call_documents_and_settings_override_the_models(chat, chat_model, server, raw_reply):
    from langchain_core.documents import Document

    other = chat.invoke(QUESTION, documents=[Document(page_content=d) for d in OTHER_DOCS])
    assert_same_reply((other.content, [s["score"] for s in other.response_metadata["syncheck"]["sentences"]]),
                      raw_reply(OTHER_DOCS))
    assert raw_reply(OTHER_DOCS) != raw_reply(DOCS)
    fod = chat.invoke(QUESTION, **FOD)
    assert fod.response_metadata["syncheck"]["method"] == "fod"
    assert fod.response_metadata["syncheck"]["thresholds"]["tau1"] == FOD["tau1"]
    own = chat_model(base_url=server.base_url, **MODEL, **FOD)  # the settings as the model's own
    (summary,) = summaries_of(list(own.stream(QUESTION)), "response_metadata")
    assert summary["method"] == "fod" and summary["thresholds"]["tau1"] == FOD["tau1"]
    assert summary["final_check"] is None  # final_check=False reached the server


def test_langchain_settings_errors_say_how_to_fix_them(chat_model, server):
    bare = chat_model(base_url=server.base_url, model="tiny", max_retries=0)
    with pytest.raises(ValueError, match=re.escape("documents=[...]")):
        bare.invoke(QUESTION)
    with pytest.raises(ValueError, match=re.escape("documents=[...]")):
        next(iter(bare.stream(QUESTION, documents=["  "])))
    with pytest.raises(ValueError, match="choose one of monitor, fod, abstain"):
        chat_model(base_url=server.base_url, model="tiny", documents=DOCS, method="beam")
    with pytest.raises(ValueError, match="choose one of monitor, fod, abstain"):
        bare.invoke(QUESTION, documents=DOCS, method="beam")


# --------------------------------------------------------------------------------------------------- LlamaIndex
@pytest.fixture(scope="module")
def llm_model():
    return integration("llama_index.llms.openai_like", "llamaindex", "SyncheckLLM")


@pytest.fixture(scope="module")
def llm(llm_model, server):
    return llm_model(api_base=server.base_url, **MODEL)


def user(text: str):
    from llama_index.core.llms import ChatMessage

    return [ChatMessage(role="user", content=text)]


@pytest.fixture(scope="module")
def chat_reply(llm):
    return llm.chat(user(QUESTION))


def test_llamaindex_chat_and_complete_put_the_scores_in_additional_kwargs(llm, chat_reply, raw_reply):
    reply = chat_reply
    assert_scored(reply.message.content, reply.additional_kwargs["syncheck"])
    assert reply.raw.model_extra["syncheck"] == reply.additional_kwargs["syncheck"]
    assert_same_reply((reply.message.content, [s["score"] for s in reply.additional_kwargs["syncheck"]["sentences"]]),
                      raw_reply(DOCS))
    done = llm.complete(QUESTION)
    assert done.text == reply.message.content
    assert close(done.additional_kwargs["syncheck"]["sentences"], reply.additional_kwargs["syncheck"]["sentences"])


def test_llamaindex_stream_chat_carries_each_sentence_and_the_summary(llm, chat_reply):
    reply = chat_reply
    chunks = list(llm.stream_chat(user(QUESTION)))
    assert "".join(c.delta or "" for c in chunks) == chunks[-1].message.content == reply.message.content
    (summary,) = summaries_of(chunks, "additional_kwargs")
    assert close(sentences_of(chunks, "additional_kwargs"), reply.additional_kwargs["syncheck"]["sentences"])
    assert close(summary["response_score"], reply.additional_kwargs["syncheck"]["response_score"])


def test_llamaindex_per_call_documents_settings_and_errors(llm, llm_model, server, raw_reply):
    from llama_index.core.schema import TextNode

    other = llm.chat(user(QUESTION), documents=[TextNode(text=d) for d in OTHER_DOCS])
    assert_same_reply((other.message.content, [s["score"] for s in other.additional_kwargs["syncheck"]["sentences"]]),
                      raw_reply(OTHER_DOCS))
    (summary,) = summaries_of(list(llm.stream_complete(QUESTION, **FOD)), "additional_kwargs")
    assert summary["method"] == "fod" and summary["thresholds"]["tau1"] == FOD["tau1"]
    bare = llm_model(api_base=server.base_url, model="tiny", max_retries=0)
    with pytest.raises(ValueError, match=re.escape("documents=[...]")):
        bare.chat(user(QUESTION))
    with pytest.raises(ValueError, match="choose one of monitor, fod, abstain"):
        llm_model(api_base=server.base_url, model="tiny", documents=DOCS, method="beam")


# --------------------------------------------------------------------------------------------------------- both
def test_the_clients_settings_and_methods_are_the_servers():
    from syncheck.integrations.options import METHODS, SETTINGS
    from syncheck.serve.decoders import registered_decoders
    from syncheck.serve.protocol import SyncheckOptions

    assert set(SETTINGS) == set(SyncheckOptions.model_fields)  # a field added to one must be added to the other
    assert set(METHODS) == {"monitor", *registered_decoders()}


@pytest.mark.parametrize("module,package", [("langchain", "langchain_openai"),
                                            ("llamaindex", "llama_index.llms.openai_like")])
def test_a_missing_extra_says_what_to_install(monkeypatch, module, package):
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    monkeypatch.delitem(sys.modules, f"syncheck.integrations.{module}", raising=False)
    with pytest.raises(ImportError, match=re.escape(f"pip install 'syncheck[{module}]'")):
        importlib.import_module(f"syncheck.integrations.{module}")
