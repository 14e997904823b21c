"""What every decoding method returns and streams: the result and event types the monitor uses too
(:mod:`syncheck.live.generation`), and the abstention text."""

from __future__ import annotations

from syncheck.live.generation import GenerationResult, Repair, SentenceEvent, StopReason

#: Text returned by the abstention baseline when it refuses.
ABSTAIN_TEXT = "I cannot answer this faithfully from the given context."

#: what FOD's ``callback`` received before every decoder streamed :class:`SentenceEvent` (its earlier name; it has
#: the same ``index``, ``sentence`` and ``text``)
AcceptedSentence = SentenceEvent

__all__ = ["ABSTAIN_TEXT", "AcceptedSentence", "GenerationResult", "Repair", "SentenceEvent", "StopReason"]
