"""``SyncheckLLM``: a LlamaIndex LLM for a ``syncheck serve`` endpoint, its scores in ``additional_kwargs``.

>>> from llama_index.core.llms import ChatMessage                                       # doctest: +SKIP
>>> from syncheck.integrations.llamaindex import SyncheckLLM
>>> llm = SyncheckLLM(api_base="http://127.0.0.1:8000/v1", model="smollm2-135m", documents=docs)
>>> reply = llm.chat([ChatMessage(role="user", content="When was the tower completed?")])
>>> [(s["text"], s["score"]) for s in reply.additional_kwargs["syncheck"]["sentences"]]
>>> for r in llm.stream_complete("When was it completed?", documents=other_docs, method="fod"):
...     for s in r.additional_kwargs.get("syncheck", {}).get("sentences", []):
...         print(f"[{s['score']:.2f}] {s['text']}")

``chat`` and ``complete`` put the reply's ``syncheck`` object (every sentence with its score, ``response_score``,
``thresholds``, ``trace``, ...) in the response's ``additional_kwargs["syncheck"]``. A streamed response that ends a
sentence carries it there as a one-item ``sentences`` list (as in ``ChatSyncheck``), and the last one with content
carries the summary. ``.raw`` keeps the server's own object (``raw.model_extra["syncheck"]``).
"""

from __future__ import annotations

from typing import Any, Optional

from syncheck.integrations.options import default_api_key, missing_extra, pop_settings, stream_event, syncheck_of

try:
    from llama_index.core.bridge.pydantic import Field
    from llama_index.llms.openai_like import OpenAILike
except ImportError as exc:
    raise missing_extra("llamaindex", "llama-index-llms-openai-like") from exc

from syncheck.integrations.settings import SyncheckSettings  # noqa: E402  (pydantic: llama-index-core's dependency)


class SyncheckLLM(OpenAILike, SyncheckSettings):
    """An ``OpenAILike`` chat model for ``syncheck serve``: documents and settings in the request, scores in the reply.

    ``SyncheckLLM(api_base=".../v1", model=SERVED_ID, documents=[...], method="monitor", tau1=None, ...)``: the
    documents and settings are :class:`~syncheck.integrations.settings.SyncheckSettings`' (also per call:
    ``llm.chat(messages, documents=[...], method="fod")``), the rest ``OpenAILike``'s (``max_tokens``,
    ``timeout``, ``max_retries``, ...). ``temperature`` None (the default) sends none: greedy for ``monitor``, 1.0
    for FOD's candidates. ``api_key``: the server's key when it was started with ``--api-key`` (default: the first
    of ``SYNCHECK_API_KEY``, else a placeholder).
    """

    temperature: Optional[float] = Field(default=None, ge=0.0, le=2.0,
                                         description="None: greedy for monitor, 1.0 for FOD's candidates")

    def __init__(self, api_base: str, model: str, *, api_key: str | None = None, temperature: Optional[float] = None,
                 is_chat_model: bool = True, **kwargs: Any) -> None:
        # temperature is passed on: OpenAI's own default is 0.1, which would sample a monitor's answer
        super().__init__(api_base=api_base, model=model, api_key=api_key or default_api_key(), temperature=temperature,
                         is_chat_model=is_chat_model, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "SyncheckLLM"

    def _get_model_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        call = pop_settings(kwargs)
        request = super()._get_model_kwargs(**kwargs)
        if request.get("temperature") is None:
            request.pop("temperature", None)
        request["extra_body"] = self.syncheck_body(call, request.get("extra_body"))
        return request

    def _get_response_token_counts(self, raw_response: Any) -> dict:
        # every response of chat / stream_chat / complete / stream_complete (and async) is built with this
        counts = super()._get_response_token_counts(raw_response)
        syncheck = syncheck_of(raw_response)
        if syncheck:
            counts["syncheck"] = stream_event(syncheck)
        return counts


__all__ = ["SyncheckLLM"]
