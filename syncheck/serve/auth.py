"""API keys: every ``/v1`` route asks for ``Authorization: Bearer KEY`` when the server has keys.

``syncheck serve --api-key KEY`` (several ``--api-key``, or ``SYNCHECK_API_KEY="KEY1 KEY2"``). ``/health`` and
``/metrics`` stay open, as in vLLM. A missing or wrong key gets 401 with an OpenAI-shaped error. Keys are compared in
constant time (each against every key, on their SHA-256 digests, so neither the key nor its length leaks through
timing), and they appear in no log, error or ``repr``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Iterable

from syncheck.serve.protocol import ApiError


class ApiKeys:
    """The keys a server accepts (none: every request is let in)."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._digests = tuple(_digest(k) for k in keys)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def __repr__(self) -> str:
        return f"<ApiKeys: {len(self._digests)} key(s)>"

    def accepts(self, key: str) -> bool:
        """Whether ``key`` is one of the keys, compared in constant time."""
        given = _digest(key)
        found = False
        for digest in self._digests:  # no early exit: the time does not say which key matched
            found |= hmac.compare_digest(given, digest)
        return found

    def check(self, authorization: str | None) -> None:
        """Raise the 401 for an ``Authorization`` header that carries no accepted key (nothing without keys)."""
        if not self._digests:
            return
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise unauthorized("no API key given: send it as the header Authorization: Bearer KEY (the openai "
                               "client's api_key=, ChatSyncheck's and SyncheckLLM's api_key=)")
        if not self.accepts(key.strip()):
            raise unauthorized("the API key is not accepted here: send one of the keys the server was started with "
                               "(--api-key or SYNCHECK_API_KEY)")


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


__all__ = ["ApiKeys", "unauthorized"]
