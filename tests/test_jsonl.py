"""syncheck.jsonl.iter_jsonl: the plain JSON-lines reader of data files and caches."""

from __future__ import annotations

import pytest

from syncheck.jsonl import iter_jsonl


def test_reads_each_value_in_order_and_skips_blank_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1, "text": "caf\u00e9 \u2028 ok"}\n\n  \n[2, 3]\n{"id": "x"}', encoding="utf-8")
    assert list(iter_jsonl(path)) == [{"id": 1, "text": "caf\u00e9 \u2028 ok"}, [2, 3], {"id": "x"}]
    assert list(iter_jsonl(str(path)))[0]["id"] == 1


def test_a_bad_line_names_the_file_and_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2\n', encoding="utf-8")
    rows = iter_jsonl(path)
    assert next(rows) == {"id": 1}
    with pytest.raises(ValueError, match=r"rows\.jsonl line 3 is not JSON"):
        next(rows)
