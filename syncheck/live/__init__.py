"""The live stage: decoding with per-token SynCheck statistics: the engine, the monitor and the pool on it, FOD's beams.

A :class:`Batch` holds ``B`` hypotheses (:class:`Row`) that share a prefix length: one with-context KV cache and
one without-context KV cache, both ``(B, ...)``. Each :meth:`LiveEngine.step` picks one token per row (greedy,
sampling or forced), records its log-probability and normalised entropy under the with-context distribution (and,
when asked, each head's lookback ratio at the forward that produced that distribution), and feeds it (capturing
the hidden states LID and the probe need). The without-context pass is deferred to sentence ends
(:meth:`LiveEngine.flush_kl`).

Modules:

- :mod:`~syncheck.live.state`: :class:`Row` and :class:`Batch`, and the only methods that change them;
- :mod:`~syncheck.live.emission`: when a sentence is finished (the emission policy);
- :mod:`~syncheck.live.engine`: :class:`LiveEngine` (prefill, choose, step);
- :mod:`~syncheck.live.deferred_kl`: the without-context pass at sentence ends (KL, PMI, boundaries);
- :mod:`~syncheck.live.background`: that pass's forward on a worker thread beside decoding (the monitor on CPU);
- :mod:`~syncheck.live.branching`: select, cut, expand and merge over the caches (FOD's beams);
- :mod:`~syncheck.live.monitor`: :class:`~syncheck.live.monitor.Monitor`, generation with per-sentence scores;
- :mod:`~syncheck.live.pool`: :class:`~syncheck.live.pool.DecodePool`, the decode steps of independent runs in one
  batched forward (the server's streams);
- :mod:`~syncheck.live.logits_processor`: the monitor as a ``transformers`` ``LogitsProcessor``.

The package's own names (``LiveEngine``, ``Batch``, ``Row``, ...) are imported from their modules when first asked
for, so importing one module of this package (``syncheck.live.monitor``, say) does not import the others first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syncheck._lazy import lazy_getattr

if TYPE_CHECKING:
    from syncheck.live.branching import ended_view
    from syncheck.live.emission import complete_sentences
    from syncheck.live.engine import LiveEngine
    from syncheck.live.state import Batch, Boundary, Row
    from syncheck.model.passes import capture_hidden, decode_offsets, decoder_layers

_LAZY = {
    "Batch": "syncheck.live.state",
    "Boundary": "syncheck.live.state",
    "Row": "syncheck.live.state",
    "LiveEngine": "syncheck.live.engine",
    "complete_sentences": "syncheck.live.emission",
    "ended_view": "syncheck.live.branching",
    "capture_hidden": "syncheck.model.passes",
    "decode_offsets": "syncheck.model.passes",
    "decoder_layers": "syncheck.model.passes",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = ["Batch", "Boundary", "LiveEngine", "Row", "capture_hidden", "complete_sentences", "decode_offsets",
           "decoder_layers", "ended_view"]
