"""A fixed, seeded train/test split by record that does not depend on how many records are loaded.

:func:`benchmarks.halueval.data.split_by_record` shuffles the records it is
given, so the side a record lands on changes with ``--limit``. The benchmark
needs more: the default aggregator is trained on the train side of one run and
evaluated on the test side of runs with other limits, and the QA records behind
the distractor pairs, the sentence-level set and raw QA must land on the same
side everywhere. So the side is a hash of ``(seed, subset, record)``.
"""

from __future__ import annotations

import hashlib
from typing import Sequence, TypeVar

T = TypeVar("T")


def is_test(subset: str, record: int, seed: int = 0, test_fraction: float = 0.5) -> bool:
    """Whether record ``record`` of ``subset`` is on the test side (stable across limits and runs)."""
    digest = hashlib.sha256(f"halueval-split/{seed}/{subset}/{record}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < test_fraction


def split_items(items: Sequence[T], seed: int = 0, test_fraction: float = 0.5) -> tuple[list[T], list[T]]:
    """``(train, test)`` of items with ``subset`` and ``record`` attributes."""
    train, test = [], []
    for it in items:
        (test if is_test(it.subset, it.record, seed, test_fraction) else train).append(it)
    return train, test
