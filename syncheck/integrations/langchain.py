"""``ChatSyncheck``: a LangChain chat model for a ``syncheck serve`` endpoint, its scores in ``response_metadata``.

>>> from syncheck.integrations.langchain import ChatSyncheck                            # doctest: +SKIP
>>> llm = ChatSyncheck(base_url="http://127.0.0.1:8000/v1", model="smollm2-135m", documents=docs)
>>> reply = llm.invoke("When was the tower completed?")
>>> [(s["text"], s["score"]) for s in reply.response_metadata["syncheck"]["sentences"]]
>>> for chunk in llm.stream("When was it completed?", documents=other_docs, method="fod", temperature=1.0):
...     for s in chunk.response_metadata.get("syncheck", {}).get("sentences", []):
...         print(f"[{s['score']:.2f}] {s['text']}")

A stream's chunk that ends a sentence carries it as ``response_metadata["syncheck"]["sentences"]``, a one-item list,
and the last content chunk carries the summary (``response_score``, ``thresholds``, ``trace``, ...), so the chunks
add up (``chunk + chunk``, as LangChain aggregates a stream) to what ``invoke`` gives.
"""

from __future__ import annotations

from typing import Any

from syncheck.integrations.options import default_api_key, missing_extra, pop_settings, stream_event, syncheck_of

try:
    from langchain_openai import ChatOpenAI
except ImportError as exc:
    raise missing_extra("langchain", "langchain-openai") from exc

from syncheck.integrations.settings import SyncheckSettings  # noqa: E402  (pydantic: langchain-core's dependency)


class ChatSyncheck(ChatOpenAI, SyncheckSettings):
    """A ``ChatOpenAI`` for ``syncheck serve``: documents and syncheck's settings in the request, scores in the reply.

    ``ChatSyncheck(base_url=".../v1", model=SERVED_ID, documents=[...], method="monitor", tau1=None, ...)``: the
    documents and settings are :class:`~syncheck.integrations.settings.SyncheckSettings`' (also per call:
    ``llm.invoke(question, documents=[...], method="fod")``), the rest ``ChatOpenAI``'s (``temperature``,
    ``max_tokens``, ``seed``, ...). ``api_key``: the server's key when it was started with ``--api-key`` (default: the
    first of ``SYNCHECK_API_KEY``, else a placeholder; never ``OPENAI_API_KEY``).
    """

    use_responses_api: bool | None = False  # syncheck serves chat completions only

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("api_key", default_api_key())  # not OPENAI_API_KEY: that key is OpenAI's
        super().__init__(**kwargs)

    @property
    def _llm_type(self) -> str:
        return "syncheck-chat"

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        call = pop_settings(kwargs)
        kwargs["extra_body"] = self.syncheck_body(call, kwargs.get("extra_body") or self.extra_body)
        return super()._get_request_payload(input_, stop=stop, **kwargs)

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> Any:
        result = super()._create_chat_result(response, generation_info)
        syncheck = syncheck_of(response)
        if syncheck is not None:
            result.generations[0].message.response_metadata["syncheck"] = syncheck
        return result

    def _convert_chunk_to_generation_chunk(self, chunk: dict, default_chunk_class: type,
                                           base_generation_info: dict | None) -> Any:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        syncheck = chunk.get("syncheck")
        if generation is not None and syncheck:
            generation.message.response_metadata["syncheck"] = stream_event(syncheck)
        return generation


__all__ = ["ChatSyncheck"]
