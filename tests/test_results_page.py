"""The library apart from the lab: benchmarks/RESULTS.md holds current figures only (short, with a one-screen index,
each section linking the note behind it), the lab notebook benchmarks/notes/ holds one dated file per study, and the
README's results table is RESULTS.md's index as `python -m benchmarks.readme_table` writes it."""

from __future__ import annotations

import re

import pytest

from benchmarks.readme_table import MAX_CELL, MAX_ROWS, README, RESULTS, cells, main, readme_table, with_table

NOTES = RESULTS.parent / "notes"
MAX_RESULTS_LINES = 800
MAX_INDEX_LINES = 40
NOTE_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")


def test_readme_table_is_the_results_index():
    readme = README.read_text(encoding="utf-8")
    assert with_table(readme, readme_table(RESULTS.read_text(encoding="utf-8"))) == readme, (
        "README.md's results table differs from benchmarks/RESULTS.md's index: run `python -m benchmarks.readme_table`")
    assert main(["--check"]) == 0  # the command RESULTS.md states, in the mode that writes nothing


def test_readme_table_stays_small():
    rows = readme_table(RESULTS.read_text(encoding="utf-8")).splitlines()[2:]
    assert 0 < len(rows) <= MAX_ROWS
    assert all(len(cell) <= MAX_CELL for row in rows for cell in cells(row))


def test_readme_table_refuses_a_long_table():
    header = "| a | b |\n| --- | --- |\n"
    long_cell = f"<!-- results-table:start -->\n{header}| {'x' * (MAX_CELL + 1)} | y |\n<!-- results-table:end -->"
    with pytest.raises(ValueError, match="characters"):
        readme_table(long_cell)
    many = "".join(f"| [r{i}](#s) | y |\n" for i in range(MAX_ROWS + 1))
    with pytest.raises(ValueError, match="rows"):
        readme_table(f"<!-- results-table:start -->\n{header}{many}<!-- results-table:end -->")
    table = readme_table(f"<!-- results-table:start -->\n{header}| [r](#s) | `a|b` |\n<!-- results-table:end -->")
    assert "(benchmarks/RESULTS.md#s)" in table and cells(table.splitlines()[2]) == ["[r](benchmarks/RESULTS.md#s)",
                                                                                    "`a|b`"]


def test_results_page_is_short_with_a_one_screen_index():
    lines = RESULTS.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_RESULTS_LINES, f"benchmarks/RESULTS.md has {len(lines)} lines; at most "\
        f"{MAX_RESULTS_LINES}: move studies, rules and readings to a dated note in benchmarks/notes/"
    start = lines.index("## Index")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    assert end - start <= MAX_INDEX_LINES, f"RESULTS.md's index has {end - start} lines; at most {MAX_INDEX_LINES}"


def test_every_results_section_links_its_notes():
    text = RESULTS.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    bare = [s.splitlines()[0] for s in sections if s.splitlines()[0] != "Index" and "](notes/" not in s]
    assert not bare, f"RESULTS.md sections that link no note of benchmarks/notes/: {bare}"


def test_notes_are_dated_and_listed():
    notes = sorted(p for p in NOTES.glob("*.md") if p.name != "README.md")
    assert notes, "benchmarks/notes/ holds no note"
    listing = (NOTES / "README.md").read_text(encoding="utf-8")
    for note in notes:
        match = NOTE_NAME.match(note.name)
        assert match, f"{note.name}: name a note YYYY-MM-DD-what-it-studies.md"
        first = note.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(f"# {match.group(1)}"), f"{note.name}: its title opens with its date, `# {match[1]}: `"
        assert f"]({note.name})" in listing, f"benchmarks/notes/README.md does not list {note.name}"


#: Pages rewritten with work in flight elsewhere (the verifier's page goes with the verifier's own changes).
PAGES_PENDING: set[str] = set()
HISTORY = re.compile(r"since 20\d\d|records? \d{3,5}(?:-\d{3,5}| on\b|\+)", re.IGNORECASE)


def test_docs_say_what_the_code_does_without_history():
    root = RESULTS.parents[1]
    pages = [README, *sorted(p for p in (root / "docs").glob("*.md") if p.name not in PAGES_PENDING)]
    hits = [f"{page.relative_to(root)}:{n}: {line.strip()[:100]}" for page in pages
            for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]
    assert not hits, ("dated history or record ranges outside benchmarks/RESULTS.md and the notes (say what the code "
                      "does; the figures live in RESULTS.md):\n" + "\n".join(hits))
    for page in pages[1:]:
        tables = page.read_text(encoding="utf-8").count("## How well it does")
        assert tables <= 1, f"{page.name} has {tables} 'How well it does' sections; keep one, linking RESULTS.md"
