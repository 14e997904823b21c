"""Input records and their validation.

A record is one JSON object: ``{"id": ..., "context": str | [str, ...],
"question": str (optional), "response": str}``. Validation errors say what is
wrong and how to fix it; they never stop the other records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator


class RecordError(ValueError):
    """A record that cannot be scored; the message says how to fix it.

    ``record_id`` is the record's id when it could be read, so the output row
    can still carry it.
    """

    def __init__(self, message: str, record_id: Any = None) -> None:
        super().__init__(message)
        self.record_id = record_id


@dataclass(frozen=True)
class Record:
    id: Any
    context: str | tuple[str, ...]
    response: str
    question: str | None = None


def parse_record(obj: Any, line_no: int | None = None) -> Record:
    """Validate one decoded JSON value and turn it into a :class:`Record`."""
    where = f"line {line_no}: " if line_no is not None else ""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}expected a JSON object with 'context' and 'response', got {type(obj).__name__}")
    rid = obj.get("id", line_no)
    if isinstance(rid, (dict, list)):
        raise RecordError(f"{where}'id' must be a string or number, got {type(rid).__name__}")
    if "response" not in obj:
        raise RecordError(f"{where}missing 'response': add the text to score as \"response\": \"...\"")
    if "context" not in obj:
        raise RecordError(f"{where}missing 'context': add the retrieved text as \"context\": \"...\" or [\"chunk\", ...]")
    response, context, question = obj["response"], obj["context"], obj.get("question")
    if not isinstance(response, str):
        raise RecordError(f"{where}'response' must be a string, got {type(response).__name__}")
    if isinstance(context, list):
        if not all(isinstance(c, str) for c in context):
            raise RecordError(f"{where}'context' as a list must hold only strings (one per retrieved chunk)")
        context = tuple(context)
    elif not isinstance(context, str):
        raise RecordError(f"{where}'context' must be a string or a list of strings, got {type(context).__name__}")
    if question is not None and not isinstance(question, str):
        raise RecordError(f"{where}'question' must be a string or absent, got {type(question).__name__}")
    return Record(id=rid, context=context, response=response, question=question)


def read_jsonl(lines: Iterable[str | bytes]) -> Iterator[tuple[int, Record | RecordError]]:
    """Yield ``(line_no, record or error)`` for every non-blank line, 1-based.

    Lines may be ``bytes`` (read in binary mode): a line that is not UTF-8
    becomes an error row instead of stopping the whole file.
    """
    for line_no, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield line_no, RecordError(
                    f"line {line_no}: not valid UTF-8 (byte {exc.start}: {exc.reason}); re-encode the file as UTF-8",
                    record_id=_lenient_id(line.decode("utf-8", errors="replace")),
                )
                continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield line_no, RecordError(f"line {line_no}: not valid JSON ({exc.msg} at column {exc.colno}); fix the line")
            continue
        try:
            yield line_no, parse_record(obj, line_no)
        except RecordError as exc:
            exc.record_id = _lenient_id(obj)
            yield line_no, exc


def _lenient_id(obj: Any) -> Any:
    """The id of a row that failed validation, when one can be read."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError:
            return None
    rid = obj.get("id") if isinstance(obj, dict) else None
    return rid if isinstance(rid, (str, int, float)) else None
