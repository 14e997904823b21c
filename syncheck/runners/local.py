"""The local runner (``--engine local``): one :class:`~syncheck.scorer.Scorer` in this process."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from syncheck.records import Record, RecordError


def score_local(items: Iterable[Record | RecordError], scorer_kwargs: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Score ``items`` in order; yields one JSON row per item.

    Args:
        items: records (and record errors, which become error rows).
        scorer_kwargs: keyword arguments of :class:`~syncheck.scorer.Scorer`;
            its ``batch_size`` sets how many records share a forward pass.
    """
    from syncheck.scorer import Scorer

    scorer = Scorer(**dict(scorer_kwargs))
    for result in scorer.score_records(items):
        yield result.to_json(vectors=bool(scorer_kwargs.get("vectors")))
