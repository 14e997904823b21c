"""Writing scored rows as JSON Lines, and resuming an interrupted run.

Both runners (``syncheck.runners.local`` and ``syncheck.runners.ray_runner``)
hand their rows, in input order, to one :class:`RowWriter`, so the file format
and the resume rules live here only.

Rows are committed one scoring batch at a time (one ``write`` + ``flush`` per
``group_size`` rows, counted from the first input row), so an interrupted run
leaves whole batches on disk. ``syncheck score --resume`` keeps the complete
rows, checks their ids against the input, and restarts on the batch boundary
at or before them: the resumed rows are scored in the same batches as in an
uninterrupted run, so the output is byte-for-byte the same (features depend on
batch composition in their last bits, through padding). Rows of a half-written
batch that are already in the file are recomputed for that, never written twice.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO, Any, Iterable, Sequence


class ResumeError(ValueError):
    """The existing output cannot be continued; the message says what to do."""


def non_finite_fields(row: dict[str, Any]) -> list[str]:
    """Where ``row`` holds a missing or non-finite number that must be finite.

    Checks every sentence's features and ``score`` and the row's
    ``response_score`` / ``factuality``. A ``null`` feature is reported too:
    results.py turns NaN into ``null``, and a silent ``null`` is never a
    valid feature value.
    """
    bad: list[str] = []
    for i, sent in enumerate(row.get("sentences") or []):
        for name, value in (sent.get("features") or {}).items():
            if not _is_finite_number(value):
                bad.append(f"sentence {i + 1} feature {name}")
        if "score" in sent and not _is_finite_number(sent["score"]):
            bad.append(f"sentence {i + 1} score")
    for key in ("response_score", "factuality"):
        if key in row and row[key] is not None and not _is_finite_number(row[key]):
            bad.append(key)
    return bad


def _is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def guard_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row``, or an error row in its place when it holds a NaN/infinite/null number.

    A NaN feature must never reach a user as a silent ``null``: the row keeps
    its id and warnings, loses its sentences, and says which value broke.
    """
    if row.get("error") is not None:
        return row
    bad = non_finite_fields(row)
    if not bad:
        return row
    emptied = {"sentences": [], "response_score": None, "factuality": None, "sources": [], "best_source": None}
    return {
        **{k: v for k, v in row.items() if k not in emptied},
        **{k: v for k, v in emptied.items() if k in row or k == "sentences"},
        "id": row.get("id"),
        "warnings": list(row.get("warnings") or []),
        "error": (
            f"non-finite value (NaN or infinity) in {', '.join(bad[:5])}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            + "; the model produced invalid numbers for this row: check the model's weights and dtype "
            "(float16 overflows on CPU: try --dtype float32)"
        ),
    }


def dumps_row(row: dict[str, Any]) -> str:
    """One JSON line (with its newline). Never emits NaN; a lone surrogate is written \\u-escaped.

    Every command writes its rows with this (after :func:`guard_row`): one NaN policy, one writer.
    """
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(row, ensure_ascii=True, allow_nan=False)
    return text + "\n"


class RowWriter:
    """Writes rows in order, committing ``group_size`` rows per write + flush.

    Args:
        out: an open text stream (the output file or standard output).
        group_size: rows per commit; pass the scoring batch size.
        start: rows already in the file (after :func:`prepare_resume`); groups
            are counted from the first input row, so a resumed run commits on
            the same boundaries as an uninterrupted one.
    """

    def __init__(self, out: IO[str], group_size: int = 1, start: int = 0) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.out = out
        self.group_size = group_size
        self.written = start
        self.errors = 0
        self._pending: list[str] = []

    def write(self, row: dict[str, Any]) -> dict[str, Any]:
        """Queue one row (after :func:`guard_row`); returns the row as written."""
        row = guard_row(row)
        self._pending.append(dumps_row(row))
        self.written += 1
        self.errors += row.get("error") is not None
        if self.written % self.group_size == 0:
            self.flush()
        return row

    def write_all(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.write(row)
        self.flush()

    def flush(self) -> None:
        if self._pending:
            self.out.write("".join(self._pending))
            self._pending.clear()
        self.out.flush()


def complete_rows(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The complete rows of an existing output file and their length in bytes.

    A last line without its newline (a run killed mid-write) is dropped. Any
    other line that is not a JSON object means the file was edited or is not
    syncheck output: :class:`ResumeError`.
    """
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1  # bytes up to and including the last newline
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(data[:end].split(b"\n")[:-1], 1):
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResumeError(
                f"{path} line {n} is not a JSON row ({exc}); it was not written by an interrupted "
                "`syncheck score`: fix or delete the file, or drop --resume to start over"
            ) from None
        if not isinstance(row, dict) or "id" not in row:
            raise ResumeError(f"{path} line {n} is not a syncheck row (no 'id'); drop --resume to start over")
        rows.append(row)
    return rows, end


def prepare_resume(path: Path, input_ids: Sequence[Any]) -> int:
    """Check an interrupted output against its input and cut it to its complete rows.

    Args:
        path: the output file of the interrupted run (missing = nothing done).
        input_ids: the id each input row gets in the output, in input order
            (``None`` for rows whose id cannot be read).

    Returns:
        The number of input rows already scored; the caller skips that many
        and appends the rest.

    Raises:
        ResumeError: the output has more rows than the input, or a row's id
            differs from the input row at the same position.
    """
    if not path.exists():
        return 0
    rows, keep_bytes = complete_rows(path)
    if len(rows) > len(input_ids):
        raise ResumeError(
            f"{path} has {len(rows)} rows but the input has only {len(input_ids)}; "
            "it was written from another input: drop --resume or pick another output file"
        )
    for n, (row, expected) in enumerate(zip(rows, input_ids), 1):
        if row["id"] != expected or type(row["id"]) is not type(expected):
            raise ResumeError(
                f"{path} row {n} has id {json.dumps(row['id'])} but input row {n} has id {json.dumps(expected)}; "
                "the output was written from another input: drop --resume or pick another output file"
            )
    if keep_bytes < path.stat().st_size:
        with open(path, "r+b") as f:
            f.truncate(keep_bytes)
    return len(rows)


def output_id(item: Any) -> Any:
    """The id the output row of an input item (a ``Record`` or ``RecordError``) carries."""
    return item.record_id if hasattr(item, "record_id") else item.id
