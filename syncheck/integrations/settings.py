"""The fields both integrations' chat models add to their framework's: the documents and syncheck's settings.

A pydantic mixin, as both frameworks' models are pydantic models; only the integration modules import it, after
their framework.
"""

from __future__ import annotations

from typing import Any, List, Optional

from pydantic import BaseModel, Field, field_validator

from syncheck.integrations.options import SETTINGS, check_method, extra_body


class SyncheckSettings(BaseModel):
    """What a ``syncheck serve`` request carries besides the chat.

    Args:
        documents: the retrieved passages (strings, LangChain ``Document`` objects or LlamaIndex nodes); a call's
            ``documents=`` replaces them. A request needs them in one of the two.
        method: ``"monitor"`` (generate and score), ``"fod"`` (faithfulness-oriented decoding; it samples, so
            leave ``temperature`` unset or above 0) or ``"abstain"``.
        tau1, tau2, num_samples, num_beams, max_sentences, final_check, features: the request's ``syncheck``
            settings (README, "Serving"); None leaves the server's default.

    Each can also be given per call, as a keyword (``documents=[...], method="fod", tau1=0.4``).
    """

    documents: Optional[List[Any]] = Field(default=None, description="the retrieved passages")
    method: str = Field(default="monitor", description="monitor, fod or abstain")
    tau1: Optional[float] = Field(default=None, description="backtrack (fod) / abstention (abstain) threshold")
    tau2: Optional[float] = Field(default=None, description="pruning threshold (fod)")
    num_samples: Optional[int] = Field(default=None, description="FOD's candidates per step")
    num_beams: Optional[int] = Field(default=None, description="FOD's beams")
    max_sentences: Optional[int] = Field(default=None, description="FOD's sentence limit")
    final_check: Optional[bool] = Field(default=None, description="run the Provenance check on the answer")
    features: Optional[bool] = Field(default=None, description="send each sentence's features with its score")

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        return check_method(value)

    def syncheck_body(self, call: dict[str, Any], base: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """The request's ``extra_body``: ``base`` with the documents and settings, ``call``'s over this model's."""
        return extra_body({key: getattr(self, key) for key in ("documents", *SETTINGS)}, call, base)


__all__ = ["SyncheckSettings"]
