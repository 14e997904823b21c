"""The OpenAI chat-completions wire format, with syncheck's additions (``documents``, ``syncheck``).

Request validation lives here (pydantic), so every bad request gets one
OpenAI-style error object that names the field and says how to fix it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from syncheck.decoding import REPAIR_SAMPLING, SEED_RANGE, Decoding
from syncheck.io import guard_row
from syncheck.records import load_json, lone_surrogate
from syncheck.serve.config import MAX_BODY_BYTES


class ApiError(Exception):
    """An OpenAI-style error: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, *, param: str | None = None, type: str = "invalid_request_error",
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = status, message, param, type, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self, record: Any = None):
        """The error as its JSON response; ``record`` (the request's
        :class:`~syncheck.serve.observe.RequestRecord`) keeps its kind for the metrics and logs."""
        from starlette.responses import JSONResponse

        if record is not None:
            record.error = self.code or self.type
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    async def answer(self, scope: dict, receive: Any, send: Any) -> None:
        """Answer an ASGI request with the error (a middleware's refusal); its record keeps the error's kind."""
        await self.response(scope.get("state", {}).get("record"))(scope, receive, send)


def _text(value: str) -> str:
    problem = lone_surrogate(value)
    if problem is not None:  # the tokenizer cannot take it
        raise ValueError(f"{problem}; the client split a character's escape pair")
    return value


#: a string the model reads (its tokenizer takes only real text)
Text = Annotated[str, AfterValidator(_text)]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: Text | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, value):
        return _text(value) if isinstance(value, str) else value

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text or "" for p in self.content if p.type == "text")


class SyncheckOptions(BaseModel):
    """The request's ``"syncheck"`` object."""

    model_config = ConfigDict(extra="forbid")
    method: str = Field("monitor", max_length=64, description="monitor, or a registered decoder (fod, abstain)")
    tau1: float | None = Field(None, ge=0, le=1, description="backtrack (fod) / abstention (abstain) threshold")
    tau2: float | None = Field(None, ge=0, le=1, description="pruning threshold (fod)")
    # the server caps each (ServerConfig's num_samples_cap, num_beams_cap, max_sentences_cap)
    num_samples: int = Field(6, ge=1, description="FOD's sampled candidates per step")
    num_beams: int = Field(2, ge=1, description="FOD's beams")
    max_sentences: int = Field(8, ge=1, description="the most sentences FOD or abstention answers with")
    final_check: bool | None = Field(None, description="run the Provenance check on the answer; default: fod/abstain")
    features: bool = Field(True, description="send each sentence's features with its score")


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``. Unknown top-level fields are accepted and ignored, as OpenAI clients send many."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    documents: list[Text] | None = None
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1, description="one choice per request")
    stream_options: dict[str, Any] | None = None
    syncheck: SyncheckOptions = Field(default_factory=SyncheckOptions)

    @field_validator("stop")
    @classmethod
    def _stop(cls, value):
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > 4 or any(not s for s in stops):
            raise ValueError("stop takes up to 4 non-empty strings")
        return stops

    # ------------------------------------------------------------------ meaning
    def question(self) -> str:
        users = [m for m in self.messages if m.role == "user"]
        if not users or not users[-1].text().strip():
            raise ApiError(400, "messages has no user message with text: the last user message is the question "
                                "answered from the documents", param="messages")
        return users[-1].text()

    def ignored_messages(self) -> list[str]:
        """Warnings for messages syncheck's prompt leaves out (it is built from the question and the documents)."""
        users = [i for i, m in enumerate(self.messages) if m.role == "user"]
        left_out = [m.role for i, m in enumerate(self.messages) if not users or i != users[-1]]
        if not left_out:
            return []
        return [f"{len(left_out)} message(s) ({', '.join(sorted(set(left_out)))}) were not given to the model: "
                "syncheck "
                "prompts it with the last user message and the documents, the prompt its scores are calibrated on"]

    def documents_or_error(self) -> list[str]:
        docs = [d for d in (self.documents or []) if d.strip()]
        if not docs:
            raise ApiError(400, "documents is missing or empty: send the retrieved passages as a top-level "
                                "\"documents\": [\"...\", ...] (with the openai client: extra_body={\"documents\": "
                                "[...]}); "
                                "syncheck scores the answer's faithfulness to them", param="documents")
        return docs

    def decoding(self, default_tokens: int) -> Decoding:
        """OpenAI's sampling fields as a :class:`Decoding`; temperature 0 (or unset) is greedy."""
        sampled = bool(self.temperature)
        return Decoding(
            max_new_tokens=self.max_completion_tokens or self.max_tokens or default_tokens,
            do_sample=sampled,
            temperature=self.temperature if sampled else 1.0,
            top_p=self.top_p if (sampled and self.top_p is not None) else 1.0,
            seed=self.seed,
            stop=tuple(self.stop or ()),
        )

    def candidate_decoding(self, default_tokens: int) -> Decoding:
        """FOD's candidate sampling (:data:`~syncheck.decoding.REPAIR_SAMPLING`: temperature 0.7, top-p 0.95)
        unless the request sets them."""
        return Decoding(
            max_new_tokens=self.max_completion_tokens or self.max_tokens or default_tokens,
            do_sample=True,
            temperature=self.temperature or REPAIR_SAMPLING.temperature,
            top_p=self.top_p if self.top_p is not None else REPAIR_SAMPLING.top_p,
            seed=self.seed,
            stop=tuple(self.stop or ()),
        )


# ---------------------------------------------------------------------- reading a request
def body_too_large(size: int | str, limit: int) -> ApiError:
    """The 413 of a body of ``size`` bytes (``"more than N"`` while it streams) over ``limit``."""
    return ApiError(413, f"the request body is {size} bytes; the limit is {limit}: send fewer or shorter documents "
                         "(or fewer records per request)", code="request_too_large")


def parse_body(raw: bytes, limit: int = MAX_BODY_BYTES) -> Any:
    """A request body as JSON, or the 413 / 400 error that says how to fix it. (The servers refuse a larger body
    before reading it, :mod:`syncheck.serve.body`; this checks a body that reached here by other ways.)"""
    if len(raw) > limit:
        raise body_too_large(len(raw), limit)
    try:
        return load_json(raw)
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc}); send a JSON object with "
                            "Content-Type: application/json") from None


def validated(model: type, body: Any):
    """``body`` as ``model`` (a pydantic model), or a 422 that names the field and the fix."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        hint = {"missing": "add it", "extra_forbidden": "remove it (see the README for the accepted fields)"}.get(
            err["type"], "fix its value")
        raise ApiError(422, f"{param}: {err['msg']}; {hint}", param=param,
                       code=err["type"]) from None


# ---------------------------------------------------------------------- responses
def sse(obj: dict[str, Any]) -> str:
    """One server-sent event carrying ``obj``."""
    return f"data: {json.dumps(guard_row(obj), ensure_ascii=False)}\n\n"


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None = None,
          syncheck: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
    if syncheck is not None:
        out["syncheck"] = syncheck
    return out


def completion(cid: str, model: str, created: int, text: str, finish_reason: str, usage: dict[str, int],
               syncheck: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": usage,
        "syncheck": syncheck,
    }


def model_list(model_id: str, created: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model_id, "object": "model", "created": created, "owned_by": "syncheck"}]}


def now() -> int:
    return int(time.time())


__all__ = ["MAX_BODY_BYTES", "ApiError", "ChatRequest", "SyncheckOptions", "body_too_large", "chunk", "completion",
           "completion_id", "model_list", "now", "parse_body", "sse", "validated"]
