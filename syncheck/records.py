"""Input records and their validation.

A record is one JSON object: ``{"id": ..., "context": str | [str, ...],
"question": str (optional), "response": str}``. A question to answer
(``fod generate --input``) has the same shape with the question required and
no response. Validation errors say what is wrong and how to fix it; they never
stop the other records.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator

from syncheck.jsonl import is_blank, load_json


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
    """One input row: the text to score (``response``; empty for a question to answer) with its context."""

    id: Any
    context: str | tuple[str, ...]
    response: str
    question: str | None = None
    warnings: tuple[str, ...] = ()  # notes found while reading (e.g. a duplicate id); copied to the output row


def parse_record(obj: Any, line_no: int | None = None, *, to_answer: bool = False) -> Record:
    """Validate one decoded JSON value and turn it into a :class:`Record`.

    Args:
        to_answer: the record is a question to answer, not a response to score: ``question`` is required and
            ``context`` must hold text, and a ``response`` field is ignored (the record's ``response`` is ``""``).

    Raises:
        RecordError: what to fix; its ``record_id`` is the record's id when one can be read.
    """
    try:
        return _parse_record(obj, line_no, to_answer)
    except RecordError as exc:
        exc.record_id = _lenient_id(obj) if isinstance(obj, dict) else None
        raise


def _parse_record(obj: Any, line_no: int | None, to_answer: bool) -> Record:
    where = f"line {line_no}: " if line_no is not None else ""
    if not isinstance(obj, dict):
        wanted = "question" if to_answer else "response"
        raise RecordError(f"{where}expected a JSON object with 'context' and '{wanted}', got {type(obj).__name__}")
    rid = obj.get("id", line_no)
    if isinstance(rid, (dict, list)):
        raise RecordError(f"{where}'id' must be a string or number, got {type(rid).__name__}")
    if isinstance(rid, float) and not math.isfinite(rid):
        raise RecordError(f"{where}'id' must be a finite number or a string, got {rid}")
    if "response" not in obj and not to_answer:
        raise RecordError(f"{where}missing 'response': add the text to score as \"response\": \"...\"")
    if "context" not in obj:
        raise RecordError(f"{where}missing 'context': add the retrieved text as \"context\": \"...\" or "
                          "[\"chunk\", ...]")
    response, context, question = "" if to_answer else obj["response"], obj["context"], obj.get("question")
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
    if to_answer:
        if question is None or not question.strip():
            raise RecordError(f"{where}{'empty' if question is not None else 'missing'} 'question': add the question "
                              "to answer as \"question\": \"...\"")
        if not has_text(context):
            raise RecordError(f"{where}empty 'context': add the retrieved text the answer must come from as "
                              "\"context\": \"...\" or [\"chunk\", ...]")
    texts = {"id": rid, "response": response, "question": question}
    texts.update({"context" if isinstance(context, str) else f"context[{i}]": c
                  for i, c in enumerate([context] if isinstance(context, str) else context)})
    for name, text in texts.items():
        problem = lone_surrogate(text) if isinstance(text, str) else None
        if problem is not None:
            raise RecordError(f"{where}{name!r} {problem}; fix the program that wrote the file (it split a character's "
                              "escape pair)")
    return Record(id=rid, context=context, response=response, question=question)


def read_jsonl(lines: Iterable[str | bytes], *, to_answer: bool = False) -> Iterator[tuple[int, Record | RecordError]]:
    """Yield ``(line_no, record or error)`` for every non-blank line, 1-based.

    Lines may be ``bytes`` (read in binary mode): a line that is not UTF-8
    becomes an error row instead of stopping the whole file. A record whose
    id an earlier line already used carries a warning naming that line.
    ``to_answer``: the lines are questions to answer (see :func:`parse_record`).
    """
    first_line: dict[Any, int] = {}
    for line_no, line in enumerate(lines, 1):
        if is_blank(line):
            continue
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield line_no, RecordError(
                    f"line {line_no}: not valid UTF-8 (byte {exc.start}: {exc.reason}); re-encode the file as UTF-8",
                    record_id=_lenient_id(line.decode("utf-8", errors="replace")),
                )
                continue
        try:
            obj = load_json(line)
        except ValueError as exc:
            yield line_no, RecordError(f"line {line_no}: not valid JSON ({exc}); fix the line")
            continue
        try:
            rec = parse_record(obj, line_no, to_answer=to_answer)
        except RecordError as exc:
            yield line_no, exc
            continue
        key = (isinstance(rec.id, str), rec.id)
        if key in first_line:
            rec = replace(rec, warnings=rec.warnings + (
                f"duplicate id {json.dumps(rec.id)}: line {first_line[key]} already used it; "
                "give every row its own id so scores can be joined back to their inputs",))
        else:
            first_line[key] = line_no
        yield line_no, rec


def has_text(context: str | Iterable[str]) -> bool:
    """Whether a context (one text, or its chunks) holds anything but whitespace."""
    return any(c.strip() for c in ([context] if isinstance(context, str) else context))


def lone_surrogate(text: str) -> str | None:
    """What is wrong with ``text`` when it holds an unpaired UTF-16 surrogate (JSON can smuggle one in as an
    escape), e.g. ``"holds an unpaired UTF-16 surrogate escape (\\ud800 at character 3), which is not text"``; else
    None."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        return (f"holds an unpaired UTF-16 surrogate escape (\\u{ord(text[exc.start]):04x} at character {exc.start}), "
                "which is not text")


def script_warning(text: str) -> str | None:
    """A warning when most letters of ``text`` are not Latin script (the splitter is English-trained)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    other = sum(not unicodedata.name(c, "").startswith("LATIN") for c in letters)
    if other <= len(letters) / 2:
        return None
    return (
        "most letters of the response are not Latin script: the sentence splitter is trained on English, so "
        "sentence boundaries may be off (features are still computed); split the sentences yourself if they matter"
    )


def _lenient_id(obj: Any) -> Any:
    """The id of a row that failed validation, when one can be read."""
    if isinstance(obj, str):
        try:
            obj = load_json(obj)
        except ValueError:
            return None
    rid = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(rid, float) and not math.isfinite(rid):
        return None
    if isinstance(rid, str) and lone_surrogate(rid) is not None:
        return rid.encode("utf-8", errors="replace").decode("utf-8")
    return rid if isinstance(rid, (str, int, float)) else None
