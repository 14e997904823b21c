"""Write the README's results table from the index of ``benchmarks/RESULTS.md``, the one source of its figures.

    python -m benchmarks.readme_table            # rewrite README.md's table
    python -m benchmarks.readme_table --check    # exit 1 when README.md's table differs from RESULTS.md's index

The table is the block between ``<!-- results-table:start -->`` and ``<!-- results-table:end -->`` in both files;
in the README its links to RESULTS sections (``(#anchor)``) point into ``benchmarks/RESULTS.md``. A table of more
than :data:`MAX_ROWS` rows, or with a cell longer than :data:`MAX_CELL` characters as the README shows it, is
refused: shorten the index in RESULTS.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"
START, END = "<!-- results-table:start -->", "<!-- results-table:end -->"
MAX_ROWS = 12
MAX_CELL = 200
_BLOCK = re.compile(re.escape(START) + r"\n(.*?)\n?" + re.escape(END), re.S)


def table_block(text: str, where: str) -> str:
    """The lines between the table markers of ``text`` (``where`` names the file in the error)."""
    found = _BLOCK.search(text)
    if found is None:
        raise ValueError(f"{where} has no {START} ... {END} block: put the results table between these markers")
    return found.group(1).strip("\n")


def cells(row: str) -> list[str]:
    """The cells of one Markdown table row (``|`` inside a code span does not split a cell)."""
    out, cell, code = [], "", False
    for ch in row.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            out.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return [*out, cell.strip()]


def readme_table(results_text: str) -> str:
    """The README's table: RESULTS.md's index with its section links pointing into ``benchmarks/RESULTS.md``.

    Raises ``ValueError`` when the table has more than :data:`MAX_ROWS` rows or a cell of more than
    :data:`MAX_CELL` characters."""
    table = re.sub(r"\]\(#", "](benchmarks/RESULTS.md#", table_block(results_text, "benchmarks/RESULTS.md"))
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]  # after the header and its rule
    if len(rows) > MAX_ROWS:
        raise ValueError(f"the results table has {len(rows)} rows; keep at most {MAX_ROWS} in RESULTS.md's index")
    for row in rows:
        for cell in cells(row):
            if len(cell) > MAX_CELL:
                raise ValueError(f"a results-table cell has {len(cell)} characters (at most {MAX_CELL}); shorten it "
                                 f"in RESULTS.md's index: {cell[:80]}...")
    return table


def with_table(readme_text: str, table: str) -> str:
    """``readme_text`` with its results table replaced by ``table``."""
    table_block(readme_text, "README.md")
    return _BLOCK.sub(lambda _: f"{START}\n{table}\n{END}", readme_text, count=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when README.md's table differs; write nothing")
    args = ap.parse_args(argv)
    readme = README.read_text(encoding="utf-8")
    want = with_table(readme, readme_table(RESULTS.read_text(encoding="utf-8")))
    if args.check:
        if want != readme:
            print("README.md's results table differs from benchmarks/RESULTS.md's index: run "
                  "`python -m benchmarks.readme_table`", file=sys.stderr)
            return 1
        return 0
    if want != readme:
        README.write_text(want, encoding="utf-8")
        print("README.md: results table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
