"""When a sentence of a growing response is finished: the live emission policy.

A sentence is complete once a visible character of the next one exists, so its token range can no longer change;
when generation stops (``final``) the last one is complete too. :meth:`syncheck.live.state.Row.pending_sentences`
applies it to a row; :meth:`~syncheck.live.monitor.Monitor.score_finished` scores what it returns and records it with
:meth:`~syncheck.live.state.Row.emit_sentences`.
"""

from __future__ import annotations

import numpy as np

from features.sentences import Span, assign_tokens, split_sentences


def complete_sentences(text: str, offsets: np.ndarray, emitted_chars: int, emitted_tokens: int,
                       final: bool) -> list[tuple[Span, int, int]]:
    """The complete sentences of ``text`` after the emitted ones (all of them when ``final``).

    Args:
        text: the response so far.
        offsets: ``(T, 2)`` each token's character span in ``text``.
        emitted_chars, emitted_tokens: where the sentences already emitted end (characters, tokens).
        final: generation stopped: the last sentence is complete too.

    Returns:
        ``(span, t0, t1)`` per sentence: its span in response coordinates and its token range (never empty).
    """
    tail = text[emitted_chars:]
    spans = [Span(s.text, s.start + emitted_chars, s.end + emitted_chars) for s in split_sentences(tail)]
    if not spans:
        return []
    ranges = assign_tokens(text, offsets[emitted_tokens:], spans)
    ranges = [(t0 + emitted_tokens, t1 + emitted_tokens) for t0, t1 in ranges]
    done = spans if final else spans[:-1]
    return [(sp, t0, t1) for sp, (t0, t1) in zip(done, ranges) if t1 > t0]


__all__ = ["complete_sentences"]
