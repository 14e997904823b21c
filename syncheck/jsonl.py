"""Reading JSON-lines files: one JSON value a line, blank lines skipped.

:func:`iter_jsonl` is the plain reader for data files and caches. It is not the record parser of the CLIs
(:func:`syncheck.records.read_jsonl`, which checks each record and reports bad lines as rows), nor the resume reader
of an interrupted output (:func:`syncheck.io.complete_rows`, which drops a half-written last line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def iter_jsonl(path: str | Path) -> Iterator[Any]:
    """The JSON value of each non-blank line of ``path`` (UTF-8), in order, read lazily.

    A line that is not JSON raises :class:`ValueError` naming the file and the line (1-based).
    """
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {n} is not JSON: {exc}") from None


__all__ = ["iter_jsonl"]
