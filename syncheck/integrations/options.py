"""What the framework integrations share: syncheck's request fields, checked before a request is sent.

A request to ``syncheck serve`` carries the retrieved passages in a top-level ``documents`` field and the settings
in a ``syncheck`` object; OpenAI clients send both through ``extra_body``. Neither framework is imported here.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

#: the server's methods (``syncheck.serve.decoders``: the monitor and the decoders fod registers)
METHODS = ("monitor", "fod", "abstain")
#: the keys of the request's ``syncheck`` object (``syncheck.serve.protocol.SyncheckOptions``)
SETTINGS = ("method", "tau1", "tau2", "num_samples", "num_beams", "max_sentences", "final_check", "features")


def default_api_key() -> str:
    """The ``api_key`` a chat model sends when it is given none: the first of ``SYNCHECK_API_KEY`` (the variable
    ``syncheck serve`` reads its keys from), else a placeholder, for a server started without keys."""
    keys = os.environ.get("SYNCHECK_API_KEY", "").split()
    return keys[0] if keys else "unused"


def missing_extra(extra: str, package: str) -> ImportError:
    """The error for an integration whose framework is not installed."""
    return ImportError(f"syncheck.integrations.{extra} needs {package}, which is not installed: "
                       f"pip install 'syncheck[{extra}]'")


def check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not a syncheck method: choose one of {', '.join(METHODS)}")
    return method


def pop_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take a call's syncheck keywords (``documents`` and :data:`SETTINGS`) out of its keywords."""
    return {key: kwargs.pop(key) for key in ("documents", *SETTINGS) if key in kwargs}


def document_text(doc: Any) -> str:
    """A passage's text: a string, a LangChain ``Document`` (``page_content``) or a LlamaIndex node (get_content)."""
    if isinstance(doc, str):
        return doc
    if isinstance(getattr(doc, "page_content", None), str):
        return doc.page_content
    if callable(getattr(doc, "get_content", None)):
        return doc.get_content()
    raise TypeError(f"documents= takes strings, LangChain Documents or LlamaIndex nodes, not {type(doc).__name__}")


def extra_body(model: Mapping[str, Any], call: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> dict:
    """The request's ``extra_body``: ``base`` (the user's own) with the documents and the settings that are not None,
    a call's over the model's.

    Raises:
        ValueError: no documents in the call or the model, or an unknown method.
    """
    given = {**{k: v for k, v in model.items() if v is not None}, **{k: v for k, v in call.items() if v is not None}}
    documents = given.pop("documents", None)
    if isinstance(documents, str):
        raise ValueError("documents= takes a list of passages, not one string: documents=[text]")
    texts = [document_text(d) for d in documents or ()]
    if not any(t.strip() for t in texts):
        raise ValueError("no documents to check the answer against: pass the retrieved passages as documents=[...] "
                         "to the model's constructor or to the call (llm.invoke / llm.chat(..., documents=[...]))")
    check_method(given.get("method", "monitor"))
    body = dict(base or {})
    body["documents"] = texts
    body["syncheck"] = {**body.get("syncheck", {}), **given}
    return body


def syncheck_of(response: Any) -> dict[str, Any] | None:
    """The ``syncheck`` object of a reply or chunk: a dict, or an ``openai`` object (an extra field there)."""
    if isinstance(response, dict):
        return response.get("syncheck")
    return (getattr(response, "model_extra", None) or {}).get("syncheck")


def stream_event(syncheck: Mapping[str, Any]) -> dict[str, Any]:
    """A stream chunk's ``syncheck`` object with its sentence as a one-item ``sentences`` list.

    LangChain adds up a stream's chunks (``merge_dicts``), and two ``{"sentence": {...}}`` objects cannot be added
    (their scores are floats); lists are concatenated, so the chunks of a reply add up to its ``syncheck`` object:
    ``sentences`` and the final summary, as ``invoke`` gives it.
    """
    if "sentence" not in syncheck:
        return dict(syncheck)
    return {**{k: v for k, v in syncheck.items() if k != "sentence"}, "sentences": [syncheck["sentence"]]}


__all__ = ["METHODS", "SETTINGS", "check_method", "default_api_key", "document_text", "extra_body", "missing_extra",
           "pop_settings", "stream_event", "syncheck_of"]
