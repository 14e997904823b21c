"""Live decoding with per-token SynCheck statistics: the engine under the monitor, the pool and FOD.

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
- :mod:`~syncheck.live.branching`: select, cut, expand and merge over the caches (FOD's beams).
"""

from __future__ import annotations

from syncheck.live.branching import ended_view
from syncheck.live.emission import complete_sentences
from syncheck.live.engine import LiveEngine
from syncheck.live.state import Batch, Boundary, Row
from syncheck.passes import capture_hidden, decode_offsets, decoder_layers

__all__ = ["Batch", "Boundary", "LiveEngine", "Row", "capture_hidden", "complete_sentences", "decode_offsets",
           "decoder_layers", "ended_view"]
