"""Reading JSON-lines files: one JSON value a line, blank lines skipped. The library's one JSONL reader.

:func:`parse_jsonl` reads lines (text or bytes) into ``(line number, value)``, with a :class:`JSONLineError` as the
value of a line that is not one JSON value, so each caller decides what a bad line means: :func:`iter_jsonl` (data
files and caches) raises, ``syncheck report`` keeps the row's place, ``syncheck train`` stops with the line to fix,
the labelled-record reader lists it, and the record parser of the CLIs (:func:`syncheck.records.read_jsonl`) turns
it into an error row. (The resume reader of an interrupted output, :func:`syncheck.io.complete_rows`, reads whole
rows of syncheck's own output and drops a half-written last line; it is no JSONL reader of inputs.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

#: what a blank line of a JSONL file may hold (JSON's whitespace, and what ``bytes.strip`` also takes: \v, \f)
_BLANK = " \t\n\r\x0b\x0c"


class JSONLineError(ValueError):
    """A line that is not one JSON value: its 1-based ``line_no`` and the ``reason``."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"line {line_no}: not valid JSON ({reason})")
        self.line_no = line_no
        self.reason = reason


def is_blank(line: str | bytes) -> bool:
    """Whether a JSONL line is blank (skipped, no output row). Other Unicode whitespace is not blank: a line of it
    is not JSON, and gets an error row."""
    return not line.strip(_BLANK.encode() if isinstance(line, bytes) else _BLANK)


def load_json(text: str | bytes) -> Any:
    """``json.loads(text)``; any text that is not one JSON value raises ``ValueError`` saying why: the parser's
    reason and where, nesting too deep for the parser, or an integer too long for Python to convert.

    (``json.loads`` itself raises ``RecursionError`` for deep nesting and a plain ``ValueError`` for an integer of
    more than :func:`sys.get_int_max_str_digits` digits: a one-line input could stop a whole run.)
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        reason = f"{exc.msg} at {where}"
    except UnicodeDecodeError as exc:  # bytes that are not UTF-8 (or -16, -32)
        reason = f"not UTF-8 (byte {exc.start}: {exc.reason})"
    except RecursionError:
        reason = "arrays or objects nested too deeply"
    except ValueError:  # int() refuses the digits
        reason = f"an integer of more than {sys.get_int_max_str_digits()} digits"
    raise ValueError(reason)


def parse_jsonl(lines: Iterable[str | bytes]) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line (1-based), in order; the value of a line that is not JSON
    is a :class:`JSONLineError` (returned, not raised)."""
    for line_no, line in enumerate(lines, 1):
        if is_blank(line):
            continue
        try:
            yield line_no, load_json(line)
        except ValueError as exc:
            yield line_no, JSONLineError(line_no, str(exc))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """:func:`parse_jsonl` over the lines of the file ``path`` (read as bytes: a line that is not UTF-8 is a bad
    line, not the end of the file), read lazily. A path ending in ``.gz`` is read through gzip."""
    import gzip

    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        yield from parse_jsonl(f)


def iter_jsonl(path: str | Path) -> Iterator[Any]:
    """The JSON value of each non-blank line of ``path`` (UTF-8), in order, read lazily.

    A line that is not JSON raises :class:`ValueError` naming the file and the line (1-based).
    """
    for line_no, value in read_jsonl(path):
        if isinstance(value, JSONLineError):
            raise ValueError(f"{path} line {line_no} is not JSON: {value.reason}")
        yield value


__all__ = ["JSONLineError", "is_blank", "iter_jsonl", "load_json", "parse_jsonl", "read_jsonl"]
